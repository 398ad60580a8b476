//! Idempotent redelivery of every command (issue #13 item 10): exactly the same command
//! (same ids, same content) resubmitted returns the original receipt — `duplicate`, the
//! original seq and hash — and writes nothing; the same key with other content is refused
//! and writes nothing; after a reopen (the receipt index is rebuilt by the replay fold) both
//! still hold, for every command ever admitted, at any later time.

use std::collections::BTreeSet;
use std::path::Path;

use closure_ledger::Refusal;
use closure_ledger::ledger::{Ledger, Receipt, SubmitError};
use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Ctx, Rule};
use closure_ledger::store::{self, DiskStore, Store};
use ledger_schema::types::{Phase, ThreadChoice};
use replay_tests::world::{Stage, World, rule_of};
use replay_tests::{LEDGER, T0, cli};

/// Every command kind (`Command::kind`), so the tests can show they cover each.
const KINDS: [&str; 33] = [
    "installPolicy",
    "installProfile",
    "createGoal",
    "reviseGoal",
    "startWorkflow",
    "advancePhase",
    "proposeFact",
    "confirmFact",
    "invalidateFact",
    "recordHumanDecision",
    "recordProjectSource",
    "recordScenario",
    "retireScenario",
    "retireObligation",
    "recordObligation",
    "raiseBlocker",
    "resolveBlocker",
    "openGeneration",
    "freezeGeneration",
    "startAttempt",
    "claimDispatch",
    "deliverWorkerEvent",
    "finishAttempt",
    "failAttempt",
    "cancelAttempt",
    "recordEvidence",
    "decideAcceptance",
    "recordRepair",
    "cancelWorkflow",
    "restartAttempt",
    "requestCompaction",
    "withdrawProjectSource",
    "withdrawHumanDecision",
];

/// The commands of the reference lifecycle, in order.
fn lifecycle_commands() -> Vec<Command> {
    let mut w = World::at(Stage::Empty);
    let log = w.with(|s| {
        s.lifecycle().unwrap();
        std::mem::take(&mut s.log)
    });
    log.into_iter().map(|(c, _)| c).collect()
}

/// The commands of the setup stage, in order.
fn setup_commands() -> Vec<Command> {
    let mut w = World::at(Stage::Empty);
    let log = w.with(|s| {
        s.setup().unwrap();
        std::mem::take(&mut s.log)
    });
    log.into_iter().map(|(c, _)| c).collect()
}

/// The kinds the lifecycle does not use, on a workflow in DISCOVERY: a blocker raised and
/// resolved, a fact invalidated, an Attempt failed, one cancelled, one restarted, the goal
/// revised, the workflow cancelled. Built step by step (claims read the ledger's state).
fn other_commands(w: &mut World, each: &mut dyn FnMut(&mut World, Command)) {
    let wf = lid(WORKFLOW);
    let start = |attempt: u128| {
        Command::StartAttempt(StartAttempt {
            attempt_id: lid(attempt),
            workflow_id: wf,
            worker_session_id: lid(attempt + 1),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        })
    };
    let claim = |w: &World, attempt: u128| {
        Command::ClaimDispatch(ClaimDispatch::for_attempt(w.ledger.state(), lid(attempt)).unwrap())
    };
    each(
        w,
        Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0x200),
            workflow_id: wf,
            description: "CI is red".into(),
        }),
    );
    each(
        w,
        Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0x200), resolution: "fixed by #42".into() }),
    );
    each(
        w,
        Command::InvalidateFact(InvalidateFact {
            fact_id: lid(0x51),
            revision: 1,
            reason: "not affected".into(),
            invalidated_by: None,
        }),
    );
    each(w, start(0x210));
    each(
        w,
        Command::FailAttempt(FailAttempt { attempt_id: lid(0x210), reason: "the worker crashed".into() }),
    );
    each(w, start(0x212));
    let c = claim(w, 0x212);
    each(w, c);
    each(
        w,
        Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(0x212),
            workflow_version: 1,
            reason: "stop".into(),
        }),
    );
    each(w, start(0x214));
    let c = claim(w, 0x214);
    each(w, c);
    each(
        w,
        Command::RequestCompaction(closure_ledger::runtime::command::RequestCompaction {
            directive_id: lid(0x218),
            attempt_id: lid(0x214),
        }),
    );
    each(
        w,
        Command::RestartAttempt(RestartAttempt {
            attempt_id: lid(0x214),
            workflow_version: 1,
            replacement_attempt_id: lid(0x216),
            worker_session_id: lid(0x217),
            reason: "supervisor restarted".into(),
        }),
    );
    let mut content = goal_content();
    content.objective = "Reject trailing bytes and trailing whitespace.".into();
    each(w, Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content }));
    each(w, Command::RetireScenario(RetireScenario { scenario_id: lid(0x42), reason: "revised".into() }));
    each(
        w,
        Command::WithdrawProjectSource(WithdrawProjectSource {
            source_id: lid(0x43),
            reason: "the file was deleted".into(),
        }),
    );
    each(
        w,
        Command::WithdrawHumanDecision(WithdrawHumanDecision {
            decision_id: lid(0x52),
            reason: "asked of the wrong goal".into(),
            withdrawn_by: "human:alice".into(),
        }),
    );
    each(
        w,
        Command::RetireObligation(RetireObligation {
            obligation_id: lid(OBLIGATION),
            reason: "revised".into(),
        }),
    );
    each(
        w,
        Command::CancelWorkflow(CancelWorkflow {
            workflow_id: wf,
            workflow_version: 1,
            reason: "the goal changed".into(),
        }),
    );
}

/// The same key (ids, version) with other content, and the rule that refuses it (`None`: a
/// worker event's conflict, which names the original seq).
fn conflicting(c: &Command) -> (Command, Option<Rule>) {
    let mut c = c.clone();
    let rule = match &mut c {
        Command::InstallPolicy(c) => {
            c.bundle.invariants.push("another invariant".into());
            Some(Rule::IdReused)
        }
        Command::InstallProfile(c) => {
            c.profile.name.push_str("-other");
            Some(Rule::IdReused)
        }
        Command::CreateGoal(c) => {
            c.content.objective.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::ReviseGoal(c) => {
            c.content.objective.push_str(" (other)");
            Some(Rule::GoalRevisionNotNext)
        }
        Command::StartWorkflow(c) => {
            c.plan = Some(plan_pair());
            Some(Rule::IdReused)
        }
        Command::AdvancePhase(c) => {
            c.phase = if c.phase == Phase::Discovery { Phase::Plan } else { Phase::Discovery };
            None
        }
        Command::ProposeFact(c) => {
            c.statement.push_str(" (other)");
            Some(Rule::FactStatus)
        }
        Command::ConfirmFact(c) => {
            c.confirmed_by = "human:bob".into();
            Some(Rule::FactStatus)
        }
        Command::InvalidateFact(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::FactStatus)
        }
        Command::RecordHumanDecision(c) => {
            c.answer.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::RecordProjectSource(c) => {
            c.content.push_str("// other\n");
            Some(Rule::IdReused)
        }
        Command::RecordScenario(c) => {
            c.title.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::RecordObligation(c) => {
            c.description.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::RaiseBlocker(c) => {
            c.description.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::ResolveBlocker(c) => {
            c.resolution.push_str(" (other)");
            Some(Rule::BlockerResolved)
        }
        Command::OpenGeneration(c) => {
            c.base_digest = digest_of("other base");
            Some(Rule::IdReused)
        }
        Command::FreezeGeneration(c) => {
            c.candidate_digest = digest_of("other candidate");
            Some(Rule::GenerationNotMutable)
        }
        Command::StartAttempt(c) => {
            c.worker_session_id = lid(0x3ff);
            None
        }
        Command::ClaimDispatch(c) => {
            c.package_digest = digest_of("other package");
            None
        }
        Command::DeliverWorkerEvent(c) => {
            c.payload.text.push_str(" (other)");
            None
        }
        Command::FinishAttempt(c) => {
            c.summary.push_str(" (other)");
            Some(Rule::AttemptNotActive)
        }
        Command::FailAttempt(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::AttemptNotActive)
        }
        Command::CancelAttempt(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::AttemptNotActive)
        }
        Command::RecordEvidence(c) => {
            c.detail.push_str(" (other)");
            Some(Rule::IdReused)
        }
        Command::DecideAcceptance(c) => {
            c.reasons.push("another reason".into());
            None
        }
        Command::RecordRepair(c) => {
            c.constraints_to_preserve.push("another constraint".into());
            None
        }
        Command::CancelWorkflow(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::WorkflowClosed)
        }
        Command::RestartAttempt(c) => {
            c.reason.push_str(" (other)");
            None
        }
        Command::RetireScenario(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::RequirementRetired)
        }
        Command::WithdrawProjectSource(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::SourceWithdrawn)
        }
        Command::WithdrawHumanDecision(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::DecisionWithdrawn)
        }
        Command::RetireObligation(c) => {
            c.reason.push_str(" (other)");
            Some(Rule::RequirementRetired)
        }
        Command::RequestCompaction(c) => {
            c.attempt_id = lid(0x212);
            Some(Rule::IdReused)
        }
    };
    (c, rule)
}

/// Submits `c` (admitted), then exactly `c` again: the original receipt, nothing written.
fn admitted_then_duplicate(w: &mut World, c: &Command) -> Receipt {
    let first = w.ok(c.clone());
    let frames = w.ledger.store().frames().to_vec();
    let state = w.ledger.state().clone();
    let again = w.ok(c.clone());
    assert!(again.duplicate, "{}: not a duplicate: {again:?}", c.kind());
    assert_eq!(
        (again.seq, again.hash, again.ignored),
        (first.seq, first.hash, first.ignored),
        "{}",
        c.kind()
    );
    assert_eq!(w.ledger.store().frames(), frames.as_slice(), "{}: a duplicate wrote bytes", c.kind());
    assert_eq!(*w.ledger.state(), state, "{}: a duplicate changed the state", c.kind());
    first
}

/// Submits the conflicting variant of `c`: refused (by its rule), nothing written.
fn conflict_refused(w: &mut World, c: &Command) {
    let (other, rule) = conflicting(c);
    assert_ne!(other, *c);
    let err = w.fails(other);
    assert!(err.is_refusal(), "{}: {err}", c.kind());
    match (c, rule) {
        (Command::DeliverWorkerEvent(_), _) => {
            assert!(matches!(err, SubmitError::Refused(Refusal::Conflict { .. })), "{err}");
        }
        (_, Some(rule)) => assert_eq!(rule_of(&err), Some(rule), "{}: {err}", c.kind()),
        (_, None) => assert!(rule_of(&err).is_some(), "{}: not a rule refusal: {err}", c.kind()),
    }
}

/// Runs every command kind — the lifecycle in world 0, the others on a fresh workflow in
/// world 1 — calling `each` right after each command is submitted the first time.
fn every_kind(mut each: impl FnMut(usize, &mut World, &Command)) -> ([World; 2], BTreeSet<&'static str>) {
    let mut kinds = BTreeSet::new();
    let mut a = World::at(Stage::Empty);
    for c in lifecycle_commands() {
        kinds.insert(c.kind());
        each(0, &mut a, &c);
    }
    let mut b = World::at(Stage::Setup);
    other_commands(&mut b, &mut |w, c| {
        kinds.insert(c.kind());
        each(1, w, &c);
    });
    ([a, b], kinds)
}

/// Each kind, resubmitted right after: the original receipt, not one byte or bit changed.
#[test]
fn duplicate_of_every_command_kind_returns_the_original_receipt() {
    let (_, kinds) = every_kind(|_, w, c| {
        admitted_then_duplicate(w, c);
    });
    assert_eq!(kinds, KINDS.into_iter().collect(), "every command kind is covered");
}

/// Each kind with the same ids (and version) but other content: refused by the rule of the
/// step already taken (a worker event: a conflict naming the original), nothing written.
#[test]
fn conflicting_content_under_a_taken_key_is_refused_for_every_kind() {
    let (_, kinds) = every_kind(|_, w, c| {
        admitted_then_duplicate(w, c);
        conflict_refused(w, c);
    });
    assert_eq!(kinds.len(), KINDS.len());
}

/// The same holds for every command ever admitted, long after: the whole lifecycle
/// resubmitted at its end is all duplicates with the original receipts (superseded
/// transitions too: `advancePhase` to version 2 when the workflow is at 8).
#[test]
fn every_command_resubmitted_later_is_a_duplicate() {
    let mut receipts = Vec::new();
    let (mut worlds, _) = every_kind(|i, w, c| {
        let r = w.ok(c.clone());
        receipts.push((i, c.clone(), r));
    });
    for (i, c, first) in receipts {
        let w = &mut worlds[i];
        let frames = w.ledger.store().frames().to_vec();
        let again = w.ok(c.clone());
        assert!(again.duplicate, "{}", c.kind());
        assert_eq!((again.seq, again.hash), (first.seq, first.hash), "{}", c.kind());
        assert_eq!(w.ledger.store().frames(), frames.as_slice());
    }
}

/// A command and its redelivery in one batch (one frame): the second is the first's
/// receipt, read from the frame being built.
#[test]
fn a_redelivery_in_the_same_batch_is_a_duplicate() {
    let mut w = World::at(Stage::Setup);
    let raise = Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0x300),
        workflow_id: lid(WORKFLOW),
        description: "CI is red".into(),
    });
    let (conflict, _) = conflicting(&raise);
    let head = w.ledger.store().head().seq;
    let (results, n) =
        w.ledger.submit_batch(&[raise.clone(), raise, conflict], Ctx { time_ms: w.time_ms + 1000 });
    assert_eq!(n, 3);
    let first = results[0].as_ref().unwrap();
    let second = results[1].as_ref().unwrap();
    assert_eq!(first.seq, head + 1);
    assert!(!first.duplicate && second.duplicate);
    assert_eq!((second.seq, second.hash), (first.seq, first.hash));
    assert_eq!(rule_of(results[2].as_ref().unwrap_err()), Some(Rule::IdReused));
    assert_eq!(w.ledger.store().head().seq, head + 1, "one entry written");
}

fn submit(ledger: &mut Ledger<DiskStore>, c: &Command, time_ms: u64) -> Result<Receipt, SubmitError> {
    ledger.submit(c, Ctx { time_ms })
}

/// After a reopen the receipt index is rebuilt by the same fold (the reopened state equals
/// the live one, index included): every command is still a duplicate with its original
/// receipt, every conflicting variant is still refused, and nothing is written.
#[test]
fn after_reopen_duplicates_and_conflicts_hold_for_every_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    for i in 0..2 {
        // Every kind on a ledger on disk: the lifecycle (0), or the setup and the other
        // kinds (1), decided beside a mirror in memory (claims read the state).
        let dir = tmp.path().join(i.to_string());
        drop(store::init(&dir, "t", LEDGER, T0).unwrap());
        let (mut ledger, _) = Ledger::open(&dir).unwrap();
        let mut t = T0;
        let mut commands = Vec::new();
        let mut replay = |ledger: &mut Ledger<DiskStore>, c: &Command| {
            t += 1000;
            let r = submit(ledger, c, t).unwrap_or_else(|e| panic!("{}: {e}", c.kind()));
            commands.push((c.clone(), r));
        };
        if i == 0 {
            lifecycle_commands().iter().for_each(|c| replay(&mut ledger, c));
        } else {
            setup_commands().iter().for_each(|c| replay(&mut ledger, c));
            let mut mirror = World::at(Stage::Setup);
            other_commands(&mut mirror, &mut |m, c| {
                m.ok(c.clone());
                replay(&mut ledger, &c);
            });
        }
        let live = ledger.state().clone();
        drop(ledger);
        all.push((dir, live, commands));
    }
    for (dir, live, commands) in all {
        let (mut ledger, _) = Ledger::open(&dir).unwrap();
        assert_eq!(*ledger.state(), live, "the reopened state (with its receipt index) is the live one");
        let before = std::fs::read_dir(dir.join("journal")).unwrap().count();
        let head = ledger.store().head();
        for (c, first) in &commands {
            let again = submit(&mut ledger, c, T0 + 10_000_000).unwrap();
            assert!(again.duplicate, "{}", c.kind());
            assert_eq!((again.seq, again.hash, again.ignored), (first.seq, first.hash, first.ignored));
            let (other, _) = conflicting(c);
            let err = submit(&mut ledger, &other, T0 + 10_000_000).unwrap_err();
            assert!(err.is_refusal(), "{}: {err}", c.kind());
        }
        assert_eq!(ledger.store().head(), head, "nothing written");
        assert_eq!(*ledger.state(), live);
        assert_eq!(std::fs::read_dir(dir.join("journal")).unwrap().count(), before);
        drop(ledger);
        let (code, _, err) = cli(&["replay", dir.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
}

/// `ledger submit` of the lifecycle file, twice: the second run is all duplicate receipts
/// (exit 0) with the first run's seqs and hashes, and the ledger is byte for byte unchanged.
#[test]
fn submitting_the_same_file_twice_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(store::init(&dir, "t", LEDGER, T0).unwrap());
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/lifecycle.jsonl");
    let run = || cli(&["submit", dir.to_str().unwrap(), example.to_str().unwrap()]);
    let (code, first, err) = run();
    assert_eq!(code, 0, "{err}");
    let journal = || std::fs::read(replay_tests::segment(&dir)).unwrap();
    let bytes = journal();
    let (code, second, err) = run();
    assert_eq!(code, 0, "{err}");
    assert_eq!(journal(), bytes, "the second run wrote nothing");
    let parse = |s: &str| {
        s.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>()
    };
    let (first, second) = (parse(&first), parse(&second));
    assert_eq!(first.len(), second.len());
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(b["duplicate"], true, "{b}");
        assert_eq!((&a["seq"], &a["hash"]), (&b["seq"], &b["hash"]));
    }
}
