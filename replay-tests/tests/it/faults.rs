//! Fault injection behind the storage boundary: a failure before the journal's fdatasync
//! completes is a typed "not committed" error and the ledger reopens at the previous head;
//! a failure after it (in the sled insert) leaves the commit standing and reopen restores
//! sled from the journal.

use closure_ledger::store::{CommitError, DiskStore, FaultPlan, FaultPoint, Frame, MemStore, Store};
use replay_tests::*;

fn frame_of(store: &impl Store, n: usize, salt: usize) -> Frame {
    let mut chain = store.chain();
    let entries =
        (0..n).map(|i| chain.seal(event(salt + i), T0 + 10_000 + i as u64, LEDGER).unwrap()).collect();
    Frame::new(entries).unwrap()
}

/// A journal write that stops half-way, or an fdatasync that fails, is `NotDurable`; the
/// store refuses further commits; reopen is at the previous head and verifies.
#[test]
fn a_failure_before_fdatasync_completes_is_not_committed() {
    for point in [FaultPoint::JournalWrite, FaultPoint::Fdatasync] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("l");
        make_ledger(&dir, 3, 2);
        let (mut store, _) = DiskStore::open_with_faults(&dir, FaultPlan { point, after: 2 }).unwrap();
        append_frames(&mut store, 2, 2);
        let head_before = store.head();
        // What the previous commits wrote (the preallocated zeros after it are cut back too).
        let journal_before = std::fs::read(segment(&dir)).unwrap()[..journal_end(&dir)].to_vec();
        let frame = frame_of(&store, 3, 0);
        let result = store.commit(&frame);
        assert!(matches!(result, Err(CommitError::NotDurable(_))), "{point:?}: {result:?}");
        assert_eq!(store.head(), head_before, "{point:?}: the head did not move");
        let next = frame_of(&store, 1, 5);
        assert!(matches!(store.commit(&next), Err(CommitError::Poisoned)), "{point:?}");
        drop(store);
        assert_eq!(
            std::fs::read(segment(&dir)).unwrap(),
            journal_before,
            "{point:?}: the journal was cut back"
        );
        let (store, report) = DiskStore::open(&dir).unwrap();
        assert_eq!(store.head(), head_before, "{point:?}: reopened at the previous head");
        assert!(report.torn_tail.is_none());
        drop(store);
        assert_eq!(verify_json(&dir, None).0, 0);
    }
}

/// A sled insert that fails after the frame is durable still returns a receipt (saying
/// sled lags); the entry is readable; reopen restores sled with nothing lost.
#[test]
fn a_failure_after_fdatasync_leaves_the_commit_standing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    make_ledger(&dir, 3, 2);
    let (mut store, _) =
        DiskStore::open_with_faults(&dir, FaultPlan { point: FaultPoint::SledInsert, after: 1 }).unwrap();
    append_frames(&mut store, 1, 2);
    let frame = frame_of(&store, 2, 3);
    let receipt = store.commit(&frame).unwrap();
    assert!(receipt.sled_lag.is_some(), "the receipt says sled lags");
    assert_eq!(receipt.last_seq, store.head().seq);
    assert_eq!(store.read(receipt.last_seq).unwrap().hash, receipt.hash);
    drop(store);
    let (code, report) = verify_json(&dir, None);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["sledLagFrames"], 1);
    let (store, open) = DiskStore::open(&dir).unwrap();
    assert_eq!(open.sled_restored_frames, 1);
    assert_eq!(store.read(receipt.last_seq).unwrap().hash, receipt.hash);
    drop(store);
    assert_eq!(verify_json(&dir, None).1["sledLagFrames"], 0);
}

/// After a sled failure, the next commit inserts the lagging frame first, so sled only
/// ever lags by a suffix and never has a hole.
#[test]
fn sled_catches_up_on_the_next_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    make_ledger(&dir, 2, 2);
    let (mut store, _) =
        DiskStore::open_with_faults(&dir, FaultPlan { point: FaultPoint::SledInsert, after: 0 }).unwrap();
    let first = store.commit(&frame_of(&store, 1, 0)).unwrap();
    assert!(first.sled_lag.is_some());
    let second = store.commit(&frame_of(&store, 1, 1)).unwrap();
    assert!(second.sled_lag.is_none());
    drop(store);
    let (code, report) = verify_json(&dir, None);
    assert_eq!((code, report["sledLagFrames"].as_u64()), (0, Some(0)), "{report}");
}

/// Every backend refuses a frame that does not continue its head.
#[test]
fn a_frame_that_does_not_continue_the_head_is_refused() {
    let mut mem = MemStore::new(LEDGER, "t", T0);
    let frame = frame_of(&mem, 2, 0);
    mem.commit(&frame).unwrap();
    assert!(matches!(mem.commit(&frame), Err(CommitError::NotNext { expected: 3, found: 1 })));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    make_ledger(&dir, 1, 1);
    let (mut disk, _) = DiskStore::open(&dir).unwrap();
    let frame = frame_of(&disk, 1, 0);
    disk.commit(&frame).unwrap();
    assert!(matches!(disk.commit(&frame), Err(CommitError::NotNext { .. })));
}

/// A command whose frame cannot be made durable (a disk full, a failed fdatasync) is
/// refused with one message that says "not committed" once and keeps the OS reason.
#[test]
fn a_failed_commit_says_not_committed_once_with_the_os_reason() {
    use closure_ledger::ledger::Ledger;
    use closure_ledger::lifecycle::{POLICY, lid, policy_bundle};
    use closure_ledger::runtime::command::InstallPolicy;
    use closure_ledger::runtime::{Command, Ctx};
    for point in [FaultPoint::JournalWrite, FaultPoint::Fdatasync] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("l");
        drop(closure_ledger::store::init(&dir, "t", LEDGER, T0).unwrap());
        let (store, _) = DiskStore::open_with_faults(&dir, FaultPlan { point, after: 0 }).unwrap();
        let mut ledger = Ledger::from_store(store).unwrap();
        let command =
            Command::InstallPolicy(InstallPolicy { policy_id: lid(POLICY), bundle: policy_bundle() });
        let message = ledger.submit(&command, Ctx { time_ms: T0 + 1 }).unwrap_err().to_string();
        assert_eq!(message.matches("not committed").count(), 1, "{point:?}: {message}");
        assert!(
            message.contains("os error") || message.contains("injected"),
            "{point:?}: the reason: {message}"
        );
        assert!(!message.contains("Custom {") && !message.contains("kind:"), "no Debug text: {message}");
    }
}

/// An fdatasync that fails with a cut back that fails too leaves the unsynced bytes in the
/// journal: the commit's outcome is unknown, and the error says so — not "not committed" —
/// because the next open adopts the record when it is whole (outside review 219 F1: "not
/// committed" was said, and the same command again was then answered as a duplicate).
#[test]
fn a_failed_fdatasync_whose_cut_back_fails_is_an_unknown_outcome() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    make_ledger(&dir, 3, 2);
    let plan = FaultPlan { point: FaultPoint::FdatasyncAndCutBack, after: 1 };
    let (mut store, _) = DiskStore::open_with_faults(&dir, plan).unwrap();
    append_frames(&mut store, 1, 2);
    let head_before = store.head();
    let frame = frame_of(&store, 2, 0);
    let result = store.commit(&frame);
    let Err(err @ CommitError::OutcomeUnknown { .. }) = result else { panic!("{result:?}") };
    let text = err.to_string();
    assert!(
        text.starts_with("outcome unknown") && text.contains("cut back") && !text.contains('\n'),
        "{text}"
    );
    assert_eq!(store.head(), head_before, "this store does not count it");
    assert!(matches!(store.commit(&frame_of(&store, 1, 5)), Err(CommitError::Poisoned)));
    drop(store);
    // The bytes stand, whole: the next open adopts the record (what the message warns of).
    let (store, _) = DiskStore::open(&dir).unwrap();
    assert_eq!(store.head().seq, frame.last_seq(), "the record stood");
    drop(store);
    assert_eq!(verify_json(&dir, None).0, 0);
}
