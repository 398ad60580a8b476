//! Repair: only from the exact current REJECT_REPAIRABLE decision, with matching digests;
//! opens the repair child from the parent's frozen bytes.

use ledger_schema::Event;
use ledger_schema::events::{GenerationOpened, RepairRecorded};
use ledger_schema::types::Verdict;

use super::command::RecordRepair;
use super::state::{RepairState, State};
use super::{Rejection, Rule, RuleViolation, ensure, fresh, get, list, live_workflow, violation};

pub fn decide(state: &State, c: &RecordRepair) -> Result<Vec<Event>, Rejection> {
    let decision = get(&state.decisions, c.decision_id, "decision")?;
    super::open_workflow(state, decision.workflow_id)?;
    let parent = get(&state.generations, decision.generation_id, "generation")?;
    let base_digest = parent
        .frozen_digest()
        .ok_or_else(|| violation(Rule::RepairBinding, "the decided generation is not frozen"))?;
    let mut repair = RepairRecorded {
        repair_id: c.repair_id,
        workflow_id: decision.workflow_id,
        decision_id: c.decision_id,
        decision_digest: c.decision_digest,
        input_manifest_digest: c.input_manifest_digest,
        evidence_set_digest: c.evidence_set_digest,
        parent_generation_id: decision.generation_id,
        parent_candidate_digest: base_digest,
        child_generation_id: c.child_generation_id,
        constraints_to_preserve: in_goal_order(state, decision.workflow_id, &c.constraints_to_preserve),
        repair_digest: Default::default(),
    };
    repair.repair_digest = repair.computed_digest();
    let child = GenerationOpened {
        generation_id: c.child_generation_id,
        workflow_id: decision.workflow_id,
        sequence: parent.sequence.saturating_add(1),
        base_digest,
        parent: Some(decision.generation_id),
        repair_id: Some(c.repair_id),
    };
    Ok(vec![Event::RepairRecorded(repair), Event::GenerationOpened(child)])
}

/// `given` in the order of the Goal's preservation constraints where it is exactly that set
/// (each once), else as given (and refused by [`apply_recorded`]). A set, recorded one way:
/// the repair's digest, and the repair package that cites it, do not depend on how a
/// command happened to list it (outside reviews 209 F4, 221 F3). (An entry that lists the
/// set in another order, recorded before this, is still admitted: the rule is on the set.)
fn in_goal_order(state: &State, workflow_id: ledger_schema::Id, given: &[String]) -> Vec<String> {
    let goal = state.workflows.get(&workflow_id).and_then(|wf| state.goals.get(&wf.goal_id));
    match goal.map(|g| &g.content.preservation_constraints) {
        Some(theirs)
            if theirs.len() == given.len()
                && theirs.iter().all(|c| given.contains(c))
                && given.iter().all(|c| theirs.contains(c)) =>
        {
            theirs.clone()
        }
        _ => given.to_vec(),
    }
}

pub fn apply_recorded(state: &mut State, e: &RepairRecorded, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.repairs, e.repair_id, "repair")?;
    fresh(&state.generations, e.child_generation_id, "generation")?;
    list("constraintsToPreserve", &e.constraints_to_preserve)?;
    let decision = get(&state.decisions, e.decision_id, "decision")?;
    let wf = live_workflow(state, decision.workflow_id)?;
    ensure!(
        wf.current_decision == Some(e.decision_id) && e.workflow_id == decision.workflow_id,
        Rule::RepairDecision,
        "decision {} is not workflow {}'s current decision",
        e.decision_id,
        decision.workflow_id
    );
    ensure!(
        decision.verdict == Verdict::RejectRepairable,
        Rule::RepairDecision,
        "decision {} is {}, not REJECT_REPAIRABLE",
        e.decision_id,
        super::wire(&decision.verdict)
    );
    ensure!(!decision.repaired, Rule::RepairDecision, "decision {} was already repaired", e.decision_id);
    if let Some(late) = super::evidence::fail_after_decision(state, decision) {
        return Err(violation(
            Rule::RepairDecision,
            format!(
                "evidence {late}, a FAIL of generation {} recorded after decision {}, is not in its Evidence Set: the \
                 repair's worker would not be given it; decide the generation again (`decideAcceptance` over the \
                 current Evidence Set supersedes decision {}), then repair that decision",
                decision.generation_id, e.decision_id, e.decision_id
            ),
        ));
    }
    let checks = [
        ("decision digest", e.decision_digest == decision.decision_digest),
        ("input manifest digest", e.input_manifest_digest == decision.input_manifest_digest),
        ("evidence set digest", e.evidence_set_digest == decision.evidence_set_digest),
        ("parent generation", e.parent_generation_id == decision.generation_id),
        ("parent candidate digest", e.parent_candidate_digest == decision.candidate_digest),
    ];
    for (what, ok) in checks {
        ensure!(ok, Rule::RepairBinding, "the repair's {what} does not match decision {}", e.decision_id);
    }
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    let missing =
        goal.content.preservation_constraints.iter().find(|c| !e.constraints_to_preserve.contains(c));
    ensure!(
        missing.is_none(),
        Rule::RepairConstraints,
        "the repair drops the preservation constraint {:?}",
        missing.map(String::as_str).unwrap_or_default()
    );
    // Exactly the Goal's: a constraint the Goal does not hold would reach the repair worker
    // as authoritative and cite a Goal revision that does not contain it.
    let added = e.constraints_to_preserve.iter().find(|c| !goal.content.preservation_constraints.contains(c));
    ensure!(
        added.is_none(),
        Rule::RepairConstraints,
        "the repair adds the constraint {:?}, which goal {} revision {} does not hold",
        added.map(String::as_str).unwrap_or_default(),
        wf.goal_id,
        goal.revision
    );
    ensure!(
        e.repair_digest == e.computed_digest(),
        Rule::RepairDigest,
        "repair digest {} is not the repair's",
        e.repair_digest
    );
    state.repairs.insert(
        e.repair_id,
        RepairState {
            workflow_id: e.workflow_id,
            decision_id: e.decision_id,
            parent_generation_id: e.parent_generation_id,
            child_generation_id: e.child_generation_id,
            constraints_to_preserve: e.constraints_to_preserve.clone(),
            repair_digest: e.repair_digest,
            child_opened: false,
            seq,
        },
    );
    if let Some(d) = state.decisions.get_mut(&e.decision_id) {
        d.repaired = true;
    }
    Ok(())
}
