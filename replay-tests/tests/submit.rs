//! `ledger submit`: JSON lines in, one receipt per line out; the frozen
//! `examples/lifecycle.jsonl` is exactly the reference script and is admitted with exit 0;
//! bad input gives one clear line, a non-zero exit, and an unchanged ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

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
        ("over-long line", vec![b'a'; 1_100_000]),
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

/// Every example in docs/commands.md is a valid command (the docs move with the code).
#[test]
fn documented_examples_parse() {
    let doc = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/commands.md"))
        .unwrap();
    let blocks: Vec<&str> = doc.split("```json").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    assert_eq!(blocks.len(), 28, "one example per command");
    let mut kinds = std::collections::BTreeSet::new();
    for b in blocks {
        let c: closure_ledger::runtime::Command =
            serde_json::from_str(b).unwrap_or_else(|e| panic!("{e}: {b}"));
        kinds.insert(c.kind());
    }
    assert_eq!(kinds.len(), 28, "every command kind is documented");
}
