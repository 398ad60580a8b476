//! The reference lifecycle is admitted end to end, and reopening (a replay through the
//! same admission step) reproduces the live state byte for byte.

use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{Script, lid};
use closure_ledger::runtime::state::AttemptStatus;
use closure_ledger::store::{self, MemStore, Store};
use ledger_schema::Event;
use ledger_schema::events::IgnoredReason;
use ledger_schema::types::Verdict;
use replay_tests::*;

/// The whole lifecycle runs; its duplicate writes nothing; its stale delivery is an
/// ignored receipt; it ends ACCEPTed after one repair.
#[test]
fn the_lifecycle_is_admitted() {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.lifecycle().unwrap();
    let log = std::mem::take(&mut script.log);
    let duplicates: Vec<_> = log.iter().filter(|(_, r)| r.duplicate).collect();
    assert_eq!(duplicates.len(), 1);
    let state = ledger.state();
    let wf = &state.workflows[&lid(closure_ledger::lifecycle::WORKFLOW)];
    assert!(wf.closed);
    assert_eq!(state.decisions[&wf.current_decision.unwrap()].verdict, Verdict::Accept);
    assert!(matches!(state.attempts[&lid(0x64)].status, AttemptStatus::Finished { .. }));
    let ignored: Vec<_> = ledger
        .store()
        .read_range(0, u64::MAX)
        .unwrap()
        .into_iter()
        .filter_map(|s| match s.entry.event {
            Event::WorkerDeliveryIgnored(i) => Some(i.reason),
            _ => None,
        })
        .collect();
    assert_eq!(ignored, vec![IgnoredReason::AttemptEnded]);
    let frames_before = ledger.store().frames().len();
    assert_eq!(
        frames_before as u64,
        log.len() as u64 - 1 + 1,
        "one frame per non-duplicate command, plus genesis"
    );
}

/// Live state digest == the digest after a strict reopen of the same ledger on disk.
#[test]
fn live_state_digest_equals_the_replayed_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(store::init(&dir, "t", LEDGER, T0).unwrap());
    let (mut ledger, _) = Ledger::open(&dir).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.lifecycle().unwrap();
    let live = ledger.state().digest();
    let live_bytes = ledger.state().encode();
    drop(ledger);
    let (reopened, _) = Ledger::open(&dir).unwrap();
    assert_eq!(reopened.state().digest(), live);
    assert_eq!(reopened.state().encode(), live_bytes);
    assert!(ledger_schema::codec::check_canonical(&live_bytes).is_ok(), "the state encodes canonically");
}
