//! Evidence: one check's result, for the exact active, frozen Candidate generation.

use ledger_schema::Event;
use ledger_schema::events::EvidenceRecorded;

use super::command::RecordEvidence;
use super::state::{EvidenceState, State};
use super::{Rule, RuleViolation, ensure, fresh, get, live_workflow, text};

pub fn decide_record(c: &RecordEvidence) -> Event {
    Event::EvidenceRecorded(EvidenceRecorded {
        evidence_id: c.evidence_id,
        workflow_id: c.workflow_id,
        generation_id: c.generation_id,
        candidate_digest: c.candidate_digest,
        obligation_id: c.obligation_id,
        check_spec_id: c.check_spec_id,
        check_spec_digest: c.check_spec_digest,
        result: c.result,
        eligibility_version: c.eligibility_version,
        eligibility_state: c.eligibility_state,
        detail: c.detail.clone(),
    })
}

pub fn apply_recorded(state: &mut State, e: &EvidenceRecorded, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.evidence, e.evidence_id, "evidence")?;
    text("detail", &e.detail)?;
    let wf = live_workflow(state, e.workflow_id)?;
    let generation = get(&state.generations, e.generation_id, "generation")?;
    ensure!(
        generation.workflow_id == e.workflow_id && wf.active_generation == Some(e.generation_id),
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
    let record_digest = e.record_digest();
    state.evidence.insert(e.evidence_id, EvidenceState { record: e.clone(), record_digest, seq });
    Ok(())
}
