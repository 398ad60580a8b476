//! Test support for closure-ledger: build real ledgers, find their frames, tamper with
//! either copy, and run the CLI in-process.

#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // test support may panic

pub mod fuzz_targets;
pub mod world;

use std::ops::Range;
use std::path::{Path, PathBuf};

use closure_ledger::store::{self, Checkpoint, DiskStore, Frame, Store};
use ledger_schema::codec::item_end;
use ledger_schema::{Event, Id, decode_frame, encode_frame, samples};

/// The ledger id of every generated test ledger.
pub const LEDGER: Id = Id(0x0190_AAAA_0000_0000_0000_0000_0000_0001);
pub const T0: u64 = 1_760_000_000_000;

/// Sample events (every kind but genesis), cycled.
pub fn event(i: usize) -> Event {
    let events = samples::events();
    let n = events.len() - 1;
    events.into_iter().nth(1 + i % n).unwrap().1
}

/// Appends `n_frames` frames of `per_frame` entries to an open store.
pub fn append_frames(store: &mut DiskStore, n_frames: usize, per_frame: usize) {
    let mut chain = store.chain();
    for f in 0..n_frames {
        let entries = (0..per_frame)
            .map(|i| chain.seal(event(f * per_frame + i), T0 + (f * per_frame + i) as u64, LEDGER).unwrap())
            .collect();
        store.commit(&Frame::new(entries).unwrap()).unwrap();
    }
}

/// A fresh ledger at `dir`: genesis + `n_frames` frames of `per_frame` entries.
/// Returns a checkpoint of the head.
pub fn make_ledger(dir: &Path, n_frames: usize, per_frame: usize) -> Checkpoint {
    let mut store = store::init(dir, "test", LEDGER, T0).unwrap();
    append_frames(&mut store, n_frames, per_frame);
    let cp = Checkpoint::of(&store.read(store.head().seq).unwrap());
    store.flush_index().unwrap();
    cp
}

/// The single journal segment of a small ledger.
pub fn segment(dir: &Path) -> PathBuf {
    dir.join("journal").join(format!("{:020}.cborseq", 0))
}

/// A frame's place in the journal segment and its first seq.
#[derive(Debug, Clone)]
pub struct FrameAt {
    pub range: Range<usize>,
    pub first_seq: u64,
    pub n_entries: u64,
}

/// The frames of the (single) journal segment.
pub fn journal_frames(dir: &Path) -> Vec<FrameAt> {
    let bytes = std::fs::read(segment(dir)).unwrap();
    let mut out = Vec::new();
    let (mut pos, mut seq) = (0usize, 0u64);
    while pos < bytes.len() {
        let end = item_end(&bytes, pos).unwrap();
        let n_entries = decode_frame(&bytes[pos..end]).unwrap().len() as u64;
        out.push(FrameAt { range: pos..end, first_seq: seq, n_entries });
        seq += n_entries;
        pos = end;
    }
    out
}

/// Runs `f` on the ledger's sled `entries` tree, then flushes and closes sled.
pub fn with_sled<R>(dir: &Path, f: impl FnOnce(&sled::Tree) -> R) -> R {
    // sled releases its file lock from a background thread after the last handle drops,
    // so a just-closed ledger may still be locked for a moment.
    let mut attempts = 0;
    let db = loop {
        match sled::open(dir.join("sled")) {
            Ok(db) => break db,
            Err(e) if attempts < 50 => {
                attempts += 1;
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open sled: {e}"),
        }
    };
    let tree = db.open_tree("entries").unwrap();
    let r = f(&tree);
    db.flush().unwrap();
    r
}

/// Every sled frame, `(first seq, bytes)`, in key order.
pub fn sled_frames(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    with_sled(dir, |t| {
        t.iter()
            .map(|kv| {
                let (k, v) = kv.unwrap();
                (u64::from_be_bytes(k.as_ref().try_into().unwrap()), v.to_vec())
            })
            .collect()
    })
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for item in std::fs::read_dir(from).unwrap() {
        let item = item.unwrap();
        let target = to.join(item.file_name());
        if item.file_type().unwrap().is_dir() {
            copy_dir(&item.path(), &target);
        } else {
            std::fs::copy(item.path(), target).unwrap();
        }
    }
}

/// The byte spans of the top-level items of a canonical map (key, value, key, value…).
fn map_spans(bytes: &[u8]) -> (u8, Vec<Range<usize>>) {
    let header = bytes[0];
    assert!(header & 0xe0 == 0xa0 && header & 0x1f < 24, "small definite map");
    let n = usize::from(header & 0x1f) * 2;
    let mut spans = Vec::with_capacity(n);
    let mut pos = 1;
    for _ in 0..n {
        let end = item_end(bytes, pos).unwrap();
        spans.push(pos..end);
        pos = end;
    }
    assert_eq!(pos, bytes.len());
    (header, spans)
}

/// Non-canonical re-encodings of the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recode {
    /// `seq` written with an 8-byte argument.
    LongFormInteger,
    /// The top-level map's pairs in reverse order.
    ReversedKeys,
    /// The top-level map with an indefinite length.
    IndefiniteLength,
}

pub const RECODES: [Recode; 3] = [Recode::LongFormInteger, Recode::ReversedKeys, Recode::IndefiniteLength];

/// Re-encodes one entry's canonical bytes non-canonically (same value).
pub fn recode_entry(entry: &[u8], how: Recode) -> Vec<u8> {
    let (header, spans) = map_spans(entry);
    match how {
        Recode::LongFormInteger => {
            // keys in canonical order: v, seq, ...; the value of `seq` is span 3
            let seq_span = spans[3].clone();
            let seq = ledger_schema::codec::decode::<u64>(&entry[seq_span.clone()], 16).unwrap();
            let mut out = entry[..seq_span.start].to_vec();
            out.push(0x1b);
            out.extend_from_slice(&seq.to_be_bytes());
            out.extend_from_slice(&entry[seq_span.end..]);
            out
        }
        Recode::ReversedKeys => {
            let mut out = vec![header];
            for pair in spans.chunks(2).rev() {
                out.extend_from_slice(&entry[pair[0].clone()]);
                out.extend_from_slice(&entry[pair[1].clone()]);
            }
            out
        }
        Recode::IndefiniteLength => {
            let mut out = vec![0xbf];
            out.extend_from_slice(&entry[1..]);
            out.push(0xff);
            out
        }
    }
}

/// A frame with its entry at `idx` re-encoded non-canonically.
pub fn recode_frame(frame: &[u8], idx: usize, how: Recode) -> Vec<u8> {
    let entries = decode_frame(frame).unwrap();
    let recoded: Vec<Vec<u8>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| if i == idx { recode_entry(e, how) } else { e.to_vec() })
        .collect();
    encode_frame(recoded.iter().map(Vec::as_slice))
}

/// Runs the `ledger` CLI in-process: `(exit code, stdout, stderr)`.
pub fn cli(args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut argv = vec!["ledger"];
    argv.extend_from_slice(args);
    let code = closure_ledger::cli::run_args(argv, &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

/// `ledger verify DIR --json [--checkpoint FILE]`: `(exit code, parsed report)`.
pub fn verify_json(dir: &Path, checkpoint: Option<&Path>) -> (u8, serde_json::Value) {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["verify", dir, "--json"];
    let cp;
    if let Some(path) = checkpoint {
        cp = path.to_str().unwrap().to_owned();
        args.extend(["--checkpoint", cp.as_str()]);
    }
    let (code, out, _) = cli(&args);
    (code, serde_json::from_str(out.trim()).unwrap())
}

/// xorshift64*: deterministic pseudo-random numbers for campaigns.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}
