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
use ledger_schema::record::{check_record, seal_record};
use ledger_schema::{Event, Id, decode_frame, encode_frame, samples};

/// The ledger id of every generated test ledger.
pub const LEDGER: Id = Id(0x0190_AAAA_0000_0000_0000_0000_0000_0001);
pub const T0: u64 = 1_760_000_000_000;

/// A new ledger at `dir` with the reference setup and DISCOVERY attempt 0x60 dispatched;
/// returns the attempt's manifest digest (what its worker events must name).
pub fn dispatched_ledger(dir: &Path) -> ledger_schema::Digest {
    use closure_ledger::ledger::Ledger;
    use closure_ledger::lifecycle::{Script, lid};
    drop(store::init(dir, "t", LEDGER, T0).unwrap());
    let (mut ledger, _) = Ledger::open(dir).unwrap();
    let mut s = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    s.setup().unwrap();
    s.start(0x60, 0x61).unwrap();
    s.claim(lid(0x60)).unwrap();
    ledger.state().attempts[&lid(0x60)].manifest_digest
}

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

/// The record the next commit of `per_frame` entries would append (sealed against the
/// head, not committed): what a crash in the middle of that append leaves a prefix of.
pub fn next_record(dir: &Path, per_frame: usize) -> Vec<u8> {
    let (store, _) = DiskStore::open(dir).unwrap();
    let head = store.head();
    let mut chain = store.chain();
    let base = head.seq as usize + 1;
    let entries = (0..per_frame)
        .map(|i| chain.seal(event(base + i), head.time_ms + 1 + i as u64, LEDGER).unwrap())
        .collect();
    Frame::new(entries).unwrap().bytes().to_vec()
}

/// A different, fully valid record for the ledger's newest frame (same seqs, other
/// events, every hash and check recomputed): what a forger who edits the head writes.
pub fn forged_newest_record(dir: &Path) -> Vec<u8> {
    let frames = journal_frames(dir);
    let last = frames.last().unwrap();
    let (store, _) = DiskStore::open(dir).unwrap();
    let before = store.read(last.first_seq - 1).unwrap();
    let head = store::Head {
        ledger: LEDGER,
        seq: before.entry.seq,
        hash: before.hash,
        time_ms: before.entry.time_ms,
    };
    let mut chain = store::Chain::from_head(head);
    let entries = (0..last.n_entries)
        .map(|i| {
            chain.seal(event(last.first_seq as usize + i as usize + 7), head.time_ms + 1, LEDGER).unwrap()
        })
        .collect();
    Frame::new(entries).unwrap().bytes().to_vec()
}

/// The single journal segment of a small ledger.
pub fn segment(dir: &Path) -> PathBuf {
    dir.join("journal").join(format!("{:020}.clj", 0))
}

/// A frame's place in the journal segment and its first seq.
#[derive(Debug, Clone)]
pub struct FrameAt {
    pub range: Range<usize>,
    pub first_seq: u64,
    pub n_entries: u64,
}

/// The records of the (single) journal segment: `range` spans header and frame.
pub fn journal_frames(dir: &Path) -> Vec<FrameAt> {
    let bytes = std::fs::read(segment(dir)).unwrap();
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        if bytes[pos..].iter().all(|b| *b == 0) {
            break; // preallocated space (journal v3): the records end here
        }
        let (header, _) = check_record(&bytes[pos..]).unwrap();
        let end = pos + header.record_len();
        out.push(FrameAt {
            range: pos..end,
            first_seq: header.first_seq,
            n_entries: u64::from(header.count),
        });
        pos = end;
    }
    out
}

/// The frame (CBOR) inside a journal record.
pub fn payload_of(record: &[u8]) -> &[u8] {
    ledger_schema::record::payload_of(record)
}

/// The end of the records of the (single) journal segment: what follows is preallocated
/// zero space (journal v3).
pub fn journal_end(dir: &Path) -> usize {
    journal_frames(dir).last().map_or(0, |f| f.range.end)
}

/// Cuts the preallocated zero space off the end of the (single) journal segment, leaving
/// its records only — the file as a v3 writer leaves it after a roll or a recovery. For
/// tests that edit the segment as if its length were the end of its data (the zero space
/// itself is covered by `tests/it/preallocated.rs`).
pub fn trim_preallocated(dir: &Path) {
    let end = journal_end(dir);
    let file = std::fs::OpenOptions::new().write(true).open(segment(dir)).unwrap();
    file.set_len(end as u64).unwrap();
}

/// A record holding `frame` with valid checks (what a forger who recomputes them writes).
pub fn reseal(first_seq: u64, frame: &[u8]) -> Vec<u8> {
    let entries = decode_frame(frame).unwrap();
    seal_record(first_seq, entries.len() as u32, frame)
}

/// Runs `f` on the ledger's sled `entries` tree, then flushes and closes sled.
pub fn with_sled<R>(dir: &Path, f: impl FnOnce(&sled::Tree) -> R) -> R {
    with_sled_tree(dir, "entries", f)
}

/// [`with_sled`] on the tree `name` (`"entries"` or `"meta"`).
pub fn with_sled_tree<R>(dir: &Path, name: &str, f: impl FnOnce(&sled::Tree) -> R) -> R {
    // sled releases its file lock from a background thread after the last handle drops,
    // so a just-closed ledger may still be locked for a moment — on a loaded machine for
    // over a second (seen as an intermittent "could not acquire lock"): wait up to 5 s, as
    // the store itself does (`SLED_LOCK_WAIT`).
    let mut attempts = 0;
    let db = loop {
        match sled::open(dir.join("sled")) {
            Ok(db) => break db,
            Err(e) if attempts < 250 => {
                attempts += 1;
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open sled: {e}"),
        }
    };
    let tree = db.open_tree(name).unwrap();
    let r = f(&tree);
    db.flush().unwrap();
    r
}

/// Every sled frame, `(first seq, bytes)`, in key order.
pub fn sled_frames(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    with_sled(dir, |t| {
        // docs/format.md, "sled values": a record longer than 32 KiB is stored as chunks,
        // chunk i > 0 under the frame's key followed by i (u32 big-endian).
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
        for kv in t.iter() {
            let (k, v) = kv.unwrap();
            match k.len() {
                8 => frames.push((u64::from_be_bytes(k.as_ref().try_into().unwrap()), v.to_vec())),
                12 => {
                    let (first, record) = frames.last_mut().expect("a chunk after its frame's key");
                    assert_eq!(k[..8], first.to_be_bytes(), "a chunk of the frame before it");
                    assert_eq!(record.len() % (32 << 10), 0, "chunks follow full chunks");
                    let n = u32::from_be_bytes(k[8..].try_into().unwrap()) as usize;
                    assert_eq!(n, record.len() / (32 << 10), "chunks in turn");
                    record.extend_from_slice(&v);
                }
                n => panic!("a sled key of {n} bytes"),
            }
        }
        frames
    })
}

/// Removes every sled key of the frame starting at `first_seq`: its key and its chunks'.
pub fn remove_sled_frame(t: &sled::Tree, first_seq: u64) {
    let keys: Vec<sled::IVec> = t
        .range(first_seq.to_be_bytes()..)
        .keys()
        .map(Result::unwrap)
        .take_while(|k| k.len() >= 8 && k[..8] == first_seq.to_be_bytes())
        .collect();
    assert!(!keys.is_empty(), "sled holds the frame at seq {first_seq}");
    for k in keys {
        t.remove(k).unwrap();
    }
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

/// A journal record with its entry at `idx` re-encoded non-canonically, resealed with
/// valid record checks (so only the canonical check can catch it).
pub fn recode_frame(record: &[u8], idx: usize, how: Recode) -> Vec<u8> {
    let entries = decode_frame(payload_of(record)).unwrap();
    let recoded: Vec<Vec<u8>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| if i == idx { recode_entry(e, how) } else { e.to_vec() })
        .collect();
    let (header, _) = check_record(record).unwrap();
    reseal(header.first_seq, &encode_frame(recoded.iter().map(Vec::as_slice)))
}

/// Standard output that takes nothing, as a full disk does (ENOSPC on every write).
pub struct FullStdout;

impl std::io::Write for FullStdout {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::Error::from_raw_os_error(28))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs the `ledger` CLI in-process with standard output full: `(exit code, stderr)`.
pub fn cli_to_full_stdout(args: &[&str]) -> (u8, String) {
    let mut argv = vec!["ledger"];
    argv.extend_from_slice(args);
    let mut err = Vec::new();
    let code = closure_ledger::cli::run_args(argv, &mut FullStdout, &mut err);
    (code, String::from_utf8(err).unwrap())
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

/// Splits the single journal segment of `dir` into segments starting at the records with
/// the given indices (as if the writer had rolled there). Returns the segment paths.
pub fn split_segments(dir: &Path, starts: &[usize]) -> Vec<PathBuf> {
    let frames = journal_frames(dir);
    let bytes = std::fs::read(segment(dir)).unwrap();
    std::fs::remove_file(segment(dir)).unwrap();
    let mut bounds: Vec<usize> = std::iter::once(0).chain(starts.iter().copied()).collect();
    bounds.push(frames.len());
    bounds
        .windows(2)
        .map(|w| {
            let (a, b) = (&frames[w[0]], &frames[w[1] - 1]);
            let path = dir.join("journal").join(format!("{:020}.clj", a.first_seq));
            std::fs::write(&path, &bytes[a.range.start..b.range.end]).unwrap();
            path
        })
        .collect()
}

/// Rewrites `event` into the form the builds before 2026-12-05 recorded, for the decisions
/// `legacy` accepts: an `acceptanceDecided` without the profile binding (its input-manifest
/// and decision digests recomputed; `digests` keeps them by decision id), and a
/// `repairRecorded` over such a decision re-bound to those digests.
pub fn to_legacy_decision(
    event: &mut Event,
    legacy: impl Fn(Id) -> bool,
    digests: &mut std::collections::BTreeMap<Id, (ledger_schema::Digest, ledger_schema::Digest)>,
) {
    match event {
        Event::AcceptanceDecided(d) if legacy(d.decision_id) => {
            d.input_manifest.profile = None;
            d.input_manifest.plan = None;
            d.input_manifest_digest = d.input_manifest.digest();
            d.decision_digest = d.computed_digest();
            digests.insert(d.decision_id, (d.decision_digest, d.input_manifest_digest));
        }
        Event::RepairRecorded(r) => {
            if let Some((decision, input_manifest)) = digests.get(&r.decision_id) {
                r.decision_digest = *decision;
                r.input_manifest_digest = *input_manifest;
                r.repair_digest = r.computed_digest();
            }
        }
        _ => {}
    }
}
