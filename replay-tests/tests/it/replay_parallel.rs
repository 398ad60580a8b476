//! Two-thread replay (issue #16): the records read and verified on a helper thread, the
//! fold on the caller's, joined by a bounded ordered channel. It must give exactly the
//! report of the one-thread replay — the same state digest, and for a damaged or
//! inadmissible ledger the same first failure (seq, kind, copy, reason) — on good ledgers
//! and on damaged ones where the helper runs far ahead of the fold.

use std::path::{Path, PathBuf};

use closure_ledger::admission;
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{GOAL, Script, goal_content, lid, payload};
use closure_ledger::replay::{ReplayReport, replay_with};
use closure_ledger::runtime::command::DeliverWorkerEvent;
use closure_ledger::runtime::{Command, Ctx, State};
use closure_ledger::store::{self, AuditScope, DiskStore, Frame, OpenError, Replica, Store, Threads};
use ledger_schema::events::{GoalRevised, WorkerEventKind};
use ledger_schema::{Event, SealedEntry};
use replay_tests::*;

/// Worker events in the good ledger: several channel batches (256 entries each).
const WORKER_EVENTS: u128 = 1500;

/// A good ledger: the reference setup, attempt 0x60 dispatched, then [`WORKER_EVENTS`]
/// worker events in frames of 1 to 97 entries.
fn worker_ledger(dir: &Path) {
    let manifest = dispatched_ledger(dir);
    let (mut ledger, _) = Ledger::open(dir).unwrap();
    let mut i = 0u128;
    let mut chunk = 1u128;
    while i < WORKER_EVENTS {
        let commands: Vec<Command> = (i..(i + chunk).min(WORKER_EVENTS))
            .map(|k| {
                Command::DeliverWorkerEvent(DeliverWorkerEvent {
                    attempt_id: lid(0x60),
                    worker_event_id: lid(0x100_0000 + k),
                    manifest_digest: manifest,
                    payload: payload(WorkerEventKind::Progress, k as u64, "parallel replay"),
                })
            })
            .collect();
        let (results, processed) = ledger.submit_batch(&commands, Ctx { time_ms: T0 + 10 });
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(processed, commands.len());
        i += chunk;
        chunk = chunk % 97 + 1;
    }
    ledger.store().flush_index().unwrap();
}

/// The reference lifecycle: four manifests proved, verdicts, an ignored delivery.
fn lifecycle_ledger(dir: &Path) {
    drop(store::init(dir, "t", LEDGER, T0).unwrap());
    let (mut ledger, _) = Ledger::open(dir).unwrap();
    Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() }.lifecycle().unwrap();
}

/// Appends entries to the ledger, sealed on the chain but never judged by a rule.
fn append_unjudged(dir: &Path, events: Vec<Event>) {
    let (mut store, _) = DiskStore::open(dir).unwrap();
    let mut chain = store.chain();
    let time = store.head().time_ms;
    let entries: Vec<SealedEntry> =
        events.into_iter().map(|e| chain.seal(e, time, LEDGER).unwrap()).collect();
    for frame in entries.chunks(50) {
        store.commit(&Frame::new(frame.to_vec()).unwrap()).unwrap();
    }
    store.flush_index().unwrap();
}

/// A goal revision no rule admits (the goal is at revision 1, not 6).
fn inadmissible() -> Event {
    Event::GoalRevised(GoalRevised { goal_id: lid(GOAL), revision: 7, content: goal_content() })
}

/// Replays `dir` with one thread and with two, over both copies and over the journal
/// alone, up to the head and up to `to`; every pair of reports must be equal. Returns
/// the two-thread report of both copies.
fn same_both_ways(dir: &Path) -> ReplayReport {
    let mut both = None;
    for scope in [AuditScope::Both, AuditScope::JournalOnly] {
        for to in [None, Some(40), Some(700)] {
            let mut seen_one = Vec::new();
            let one = replay_with(dir, to, scope, Threads::One, &mut |seq| seen_one.push(seq)).unwrap();
            let mut seen_two = Vec::new();
            let two = replay_with(dir, to, scope, Threads::Two, &mut |seq| seen_two.push(seq)).unwrap();
            assert_eq!(one, two, "{}: {scope:?} to {to:?}", dir.display());
            assert_eq!(seen_one, seen_two, "the fold sees the same entries in the same order");
            if scope == AuditScope::Both && to.is_none() {
                both = Some(two);
            }
        }
        // The store's own audit, observer-free (what `ledger verify` runs) and folding as
        // `Ledger::open` does (its error is the fold's, or the store's, whichever comes
        // first): the same verdict either way, down to the error's every field.
        let one = store::audit_with(dir, None, scope, Threads::One, &mut |_| Ok(()));
        let two = store::audit_with(dir, None, scope, Threads::Two, &mut |_| Ok(()));
        assert_eq!(format!("{one:?}"), format!("{two:?}"), "{}: audit {scope:?}", dir.display());
        let folded = |threads| {
            let mut state = State::default();
            let result = store::audit_with(dir, None, scope, threads, &mut |sealed| {
                admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::inadmissible(sealed, e))
            });
            (format!("{result:?}"), state.digest())
        };
        assert_eq!(folded(Threads::One), folded(Threads::Two), "{}: fold {scope:?}", dir.display());
    }
    both.unwrap()
}

fn journal(dir: &Path) -> PathBuf {
    segment(dir)
}

struct Fixture {
    tmp: tempfile::TempDir,
    worker: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let worker = tmp.path().join("worker");
    worker_ledger(&worker);
    Fixture { tmp, worker }
}

impl Fixture {
    /// A fresh copy of the good worker ledger.
    fn copy(&self, name: &str) -> PathBuf {
        let dir = self.tmp.path().join(name);
        copy_dir(&self.worker, &dir);
        dir
    }
}

/// Good ledgers: the same report and state digest as a live ledger, and as one thread.
#[test]
fn good_ledgers_replay_the_same_with_two_threads() {
    let fx = fixture();
    let report = same_both_ways(&fx.worker);
    assert!(report.ok, "{report:?}");
    assert!(report.entries > WORKER_EVENTS as u64);
    assert_eq!(report.worker_events.admitted, WORKER_EVENTS as u64);
    assert!(report.frames > 20, "frames of many sizes");
    assert_eq!(report.state_digest, Ledger::open(&fx.worker).unwrap().0.state().digest());

    let lifecycle = fx.tmp.path().join("lifecycle");
    lifecycle_ledger(&lifecycle);
    let report = same_both_ways(&lifecycle);
    assert!(report.ok && report.manifests_proved == 4, "{report:?}");

    // Segments rolled at arbitrary records.
    let split = fx.copy("split");
    let n = journal_frames(&split).len();
    split_segments(&split, &[1, n / 3, n / 2 + 1, n - 1]);
    let report = same_both_ways(&split);
    assert!(report.ok, "{report:?}");
}

/// Damaged journals and sled copies: the same first failure either way.
#[test]
fn damaged_ledgers_fail_the_same_with_two_threads() {
    let fx = fixture();
    let frames = journal_frames(&fx.worker);
    let middle = frames[frames.len() / 2].clone();
    let late = frames[frames.len() - 3].clone();

    // A flipped payload byte in a middle journal record.
    let dir = fx.copy("journal-flip");
    let mut bytes = std::fs::read(journal(&dir)).unwrap();
    bytes[middle.range.start + 100] ^= 0x10;
    std::fs::write(journal(&dir), bytes).unwrap();
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.copy), (middle.first_seq, Some(Replica::Journal)), "{f:?}");

    // An entry re-encoded non-canonically (same value), record checks recomputed.
    let dir = fx.copy("journal-recode");
    let bytes = std::fs::read(journal(&dir)).unwrap();
    let mut edited = bytes[..middle.range.start].to_vec();
    edited.extend_from_slice(&recode_frame(&bytes[middle.range.clone()], 0, RECODES[1]));
    edited.extend_from_slice(&bytes[middle.range.end..]);
    std::fs::write(journal(&dir), edited).unwrap();
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.copy), (middle.first_seq, Some(Replica::Journal)), "{f:?}");

    // sled's copy of a middle frame damaged: found only once the whole journal folded.
    let dir = fx.copy("sled-flip");
    with_sled(&dir, |t| {
        let key = middle.first_seq.to_be_bytes();
        let mut v = t.get(key).unwrap().unwrap().to_vec();
        v[90] ^= 0x01;
        t.insert(key, v).unwrap();
    });
    let r = same_both_ways(&dir);
    let f = r.failure.clone().unwrap();
    assert_eq!((f.seq, f.copy), (middle.first_seq, Some(Replica::Sled)), "{f:?}");
    let last = frames.last().unwrap();
    assert_eq!(r.folded, last.first_seq + last.n_entries, "every journal entry was folded first");

    // sled lacking a middle frame.
    let dir = fx.copy("sled-missing");
    with_sled(&dir, |t| t.remove(late.first_seq.to_be_bytes()).unwrap());
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.copy), (late.first_seq, Some(Replica::Sled)), "{f:?}");

    // Bytes after the last record that are no torn write.
    let dir = fx.copy("trailing");
    let mut bytes = std::fs::read(journal(&dir)).unwrap();
    bytes.push(7);
    std::fs::write(journal(&dir), bytes).unwrap();
    assert!(!same_both_ways(&dir).ok);

    // Sample events, each chain-valid, the first ones already inadmissible.
    let dir = fx.tmp.path().join("samples");
    make_ledger(&dir, 200, 5);
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!(f.copy, None, "a rule failure, not a copy's: {f:?}");
}

/// Inadmissible entries, where the helper thread runs ahead of the fold into later
/// damage: the fold's failure comes first in seq order and is the one reported.
#[test]
fn the_first_failure_in_seq_order_wins_with_two_threads() {
    let fx = fixture();
    let head = |dir: &Path| DiskStore::open(dir).unwrap().0.head().seq;

    // An inadmissible newest entry.
    let dir = fx.copy("inadmissible-last");
    append_unjudged(&dir, vec![inadmissible()]);
    let last = head(&dir);
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.kind.as_str(), f.copy), (last, "goalRevised", None), "{f:?}");

    // An inadmissible entry, 300 chain-valid entries after it, then a damaged record:
    // the helper reaches the damage long before the fold reaches the rule failure.
    let dir = fx.copy("inadmissible-then-damage");
    let forged = head(&dir) + 1;
    let mut events = vec![inadmissible()];
    events.extend((0..300).map(event));
    append_unjudged(&dir, events);
    let frames = journal_frames(&dir);
    let damaged = frames.last().unwrap().clone();
    let mut bytes = std::fs::read(journal(&dir)).unwrap();
    bytes[damaged.range.start + 70] ^= 0x04;
    std::fs::write(journal(&dir), bytes).unwrap();
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.kind.as_str(), f.copy), (forged, "goalRevised", None), "{f:?}");

    // sled damaged early, an inadmissible entry late: the rule failure is met first (a
    // differing sled copy is reported when the scan ends).
    let dir = fx.copy("sled-then-inadmissible");
    let early = journal_frames(&dir)[5].clone();
    append_unjudged(&dir, vec![inadmissible()]);
    let last = head(&dir);
    with_sled(&dir, |t| {
        let key = early.first_seq.to_be_bytes();
        let mut v = t.get(key).unwrap().unwrap().to_vec();
        let at = v.len() - 1;
        v[at] ^= 0x80;
        t.insert(key, v).unwrap();
    });
    let r = same_both_ways(&dir);
    let f = r.failure.unwrap();
    assert_eq!((f.seq, f.kind.as_str(), f.copy), (last, "goalRevised", None), "{f:?}");
}

/// An observer that panics on the calling thread propagates its panic (the helper thread
/// is stopped and joined), as it did with one thread; nothing hangs.
#[test]
fn a_panicking_fold_propagates_and_does_not_hang() {
    let fx = fixture();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store::audit_with(&fx.worker, None, AuditScope::Both, Threads::Two, &mut |sealed| {
            assert!(sealed.entry.seq < 700, "injected panic in the fold");
            Ok(())
        })
    }));
    assert!(outcome.is_err());
    // The ledger is untouched and replays after it.
    assert!(same_both_ways(&fx.worker).ok);
}

/// Opening a ledger whose entry breaks a rule fails with `OpenError::Inadmissible`, whose
/// source is the typed `Refusal` an embedder can match on (not a message to parse), and the
/// engine refuses to open it the same way.
#[test]
fn an_inadmissible_entry_is_a_typed_refusal_when_opening() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    lifecycle_ledger(&dir);
    append_unjudged(&dir, vec![inadmissible()]);
    let last = DiskStore::open(&dir).unwrap().0.head().seq;
    let check = |e: &OpenError| {
        let OpenError::Inadmissible { seq, kind, refusal } = e else { panic!("not inadmissible: {e}") };
        assert_eq!((*seq, *kind), (last, "goalRevised"));
        let refusal = refusal.downcast_ref::<closure_ledger::Refusal>().expect("a Refusal");
        assert_eq!(refusal.rule(), Some(closure_ledger::Rule::GoalRevisionNotNext), "{refusal}");
        assert!(e.is_verification_failure());
        assert!(std::error::Error::source(e).is_some(), "the refusal is the error's source");
    };
    check(&Ledger::open(&dir).unwrap_err());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let engine = rt.block_on(closure_ledger::Engine::open(&dir, closure_ledger::Options::default()));
    check(&engine.err().unwrap());
}
