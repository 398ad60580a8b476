//! Engine group-commit throughput with 1, 8 and 64 concurrent submitters streaming
//! 256-byte worker events into one dispatched Attempt; reports events/s, the mean group
//! commit size (entries per frame) and the median per-submit latency.
//!
//! Run: `cargo bench --bench engine_throughput [-- EVENTS_PER_RUN]`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // a bench may panic

use std::time::Instant;

use closure_ledger::engine::{Engine, Options};
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{Script, lid, payload};
use closure_ledger::runtime::Command;
use closure_ledger::runtime::command::DeliverWorkerEvent;
use closure_ledger::store::{self, DiskStore};
use ledger_schema::Id;
use ledger_schema::events::WorkerEventKind;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let total: u128 = args.first().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let base = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-engine");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("engine group commit, {total} worker events of 256 B per run, release build");
    for submitters in [1u128, 8, 64] {
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let dir = base.join(format!("s{submitters}"));
        drop(store::init(&dir, "bench", Id(42), 1).unwrap());
        let (mut ledger, _) = Ledger::open(&dir).unwrap();
        let mut s = Script { ledger: &mut ledger, time_ms: 1, log: Vec::new() };
        s.setup().unwrap();
        s.start(0x60, 0x61).unwrap();
        s.claim(lid(0x60)).unwrap();
        let manifest = ledger.state().attempts[&lid(0x60)].manifest_digest;
        let head_before = ledger.store_head();
        drop(ledger);
        let text = "x".repeat(256);
        let (elapsed, mut latencies) = rt.block_on(async {
            let engine = Engine::open(&dir, Options::default()).await.unwrap();
            let start = Instant::now();
            let per = total / submitters;
            let tasks: Vec<_> = (0..submitters)
                .map(|t| {
                    let engine = engine.clone();
                    let text = text.clone();
                    tokio::spawn(async move {
                        let mut lat = Vec::with_capacity(per as usize);
                        for i in 0..per {
                            let c = Command::DeliverWorkerEvent(DeliverWorkerEvent {
                                attempt_id: lid(0x60),
                                worker_event_id: lid(0x100_0000 + t * 0x10_0000 + i),
                                manifest_digest: manifest,
                                payload: payload(WorkerEventKind::Progress, i as u64, &text),
                            });
                            let t0 = Instant::now();
                            engine.submit(c).await.unwrap();
                            lat.push(t0.elapsed().as_secs_f64() * 1e6);
                        }
                        lat
                    })
                })
                .collect();
            let mut lat = Vec::new();
            for t in tasks {
                lat.extend(t.await.unwrap());
            }
            let elapsed = start.elapsed();
            engine.shutdown().await.unwrap();
            (elapsed, lat)
        });
        let (_, report) = DiskStore::open(&dir).unwrap();
        let events = (total / submitters) * submitters;
        let frames = report.frames - head_before.1;
        latencies.sort_by(f64::total_cmp);
        let p50 = latencies[latencies.len() / 2];
        println!(
            "  {submitters:>2} submitters: {:>9.0} events/s  {frames:>6} frames  mean group commit {:>6.1} entries  p50 submit {p50:>8.1} us",
            events as f64 / elapsed.as_secs_f64(),
            events as f64 / frames as f64,
        );
        let _ = head_before.0;
    }
    let _ = std::fs::remove_dir_all(&base);
}

trait HeadFrames {
    fn store_head(&self) -> (u64, u64);
}

impl HeadFrames for Ledger<DiskStore> {
    /// (head seq, frames so far): frames = one per admitted command since genesis here.
    fn store_head(&self) -> (u64, u64) {
        use closure_ledger::store::Store;
        let head = self.store().head().seq;
        (head, head + 1)
    }
}
