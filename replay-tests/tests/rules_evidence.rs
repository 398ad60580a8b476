//! Evidence: only for the exact active, frozen Candidate generation and its obligation's
//! exact check specification.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::types::{CheckResult, Eligibility};
use replay_tests::world::{Stage, World};

fn record(generation: u128, candidate: &str, check_spec: &str) -> Command {
    Command::RecordEvidence(RecordEvidence {
        evidence_id: lid(0x92),
        workflow_id: lid(WORKFLOW),
        generation_id: lid(generation),
        candidate_digest: digest_of(candidate),
        obligation_id: lid(OBLIGATION),
        check_spec_id: lid(CHECK_SPEC),
        check_spec_digest: digest_of(check_spec),
        result: CheckResult::Pass,
        eligibility_version: 1,
        eligibility_state: Eligibility::Eligible,
        detail: String::new(),
    })
}

const SPEC: &str = "check: cargo test parser::trailing";

/// Evidence for another Candidate digest, or a generation that is not the active one, is refused.
#[test]
fn evidence_candidate() {
    let mut w = World::at(Stage::Frozen);
    w.refused(record(0x80, "candidate 2", SPEC), Rule::EvidenceCandidate);
    let mut w = World::at(Stage::Accepted);
    w.refused(record(0x80, "candidate 1", SPEC), Rule::WorkflowClosed);
    let mut w = World::at(Stage::Rejected);
    w.with(|s| {
        let r = s.repair_command();
        s.run(Command::RecordRepair(r))
    })
    .unwrap();
    w.refused(record(0x80, "candidate 1", SPEC), Rule::EvidenceCandidate);
}

/// Evidence needs a frozen generation.
#[test]
fn generation_not_frozen() {
    let mut w = World::at(Stage::Implementing);
    w.refused(record(0x80, "repo@9f1c2e0", SPEC), Rule::GenerationNotFrozen);
}

/// Evidence names its obligation's exact check specification.
#[test]
fn evidence_obligation() {
    let mut w = World::at(Stage::Frozen);
    w.refused(record(0x80, "candidate 1", "another check"), Rule::EvidenceObligation);
    w.ok(record(0x80, "candidate 1", SPEC));
}
