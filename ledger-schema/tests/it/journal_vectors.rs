//! Golden vectors of the journal record layouts (v2, v3) and the torn-tail rules.
//!
//! `vectors/journal.json` is produced by deleting it and running
//! `BLESS_VECTORS=1 cargo test -p ledger-schema --test it journal_vectors`, then cross-checked
//! by an independent implementation written from docs/format.md alone
//! (`vectors/crosscheck_journal.py`: Python + blake3). Once frozen, a change that moves one
//! byte of a record, or one torn/damaged decision, fails here. The v3 vectors (those with
//! `"journalFormat": 3`) were appended later the same way: with `BLESS_VECTORS=1` and a
//! file holding none, they are generated and appended; the v2 vectors stay as they were.

use std::path::PathBuf;

use ledger_schema::record::{
    END_MARKER, RecordFault, RecordVersion, Tail, check_record_as, classify_tail_as, open_record,
    seal_record_as,
};
use ledger_schema::{encode_frame, samples};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct RecordVector {
    name: String,
    /// 3 for a v3 vector; absent (2) for the v2 ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal_format: Option<u64>,
    first_seq: u64,
    count: u32,
    payload_hex: String,
    record_hex: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct BadRecord {
    name: String,
    /// 3 for a v3 vector; absent (2) for the v2 ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal_format: Option<u64>,
    record_hex: String,
    /// The fault this implementation reports (a verifier need only refuse it).
    fault: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct TailVector {
    name: String,
    /// 3 for a v3 vector; absent (2) for the v2 ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal_format: Option<u64>,
    next_seq: u64,
    is_last: bool,
    tail_hex: String,
    /// "torn", "damaged" or (v3) "unwritten".
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
        Tail::Unwritten => ("unwritten".into(), None),
        Tail::Torn => ("torn".into(), None),
        Tail::Damaged { next_intact } => ("damaged".into(), next_intact),
    }
}

/// Builds the v2 vectors from the sample chain (only when blessing a missing file).
/// The sample chain's first five entries as three records of `version` (genesis; seqs
/// 1..=3; seq 4), named with `prefix`.
fn record_vectors(version: RecordVersion, journal_format: Option<u64>, prefix: &str) -> Vec<RecordVector> {
    let chain = samples::chain();
    let bytes: Vec<&[u8]> = chain.iter().map(|(_, s)| s.bytes.as_slice()).collect();
    let groups: [(&str, std::ops::Range<usize>); 3] =
        [("genesis", 0..1), ("three entries", 1..4), ("one entry", 4..5)];
    groups
        .iter()
        .map(|(name, r)| {
            let payload = encode_frame(bytes[r.clone()].iter().copied());
            let record = seal_record_as(version, r.start as u64, r.len() as u32, &payload);
            RecordVector {
                journal_format,
                name: format!("{prefix}{name}"),
                first_seq: r.start as u64,
                count: r.len() as u32,
                payload_hex: hex(&payload),
                record_hex: hex(&record),
            }
        })
        .collect()
}

fn fresh() -> Vectors {
    let seal_record = |first: u64, count: u32, p: &[u8]| seal_record_as(RecordVersion::V2, first, count, p);
    let records = record_vectors(RecordVersion::V2, None, "");
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
            journal_format: None,
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
            let (expect, next_intact) = tail_of(classify_tail_as(RecordVersion::V2, &t, next_seq, is_last));
            TailVector {
                journal_format: None,
                name,
                next_seq,
                is_last,
                tail_hex: hex(&t),
                expect,
                next_intact,
            }
        })
        .collect();
    Vectors { records, bad_records, tails }
}

/// The v3 vectors (appended to the file when blessing one that has none): records in the
/// v3 layout, damaged ones, and tails as a reader finds them in a preallocated segment
/// (followed by zeros) or in one that grew (nothing after).
fn fresh_v3() -> Vectors {
    let v3 = Some(3);
    let records = record_vectors(RecordVersion::V3, v3, "v3 ");
    let next = unhex(&records[1].record_hex); // seq 1..=3
    let other = unhex(&records[2].record_hex); // seq 4
    let l = next.len();
    let payload_len = unhex(&records[1].payload_hex).len();
    let padding = l - 60 - payload_len - 8;
    assert!(padding > 0, "the sample needs padding to cover it");
    let changed = |at: usize, to: Option<u8>, mask: u8| {
        let mut r = next.clone();
        r[at] = to.unwrap_or(r[at] ^ mask);
        r
    };
    let mut bad: Vec<(String, Vec<u8>)> = vec![
        ("v3 magic byte flipped".into(), changed(0, None, 0x01)),
        ("v3 payload length flipped".into(), changed(5, None, 0x40)),
        ("v3 header check flipped".into(), changed(22, None, 0x80)),
        ("v3 payload check flipped".into(), changed(40, None, 0x02)),
        ("v3 payload byte flipped".into(), changed(70, None, 0x10)),
        ("v3 last payload byte zeroed".into(), changed(60 + payload_len - 1, Some(0), 0)),
        ("v3 padding byte set".into(), changed(60 + payload_len, Some(1), 0)),
        ("v3 first end-marker byte zeroed".into(), changed(l - 8, Some(0), 0)),
        ("v3 last end-marker byte zeroed".into(), changed(l - 1, Some(0), 0)),
        ("v3 end marker cut short".into(), next[..l - 1].to_vec()),
        ("v3 one zero byte too many".into(), [next.clone(), vec![0]].concat()),
        ("v2 magic on a v3 record".into(), {
            let mut r = next.clone();
            r[3] = b'2';
            r
        }),
    ];
    bad.push((
        "v3 record, v2 layout (no end marker)".into(),
        seal_record_as(RecordVersion::V2, 1, 3, &next[60..60 + payload_len]),
    ));
    let bad_records = bad
        .into_iter()
        .map(|(name, r)| {
            let fault = match check_record_as(RecordVersion::V3, &r) {
                Ok(_) => fault_name(open_record(&r).unwrap_err()),
                Err(f) => fault_name(f),
            };
            BadRecord { journal_format: v3, name, fault, record_hex: hex(&r) }
        })
        .collect();

    let zeros = |n: usize| vec![0u8; n];
    let then_zeros = |b: &[u8]| [b, &zeros(512)[..]].concat();
    let mut tails: Vec<(String, u64, bool, Vec<u8>)> = vec![
        ("v3 4096 zero bytes (preallocated, unwritten)".into(), 1, true, zeros(4096)),
        ("v3 one zero byte".into(), 1, true, zeros(1)),
        ("v3 zeros, not the last segment".into(), 1, false, zeros(64)),
    ];
    for cut in [1usize, 3, 4, 15, 16, 27, 28, 59, 60, 61, l / 2, l - 8] {
        tails.push((format!("v3 prefix of {cut} bytes, then zeros"), 1, true, then_zeros(&next[..cut])));
        tails.push((format!("v3 prefix of {cut} bytes, file ends"), 1, true, next[..cut].to_vec()));
        tails.push((
            format!("v3 prefix of {cut} bytes, then zeros, not the last segment"),
            1,
            false,
            then_zeros(&next[..cut]),
        ));
    }
    for cut in [l - 7, l - 1] {
        tails.push((
            format!("v3 prefix of {cut} bytes (torn inside the end marker), then zeros"),
            1,
            true,
            then_zeros(&next[..cut]),
        ));
        tails.push((
            format!("v3 prefix of {cut} bytes (torn inside the end marker), file ends"),
            1,
            true,
            next[..cut].to_vec(),
        ));
    }
    for cut in [16usize, 28, 60, l / 2] {
        tails.push((
            format!("v3 prefix of {cut} bytes naming another seq, then zeros"),
            2,
            true,
            then_zeros(&next[..cut]),
        ));
    }
    let whole = |name: &str, r: Vec<u8>| {
        (format!("v3 whole next record, {name}, then zeros"), 1u64, true, then_zeros(&r))
    };
    tails.push(whole("one payload byte flipped", changed(70, None, 0x10)));
    tails.push(whole("last payload byte zeroed", changed(60 + payload_len - 1, Some(0), 0)));
    tails.push(whole("a padding byte set", changed(60 + payload_len, Some(1), 0)));
    tails.push(whole("first end-marker byte zeroed", changed(l - 8, Some(0), 0)));
    tails.push(whole("last end-marker byte zeroed", changed(l - 1, Some(0), 0)));
    tails.push(whole("end marker all zero", {
        let mut r = next.clone();
        r[l - 8..].fill(0);
        r
    }));
    tails.push(whole("length flipped", changed(5, None, 0x40)));
    tails.push((
        "v3 header then zeros to the end".into(),
        1,
        true,
        [&next[..60], &zeros(l - 60 + 512)[..]].concat(),
    ));
    tails.push((
        "v3 zeros, then a stray byte 01".into(),
        1,
        true,
        [&zeros(100)[..], &[1u8][..], &zeros(100)[..]].concat(),
    ));
    tails.push((
        "v3 zeros, then an intact record".into(),
        1,
        true,
        [&zeros(8)[..], &other[..], &zeros(64)[..]].concat(),
    ));
    tails.push((
        "v3 torn-looking prefix, then an intact record".into(),
        1,
        true,
        [&next[..24], &other[..]].concat(),
    ));
    tails.push((
        "v3 length-damaged record, then an intact record".into(),
        1,
        true,
        [changed(5, None, 0x40), other.clone()].concat(),
    ));
    tails.push((
        "v3 a v2 header prefix".into(),
        1,
        true,
        then_zeros(&seal_record_as(RecordVersion::V2, 1, 3, &next[60..60 + payload_len])[..30]),
    ));
    let tails = tails
        .into_iter()
        .map(|(name, next_seq, is_last, t)| {
            let (expect, next_intact) = tail_of(classify_tail_as(RecordVersion::V3, &t, next_seq, is_last));
            TailVector { journal_format: v3, name, next_seq, is_last, tail_hex: hex(&t), expect, next_intact }
        })
        .collect();
    Vectors { records, bad_records, tails }
}

fn version_of(journal_format: Option<u64>) -> RecordVersion {
    match journal_format {
        Some(3) => RecordVersion::V3,
        None => RecordVersion::V2,
        Some(other) => panic!("unknown journalFormat {other}"),
    }
}

fn load() -> Vectors {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors/journal.json");
    let bless = std::env::var_os("BLESS_VECTORS").is_some();
    if bless && !path.exists() {
        std::fs::write(&path, serde_json::to_string_pretty(&fresh()).unwrap() + "\n").unwrap();
    }
    let mut v: Vectors = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    if bless && v.records.iter().all(|r| r.journal_format.is_none()) {
        let v3 = fresh_v3();
        v.records.extend(v3.records);
        v.bad_records.extend(v3.bad_records);
        v.tails.extend(v3.tails);
        std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap() + "\n").unwrap();
    }
    v
}

/// Every golden record seals to its frozen bytes and opens back to its fields.
#[test]
fn records_seal_to_their_frozen_bytes() {
    let v = load();
    assert!(v.records.iter().any(|r| r.journal_format == Some(3)), "v3 vectors present");
    for v in v.records {
        let version = version_of(v.journal_format);
        let payload = unhex(&v.payload_hex);
        assert_eq!(hex(&seal_record_as(version, v.first_seq, v.count, &payload)), v.record_hex, "{}", v.name);
        let record = unhex(&v.record_hex);
        let (h, p) = open_record(&record).unwrap();
        assert_eq!(
            (h.version, h.first_seq, h.count, p),
            (version, v.first_seq, v.count, &payload[..]),
            "{}",
            v.name
        );
    }
}

/// Every damaged record is refused, with the frozen fault (v3 ones as records of a v3
/// segment, which reads no other format).
#[test]
fn bad_records_are_refused() {
    for v in load().bad_records {
        let bytes = unhex(&v.record_hex);
        let fault = match v.journal_format {
            None => open_record(&bytes).unwrap_err(),
            Some(_) => check_record_as(RecordVersion::V3, &bytes)
                .err()
                .unwrap_or_else(|| open_record(&bytes).unwrap_err()),
        };
        assert_eq!(fault_name(fault), v.fault, "{}", v.name);
    }
}

/// Every tail is classified as frozen: torn only where the rule says, damage everywhere
/// else, with the next intact record found.
#[test]
fn tails_are_classified_as_frozen() {
    let v = load();
    for version in [None, Some(3)] {
        let of = |e: &str| v.tails.iter().filter(|t| t.journal_format == version && t.expect == e).count();
        assert!(of("torn") >= 10 && of("damaged") >= 10, "both kinds covered for {version:?}");
    }
    for t in v.tails {
        let got = tail_of(classify_tail_as(
            version_of(t.journal_format),
            &unhex(&t.tail_hex),
            t.next_seq,
            t.is_last,
        ));
        assert_eq!(got, (t.expect.clone(), t.next_intact), "{}", t.name);
    }
}

/// The v3 end marker is what the v3 tail vectors lean on: eight non-zero bytes.
#[test]
fn the_end_marker_has_no_zero_byte() {
    assert!(END_MARKER.iter().all(|b| *b != 0));
}
