//! Repair: only from the exact current REJECT_REPAIRABLE decision with matching digests;
//! constraints preserved; the child starts from the parent's frozen bytes.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::Event;
use ledger_schema::events::GenerationOpened;
use replay_tests::world::{Stage, World};

fn repair(w: &mut World) -> RecordRepair {
    w.with(|s| s.repair_command())
}

/// Each digest of the repair must match the decision exactly.
#[test]
fn repair_binding() {
    let mut w = World::at(Stage::Rejected);
    let good = repair(&mut w);
    for field in 0..3 {
        let mut r = good.clone();
        match field {
            0 => r.decision_digest = digest_of("x"),
            1 => r.input_manifest_digest = digest_of("x"),
            _ => r.evidence_set_digest = digest_of("x"),
        }
        w.refused(Command::RecordRepair(r), Rule::RepairBinding);
    }
    w.ok(Command::RecordRepair(good));
    assert_eq!(w.ledger.state().generations[&lid(0x81)].sequence, 2);
}

/// A repair preserves exactly the Goal's preservation constraints: none dropped, none
/// added (outside review 16, P1: an invented constraint was admitted and reached the repair
/// worker as authoritative, citing a Goal revision that does not hold it), none twice.
#[test]
fn repair_constraints() {
    let mut w = World::at(Stage::Rejected);
    let good = repair(&mut w);
    assert!(!good.constraints_to_preserve.is_empty());
    let mut r = good.clone();
    r.constraints_to_preserve.clear();
    w.refused(Command::RecordRepair(r), Rule::RepairConstraints);
    let mut r = good.clone();
    r.constraints_to_preserve.push("and also an invented constraint".into());
    w.refused(Command::RecordRepair(r.clone()), Rule::RepairConstraints);
    // Through the admission step directly (what replay applies), too.
    let mut other = World::at(Stage::Rejected);
    other.ok(Command::RecordRepair(good.clone()));
    let ledger_schema::Event::RepairRecorded(mut e) = other.last_event("repairRecorded") else {
        unreachable!()
    };
    e.constraints_to_preserve.push("and also an invented constraint".into());
    e.repair_digest = e.computed_digest();
    w.forged(ledger_schema::Event::RepairRecorded(e), Rule::RepairConstraints);
    let mut r = good.clone();
    r.constraints_to_preserve.push(good.constraints_to_preserve[0].clone());
    w.refused(Command::RecordRepair(r), Rule::OutOfBounds);
    w.ok(Command::RecordRepair(good));
}

/// The constraints are a set, recorded in the Goal's order whatever order the command
/// lists them in: the repair digest and the repair package that cites it are one, however a
/// supervisor spelled the set (outside reviews 209 F4, 221 F3: each permutation recorded as
/// listed, and compiled to another package).
#[test]
fn repair_constraints_are_recorded_in_the_goals_order() {
    let constraints: Vec<String> =
        ["keep the public API", "alpha: keep the error enum", "zeta: keep the docs"]
            .map(str::to_owned)
            .into();
    let repaired = |order: &[usize]| {
        let mut w = World::at(Stage::Empty);
        let mut s = w.script();
        let goal = ledger_schema::events::GoalContent {
            preservation_constraints: constraints.clone(),
            ..goal_content()
        };
        s.setup_goal(policy_bundle(), goal).unwrap();
        s.discover_and_plan().unwrap();
        s.implement_first().unwrap();
        s.reject_first().unwrap();
        let mut r = s.repair_command();
        r.constraints_to_preserve = order.iter().map(|&i| constraints[i].clone()).collect();
        let first = s.run(Command::RecordRepair(r.clone())).unwrap();
        // The same command sent again is its redelivery, in whatever order it listed the set
        // (outside review 250 F1: listed otherwise than the Goal, it was refused as IdReused).
        let again = s.run(Command::RecordRepair(r)).unwrap();
        assert!(again.duplicate && again.seq == first.seq, "listed as {order:?}");
        s.advance(ledger_schema::types::Phase::Implement).unwrap();
        s.start(0x66, 0x67).unwrap();
        let Event::RepairRecorded(e) = w.last_event("repairRecorded") else { unreachable!() };
        let Event::AttemptStarted(child) = w.last_event("attemptStarted") else { unreachable!() };
        (e, child.manifest)
    };
    let (goal_order, package) = repaired(&[0, 1, 2]);
    assert_eq!(goal_order.constraints_to_preserve, constraints);
    for order in [[2, 1, 0], [1, 0, 2], [0, 2, 1]] {
        let (e, child) = repaired(&order);
        assert_eq!(e, goal_order, "listed as {order:?}");
        assert_eq!(child, package, "listed as {order:?}");
    }
}

/// Only the current REJECT_REPAIRABLE decision, and only once; never an ACCEPT.
#[test]
fn repair_decision() {
    let mut w = World::at(Stage::Rejected);
    let r = repair(&mut w);
    w.ok(Command::RecordRepair(r.clone()));
    let mut again = r;
    again.repair_id = lid(0xb1);
    again.child_generation_id = lid(0x83);
    w.refused(Command::RecordRepair(again), Rule::RepairDecision);
    let mut w = World::at(Stage::Accepted);
    let d = w.ledger.state().decisions[&lid(0xa1)].clone();
    w.refused(
        Command::RecordRepair(RecordRepair {
            repair_id: lid(0xb2),
            decision_id: lid(0xa1),
            decision_digest: d.decision_digest,
            input_manifest_digest: d.input_manifest_digest,
            evidence_set_digest: d.evidence_set_digest,
            child_generation_id: lid(0x84),
            constraints_to_preserve: goal_content().preservation_constraints,
        }),
        Rule::WorkflowClosed,
    );
}

/// A forged repair digest is refused.
#[test]
fn repair_digest() {
    let mut w = World::at(Stage::Rejected);
    let mut probe = World::at(Stage::Rejected);
    let r = repair(&mut probe);
    probe.ok(Command::RecordRepair(r));
    let Event::RepairRecorded(mut rec) = probe.last_event("repairRecorded") else { unreachable!() };
    rec.repair_digest = digest_of("x");
    w.forged(Event::RepairRecorded(rec), Rule::RepairDigest);
}

/// The child: sequence parent + 1 and base = the parent's frozen digest, or refused.
#[test]
fn repair_child() {
    let mut probe = World::at(Stage::Rejected);
    let r = repair(&mut probe);
    probe.ok(Command::RecordRepair(r));
    let Event::RepairRecorded(rec) = probe.last_event("repairRecorded") else { unreachable!() };
    let Event::GenerationOpened(child) = probe.last_event("generationOpened") else { unreachable!() };
    for bad in [
        GenerationOpened { base_digest: digest_of("not the parent's frozen bytes"), ..child.clone() },
        GenerationOpened { sequence: 3, ..child.clone() },
        GenerationOpened { parent: Some(lid(0x99)), ..child.clone() },
    ] {
        let mut w = World::at(Stage::Rejected);
        let err = w.forged_error(vec![Event::RepairRecorded(rec.clone()), Event::GenerationOpened(bad)]);
        assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::RepairChild), "{err}");
    }
}

/// A repair dispatch's context carries its failure feedback (seed: "For each repair
/// dispatch, the compiler MUST … render … a bounded feedback projection"; outside review
/// 60, P2: a policy whose IMPLEMENT phase leaves out WORKING dispatched a repair worker told
/// nothing of why the bytes failed): such a policy cannot start a workflow at all (outside
/// review 73: it was found out only at the repair, a dead end), naming the WORKING class.
/// (`RepairFeedback` stays the backstop at the repair's start.)
#[test]
fn a_repair_context_without_its_feedback_is_refused() {
    use ledger_schema::types::{InputClass, Phase};
    let mut bundle = policy_bundle();
    for p in bundle.phases.iter_mut().filter(|p| p.phase == Phase::Implement) {
        p.optional.retain(|c| *c != InputClass::Working);
        p.required.retain(|c| *c != InputClass::Working);
    }
    let mut w = World::at(Stage::Empty);
    let err = w.with(|s| s.setup_with(bundle)).unwrap_err();
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PolicyBounds), "{err}");
    assert!(err.to_string().contains("does not take the WORKING class"), "{err}");
    // With WORKING allowed (the shipped policy) the same repair dispatch is admitted.
    let mut w = World::at(Stage::Rejected);
    w.with(|s| {
        let repair = s.repair_command();
        s.run(Command::RecordRepair(repair))?;
        s.advance(Phase::Implement)?;
        s.start(0x66, 0x67)
    })
    .unwrap();
}

/// A FAIL recorded after a REJECT_REPAIRABLE decision (admitted whenever it arrives) is not
/// in the decision's Evidence Set, and a repair's worker is given the decision's failures
/// only: the repair is refused, naming it, and the generation may be decided again — the new
/// decision supersedes the old, carries the FAIL, and is the one repaired (outside review
/// 186 F1: the repair was admitted and its worker never heard of the second failure, while a
/// new decision was refused as `AlreadyDecided`). It cannot ACCEPT, and without such a FAIL
/// a second decision stays refused.
#[test]
fn a_fail_after_the_decision_is_decided_again_before_a_repair() {
    let mut w = World::at(Stage::Rejected);
    let decide = |id: u128, verdict: ledger_schema::types::Verdict| {
        Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(id),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict,
            evidence_ids: None,
            reasons: vec!["checks failed".to_owned()],
        })
    };
    use ledger_schema::types::{CheckResult, Verdict};
    w.refused(decide(0xa2, Verdict::RejectRepairable), Rule::AlreadyDecided);
    let stale = repair(&mut w);
    w.with(|s| {
        s.evidence(
            0x92,
            0x80,
            CheckResult::Fail,
            "parser::trailing failed again: TrailingBytes lost its offset",
        )
    })
    .unwrap();
    let err = w.fails(Command::RecordRepair(stale.clone()));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::RepairDecision), "{err}");
    assert!(err.to_string().contains("recorded after decision"), "{err}");
    // Through the admission step directly (what replay applies), too.
    let mut other = World::at(Stage::Rejected);
    let r = repair(&mut other);
    other.ok(Command::RecordRepair(r));
    let Event::RepairRecorded(forged) = other.last_event("repairRecorded") else { unreachable!() };
    w.forged(Event::RepairRecorded(forged), Rule::RepairDecision);
    // Decided again: never ACCEPT over the FAIL, a REJECT_REPAIRABLE supersedes.
    w.refused(decide(0xa3, Verdict::Accept), Rule::Verdict);
    w.ok(decide(0xa2, Verdict::RejectRepairable));
    let s = w.ledger.state();
    assert_eq!(s.generations[&lid(0x80)].decision, Some(lid(0xa2)));
    assert!(s.decisions[&lid(0xa2)].evidence.contains(&lid(0x92)), "the new decision carries the late FAIL");
    // The old decision is no longer the one a repair binds; the new one is.
    w.refused(Command::RecordRepair(stale.clone()), Rule::RepairDecision);
    w.refused(decide(0xa4, Verdict::RejectRepairable), Rule::AlreadyDecided);
    let d = w.ledger.state().decisions[&lid(0xa2)].clone();
    w.ok(Command::RecordRepair(RecordRepair {
        decision_id: lid(0xa2),
        decision_digest: d.decision_digest,
        input_manifest_digest: d.input_manifest_digest,
        evidence_set_digest: d.evidence_set_digest,
        ..stale
    }));
}
