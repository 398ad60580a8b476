//! `ledger status DIR [--json]` (issue #13 item 11): the head, the state digest and counts
//! by state, read-only and lock-free — so "live equals replay" can be checked on any
//! ledger: the engine's live state digest, `status` (beside the live engine and after it)
//! and `replay` all agree.

use closure_ledger::engine::{Engine, Options};
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::Script;
use closure_ledger::store::{self, MemStore};
use replay_tests::*;

fn status_json(dir: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = cli(&["status", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// The reference lifecycle submitted through the engine: `status` read beside the live
/// engine and after it equals the engine's live state digest and `replay`'s, with the
/// head and the counts of what the lifecycle did.
#[test]
fn status_equals_the_live_and_the_replayed_state() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(store::init(&dir, "t", LEDGER, T0).unwrap());
    // The lifecycle's commands (decided once in memory; the engine admits the same ones).
    let mut mem = Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap();
    let mut script = Script { ledger: &mut mem, time_ms: T0, log: Vec::new() };
    script.lifecycle().unwrap();
    let commands: Vec<_> = script.log.iter().map(|(c, _)| c.clone()).collect();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (live, head, beside) = rt.block_on(async {
        let engine = Engine::open(&dir, Options::default()).await.unwrap();
        let mut last = None;
        for c in commands {
            last = Some(engine.submit(c).await.unwrap());
        }
        let live = engine.state().digest();
        // Lock-free: read while the engine holds the ledger.
        let beside = status_json(&dir);
        engine.shutdown().await.unwrap();
        (live, last.unwrap(), beside)
    });
    let after = status_json(&dir);
    let (code, out, err) = cli(&["replay", dir.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let replayed: serde_json::Value = serde_json::from_str(out.trim()).unwrap();

    for s in [&beside, &after] {
        assert_eq!(s["stateDigest"], live.to_string(), "status == live");
        assert_eq!(s["headSeq"], head.seq);
        assert_eq!(s["headHash"], head.hash.to_string());
        assert_eq!(s["entries"], head.seq + 1);
        assert_eq!(s["ledgerId"], LEDGER.to_string());
    }
    assert_eq!(beside["liveWriter"], true);
    assert_eq!(after["liveWriter"], false);
    assert_eq!(replayed["stateDigest"], after["stateDigest"], "status == replay");
    assert_eq!(replayed["headHash"], after["headHash"]);
    // One goal; the workflow ACCEPTed; four Attempts, all finished.
    assert_eq!(after["counts"]["goals"], serde_json::json!({"total": 1, "revised": 0}));
    assert_eq!(
        after["counts"]["workflows"],
        serde_json::json!({"total": 1, "ACCEPT": 1, "staleGoalRevision": 0, "failedAfterAccept": 0})
    );
    assert_eq!(
        after["counts"]["attempts"],
        serde_json::json!({"total": 4, "FINISHED": 4, "contextChanged": 0})
    );
    // Two Evidence records: the first generation's FAIL, made ineligible when the repair
    // child opened (its bytes still say ELIGIBLE, version 1), and the repair's PASS
    // (outside review 104: no reader showed the change).
    assert_eq!(after["counts"]["evidence"], serde_json::json!({"total": 2, "ELIGIBLE": 1, "INELIGIBLE": 1}));

    // The text form says the same in lines.
    let (code, text, _) = cli(&["status", dir.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(text.contains(&format!("state digest {live}")), "{text}");
    assert!(text.contains("workflows 1 (ACCEPT 1)"), "{text}");
    assert!(text.contains("attempts 4 (FINISHED 4)"), "{text}");
    assert!(text.contains("evidence 2 (ELIGIBLE 1, INELIGIBLE 1)"), "{text}");
}

/// A ledger that does not verify is a verification failure (exit 1, one line); a missing
/// one a usage error (exit 2). `status` writes nothing.
#[test]
fn status_of_a_broken_or_missing_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = cli(&["status", tmp.path().join("none").to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    let dir = tmp.path().join("l");
    make_ledger(&dir, 3, 2);
    let seg = segment(&dir);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let (code, _, err) = cli(&["status", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read(&seg).unwrap(), bytes, "nothing written");
}

/// `status` counts an open workflow whose Goal revision was superseded as
/// `staleGoalRevision` (outside review 30, P3: it read as live work, though it can only be
/// cancelled); revised goals are counted; both are 0 when there are none.
#[test]
fn status_counts_workflows_left_behind_by_a_goal_revision() {
    use closure_ledger::lifecycle::{GOAL, goal_content, lid};
    use closure_ledger::replay::StateCounts;
    use closure_ledger::runtime::Command;
    use closure_ledger::runtime::command::ReviseGoal;
    use replay_tests::world::{Stage, World};
    let mut w = World::at(Stage::Setup);
    let counts = StateCounts::of(w.ledger.state());
    assert_eq!(counts.workflows.get("staleGoalRevision"), Some(&0));
    assert_eq!(counts.goals.get("revised"), Some(&0));
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    let counts = StateCounts::of(w.ledger.state());
    assert_eq!(counts.workflows.get("staleGoalRevision"), Some(&1));
    assert_eq!(counts.workflows.get("DISCOVERY"), Some(&1), "still counted by its phase");
    assert_eq!(counts.goals.get("revised"), Some(&1));
}

/// `status` counts a dispatched Attempt whose context changed after its claim as
/// `contextChanged` (outside review 39, P3: it read as plain DISPATCHED work, though its
/// events are ignored receipts and it can only be failed or cancelled); 0 when none.
#[test]
fn status_counts_attempts_whose_context_changed() {
    use closure_ledger::lifecycle::lid;
    use closure_ledger::replay::StateCounts;
    use closure_ledger::runtime::Command;
    use closure_ledger::runtime::command::{ConfirmFact, StartAttempt};
    use ledger_schema::types::ThreadChoice;
    use replay_tests::world::{Stage, World};
    let mut w = World::at(Stage::Setup);
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x60),
        workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
        worker_session_id: lid(0x61),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    w.with(|s| s.claim(lid(0x60))).unwrap();
    let counts = StateCounts::of(w.ledger.state());
    assert_eq!(
        (counts.attempts.get("DISPATCHED"), counts.attempts.get("contextChanged")),
        (Some(&1), Some(&0))
    );
    w.ok(Command::ConfirmFact(ConfirmFact {
        fact_id: lid(0x51),
        revision: 1,
        confirmed_by: "human:alice".into(),
    }));
    let counts = StateCounts::of(w.ledger.state());
    assert_eq!(
        (counts.attempts.get("DISPATCHED"), counts.attempts.get("contextChanged")),
        (Some(&1), Some(&1))
    );
}
