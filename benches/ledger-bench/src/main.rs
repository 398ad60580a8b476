//! The peer harness: one run generates the same reference workload (a goal, a workflow, a
//! dispatched attempt, 256-byte worker events) and measures, side by side, closure-ledger
//! and what a user would build instead. `cargo run --release -p ledger-bench -- [--quick] [--json] [--keep]`
//! (`--keep` leaves the generated ledgers in place and prints where; `--replay-only N`,
//! `--append-only` and `--compile-only` run one part alone, for profiling; `--frame-entries N`
//! sets how many entries the generated ledgers commit per frame, 2,000 by default).
//!
//! a. closure-ledger engine: durable append of worker events with 1, 8, 64 submitters;
//! b. raw sled: batch insert of the same frame bytes + flush;
//! c. raw file: append of the same bytes + one fdatasync per batch;
//! d. a SQLite ledger peer: WAL, synchronous=FULL, one row per entry, the same canonical
//!    encoding, BLAKE3 chain and `apply` rule checks, the same batch sizes;
//! e. strict replay of an N-entry ledger vs the peer's replay of the same entries;
//! f. compile latency on a small vs a large ledger (same request);
//! g. peak RSS of `ledger replay` on the large ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // a benchmark may panic

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use closure_ledger::admission;
use closure_ledger::compiler::compile;
use closure_ledger::engine::{Engine, Options};
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{Script, lid, payload};
use closure_ledger::runtime::command::{DeliverWorkerEvent, StartAttempt};
use closure_ledger::runtime::{Command, Ctx, State, attempt_binding};
use closure_ledger::store::{self, Chain, DiskStore, Frame, MemStore, Store};
use ledger_schema::events::WorkerEventKind;
use ledger_schema::types::ThreadChoice;
use ledger_schema::{Digest, Id, SealedEntry};

fn p50(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Worker event `i`'s id, shaped as a ULID is: a 48-bit millisecond timestamp (one
/// millisecond per event) over 80 random bits (splitmix64 of `i`, reproducible). Ids grow
/// with `i`, as a worker's do, and are as incompressible as real ones.
fn worker_event_id(i: u128) -> Id {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let random = (u128::from(mix(i as u64) & 0xffff) << 64) | u128::from(mix(!(i as u64)));
    Id(((0x0193_0000_0000 + i) << 80) | random)
}

fn event(i: u128, manifest: Digest, text: &str) -> Command {
    Command::DeliverWorkerEvent(DeliverWorkerEvent {
        attempt_id: lid(0x60),
        worker_event_id: worker_event_id(i),
        manifest_digest: manifest,
        payload: payload(WorkerEventKind::Progress, i as u64, text),
    })
}

/// A ledger at `dir` with the reference setup and attempt 0x60 dispatched.
fn prepared(dir: &Path) -> Digest {
    drop(store::init(dir, "bench", Id(42), 1).unwrap());
    let (mut ledger, _) = Ledger::open(dir).unwrap();
    let mut s = Script { ledger: &mut ledger, time_ms: 1, log: Vec::new() };
    s.setup().unwrap();
    s.start(0x60, 0x61).unwrap();
    s.claim(lid(0x60)).unwrap();
    ledger.state().attempts[&lid(0x60)].manifest_digest
}

struct Append {
    eps: f64,
    frames: u64,
    p50_us: f64,
}

fn engine_append(base: &Path, submitters: u128, total: u128, text: &str) -> Append {
    let dir = base.join(format!("engine-{submitters}"));
    let manifest = prepared(&dir);
    let frames_before = DiskStore::open(&dir).unwrap().1.frames;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let per = total / submitters;
    let (elapsed, mut lat) = rt.block_on(async {
        let engine = Engine::open(&dir, Options::default()).await.unwrap();
        let start = Instant::now();
        let tasks: Vec<_> = (0..submitters)
            .map(|t| {
                let engine = engine.clone();
                let text = text.to_owned();
                tokio::spawn(async move {
                    let mut lat = Vec::with_capacity(per as usize);
                    for i in 0..per {
                        let c = event(t * 0x10_0000 + i, manifest, &text);
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
    let frames = DiskStore::open(&dir).unwrap().1.frames - frames_before;
    Append { eps: (per * submitters) as f64 / elapsed.as_secs_f64(), frames, p50_us: p50(&mut lat) }
}

/// Sealed entries of `n` worker events (the same bytes every peer writes), in batches.
fn workload(n: u128, batch: usize, text: &str) -> (Ledger<MemStore>, Vec<Vec<SealedEntry>>) {
    let mut ledger = Ledger::from_store(MemStore::new(Id(42), "bench", 1)).unwrap();
    let mut s = Script { ledger: &mut ledger, time_ms: 1, log: Vec::new() };
    s.setup().unwrap();
    s.start(0x60, 0x61).unwrap();
    s.claim(lid(0x60)).unwrap();
    let base = ledger.clone();
    let manifest = ledger.state().attempts[&lid(0x60)].manifest_digest;
    let mut state = ledger.state().clone();
    let mut chain: Chain = ledger.store().chain();
    let mut batches = Vec::new();
    let mut current = Vec::new();
    for i in 0..n {
        let closure_ledger::runtime::Decided::Events(events) =
            admission::decide(&state, &event(i, manifest, text)).unwrap()
        else {
            unreachable!()
        };
        for e in events {
            let sealed = chain.seal(e, 2, Id(42)).unwrap();
            admission::apply(&mut state, &sealed.entry).unwrap();
            current.push(sealed);
        }
        if current.len() >= batch {
            batches.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        batches.push(current);
    }
    (base, batches)
}

fn raw_sled(base: &Path, batches: &[Vec<SealedEntry>]) -> f64 {
    let db = sled::open(base.join("raw-sled")).unwrap();
    let n: usize = batches.iter().map(Vec::len).sum();
    let start = Instant::now();
    for b in batches {
        let frame = Frame::new(b.clone()).unwrap();
        db.insert(frame.first_seq().to_be_bytes(), frame.bytes()).unwrap();
        db.flush().unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn raw_file(base: &Path, batches: &[Vec<SealedEntry>]) -> (f64, f64) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(base.join("raw.bin")).unwrap();
    let n: usize = batches.iter().map(Vec::len).sum();
    let start = Instant::now();
    for b in batches {
        let frame = Frame::new(b.clone()).unwrap();
        f.write_all(frame.bytes()).unwrap();
        f.sync_data().unwrap();
    }
    let eps = n as f64 / start.elapsed().as_secs_f64();
    let mut lat = Vec::new();
    let block = vec![0u8; 4096];
    for _ in 0..500 {
        let t = Instant::now();
        f.write_all(&block).unwrap();
        f.sync_data().unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    (eps, p50(&mut lat))
}

/// The SQLite peer: one row per entry, the same encoding, chain and rule checks.
fn sqlite_peer(base: &Path, ledger: &Ledger<MemStore>, batches: &[Vec<SealedEntry>]) -> (f64, PathBuf) {
    let path = base.join("peer.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.execute(
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL, bytes BLOB NOT NULL)",
        [],
    )
    .unwrap();
    let mut state = ledger.state().clone();
    let mut chain = ledger.store().chain();
    for e in ledger.store().read_range(0, u64::MAX).unwrap() {
        conn.execute(
            "INSERT INTO entries VALUES (?1, ?2, ?3)",
            rusqlite::params![e.entry.seq as i64, &e.hash.0[..], &e.bytes],
        )
        .unwrap();
    }
    let n: usize = batches.iter().map(Vec::len).sum();
    let start = Instant::now();
    for b in batches {
        let tx = conn.unchecked_transaction().unwrap();
        {
            let mut stmt = tx.prepare_cached("INSERT INTO entries VALUES (?1, ?2, ?3)").unwrap();
            for e in b {
                // The same work: seal (encode + hash + chain) and every rule.
                let sealed = chain.seal(e.entry.event.clone(), e.entry.time_ms, Id(42)).unwrap();
                admission::apply(&mut state, &sealed.entry).unwrap();
                stmt.execute(rusqlite::params![sealed.entry.seq as i64, &sealed.hash.0[..], &sealed.bytes])
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    (n as f64 / start.elapsed().as_secs_f64(), path)
}

/// Replays are timed this many times and the median reported, ours and the peer's alike:
/// the first replay after a ledger is built competes with what building left running (sled's
/// flusher finishing, the page cache settling) and was 20–25 % slower than the next ones.
const REPLAY_RUNS: usize = 3;

/// The median of `REPLAY_RUNS` runs of `run` (each returning entries per second).
fn median_of_runs(mut run: impl FnMut() -> f64) -> f64 {
    let mut eps: Vec<f64> = (0..REPLAY_RUNS).map(|_| run()).collect();
    eps.sort_by(f64::total_cmp);
    eps[REPLAY_RUNS / 2]
}

fn sqlite_replay(path: &Path) -> (f64, u64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let start = Instant::now();
    let mut stmt = conn.prepare("SELECT bytes FROM entries ORDER BY seq").unwrap();
    let mut rows = stmt.query([]).unwrap();
    let mut state = State::default();
    let mut chain = Chain::empty();
    let mut n = 0u64;
    while let Some(row) = rows.next().unwrap() {
        let bytes: Vec<u8> = row.get(0).unwrap();
        let sealed = chain.verify(&bytes).unwrap();
        admission::apply(&mut state, &sealed.entry).unwrap();
        n += 1;
    }
    (n as f64 / start.elapsed().as_secs_f64(), n)
}

/// A large ledger on disk: the same events, in frames of `batch`.
/// An N-entry ledger: the reference setup, attempt 0x60 dispatched, then worker events
/// committed `chunk` to a frame (2,000 by default; the engine's group commits hold at most
/// `max_batch`, 1,024 by default).
fn big_ledger(base: &Path, name: &str, n: u128, text: &str, chunk: u128) -> PathBuf {
    let dir = base.join(name);
    prepared(&dir);
    let (mut ledger, _) = Ledger::open(&dir).unwrap();
    let manifest = ledger.state().attempts[&lid(0x60)].manifest_digest;
    let chunk = chunk.max(1);
    let mut i = 0;
    while i < n {
        let commands: Vec<Command> = (i..(i + chunk).min(n)).map(|k| event(k, manifest, text)).collect();
        let mut done = 0;
        while done < commands.len() {
            let (results, processed) = ledger.submit_batch(&commands[done..], Ctx { time_ms: 2 });
            assert!(results.iter().all(Result::is_ok));
            done += processed;
        }
        i += chunk;
    }
    dir
}

fn compile_p50(state: &State) -> f64 {
    let b = attempt_binding(
        state,
        &StartAttempt {
            attempt_id: lid(0x9999),
            workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
            worker_session_id: lid(1),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        },
    );
    // The workflow's attempt 0x60 is still active; compile for a second workflow-free
    // binding by finishing it in a copy of the state.
    let b = match b {
        Ok(b) => b,
        Err(_) => {
            let mut s = state.clone();
            if let Some(w) = s.workflows.get_mut(&lid(closure_ledger::lifecycle::WORKFLOW)) {
                w.active_attempt = None;
            }
            return compile_p50(&s);
        }
    };
    // Each compile is for a new Attempt (as each `startAttempt` is): its identity, manifest
    // and package differ, while the durable sources it renders repeat.
    let mut b = b;
    let mut lat = Vec::new();
    for i in 0..2000 {
        b.attempt_id = lid(0x10_0000 + i);
        let t = Instant::now();
        // An Attempt start records the manifest's digest too (a currency proof does not).
        let compiled = compile(state, &b).unwrap();
        std::hint::black_box(compiled.manifest_digest());
        std::hint::black_box(compiled);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    p50(&mut lat)
}

fn replay_rss_mib(dir: &Path) -> (f64, f64) {
    let exe = std::env::current_exe().unwrap().with_file_name("ledger");
    if !exe.exists() {
        let built = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "closure-ledger", "--bin", "ledger"])
            .status()
            .unwrap();
        assert!(built.success(), "cannot build the ledger binary");
    }
    let start = Instant::now();
    let mut child = std::process::Command::new(&exe)
        .args(["replay", dir.to_str().unwrap(), "--json"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0f64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            for line in s.lines().filter(|l| l.starts_with("VmHWM:")) {
                let kib: f64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0.0);
                peak_kib = peak_kib.max(kib);
            }
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    (peak_kib / 1024.0, start.elapsed().as_secs_f64())
}

/// The library replay of both copies of `dir` (it must verify), and its entries per second.
/// A strict replay of `dir` over the copies `scope` names, and its entries per second.
/// A strict replay of `dir` over `scope`, timed [`REPLAY_RUNS`] times: the report and the
/// median entries per second.
fn timed_replay(
    dir: &Path,
    scope: closure_ledger::store::AuditScope,
) -> (closure_ledger::replay::ReplayReport, f64) {
    let mut last = None;
    let eps = median_of_runs(|| {
        let t = Instant::now();
        let report = closure_ledger::replay::replay(dir, None, scope, &mut |_| {}).unwrap();
        assert!(report.ok, "{:?}", report.failure);
        let eps = report.entries as f64 / t.elapsed().as_secs_f64();
        last = Some(report);
        eps
    });
    (last.expect("at least one run"), eps)
}

const USAGE: &str = "\
ledger-bench: closure-ledger against raw sled, a raw file and a SQLite peer (docs/performance.md)

usage: ledger-bench [--quick] [--json] [--keep] [--frame-entries N]
                    [--replay-only N | --compile-only | --append-only [SUBMITTERS]]

  --quick            100k-entry replay ledger instead of 1M (about 10 s here)
  --json             one JSON object with every figure on stdout
  --keep             keep the generated ledgers (their directory is printed)
  --frame-entries N  worker events per frame in the generated ledgers (2,000)
  --replay-only N    only the replay figures, on an N-entry ledger
  --compile-only     only the compile figures
  --append-only [S]  only the engine's append with S submitters (64), 40k entries";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let known = [
        "--quick",
        "--json",
        "--keep",
        "--frame-entries",
        "--replay-only",
        "--compile-only",
        "--append-only",
    ];
    let takes_value = |a: &str| a == "--frame-entries" || a == "--replay-only";
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            return;
        }
        if !known.contains(&a.as_str()) {
            eprintln!("ledger-bench: unknown argument {a:?}\n\n{USAGE}");
            std::process::exit(2);
        }
        if takes_value(a) {
            rest.next();
        }
        // `--append-only` takes an optional number of submitters.
        if a == "--append-only" && rest.clone().next().is_some_and(|n| n.parse::<u128>().is_ok()) {
            rest.next();
        }
    }
    let quick = args.iter().any(|a| a == "--quick");
    let json = args.iter().any(|a| a == "--json");
    let keep = args.iter().any(|a| a == "--keep");
    let (append_n, big_n, small_n) =
        if quick { (6_000u128, 100_000u128, 1_000u128) } else { (40_000, 1_000_000, 1_000) };
    let tmp = tempfile::Builder::new().prefix("ledger-bench").tempdir_in(std::env::temp_dir()).unwrap();
    let base = tmp.path();
    let text = "x".repeat(256);
    // `--frame-entries N`: the generated ledgers commit N worker events per frame (2,000).
    let chunk: u128 = args
        .iter()
        .position(|a| a == "--frame-entries")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse().expect("--frame-entries N"))
        .unwrap_or(2000);
    let log = |m: &str| {
        if !json {
            eprintln!("{m}");
        }
    };
    // `--replay-only N`: build an N-entry ledger and report only the replay figures
    // (throughput of the library replay of both copies, and the CLI replay's peak RSS).
    if let Some(n) = args.iter().position(|a| a == "--replay-only").and_then(|i| args.get(i + 1)) {
        let n: u128 = n.parse().expect("--replay-only N");
        log(&format!("building a {n}-entry ledger …"));
        let big = big_ledger(base, "big", n, &text, chunk);
        let (report, replay_eps) = timed_replay(&big, closure_ledger::store::AuditScope::Both);
        let (_, journal_only_eps) = timed_replay(&big, closure_ledger::store::AuditScope::JournalOnly);
        let (rss, replay_cli_s) = replay_rss_mib(&big);
        let out = serde_json::json!({
            "entries": report.entries,
            "replay_eps": replay_eps.round(),
            "replay_journal_only_eps": journal_only_eps.round(),
            "replay_peak_rss_mib": rss,
            "replay_cli_seconds": replay_cli_s,
        });
        println!("{out}");
        if keep {
            let kept = tmp.keep();
            eprintln!("kept {}", kept.display());
        }
        return;
    }

    // `--compile-only`: only the compile latency on the small ledger.
    if args.iter().any(|a| a == "--compile-only") {
        let small = big_ledger(base, "small", small_n, &text, chunk);
        let (small_ledger, _) = Ledger::open(&small).unwrap();
        println!("{}", serde_json::json!({ "compile_p50_us": compile_p50(small_ledger.state()) }));
        return;
    }
    // `--append-only`: only the engine's append at 64 submitters (for profiling the writer).
    // `--append-only [SUBMITTERS]` (default 64).
    if let Some(i) = args.iter().position(|a| a == "--append-only") {
        let submitters = args.get(i + 1).and_then(|n| n.parse::<u128>().ok()).unwrap_or(64).max(1);
        let a = engine_append(base, submitters, append_n, &text);
        let group = (append_n as f64 / a.frames as f64).round();
        println!(
            "{}",
            serde_json::json!({ "submitters": submitters as u64, "append_eps": a.eps.round(), "p50_us": a.p50_us, "group_commit_mean": group })
        );
        return;
    }

    log("a. engine append …");
    let a1 = engine_append(base, 1, append_n / 4, &text);
    let a8 = engine_append(base, 8, append_n, &text);
    let a64 = engine_append(base, 64, append_n, &text);
    let batch64 = ((append_n as f64) / a64.frames as f64).round().max(1.0) as usize;
    log(&format!("   mean group commit at 64 submitters: {batch64} entries"));
    let (peer_base, batches) = workload(append_n, batch64, &text);
    log("b. raw sled …");
    let sled_eps = raw_sled(base, &batches);
    log("c. raw file …");
    let (file_eps, fdatasync_p50) = raw_file(base, &batches);
    log("d. SQLite peer …");
    let (sqlite_eps, _) = sqlite_peer(base, &peer_base, &batches);

    log(&format!("e. building a {big_n}-entry ledger …"));
    let big = big_ledger(base, "big", big_n, &text, chunk);
    let (report, replay_eps) = timed_replay(&big, closure_ledger::store::AuditScope::Both);
    // The same replay without sled's copy: what reading sled costs is the difference.
    let (_, journal_only_eps) = timed_replay(&big, closure_ledger::store::AuditScope::JournalOnly);
    // The peer replays the very same entries from SQLite.
    let peer_path = base.join("peer-replay.sqlite");
    {
        let conn = rusqlite::Connection::open(&peer_path).unwrap();
        conn.execute(
            "CREATE TABLE entries (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL, bytes BLOB NOT NULL)",
            [],
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let (store, _) = DiskStore::open(&big).unwrap();
        let mut from = 0u64;
        let head = store.head().seq;
        while from <= head {
            let to = (from + 50_000).min(head);
            for e in store.read_range(from, to).unwrap() {
                tx.execute(
                    "INSERT INTO entries VALUES (?1, ?2, ?3)",
                    rusqlite::params![e.entry.seq as i64, &e.hash.0[..], &e.bytes],
                )
                .unwrap();
            }
            from = to + 1;
        }
        tx.commit().unwrap();
    }
    let peer_replay_eps = median_of_runs(|| sqlite_replay(&peer_path).0);

    log("f. compile latency …");
    let small = big_ledger(base, "small", small_n, &text, chunk);
    let (small_ledger, _) = Ledger::open(&small).unwrap();
    let compile_small = compile_p50(small_ledger.state());
    drop(small_ledger);
    let (big_ledger_open, _) = Ledger::open(&big).unwrap();
    let compile_big = compile_p50(big_ledger_open.state());
    drop(big_ledger_open);
    log("g. peak RSS of `ledger replay` …");
    let (rss, replay_cli_s) = replay_rss_mib(&big);

    let out = serde_json::json!({
        "quick": quick,
        "entries_big": report.entries,
        "append_eps": {"1": a1.eps.round(), "8": a8.eps.round(), "64": a64.eps.round()},
        "group_commit_mean": {"1": 1.0, "8": (append_n as f64 / a8.frames as f64), "64": batch64},
        "append_vs_sqlite_64": a64.eps / sqlite_eps,
        "append_vs_rawfile_64": a64.eps / file_eps,
        "append_vs_rawsled_64": a64.eps / sled_eps,
        "rawfile_eps_same_batches": file_eps.round(),
        "rawsled_eps_same_batches": sled_eps.round(),
        "sqlite_eps_same_batches": sqlite_eps.round(),
        "single_p50_us": a1.p50_us,
        "fdatasync_p50_us": fdatasync_p50,
        "replay_eps": replay_eps.round(),
        "replay_journal_only_eps": journal_only_eps.round(),
        "replay_vs_sqlite": replay_eps / peer_replay_eps,
        "sqlite_replay_eps": peer_replay_eps.round(),
        "compile_p50_us": compile_small,
        "compile_p50_us_big": compile_big,
        "compile_flatness": compile_big / compile_small,
        "replay_peak_rss_mib": rss,
        "replay_cli_seconds": replay_cli_s,
    });
    if json {
        println!("{out}");
    } else {
        println!("| measure | value |\n|---|---|");
        for (k, v) in out.as_object().unwrap() {
            println!("| {k} | {v} |");
        }
    }
    let _ = a8.p50_us;
    if keep {
        eprintln!("kept the ledgers in {}", tmp.keep().display());
    }
}
