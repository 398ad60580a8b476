//! kill -9 under load: a child process (this test binary, re-run) appends frames and
//! prints each acknowledged seq; the parent SIGKILLs it at a random moment, reopens,
//! verifies, and checks every printed seq is present with the printed hash.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

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
        let n = 1 + i % 4;
        let entries = (0..n).map(|k| chain.seal(event(i + k), T0 + i as u64, LEDGER).unwrap()).collect();
        let receipt = store.commit(&Frame::new(entries).unwrap()).unwrap();
        writeln!(out, "ack {} {}", receipt.last_seq, receipt.hash).unwrap();
        out.flush().unwrap();
        i += n;
    }
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
    let exe = std::env::current_exe().unwrap();
    let (mut total_acked, mut total_lost) = (0u64, 0u64);
    let n_rounds = rounds();
    for round in 0..n_rounds {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acks = Vec::new();
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ack ") {
                    let (seq, hash) = rest.split_once(' ').unwrap();
                    acks.push((seq.parse::<u64>().unwrap(), hash.to_owned()));
                }
            }
            acks
        });
        let wait = Duration::from_millis(30 + rng.below(250));
        let start = Instant::now();
        while start.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let acks = reader.join().unwrap();
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
