//! A supervisor embedding the engine: N simulated workers (tokio tasks) stream Worker
//! events — duplicates, a stale delivery after their Attempt finished, a conflicting
//! payload among them — while a subscriber prints the audit trail. Mid-stream the engine
//! is stopped hard (every handle dropped, no shutdown); the ledger is reopened (a full
//! replay) and the run proves that every acknowledged receipt is present and that the
//! live state digest equals the replayed one. Exits 0 on success.
//!
//! Run: `cargo run --release --example supervisor [WORKERS]`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // an example may panic

use std::sync::{Arc, Mutex};
use std::time::Duration;

// Only the embedding surface, at the crate root: the engine, commands, receipts, state,
// the refusal an embedder matches on, and the record types (`schema`).
use closure_ledger::commands::*;
use closure_ledger::schema::events::{WorkerEventKind, WorkerPayload};
use closure_ledger::schema::types::{ResultKind, ThreadChoice};
use closure_ledger::schema::{Digest, Id};
use closure_ledger::{Command, Engine, EngineError, Options, Receipt, Refusal};
use futures::StreamExt;

type Acks = Arc<Mutex<Vec<Receipt>>>;

/// The supervisor's ids: ULIDs it chooses (here, numbered).
fn lid(n: u128) -> Id {
    Id(0x0193_0000_0000_0000_0000_0000_0000_0000 | n)
}

fn payload(kind: WorkerEventKind, observed_at_ms: u64, text: &str) -> WorkerPayload {
    WorkerPayload { kind, observed_at_ms, text: text.to_owned(), items: vec![] }
}

/// The setup every workflow shares — a Policy Bundle, an Execution Profile and a Goal — as
/// the JSON commands a supervisor receives (the first lines of the reference lifecycle,
/// docs/commands.md).
fn setup() -> Vec<Command> {
    include_str!("lifecycle.jsonl")
        .lines()
        .take(3)
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| fail(format!("setup command: {e}"))))
        .collect()
}

/// The ids the setup commands use.
fn setup_id(commands: &[Command], kind: &str) -> Id {
    commands
        .iter()
        .find_map(|c| match c {
            Command::InstallPolicy(p) if kind == "policy" => Some(p.policy_id),
            Command::InstallProfile(p) if kind == "profile" => Some(p.profile_id),
            Command::CreateGoal(g) if kind == "goal" => Some(g.goal_id),
            _ => None,
        })
        .unwrap_or_else(|| fail(format!("no {kind} in the setup")))
}

fn fail(message: String) -> ! {
    eprintln!("supervisor: {message}");
    std::process::exit(1)
}

async fn ok(engine: &Engine, command: Command) -> Receipt {
    let kind = command.kind();
    engine.submit(command).await.unwrap_or_else(|e| fail(format!("{kind}: {e}")))
}

/// One worker: an attempt in its own workflow, a stream of events (every third sent
/// twice), one conflicting redelivery, a result, a stale delivery after it, then a second,
/// open-ended stream that the hard stop interrupts.
async fn worker(engine: Engine, n: u128, acks: Acks, stats: Arc<Mutex<[u64; 3]>>) {
    let attempt = lid(0x1000 + n);
    let workflow = lid(0x2000 + n);
    ok(
        &engine,
        Command::StartAttempt(StartAttempt {
            attempt_id: attempt,
            workflow_id: workflow,
            worker_session_id: lid(0x3000 + n),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        }),
    )
    .await;
    let claim = ClaimDispatch::for_attempt(&engine.state(), attempt).unwrap();
    let manifest: Digest = claim.manifest_digest;
    ok(&engine, Command::ClaimDispatch(claim)).await;
    let deliver = |id: u128, at: u64, text: &str| {
        Command::DeliverWorkerEvent(DeliverWorkerEvent {
            attempt_id: attempt,
            worker_event_id: lid(0x10_0000 * (n + 1) + id),
            manifest_digest: manifest,
            payload: payload(WorkerEventKind::Progress, at, text),
        })
    };
    for i in 0..30u128 {
        let r = ok(&engine, deliver(i, i as u64, "step")).await;
        acks.lock().unwrap().push(r.clone());
        if i % 3 == 0 {
            let again = ok(&engine, deliver(i, i as u64, "step")).await;
            if !again.duplicate || again.seq != r.seq {
                fail(format!("worker {n}: a duplicate was not recognised"));
            }
            stats.lock().unwrap()[0] += 1;
        }
    }
    match engine.submit(deliver(0, 0, "a different payload under an old id")).await {
        Err(EngineError::Refused(Refusal::Conflict { .. })) => stats.lock().unwrap()[1] += 1,
        other => fail(format!("worker {n}: a conflicting payload was not refused: {other:?}")),
    }
    // The worker's terminal event: its result, which `finishAttempt` needs.
    let result = ok(
        &engine,
        Command::DeliverWorkerEvent(DeliverWorkerEvent {
            attempt_id: attempt,
            worker_event_id: lid(0x10_0000 * (n + 1) + 30),
            manifest_digest: manifest,
            payload: payload(WorkerEventKind::Proposals, 30, "proposals"),
        }),
    )
    .await;
    acks.lock().unwrap().push(result);
    ok(
        &engine,
        Command::FinishAttempt(FinishAttempt {
            attempt_id: attempt,
            result_kind: ResultKind::Proposals,
            summary: "proposals".into(),
        }),
    )
    .await;
    let stale = ok(&engine, deliver(31, 31, "late")).await;
    acks.lock().unwrap().push(stale);
    stats.lock().unwrap()[2] += 1;
    // A second attempt that streams until the engine is stopped under it.
    let second = lid(0x4000 + n);
    ok(
        &engine,
        Command::StartAttempt(StartAttempt {
            attempt_id: second,
            workflow_id: workflow,
            worker_session_id: lid(0x5000 + n),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        }),
    )
    .await;
    let claim = ClaimDispatch::for_attempt(&engine.state(), second).unwrap();
    let manifest = claim.manifest_digest;
    ok(&engine, Command::ClaimDispatch(claim)).await;
    for i in 0u128.. {
        let c = Command::DeliverWorkerEvent(DeliverWorkerEvent {
            attempt_id: second,
            worker_event_id: lid(0x10_0000 * (n + 1) + 0x1000 + i),
            manifest_digest: manifest,
            payload: payload(WorkerEventKind::Progress, i as u64, "streaming"),
        });
        match engine.submit(c).await {
            Ok(r) => acks.lock().unwrap().push(r),
            Err(_) => return,
        }
    }
}

#[tokio::main]
async fn main() {
    let workers: u128 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("closure-ledger-supervisor-{}", ulid::Ulid::new()));
    let engine = Engine::create(&dir, "supervisor example", Options::default())
        .await
        .unwrap_or_else(|e| fail(e.to_string()));
    let observer = engine.observer();

    // The audit trail: a subscriber from genesis, printing each committed entry.
    let trail = engine.subscribe(0);
    let printer = tokio::spawn(async move {
        futures::pin_mut!(trail);
        let mut n = 0u64;
        while let Some(item) = trail.next().await {
            match item {
                Ok(e) => {
                    n += 1;
                    if n <= 40 || n.is_multiple_of(200) {
                        println!("audit seq {:>5} {:<22} {}", e.seq, e.entry.event.kind(), e.hash);
                    }
                }
                Err(e) => fail(format!("subscription: {e}")),
            }
        }
        n
    });

    let setup = setup();
    let (policy, profile, goal) =
        (setup_id(&setup, "policy"), setup_id(&setup, "profile"), setup_id(&setup, "goal"));
    for command in setup {
        ok(&engine, command).await;
    }
    for n in 0..workers {
        ok(
            &engine,
            Command::StartWorkflow(StartWorkflow {
                workflow_id: lid(0x2000 + n),
                goal_id: goal,
                goal_revision: 1,
                policy_id: policy,
                profile_id: profile,
                plan: None,
            }),
        )
        .await;
    }

    let acks: Acks = Arc::new(Mutex::new(Vec::new()));
    let stats = Arc::new(Mutex::new([0u64; 3]));
    let tasks: Vec<_> =
        (0..workers).map(|n| tokio::spawn(worker(engine.clone(), n, acks.clone(), stats.clone()))).collect();

    // Let the second streams run, then stop hard: abort the workers and drop every
    // handle without shutdown.
    while acks.lock().unwrap().len() < (workers as usize) * 31 + 200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    drop(engine);
    while !observer.is_stopped() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let live = observer.state().digest();
    let live_head = observer.head();
    drop(observer);
    let printed =
        tokio::time::timeout(Duration::from_secs(30), printer).await.ok().and_then(|r| r.ok()).unwrap_or(0);

    // Reopen (a full replay through every rule and manifest proof) and prove: every
    // acknowledged receipt is a committed entry with the same hash.
    let engine =
        Engine::open(&dir, Options::default()).await.unwrap_or_else(|e| fail(format!("reopen: {e}")));
    let head = engine.head();
    let replayed = engine.state().digest();
    let committed: std::collections::BTreeMap<u64, Digest> = engine
        .subscribe(0)
        .take(usize::try_from(head + 1).unwrap())
        .map(|item| item.map(|e| (e.seq, e.hash)).unwrap_or_else(|e| fail(format!("reading back: {e}"))))
        .collect()
        .await;
    engine.shutdown().await.unwrap_or_else(|e| fail(format!("shutdown: {e}")));
    let acks = acks.lock().unwrap().clone();
    let missing = acks.iter().filter(|r| committed.get(&r.seq) != Some(&r.hash)).count();
    let [duplicates, conflicts, stale] = *stats.lock().unwrap();
    if missing > 0 {
        fail(format!("{missing} acknowledged receipts are missing after reopen"));
    }
    if replayed != live || head != live_head {
        fail(format!("live state {live} (head {live_head}) != replayed {replayed} (head {head})"));
    }
    if printed != head + 1 {
        fail(format!("the audit trail printed {printed} entries, the ledger holds {}", head + 1));
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "supervisor ok: {workers} workers, {} receipts all present after a hard stop, {duplicates} duplicates, {conflicts} conflicts refused, {stale} stale deliveries ignored, {} entries, live state = replayed state {replayed}",
        acks.len(),
        head + 1
    );
}
