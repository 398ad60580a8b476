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

/// Every map of every arbitrary entry is in canonical key order, and the entry round-trips.
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
