//! Evidence: only in EVIDENCE_BUILD, for the exact active, frozen Candidate generation and
//! its obligation's exact check specification; eligibility is the ledger's.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use closure_ledger::store::Store;
use ledger_schema::Event;
use ledger_schema::types::{CheckResult, Eligibility, Phase, Verdict};
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
        detail: "parser::trailing passed".into(),
    })
}

const SPEC: &str = "check: cargo test parser::trailing";

/// Generation 0x80 frozen, the workflow in EVIDENCE_BUILD.
fn building() -> World {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
    w
}

/// Evidence for another Candidate digest, or a generation that is not the active one, is refused.
#[test]
fn evidence_candidate() {
    let mut w = building();
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
    let mut w = building();
    w.refused(record(0x80, "candidate 1", "another check"), Rule::EvidenceObligation);
    w.ok(record(0x80, "candidate 1", SPEC));
}

/// Evidence is recorded only in EVIDENCE_BUILD: not in IMPLEMENT after the freeze, not in
/// FINAL_VERIFY (where it would change the set under decision), and not after a decision.
#[test]
fn evidence_phase() {
    let mut w = World::at(Stage::Frozen);
    w.refused(record(0x80, "candidate 1", SPEC), Rule::EvidencePhase);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")?;
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    w.refused(record(0x80, "candidate 1", SPEC), Rule::EvidencePhase);
    let mut w = World::at(Stage::Rejected);
    w.refused(record(0x80, "candidate 1", SPEC), Rule::EvidencePhase);
    // The same command is admitted in EVIDENCE_BUILD.
    let mut w = building();
    w.ok(record(0x80, "candidate 1", SPEC));
}

/// The command cannot choose eligibility (the fields are unknown), and a forged record with
/// any eligibility other than the ledger's (version 1, ELIGIBLE) is refused.
#[test]
fn evidence_eligibility_is_derived() {
    let json = r#"{"recordEvidence":{"evidenceId":"01JC000000000000000000004G","workflowId":"01JC000000000000000000001G","generationId":"01JC0000000000000000000040","candidateDigest":"b3:b1845aec9d19496ee787e6103a8f679fef464e72e4e3f8ce727f2d557c8c1b35","obligationId":"01JC0000000000000000000020","checkSpecId":"01JC0000000000000000000021","checkSpecDigest":"b3:8c023cdb869668adaeea311597c0aab6b3e3d4efed9b2541ffc96c4333239634","result":"PASS","eligibilityVersion":3,"eligibilityState":"ELIGIBLE","detail":"x"}}"#;
    assert!(serde_json::from_str::<Command>(json).is_err(), "eligibility is not a command field");

    let mut probe = building();
    probe.ok(record(0x80, "candidate 1", SPEC));
    let Event::EvidenceRecorded(good) = probe.last_event("evidenceRecorded") else { unreachable!() };
    assert_eq!((good.eligibility_version, good.eligibility_state), (1, Eligibility::Eligible));
    let mut w = building();
    for (version, state) in [
        (0, Eligibility::Eligible),
        (3, Eligibility::Eligible),
        (2, Eligibility::Ineligible),
        (1, Eligibility::Ineligible),
    ] {
        let mut e = good.clone();
        e.eligibility_version = version;
        e.eligibility_state = state;
        w.forged(Event::EvidenceRecorded(e), Rule::EvidenceEligibility);
    }
}

/// Eligibility changes when the generation the Evidence was built for stops being the
/// active one (a repair child opens): INELIGIBLE, one version later. The decision that
/// used it is unchanged.
#[test]
fn eligibility_changes_when_the_generation_is_superseded() {
    let mut w = World::at(Stage::Rejected);
    let before = w.ledger.state().evidence.get(&lid(0x90)).cloned().unwrap();
    assert_eq!((before.eligibility, before.eligibility_version), (Eligibility::Eligible, 1));
    let decision = w.ledger.state().decisions.get(&lid(0xa0)).cloned().unwrap();
    w.with(|s| {
        let r = s.repair_command();
        s.run(Command::RecordRepair(r))
    })
    .unwrap();
    let after = w.ledger.state().evidence.get(&lid(0x90)).cloned().unwrap();
    assert_eq!((after.eligibility, after.eligibility_version), (Eligibility::Ineligible, 2));
    assert_eq!(after.record, before.record, "the record itself never changes");
    let now = w.ledger.state().decisions.get(&lid(0xa0)).cloned().unwrap();
    assert_eq!(
        (now.evidence, now.evidence_set_digest, now.decision_digest),
        (decision.evidence, decision.evidence_set_digest, decision.decision_digest)
    );
    assert!(closure_ledger::runtime::evidence_set(w.ledger.state(), lid(0x80)).is_empty());
}

/// A re-run supersedes a runner ERROR of the same check on the same generation (the ERROR
/// becomes INELIGIBLE, version 2), so the re-run can decide; a FAIL is never superseded:
/// a later PASS leaves it in the set, and ACCEPT stays refused.
#[test]
fn eligibility_changes_when_an_error_is_rerun() {
    let decide = |verdict| {
        Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa5),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict,
            evidence_ids: None,
            reasons: vec!["decided".into()],
        })
    };
    let mut w = building();
    w.with(|s| {
        s.evidence(0x90, 0x80, CheckResult::Error, "runner timed out")?;
        s.evidence(0x91, 0x80, CheckResult::Pass, "passed on re-run")?;
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    let error = w.ledger.state().evidence.get(&lid(0x90)).cloned().unwrap();
    assert_eq!((error.eligibility, error.eligibility_version), (Eligibility::Ineligible, 2));
    assert_eq!(closure_ledger::runtime::evidence_set(w.ledger.state(), lid(0x80)), vec![lid(0x91)]);
    w.ok(decide(Verdict::Accept));

    let mut w = building();
    w.with(|s| {
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")?;
        s.evidence(0x91, 0x80, CheckResult::Pass, "passed on re-run")?;
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    assert_eq!(
        closure_ledger::runtime::evidence_set(w.ledger.state(), lid(0x80)),
        vec![lid(0x90), lid(0x91)]
    );
    w.refused(decide(Verdict::Accept), Rule::Verdict);
    w.ok(decide(Verdict::RejectRepairable));
}

/// The Evidence Set a decision cites holds at most 128 records: a 129th passing record is
/// refused when it is recorded, so a set ACCEPT could stand on can always be decided
/// (outside review 55). A passing re-run of a check that already passed is refused (it
/// adds nothing), and a failing or erring record is never refused for room below 256: at
/// the bound, refusing it left ACCEPT standing on the passes over a failure the ledger did
/// not record (outside review 81). Past 128 no verdict can cite the set; the workflow is
/// cancelled.
#[test]
fn a_passing_rerun_is_refused_and_leaves_room_for_a_failure() {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        // A runner ERROR is superseded by the re-run that follows it.
        s.evidence(0x1000, 0x80, CheckResult::Error, "runner crashed")?;
        s.evidence(0x1001, 0x80, CheckResult::Pass, "passed").map(drop)
    })
    .unwrap();
    let err = w.with(|s| s.evidence(0x1002, 0x80, CheckResult::Pass, "passed again")).unwrap_err();
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::EvidenceRepeated), "{err}");
    // A runner ERROR after the pass holds ACCEPT back until a re-run passes: that re-run is
    // recorded (outside review 82: it was refused as repeated, and the ERROR stood for good).
    w.with(|s| s.evidence(0x1004, 0x80, CheckResult::Error, "runner crashed")).unwrap();
    w.with(|s| s.advance(Phase::FinalVerify)).unwrap();
    w.refused(decide(Verdict::Accept), Rule::RunnerError);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x1005, 0x80, CheckResult::Pass, "passed on re-run").map(drop)
    })
    .unwrap();
    // A failing re-run is recorded.
    w.with(|s| s.evidence(0x1003, 0x80, CheckResult::Fail, "failed")).unwrap();
    w.with(|s| s.advance(Phase::FinalVerify)).unwrap();
    w.refused(decide(Verdict::Accept), Rule::Verdict);

    // 128 obligations, each passed once: the set is full, and a failing re-run is still
    // recorded (the 129th); no verdict can cite that set, so the workflow is cancelled.
    let mut w = World::at(Stage::Setup);
    for i in 1..128u128 {
        w.ok(Command::RecordObligation(RecordObligation {
            obligation_id: lid(0x2000 + i),
            goal_id: lid(GOAL),
            description: format!("check {i} passes"),
            check_spec_id: lid(0x3000 + i),
            check_spec_digest: digest_of(&format!("check {i}")),
        }));
    }
    let record = |id: u128, obligation: u128, spec: u128, digest: &str, result: CheckResult| {
        Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(id),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            candidate_digest: digest_of("candidate 1"),
            obligation_id: lid(obligation),
            check_spec_id: lid(spec),
            check_spec_digest: digest_of(digest),
            result,
            detail: "ran".into(),
        })
    };
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x1000, 0x80, CheckResult::Pass, "passed").map(drop)
    })
    .unwrap();
    for i in 1..128u128 {
        w.ok(record(0x4000 + i, 0x2000 + i, 0x3000 + i, &format!("check {i}"), CheckResult::Pass));
    }
    w.ok(record(0x5000, 0x2001, 0x3001, "check 1", CheckResult::Fail));
    w.with(|s| s.advance(Phase::FinalVerify)).unwrap();
    for verdict in [Verdict::Accept, Verdict::RejectRepairable, Verdict::RejectTerminal] {
        let err = w.fails(decide(verdict));
        assert!(replay_tests::world::rule_of(&err).is_some(), "{verdict:?}: {err}");
    }
    w.ok(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(WORKFLOW),
        workflow_version: w.ledger.state().workflows[&lid(WORKFLOW)].version,
        reason: "more records than a decision can cite".into(),
    }));
}

/// A goal holds at most 128 obligations in force — each needs its own passing Evidence
/// record, and a decision cites at most 128 — so a 129th is refused when it is recorded,
/// before any work is dispatched (outside review 67: it was admitted and run, and then only
/// REJECT_TERMINAL was left); a retired obligation frees its place.
#[test]
fn a_goal_holds_no_more_obligations_than_a_decision_can_cite_evidence_for() {
    let obligation = |i: u128| {
        Command::RecordObligation(RecordObligation {
            obligation_id: lid(0x2000 + i),
            goal_id: lid(GOAL),
            description: format!("check {i} passes"),
            check_spec_id: lid(0x3000 + i),
            check_spec_digest: digest_of(&format!("check {i}")),
        })
    };
    let mut w = World::at(Stage::Setup);
    for i in 1..128 {
        w.ok(obligation(i));
    }
    let err = w.fails(obligation(128));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(err.to_string().contains("128 obligations in force"), "{err}");
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.ok(Command::RetireObligation(RetireObligation {
        obligation_id: lid(0x2001),
        reason: "restated".into(),
    }));
    w.ok(obligation(128));
    w.fails(obligation(129));
}

/// A failing record reaches a repair worker as one FAILED_CHECK feedback item, and seed 000
/// says "required authoritative failure records are never truncated into feedback": a
/// repair whose feedback cannot carry every current failure whole — one item over
/// `maxItemBytes`, or all of them over the other limits — is refused at the
/// REJECT_REPAIRABLE decision (REJECT_TERMINAL remains), not found out at the repair, where
/// it was left out or refused every repair Attempt (outside reviews 67, 70, 71). The failure
/// itself is always recorded: refused, a passing re-run of the same check took its place
/// (outside reviews 146 F4, 150 F1).
#[test]
fn a_failing_record_that_feedback_cannot_carry_whole_is_refused() {
    let long = "trace line\n".repeat(400); // 4,400 bytes: over the reference policy's 4,096
    // One failure too long for a feedback item: recorded; the repair is refused.
    let mut w = World::at(Stage::Frozen);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, &long)?;
        // A flaky re-run passes: recorded beside the failure, which still stands.
        s.evidence(0x94, 0x80, CheckResult::Pass, "passed on a re-run")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    w.refused(decide(Verdict::Accept), Rule::Verdict);
    let before = w.ledger.store().head();
    let err = w.fails(decide(Verdict::RejectRepairable));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(
        err.to_string().contains("maxItemBytes (4096)") && err.to_string().contains("REJECT_TERMINAL"),
        "{err}"
    );
    assert_eq!(w.ledger.store().head(), before, "nothing written");
    w.ok(decide(Verdict::RejectTerminal));

    let mut w = World::at(Stage::Frozen);
    w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
    w.with(|s| s.evidence(0x91, 0x80, CheckResult::Error, &long)).unwrap();
    w.with(|s| s.evidence(0x92, 0x80, CheckResult::Pass, &long)).unwrap();
    w.with(|s| s.evidence(0x93, 0x80, CheckResult::Fail, &"trace line\n".repeat(300))).unwrap();
    // Several failures together: each fits, but the repair's feedback must hold them all
    // whole, beside the parent change set and the preservation constraint (outside review
    // 71: five 3.9 KB failures were admitted and the repair carried four). Each failure is
    // recorded, and the REJECT_REPAIRABLE decision, whose repair could not carry them, is
    // refused; REJECT_TERMINAL remains.
    for i in 0..8u128 {
        w.with(|s| s.evidence(0xa0 + i, 0x80, CheckResult::Fail, &"trace line\n".repeat(300))).unwrap();
    }
    w.with(|s| s.advance(Phase::FinalVerify)).unwrap();
    w.refused(decide(Verdict::Accept), Rule::Verdict);
    let before = w.ledger.store().head();
    let err = w.fails(decide(Verdict::RejectRepairable));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(
        err.to_string().contains("maxTotalBytes (16384)") && err.to_string().contains("REJECT_TERMINAL"),
        "{err}"
    );
    assert_eq!(w.ledger.store().head(), before, "nothing written");
    w.ok(decide(Verdict::RejectTerminal));
}

/// A failure the repair's feedback has no room for is recorded, and a passing re-run of the
/// same check on the same generation cannot stand in for it (outside review 146 F4: with
/// `maxItems` 3 the second check's FAIL was refused "for room", its flaky re-run PASS
/// admitted, and the REJECT_REPAIRABLE's repair told only of the first failure).
#[test]
fn a_failure_without_room_in_the_feedback_is_recorded_not_laundered() {
    let mut bundle = policy_bundle();
    // One failed check, the parent change set and the goal's one constraint: three items.
    bundle.feedback.max_items = 3;
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(bundle)?;
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "parser::trailing failed")?;
        // A second failure: four items, over maxItems — recorded all the same.
        s.evidence(0x91, 0x80, CheckResult::Fail, "parser::nested failed")?;
        // A flaky re-run passes: recorded, and the failures still stand beside it.
        s.evidence(0x92, 0x80, CheckResult::Pass, "passed on a re-run")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    let set = closure_ledger::runtime::evidence_set(w.ledger.state(), lid(0x80));
    assert_eq!(set, vec![lid(0x90), lid(0x91), lid(0x92)]);
    w.refused(decide(Verdict::Accept), Rule::Verdict);
    let err = w.fails(decide(Verdict::RejectRepairable));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(err.to_string().contains("4 items are over its maxItems (3)"), "{err}");
    w.ok(decide(Verdict::RejectTerminal));
}

/// A workflow runs only under a policy whose feedback limits hold a repair of its goal whole
/// — one failed check, the parent change set and the goal's preservation constraints —
/// else every failing record (or every repair) would be refused (outside review 71:
/// `maxItems` 1, a constraint longer than `maxItemBytes`).
#[test]
fn a_workflow_needs_feedback_limits_that_hold_a_repair_of_its_goal() {
    let start = |policy: u128| {
        Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(0x39),
            goal_id: lid(GOAL),
            goal_revision: 1,
            policy_id: lid(policy),
            profile_id: lid(PROFILE),
            plan: None,
        })
    };
    let mut w = World::at(Stage::Setup);
    for (id, edit) in [
        (0x17u128, (|b: &mut ledger_schema::events::PolicyBundle| b.feedback.max_items = 1) as fn(&mut _)),
        (0x18, |b| b.feedback.max_item_bytes = 100),
        (0x19, |b| b.feedback.max_total_bytes = 300),
        // The repair's feedback travels in the WORKING class (outside review 73: IMPLEMENT
        // without WORKING, a WORKING budget too small — every repair was refused).
        (0x1a, |b| {
            for p in &mut b.phases {
                p.optional.retain(|c| *c != ledger_schema::types::InputClass::Working);
                p.required.retain(|c| *c != ledger_schema::types::InputClass::Working);
            }
        }),
        (0x1b, |b| {
            b.budgets.retain(|x| x.class != ledger_schema::types::InputClass::Working);
            b.budgets.push(ledger_schema::events::ClassBudget {
                class: ledger_schema::types::InputClass::Working,
                max_bytes: 100,
            });
            b.budgets.sort_by_key(|x| x.class);
        }),
    ] {
        let mut bundle = policy_bundle();
        edit(&mut bundle);
        w.ok(Command::InstallPolicy(InstallPolicy { policy_id: lid(id), bundle }));
        let err = w.fails(start(id));
        assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PolicyBounds), "{err}");
        assert!(err.to_string().contains("cannot carry a repair of goal"), "{err}");
    }
    w.ok(start(POLICY));
}

/// The runtime's WORKING default budget is the compiler's default class budget (the repair
/// feedback check at `recordEvidence` and `startWorkflow` sizes against it).
#[test]
fn the_runtimes_working_default_is_the_compilers() {
    assert_eq!(
        closure_ledger::runtime::DEFAULT_WORKING_BUDGET_BYTES,
        closure_ledger::compiler::DEFAULT_CLASS_BUDGET_BYTES
    );
}

/// A REJECT_REPAIRABLE is refused when the repair it would lead to could never start for want
/// of room in its context — the repair child's start is compiled on a copy (the repair
/// record, IMPLEMENT) — here an IDENTITY budget that holds every ordinary start but not the
/// repair context the failure adds (outside review 75: a REJECT_REPAIRABLE was recorded
/// whose repair no Attempt could start). The failure itself is recorded (outside review 81).
#[test]
fn a_repair_that_could_never_start_is_refused_at_the_decision() {
    use ledger_schema::types::InputClass;
    // The smallest IDENTITY budget the reference flow starts every ordinary Attempt under.
    let mut chosen = None;
    for budget in (600..4_000).step_by(100) {
        let mut bundle = policy_bundle();
        bundle.budgets.retain(|b| b.class != InputClass::Identity);
        bundle
            .budgets
            .push(ledger_schema::events::ClassBudget { class: InputClass::Identity, max_bytes: budget });
        bundle.budgets.sort_by_key(|b| b.class);
        let mut w = World::at(Stage::Empty);
        let ok = w
            .with(|s| {
                s.setup_with(bundle.clone())?;
                s.discover_and_plan()?;
                s.implement_first()
            })
            .is_ok();
        if ok {
            chosen = Some((w, budget));
            break;
        }
    }
    let (mut w, budget) = chosen.expect("some budget holds the ordinary starts");
    // The failure is recorded — refused, it left ACCEPT standing on an earlier pass of the
    // same check (outside review 81) — after a pass of the same check, which it then rules
    // out; the REJECT_REPAIRABLE whose repair could never start is refused, naming the way
    // out, and REJECT_TERMINAL is recorded.
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x8f, 0x80, CheckResult::Pass, "passed")?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    w.refused(decide(Verdict::Accept), Rule::Verdict);
    let err = w.fails(decide(Verdict::RejectRepairable));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "budget {budget}: {err}");
    assert!(
        err.to_string().contains("could never start")
            && err.to_string().contains("IDENTITY")
            && err.to_string().contains("REJECT_TERMINAL"),
        "{err}"
    );
    w.ok(decide(Verdict::RejectTerminal));
    // Under the reference policy the same failure is admitted — also while a blocker over
    // its class's budget is open (outside review 76: a class a failure does not grow refused
    // the record; the repair's own start meets and names it).
    let mut w = World::at(Stage::Frozen);
    w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
    w.ok(Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xe9),
        workflow_id: lid(WORKFLOW),
        description: "wait for the schema review ".repeat(1_600),
    }));
    w.with(|s| s.evidence(0x90, 0x80, CheckResult::Fail, "failed")).unwrap();
}

/// A REJECT_REPAIRABLE whose repair's start could never be sealed — the goal's contexts
/// list so many omissions that the start entry is over the entry bound — is refused at the
/// decision, REJECT_TERMINAL remaining (outside review 156 F2: it was admitted, and the
/// repair's start then refused).
#[test]
fn a_repair_whose_start_could_not_be_sealed_is_refused_at_the_decision() {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    // Each withdrawn decision is an omission, with its reason, in every later context.
    let reason = "asked of the wrong goal; ".repeat(40);
    for i in 0..1_000u128 {
        let id = 0x10_0000 + i;
        w.ok(Command::RecordHumanDecision(RecordHumanDecision {
            decision_id: lid(id),
            goal_id: lid(GOAL),
            question: format!("Question number {i}?"),
            answer: "No.".into(),
            decided_by: "human:alice".into(),
            supersedes: None,
        }));
        w.ok(Command::WithdrawHumanDecision(WithdrawHumanDecision {
            decision_id: lid(id),
            reason: reason.clone(),
            withdrawn_by: "human:alice".into(),
        }));
    }
    let err = w.fails(decide(Verdict::RejectRepairable));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(err.to_string().contains("its start entry would be"), "{err}");
    w.ok(decide(Verdict::RejectTerminal));
}

/// Decision 0xa0 on generation 0x80 of the reference workflow, over the computed set.
pub(super) fn decide(verdict: Verdict) -> Command {
    Command::DecideAcceptance(DecideAcceptance {
        decision_id: lid(0xa0),
        workflow_id: lid(WORKFLOW),
        generation_id: lid(0x80),
        verdict,
        evidence_ids: None,
        reasons: vec!["decided".into()],
    })
}
