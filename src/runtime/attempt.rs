//! Attempts: started with their Context Manifest in the workflow's current phase and
//! version, dispatch-claimed (revalidating every binding), then finished, failed or
//! cancelled.

use ledger_schema::events::{
    AttemptCancelled, AttemptFailed, AttemptFinished, AttemptStarted, DispatchClaimed, InputClosure,
};
use ledger_schema::manifest::ContextManifest;
use ledger_schema::types::{Binding, Phase, ResultKind, ThreadChoice};
use ledger_schema::{Digest, Event, Id};

use super::command::{CancelAttempt, ClaimDispatch, FailAttempt, FinishAttempt, StartAttempt};
use super::selection::SelectionCurrency;
use super::state::{AttemptState, AttemptStatus, GenerationStatus, State, WorkflowState};
use super::{Rule, RuleViolation, ensure, fresh, get, get_mut, live_workflow, required_text};

/// Everything an Attempt start binds, derived from the state: what the compiler compiles
/// for, and what `apply` checks the recorded manifest against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptBinding {
    pub attempt_id: Id,
    pub workflow_id: Id,
    pub worker_session_id: Id,
    pub thread: ThreadChoice,
    pub goal_id: Id,
    pub goal_revision: u32,
    pub workflow_version: u32,
    pub phase: Phase,
    /// The exact active MUTABLE generation and its base digest (IMPLEMENT only).
    pub generation: Option<(Id, Digest)>,
    pub plan: Option<Binding>,
    pub profile: Binding,
    pub policy: Binding,
    /// The `receiptDigest` of the task selection the context carries (issue #15), checked
    /// by [`super::selection::attempt_material`].
    pub selection: Option<Digest>,
    /// What that selection is held to: the configured profile, or — for a finished
    /// result's currency proof ([`result_binding`]) — the selection as decided.
    pub selection_currency: SelectionCurrency,
}

/// The result kind a phase's response contract allows (`None`: no worker Attempts).
pub fn result_kind_allowed(phase: Phase) -> Option<ResultKind> {
    match phase {
        Phase::Discovery | Phase::Plan => Some(ResultKind::Proposals),
        Phase::Implement => Some(ResultKind::CompletionRequest),
        Phase::EvidenceBuild | Phase::FinalVerify => None,
    }
}

/// Checks that an Attempt may start now and derives what it binds.
pub fn attempt_binding(state: &State, c: &StartAttempt) -> Result<AttemptBinding, RuleViolation> {
    fresh(&state.attempts, c.attempt_id, "attempt")?;
    let wf = live_workflow(state, c.workflow_id)?;
    if let Some(active) = wf.active_attempt {
        // Named, with the way out (outside review 74).
        return Err(super::violation(
            Rule::AttemptActive,
            format!(
                "workflow {} already has an active attempt, {active}: finish, fail or cancel it (`cancelAttempt`) before starting another",
                c.workflow_id
            ),
        ));
    }
    ensure!(
        result_kind_allowed(wf.phase).is_some(),
        Rule::AttemptBinding,
        "no worker attempts in phase {}",
        super::wire(&wf.phase)
    );
    let generation = if wf.phase == Phase::Implement {
        let id = wf.active_generation.ok_or_else(|| {
            super::violation(Rule::CandidateBinding, "IMPLEMENT needs an active Candidate generation")
        })?;
        let g = get(&state.generations, id, "generation")?;
        ensure!(
            g.status == GenerationStatus::Mutable,
            Rule::CandidateBinding,
            "IMPLEMENT needs the active generation MUTABLE; {id} is frozen"
        );
        Some((id, g.base_digest))
    } else {
        None
    };
    check_thread(state, wf, c, generation.map(|g| g.0))?;
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    if let Some(receipt) = c.selection_receipt {
        // Seed 000: "skills ... are disabled for the bounded profile" — a task selection is
        // how skills reach a worker, so the protected profile's Attempts carry none (outside
        // review 95: a selected skill's body was delivered to a protected workflow's worker).
        ensure!(
            wf.plan.is_none(),
            Rule::AttemptSelection,
            "workflow {} runs under the protected (bounded) profile, which disables skills (seed 000): its Attempts carry no task selection",
            c.workflow_id
        );
        super::selection::attempt_material(
            state,
            receipt,
            wf.goal_id,
            goal.revision,
            wf.phase,
            SelectionCurrency::Configured,
        )
        .map_err(|e| super::violation(Rule::AttemptSelection, e.to_string()))?;
    }
    Ok(AttemptBinding {
        attempt_id: c.attempt_id,
        workflow_id: c.workflow_id,
        worker_session_id: c.worker_session_id,
        thread: c.thread,
        goal_id: wf.goal_id,
        goal_revision: goal.revision,
        workflow_version: wf.version,
        phase: wf.phase,
        generation,
        plan: wf.plan,
        profile: wf.profile,
        policy: wf.policy,
        selection: c.selection_receipt,
        selection_currency: SelectionCurrency::Configured,
    })
}

/// What an active, not yet dispatched Attempt binds over the *current* state: the binding
/// its start derived, with today's workflow, goal and Candidate. The admission step
/// recompiles the Attempt's context from it at the dispatch claim (seed: a Context Manifest
/// "is no longer current when any required bound input changes"; the claim "revalidates
/// … all request digests"). `None` when the claim's own rules refuse it anyway (the
/// Attempt ended or was claimed, the workflow moved on or closed, the Goal was revised, the
/// Candidate is no longer the active MUTABLE one): those refusals keep their rules.
pub fn current_binding(state: &State, attempt_id: Id) -> Option<AttemptBinding> {
    binding_now(state, attempt_id, AttemptStatus::Started)
}

/// [`current_binding`] for a *dispatched* Attempt that may still deliver a result: the
/// admission step recompiles its context from it after an input-changing entry
/// ([`input_of`]) and marks it with [`mark_context_changed`] when the manifest differs
/// (seed: "An in-flight worker may finish, but its result is evaluated against the current
/// Attempt and manifest. Stale results cannot advance the workflow."). `None` when the
/// Attempt is not dispatched and active, is already marked, or is stale for an older reason
/// (another version, a revised Goal, a closed workflow): those keep their reasons.
pub fn in_flight_binding(state: &State, attempt_id: Id) -> Option<AttemptBinding> {
    if state.attempts.get(&attempt_id)?.context_changed {
        return None;
    }
    // A dispatched Attempt is an existing session: its task selection keeps the context it
    // was decided over (seed 003: "Existing sessions retain their original context"), so a
    // profile change alone does not change it; its loaded bytes must still be the
    // registry's (outside review 22: a `profile mode` between the claim and the finish
    // threw the delivered result away).
    Some(AttemptBinding {
        selection_currency: SelectionCurrency::AsDecided,
        ..binding_now(state, attempt_id, AttemptStatus::Dispatched)?
    })
}

/// Which dispatched Attempts' Worker Contexts an entry may change (a bound input of the
/// compiler), read over the state before the entry ([`input_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextInput {
    /// A fact, human decision, project source, scenario, obligation or blocker of this Goal:
    /// the Goal's Attempts.
    Goal(Id),
    /// A new source registry or profile revision: the Attempts that carry a task selection
    /// (it may be stale now), and every RESUME (its Thread's may be).
    Selections,
}

/// The dispatched, active Attempts not yet marked that `input` may change, by id (over the
/// state after the entry).
pub fn in_flight(state: &State, input: ContextInput) -> Vec<Id> {
    match input {
        ContextInput::Goal(goal_id) => in_flight_where(state, |wf| wf.goal_id == goal_id, |_| true),
        // A RESUME carries its Thread's selections too, its own or not (outside review 93: a
        // skill an earlier Attempt on the Thread loaded, withdrawn after the RESUME's claim,
        // did not mark it).
        ContextInput::Selections => in_flight_where(
            state,
            |_| true,
            |a| a.selection_receipt.is_some() || a.thread == ThreadChoice::Resume,
        ),
    }
}

/// The active Attempts of the open workflows `wf` accepts that are dispatched, not yet
/// marked, and accepted by `attempt`, by id.
fn in_flight_where(
    state: &State,
    wf: impl Fn(&WorkflowState) -> bool,
    attempt: impl Fn(&AttemptState) -> bool,
) -> Vec<Id> {
    state
        .workflows
        .values()
        .filter(|w| !w.closed && wf(w))
        .filter_map(|w| w.active_attempt)
        .filter(|id| {
            state
                .attempts
                .get(id)
                .is_some_and(|a| a.status == AttemptStatus::Dispatched && !a.context_changed && attempt(a))
        })
        .collect()
}

/// Marks a dispatched Attempt whose context no longer compiles to its manifest (decided by
/// the admission step, which owns the compiler). Marking is final; an unknown id is left
/// alone.
/// The Attempt whose work a freeze of `generation_id` stands on — the latest-started
/// IMPLEMENT Attempt bound to it that finished with a completion request — with its binding
/// as it was while it ran: over a copy of `state` in which it is again the workflow's
/// dispatched, active Attempt, in the phase and version it was bound to, on its generation
/// mutable and active (every bound input as now). Recompiling that binding tells
/// whether the result is still current (seed: "Stale results cannot advance the
/// workflow"). `None` if no such Attempt exists, or the binding is gone for another reason
/// (which the freeze's own rules judge).
pub fn result_binding(state: &State, generation_id: Id) -> Option<(Id, State, AttemptBinding)> {
    let finished = AttemptStatus::Finished { result_kind: ResultKind::CompletionRequest };
    let (attempt_id, _) = state
        .attempts
        .iter()
        .filter(|(_, a)| a.generation_id == Some(generation_id) && a.status == finished)
        .max_by_key(|(_, a)| a.seq)?;
    let attempt_id = *attempt_id;
    let mut as_running = state.clone();
    let attempt = as_running.attempts.get_mut(&attempt_id)?;
    attempt.status = AttemptStatus::Dispatched;
    let (workflow_id, phase, version) = (attempt.workflow_id, attempt.phase, attempt.workflow_version);
    // The workflow as the Attempt was bound to it: its phase and version, open, this
    // generation mutable and active — what the freeze, the phases after it and the decision
    // being judged changed since do not make the result stale by themselves; every bound
    // input (facts, decisions, sources, scenarios, obligations, blockers, selections) is as
    // now.
    let wf = as_running.workflows.get_mut(&workflow_id)?;
    wf.active_attempt = Some(attempt_id);
    wf.phase = phase;
    wf.version = version;
    wf.closed = false;
    wf.active_generation = Some(generation_id);
    as_running.generations.get_mut(&generation_id)?.status = GenerationStatus::Mutable;
    // The task selection as it was decided: a profile change after the result does not
    // make it stale (seed 003 keeps an existing session's context).
    let binding = AttemptBinding {
        selection_currency: SelectionCurrency::AsDecided,
        ..binding_now(&as_running, attempt_id, AttemptStatus::Dispatched)?
    };
    Some((attempt_id, as_running, binding))
}

pub fn mark_context_changed(state: &mut State, attempt_id: Id) {
    if let Some(attempt) = state.attempts.get_mut(&attempt_id) {
        attempt.context_changed = true;
    }
}

/// What Worker Contexts an entry may change ([`ContextInput`]), read over the state before
/// the entry; `None` for every other entry.
pub fn input_of(state: &State, event: &Event) -> Option<ContextInput> {
    use Event as E;
    if matches!(event, E::SourceRegistryRecorded(_) | E::ProfileRevisionRecorded(_)) {
        return Some(ContextInput::Selections);
    }
    let goal = match event {
        E::FactProposed(e) => Some(e.goal_id),
        E::FactConfirmed(e) => state.facts.get(&e.fact_id).map(|f| f.goal_id),
        E::FactInvalidated(e) => state.facts.get(&e.fact_id).map(|f| f.goal_id),
        E::HumanDecisionRecorded(e) => Some(e.goal_id),
        E::ProjectSourceRecorded(e) => Some(e.goal_id),
        E::ProjectSourceWithdrawn(e) => state.sources.get(&e.source_id).map(|s| s.goal_id),
        E::HumanDecisionWithdrawn(e) => state.human_decisions.get(&e.decision_id).map(|d| d.goal_id),
        E::ScenarioRecorded(e) => Some(e.goal_id),
        E::ObligationRecorded(e) => Some(e.goal_id),
        E::ScenarioRetired(e) => state.scenarios.get(&e.scenario_id).map(|s| s.goal_id),
        E::ObligationRetired(e) => state.obligations.get(&e.obligation_id).map(|o| o.goal_id),
        E::BlockerRaised(e) => state.workflows.get(&e.workflow_id).map(|wf| wf.goal_id),
        E::BlockerResolved(e) => state
            .blockers
            .get(&e.blocker_id)
            .and_then(|b| state.workflows.get(&b.workflow_id))
            .map(|wf| wf.goal_id),
        _ => None,
    };
    goal.map(ContextInput::Goal)
}

/// The binding of an active Attempt in `status` over the current state (see
/// [`current_binding`]).
fn binding_now(state: &State, attempt_id: Id, status: AttemptStatus) -> Option<AttemptBinding> {
    let a = state.attempts.get(&attempt_id)?;
    if a.status != status {
        return None;
    }
    let wf = state.workflows.get(&a.workflow_id)?;
    if wf.closed
        || wf.active_attempt != Some(attempt_id)
        || wf.version != a.workflow_version
        || wf.phase != a.phase
    {
        return None;
    }
    let goal = state.goals.get(&wf.goal_id)?;
    if goal.revision != wf.goal_revision {
        return None;
    }
    let generation = match a.generation_id {
        Some(id) => {
            let g = state.generations.get(&id)?;
            if g.status != GenerationStatus::Mutable || wf.active_generation != Some(id) {
                return None;
            }
            Some((id, g.base_digest))
        }
        None => None,
    };
    Some(AttemptBinding {
        attempt_id,
        workflow_id: a.workflow_id,
        worker_session_id: a.worker_session_id,
        thread: a.thread,
        goal_id: wf.goal_id,
        goal_revision: goal.revision,
        workflow_version: wf.version,
        phase: wf.phase,
        generation,
        plan: wf.plan,
        profile: wf.profile,
        policy: wf.policy,
        selection: a.selection_receipt,
        selection_currency: SelectionCurrency::Configured,
    })
}

/// The thread policy (seed: "a fresh Worker Session uses a fresh Thread by default; M2
/// also defaults a new repair generation and a replacement Attempt after restart to a fresh
/// Thread"; "an additional worker Turn or thread/resume requires an exact Runtime directive
/// and the Workflow-bound Execution Profile policy"):
/// - FRESH: a Worker Session no Attempt of this ledger has used;
/// - RESUME: only when the bound profile's policy for this start is RESUME (`repairThread`
///   for the first Attempt on a repair generation, `attemptThread` otherwise), continuing
///   the session of the workflow's previous Attempt that ran (one that ended before its
///   dispatch did not), which must have finished (after a
///   failure, a cancellation or a restart the replacement is FRESH) in the same phase and
///   workflow version (no continuation across a phase boundary, except into the repair
///   generation when `repairThread` is RESUME).
fn check_thread(
    state: &State,
    wf: &WorkflowState,
    c: &StartAttempt,
    generation: Option<Id>,
) -> Result<(), RuleViolation> {
    match c.thread {
        ThreadChoice::Fresh => {
            let used = state.attempts.iter().find(|(_, a)| a.worker_session_id == c.worker_session_id);
            if let Some((attempt, _)) = used {
                return Err(super::violation(
                    Rule::ThreadPolicy,
                    format!(
                        "a FRESH thread needs a new Worker Session; session {} belongs to attempt {attempt}",
                        c.worker_session_id
                    ),
                ));
            }
            Ok(())
        }
        ThreadChoice::Resume => {
            let profile = get(&state.profiles, wf.profile.id, "profile")?;
            // The workflow's previous Attempt that ran: one that ended before its dispatch
            // (cancelled or failed) reached no worker and touched no Thread (outside reviews
            // 47, 49: a RESUME whose claim went stale, cancelled or failed, left the Thread it
            // resumed unresumable).
            let previous = state
                .attempts
                .iter()
                .filter(|(_, a)| a.workflow_id == c.workflow_id && a.dispatched)
                .max_by_key(|(_, a)| a.seq)
                .map(|(id, a)| (*id, a));
            let Some((previous_id, previous)) = previous else {
                return Err(super::violation(
                    Rule::ThreadPolicy,
                    format!(
                        "workflow {} has no previous Attempt whose thread could be resumed",
                        c.workflow_id
                    ),
                ));
            };
            let repair_start = generation.is_some_and(|g| {
                previous.generation_id != Some(g)
                    && state.generations.get(&g).is_some_and(|g| g.repair_id.is_some())
            });
            let (policy, which) = if repair_start {
                (profile.profile.repair_thread, "repairThread")
            } else {
                (profile.profile.attempt_thread, "attemptThread")
            };
            ensure!(
                policy == ThreadChoice::Resume,
                Rule::ThreadPolicy,
                "the bound profile {} has {which} FRESH: RESUME is not allowed",
                wf.profile.id
            );
            ensure!(
                matches!(previous.status, AttemptStatus::Finished { .. }),
                Rule::ThreadPolicy,
                "the previous attempt {previous_id} did not finish ({}): its replacement starts on a FRESH thread",
                status_name(previous.status)
            );
            ensure!(
                repair_start || (previous.phase == wf.phase && previous.workflow_version == wf.version),
                Rule::ThreadPolicy,
                "RESUME does not cross a phase boundary (attempt {previous_id} ran in {} version {})",
                super::wire(&previous.phase),
                previous.workflow_version
            );
            ensure!(
                c.worker_session_id == previous.worker_session_id,
                Rule::ThreadPolicy,
                "RESUME continues the Worker Session {} of attempt {previous_id}, not {}",
                previous.worker_session_id,
                c.worker_session_id
            );
            let withdrawn = withdrawn_since(state, wf.goal_id, previous.workflow_id, previous.seq)
                .or_else(|| thread_selection_withdrawn(state, c.worker_session_id, None));
            if let Some(withdrawn) = withdrawn {
                return Err(super::violation(
                    Rule::ThreadPolicy,
                    format!(
                        "RESUME would continue a Thread whose history holds context since withdrawn ({withdrawn}, \
                         after attempt {previous_id} started): the new package omits it without a word, so the \
                         worker would see both; start on a FRESH thread"
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// What a Thread started at `since` (an Attempt's start) was given from goal `goal` and
/// workflow `workflow` that has been withdrawn from the context since: a Human Decision
/// superseded by a later answer, a CONFIRMED fact invalidated, a project source superseded
/// by a later record of its path, a scenario or obligation retired, a blocker resolved (seed: "a resumed Thread does not make
/// its history authoritative" — continuing it would keep the withdrawn item beside the
/// current context, which omits it without a word; outside reviews 41 and 43).
fn withdrawn_since(state: &State, goal: Id, workflow: Id, since: u64) -> Option<String> {
    let decisions: Vec<(&Id, &super::state::HumanDecisionState)> =
        state.human_decisions.iter().filter(|(_, d)| d.goal_id == goal).collect();
    // A decision withdrawn since (outside review 135) — said first: a later answer to its
    // question is no supersession (outside review 138 F2).
    if let Some((id, _)) =
        decisions.iter().find(|(_, d)| d.seq < since && d.withdrawn_seq.is_some_and(|at| at > since))
    {
        return Some(format!("human decision {id}, withdrawn"));
    }
    for (id, newer) in decisions.iter().filter(|(_, d)| d.seq > since) {
        if let Some((old, _)) = decisions.iter().find(|(_, d)| d.seq < since && d.key == newer.key) {
            return Some(format!("human decision {old}, superseded by {id}"));
        }
    }
    // Any confirmed revision that stood at `since` and was invalidated after it — not only the
    // newest (outside review 205 F1/F3: once a new revision was confirmed, the Thread's
    // invalidated r1 was forgotten, and the message named the current revision).
    let fact = state.facts.iter().filter(|(_, f)| f.goal_id == goal).find_map(|(id, f)| {
        f.withdrawn.iter().find(|w| w.confirmed_seq < since && w.withdrawn_seq > since).map(|w| (id, w))
    });
    if let Some((id, w)) = fact {
        return Some(format!("fact {id} revision {}, invalidated at seq {}", w.revision, w.withdrawn_seq));
    }
    let sources: Vec<(&Id, &super::state::SourceState)> =
        state.sources.iter().filter(|(_, s)| s.goal_id == goal).collect();
    for (id, newer) in sources.iter().filter(|(_, s)| s.seq > since) {
        if let Some((old, _)) = sources.iter().find(|(_, s)| s.seq < since && s.path == newer.path) {
            return Some(format!("project source {old} ({}), superseded by {id}", newer.path));
        }
    }
    // A path withdrawn since (outside review 100).
    if let Some((id, s)) =
        sources.iter().find(|(_, s)| s.seq < since && s.withdrawn_seq.is_some_and(|at| at > since))
    {
        return Some(format!("project source {id} ({}), withdrawn", s.path));
    }
    // A requirement retired since (outside review 67: the resumed Thread held the retired
    // obligation and scenario while the new package omitted them).
    let retired =
        |seq: u64, retired_seq: Option<u64>| seq < since && retired_seq.is_some_and(|at| at > since);
    if let Some((id, _)) =
        state.scenarios.iter().find(|(_, s)| s.goal_id == goal && retired(s.seq, s.retired_seq))
    {
        return Some(format!("scenario {id}, retired"));
    }
    if let Some((id, _)) =
        state.obligations.iter().find(|(_, o)| o.goal_id == goal && retired(o.seq, o.retired_seq))
    {
        return Some(format!("obligation {id}, retired"));
    }
    state
        .blockers
        .iter()
        .find(|(_, b)| {
            b.workflow_id == workflow && b.seq < since && b.resolved_seq.is_some_and(|at| at > since)
        })
        .map(|(id, _)| format!("blocker {id}, resolved"))
}

/// What the Thread a RESUME Attempt continues was given — by any Attempt that ran on it,
/// from the Thread's first start on — that has been withdrawn from the context since
/// (`withdrawn_since`, and a loaded skill withdrawn: `thread_selection_withdrawn`);
/// `None` for a FRESH Attempt. Checked at a RESUME's dispatch claim, for a dispatched RESUME
/// after every entry that may change its context, and at its result's freeze and ACCEPT
/// (outside review 90: an item the Attempt's own package left out over its budget but an
/// earlier Attempt on the Thread was given, withdrawn between the start and the claim,
/// passed the claim, the result, the freeze and the ACCEPT).
pub fn thread_history_withdrawn(state: &State, attempt_id: Id) -> Option<String> {
    let attempt = state.attempts.get(&attempt_id)?;
    if attempt.thread != ThreadChoice::Resume {
        return None;
    }
    let session = attempt.worker_session_id;
    let started = state
        .attempts
        .iter()
        .filter(|(id, a)| **id != attempt_id && a.worker_session_id == session)
        .map(|(_, a)| a.seq)
        .min()?;
    let goal = state.workflows.get(&attempt.workflow_id)?.goal_id;
    withdrawn_since(state, goal, attempt.workflow_id, started)
        .or_else(|| thread_selection_withdrawn(state, session, Some(attempt_id)))
}

/// What of the task selection `receipt` (the skills a resumed Thread was given) has been
/// withdrawn since: a selected skill now excluded by the configured profile or no longer
/// selectable by the selection's own rules over the newest registry, or a loaded
/// resource no longer in the registry with the bytes it loaded (outside review 47: a
/// RESUME after `profile set --exclude` left the excluded skill's instructions in the
/// Thread while the new manifest showed no skill). A selection that was current when the
/// Attempt started held no excluded skill, so an exclusion now is one made since. A
/// profile change that withdraws nothing (a mode, another plan) does not refuse it: seed
/// 003 keeps an existing session's context.
fn thread_selection_withdrawn(state: &State, session: Id, except: Option<Id>) -> Option<String> {
    // Every Attempt that ran on the Thread left its task selection in it, not only the one
    // resumed (outside review 49: A1 loaded the skill, A2 resumed with none, the skill was
    // excluded, and A3 resumed A2).
    state
        .attempts
        .iter()
        .filter(|(id, a)| a.worker_session_id == session && a.dispatched && Some(**id) != except)
        .find_map(|(_, a)| selection_withdrawn(state, a.selection_receipt))
}

fn selection_withdrawn(state: &State, receipt: Option<Digest>) -> Option<String> {
    let receipt = receipt?;
    let s = state.selections.by_receipt.get(&receipt)?;
    let profiles = &state.context_profiles;
    if let Some(id) =
        profiles.current().and_then(|c| s.selected_ids.iter().find(|id| c.selection.exclude.contains(id)))
    {
        return Some(format!("skill {id} of task selection {receipt}, excluded from the profile since"));
    }
    let registry = profiles.registry.as_deref()?;
    // The selection's own walk over the newest registry and the configured exclusions: a
    // skill it selected that has since become never selectable (authority-bearing,
    // dynamic), manual-only where it was not explicit, or whose dependencies can no longer
    // be loaded is withdrawn as an exclusion is (outside review 85: a rescan that made a
    // loaded skill authority-bearing, without a byte of what it loaded changing, left
    // RESUME admitted).
    if let Some(current) = profiles.current() {
        let sources = registry.sources.iter().map(|x| (x.id.as_str(), x)).collect();
        let exclude = &current.selection.exclude;
        // And, for a selection that loaded, its load (outside review 86: a dependency added
        // that could not be loaded left RESUME admitted).
        let walked = super::selection::closure_over(
            &sources,
            &|id| exclude.iter().any(|x| x == id),
            &|id| s.explicit_ids.iter().any(|x| x == id),
            &s.selected_ids,
            super::selection::MAX_CLOSURE,
        )
        .and_then(|ids| match s.resources.is_empty() {
            true => Ok(()),
            false => super::selection::load(registry, &ids).map(drop),
        });
        if let Err(why) = walked {
            return Some(format!("task selection {receipt} could no longer be made: {why}"));
        }
    }
    s.resources
        .iter()
        .find(|r| {
            !registry.sources.iter().any(|source| {
                source.id == r.id && source.resources.iter().any(|x| x.path == r.path && x.digest == r.digest)
            })
        })
        .map(|r| {
            format!(
                "resource {} of skill {} (task selection {receipt}), changed in the registry",
                r.path, r.id
            )
        })
}

/// How an Attempt status reads in a message (no Rust `Debug`).
pub fn status_name(status: AttemptStatus) -> String {
    match status {
        AttemptStatus::Started => "started".to_owned(),
        AttemptStatus::Dispatched => "dispatched".to_owned(),
        AttemptStatus::Finished { result_kind } => format!("finished with {}", super::wire(&result_kind)),
        AttemptStatus::Failed => "failed".to_owned(),
        AttemptStatus::Cancelled { interrupted: true } => "cancelled after dispatch (interrupted)".to_owned(),
        AttemptStatus::Cancelled { interrupted: false } => "cancelled before dispatch".to_owned(),
    }
}

/// The manifest binds exactly the identities the state derives.
fn check_manifest(b: &AttemptBinding, e: &AttemptStarted) -> Result<(), RuleViolation> {
    let m: &ContextManifest = &e.manifest;
    let checks = [
        ("phase", e.phase == b.phase && m.phase == b.phase),
        (
            "workflow version",
            e.workflow_version == b.workflow_version && m.workflow_version == b.workflow_version,
        ),
        ("attempt", m.attempt_id == b.attempt_id),
        ("workflow", m.workflow_id == b.workflow_id),
        ("goal", m.goal_id == b.goal_id && m.goal_revision == b.goal_revision),
        ("generation", e.generation_id == b.generation.map(|g| g.0) && m.generation_id == e.generation_id),
        ("candidate digest", m.candidate_digest == b.generation.map(|g| g.1)),
        ("plan pair", m.plan == b.plan),
        ("profile", m.profile == b.profile),
        ("policy", m.policy == b.policy),
        ("selection", e.selection_receipt == b.selection && m.selection_receipt == b.selection),
    ];
    for (what, ok) in checks {
        ensure!(
            ok,
            Rule::ManifestBinding,
            "attempt {}: the manifest's {what} binding is not the state's",
            b.attempt_id
        );
    }
    Ok(())
}

/// A start naming the Attempt it replaces (`restartAttempt`): that Attempt is of the same
/// workflow and version, cancelled, replaced by no other, and the replacement runs on a
/// FRESH thread with the replaced Attempt's task selection — what `restartAttempt` writes,
/// so the link cannot be claimed by an unrelated start.
fn replacement_holds(state: &State, e: &AttemptStarted, replaced: Id, seq: u64) -> Result<(), RuleViolation> {
    let r = get(&state.attempts, replaced, "replaced attempt")?;
    // Right after the cancellation (outside review 75: a start in a later frame could claim
    // the link).
    let holds = r.cancelled_seq.is_some_and(|at| at.checked_add(1) == Some(seq))
        && r.workflow_id == e.workflow_id
        && r.workflow_version == e.workflow_version
        && matches!(r.status, AttemptStatus::Cancelled { .. })
        && e.thread == ThreadChoice::Fresh
        && r.selection_receipt == e.selection_receipt
        && !state.attempts.values().any(|a| a.replaces == Some(replaced));
    ensure!(
        holds,
        Rule::AttemptActive,
        "attempt {} names {replaced} as the attempt it replaces, but a replacement is a FRESH start right after that attempt's cancellation, in its workflow and version, with its task selection, and only one",
        e.attempt_id
    );
    Ok(())
}

pub fn apply_started(state: &mut State, e: &AttemptStarted, seq: u64) -> Result<(), RuleViolation> {
    let start = StartAttempt {
        attempt_id: e.attempt_id,
        workflow_id: e.workflow_id,
        worker_session_id: e.worker_session_id,
        thread: e.thread,
        selection_receipt: e.selection_receipt,
    };
    let binding = attempt_binding(state, &start)?;
    if binding.phase == Phase::Implement {
        ensure!(e.generation_id.is_some(), Rule::CandidateBinding, "IMPLEMENT names the active generation");
    } else {
        ensure!(
            e.generation_id.is_none(),
            Rule::CandidateBinding,
            "{} carries no Candidate",
            super::wire(&binding.phase)
        );
    }
    check_manifest(&binding, e)?;
    // A repair dispatch's worker learns why the bytes failed only from the feedback
    // projection (seed: the compiler MUST render "a bounded feedback projection"; "Runtime
    // MUST NOT ask the Worker to infer the previous failure"): a context that left it out —
    // a phase policy excluding WORKING, a WORKING budget it does not fit, feedback limits
    // that drop every item — is refused (outside review 60).
    let kind = |k: &str| e.manifest.entries.iter().any(|m| m.kind == k);
    ensure!(
        !kind("repairDecision") || kind("priorAttemptFeedback"),
        Rule::RepairFeedback,
        "attempt {}: a repair dispatch's context must carry its failure feedback, and this one left it out ({}): the policy's {} phase must allow WORKING with room for it",
        e.attempt_id,
        e.manifest
            .omission_decisions
            .iter()
            .find(|o| o.source_ref.ends_with("/feedback"))
            .map_or("its feedback limits dropped every item", |o| o.rule.as_str()),
        super::wire(&binding.phase)
    );
    let digest = e.manifest.digest();
    ensure!(
        e.manifest_digest == digest,
        Rule::ManifestBinding,
        "manifest digest {} is not the manifest's {digest}",
        e.manifest_digest
    );
    if let Some(replaced) = e.replaces {
        replacement_holds(state, e, replaced, seq)?;
    }
    state.attempts.insert(
        e.attempt_id,
        AttemptState {
            workflow_id: e.workflow_id,
            workflow_version: e.workflow_version,
            phase: e.phase,
            thread: e.thread,
            compacting: false,
            generation_id: e.generation_id,
            worker_session_id: e.worker_session_id,
            manifest_digest: digest,
            compiler_version: e.manifest.compiler_version.clone(),
            package_digest: e.manifest.package_digest,
            status: AttemptStatus::Started,
            dispatched: false,
            seq,
            events_admitted: 0,
            context_changed: false,
            result_delivered: false,
            selection_receipt: e.selection_receipt,
            replaces: e.replaces,
            cancelled_seq: None,
            compaction_directive: None,
        },
    );
    if let Some(wf) = state.workflows.get_mut(&e.workflow_id) {
        wf.active_attempt = Some(e.attempt_id);
        wf.last_attempt = Some(e.attempt_id);
    }
    Ok(())
}

pub fn decide_claim(c: &ClaimDispatch) -> Event {
    Event::DispatchClaimed(DispatchClaimed {
        attempt_id: c.attempt_id,
        workflow_version: c.workflow_version,
        profile: c.profile,
        manifest_digest: c.manifest_digest,
        package_digest: c.package_digest,
        plan: c.plan,
        reported_inputs: c.reported_inputs.clone(),
    })
}

/// Seed 000, "M2 App Server input closure": "An unknown source, an unbound tool, a widened
/// permission, or a changed configuration digest blocks dispatch." Under a profile that binds
/// an input closure, the claim must report what the App Server loaded, and every reported
/// instruction source and tool must be bound with the same digest, the permission profile,
/// configuration and managed requirements equal to the bound ones; a profile that binds none
/// takes no report (nothing could be checked against it).
fn input_closure_holds(
    attempt: Id,
    bound: Option<&InputClosure>,
    reported: Option<&InputClosure>,
) -> Result<(), RuleViolation> {
    let refuse = |why: String| {
        Err(super::violation(
            Rule::InputClosure,
            format!("dispatch claim for {attempt}: {why}; dispatch is blocked"),
        ))
    };
    let (bound, reported) = match (bound, reported) {
        (None, None) => return Ok(()),
        (None, Some(_)) => {
            return refuse(
                "the bound profile binds no App Server input closure, so a reported one cannot be checked (install a profile that binds it)"
                    .into(),
            );
        }
        (Some(_), None) => {
            return refuse(
                "the bound profile binds an App Server input closure: the claim must report the App Server's effective inputs (reportedInputs)"
                    .into(),
            );
        }
        (Some(b), Some(r)) => (b, r),
    };
    super::authority::check_closure("the reported", reported)?;
    for (what, bound_list, reported_list) in [
        ("instruction source", &bound.instruction_sources, &reported.instruction_sources),
        ("tool", &bound.tools, &reported.tools),
    ] {
        for r in reported_list {
            match bound_list.iter().find(|b| b.name == r.name) {
                None => return refuse(format!("the App Server reports the unbound {what} {:?}", r.name)),
                Some(b) if b.digest != r.digest => {
                    return refuse(format!(
                        "{what} {:?} is {}, the profile binds {}",
                        r.name, r.digest, b.digest
                    ));
                }
                Some(_) => {}
            }
        }
    }
    let settings = [
        ("permission profile", Some(reported.permission_digest), Some(bound.permission_digest)),
        ("configuration", Some(reported.config_digest), Some(bound.config_digest)),
        ("managed requirements", reported.managed_requirements_digest, bound.managed_requirements_digest),
    ];
    for (what, r, b) in settings {
        if r != b {
            let shown = |d: Option<Digest>| d.map_or_else(|| "none".to_owned(), |d| d.to_string());
            return refuse(format!("the {what} digest is {}, the profile binds {}", shown(r), shown(b)));
        }
    }
    Ok(())
}

pub fn apply_dispatch(state: &mut State, e: &DispatchClaimed) -> Result<(), RuleViolation> {
    let attempt = get(&state.attempts, e.attempt_id, "attempt")?;
    match attempt.status {
        AttemptStatus::Started => {}
        AttemptStatus::Cancelled { .. } => {
            return Err(super::violation(
                Rule::DispatchClaim,
                format!("attempt {} was cancelled before its dispatch claim", e.attempt_id),
            ));
        }
        AttemptStatus::Dispatched => {
            return Err(super::violation(
                Rule::DispatchClaim,
                format!("attempt {} is already claimed", e.attempt_id),
            ));
        }
        _ => {
            return Err(super::violation(
                Rule::AttemptNotActive,
                format!("attempt {} has ended", e.attempt_id),
            ));
        }
    }
    let wf = live_workflow(state, attempt.workflow_id)?;
    ensure!(
        e.workflow_version == wf.version && attempt.workflow_version == wf.version,
        Rule::StaleWorkflowVersion,
        "claim for workflow version {}, the workflow is at {}",
        e.workflow_version,
        wf.version
    );
    let checks = [
        ("profile", e.profile == wf.profile),
        ("manifest digest", e.manifest_digest == attempt.manifest_digest),
        ("package digest", e.package_digest == attempt.package_digest),
        ("plan pair", e.plan == wf.plan),
    ];
    for (what, ok) in checks {
        // (A plan pair missing or not bound is said so: outside review 243 F3, "does not
        // match" for a claim that carried none.)
        let how = match (what, &e.plan, &wf.plan) {
            ("plan pair", None, Some(_)) => "is missing (the workflow's protected profile binds one)",
            ("plan pair", Some(_), None) => {
                "is one the workflow does not bind (its profile is not protected)"
            }
            _ => "does not match",
        };
        ensure!(ok, Rule::DispatchClaim, "dispatch claim for {}: the {what} {how}", e.attempt_id);
    }
    let bound = get(&state.profiles, wf.profile.id, "profile")?.profile.input_closure.as_ref();
    input_closure_holds(e.attempt_id, bound, e.reported_inputs.as_ref())?;
    // A RESUME claims a Thread whose history holds what earlier Attempts were given: a skill
    // withdrawn since its start is not in this Attempt's package, so the claim's currency
    // proof cannot see it (outside review 49: the RESUME was dispatched after the exclusion).
    if let Some(withdrawn) = thread_history_withdrawn(state, e.attempt_id) {
        return Err(super::violation(
            Rule::ThreadPolicy,
            format!(
                "attempt {} would continue a Thread whose history holds context since withdrawn ({withdrawn}): \
                 cancel it and start on a FRESH thread",
                e.attempt_id
            ),
        ));
    }
    let attempt = get_mut(&mut state.attempts, e.attempt_id, "attempt")?;
    attempt.status = AttemptStatus::Dispatched;
    attempt.dispatched = true;
    Ok(())
}

pub fn decide_finish(c: &FinishAttempt) -> Event {
    Event::AttemptFinished(AttemptFinished {
        attempt_id: c.attempt_id,
        result_kind: c.result_kind,
        summary: c.summary.clone(),
    })
}

pub fn decide_fail(c: &FailAttempt) -> Event {
    Event::AttemptFailed(AttemptFailed { attempt_id: c.attempt_id, reason: c.reason.clone() })
}

pub fn decide_cancel(c: &CancelAttempt) -> Event {
    Event::AttemptCancelled(AttemptCancelled {
        attempt_id: c.attempt_id,
        workflow_version: c.workflow_version,
        reason: c.reason.clone(),
    })
}

/// Attempts started by the builds before terminal stream accounting (`TerminalEvent`)
/// record these compiler versions; their finishes keep the older rule, so every ledger
/// those builds wrote still replays. Every Attempt started since (compiler/3 and later)
/// needs its terminal Worker event.
const PRE_TERMINAL_ACCOUNTING: [&str; 2] = ["closure-ledger-compiler/1", "closure-ledger-compiler/2"];

/// Ends an active Attempt with `status`.
fn end(state: &mut State, attempt_id: Id, status: AttemptStatus) -> Result<(), RuleViolation> {
    let attempt = get_mut(&mut state.attempts, attempt_id, "attempt")?;
    attempt.status = status;
    let workflow_id = attempt.workflow_id;
    if let Some(wf) = state.workflows.get_mut(&workflow_id) {
        wf.active_attempt = None;
    }
    Ok(())
}

fn active(state: &State, attempt_id: Id) -> Result<&AttemptState, RuleViolation> {
    let attempt = get(&state.attempts, attempt_id, "attempt")?;
    ensure!(
        attempt.status.is_active(),
        Rule::AttemptNotActive,
        "attempt {attempt_id} has ended ({})",
        status_name(attempt.status)
    );
    Ok(attempt)
}

pub fn apply_finished(state: &mut State, e: &AttemptFinished) -> Result<(), RuleViolation> {
    required_text("summary", &e.summary)?;
    let attempt = active(state, e.attempt_id)?;
    ensure!(
        attempt.status == AttemptStatus::Dispatched,
        Rule::NotDispatched,
        "attempt {} was never dispatched",
        e.attempt_id
    );
    let allowed = result_kind_allowed(attempt.phase);
    ensure!(
        allowed == Some(e.result_kind),
        Rule::ResultKind,
        "phase {} allows {}, not {}",
        super::wire(&attempt.phase),
        allowed.map_or_else(|| "no result".to_owned(), |k| super::wire(&k)),
        super::wire(&e.result_kind)
    );
    // Nothing bound to a superseded Goal revision (or a closed workflow) advances it.
    let wf = live_workflow(state, attempt.workflow_id)?;
    ensure!(
        wf.version == attempt.workflow_version,
        Rule::StaleWorkflowVersion,
        "a stale result cannot advance workflow {}",
        attempt.workflow_id
    );
    ensure!(
        !attempt.context_changed,
        Rule::ManifestStale,
        "attempt {}: a bound input of its context changed after dispatch; its result cannot advance workflow {} (fail or cancel it and start a new Attempt)",
        e.attempt_id,
        attempt.workflow_id
    );
    ensure!(
        attempt.result_delivered || PRE_TERMINAL_ACCOUNTING.contains(&attempt.compiler_version.as_str()),
        Rule::TerminalEvent,
        "attempt {}: no {} Worker event was admitted for it; a result needs the worker's own terminal event (deliver it, or fail the Attempt)",
        e.attempt_id,
        super::wire(&e.result_kind)
    );
    end(state, e.attempt_id, AttemptStatus::Finished { result_kind: e.result_kind })
}

pub fn apply_failed(state: &mut State, e: &AttemptFailed) -> Result<(), RuleViolation> {
    required_text("reason", &e.reason)?;
    active(state, e.attempt_id)?;
    end(state, e.attempt_id, AttemptStatus::Failed)
}

pub fn apply_cancelled(state: &mut State, e: &AttemptCancelled, seq: u64) -> Result<(), RuleViolation> {
    required_text("reason", &e.reason)?;
    let attempt = active(state, e.attempt_id)?;
    let wf = get(&state.workflows, attempt.workflow_id, "workflow")?;
    ensure!(
        e.workflow_version == wf.version,
        Rule::StaleWorkflowVersion,
        "cancel for workflow version {}, the workflow is at {}",
        e.workflow_version,
        wf.version
    );
    let interrupted = attempt.status == AttemptStatus::Dispatched;
    end(state, e.attempt_id, AttemptStatus::Cancelled { interrupted })?;
    if let Some(a) = state.attempts.get_mut(&e.attempt_id) {
        a.cancelled_seq = Some(seq);
    }
    Ok(())
}
