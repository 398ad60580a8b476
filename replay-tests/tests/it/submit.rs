//! `ledger submit`: JSON lines in, one receipt per line out; the frozen
//! `examples/lifecycle.jsonl` is exactly the reference script and is admitted with exit 0;
//! bad input gives one clear line, a non-zero exit, and an unchanged ledger.

use std::path::{Path, PathBuf};

use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::Script;
use closure_ledger::store::{self, MemStore};
use replay_tests::*;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/lifecycle.jsonl")
}

/// The script serialized as JSON lines (what examples/lifecycle.jsonl must hold).
fn script_jsonl() -> String {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.lifecycle().unwrap();
    script.log.iter().map(|(c, _)| serde_json::to_string(c).unwrap() + "\n").collect()
}

/// `examples/lifecycle.jsonl` is the reference script, frozen (re-freeze with
/// `BLESS_EXAMPLES=1` after a deliberate change).
#[test]
fn the_example_is_the_reference_script() {
    let fresh = script_jsonl();
    if std::env::var_os("BLESS_EXAMPLES").is_some() {
        std::fs::write(example(), &fresh).unwrap();
    }
    assert_eq!(std::fs::read_to_string(example()).unwrap(), fresh);
}

fn fresh_ledger(tmp: &Path) -> PathBuf {
    let dir = tmp.join("l");
    drop(store::init(&dir, "t", LEDGER, T0).unwrap());
    dir
}

/// Every stored value: the journal bytes and every sled frame.
fn stored(dir: &Path) -> (Vec<u8>, Vec<(u64, Vec<u8>)>) {
    (std::fs::read(segment(dir)).unwrap(), sled_frames(dir))
}

/// The lifecycle file is admitted with exit 0 and one receipt per command.
#[test]
fn the_lifecycle_file_is_admitted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fresh_ledger(tmp.path());
    let (code, out, err) = cli(&["submit", dir.to_str().unwrap(), example().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}\n{out}");
    let receipts: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let n_commands = std::fs::read_to_string(example()).unwrap().lines().count();
    assert_eq!(receipts.len(), n_commands);
    assert!(receipts.iter().all(|r| r.get("seq").is_some() && r.get("rejected").is_none()));
    assert_eq!(receipts.iter().filter(|r| r["duplicate"] == true).count(), 1);
    let (code, _, err) = cli(&["replay", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

/// Bad JSON, unknown fields, wrong types, oversized payloads, binary garbage, an
/// over-long line and a rule violation: each one line, exit 1, not one stored byte changed.
#[test]
fn bad_input_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fresh_ledger(tmp.path());
    let lines = std::fs::read_to_string(example()).unwrap();
    let setup: String = lines.lines().take(3).map(|l| format!("{l}\n")).collect();
    let setup_file = tmp.path().join("setup.jsonl");
    std::fs::write(&setup_file, setup).unwrap();
    assert_eq!(cli(&["submit", dir.to_str().unwrap(), setup_file.to_str().unwrap()]).0, 0);
    let before = stored(&dir);
    let big = "x".repeat(70_000);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("bad json", b"{\"createGoal\": {".to_vec()),
        ("unknown command", b"{\"deleteEverything\": {}}".to_vec()),
        ("unknown field", br#"{"raiseBlocker": {"blockerId": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "workflowId": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "description": "x", "extra": 1}}"#.to_vec()),
        ("wrong type", br#"{"reviseGoal": {"goalId": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "revision": "two", "content": {}}}"#.to_vec()),
        ("binary garbage", vec![0xff, 0xfe, 0x00, 0x9c, 0x12, b'\n']),
        ("oversized text", format!(r#"{{"createGoal": {{"goalId": "01ARZ3NDEKTSV4RRFFQ69G5FAW", "content": {{"objective": "{big}", "successCriteria": [], "scope": [], "nonGoals": [], "preservationConstraints": []}}}}}}"#).into_bytes()),
        ("rule violation", br#"{"reviseGoal": {"goalId": "01J00000000000000000000010", "revision": 5, "content": {"objective": "x", "successCriteria": [], "scope": [], "nonGoals": [], "preservationConstraints": []}}}"#.to_vec()),
    ];
    for (name, bytes) in cases {
        let file = tmp.path().join("bad.jsonl");
        std::fs::write(&file, &bytes).unwrap();
        let (code, out, err) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
        assert_eq!(code, 1, "{name}: {out}{err}");
        assert_eq!(out.lines().count(), 1, "{name}: one receipt line: {out}");
        let receipt: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert!(receipt["rejected"].is_string(), "{name}: {receipt}");
        assert_eq!(err.lines().count(), 1, "{name}: one error line: {err}");
        assert_eq!(stored(&dir), before, "{name}: a stored byte changed");
    }
    let (code, _, err) =
        cli(&["submit", dir.to_str().unwrap(), tmp.path().join("missing.jsonl").to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(stored(&dir), before);
}

/// A line that passes 1 MiB without a newline is refused as soon as it does — the read is
/// bounded, so an input that never ends (`/dev/zero`) ends the run: exit 2, one receipt
/// (rejected) and one error line, nothing of it written; the lines before it were admitted.
#[test]
fn a_line_without_end_is_refused_at_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fresh_ledger(tmp.path());
    let before = stored(&dir);
    let (code, out, err) = cli(&["submit", dir.to_str().unwrap(), "/dev/zero"]);
    assert_eq!(code, 2, "{out}{err}");
    let receipt: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(receipt["line"], 1);
    assert!(receipt["rejected"].as_str().unwrap().contains("without a newline"), "{receipt}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("line 1") && err.contains("1048576"), "{err}");
    assert_eq!(stored(&dir), before);
    // After admitted lines: they stay, the over-long one is not read on.
    let lines = std::fs::read_to_string(example()).unwrap();
    let mut input: Vec<u8> = lines.lines().take(2).flat_map(|l| format!("{l}\n").into_bytes()).collect();
    input.extend(vec![b'a'; 1_100_000]);
    input.extend(b"\n");
    input.extend(lines.lines().nth(2).unwrap().as_bytes());
    let file = tmp.path().join("long.jsonl");
    std::fs::write(&file, input).unwrap();
    let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(out.lines().count(), 3, "two receipts and the refusal, nothing after: {out}");
    let (_, status, _) = cli(&["status", dir.to_str().unwrap(), "--json"]);
    let status: serde_json::Value = serde_json::from_str(status.trim()).unwrap();
    assert_eq!(status["headSeq"], 2);
}

/// An ignored delivery's receipt says so: `"ignored": "<reason>"` (the lifecycle's late
/// delivery after its Attempt ended), and so does its duplicate.
#[test]
fn an_ignored_delivery_receipt_names_its_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fresh_ledger(tmp.path());
    let (code, out, err) = cli(&["submit", dir.to_str().unwrap(), example().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let receipts: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ignored: Vec<&serde_json::Value> = receipts.iter().filter(|r| r.get("ignored").is_some()).collect();
    assert_eq!(ignored.len(), 1, "{out}");
    assert_eq!(ignored[0]["ignored"], "ATTEMPT_ENDED");
    assert_eq!(ignored[0]["kind"], "deliverWorkerEvent");
    let line = ignored[0]["line"].as_u64().unwrap() as usize;
    let again = tmp.path().join("again.jsonl");
    let text = std::fs::read_to_string(example()).unwrap();
    std::fs::write(&again, text.lines().nth(line - 1).unwrap()).unwrap();
    let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), again.to_str().unwrap()]);
    assert_eq!(code, 0);
    let dup: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(dup["ignored"], ignored[0]["ignored"]);
    assert_eq!(dup["duplicate"], true);
    assert_eq!(dup["seq"], ignored[0]["seq"]);
}

/// A lone UTF-16 surrogate escape is named as such (not "unexpected end of hex escape");
/// a proper pair and an escaped backslash before `u` are fine.
#[test]
fn a_lone_surrogate_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = fresh_ledger(tmp.path());
    let goal = |id: &str, objective: &str| {
        format!(
            r#"{{"createGoal": {{"goalId": "{id}", "content": {{"objective": "{objective}", "successCriteria": ["a"], "scope": ["b"], "nonGoals": [], "preservationConstraints": []}}}}}}"#
        )
    };
    for (objective, lone) in
        [(r"x\ud800y", r"\uD800"), (r"x\uDC01", r"\uDC01"), (r"x\ud800\u0041", r"\uD800")]
    {
        let file = tmp.path().join("s.jsonl");
        std::fs::write(&file, goal("01JC0000000000000000000010", objective)).unwrap();
        let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
        assert_eq!(code, 1);
        let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let reason = r["rejected"].as_str().unwrap();
        assert!(reason.contains(&format!("a lone UTF-16 surrogate {lone}")), "{reason}");
    }
    // A byte-order mark before the line is named too (outside review 95 F4).
    let file = tmp.path().join("bom.jsonl");
    std::fs::write(&file, format!("\u{FEFF}{}", goal("01JC0000000000000000000012", "x"))).unwrap();
    let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(r["rejected"].as_str().unwrap().contains("byte-order mark"), "{r}");
    // Well-formed JSON of another shape says what a command is (outside review 190 F4:
    // "expected value at line 1 column 1").
    for (line, shape) in [
        ("[1,2]", "an array"),
        ("null", "null"),
        ("42", "a number"),
        ("{}", "an object with 0 keys"),
        (r#"{"createGoal": {}, "proposeFact": {}}"#, "an object with 2 keys"),
        (r#"{"createGoal": {}, "createGoal": {}}"#, "an object with 2 keys (one given twice)"),
    ] {
        let file = tmp.path().join("shape.jsonl");
        std::fs::write(&file, line).unwrap();
        let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        let reason = r["rejected"].as_str().unwrap();
        assert!(
            reason.contains("exactly one key") && reason.ends_with(&format!("this line is {shape}")),
            "{reason}"
        );
    }
    // The parser's position is given within the line, not as its "line 1" beside the
    // receipt's own `line` (outside review 243 F3).
    let file = tmp.path().join("pos.jsonl");
    std::fs::write(&file, "{\"createGoal\": {\"goalId\": \"x\"}}\n{\"createGoal\": {\n").unwrap();
    let (code, out, _) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let reasons: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["rejected"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(reasons[0].ends_with("at column 29 of the line"), "{reasons:?}");
    assert!(reasons[1].ends_with("at the end of the line"), "{reasons:?}");
    assert!(reasons.iter().all(|r| !r.contains("line 1")), "{reasons:?}");
    let file = tmp.path().join("ok.jsonl");
    std::fs::write(&file, goal("01JC0000000000000000000011", r"pair \ud83d\ude00, escaped \\ud800")).unwrap();
    let (code, _, err) = cli(&["submit", dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

/// Usage errors are one line on stderr with a hint (exit 2); a bare `ledger` is one line
/// naming the commands; `--help` and `--version` go to stdout (exit 0).
#[test]
fn usage_errors_are_one_line() {
    for args in [
        &[][..],
        &["submit"][..],
        &["submit", "/tmp/x", "a", "b"][..],
        &["nosuch"][..],
        &["replay", "/tmp/x", "--to", "abc"][..],
        &["compile", "/tmp/x", "--attempt", "1", "--cbor", "--json"][..],
        &["verify", "--bogus"][..],
    ] {
        let (code, out, err) = cli(args);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(out, "", "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("ledger: "), "{err}");
        assert!(err.contains("--help"), "a hint: {err}");
        assert!(!err.contains("error:"), "{err}");
    }
    let (_, _, err) = cli(&[]);
    assert!(err.contains("submit") && err.contains("replay"), "{err}");
    let (_, _, err) = cli(&["submit"]);
    assert!(err.contains("<DIR>") && err.contains("usage: ledger submit"), "{err}");
    for args in [&["--help"][..], &["--version"][..], &["submit", "--help"][..]] {
        let (code, out, err) = cli(args);
        assert_eq!((code, err.as_str()), (0, ""), "{args:?}");
        assert!(out.ends_with('\n') && !out.is_empty(), "{args:?}");
    }
}

/// An error naming a path or argument that holds a line break or an ESC sequence is still
/// one line that prints as written (outside review 20: `show $'/tmp/x\ny' 1` printed two
/// lines, a checkpoint path with ESC [2J cleared the screen); a task input that cannot be
/// read is named.
#[test]
fn errors_with_untrusted_text_are_one_plain_line() {
    for args in [
        &["show", "/tmp/x\ny", "1"][..],
        &["verify", "/tmp/x\r\u{1b}[2J", "--json"][..],
        &["verify", "/tmp", "--checkpoint", "/tmp/x\u{1b}[2J\u{200B}"][..],
        &["select", "/tmp/x", "--task-input", "/nonexistent/\u{1b}task.json"][..],
    ] {
        let (code, _, err) = cli(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err:?}");
        assert!(!err.chars().any(|c| c.is_control() && c != '\n' || c == '\u{200B}'), "{args:?}: {err:?}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    assert_eq!(cli(&["init", dir.to_str().unwrap()]).0, 0);
    let (code, _, err) = cli(&["select", dir.to_str().unwrap(), "--task-input", "/nonexistent/task.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/task.json"), "the path is named: {err}");
}

/// Every example in docs/commands.md is a valid command (the docs move with the code).
#[test]
fn documented_examples_parse() {
    let doc = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/commands.md"))
        .unwrap();
    let blocks: Vec<&str> = doc.split("```json").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    assert_eq!(blocks.len(), 33, "one example per command");
    let mut kinds = std::collections::BTreeSet::new();
    for b in blocks {
        let c: closure_ledger::runtime::Command =
            serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {b}"));
        kinds.insert(c.kind());
    }
    assert_eq!(kinds.len(), 33, "every command kind is documented");
    // "The digests in this file's examples are those of examples/lifecycle.jsonl's ledger"
    // (outside review 189 F3: a claim's manifest digest was a stale one, refused as written).
    let lifecycle = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/lifecycle.jsonl"),
    )
    .unwrap();
    let examples: String = doc.split("```json").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    let mut digests = 0;
    for (at, _) in examples.match_indices("\"b3:") {
        let digest = &examples[at + 1..at + 68];
        assert!(lifecycle.contains(digest), "{digest} is no digest of examples/lifecycle.jsonl");
        digests += 1;
    }
    assert!(digests >= 10, "{digests}");
}

/// Refusals name values as they are written on the wire (`CONFIRMED`, `IMPLEMENT`), never
/// as Rust `Debug` text (`Confirmed`, `Some(..)`, `Finished { .. }`).
#[test]
fn refusal_messages_show_no_debug_text() {
    use closure_ledger::lifecycle::lid;
    use closure_ledger::runtime::Command;
    use closure_ledger::runtime::command::{ConfirmFact, DecideAcceptance, FinishAttempt};
    use ledger_schema::types::{ResultKind, Verdict};
    use replay_tests::world::{Stage, World};
    let debug_free = |message: &str| {
        for debug in ["Some(", "None", " { ", "Confirmed", "Implement", "Proposals", "RejectRepairable"] {
            assert!(!message.contains(debug), "Debug text {debug:?} in: {message}");
        }
    };
    let mut w = World::at(Stage::Setup);
    let m = w
        .fails(Command::ConfirmFact(ConfirmFact {
            fact_id: lid(0x50),
            revision: 1,
            confirmed_by: "human:bob".into(),
        }))
        .to_string();
    assert!(m.contains("is CONFIRMED"), "{m}");
    debug_free(&m);
    let mut w = World::at(Stage::Frozen);
    let m = w
        .fails(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0x3a0),
            workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
            generation_id: lid(0x80),
            verdict: Verdict::RejectTerminal,
            evidence_ids: None,
            reasons: vec!["r".into()],
        }))
        .to_string();
    assert!(m.contains("not IMPLEMENT"), "{m}");
    debug_free(&m);
    let m = w
        .fails(Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(0x64),
            result_kind: ResultKind::CompletionRequest,
            summary: "again, differently".into(),
        }))
        .to_string();
    assert!(m.contains("has ended"), "{m}");
    debug_free(&m);
}
