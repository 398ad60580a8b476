//! Candidate generations: a workflow's first is opened once; repair children are opened
//! from a Repair record; each freezes once.

use std::collections::BTreeSet;

use ledger_schema::Event;
use ledger_schema::events::{GenerationFrozen, GenerationOpened};
use ledger_schema::types::{Phase, ResultKind};

use super::command::{FreezeGeneration, OpenGeneration};
use super::state::{AttemptStatus, GenerationState, GenerationStatus, State};
use super::{Rule, RuleViolation, ensure, fresh, get, get_mut, live_workflow};

pub fn decide_open(c: &OpenGeneration) -> Event {
    Event::GenerationOpened(GenerationOpened {
        generation_id: c.generation_id,
        workflow_id: c.workflow_id,
        sequence: 1,
        base_digest: c.base_digest,
        parent: None,
        repair_id: None,
    })
}

pub fn decide_freeze(c: &FreezeGeneration) -> Event {
    Event::GenerationFrozen(GenerationFrozen {
        generation_id: c.generation_id,
        candidate_digest: c.candidate_digest,
        change_set_digest: c.change_set_digest,
    })
}

pub fn apply_opened(state: &mut State, e: &GenerationOpened) -> Result<(), RuleViolation> {
    fresh(&state.generations, e.generation_id, "generation")?;
    let wf = live_workflow(state, e.workflow_id)?;
    ensure!(
        wf.active_attempt.is_none(),
        Rule::AttemptActive,
        "workflow {} has an active attempt",
        e.workflow_id
    );
    match e.repair_id {
        None => {
            // Said first: it is what decides (outside review 205 F4: a workflow past its first
            // generation was sent to IMPLEMENT, where this refused it).
            ensure!(
                wf.active_generation.is_none(),
                Rule::GenerationOpen,
                "workflow {} already has a generation; further ones come from repairs",
                e.workflow_id
            );
            ensure!(
                wf.phase == Phase::Implement,
                Rule::CandidatePhase,
                "a workflow's first generation opens in IMPLEMENT; workflow {} is in {}",
                e.workflow_id,
                super::wire(&wf.phase)
            );
            ensure!(
                e.parent.is_none() && e.sequence == 1,
                Rule::GenerationOpen,
                "a generation without a repair record has sequence 1 and no parent"
            );
        }
        Some(repair_id) => {
            let repair = get(&state.repairs, repair_id, "repair")?;
            ensure!(
                repair.child_generation_id == e.generation_id && !repair.child_opened,
                Rule::RepairChild,
                "repair {repair_id} opens generation {}, once",
                repair.child_generation_id
            );
            ensure!(
                e.parent == Some(repair.parent_generation_id) && repair.workflow_id == e.workflow_id,
                Rule::RepairChild,
                "the repair child's parent must be {}",
                repair.parent_generation_id
            );
            let parent = get(&state.generations, repair.parent_generation_id, "generation")?;
            ensure!(
                Some(e.sequence) == parent.sequence.checked_add(1),
                Rule::RepairChild,
                "the repair child's sequence must be {}",
                parent.sequence.saturating_add(1)
            );
            ensure!(
                parent.frozen_digest() == Some(e.base_digest),
                Rule::RepairChild,
                "the repair child's base digest must be the parent's frozen digest"
            );
        }
    }
    if let Some(repair) = e.repair_id.and_then(|r| state.repairs.get_mut(&r)) {
        repair.child_opened = true;
    }
    // The generation the evidence was built for is no longer the active one: none of its
    // Evidence can be used by a decision any more.
    if let Some(previous) = state.workflows.get(&e.workflow_id).and_then(|wf| wf.active_generation) {
        super::evidence::make_ineligible(state, previous, |_| true);
    }
    if let Some(wf) = state.workflows.get_mut(&e.workflow_id) {
        wf.active_generation = Some(e.generation_id);
    }
    state.generations.insert(
        e.generation_id,
        GenerationState {
            workflow_id: e.workflow_id,
            sequence: e.sequence,
            base_digest: e.base_digest,
            parent: e.parent,
            repair_id: e.repair_id,
            status: GenerationStatus::Mutable,
            decision: None,
            evidence: Vec::new(),
        },
    );
    Ok(())
}

pub fn apply_frozen(state: &mut State, e: &GenerationFrozen) -> Result<(), RuleViolation> {
    let generation = get(&state.generations, e.generation_id, "generation")?;
    let wf = live_workflow(state, generation.workflow_id)?;
    ensure!(
        generation.status == GenerationStatus::Mutable,
        Rule::GenerationNotMutable,
        "generation {} is already frozen",
        e.generation_id
    );
    ensure!(
        wf.active_generation == Some(e.generation_id),
        Rule::GenerationNotMutable,
        "generation {} is not its workflow's active generation",
        e.generation_id
    );
    ensure!(
        wf.active_attempt.is_none(),
        Rule::AttemptActive,
        "an attempt is still working on the generation"
    );
    ensure!(
        wf.phase == Phase::Implement,
        Rule::CandidatePhase,
        "a generation freezes in IMPLEMENT; workflow {} is in {}",
        generation.workflow_id,
        super::wire(&wf.phase)
    );
    // The frozen bytes are a Worker's work: an IMPLEMENT Attempt bound to this exact
    // generation finished with a completion request, and no Attempt dispatched on it after
    // that one ended otherwise — a worker that failed or was cancelled mid-edit may have
    // left half its work in the candidate, which no result vouches for (outside review 21).
    let finished = AttemptStatus::Finished { result_kind: ResultKind::CompletionRequest };
    let last_dispatched = state
        .attempts
        .iter()
        .filter(|(_, a)| a.generation_id == Some(e.generation_id) && a.dispatched)
        .max_by_key(|(_, a)| a.seq);
    ensure!(
        state.attempts.values().any(|a| a.generation_id == Some(e.generation_id) && a.status == finished),
        Rule::CandidateWork,
        "generation {} has no finished COMPLETION_REQUEST Attempt",
        e.generation_id
    );
    if let Some((id, a)) = last_dispatched.filter(|(_, a)| a.status != finished) {
        let ended = match a.status {
            AttemptStatus::Failed => "failed",
            AttemptStatus::Cancelled { .. } => "was cancelled",
            _ => "did not finish with a completion request",
        };
        return Err(super::violation(
            Rule::CandidateWork,
            format!(
                "generation {}'s last dispatched Attempt {id} {ended} after the result a freeze would stand on: it may have changed the candidate; start a new Attempt on the generation",
                e.generation_id
            ),
        ));
    }
    // A repair child that freezes the parent's exact bytes repaired nothing: its checks
    // would re-run the failed candidate (a failing record is never laundered by re-running).
    ensure!(
        generation.repair_id.is_none() || e.candidate_digest != generation.base_digest,
        Rule::CandidateWork,
        "repair child {} freezes its parent's exact candidate digest",
        e.generation_id
    );
    // Nor may any generation of the goal freeze bytes already judged failing (outside
    // review 20: X failed and was rejected, a repair froze Y, the next froze X again, its
    // re-run passed and was accepted; likewise in a new workflow of the goal, also when the
    // first was cancelled before any decision), or accepted, against the same goal content.
    let basis = judging_basis(state, wf.goal_id, wf.goal_revision);
    if let Some(why) = judged_failing(state, wf.goal_id, e.candidate_digest, None, basis)
        .or_else(|| accepted(state, wf.goal_id, e.candidate_digest, basis))
    {
        return Err(super::violation(
            Rule::CandidateWork,
            format!(
                "candidate {} was already judged for goal {}: it {why}; the generation must freeze changed bytes",
                e.candidate_digest, wf.goal_id
            ),
        ));
    }
    let generation = get_mut(&mut state.generations, e.generation_id, "generation")?;
    generation.status = GenerationStatus::Frozen {
        candidate_digest: e.candidate_digest,
        change_set_digest: e.change_set_digest,
    };
    Ok(())
}

/// The judging key of goal `goal` at `revision` (`goal::judging_key`: its content as a
/// reader sees it): what a judgment in a workflow bound to that revision is made against.
pub(crate) fn judging_basis(
    state: &State,
    goal: ledger_schema::Id,
    revision: u32,
) -> Option<ledger_schema::Digest> {
    state.goals.get(&goal).and_then(|g| g.key_of_revision(revision))
}

/// Whether the decision of workflow `wf` was made for goal `goal` against the goal content
/// `basis` (the same content, at whichever revision: a revision with the same content
/// re-opens nothing — outside review 20).
fn decided_against(
    state: &State,
    wf: ledger_schema::Id,
    goal: ledger_schema::Id,
    basis: Option<ledger_schema::Digest>,
) -> bool {
    state
        .workflows
        .get(&wf)
        .is_some_and(|w| w.goal_id == goal && judging_basis(state, goal, w.goal_revision) == basis)
}

/// What goal `goal` required before seq `at`, as a reader sees it: each obligation by the
/// check it runs (its specification's digest), each scenario by its text (`goal::reading`)
/// — recorded before `at` and not retired by then. Ids do not count: a requirement retired
/// and recorded again the same — under a new obligation id or a new check spec id — is the
/// same requirement (outside reviews 57, 58).
fn requirements_at(state: &State, goal: ledger_schema::Id, at: u64) -> BTreeSet<(u8, String)> {
    let live = |seq: u64, retired: Option<u64>| seq < at && retired.is_none_or(|r| r >= at);
    let checks = state
        .obligations
        .values()
        .filter(|o| o.goal_id == goal && live(o.seq, o.retired_seq))
        .map(|o| (0, o.check_spec_digest.to_string()));
    let scenarios =
        state.scenarios.values().filter(|s| s.goal_id == goal && live(s.seq, s.retired_seq)).map(|s| {
            (1, format!("{}\n{}", super::goal::reading(&s.title), super::goal::reading(&s.description)))
        });
    checks.chain(scenarios).collect()
}

/// Why candidate `digest` stands judged failing for the Goal `goal`, if it does: a FAIL
/// Evidence record of it from a generation other than `except`, in any workflow of the
/// goal at any revision (a check that failed on these bytes is never laundered by re-running
/// them elsewhere until it passes), or a rejection (REJECT_REPAIRABLE or REJECT_TERMINAL)
/// of it made against the same goal content `basis` — a revision that changed the goal
/// may judge the bytes again (outside review 47: a terminal rejection that asked for the
/// goal to be revised first held for every revision). A freeze of those bytes and an
/// ACCEPT of them are refused.
pub(crate) fn judged_failing(
    state: &State,
    goal: ledger_schema::Id,
    digest: ledger_schema::Digest,
    except: Option<ledger_schema::Id>,
    basis: Option<ledger_schema::Digest>,
) -> Option<String> {
    let of_goal = |wf: ledger_schema::Id| state.workflows.get(&wf).is_some_and(|w| w.goal_id == goal);
    // A rejection stands while everything the goal required when it was made is still
    // required: a retirement since (outside review 55) judges the bytes afresh; a
    // requirement added and retired again, or retired and recorded again the same, does not
    // (outside review 57).
    let now = requirements_at(state, goal, u64::MAX);
    let rejected = state.decisions.iter().find(|(_, d)| {
        d.verdict != ledger_schema::types::Verdict::Accept
            && d.candidate_digest == digest
            && decided_against(state, d.workflow_id, goal, basis)
            && requirements_at(state, goal, d.seq).is_subset(&now)
    });
    if let Some((id, d)) = rejected {
        return Some(format!("was rejected ({}) by decision {id}", super::wire(&d.verdict)));
    }
    state
        .evidence
        .iter()
        .find(|(_, ev)| {
            ev.record.result == ledger_schema::types::CheckResult::Fail
                && ev.record.candidate_digest == digest
                && Some(ev.record.generation_id) != except
                && of_goal(ev.record.workflow_id)
                // A check no live obligation of the goal runs any more judges nothing
                // (outside review 55); one still run — by the same obligation or by one
                // recorded again after a retirement, under any check spec id — still does
                // (outside reviews 57, 58: the same check under a new id laundered it).
                && state.obligations.values().any(|o| {
                    o.goal_id == goal && o.retired_seq.is_none() && o.check_spec_digest == ev.record.check_spec_digest
                })
        })
        .map(|(id, ev)| {
            format!(
                "failed check {} (evidence {id} of generation {})",
                ev.record.check_spec_id, ev.record.generation_id
            )
        })
}

/// Why candidate `digest` already stands accepted for the Goal `goal` against the goal
/// content `basis`, if it does: bytes are judged once per goal content, so they are not
/// frozen again elsewhere for a second judgment (outside review 20: a check failing after
/// the ACCEPT, in another workflow, recorded the same bytes as accepted and as rejected);
/// a revision that changed the goal judges them afresh (outside review 47).
pub(crate) fn accepted(
    state: &State,
    goal: ledger_schema::Id,
    digest: ledger_schema::Digest,
    basis: Option<ledger_schema::Digest>,
) -> Option<String> {
    state
        .decisions
        .iter()
        .find(|(_, d)| {
            d.verdict == ledger_schema::types::Verdict::Accept
                && d.candidate_digest == digest
                && decided_against(state, d.workflow_id, goal, basis)
        })
        .map(|(id, _)| format!("was accepted by decision {id}"))
}

/// Another generation of the Goal `goal` that holds `digest` frozen and awaits its judgment
/// (undecided, its workflow open): an ACCEPT waits for it, so one goal never records the
/// same bytes as accepted here and failing there.
pub(crate) fn judged_elsewhere_pending(
    state: &State,
    goal: ledger_schema::Id,
    digest: ledger_schema::Digest,
    except: ledger_schema::Id,
    basis: Option<ledger_schema::Digest>,
) -> Option<(ledger_schema::Id, ledger_schema::Id)> {
    // Only a judgment against the same goal content waits (outside review 49: a workflow
    // left at an earlier revision, which can no longer decide, held the ACCEPT back).
    state
        .generations
        .iter()
        .find(|(id, g)| {
            **id != except
                && g.decision.is_none()
                && g.frozen_digest() == Some(digest)
                && state.workflows.get(&g.workflow_id).is_some_and(|w| !w.closed)
                && decided_against(state, g.workflow_id, goal, basis)
        })
        .map(|(id, g)| (*id, g.workflow_id))
}
