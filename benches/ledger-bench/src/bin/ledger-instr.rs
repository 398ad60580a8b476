//! A fixed amount of work for instruction counting, which — unlike wall time on a shared
//! machine — is repeatable: `compile` of the reference repair package (for a new Attempt id
//! each time), `compile-small` (ledger-bench's `compile_p50` scenario: the reference setup
//! with a fresh Attempt), or a strict replay
//! (decode, hash, rules, manifest proofs) of the 47-entry reference lifecycle, N times;
//! `decode` is the strict decode alone of those entries, `decode-worker` of one Worker
//! event entry; `index` 64,000 Worker events' id lookups and inserts in the fold's id index
//! as the writer sees them under 64 submitters (interleaved id ranges); `admit` 64,000
//! Worker events through the group commit (`submit_batch`) on an in-memory store, in
//! batches of 32.
//!
//! ```sh
//! cargo build --release -p ledger-bench --bin ledger-instr
//! for n in 1 101; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/ledger-instr compile $n 2>&1 | grep Collected; done   # (b - a) / 100 per compile
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // a benchmark may panic

use closure_ledger::admission;
use closure_ledger::compiler::compile;
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{Script, WORKFLOW, lid, payload};
use closure_ledger::runtime::command::{DeliverWorkerEvent, StartAttempt};
use closure_ledger::runtime::seq_index::SeqIndex;
use closure_ledger::runtime::{Command, Ctx};
use closure_ledger::runtime::{State, attempt_binding};
use closure_ledger::store::{MemStore, Store};
use ledger_schema::events::WorkerEventKind;
use ledger_schema::types::ThreadChoice;
use ledger_schema::{Event, Id, SealedEntry};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, n) = match args.as_slice() {
        [what, n] => (what.as_str(), n.parse::<usize>().expect("N is a count")),
        _ => {
            eprintln!("usage: ledger-instr compile|compile-small|replay|decode|decode-worker|index|admit N");
            std::process::exit(2);
        }
    };
    let mut ledger = Ledger::from_store(MemStore::new(Id(9), "bench", 1)).unwrap();
    Script { ledger: &mut ledger, time_ms: 1, log: Vec::new() }.lifecycle().unwrap();
    let entries = ledger.store().read_range(0, u64::MAX).unwrap();
    // The state just before the repair attempt 0x66 started: its package is the reference.
    let pos = entries
        .iter()
        .position(|e| matches!(&e.entry.event, Event::AttemptStarted(a) if a.attempt_id == lid(0x66)))
        .unwrap();
    let mut state = State::default();
    for e in &entries[..pos] {
        admission::apply(&mut state, &e.entry).unwrap();
    }
    let request = StartAttempt {
        attempt_id: lid(0x66),
        workflow_id: lid(WORKFLOW),
        worker_session_id: lid(0x67),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    };
    let mut binding = attempt_binding(&state, &request).unwrap();
    // `compile-small`: ledger-bench's `compile_p50` scenario — the reference setup, attempt
    // 0x60 dispatched and finished in a copy of the state, a fresh Attempt compiled.
    let (small_state, mut small_binding) = {
        let mut small = Ledger::from_store(MemStore::new(Id(9), "bench", 1)).unwrap();
        let mut s = Script { ledger: &mut small, time_ms: 1, log: Vec::new() };
        s.setup().unwrap();
        s.start(0x60, 0x61).unwrap();
        s.claim(lid(0x60)).unwrap();
        let mut state = small.state().clone();
        if let Some(w) = state.workflows.get_mut(&lid(WORKFLOW)) {
            w.active_attempt = None;
        }
        let request = StartAttempt { attempt_id: lid(0x9999), worker_session_id: lid(1), ..request.clone() };
        let binding = attempt_binding(&state, &request).unwrap();
        (state, binding)
    };
    // `admit`: the engine's group commit without the disk — the reference setup, attempt
    // 0x60 dispatched, then batches of 32 Worker events (256-byte text, ids from 64
    // interleaved ranges, as ledger-bench's `--append-only` submits them) through
    // `submit_batch` on an in-memory store: decide, seal, apply, frame. One round is 64,000
    // events (2,000 batches).
    let mut admit = (|| {
        let mut l = Ledger::from_store(MemStore::new(Id(9), "bench", 1)).ok()?;
        let mut s = Script { ledger: &mut l, time_ms: 1, log: Vec::new() };
        s.setup().ok()?;
        s.start(0x60, 0x61).ok()?;
        s.claim(lid(0x60)).ok()?;
        let manifest = l.state().attempts.get(&lid(0x60))?.manifest_digest;
        Some((l, manifest, 0u128))
    })()
    .expect("the reference setup and attempt 0x60 are admitted (fixed input, no argument reaches it)");
    let worker =
        entries.iter().find(|e| matches!(&e.entry.event, Event::WorkerEventAdmitted(_))).unwrap().clone();
    for i in 0..n {
        match what {
            "compile" => {
                // Each compile is for a new Attempt id (as each `startAttempt` is): the
                // identity, manifest and package differ; the durable sources repeat. With the
                // manifest's digest, as an Attempt start records it.
                binding.attempt_id = lid(0x10_0000 + i as u128);
                std::hint::black_box(compile(&state, &binding).unwrap().manifest_digest());
            }
            "compile-small" => {
                small_binding.attempt_id = lid(0x10_0000 + i as u128);
                std::hint::black_box(compile(&small_state, &small_binding).unwrap().manifest_digest());
            }
            "replay" => {
                let mut s = State::default();
                for e in &entries {
                    let sealed = SealedEntry::open(&e.bytes).unwrap();
                    admission::apply(&mut s, &sealed.entry).unwrap();
                }
                std::hint::black_box(s);
            }
            "decode" => {
                // The strict decode of every entry of the lifecycle (no hash, no fold).
                for e in &entries {
                    std::hint::black_box(ledger_schema::Entry::decode(&e.bytes).unwrap());
                }
            }
            "decode-worker" => {
                // The strict decode of one worker-event entry (the bench's replay entries).
                std::hint::black_box(ledger_schema::Entry::decode(&worker.bytes).unwrap());
            }
            "admit" => {
                let (ledger, manifest, next) = &mut admit;
                let text = "x".repeat(256);
                for _ in 0..2_000 {
                    let batch: Vec<Command> = (0..32)
                        .map(|_| {
                            let k = *next;
                            *next += 1;
                            Command::DeliverWorkerEvent(DeliverWorkerEvent {
                                attempt_id: lid(0x60),
                                worker_event_id: Id(((k % 64) * 0x10_0000 + k / 64 + 1) << 80 | k),
                                manifest_digest: *manifest,
                                payload: payload(WorkerEventKind::Progress, k as u64, &text),
                            })
                        })
                        .collect();
                    let (results, _) = ledger.submit_batch(&batch, Ctx { time_ms: 2 });
                    assert!(results.iter().all(Result::is_ok));
                }
            }
            "index" => {
                // The writer's id index under ledger-bench's `--append-only` (64 submitters,
                // each its own range of ids, interleaved): per Worker event a lookup in
                // `decide`, the `fresh_event` check and the insert in `apply`. One round
                // is 64,000 events.
                let mut index = SeqIndex::new();
                for k in 0..64_000u128 {
                    let id = Id(((k % 64) * 0x10_0000 + k / 64) << 80 | k);
                    std::hint::black_box(index.get(&id));
                    std::hint::black_box(index.contains_key(&id));
                    index.insert(id, k as u64);
                }
                std::hint::black_box(index);
            }
            other => panic!("unknown workload {other}"),
        }
    }
}
