//! The real `ledger` binary: documented exit codes, one-line errors, and no panic or
//! backtrace for hostile input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use std::path::Path;
use std::process::Command;

fn ledger(args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_ledger")).args(args).env("RUST_BACKTRACE", "1").output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_line_error(stderr: &str) {
    assert_eq!(stderr.trim_end().lines().count(), 1, "not one line: {stderr:?}");
    assert!(stderr.starts_with("ledger: "), "{stderr:?}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr:?}");
}

/// init, verify, checkpoint, show and export work end to end and exit 0.
#[test]
fn the_happy_path_exits_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let d = dir.to_str().unwrap();
    assert_eq!(ledger(&["init", d]).0, 0);
    let (code, out, _) = ledger(&["checkpoint", d]);
    assert_eq!(code, 0);
    let cp = tmp.path().join("cp.json");
    std::fs::write(&cp, out).unwrap();
    let (code, out, err) = ledger(&["verify", d, "--checkpoint", cp.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("checkpoint verified"));
    let (code, out, _) = ledger(&["export", d]);
    assert_eq!(code, 0);
    let line: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    for key in ["seq", "kind", "hash", "prev", "event"] {
        assert!(line.get(key).is_some(), "export lacks {key}");
    }
    assert_eq!(line["kind"], "ledgerInitialized");
    assert_eq!(ledger(&["show", d, "0..0", "--json"]).0, 0);
    let (code, _, err) = ledger(&["init", d]);
    assert_eq!(code, 2, "init refuses an existing ledger");
    one_line_error(&err);
}

/// Usage and I/O errors exit 2 with one line.
#[test]
fn usage_and_io_errors_exit_two() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    for args in [
        vec!["verify", missing.to_str().unwrap()],
        vec!["show", missing.to_str().unwrap(), "3"],
        vec!["recover", missing.to_str().unwrap()],
    ] {
        let (code, _, err) = ledger(&args);
        assert_eq!(code, 2, "{args:?}");
        one_line_error(&err);
    }
    let (code, _, _) = ledger(&["no-such-command"]);
    assert_eq!(code, 2);
}

/// Hostile files — garbage segments, stray files, huge or malformed checkpoints — give a
/// typed one-line error, never a panic.
#[test]
fn hostile_input_never_panics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let d = dir.to_str().unwrap();
    assert_eq!(ledger(&["init", d]).0, 0);
    let bad_cp = tmp.path().join("bad.json");
    for content in [&b"{}"[..], b"not json", &[b'x'; 10_000], br#"{"ledgerId":"x","seq":0,"hash":"b3:00"}"#] {
        std::fs::write(&bad_cp, content).unwrap();
        let (code, _, err) = ledger(&["verify", d, "--checkpoint", bad_cp.to_str().unwrap()]);
        assert_eq!(code, 2);
        one_line_error(&err);
    }
    let seg = Path::new(d).join("journal").join(format!("{:020}.clj", 0));
    let original = std::fs::read(&seg).unwrap();
    let mut rng = 0x9e37_79b9_u64;
    for round in 0..40 {
        let mut bytes = original.clone();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let at = (rng as usize) % bytes.len();
        bytes.truncate(at);
        bytes.extend((0..(rng % 64)).map(|i| (rng >> (i % 56)) as u8));
        std::fs::write(&seg, &bytes).unwrap();
        for cmd in ["verify", "export"] {
            let (code, _, err) = ledger(&[cmd, d]);
            assert!(code == 0 || code == 1 || code == 2, "round {round}: {code}");
            assert!(!err.contains("panicked"), "round {round}: {err}");
            if code != 0 {
                one_line_error(&err);
            }
        }
        std::fs::write(&seg, &original).unwrap();
    }
    std::fs::write(Path::new(d).join("journal").join("stray.txt"), b"hello").unwrap();
    let (code, _, err) = ledger(&["verify", d]);
    assert_eq!(code, 1, "an unexplained file in journal/ fails verification");
    one_line_error(&err);
}

/// `ledger compile --attempt --cbor` prints identical bytes in two separate processes, for
/// every attempt of the lifecycle (the context is a function of the ledger alone).
#[test]
fn compile_is_identical_across_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let d = dir.to_str().unwrap();
    assert_eq!(ledger(&["init", d]).0, 0);
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/lifecycle.jsonl");
    assert_eq!(ledger(&["submit", d, example]).0, 0);
    for attempt in [
        "01JC0000000000000000000030",
        "01JC0000000000000000000032",
        "01JC0000000000000000000034",
        "01JC0000000000000000000036",
    ] {
        let run = || {
            let out = Command::new(env!("CARGO_BIN_EXE_ledger"))
                .args(["compile", d, "--attempt", attempt, "--cbor"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        let (one, two) = (run(), run());
        assert!(!one.is_empty());
        assert_eq!(one, two, "attempt {attempt}");
    }
}

/// `ledger demo DIR` (the README's first command) drives the whole lifecycle through the
/// engine and ends with a passing audit.
#[test]
fn the_demo_passes_its_audit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let (code, out, err) = ledger(&["demo", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("4 manifests proved"), "{out}");
    assert!(out.contains("replayed state digest equals the live one"), "{out}");
    assert!(out.lines().last().unwrap().starts_with("demo ok"), "{out}");
}
