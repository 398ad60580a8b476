//! The one admission step, composed above the runtime and the compiler and used by the
//! live path and by replay alike: the rules of `runtime::apply`, then — for an Attempt
//! start — the manifest proof: the recorded manifest must be exactly what the compiler it
//! names (`compilerVersion`, looked up in the registry) derives from the state before the
//! Attempt. A new Attempt is compiled by the registry's newest compiler.
//!
//! `apply`, `decide` and `recompile` use the released registry ([`compiler::RELEASED`]);
//! the `_with` forms take another (tests that prove the dispatch).

use ledger_schema::events::AttemptStarted;
use ledger_schema::{Entry, Event};

use crate::compiler::{self, CompileError, Compiled, Registry};
use crate::runtime::command::StartAttempt;
use crate::runtime::{self, Command, Decided, Rejection, RuleViolation, State};

/// Why a command or an entry was refused: live, nothing was written and the state is
/// unchanged; in a replay, the ledger fails verification at that entry. The one refusal
/// type an embedder matches on (`EngineError::Refused`, `SubmitError::Refused`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A rule of the runtime ([`runtime::Rule`], listed in docs/rules.md).
    #[error("rule {0}")]
    Rule(#[from] RuleViolation),
    /// A Worker event id already recorded for another Attempt or with another payload
    /// (`differs` says which, in words).
    #[error("worker event {worker_event_id} was already recorded at seq {original_seq} {differs}")]
    Conflict { worker_event_id: ledger_schema::Id, original_seq: u64, differs: &'static str },
    /// A new Attempt's context cannot be compiled (an Attempt start, or a restart's
    /// replacement).
    #[error("cannot compile the context: {0}")]
    Compile(#[source] CompileError),
    /// A recorded Attempt start whose context no longer compiles (replay).
    #[error("attempt {attempt}: the context cannot be recompiled: {error}")]
    Uncompilable {
        attempt: ledger_schema::Id,
        #[source]
        error: CompileError,
    },
    #[error(
        "attempt {attempt}: its manifest records compiler version {}, which this build does not have (it has {})",
        clip(.version),
        .known.join(", ")
    )]
    UnknownCompilerVersion {
        attempt: ledger_schema::Id,
        /// The recorded `compilerVersion`, exactly as written.
        version: String,
        /// The versions this build has, newest first.
        known: Vec<&'static str>,
    },
    /// An Attempt start recording a compiler older than one an earlier start records:
    /// versions never go back along a ledger (a build compiles with its newest), and an
    /// older version keeps older rules (outside review 23: a forged start naming
    /// compiler/2 escaped the terminal-event rule).
    #[error(
        "attempt {attempt}: its manifest records compiler version {}, older than {newer}, which an earlier Attempt of this ledger records (compiler versions never go back)",
        clip(.version)
    )]
    CompilerDowngrade { attempt: ledger_schema::Id, version: String, newer: &'static str },
    /// A recorded manifest that is not what its compiler derives.
    #[error("{0}")]
    ManifestMismatch(Box<ManifestMismatch>),
    /// Events that do not fit one frame (or none at all).
    #[error("{0}")]
    Frame(#[source] crate::store::FrameError),
}

impl From<Rejection> for Refusal {
    fn from(r: Rejection) -> Refusal {
        match r {
            Rejection::Rule(v) => Refusal::Rule(v),
            Rejection::Conflict { worker_event_id, original_seq, differs } => {
                Refusal::Conflict { worker_event_id, original_seq, differs }
            }
        }
    }
}

impl Refusal {
    /// The rule refused, when a rule did.
    pub fn rule(&self) -> Option<runtime::Rule> {
        match self {
            Refusal::Rule(v) => Some(v.rule),
            _ => None,
        }
    }
}

/// A recorded manifest that is not the compiled one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "attempt {attempt}: the recorded manifest (digest field {recorded}, body hashing to {recorded_body}) is not the compiled one {compiled}"
)]
pub struct ManifestMismatch {
    pub attempt: ledger_schema::Id,
    /// The recorded `manifestDigest` field.
    pub recorded: ledger_schema::Digest,
    /// The digest of the recorded manifest body (differs from `recorded` when the body was
    /// changed without its digest field).
    pub recorded_body: ledger_schema::Digest,
    pub compiled: ledger_schema::Digest,
}

/// A recorded version as the error shows it: quoted and escaped (one line whatever it
/// holds), and at most 128 characters of it.
fn clip(version: &str) -> String {
    const MAX_CHARS: usize = 64;
    match version.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{:?}… ({} bytes)", version.get(..end).unwrap_or_default(), version.len()),
        None => format!("{version:?}"),
    }
}

/// Recompiles the context an `attemptStarted` records, over the state before it, with
/// the released compiler its manifest names.
pub fn recompile(state: &State, e: &AttemptStarted) -> Result<Compiled, Refusal> {
    recompile_with(&compiler::RELEASED, state, e)
}

/// Recompiles the context an `attemptStarted` records, over the state before it, with
/// the compiler of `registry` its manifest names; a version the registry lacks is
/// [`Refusal::UnknownCompilerVersion`].
pub fn recompile_with(
    registry: &Registry<'_>,
    state: &State,
    e: &AttemptStarted,
) -> Result<Compiled, Refusal> {
    let start = StartAttempt {
        attempt_id: e.attempt_id,
        workflow_id: e.workflow_id,
        worker_session_id: e.worker_session_id,
        thread: e.thread,
        selection_receipt: e.selection_receipt,
    };
    let binding = runtime::attempt_binding(state, &start)?;
    compile_as(registry, state, &binding, &e.manifest.compiler_version)?
        .map_err(|error| Refusal::Uncompilable { attempt: e.attempt_id, error })
}

/// The compiler version `e` records, if it is not older (in `registry`'s order) than the
/// newest an earlier Attempt start of the ledger records; `None` for a version the registry
/// lacks, which [`recompile_with`] refuses by name.
fn compiler_not_older(
    registry: &Registry<'_>,
    state: &State,
    e: &AttemptStarted,
) -> Result<Option<&'static str>, Refusal> {
    let Some(compiler) = registry.for_version(&e.manifest.compiler_version) else { return Ok(None) };
    let at = registry.rank(compiler.version());
    if let Some(newer) =
        state.compiler_floor.filter(|floor| registry.rank(floor).zip(at).is_some_and(|(f, a)| f < a))
    {
        return Err(Refusal::CompilerDowngrade {
            attempt: e.attempt_id,
            version: e.manifest.compiler_version.clone(),
            newer,
        });
    }
    Ok(Some(compiler.version()))
}

/// The one "binding + compile" step of every manifest proof (an Attempt start, a dispatch
/// claim, an input change after dispatch): the compiler of `registry` that records
/// `version` compiles `binding` over `state`. A version the registry lacks is refused by
/// name (the outer error); a context that does not compile is the inner one.
fn compile_as(
    registry: &Registry<'_>,
    state: &State,
    binding: &runtime::AttemptBinding,
    version: &str,
) -> Result<Result<Compiled, CompileError>, Refusal> {
    let compiler = registry.for_version(version).ok_or_else(|| Refusal::UnknownCompilerVersion {
        attempt: binding.attempt_id,
        version: version.to_owned(),
        known: registry.versions(),
    })?;
    Ok(compiler.compile(state, binding))
}

/// Admits one entry: the manifest proof for an Attempt start, then every rule.
pub fn apply(state: &mut State, entry: &Entry) -> Result<(), Refusal> {
    apply_with(&compiler::RELEASED, state, entry)
}

/// [`apply`], with an Attempt start's manifest re-derived by the compiler of `registry`
/// it names.
pub fn apply_with(registry: &Registry<'_>, state: &mut State, entry: &Entry) -> Result<(), Refusal> {
    let mut started_on = None;
    if let Event::AttemptStarted(e) = &entry.event {
        started_on = compiler_not_older(registry, state, e)?;
        let compiled = recompile_with(registry, state, e)?;
        if compiled.manifest != e.manifest || compiled.manifest_digest() != e.manifest_digest {
            return Err(Refusal::ManifestMismatch(Box::new(ManifestMismatch {
                attempt: e.attempt_id,
                recorded: e.manifest_digest,
                recorded_body: e.manifest.digest(),
                compiled: compiled.manifest_digest(),
            })));
        }
    }
    if let Event::DispatchClaimed(e) = &entry.event {
        check_current(registry, state, e.attempt_id)?;
    }
    // A decision admitted after an Attempt start of compiler/4 or later was written by a
    // build that binds the profile and plan pair in every decision (the legacy form without
    // them is only older builds'; outside review 25).
    if let Event::AcceptanceDecided(e) = &entry.event
        && e.input_manifest.profile.is_none()
        && let Some(floor) = state.compiler_floor
        && registry.rank(floor).zip(registry.rank(compiler::v4::VERSION)).is_some_and(|(f, four)| f <= four)
    {
        return Err(Refusal::Rule(runtime::violation(
            runtime::Rule::InputManifest,
            format!(
                "the input manifest must bind the workflow's profile and plan pair: this ledger's Attempts are compiled by {floor}, whose builds bind them in every decision"
            ),
        )));
    }
    let stands_on_a_result = match &entry.event {
        Event::GenerationFrozen(e) => Some((e.generation_id, ResultUse::Freeze)),
        Event::AcceptanceDecided(e) if e.verdict == ledger_schema::types::Verdict::Accept => {
            Some((e.generation_id, ResultUse::Accept))
        }
        _ => None,
    };
    if let Some((generation_id, used)) = stands_on_a_result {
        // Every rule of the entry first, on a copy (an O(1) clone): a closed workflow or an
        // open blocker is the more specific refusal. Then the currency of the result it
        // stands on, over the state before it; the entry changes no Worker Context.
        let mut after = state.clone();
        runtime::apply(&mut after, entry)?;
        check_result_current(registry, state, generation_id, used)?;
        *state = after;
        return Ok(());
    }
    // The contexts the entry may change, read before it is applied (every record it names
    // exists already, else the rules refuse it).
    let input = runtime::input_of(state, &entry.event);
    if let Event::AcceptanceDecided(d) = &entry.event
        && d.verdict == ledger_schema::types::Verdict::RejectRepairable
    {
        // The rules on a copy (an O(1) clone), the dry run over it, then the copy is the
        // state: the entry is applied once.
        let mut after = state.clone();
        runtime::apply(&mut after, entry)?;
        if let Some(why) = repair_would_not_start(registry, &after, d) {
            return Err(Refusal::Rule(runtime::violation(
                runtime::Rule::OutOfBounds,
                format!(
                    "a repair of generation {} could never start: {why} — each failing check adds its record to the repair's context, whole; record REJECT_TERMINAL, or cancel the workflow and run it under a policy that gives that class more room",
                    d.generation_id
                ),
            )));
        }
        *state = after;
    } else {
        runtime::apply(state, entry)?;
    }
    if started_on.is_some() {
        state.compiler_floor = started_on;
    }
    if let Some(input) = input {
        let attempts = runtime::in_flight(state, input);
        mark_changed_contexts(registry, state, attempts);
    }
    Ok(())
}

/// Whether the repair a REJECT_REPAIRABLE decision `d` (applied in `state`) opens could not
/// start for want of room in its context: the path is run on a copy — the repair record,
/// IMPLEMENT, the repair child's start, compiled by the newest compiler of `registry` — and
/// `Some` names the compiler's refusal of a required class over its budget (outside review
/// 75: the repair context's IDENTITY entries grow with each failing check). Checked at the
/// decision, not at the FAIL it stands on: a failure is always recorded — refused, it left
/// ACCEPT standing on an earlier pass of the same check (outside review 81). `None` where
/// the path is refused for any other reason here (the real commands would meet that
/// refusal themselves) or the start compiles.
fn repair_would_not_start(
    registry: &Registry<'_>,
    state: &State,
    d: &ledger_schema::events::AcceptanceDecided,
) -> Option<String> {
    use ledger_schema::types::{Phase, ThreadChoice};
    use runtime::command::{AdvancePhase, RecordRepair};
    let mut s = state.clone();
    // Ids no record holds (the dry run's own, never written).
    let mut next = u128::MAX;
    let mut fresh = |s: &State| loop {
        let id = ledger_schema::Id(next);
        next -= 1;
        if !s.attempts.contains_key(&id)
            && !s.generations.contains_key(&id)
            && !s.decisions.contains_key(&id)
            && !s.repairs.contains_key(&id)
            && !s.evidence.contains_key(&id)
            && !s.worker_events.contains_key(&id)
        {
            return id;
        }
    };
    let run = |s: &mut State, c: Command| -> Option<Vec<Event>> {
        let Ok(Decided::Events(events)) = decide_with(registry, s, &c) else { return None };
        for event in &events {
            runtime::fold_pending(s, event).ok()?;
        }
        Some(events)
    };
    let goal = s.workflows.get(&d.workflow_id).and_then(|w| s.goals.get(&w.goal_id))?;
    let repair = RecordRepair {
        repair_id: fresh(&s),
        decision_id: d.decision_id,
        decision_digest: d.decision_digest,
        input_manifest_digest: d.input_manifest_digest,
        evidence_set_digest: d.evidence_set_digest,
        child_generation_id: fresh(&s),
        constraints_to_preserve: goal.content.preservation_constraints.clone(),
    };
    run(&mut s, Command::RecordRepair(repair))?;
    let version = s.workflows.get(&d.workflow_id)?.version;
    run(
        &mut s,
        Command::AdvancePhase(AdvancePhase {
            workflow_id: d.workflow_id,
            phase: Phase::Implement,
            version: version + 1,
        }),
    )?;
    let start = StartAttempt {
        attempt_id: fresh(&s),
        workflow_id: d.workflow_id,
        worker_session_id: fresh(&s),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    };
    // Only the classes a failure grows — IDENTITY (the repair context and its failed-evidence
    // entries) and WORKING (the feedback) — refuse the record: another class over its budget
    // (a large open blocker) is the state of the moment, which the repair's own start meets
    // and names (outside review 76).
    match compile_start_with(registry, &s, &start) {
        // Compiled, its start must also be sealable: a goal's contexts grow with what they
        // record as omissions (outside review 156 F2: REJECT_REPAIRABLE was admitted, and the
        // repair's start then refused as an entry over the bound). (An estimate of the
        // entry's own fields beside the event: a kilobyte.)
        Ok((binding, compiled)) => Some(ledger_schema::codec::encoded_len(&started(&start, &binding, compiled)))
            .filter(|len| len.saturating_add(1024) > ledger_schema::codec::MAX_ENTRY_BYTES)
            .map(|len| {
                format!(
                    "its start entry would be {len} bytes, over the {} bytes an entry may hold (the manifest lists every omission of the goal's context)",
                    ledger_schema::codec::MAX_ENTRY_BYTES
                )
            }),
        Err(Refusal::Compile(CompileError::RequiredOverflow { class, bytes, budget }))
            if matches!(
                class,
                ledger_schema::types::InputClass::Identity | ledger_schema::types::InputClass::Working
            ) =>
        {
            Some(format!(
                "its required {} content would be {bytes} bytes, over the policy's budget of {budget}",
                runtime::wire(&class)
            ))
        }
        Err(Refusal::Compile(err @ CompileError::RequiredFeedback { .. })) => Some(err.to_string()),
        _ => None,
    }
}

/// After an entry that changes a bound input of a Worker Context ([`runtime::input_of`]:
/// the goal's dispatched, active Attempts; a new source registry or profile revision: those
/// that carry a task selection), each of those `attempts` is recompiled once,
/// by the compiler its manifest records, over the state after the entry; one whose
/// package differs, whose bound input sets changed ([`bound_set_change`]), whose context
/// no longer compiles or whose compiler this registry lacks (fail closed) is marked ([`runtime::mark_context_changed`]): its later worker events
/// are ignored receipts (CONTEXT_CHANGED) and its `finishAttempt` is refused
/// (`ManifestStale`). Infallible, so the entry is applied whole or refused before any
/// change. Replay and reopen run this same step, so they reproduce every mark.
fn mark_changed_contexts(registry: &Registry<'_>, state: &mut State, attempts: Vec<ledger_schema::Id>) {
    let stale: Vec<ledger_schema::Id> = attempts
        .into_iter()
        .filter(|&attempt| {
            let (Some(binding), Some(recorded)) =
                (runtime::in_flight_binding(state, attempt), state.attempts.get(&attempt))
            else {
                return false;
            };
            // A compiler this registry lacks fails closed (`Err`).
            !matches!(staleness_of(registry, state, &binding, recorded), Ok(None))
        })
        .collect();
    for attempt in stale {
        runtime::mark_context_changed(state, attempt);
    }
}

/// What a result is used for: a freeze of its generation, or an ACCEPT of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResultUse {
    Freeze,
    Accept,
}

/// The currency proof of a result (seed 000, "Context Invalidation": "An in-flight worker
/// may finish, but its result is evaluated against the current Attempt and manifest. Stale
/// results cannot advance the workflow"): a generation freezes on, and an ACCEPT stands on,
/// the work of its latest finished COMPLETION_REQUEST Attempt ([`runtime::result_binding`]),
/// whose context, recompiled as while it ran by the compiler its manifest names (its task
/// selection as decided), must still be exactly its manifest. A fact confirmed or
/// invalidated, a human decision, a project source, a scenario, an obligation or a blocker
/// recorded after the Attempt finished changes it, and so does a context that no longer
/// compiles (`ManifestStale`): start a new Attempt on the generation.
fn check_result_current(
    registry: &Registry<'_>,
    state: &State,
    generation_id: ledger_schema::Id,
    used: ResultUse,
) -> Result<(), Refusal> {
    let Some((attempt, as_running, binding)) = runtime::result_binding(state, generation_id) else {
        return Ok(());
    };
    let Some(recorded) = state.attempts.get(&attempt) else { return Ok(()) };
    // A context that no longer compiles fails closed, for a freeze and an ACCEPT alike (a
    // decision too large for its required budget cannot be shown not to change it: outside
    // review 21). A task selection is held to what it was decided over, not to the profile
    // configured since ([`runtime::result_binding`]: seed 003 keeps an existing session's
    // context), so a profile change alone does not make a result stale.
    let Some(detail) = staleness_of(registry, &as_running, &binding, recorded)? else { return Ok(()) };
    // A blocker open now would make the new Attempt's result stale again once resolved, and
    // ACCEPT needs it resolved (outside review 80: "start a new Attempt" led into that trap).
    let open_blocker = state
        .blockers
        .iter()
        .find(|(_, b)| b.workflow_id == binding.workflow_id && b.resolution.is_none())
        .map(|(id, _)| *id);
    let fresh_attempt = match open_blocker {
        _ if detail.over_budget() => OVER_BUDGET_WAY_OUT.to_owned(),
        Some(id) => format!(
            "resolve blocker {id} first (a result made while it is open is stale once it is resolved, and ACCEPT needs it resolved), then start a new Attempt on the generation"
        ),
        None => "start a new Attempt on the generation".to_owned(),
    };
    let (what, then) = match used {
        ResultUse::Freeze => ("generation", fresh_attempt.as_str()),
        ResultUse::Accept => (
            "an ACCEPT of generation",
            "a stale result cannot be accepted: reject it (REJECT_REPAIRABLE over a failing check repairs it under the current context) or cancel the workflow and start again",
        ),
    };
    Err(Refusal::Rule(runtime::violation(
        runtime::Rule::ManifestStale,
        format!(
            "{what} {generation_id} stands on the result of attempt {attempt}, whose manifest {} is no longer current ({detail}): a bound input changed after it finished; {then}",
            recorded.manifest_digest
        ),
    )))
}

/// Why `recorded`'s context is no longer what its `binding` compiles to over `state` (by
/// the compiler the manifest names: another package, or none), or `None` if it still is.
fn staleness_of(
    registry: &Registry<'_>,
    state: &State,
    binding: &runtime::AttemptBinding,
    recorded: &runtime::state::AttemptState,
) -> Result<Option<Stale>, Refusal> {
    if let Some(withdrawn) = runtime::thread_history_withdrawn(state, binding.attempt_id) {
        return Ok(Some(Stale::ThreadHistory(withdrawn)));
    }
    if let Some(change) = bound_set_change(state, binding, recorded.seq) {
        return Ok(Some(Stale::BoundSet(change)));
    }
    Ok(match compile_as(registry, state, binding, &recorded.compiler_version)? {
        // Current while it compiles to the same package — what the worker is given, every
        // bound input rendered. A difference in omission decisions alone (a Fact proposed,
        // not confirmed) changes no bound input (seed: "selected confirmed Fact revision";
        // outside review 22); a bound set's member left out does ([`bound_set_change`]).
        Ok(compiled) if compiled.manifest.package_digest == recorded.package_digest => None,
        Ok(compiled) => Some(Stale::Differs(compiled.manifest_digest())),
        Err(error) => Some(Stale::Uncompilable(error)),
    })
}

/// The first change since seq `started` (the Attempt's start) to a bound input *set* of
/// `binding`'s context, or `None`. Seed 000 ("Context Invalidation") lists "scoped Human
/// Decision" and the "blocker or verification-obligation set" as bound inputs — the sets,
/// not what of them the package shows — so a member the recompiled context would leave out
/// (over its class budget) changes it too (outside review 77: a large decision or
/// obligation recorded after the start passed a claim, a freeze and an ACCEPT that a small
/// one would have made stale, and no entry said it was left out). A set is in scope when
/// the Attempt's phase takes its class (required or optional): the goal's Human Decisions
/// and the workflow's blockers with BLOCKERS_DECISIONS, the goal's verification
/// obligations with FACTS_SCENARIOS_OBLIGATIONS. The sets are compared as they stood at
/// the start and stand now: a blocker raised and resolved since, or an obligation recorded
/// and retired since, leaves its set as it was. The goal's confirmed Facts are one such set
/// too (with FACTS_SCENARIOS_OBLIGATIONS): one confirmed or invalidated since the start.
fn bound_set_change(state: &State, binding: &runtime::AttemptBinding, started: u64) -> Option<String> {
    use ledger_schema::types::InputClass;
    let phase =
        state.policies.get(&binding.policy.id)?.bundle.phases.iter().find(|p| p.phase == binding.phase)?;
    let scoped = |class: InputClass| phase.required.contains(&class) || phase.optional.contains(&class);
    if scoped(InputClass::BlockersDecisions) {
        // The decision standing on each question at the start and now (outside review 135:
        // withdrawn since; 161 F2: one superseded by an answer since withdrawn).
        let decisions = state
            .human_decisions
            .iter()
            .filter(|(_, d)| d.goal_id == binding.goal_id)
            .map(|(id, d)| (d.key.as_str(), *id, d.seq, d.withdrawn_seq));
        if let Some(change) = standing_change(decisions, started) {
            let id = change.id();
            return Some(match change {
                Standing::Now(_, at) => format!("human decision {id} was recorded at seq {at} for the goal"),
                Standing::Gone(_) => {
                    format!("human decision {id} no longer stands (withdrawn or answered anew since)")
                }
            });
        }
        let blockers = state.blockers.iter().filter(|(_, b)| b.workflow_id == binding.workflow_id);
        for (id, b) in blockers {
            if let Some(change) = member_change(b.seq, b.resolved_seq, started) {
                return Some(format!(
                    "blocker {id} was {}",
                    change.said("raised", "and is open", "resolved")
                ));
            }
        }
    }
    if scoped(InputClass::ProjectMaterial) {
        // The seed lists the "relevant project source digest" among them too: a source of the
        // goal recorded (a new file or revision) or withdrawn since changes the context
        // whether the package shows it or its budget leaves it out (outside review 159 F2:
        // a large new source passed a claim, a freeze and an ACCEPT that a small one made
        // stale, and the claimed manifest listed no omission of it).
        // The record current for each path at the start and now (outside review 161 F2: one
        // recorded and withdrawn since took the start's record out of the project, unseen).
        let sources = state
            .sources
            .iter()
            .filter(|(_, s)| s.goal_id == binding.goal_id)
            .map(|(id, s)| (s.path.as_str(), *id, s.seq, s.withdrawn_seq));
        if let Some(change) = standing_change(sources, started) {
            let source = state.sources.get(&change.id())?;
            let (id, path, revision) = (change.id(), &source.path, &source.revision);
            return Some(match change {
                Standing::Now(_, at) => {
                    format!("project source {id} ({path}@{revision}) was recorded at seq {at}")
                }
                Standing::Gone(_) => format!(
                    "project source {id} ({path}@{revision}) is no longer current (withdrawn or superseded since)"
                ),
            });
        }
    }
    if scoped(InputClass::FactsScenariosObligations) {
        // The seed's "selected confirmed Fact revision": a fact of the goal confirmed since
        // the start, or a confirmed one invalidated since, changes the context whether the
        // package shows it or its budget leaves it out (outside review 189 F2: one left out
        // passed a finish that a shown one made stale). A PROPOSED one changes nothing.
        for (id, f) in state.facts.iter().filter(|(_, f)| f.goal_id == binding.goal_id) {
            if let Some(at) = f
                .confirmed_seq
                .filter(|at| *at > started && f.status == runtime::state::FactStatus::Confirmed)
            {
                return Some(format!("fact {id} revision {} was confirmed at seq {at}", f.revision));
            }
            if let Some(at) = f.withdrawn_seq.filter(|at| *at > started) {
                return Some(format!("a confirmed revision of fact {id} was invalidated at seq {at}"));
            }
        }
        for (id, o) in state.obligations.iter().filter(|(_, o)| o.goal_id == binding.goal_id) {
            if let Some(change) = member_change(o.seq, o.retired_seq, started) {
                return Some(format!(
                    "verification obligation {id} was {}",
                    change.said("recorded", "", "retired")
                ));
            }
        }
    }
    None
}

/// The first group (a question, a path) whose standing member — its newest record, unless
/// withdrawn — differs between seq `started` and now, of `members` (group, id, seq,
/// withdrawal seq): the one standing now, or the one that stood at the start.
fn standing_change<'a>(
    members: impl Iterator<Item = (&'a str, ledger_schema::Id, u64, Option<u64>)>,
    started: u64,
) -> Option<Standing> {
    // group → (newest at the start, newest now): (seq, id, withdrawal)
    type Newest = Option<(u64, ledger_schema::Id, Option<u64>)>;
    let mut groups: std::collections::BTreeMap<&str, (Newest, Newest)> = std::collections::BTreeMap::new();
    for (group, id, seq, withdrawn) in members {
        let (at_start, now) = groups.entry(group).or_default();
        let newer = |old: &Newest| old.is_none_or(|(s, _, _)| seq > s);
        if seq <= started && newer(at_start) {
            *at_start = Some((seq, id, withdrawn));
        }
        if newer(now) {
            *now = Some((seq, id, withdrawn));
        }
    }
    groups.into_values().find_map(|(at_start, now)| {
        let stood = at_start.filter(|(_, _, w)| w.is_none_or(|w| w > started)).map(|(_, id, _)| id);
        let stands = now.filter(|(_, _, w)| w.is_none());
        match (stood, stands) {
            (a, Some((_, b, _))) if a == Some(b) => None,
            (_, Some((seq, b, _))) => Some(Standing::Now(b, seq)),
            (Some(a), None) => Some(Standing::Gone(a)),
            (None, None) => None,
        }
    })
}

/// How a group's standing member changed since the start ([`standing_change`]).
enum Standing {
    /// This record stands now, recorded at this seq, and did not at the start.
    Now(ledger_schema::Id, u64),
    /// This record stood at the start, and nothing stands now.
    Gone(ledger_schema::Id),
}

impl Standing {
    fn id(&self) -> ledger_schema::Id {
        match self {
            Standing::Now(id, _) | Standing::Gone(id) => *id,
        }
    }
}

/// How a set member added at seq `added` (and removed at `removed`, if it was) changed the
/// set since seq `started`: joined it (added since, still in), or left it (in at the start,
/// removed since); a member added and removed since leaves the set as it was.
fn member_change(added: u64, removed: Option<u64>, started: u64) -> Option<MemberChange> {
    match removed {
        None if added > started => Some(MemberChange::Joined(added)),
        Some(removed) if added <= started && removed > started => Some(MemberChange::Left(removed)),
        _ => None,
    }
}

enum MemberChange {
    Joined(u64),
    Left(u64),
}

impl MemberChange {
    /// "raised at seq 7 and is open", "resolved at seq 9".
    fn said(&self, joined: &str, still: &str, left: &str) -> String {
        match self {
            MemberChange::Joined(at) if still.is_empty() => format!("{joined} at seq {at}"),
            MemberChange::Joined(at) => format!("{joined} at seq {at} {still}"),
            MemberChange::Left(at) => format!("{left} at seq {at}"),
        }
    }
}

/// How a recorded manifest is no longer what its binding compiles to.
enum Stale {
    /// The Thread a RESUME continues holds context since withdrawn
    /// ([`runtime::thread_history_withdrawn`]), in this package or not.
    ThreadHistory(String),
    /// A bound input set changed since the start ([`bound_set_change`]), shown or not.
    BoundSet(String),
    /// The context compiles, to this other manifest: a bound input changed.
    Differs(ledger_schema::Digest),
    /// The context no longer compiles at all.
    Uncompilable(CompileError),
}

impl Stale {
    /// Required content of the phase over its budget: no Attempt of the workflow compiles.
    fn over_budget(&self) -> bool {
        matches!(
            self,
            Stale::Uncompilable(
                CompileError::RequiredOverflow { .. } | CompileError::RequiredFeedback { .. }
            )
        )
    }
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::ThreadHistory(withdrawn) => write!(
                f,
                "its RESUMEd Thread's history holds context since withdrawn ({withdrawn}), which the worker would still see"
            ),
            Stale::BoundSet(change) => write!(f, "a bound input set changed since it started: {change}"),
            Stale::Differs(digest) => write!(f, "the context compiles to {digest} now"),
            Stale::Uncompilable(error) => write!(f, "the context no longer compiles: {error}"),
        }
    }
}

/// The currency proof of a dispatch claim: the Attempt's context, recompiled over the state
/// at the claim by the compiler its manifest names, is still exactly the recorded manifest
/// (a fact confirmed or invalidated, a blocker, an obligation, a human decision or a project
/// source recorded since the start changes it: `ManifestStale`). Claims the runtime refuses
/// anyway (`runtime::current_binding` is `None`) are left to their rules.
fn check_current(registry: &Registry<'_>, state: &State, attempt: ledger_schema::Id) -> Result<(), Refusal> {
    let (Some(binding), Some(recorded)) =
        (runtime::current_binding(state, attempt), state.attempts.get(&attempt))
    else {
        return Ok(());
    };
    let detail = match staleness_of(registry, state, &binding, recorded)? {
        None => return Ok(()),
        // A RESUME's Thread holding withdrawn context is the runtime's claim rule
        // (`ThreadPolicy`: start FRESH), which `runtime::apply` checks next — not a stale
        // manifest.
        Some(Stale::ThreadHistory(_)) => return Ok(()),
        Some(detail) => detail,
    };
    let then = if detail.over_budget() {
        ["cancel it (`cancelAttempt`); ", OVER_BUDGET_WAY_OUT].concat()
    } else {
        "cancel it (`cancelAttempt`) and start a new Attempt, which compiles the current context".to_owned()
    };
    Err(Refusal::Rule(runtime::violation(
        runtime::Rule::ManifestStale,
        format!(
            "attempt {attempt}: its manifest {} is no longer current ({detail}); {then}",
            recorded.manifest_digest
        ),
    )))
}

/// The way out of a context whose required content no longer fits its budget: a new Attempt
/// would not compile it either (outside review 209 F2: "start a new Attempt" was refused in
/// turn). Only then — a selection gone stale is left by a new Attempt (outside review 210
/// F4: this advice was given for one too).
const OVER_BUDGET_WAY_OUT: &str = "no new Attempt compiles this context either: bring what the phase requires \
     within the policy's budgets (a goal revision, then retiring what the goal no longer needs) and start the work \
     again in a new workflow, or cancel the workflow";

/// For readers (`ledger compile --json`): why a dispatch claim of the started, undispatched
/// Attempt `attempt` would be refused as stale over `state` (`check_current`), or why the
/// result of the finished Attempt `attempt` — its generation's latest COMPLETION_REQUEST —
/// can no longer be frozen or accepted (`check_result_current`) — a Goal revised since the
/// workflow began refuses both (`StaleGoalRevision`); `None` when it is
/// current, or neither applies (outside review 128 F3: `compile --json` said nothing of a
/// claim the ledger would refuse).
pub fn stale_now(state: &State, attempt: ledger_schema::Id) -> Option<String> {
    use runtime::state::AttemptStatus;
    let registry = &compiler::RELEASED;
    let a = state.attempts.get(&attempt)?;
    // A Goal revised since the workflow began refuses its claims, freezes and ACCEPTs alike
    // (`runtime::live_workflow`; outside review 166 F1: `staleNow` was null for them).
    let goal_revised = || {
        runtime::live_workflow(state, a.workflow_id)
            .err()
            .filter(|v| v.rule == runtime::Rule::StaleGoalRevision)
            .map(|v| Refusal::Rule(v).to_string())
    };
    match a.status {
        AttemptStatus::Started => {
            goal_revised().or_else(|| check_current(registry, state, attempt).err().map(|e| e.to_string()))
        }
        AttemptStatus::Finished { .. } => {
            let generation = a.generation_id?;
            // A closed workflow or a decided generation takes no freeze or ACCEPT any more
            // (outside review 132 F8: an accepted result was said to be refused).
            let closed = state.workflows.get(&a.workflow_id).is_none_or(|w| w.closed);
            let decided = state.generations.get(&generation).is_none_or(|g| g.decision.is_some());
            if closed || decided {
                return None;
            }
            // The generation's freeze and ACCEPT are refused whichever result they name (and
            // `result_binding` has none for a workflow on an earlier goal revision).
            if let Some(why) = goal_revised() {
                return Some(why);
            }
            let (latest, _, _) = runtime::result_binding(state, generation)?;
            // A frozen generation's next step is its ACCEPT, whose refusal gives its own way
            // out (outside review 143: the freeze's "start a new Attempt" was given there).
            let frozen = state
                .generations
                .get(&generation)
                .is_some_and(|g| matches!(g.status, runtime::state::GenerationStatus::Frozen { .. }));
            let used = if frozen { ResultUse::Accept } else { ResultUse::Freeze };
            (latest == attempt)
                .then(|| check_result_current(registry, state, generation, used).err())
                .flatten()
                .map(|e| e.to_string())
        }
        _ => None,
    }
}

/// Turns a command into events: the runtime's `decide`, with every Attempt start compiled
/// here by the newest released compiler.
pub fn decide(state: &State, command: &Command) -> Result<Decided, Refusal> {
    decide_with(&compiler::RELEASED, state, command)
}

/// [`decide`], with Attempt starts compiled by the newest compiler of `registry`. A
/// command whose step is already recorded is [`Decided::Redelivered`]
/// (`runtime::dedup`), before anything is compiled.
pub fn decide_with(registry: &Registry<'_>, state: &State, command: &Command) -> Result<Decided, Refusal> {
    runtime::decide(state, command, &|state, start| start_attempt(registry, state, start))
        .and_then(secret_free)
}

/// New text a command would record for workers to read — a project source's content and
/// path and revision, a Human Decision's question and answer, a fact, the goal, an
/// obligation, a scenario, a blocker, a policy's objectives, capabilities and invariants,
/// an execution profile's name, and the reasons of retirements and withdrawals (copied into
/// every later manifest of the goal) — holds no secret by its form ([`runtime::secrets`], the reader
/// `sources scan` uses): the ledger is append-only, so a secret recorded could never be
/// taken back, and the compiler hands these to workers (outside reviews 171 F1, 173 F3: a
/// project's `.env` and a token in a decision's answer or the goal reached a worker's
/// package). Admission only, like the scan: the reader's forms are heuristics that change
/// between builds, and what replay accepts must not; a redelivery of what is recorded is
/// not read again. A Worker event's payload is not read: it is what the worker did,
/// recorded as it came (and never rendered to a worker).
fn secret_free(decided: Decided) -> Result<Decided, Refusal> {
    let Decided::Events(events) = &decided else { return Ok(decided) };
    for (field, text) in events.iter().flat_map(worker_texts) {
        if let Some(what) = runtime::secrets::secret_in(text.as_bytes()) {
            // A retirement's or withdrawal's text is copied into manifests, not shown to a
            // worker (outside review 191 F5: the refusal said workers are given it).
            let readers = if matches!(field, "reason" | "withdrawnBy") {
                "every later Attempt manifest of the goal copies this text"
            } else {
                "workers are given this text"
            };
            return Err(Refusal::Rule(runtime::violation(
                runtime::Rule::SecretMaterial,
                format!(
                    "its {field} holds a secret: {what} — the ledger is append-only and {readers}; record it \
                     without the secret (docs/profiles.md lists the forms read)"
                ),
            )));
        }
    }
    Ok(decided)
}

/// A goal's texts, by field.
fn goal_texts(c: &ledger_schema::events::GoalContent) -> Vec<(&'static str, &str)> {
    let items = [
        ("scope", &c.scope),
        ("nonGoals", &c.non_goals),
        ("successCriteria", &c.success_criteria),
        ("preservationConstraints", &c.preservation_constraints),
    ];
    std::iter::once(("objective", c.objective.as_str()))
        .chain(
            items.into_iter().flat_map(|(field, list)| list.iter().map(move |item| (field, item.as_str()))),
        )
        .collect()
}

/// The operator-written texts of `event` the compiler renders for a worker, by field.
fn worker_texts(event: &Event) -> Vec<(&'static str, &str)> {
    match event {
        Event::ProjectSourceRecorded(e) => {
            vec![("content", &e.content), ("path", &e.path), ("revision", &e.revision)]
        }
        // The policy's texts reach every worker of its workflows (outside review 177 F2).
        Event::PolicyBundleInstalled(e) => e
            .bundle
            .phases
            .iter()
            .flat_map(|p| {
                std::iter::once(("objective", p.objective.as_str()))
                    .chain(p.capabilities.iter().map(|c| ("capabilities", c.as_str())))
            })
            .chain(e.bundle.invariants.iter().map(|i| ("invariants", i.as_str())))
            .collect(),
        Event::ExecutionProfileInstalled(e) => vec![("name", &e.profile.name)],
        Event::HumanDecisionRecorded(e) => vec![("question", &e.question), ("answer", &e.answer)],
        Event::FactProposed(e) => vec![("statement", &e.statement), ("provenance", &e.provenance)],
        Event::GoalCreated(e) => goal_texts(&e.content),
        Event::GoalRevised(e) => goal_texts(&e.content),
        Event::ObligationRecorded(e) => vec![("description", &e.description)],
        Event::ScenarioRecorded(e) => vec![("title", &e.title), ("description", &e.description)],
        Event::BlockerRaised(e) => vec![("description", &e.description)],
        // Copied into every later Attempt manifest of the goal as an omission's reason
        // (outside review 186 F2: a token there was recorded again in each).
        Event::ObligationRetired(e) => vec![("reason", &e.reason)],
        Event::ScenarioRetired(e) => vec![("reason", &e.reason)],
        Event::ProjectSourceWithdrawn(e) => vec![("reason", &e.reason)],
        Event::HumanDecisionWithdrawn(e) => vec![("reason", &e.reason), ("withdrawnBy", &e.withdrawn_by)],
        _ => Vec::new(),
    }
}

/// [`decide`] as if the command had never been submitted (a redelivery that is not the
/// same command is decided by every rule, which refuse a step already taken).
pub fn decide_new(state: &State, command: &Command) -> Result<Decided, Refusal> {
    runtime::decide_new(state, command, &|state, start| start_attempt(&compiler::RELEASED, state, start))
        .and_then(secret_free)
}

/// The context a new Attempt start would record over `state`: its binding (every start
/// rule) compiled by the newest released compiler. What `Engine::compile` previews.
pub fn compile_start(state: &State, c: &StartAttempt) -> Result<Compiled, Refusal> {
    compile_start_with(&compiler::RELEASED, state, c).map(|(_, compiled)| compiled)
}

/// [`compile_start`] by the newest compiler of `registry`, with the binding.
fn compile_start_with(
    registry: &Registry<'_>,
    state: &State,
    c: &StartAttempt,
) -> Result<(runtime::AttemptBinding, Compiled), Refusal> {
    let binding = runtime::attempt_binding(state, c)?;
    let compiled = registry.newest().compile(state, &binding).map_err(Refusal::Compile)?;
    Ok((binding, compiled))
}

/// An Attempt start compiled by the newest compiler of `registry`.
fn start_attempt(registry: &Registry<'_>, state: &State, c: &StartAttempt) -> Result<Event, Refusal> {
    let (binding, compiled) = compile_start_with(registry, state, c)?;
    Ok(started(c, &binding, compiled))
}

/// The Attempt start `c` compiled as `compiled` for `binding`.
fn started(c: &StartAttempt, binding: &runtime::AttemptBinding, compiled: Compiled) -> Event {
    Event::AttemptStarted(Box::new(AttemptStarted {
        attempt_id: c.attempt_id,
        workflow_id: c.workflow_id,
        workflow_version: binding.workflow_version,
        phase: binding.phase,
        worker_session_id: c.worker_session_id,
        thread: c.thread,
        generation_id: binding.generation.map(|g| g.0),
        manifest_digest: compiled.manifest_digest(),
        manifest: compiled.manifest,
        selection_receipt: c.selection_receipt,
        replaces: None,
    }))
}
