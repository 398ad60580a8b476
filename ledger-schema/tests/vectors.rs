#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
//! Golden vectors: frozen canonical bytes and entry hashes for every event kind, and
//! frozen non-canonical inputs that the strict decoder must refuse.
//!
//! `vectors/positive.json` was produced once by `BLESS_VECTORS=1 cargo test -p
//! ledger-schema --test vectors` and cross-checked by an independent implementation
//! (`vectors/crosscheck.py`: Python cbor2 + blake3). A change that moves one byte fails here
//! until the vectors are consciously re-frozen.

use std::path::PathBuf;

use ledger_schema::{DecodeError, Entry, Event, SealedEntry, entry_hash, samples};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Positive {
    name: String,
    kind: String,
    seq: u64,
    hex: String,
    hash: String,
}

#[derive(Debug, Deserialize)]
struct Negative {
    name: String,
    hex: String,
    error: String,
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn load_positive() -> Vec<Positive> {
    let path = vectors_dir().join("positive.json");
    if std::env::var_os("BLESS_VECTORS").is_some() && !path.exists() {
        let fresh: Vec<Positive> = samples::chain()
            .into_iter()
            .map(|(name, sealed)| Positive {
                name: name.to_owned(),
                kind: sealed.entry.event.kind().to_owned(),
                seq: sealed.entry.seq,
                hex: hex(&sealed.bytes),
                hash: sealed.hash.to_string(),
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&fresh).unwrap() + "\n").unwrap();
    }
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every frozen positive vector decodes, re-encodes to the identical bytes and hashes to
/// the frozen hash.
#[test]
fn positive_vectors_round_trip() {
    for v in load_positive() {
        let bytes = unhex(&v.hex);
        let sealed = SealedEntry::open(&bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(sealed.entry.encode(), bytes, "{}", v.name);
        assert_eq!(sealed.hash.to_string(), v.hash, "{}", v.name);
        assert_eq!(sealed.entry.event.kind(), v.kind, "{}", v.name);
        assert_eq!(sealed.entry.seq, v.seq, "{}", v.name);
    }
}

/// Today's encoder still produces the frozen bytes for the same values: the format did
/// not move.
#[test]
fn encoder_matches_frozen_vectors() {
    let frozen = load_positive();
    let now = samples::chain();
    assert_eq!(frozen.len(), now.len());
    for (v, (name, sealed)) in frozen.iter().zip(&now) {
        assert_eq!(v.name, *name);
        assert_eq!(v.hex, hex(&sealed.bytes), "{name}: encoding moved");
        assert_eq!(v.hash, sealed.hash.to_string(), "{name}: hash moved");
    }
}

/// The vectors cover every kind of catalog v1, and form one valid chain from genesis.
#[test]
fn vectors_cover_every_kind_and_chain() {
    let vectors = load_positive();
    for kind in Event::KINDS {
        assert!(vectors.iter().any(|v| v.kind == *kind), "no vector for {kind}");
    }
    let mut prev = ledger_schema::Digest::ZERO;
    for (seq, v) in (0u64..).zip(&vectors) {
        let bytes = unhex(&v.hex);
        let entry = Entry::decode(&bytes).unwrap();
        assert_eq!(entry.seq, seq);
        assert_eq!(entry.prev, prev, "{}", v.name);
        prev = entry_hash(&bytes);
    }
}

/// Every negative vector is refused with the expected error variant.
#[test]
fn negative_vectors_are_rejected() {
    let path = vectors_dir().join("negative.json");
    let negatives: Vec<Negative> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(negatives.len() >= 12);
    for n in negatives {
        let bytes = unhex(&n.hex);
        let error: DecodeError = match Entry::decode(&bytes) {
            Ok(entry) => panic!("{}: accepted {entry:?}", n.name),
            Err(e) => e,
        };
        let variant = format!("{error:?}");
        assert!(variant.starts_with(&n.error), "{}: expected {}, got {variant}", n.name, n.error);
    }
}
