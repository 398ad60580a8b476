//! Golden vectors of the journal v2 record layout and the torn-tail rule.
//!
//! `vectors/journal.json` is produced by deleting it and running
//! `BLESS_VECTORS=1 cargo test -p ledger-schema --test it journal_vectors`, then cross-checked
//! by an independent implementation written from docs/format.md alone
//! (`vectors/crosscheck_journal.py`: Python + blake3). Once frozen, a change that moves one
//! byte of a record, or one torn/damaged decision, fails here.

use std::path::PathBuf;

use ledger_schema::record::{RecordFault, Tail, classify_tail, open_record, seal_record};
use ledger_schema::{encode_frame, samples};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct RecordVector {
    name: String,
    first_seq: u64,
    count: u32,
    payload_hex: String,
    record_hex: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct BadRecord {
    name: String,
    record_hex: String,
    /// The fault this implementation reports (a verifier need only refuse it).
    fault: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct TailVector {
    name: String,
    next_seq: u64,
    is_last: bool,
    tail_hex: String,
    /// "torn" or "damaged".
    expect: String,
    /// For damage: `[offset within the tail, first seq]` of the next intact record.
    next_intact: Option<(usize, u64)>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Vectors {
    records: Vec<RecordVector>,
    bad_records: Vec<BadRecord>,
    tails: Vec<TailVector>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn fault_name(f: RecordFault) -> String {
    format!("{f:?}").split([' ', '{', '(']).next().unwrap().to_owned()
}

fn tail_of(t: Tail) -> (String, Option<(usize, u64)>) {
    match t {
        Tail::Torn => ("torn".into(), None),
        Tail::Damaged { next_intact } => ("damaged".into(), next_intact),
    }
}

/// Builds the vectors from the sample chain (only when blessing).
fn fresh() -> Vectors {
    let chain = samples::chain();
    let bytes: Vec<&[u8]> = chain.iter().map(|(_, s)| s.bytes.as_slice()).collect();
    let groups: [(&str, std::ops::Range<usize>); 3] =
        [("genesis", 0..1), ("three entries", 1..4), ("one entry", 4..5)];
    let records: Vec<RecordVector> = groups
        .iter()
        .map(|(name, r)| {
            let payload = encode_frame(bytes[r.clone()].iter().copied());
            let record = seal_record(r.start as u64, r.len() as u32, &payload);
            RecordVector {
                name: (*name).to_owned(),
                first_seq: r.start as u64,
                count: r.len() as u32,
                payload_hex: hex(&payload),
                record_hex: hex(&record),
            }
        })
        .collect();
    let next = unhex(&records[1].record_hex); // the record for seq 1..=3
    let other = unhex(&records[2].record_hex); // seq 4
    let mut bad = Vec::new();
    let mut flip = |name: &str, at: usize, mask: u8| {
        let mut r = next.clone();
        r[at] ^= mask;
        bad.push((name.to_owned(), r));
    };
    flip("magic byte flipped", 0, 0x01);
    flip("payload length flipped", 5, 0x40);
    flip("first seq flipped", 15, 0x01);
    flip("count flipped", 19, 0x01);
    flip("header check flipped", 22, 0x80);
    flip("payload check flipped", 40, 0x02);
    flip("payload byte flipped", 70, 0x10);
    bad.push(("payload cut short".into(), next[..next.len() - 1].to_vec()));
    bad.push(("one byte too many".into(), [next.clone(), vec![0]].concat()));
    let zero_len = {
        let mut r = seal_record(1, 3, &[]);
        r.truncate(60);
        r
    };
    bad.push(("payload length 0 (checks valid)".into(), zero_len));
    let bad_records = bad
        .into_iter()
        .map(|(name, r)| BadRecord {
            name,
            fault: fault_name(open_record(&r).unwrap_err()),
            record_hex: hex(&r),
        })
        .collect();

    let mut tails: Vec<(String, u64, bool, Vec<u8>)> = Vec::new();
    for cut in [1usize, 3, 4, 15, 16, 27, 28, 59, 60, 61, next.len() / 2, next.len() - 1] {
        tails.push((format!("prefix of {cut} bytes of the next record"), 1, true, next[..cut].to_vec()));
        tails.push((format!("prefix of {cut} bytes, not the last segment"), 1, false, next[..cut].to_vec()));
    }
    for cut in [16usize, 28, 60, next.len() / 2] {
        tails.push((format!("prefix of {cut} bytes naming another seq"), 2, true, next[..cut].to_vec()));
    }
    tails.push(("one zero byte".into(), 1, true, vec![0]));
    tails.push(("4096 zero bytes".into(), 1, true, vec![0; 4096]));
    tails.push(("30 header bytes then zeros".into(), 1, true, [&next[..30], &[0u8; 20][..]].concat()));
    tails.push(("header then zeros, payload cut".into(), 1, true, [&next[..60], &[0u8; 10][..]].concat()));
    tails.push((
        "header then zeros to full length".into(),
        1,
        true,
        [&next[..60], &vec![0u8; next.len() - 60][..]].concat(),
    ));
    tails.push(("the whole next record, one payload byte flipped".into(), 1, true, {
        let mut r = next.clone();
        r[70] ^= 0x10;
        r
    }));
    tails.push(("the whole next record, length flipped".into(), 1, true, {
        let mut r = next.clone();
        r[5] ^= 0x40;
        r
    }));
    let out_of_bounds = |len: u32, count: u32| {
        let mut r = seal_record(1, count, &vec![0xa2; len as usize]);
        r.truncate(40);
        r[4..8].copy_from_slice(&len.to_be_bytes());
        r
    };
    tails.push(("a header prefix with payload length 0 (check valid)".into(), 1, true, {
        let mut r = seal_record(1, 3, &[]);
        r.truncate(40);
        r
    }));
    tails.push(("a header prefix with 5000 entries (check valid)".into(), 1, true, out_of_bounds(7, 5000)));
    tails.push(("a stray byte 01".into(), 1, true, vec![1]));
    tails.push(("C then X".into(), 1, true, b"CX".to_vec()));
    tails.push((
        "a torn-looking prefix, then an intact record".into(),
        1,
        true,
        [&next[..20], &other[..]].concat(),
    ));
    tails.push(("zeros, then an intact record".into(), 1, true, [&[0u8; 8][..], &other[..]].concat()));
    tails.push(("length-damaged record, then an intact record".into(), 1, true, {
        let mut r = next.clone();
        r[5] ^= 0x40;
        [r, other.clone()].concat()
    }));
    let tails = tails
        .into_iter()
        .map(|(name, next_seq, is_last, t)| {
            let (expect, next_intact) = tail_of(classify_tail(&t, next_seq, is_last));
            TailVector { name, next_seq, is_last, tail_hex: hex(&t), expect, next_intact }
        })
        .collect();
    Vectors { records, bad_records, tails }
}

fn load() -> Vectors {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors/journal.json");
    if std::env::var_os("BLESS_VECTORS").is_some() && !path.exists() {
        std::fs::write(&path, serde_json::to_string_pretty(&fresh()).unwrap() + "\n").unwrap();
    }
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every golden record seals to its frozen bytes and opens back to its fields.
#[test]
fn records_seal_to_their_frozen_bytes() {
    for v in load().records {
        let payload = unhex(&v.payload_hex);
        assert_eq!(hex(&seal_record(v.first_seq, v.count, &payload)), v.record_hex, "{}", v.name);
        let record = unhex(&v.record_hex);
        let (h, p) = open_record(&record).unwrap();
        assert_eq!((h.first_seq, h.count, p), (v.first_seq, v.count, &payload[..]), "{}", v.name);
    }
}

/// Every damaged record is refused, with the frozen fault.
#[test]
fn bad_records_are_refused() {
    for v in load().bad_records {
        let fault = open_record(&unhex(&v.record_hex)).unwrap_err();
        assert_eq!(fault_name(fault), v.fault, "{}", v.name);
    }
}

/// Every tail is classified as frozen: torn only where the rule says, damage everywhere
/// else, with the next intact record found.
#[test]
fn tails_are_classified_as_frozen() {
    let v = load();
    let torn = v.tails.iter().filter(|t| t.expect == "torn").count();
    assert!(torn >= 10 && v.tails.len() - torn >= 10, "both kinds covered");
    for t in v.tails {
        let got = tail_of(classify_tail(&unhex(&t.tail_hex), t.next_seq, t.is_last));
        assert_eq!(got, (t.expect.clone(), t.next_intact), "{}", t.name);
    }
}
