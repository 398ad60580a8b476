//! serde_cbor writes struct fields in declaration order, so every encoded struct must
//! declare its fields in RFC 8949 §4.2.1 key order. This walks every map of many
//! arbitrary entries (all kinds, optional groups present and absent) with the canonical
//! scanner, which asserts bytewise key order in every map at every depth.

use arbitrary::{Arbitrary, Unstructured};
use ledger_schema::codec::check_canonical;
use ledger_schema::{Entry, Event};

/// xorshift64*: deterministic bytes for the arbitrary generator.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

/// Every map of every arbitrary entry is in canonical key order, and the entry round-trips
/// (through the strict fast path).
#[test]
fn every_encoded_map_is_in_canonical_key_order() {
    let mut kinds_seen = std::collections::BTreeSet::new();
    for seed in 0..20_000u64 {
        let raw = bytes(seed, 4096);
        let mut u = Unstructured::new(&raw);
        let Ok(mut entry) = Entry::arbitrary(&mut u) else {
            continue;
        };
        entry.v = ledger_schema::FORMAT_VERSION;
        let encoded = entry.encode();
        if let Err(e) = check_canonical(&encoded) {
            panic!("{} is not canonical: {e}", entry.event.kind());
        }
        assert_eq!(Entry::decode(&encoded).as_ref(), Ok(&entry), "{}", entry.event.kind());
        // The strict fast path reads every canonical entry itself (the reference path is
        // for what it refuses), so `decode`'s speed does not silently fall back.
        let fast: Option<Entry> = ledger_schema::codec::decode_strict_only(&encoded);
        assert_eq!(fast.as_ref(), Some(&entry), "fast path refused {}", entry.event.kind());
        kinds_seen.insert(entry.event.kind());
    }
    for kind in Event::KINDS {
        assert!(kinds_seen.contains(kind), "the generator never produced {kind}");
    }
}

/// Every sample (covering every kind with all optional groups present) is canonical.
#[test]
fn every_sample_is_canonical() {
    for (name, sealed) in ledger_schema::samples::chain() {
        assert!(check_canonical(&sealed.bytes).is_ok(), "{name}");
    }
}

/// The codec's direct CBOR writer writes exactly `serde_cbor`'s bytes: every arbitrary
/// entry (every event kind, optional groups present and absent, manifests inside Attempt
/// starts) and every arbitrary manifest, compared with the `serde_cbor` reference path.
#[test]
fn fast_writer_matches_serde_cbor() {
    use ledger_schema::codec::{encode, encode_into_serde_cbor};
    use ledger_schema::manifest::ContextManifest;
    let reference = |value: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::new();
        value(&mut out);
        out
    };
    let mut compared = 0;
    for seed in 0..20_000u64 {
        let raw = bytes(seed ^ 0xC0DEC, 4096);
        let mut u = Unstructured::new(&raw);
        if let Ok(entry) = Entry::arbitrary(&mut u) {
            let direct = encode(&entry);
            assert_eq!(
                direct,
                reference(&|out| encode_into_serde_cbor(&entry, out)),
                "{}",
                entry.event.kind()
            );
            compared += 1;
        }
        let mut u = Unstructured::new(&raw);
        if let Ok(manifest) = ContextManifest::arbitrary(&mut u) {
            assert_eq!(encode(&manifest), reference(&|out| encode_into_serde_cbor(&manifest, out)));
            compared += 1;
        }
    }
    assert!(compared > 20_000, "only {compared} values compared");
    for (name, sealed) in ledger_schema::samples::chain() {
        assert_eq!(
            encode(&sealed.entry),
            reference(&|out| encode_into_serde_cbor(&sealed.entry, out)),
            "{name}"
        );
        assert_eq!(encode(&sealed.entry), sealed.bytes, "{name}");
    }
    // Values outside the canonical profile still encode as serde_cbor does (the fallback).
    let odd: (f64, i64, u8, Option<u32>, Vec<i8>) = (1.5, i64::MIN, 255, None, vec![-1, -24, -25, 127]);
    assert_eq!(encode(&odd), reference(&|out| encode_into_serde_cbor(&odd, out)));
    let big: Vec<u64> =
        vec![0, 23, 24, 255, 256, 65_535, 65_536, u64::from(u32::MAX), u64::from(u32::MAX) + 1, u64::MAX];
    assert_eq!(encode(&big), reference(&|out| encode_into_serde_cbor(&big, out)));
    let map: std::collections::BTreeMap<String, (bool, char, ())> =
        [("a".to_owned(), (true, 'é', ())), ("b".repeat(300), (false, 'x', ()))].into_iter().collect();
    assert_eq!(encode(&map), reference(&|out| encode_into_serde_cbor(&map, out)));
}

/// format.md ("Details a verifier must match", *Depth*): the deepest container of a valid v1
/// entry is at depth 7 — a source registry's resource map (outside review 252 F1: the doc said
/// 6, a phase policy's `capabilities`, and every registry entry the binary writes nests one
/// deeper). Measured over every kind, optional groups present and absent.
#[test]
fn the_deepest_container_is_a_registry_resource_at_depth_7() {
    fn depth(v: &serde_cbor::Value, at: u32) -> u32 {
        match v {
            serde_cbor::Value::Array(items) => {
                items.iter().map(|x| depth(x, at + 1)).max().unwrap_or(at).max(at)
            }
            serde_cbor::Value::Map(map) => map.values().map(|x| depth(x, at + 1)).max().unwrap_or(at).max(at),
            _ => at.saturating_sub(1),
        }
    }
    let mut deepest: std::collections::BTreeMap<u32, std::collections::BTreeSet<&str>> = Default::default();
    for seed in 0..20_000u64 {
        let raw = bytes(seed, 4096);
        let mut u = Unstructured::new(&raw);
        let Ok(entry) = Entry::arbitrary(&mut u) else {
            continue;
        };
        let value: serde_cbor::Value = serde_cbor::from_slice(&entry.encode()).unwrap();
        deepest.entry(depth(&value, 0)).or_default().insert(entry.event.kind());
    }
    for (_, sealed) in ledger_schema::samples::chain() {
        let value: serde_cbor::Value = serde_cbor::from_slice(&sealed.bytes).unwrap();
        deepest.entry(depth(&value, 0)).or_default().insert(sealed.entry.event.kind());
    }
    let (max, kinds) = deepest.iter().next_back().unwrap();
    assert_eq!(
        (*max, kinds.iter().copied().collect::<Vec<_>>()),
        (7, vec!["sourceRegistryRecorded"]),
        "{deepest:?}"
    );
}
