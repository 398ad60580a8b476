//! Durable append latency: one single-entry frame committed to a real ledger (journal
//! append + fdatasync, then one sled insert) next to the physical limit on the same disk,
//! a raw 4 KiB append + fdatasync. Prints medians and the ratio.
//!
//! Run: `cargo bench --bench durable_append [-- ITERATIONS [DIR]]` (DIR defaults to a
//! directory under target/, i.e. the disk the project is on).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // a bench may panic

use std::io::Write;
use std::time::Instant;

use closure_ledger::schema::events::{WorkerEventAdmitted, WorkerEventKind, WorkerPayload};
use closure_ledger::schema::{Digest, DigestKind, Event, Id};
use closure_ledger::store::{self, Frame, Store};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let base = args.get(1).map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-durable-append")
    });
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();

    // Raw: 4 KiB append + fdatasync.
    let raw_path = base.join("raw.bin");
    let mut raw = std::fs::OpenOptions::new().create(true).append(true).open(&raw_path).unwrap();
    let block = vec![0xabu8; 4096];
    let mut raw_us = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        raw.write_all(&block).unwrap();
        raw.sync_data().unwrap();
        raw_us.push(t.elapsed().as_secs_f64() * 1e6);
    }

    // Ledger: one worker event (256-byte text) per frame.
    let ledger = Id(0x0190_0000_0000_0000_0000_0000_0000_0042);
    let mut store = store::init(&base.join("ledger"), "bench", ledger, 1).unwrap();
    let mut ledger_us = Vec::with_capacity(n);
    let mut frame_bytes = 0;
    for i in 0..n {
        let payload = WorkerPayload {
            kind: WorkerEventKind::Progress,
            observed_at_ms: i as u64,
            text: "x".repeat(256),
            items: vec![],
        };
        let event = Event::WorkerEventAdmitted(WorkerEventAdmitted {
            attempt_id: Id(7),
            worker_event_id: Id(1000 + i as u128),
            manifest_digest: Digest::of(DigestKind::Manifest, b"m"),
            payload_digest: Digest::of(
                DigestKind::WorkerPayload,
                &closure_ledger::schema::codec::encode(&payload),
            ),
            payload,
        });
        let t = Instant::now();
        let mut chain = store.chain();
        let sealed = chain.seal(event, 2 + i as u64, ledger).unwrap();
        let frame = Frame::new(vec![sealed]).unwrap();
        frame_bytes = frame.bytes().len();
        store.commit(&frame).unwrap();
        ledger_us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    drop(store);

    raw_us.sort_by(f64::total_cmp);
    ledger_us.sort_by(f64::total_cmp);
    let (raw_p50, led_p50) = (percentile(&raw_us, 0.5), percentile(&ledger_us, 0.5));
    println!("durable append, {n} iterations each, in {}", base.display());
    println!(
        "  raw 4 KiB append + fdatasync : p50 {raw_p50:8.1} us  p99 {:8.1} us",
        percentile(&raw_us, 0.99)
    );
    println!(
        "  ledger single-entry frame    : p50 {led_p50:8.1} us  p99 {:8.1} us  ({frame_bytes} B frame)",
        percentile(&ledger_us, 0.99)
    );
    println!("  ratio ledger/raw p50         : {:.2}", led_p50 / raw_p50);
    let _ = std::fs::remove_dir_all(&base);
}
