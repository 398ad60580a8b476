//! Evidence: one check's result, for the exact active, frozen Candidate generation (a FAIL
//! also for frozen bytes a repair moved past),
//! recorded only in EVIDENCE_BUILD. Eligibility is the ledger's, never the command's: a
//! record is ELIGIBLE (version 1) when recorded, and becomes INELIGIBLE (version + 1) when
//! - a later record for the same obligation of the same generation supersedes it and it
//!   was a runner ERROR (an engine error is re-run; a PASS or FAIL is never superseded),
//! - or its generation stops being its workflow's active generation (a repair child opens).

use ledger_schema::events::EvidenceRecorded;
use ledger_schema::types::{CheckResult, Eligibility, Phase};
use ledger_schema::{Digest, Event, Id};

use super::command::RecordEvidence;
use super::state::{EvidenceState, State};
use super::{Rule, RuleViolation, ensure, fresh, get, live_workflow};

/// The eligibility every record is recorded with.
pub const RECORDED_ELIGIBILITY: (u32, Eligibility) = (1, Eligibility::Eligible);

pub fn decide_record(c: &RecordEvidence) -> Event {
    let (eligibility_version, eligibility_state) = RECORDED_ELIGIBILITY;
    Event::EvidenceRecorded(EvidenceRecorded {
        evidence_id: c.evidence_id,
        workflow_id: c.workflow_id,
        generation_id: c.generation_id,
        candidate_digest: c.candidate_digest,
        obligation_id: c.obligation_id,
        check_spec_id: c.check_spec_id,
        check_spec_digest: c.check_spec_digest,
        result: c.result,
        eligibility_version,
        eligibility_state,
        detail: c.detail.clone(),
    })
}

/// Makes every still-eligible Evidence record of `generation` that `which` selects
/// INELIGIBLE, one eligibility version later.
pub(crate) fn make_ineligible(state: &mut State, generation: Id, which: impl Fn(&EvidenceState) -> bool) {
    let ids = state.generations.get(&generation).map(|g| g.evidence.clone()).unwrap_or_default();
    for id in ids {
        if let Some(ev) = state.evidence.get_mut(&id)
            && ev.eligibility == Eligibility::Eligible
            && which(ev)
        {
            ev.eligibility = Eligibility::Ineligible;
            ev.eligibility_version = ev.eligibility_version.saturating_add(1);
        }
    }
}

/// The Evidence Set a decision over `generation` must use: every current, ELIGIBLE
/// Evidence record of the generation (all obligations), sorted by id.
pub fn evidence_set(state: &State, generation: Id) -> Vec<Id> {
    state
        .generations
        .get(&generation)
        .map(|g| {
            g.evidence
                .iter()
                .filter(|id| state.evidence.get(id).is_some_and(|e| e.eligibility == Eligibility::Eligible))
                .copied()
                .collect()
        })
        .unwrap_or_default()
}

/// A current, eligible FAIL of a decision's generation that its Evidence Set does not hold —
/// recorded after the decision (a `FAIL` of the frozen bytes is admitted whenever it
/// arrives). A repair binds the decision, and its worker is given the decision's failures
/// only: such a FAIL would never reach it (outside review 186 F1), so the repair is refused
/// and the generation may be decided again.
pub(super) fn fail_after_decision(state: &State, decision: &super::state::DecisionState) -> Option<Id> {
    evidence_set(state, decision.generation_id).into_iter().find(|id| {
        decision.evidence.binary_search(id).is_err()
            && state.evidence.get(id).is_some_and(|ev| ev.record.result == CheckResult::Fail)
    })
}

/// The feedback a repair of `generation` carries — the FAILED_CHECK item of every current
/// FAIL record, the PARENT_CHANGE_SET item, one PRESERVATION_CONSTRAINT item per constraint
/// of the goal (the items compilers 2 and later project, built by the same constructors) —
/// must fit the workflow policy's feedback limits whole: item count, each item's bytes, the
/// total bytes. Checked at a REJECT_REPAIRABLE decision (the repair it opens), not at the
/// FAIL: a failure is always recorded, for a failure refused for want of room let a passing
/// re-run of the same check stand in its place (outside review 146 F4; review 81 the same
/// for an earlier pass).
pub(super) fn repair_feedback_fits(
    state: &State,
    wf: &super::state::WorkflowState,
    generation_id: Id,
) -> Result<(), RuleViolation> {
    use ledger_schema::package::FeedbackItem;
    let bundle = &get(&state.policies, wf.policy.id, "policy")?.bundle;
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    let generation = get(&state.generations, generation_id, "generation")?;
    let super::state::GenerationStatus::Frozen { candidate_digest, change_set_digest } = generation.status
    else {
        return Ok(()); // refused as not frozen elsewhere
    };
    let mut items: Vec<FeedbackItem> = evidence_set(state, generation_id)
        .iter()
        .filter_map(|id| state.evidence.get(id))
        .filter(|ev| ev.record.result == CheckResult::Fail)
        .map(|ev| {
            FeedbackItem::failed_check(
                ev.record.evidence_id,
                ev.record_digest,
                ev.record.check_spec_id,
                ev.record.obligation_id,
                &super::shown_text(&ev.record.detail),
            )
        })
        .collect();
    items.push(FeedbackItem::parent_change_set(generation_id, candidate_digest, change_set_digest));
    for c in &goal.content.preservation_constraints {
        items.push(FeedbackItem::preservation_constraint(c, wf.goal_id, goal.revision, goal.digest));
    }
    feedback_fits(&items, bundle).map_err(|why| {
        super::violation(
            Rule::OutOfBounds,
            format!(
                "a repair of generation {generation_id} carries every failing record whole, and its feedback ({} items) does not fit policy {}: {why} — record REJECT_TERMINAL, or cancel the workflow and run it under a policy with larger feedback limits, or split the goal's checks into smaller goals",
                items.len(),
                wf.policy.id
            ),
        )
    })
}

/// The WORKING class budget of a policy that sets none: the compiler's default
/// (`compiler::DEFAULT_CLASS_BUDGET_BYTES`, which a test holds equal to this).
pub const DEFAULT_WORKING_BUDGET_BYTES: u32 = 65_536;

/// Whether a repair's feedback `items` reach its worker whole under `bundle`: the IMPLEMENT
/// phase takes the WORKING class that carries them, and they fit the feedback limits (each
/// item's bytes, the item count, the total bytes — the order compilers 2 and later apply
/// them in) and the WORKING class budget. `Err` names what does not hold and what to do.
pub(super) fn feedback_fits(
    items: &[ledger_schema::package::FeedbackItem],
    bundle: &ledger_schema::events::PolicyBundle,
) -> Result<(), String> {
    use ledger_schema::types::InputClass;
    let implement = bundle.phases.iter().find(|p| p.phase == Phase::Implement);
    if !implement.is_some_and(|p| {
        p.required.contains(&InputClass::Working) || p.optional.contains(&InputClass::Working)
    }) {
        return Err(
            "its IMPLEMENT phase does not take the WORKING class that carries a repair's feedback".into()
        );
    }
    let limits = bundle.feedback;
    let mut total = 0usize;
    for item in items {
        let size = ledger_schema::codec::encoded_len(item);
        if size > limits.max_item_bytes as usize {
            return Err(format!(
                "a {} item encodes to {size} bytes, over its maxItemBytes ({})",
                super::wire(&item.kind),
                limits.max_item_bytes
            ));
        }
        total = total.saturating_add(size);
    }
    if items.len() > usize::from(limits.max_items) {
        return Err(format!("{} items are over its maxItems ({})", items.len(), limits.max_items));
    }
    if total > limits.max_total_bytes as usize {
        return Err(format!(
            "together they encode to {total} bytes, over its maxTotalBytes ({})",
            limits.max_total_bytes
        ));
    }
    let feedback = ledger_schema::package::Feedback {
        items: items.to_vec(),
        schema_version: ledger_schema::package::FEEDBACK_SCHEMA,
        feedback_digest: Digest::ZERO,
    };
    let size = ledger_schema::codec::encoded_len(&feedback);
    let budget = bundle
        .budgets
        .iter()
        .find(|b| b.class == InputClass::Working)
        .map_or(DEFAULT_WORKING_BUDGET_BYTES, |b| b.max_bytes);
    if size > budget as usize {
        return Err(format!("the feedback encodes to {size} bytes, over its WORKING budget ({budget})"));
    }
    Ok(())
}

pub fn apply_recorded(state: &mut State, e: &EvidenceRecorded, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.evidence, e.evidence_id, "evidence")?;
    // A check's output as the runner wrote it, within the text bound alone: a failure is
    // never refused for what its output holds — escape codes, a blank line — and is shown
    // to a worker escaped (`shown_text`; outside review 221 F1).
    super::bounded_text("detail", &e.detail)?;
    // A failure of the frozen bytes is recorded whenever it arrives — once the goal was
    // revised past the workflow's revision, in FINAL_VERIFY, after the workflow was
    // cancelled or rejected, after a repair moved past them, after an ACCEPT: it bars the
    // failed bytes at every revision that reads as the same goal (`CandidateWork`), and
    // refused, it was lost and
    // the same bytes were then frozen, passed and ACCEPTed in another workflow (outside
    // reviews 150 F3, 156 F1). A pass or a runner error is recorded only in a live workflow's
    // EVIDENCE_BUILD.
    let failure = e.result == CheckResult::Fail;
    // After an ACCEPT too, of the ACCEPTed bytes as of a rejected repair parent's (outside
    // reviews 161 F1, 164 F1: refused there, the failure was lost and the same bytes were
    // ACCEPTed again in a workflow of a reworded goal, where the same fact named through a
    // sibling generation was kept): the verdict stands, and the record bars the bytes.
    let wf = if failure {
        get(&state.workflows, e.workflow_id, "workflow")?
    } else {
        live_workflow(state, e.workflow_id)?
    };
    let generation = get(&state.generations, e.generation_id, "generation")?;
    // A failure of frozen bytes the workflow has moved past — a repair's parent, once the
    // repair opened its child generation — is recorded too (outside review 159 F1: refused
    // there, the late failure was lost, and the same bytes were frozen, passed and ACCEPTed
    // in a new workflow).
    let moved_past =
        failure && wf.active_generation != Some(e.generation_id) && generation.frozen_digest().is_some();
    ensure!(
        generation.workflow_id == e.workflow_id
            && (wf.active_generation == Some(e.generation_id) || moved_past),
        Rule::EvidenceCandidate,
        "generation {} is not workflow {}'s active Candidate generation",
        e.generation_id,
        e.workflow_id
    );
    let frozen = generation.frozen_digest();
    ensure!(frozen.is_some(), Rule::GenerationNotFrozen, "generation {} is not frozen", e.generation_id);
    ensure!(
        frozen == Some(e.candidate_digest),
        Rule::EvidenceCandidate,
        "evidence is for candidate {}, generation {} froze as another",
        e.candidate_digest,
        e.generation_id
    );
    let obligation = get(&state.obligations, e.obligation_id, "obligation")?;
    ensure!(
        obligation.goal_id == wf.goal_id
            && obligation.check_spec_id == e.check_spec_id
            && obligation.check_spec_digest == e.check_spec_digest,
        Rule::EvidenceObligation,
        "evidence must name obligation {}'s exact check specification (and its goal)",
        e.obligation_id
    );
    if let Some(at) = obligation.retired_seq {
        return Err(super::violation(
            Rule::RequirementRetired,
            format!(
                "obligation {} was retired (entry {at}): no evidence is recorded for it",
                e.obligation_id
            ),
        ));
    }
    ensure!(
        wf.phase == Phase::EvidenceBuild
            || moved_past
            || (failure && (wf.closed || wf.phase == Phase::FinalVerify)),
        Rule::EvidencePhase,
        "evidence is recorded in EVIDENCE_BUILD (a failure also in FINAL_VERIFY or once the workflow closed); workflow {} is in {}",
        e.workflow_id,
        super::wire(&wf.phase)
    );
    ensure!(
        (e.eligibility_version, e.eligibility_state) == RECORDED_ELIGIBILITY,
        Rule::EvidenceEligibility,
        "eligibility is derived by the ledger: a record is recorded as version 1, ELIGIBLE (not version {}, {})",
        e.eligibility_version,
        super::wire(&e.eligibility_state)
    );
    // A failure reaches a repair worker as one FAILED_CHECK feedback item, and "required
    // authoritative failure records are never truncated into feedback" (seed 000). Whether
    // the failures fit a repair whole — each item within `maxItemBytes`, all of them within
    // the other limits — is the REJECT_REPAIRABLE decision's question
    // ([`repair_feedback_fits`]; REJECT_TERMINAL remains), never a reason to refuse the
    // failure: refused here, a failure let a passing re-run of the same check stand in its
    // place (outside reviews 146 F4 for the whole feedback, 150 F1 for one long item).
    let record_digest = e.record_digest();
    // A passing re-run of a check that already passed on these bytes adds nothing, and
    // filled the generation's Evidence Set until a later FAIL had no room — refused for
    // want of room, it left ACCEPT standing on the passes (outside review 81): refused. A
    // re-run that fails, or errs, is recorded.
    let set = evidence_set(state, e.generation_id);
    let current = |result: CheckResult| {
        set.iter().copied().find(|id| {
            state
                .evidence
                .get(id)
                .is_some_and(|ev| ev.record.obligation_id == e.obligation_id && ev.record.result == result)
        })
    };
    // (A PASS re-running a runner ERROR that still stands on the check is recorded: it
    // supersedes the ERROR, which otherwise held every verdict but REJECT_TERMINAL back for
    // good — outside review 82.)
    if e.result == CheckResult::Pass
        && current(CheckResult::Error).is_none()
        && let Some(passed) = current(CheckResult::Pass)
    {
        return Err(super::violation(
            Rule::EvidenceRepeated,
            format!(
                "obligation {}'s check already passed on generation {} (evidence {passed}): a passing re-run adds nothing; a re-run that fails is recorded",
                e.obligation_id, e.generation_id
            ),
        ));
    }
    // A re-run supersedes an earlier runner ERROR of the same check on this generation.
    let obligation_id = e.obligation_id;
    let superseded = |ev: &EvidenceState| {
        ev.record.obligation_id == obligation_id && ev.record.result == CheckResult::Error
    };
    // The Evidence Set a decision cites is a list of at most MAX_ITEMS: a passing record
    // that would push it past that is refused here, not found out at the decision, which
    // could then never be made (outside review 55). A FAIL or an ERROR is not refused for
    // room below twice that: refused, it would leave ACCEPT standing on the passes (outside
    // review 81); recorded past the bound, no verdict can cite the set, and the workflow is
    // cancelled — it is never accepted over a failure the ledger did not record.
    let kept = evidence_set(state, e.generation_id)
        .iter()
        .filter(|id| state.evidence.get(id).is_some_and(|ev| !superseded(ev)))
        .count();
    let room = if e.result == CheckResult::Pass { super::MAX_ITEMS } else { 2 * super::MAX_ITEMS };
    ensure!(
        kept < room,
        Rule::OutOfBounds,
        "generation {} already holds {kept} current Evidence records{}: a task that needs more checks is split into smaller goals",
        e.generation_id,
        if e.result == CheckResult::Pass {
            format!(", the most one decision can cite ({})", super::MAX_ITEMS)
        } else {
            format!(", and a failing or erring record is kept only below {room}")
        }
    );
    make_ineligible(state, e.generation_id, superseded);
    let (eligibility_version, eligibility) = RECORDED_ELIGIBILITY;
    state.evidence.insert(
        e.evidence_id,
        EvidenceState { record: e.clone(), record_digest, seq, eligibility, eligibility_version },
    );
    if let Some(g) = state.generations.get_mut(&e.generation_id) {
        let at = g.evidence.binary_search(&e.evidence_id).unwrap_or_else(|at| at);
        g.evidence.insert(at, e.evidence_id);
    }
    if moved_past {
        // Its generation is no longer the workflow's active one: INELIGIBLE at once, as its
        // siblings became when the repair child opened (it still bars the failed bytes).
        make_ineligible(state, e.generation_id, |ev| ev.record.evidence_id == e.evidence_id);
    }
    Ok(())
}
