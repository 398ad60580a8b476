//! Criterion micro-benchmarks of the hot paths: canonical encode/decode of an entry, entry
//! hashing, `apply` of a worker event, `compile` of the reference repair package, and
//! replay per entry. Run: `cargo bench --bench core`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // a bench may panic

use closure_ledger::admission;
use closure_ledger::compiler::compile;
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{Script, lid};
use closure_ledger::runtime::command::StartAttempt;
use closure_ledger::runtime::{State, attempt_binding};
use closure_ledger::store::{MemStore, Store};
use criterion::{Criterion, black_box, criterion_group, criterion_main};
use ledger_schema::types::{Phase, ThreadChoice};
use ledger_schema::{Entry, SealedEntry, entry_hash, samples};

fn lifecycle_ledger() -> Ledger<MemStore> {
    let mut ledger = Ledger::from_store(MemStore::new(ledger_schema::Id(9), "bench", 1)).unwrap();
    let mut s = Script { ledger: &mut ledger, time_ms: 1, log: Vec::new() };
    s.lifecycle().unwrap();
    ledger
}

fn benches(c: &mut Criterion) {
    let chain = samples::chain();
    let (_, manifest_entry) = chain.iter().find(|(n, _)| *n == "attempt_started_implement").unwrap();
    let (_, worker_entry) = chain.iter().find(|(n, _)| *n == "worker_event_admitted").unwrap();
    c.bench_function("encode entry (worker event)", |b| b.iter(|| black_box(&worker_entry.entry).encode()));
    c.bench_function("decode entry strictly (worker event)", |b| {
        b.iter(|| Entry::decode(black_box(&worker_entry.bytes)).unwrap())
    });
    c.bench_function("decode entry strictly (attempt + manifest)", |b| {
        b.iter(|| Entry::decode(black_box(&manifest_entry.bytes)).unwrap())
    });
    c.bench_function("hash entry (worker event)", |b| b.iter(|| entry_hash(black_box(&worker_entry.bytes))));

    // apply: the lifecycle's first admitted worker event, against the state before it.
    let ledger = lifecycle_ledger();
    let entries = ledger.store().read_range(0, u64::MAX).unwrap();
    let idx = entries.iter().position(|e| e.entry.event.kind() == "workerEventAdmitted").unwrap();
    let mut before = State::default();
    for e in &entries[..idx] {
        admission::apply(&mut before, &e.entry).unwrap();
    }
    let event_entry = entries[idx].entry.clone();
    c.bench_function("apply worker event", |b| {
        b.iter(|| {
            let mut s = before.clone();
            admission::apply(&mut s, black_box(&event_entry)).unwrap();
        })
    });

    // compile: the reference repair package (the state just before the repair attempt).
    let pos = entries
        .iter()
        .position(|e| matches!(&e.entry.event, ledger_schema::Event::AttemptStarted(a) if a.attempt_id == lid(0x66)))
        .unwrap();
    let mut state = State::default();
    for e in &entries[..pos] {
        admission::apply(&mut state, &e.entry).unwrap();
    }
    let binding = attempt_binding(
        &state,
        &StartAttempt {
            attempt_id: lid(0x66),
            workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
            worker_session_id: lid(0x67),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        },
    )
    .unwrap();
    assert_eq!(binding.phase, Phase::Implement);
    c.bench_function("compile reference repair package", |b| {
        b.iter(|| compile(black_box(&state), &binding).unwrap().manifest_digest())
    });

    // replay per entry: strict decode + hash + admission of the whole lifecycle.
    let bytes: Vec<Vec<u8>> = entries.iter().map(|e| e.bytes.clone()).collect();
    c.bench_function(&format!("replay lifecycle ({} entries)", bytes.len()), |b| {
        b.iter(|| {
            let mut s = State::default();
            for raw in &bytes {
                let sealed = SealedEntry::open(raw).unwrap();
                admission::apply(&mut s, &sealed.entry).unwrap();
            }
            s
        })
    });
}

criterion_group!(core, benches);
criterion_main!(core);
