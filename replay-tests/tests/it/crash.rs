//! kill -9 under load: a child process (this test binary, re-run) appends frames and
//! prints each acknowledged seq; the parent SIGKILLs it at a random moment, reopens,
//! verifies, and checks every printed seq is present with the printed hash.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use closure_ledger::store::{DiskStore, Frame, Store};
use replay_tests::*;

const CHILD_ENV: &str = "CLOSURE_LEDGER_CRASH_CHILD_DIR";

/// Not a test on its own: the child half of the crash test. It appends frames of 1–4
/// entries forever and prints `ack <last seq> <hash>` after each durable commit.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let (mut store, _) = DiskStore::open(std::path::Path::new(&dir)).unwrap();
    let mut out = std::io::stdout().lock();
    let mut i = 0usize;
    loop {
        let mut chain = store.chain();
        // Mostly small frames; now and then one of 200 entries, which sled stores in chunks
        // (store format 4), so a kill can land inside a chunked sled batch.
        let n = if i % 9 == 4 { 200 } else { 1 + i % 4 };
        let entries = (0..n).map(|k| chain.seal(event(i + k), T0 + i as u64, LEDGER).unwrap()).collect();
        let receipt = store.commit(&Frame::new(entries).unwrap()).unwrap();
        writeln!(out, "ack {} {}", receipt.last_seq, receipt.hash).unwrap();
        out.flush().unwrap();
        i += n;
    }
}

/// Runs this test binary's `child` test with `envs`, SIGKILLs it after `wait`, and returns
/// every `ack <seq> <hash>` it printed before dying.
fn run_and_kill(child: &str, envs: &[(&str, &std::ffi::OsStr)], wait: Duration) -> Vec<(u64, String)> {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(&exe);
    command
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        command.env(k, v);
    }
    let mut process = command.spawn().unwrap();
    let stdout = process.stdout.take().unwrap();
    let (first_ack, acking) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("ack ") {
                let (seq, hash) = rest.split_once(' ').unwrap();
                acks.push((seq.parse::<u64>().unwrap(), hash.to_owned()));
                if acks.len() == 1 {
                    let _ = first_ack.send(());
                }
            }
        }
        acks
    });
    // The random moment is counted from the first acknowledgement, not from the spawn:
    // reopening a grown ledger (a full replay) can outlast the whole delay, and a kill
    // before anything was acknowledged proves nothing.
    let _ = acking.recv_timeout(Duration::from_secs(60));
    let start = Instant::now();
    while start.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(5));
    }
    process.kill().unwrap(); // SIGKILL
    process.wait().unwrap();
    reader.join().unwrap()
}

fn rounds() -> u64 {
    std::env::var("CRASH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20)
}

/// ≥ 20 rounds of SIGKILL at a random moment: no acknowledged entry is ever lost.
#[test]
fn kill_9_loses_no_acknowledged_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    make_ledger(&dir, 1, 1);
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut rng = Rng(seed);
    let (mut total_acked, mut total_lost) = (0u64, 0u64);
    let n_rounds = rounds();
    for round in 0..n_rounds {
        let wait = Duration::from_millis(30 + rng.below(250));
        let acks = run_and_kill("crash::crash_child", &[(CHILD_ENV, dir.as_os_str())], wait);
        let (store, report) = DiskStore::open(&dir)
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): reopen failed: {e}"));
        let mut lost = 0;
        for (seq, hash) in &acks {
            match store.read(*seq) {
                Ok(sealed) if sealed.hash.to_string() == *hash => {}
                _ => lost += 1,
            }
        }
        drop(store);
        let (code, verified) = verify_json(&dir, None);
        assert_eq!(code, 0, "round {round} (seed {seed}): {verified}");
        assert_eq!(
            lost, 0,
            "round {round} (seed {seed}): {lost} acknowledged entries lost; open report {report:?}"
        );
        total_acked += acks.len() as u64;
        total_lost += lost;
    }
    println!(
        "crash: {n_rounds} kill -9 rounds, {total_acked} acknowledged commits, {total_lost} lost (seed {seed})"
    );
    assert!(total_acked > 0, "the child never acknowledged a commit");
}

const ENGINE_CHILD_ENV: &str = "CLOSURE_LEDGER_ENGINE_CRASH_CHILD_DIR";

/// Not a test on its own: the child half of the engine crash test. 8 concurrent
/// submitters stream worker events into the engine and print `ack <seq> <hash>` for each
/// receipt, until killed.
#[test]
fn engine_crash_child() {
    let Some(dir) = std::env::var_os(ENGINE_CHILD_ENV) else { return };
    let round: u128 = std::env::var("CRASH_ROUND").unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    rt.block_on(async move {
        use closure_ledger::engine::{Engine, Options};
        let engine = Engine::open(std::path::Path::new(&dir), Options::default()).await.unwrap();
        let manifest = engine.state().attempts[&closure_ledger::lifecycle::lid(0x60)].manifest_digest;
        let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for task in 0..8u128 {
            let engine = engine.clone();
            let out = out.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0u128.. {
                    let id =
                        closure_ledger::lifecycle::lid(0x100_0000 + round * 0x10_0000 + task * 0x1_0000 + i);
                    let command = closure_ledger::runtime::Command::DeliverWorkerEvent(
                        closure_ledger::runtime::command::DeliverWorkerEvent {
                            attempt_id: closure_ledger::lifecycle::lid(0x60),
                            worker_event_id: id,
                            manifest_digest: manifest,
                            payload: closure_ledger::lifecycle::payload(
                                ledger_schema::events::WorkerEventKind::Progress,
                                i as u64,
                                "working",
                            ),
                        },
                    );
                    let r = engine.submit(command).await.unwrap();
                    let mut out = out.lock().unwrap();
                    writeln!(out, "ack {} {}", r.seq, r.hash).unwrap();
                    out.flush().unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// ≥ 20 rounds of SIGKILL of a process running the engine under concurrent load: every
/// printed receipt is present after reopen, and replay (strict open) verifies.
#[test]
fn engine_kill_9_loses_no_receipt() {
    use closure_ledger::ledger::Ledger;
    use closure_ledger::lifecycle::{Script, lid};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(closure_ledger::store::init(&dir, "t", LEDGER, T0).unwrap());
    {
        let (mut ledger, _) = Ledger::open(&dir).unwrap();
        let mut s = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
        s.setup().unwrap();
        s.start(0x60, 0x61).unwrap();
        s.claim(lid(0x60)).unwrap();
    }
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    let mut rng = Rng(seed);
    let (mut total_acked, mut total_lost) = (0u64, 0u64);
    let n_rounds = rounds();
    for round in 0..n_rounds {
        let round_text = std::ffi::OsString::from(round.to_string());
        let wait = Duration::from_millis(80 + rng.below(300));
        let acks = run_and_kill(
            "crash::engine_crash_child",
            &[(ENGINE_CHILD_ENV, dir.as_os_str()), ("CRASH_ROUND", round_text.as_os_str())],
            wait,
        );
        let (ledger, _) = Ledger::open(&dir)
            .unwrap_or_else(|e| panic!("round {round} (seed {seed}): strict reopen (replay) failed: {e}"));
        let lost = acks
            .iter()
            .filter(|(seq, hash)| {
                ledger.store().read(*seq).map(|s| s.hash.to_string() != *hash).unwrap_or(true)
            })
            .count() as u64;
        let present = acks.len() as u64 - lost;
        drop(ledger);
        println!(
            "engine crash round {round:>4}: acknowledged {:>6} present {present:>6} lost {lost}",
            acks.len()
        );
        assert_eq!(lost, 0, "round {round} (seed {seed}): {lost} receipts lost");
        assert!(!acks.is_empty(), "round {round} (seed {seed}): the child acknowledged nothing");
        total_acked += acks.len() as u64;
        total_lost += lost;
    }
    println!(
        "engine crash: {n_rounds} kill -9 rounds, {total_acked} receipts, {total_lost} lost (seed {seed})"
    );
    assert!(total_acked > 0, "the child never acknowledged a commit");
}
