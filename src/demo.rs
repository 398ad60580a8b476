//! `ledger demo`: the reference lifecycle, driven through the embedded engine, on a fresh ledger — goal, discovery, plan,
//! implement with worker events (a duplicate and a stale delivery among them), failing
//! evidence, REJECT_REPAIRABLE, repair, passing evidence, ACCEPT — then a replay audit,
//! a byte-for-byte recompilation of the repair Attempt's context, and tamper detection
//! against a checkpoint on a copy.

use std::io::Write;
use std::path::{Path, PathBuf};

use ledger_schema::Id;

use super::Failure;
use crate::engine::{Engine, Options};
use crate::ledger::Ledger;
use crate::lifecycle::{Script, lid};
use crate::store::{self, Checkpoint, DiskStore, MemStore, OpenError, Store};

fn fail(message: impl Into<String>) -> Failure {
    Failure { code: super::EXIT_USAGE_OR_IO, message: message.into() }
}

fn say(out: &mut dyn Write, line: impl std::fmt::Display) -> Result<(), Failure> {
    writeln!(out, "{line}").map_err(|e| fail(format!("write to stdout: {e}")))
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for item in std::fs::read_dir(from)? {
        let item = item?;
        let target = to.join(item.file_name());
        if item.file_type()?.is_dir() {
            copy_dir(&item.path(), &target)?;
        } else {
            std::fs::copy(item.path(), target)?;
        }
    }
    Ok(())
}

/// The Attempt of the selection part of the demo.
const SELECTION_ATTEMPT: u128 = 0x90;
const SELECTION_WORKFLOW: u128 = 0x91;

/// Three selections for the reference goal under Lean in Auto mode — explicit ids, a
/// directive in the query, an ambiguous query answered by a proposal from its shortlist —
/// then a DISCOVERY Attempt (a new workflow of the goal) that carries the proposed one.
/// Returns one line per step.
fn selections(dir: &Path) -> Result<Vec<String>, Failure> {
    use crate::lifecycle::{GOAL, POLICY, PROFILE};
    use crate::profiles::select::{Options, select};
    use crate::runtime::command::{StartAttempt, StartWorkflow};
    use crate::runtime::selection::{Request, Task};
    use crate::runtime::{Command, Ctx};
    use ledger_schema::events::profile::SelectionMode;
    use ledger_schema::events::selection::{SelectionDecision, SelectionRecorded};

    let selection = |e: &crate::profiles::ProfileError| fail(format!("selection demo: {e}"));
    let status = crate::profiles::status(dir, None).map_err(|e| selection(&e))?;
    crate::profiles::mode(dir, SelectionMode::Auto, Some(status.revision), None)
        .map_err(|e| selection(&e))?;
    let goal = lid(GOAL);
    let goal_revision = crate::profiles::read_state(dir)?
        .goals
        .get(&goal)
        .map(|g| g.revision)
        .ok_or_else(|| fail("no goal"))?;
    let task = |query: Option<&str>, explicit: &[&str]| Task {
        session_id: "demo-supervisor".to_owned(),
        task_id: goal.to_string(),
        revision: goal_revision,
        phase: "discovery".to_owned(),
        query: query.map(str::to_owned),
        explicit_ids: explicit.iter().map(|s| (*s).to_owned()).collect(),
        proposed_ids: Vec::new(),
        no_workflow: false,
    };
    let run = |task: &Task, request: Request| -> Result<SelectionRecorded, Failure> {
        let opts = Options { request, expected_digest: None, dry_run: false };
        let outcome = select(dir, task, &opts).map_err(|e| fail(format!("selection demo: {e}")))?;
        Ok(outcome.event)
    };
    let load = Request { load: true, ..Request::default() };
    let line = |what: &str, e: &SelectionRecorded| {
        format!(
            "select {what}: {} ({}) [{}] receipt {}",
            crate::runtime::wire(&e.decision),
            e.reason,
            e.selected_ids.join(", "),
            e.receipt().digest()
        )
    };
    let mut lines = Vec::new();
    let explicit = run(&task(None, &["skill:security-review"]), load.clone())?;
    lines.push(line("explicit", &explicit));
    let auto = run(
        &task(Some("Use the security-review skill on the parser's trust boundaries."), &[]),
        load.clone(),
    )?;
    lines.push(line("auto", &auto));
    let ambiguous = task(Some("Review and summarize the code changes."), &[]);
    let pending = run(&ambiguous, Request::default())?;
    lines.push(line("auto (ambiguous)", &pending));
    let first = pending.candidates.first().map(|c| c.id.clone());
    let (SelectionDecision::Pending, Some(first)) = (pending.decision, first) else {
        return Err(fail("selection demo: the ambiguous query did not leave a shortlist"));
    };
    let proposed = run(
        &ambiguous,
        Request { load: true, previous: Some(pending.receipt().digest()), proposal: Some(vec![first]) },
    )?;
    lines.push(line("proposal from the shortlist", &proposed));
    if [&explicit, &auto, &proposed].iter().any(|e| e.decision != SelectionDecision::Selected) {
        return Err(fail("selection demo: a selection selected nothing"));
    }

    let receipt = proposed.receipt().digest();
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    let time_ms = ledger.store().head().time_ms + 1;
    let ctx = Ctx { time_ms };
    for command in [
        Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(SELECTION_WORKFLOW),
            goal_id: goal,
            goal_revision,
            policy_id: lid(POLICY),
            profile_id: lid(PROFILE),
            plan: None,
        }),
        Command::StartAttempt(StartAttempt {
            attempt_id: lid(SELECTION_ATTEMPT),
            workflow_id: lid(SELECTION_WORKFLOW),
            worker_session_id: lid(SELECTION_ATTEMPT + 1),
            thread: ledger_schema::types::ThreadChoice::Fresh,
            selection_receipt: Some(receipt),
        }),
    ] {
        ledger.submit(&command, ctx).map_err(|e| fail(format!("{}: {e}", command.kind())))?;
    }
    drop(ledger);
    let found = crate::replay::recompile_attempt(dir, lid(SELECTION_ATTEMPT))?
        .ok_or_else(|| fail("the selection attempt is missing"))?;
    if !found.matches_recorded || found.compiled.manifest.selection_receipt != Some(receipt) {
        return Err(fail("the selection attempt's context does not recompile to its manifest"));
    }
    let skills = &found.compiled.package.selected_skills;
    lines.push(format!(
        "attempt {} carries selection {receipt}: {} loaded resource(s) of [{}] as prompt-advisory project material; manifest {} (compiler {})",
        lid(SELECTION_ATTEMPT),
        skills.len(),
        proposed.selected_ids.join(", "),
        found.compiled.manifest_digest(),
        found.compiled.manifest.compiler_version
    ));
    Ok(lines)
}

/// Where the demo's profiles part works: beside the ledger.
fn demo_work(dir: &Path) -> PathBuf {
    dir.with_extension("profiles")
}

/// The profiles part's state root (as `profiles::demo::run` places it in its work dir).
fn demo_state_root(dir: &Path) -> PathBuf {
    demo_work(dir).join(crate::profiles::demo::STATE_ROOT)
}

pub fn run(dir: Option<&Path>, out: &mut dyn Write) -> Result<(), Failure> {
    let dir: PathBuf = match dir {
        // Absolute, so the profiles' state root beside it is too (it must be).
        Some(d) => std::path::absolute(d).map_err(|e| fail(format!("{}: {e}", d.display())))?,
        None => std::env::temp_dir().join(format!("closure-ledger-demo-{}", ulid::Ulid::new())),
    };
    // The profiles part keeps its state root beside the ledger; a path that root would
    // refuse is refused before anything is written (outside review 83: the demo wrote its
    // whole lifecycle, then stopped at the root).
    crate::profiles::generation::root_path(&demo_state_root(&dir))
        .map_err(|e| fail(format!("{}: cannot hold the demo: {e}", dir.display())))?;
    // Nor inside a state root or a ledger's directory (outside review 97: the lifecycle was
    // written there, then the root refused, exit 2).
    let inside = crate::profiles::generation::inside_state_root(&dir)
        .map(|r| format!("{}, a state root", r.display()))
        .or_else(|| {
            dir.ancestors()
                .skip(1)
                .find(|a| store::holds_ledger(a))
                .map(|l| format!("{}, a ledger's directory", l.display()))
        });
    if let Some(what) = inside {
        return Err(fail(format!("{}: cannot hold the demo: it lies inside {what}", dir.display())));
    }
    let work = demo_work(&dir);
    if std::fs::symlink_metadata(&work).is_ok() {
        return Err(fail(format!(
            "{} already exists (the demo's profiles work beside the ledger): choose another DIR or remove it",
            work.display()
        )));
    }
    let ledger_id = Id::from_ulid(ulid::Ulid::new());
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
        .unwrap_or(0);
    drop(store::init(&dir, "demo", ledger_id, t0)?);
    say(out, format!("ledger {ledger_id} in {}", dir.display()))?;

    // The script's commands, derived once on an in-memory ledger (commands read back only
    // what the ledger derives, so the same state gives the same commands) ...
    let mut scratch =
        Ledger::from_store(MemStore::new(ledger_id, "demo", t0)).map_err(|e| fail(e.to_string()))?;
    let mut script = Script { ledger: &mut scratch, time_ms: t0, log: Vec::new() };
    script.lifecycle().map_err(|e| fail(format!("lifecycle: {e}")))?;
    let commands: Vec<_> = script.log.into_iter().map(|(command, _)| command).collect();
    // ... then driven through the embedded engine, the API a supervisor uses.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| fail(format!("tokio runtime: {e}")))?;
    let (receipts, live_digest) = runtime.block_on(async {
        let engine = Engine::open(&dir, Options::default()).await?;
        let mut receipts = Vec::with_capacity(commands.len());
        for command in &commands {
            let receipt =
                engine.submit(command.clone()).await.map_err(|e| fail(format!("{}: {e}", command.kind())))?;
            receipts.push(receipt);
        }
        let digest = engine.state().digest();
        engine.shutdown().await.map_err(|e| fail(e.to_string()))?;
        Ok::<_, Failure>((receipts, digest))
    })?;
    for (command, receipt) in commands.iter().zip(&receipts) {
        let note = if receipt.duplicate { "  (duplicate: nothing written)" } else { "" };
        say(out, format!("  seq {:>3}  {:<20} {}{note}", receipt.seq, command.kind(), receipt.hash))?;
    }
    let (store, _) = DiskStore::open(&dir)?;
    let head = store.head();
    let checkpoint = Checkpoint::of(&store.read(head.seq)?);
    drop(store);
    say(
        out,
        format!("lifecycle admitted through the engine: head seq {}, live state {live_digest}", head.seq),
    )?;

    let report = crate::replay::replay(&dir, None, crate::store::AuditScope::Both, &mut |_| {})?;
    if !report.ok {
        let why = report.failure.as_ref().map(ToString::to_string).unwrap_or_default();
        return Err(fail(format!("replay failed: {why}")));
    }
    say(
        out,
        format!(
            "replay audit: {} entries, {} manifests proved, worker events admitted {} / ignored {}, verdicts {}",
            report.entries,
            report.manifests_proved,
            report.worker_events.admitted,
            report.worker_events.ignored,
            crate::replay::verdicts_text(&report.verdicts)
        ),
    )?;
    if report.state_digest != live_digest {
        return Err(fail(format!(
            "replayed state {} differs from live state {live_digest}",
            report.state_digest
        )));
    }
    say(out, format!("replayed state digest equals the live one: {}", report.state_digest))?;

    // Context profiles (seed 003): a registry, then Lean -> Full -> rollback, and a replay
    // that re-derives every recorded plan and generation digest.
    for line in crate::profiles::demo::run(&dir, &work).map_err(|e| fail(format!("profiles: {e}")))? {
        say(out, line)?;
    }
    let report = crate::replay::replay(&dir, None, crate::store::AuditScope::Both, &mut |_| {})?;
    if !report.ok || report.plans_proved != 3 {
        return Err(fail(format!(
            "profile replay: ok {}, {} plans proved{}",
            report.ok,
            report.plans_proved,
            report.failure.as_ref().map(|f| format!(": {f}")).unwrap_or_default()
        )));
    }
    say(
        out,
        format!(
            "replay re-derived {} profile plan digests; head seq {}",
            report.plans_proved, report.head_seq
        ),
    )?;

    // Task selection (seed 003, issue #15): an explicit, an Auto and a pending-then-proposed
    // selection for the goal, then an Attempt whose context carries one.
    for line in selections(&dir)? {
        say(out, line)?;
    }
    let report = crate::replay::replay(&dir, None, crate::store::AuditScope::Both, &mut |_| {})?;
    if !report.ok || report.manifests_proved != 5 {
        return Err(fail(format!(
            "selection replay: ok {}, {} manifests proved{}",
            report.ok,
            report.manifests_proved,
            report.failure.as_ref().map(|f| format!(": {f}")).unwrap_or_default()
        )));
    }
    say(
        out,
        format!(
            "replay re-derived every selection and {} manifests (one carrying a selection); head seq {}",
            report.manifests_proved, report.head_seq
        ),
    )?;

    let repair_attempt = lid(0x66);
    let again = crate::replay::recompile_attempt(&dir, repair_attempt)?
        .ok_or_else(|| fail("the repair attempt is missing"))?;
    if !again.matches_recorded {
        return Err(fail("the repair attempt's context does not recompile to the recorded manifest"));
    }
    say(
        out,
        format!(
            "recompiled the repair attempt's context from the ledger alone: package {} (schema {}), manifest {} = recorded",
            again.compiled.manifest.package_digest,
            again.compiled.package.schema_version,
            again.compiled.manifest_digest()
        ),
    )?;

    let tampered = dir.with_extension("tampered");
    copy_dir(&dir, &tampered).map_err(|e| fail(format!("copy {}: {e}", dir.display())))?;
    let segment = tampered.join("journal").join(format!("{:020}.clj", 0));
    let mut bytes = std::fs::read(&segment).map_err(|e| fail(format!("read {}: {e}", segment.display())))?;
    let middle = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(middle) {
        *b ^= 0x01;
    }
    std::fs::write(&segment, &bytes).map_err(|e| fail(format!("write {}: {e}", segment.display())))?;
    match store::verify(&tampered, Some(&checkpoint)) {
        Err(OpenError::Corrupt { seq, replica, reason }) => {
            say(
                out,
                format!(
                    "one flipped bit in a copy's journal: detected at seq {seq} in the {replica} copy: {reason}"
                ),
            )?;
        }
        Err(other) => return Err(fail(format!("tamper demo: unexpected error: {other}"))),
        Ok(_) => return Err(fail("tamper demo: a flipped bit went undetected")),
    }
    let _ = std::fs::remove_dir_all(&tampered);
    say(
        out,
        format!(
            "demo ok: {} entries, head {}, ledger kept in {}",
            report.entries,
            report.head_hash,
            dir.display()
        ),
    )
}
