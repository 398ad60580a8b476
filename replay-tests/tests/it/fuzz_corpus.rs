//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/*`) through the same
//! target functions cargo-fuzz runs, on the stable toolchain, so CI exercises them.
//! `SEED_CORPUS=1` (re)writes the seed files (deterministic) before replaying.

use std::path::{Path, PathBuf};

use closure_ledger::store::{DiskStore, Store};
use replay_tests::fuzz_targets as t;
use replay_tests::*;

fn corpus(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target)
}

fn files(target: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<_> = std::fs::read_dir(corpus(target)).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn seed_all() {
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ledger-schema/vectors");
    for file in ["positive.json", "negative.json"] {
        let v: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(vectors.join(file)).unwrap()).unwrap();
        for x in v {
            write_seed("decode_entry", x["name"].as_str().unwrap(), &unhex(x["hex"].as_str().unwrap()));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    drop(closure_ledger::store::init(&dir, "t", LEDGER, T0).unwrap());
    let (mut ledger, _) = closure_ledger::ledger::Ledger::open(&dir).unwrap();
    closure_ledger::lifecycle::Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() }
        .lifecycle()
        .unwrap();
    drop(ledger);
    let bytes = std::fs::read(segment(&dir)).unwrap();
    for (i, f) in journal_frames(&dir).iter().enumerate().step_by(3) {
        write_seed("decode_frame", &format!("frame-{i:03}"), &bytes[f.range.clone()]);
    }
    for (i, line) in
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/lifecycle.jsonl"))
            .unwrap()
            .lines()
            .enumerate()
            .step_by(2)
    {
        write_seed("decode_command_json", &format!("lifecycle-{i:03}"), line.as_bytes());
    }
    let (store, _) = DiskStore::open(&dir).unwrap();
    for seq in [0u64, 5, 20, 46] {
        let cp = closure_ledger::store::Checkpoint::of(&store.read(seq).unwrap());
        write_seed("checkpoint_json", &format!("seq-{seq}"), cp.to_json().as_bytes());
    }
    write_seed("checkpoint_json", "garbage", b"{\"ledgerId\": 1}");
    for (target, n, len) in [("command_sequence", 24u64, 600usize), ("store_corruption", 12, 96)] {
        for i in 0..n {
            let mut rng = Rng(0x5eed_0000 + i * 7919 + len as u64);
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            write_seed(target, &format!("seed-{i:03}"), &data);
        }
    }
}

/// Every corpus file of every target runs through its target without a failure.
#[test]
fn every_corpus_file_passes_its_target() {
    if std::env::var_os("SEED_CORPUS").is_some() {
        seed_all();
    }
    type Target = (&'static str, fn(&[u8]));
    let targets: [Target; 6] = [
        ("decode_entry", t::decode_entry),
        ("decode_frame", t::decode_frame_target),
        ("decode_command_json", t::decode_command_json),
        ("checkpoint_json", t::checkpoint_json),
        ("command_sequence", |d| {
            t::command_sequence(d);
        }),
        ("store_corruption", t::store_corruption),
    ];
    for (name, f) in targets {
        let inputs = files(name);
        assert!(!inputs.is_empty(), "no corpus for {name}");
        for input in inputs {
            f(&input);
        }
    }
}

/// `command_sequence`'s full replay folds the base's part once per process and resumes from
/// it: over the corpus, that state is the one a fold from genesis gives (and the live one).
#[test]
fn command_sequence_resumed_replay_is_the_genesis_replay() {
    for input in files("command_sequence") {
        t::resumed_replay_matches_genesis(&input);
    }
}

/// `store_corruption` writes its copy of the template from memory (sparsely): the copy is
/// the template, byte for byte.
#[test]
fn store_corruption_copy_is_the_template() {
    t::store_corruption_copy_is_exact();
}

/// The command-sequence generator reaches deep states: across the seed corpus, runs
/// admit many commands (not just early rejections).
#[test]
fn command_sequences_reach_deep_states() {
    let admitted: usize = files("command_sequence").iter().map(|d| t::command_sequence(d)).sum();
    assert!(admitted >= 100, "only {admitted} commands admitted over the corpus");
}

/// Statistics of how deep the command sequences of a corpus go. Over the committed seeds
/// it only prints; `FUZZ_DEPTH_DIR=fuzz/corpus-work/command_sequence` measures a grown
/// corpus after a fuzzing run.
#[test]
fn command_sequence_depth_report() {
    let dir =
        std::env::var_os("FUZZ_DEPTH_DIR").map(PathBuf::from).unwrap_or_else(|| corpus("command_sequence"));
    let mut max = t::Depth::default();
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let d = t::command_sequence_depth(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
        max.admitted = max.admitted.max(d.admitted);
        max.repairs = max.repairs.max(d.repairs);
        max.repairs_of_repairs = max.repairs_of_repairs.max(d.repairs_of_repairs);
        max.protected_workflows = max.protected_workflows.max(d.protected_workflows);
        max.worker_events = max.worker_events.max(d.worker_events);
        max.decisions = max.decisions.max(d.decisions);
        max.accepted = max.accepted.max(d.accepted);
    }
    println!("command_sequence depth over {n} inputs of {}: max {max:?}", dir.display());
    assert!(n > 0);
}
