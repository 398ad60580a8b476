//! Journal records, formats v2 and v3: a fixed 60-byte header in front of each frame, so
//! a reader can tell an incomplete last write from damaged acknowledged bytes, and can find
//! the intact records that follow a damaged one. Format v3 (the writer's) adds zero padding
//! and an 8-byte end marker, so that a record written into a preallocated, zero-filled
//! segment shows whether its last bytes reached the disk.
//!
//! ```text
//! offset size field
//!  0      4   magic        "CLJ2" (v2) / "CLJ3" (v3)
//!  4      4   payloadLen   u32 big-endian, 1 ..= MAX_FRAME_BYTES: the frame's length
//!  8      8   firstSeq     u64 big-endian: seq of the frame's first entry
//! 16      4   count        u32 big-endian, 1 ..= MAX_FRAME_ENTRIES: entries in the frame
//! 20      8   headerCheck  first 8 bytes of derive_key(header context, bytes 0..20)
//! 28     32   payloadCheck derive_key(payload context, bytes 0..20 ‖ payload)
//! 60      n   payload      the frame (canonical CBOR, `decode_frame`)
//! v3 only:
//! 60+n    p   padding      p zero bytes, p = (4 - n) mod 8, so the record's length is a multiple of 8
//! 60+n+p  8   endMarker    "CLJ3-END" (no zero byte)
//! ```
//!
//! The checks are against accidental damage (bit rot, a flipped length, a torn write);
//! against deliberate edits the hash chain and checkpoints stand, as before.

use crate::codec::{MAX_FRAME_BYTES, MAX_FRAME_ENTRIES};

/// The record magic of format v2: "CLJ2".
pub const RECORD_MAGIC: [u8; 4] = *b"CLJ2";
/// The record magic of format v3: "CLJ3".
pub const RECORD_MAGIC_V3: [u8; 4] = *b"CLJ3";
/// Bytes of a record header (both formats).
pub const HEADER_BYTES: usize = 60;
/// The last 8 bytes of every v3 record. None is zero, so a single damaged byte leaves seven
/// of them non-zero, while a write that did not reach them leaves all eight zero.
pub const END_MARKER: [u8; 8] = *b"CLJ3-END";
/// v3 records start and end at multiples of this (from the start of their segment), so the
/// end marker never straddles a sector or page boundary: a torn write persists it whole or
/// not at all.
pub const RECORD_ALIGN: usize = 8;
/// Largest record of either format: a header, a maximal frame, padding and end marker.
pub const MAX_RECORD_BYTES: usize = HEADER_BYTES + MAX_FRAME_BYTES + (RECORD_ALIGN - 1) + END_MARKER.len();
/// `derive_key` context of the v2 header check.
pub const HEADER_CONTEXT: &str = "closure-ledger v2 journal record header";
/// `derive_key` context of the v2 payload check.
pub const PAYLOAD_CONTEXT: &str = "closure-ledger v2 journal record payload";
/// `derive_key` context of the v3 header check.
pub const HEADER_CONTEXT_V3: &str = "closure-ledger v3 journal record header";
/// `derive_key` context of the v3 payload check.
pub const PAYLOAD_CONTEXT_V3: &str = "closure-ledger v3 journal record payload";
/// The journal format version the writer produces (v3 records in preallocated segments).
pub const JOURNAL_FORMAT_VERSION: u64 = 3;

const FIELDS: usize = 20;
const HEADER_CHECK_BYTES: usize = 8;

const _: () = assert!(HEADER_BYTES.is_multiple_of(4) && END_MARKER.len() == RECORD_ALIGN);
const _: () = assert!((HEADER_BYTES + END_MARKER.len()) % RECORD_ALIGN == 4);

/// The record format of a journal segment (all its records share one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordVersion {
    /// Format v2: header ‖ payload, in segments that grow with every append.
    V2,
    /// Format v3: header ‖ payload ‖ padding ‖ end marker, in preallocated, zero-filled segments.
    V3,
}

impl RecordVersion {
    /// The format of a segment, from its first bytes: v2 if it begins with the v2 magic,
    /// else v3 (a v3 segment, or an empty or all-zero one — whose rules agree).
    pub fn of_segment(first_bytes: &[u8]) -> RecordVersion {
        if first_bytes.get(..4) == Some(&RECORD_MAGIC[..]) { RecordVersion::V2 } else { RecordVersion::V3 }
    }

    /// The format a record claims by its magic, if any.
    pub fn of_record(bytes: &[u8]) -> Option<RecordVersion> {
        match bytes.get(..4) {
            Some(m) if m == RECORD_MAGIC => Some(RecordVersion::V2),
            Some(m) if m == RECORD_MAGIC_V3 => Some(RecordVersion::V3),
            _ => None,
        }
    }

    /// The journal format number (2 or 3).
    pub fn number(self) -> u64 {
        match self {
            RecordVersion::V2 => 2,
            RecordVersion::V3 => 3,
        }
    }

    /// The magic a record of this version begins with.
    pub fn magic(self) -> [u8; 4] {
        match self {
            RecordVersion::V2 => RECORD_MAGIC,
            RecordVersion::V3 => RECORD_MAGIC_V3,
        }
    }

    fn header_context(self) -> &'static str {
        match self {
            RecordVersion::V2 => HEADER_CONTEXT,
            RecordVersion::V3 => HEADER_CONTEXT_V3,
        }
    }

    fn payload_context(self) -> &'static str {
        match self {
            RecordVersion::V2 => PAYLOAD_CONTEXT,
            RecordVersion::V3 => PAYLOAD_CONTEXT_V3,
        }
    }

    /// Zero bytes between a payload of `payload_len` bytes and the end marker (v3).
    fn padding(self, payload_len: usize) -> usize {
        match self {
            RecordVersion::V2 => 0,
            RecordVersion::V3 => {
                (RECORD_ALIGN - (HEADER_BYTES + payload_len + END_MARKER.len()) % RECORD_ALIGN) % RECORD_ALIGN
            }
        }
    }

    /// Bytes after the payload: padding and end marker (v3), nothing (v2).
    fn trailer(self, payload_len: usize) -> usize {
        match self {
            RecordVersion::V2 => 0,
            RecordVersion::V3 => self.padding(payload_len) + END_MARKER.len(),
        }
    }
}

/// The fields of a verified header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub version: RecordVersion,
    pub payload_len: u32,
    pub first_seq: u64,
    pub count: u32,
}

impl RecordHeader {
    /// The whole record: header, payload and (v3) padding and end marker.
    pub fn record_len(&self) -> usize {
        let n = self.payload_len as usize;
        HEADER_BYTES + n + self.version.trailer(n)
    }

    /// Seq of the frame's last entry.
    pub fn last_seq(&self) -> u64 {
        self.first_seq.saturating_add(u64::from(self.count).saturating_sub(1))
    }
}

/// Why bytes are not an intact record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordFault {
    #[error("{have} bytes where a record needs at least {need}")]
    Incomplete { have: usize, need: usize },
    #[error("no record magic")]
    Magic,
    #[error("header check mismatch")]
    HeaderCheck,
    #[error("header out of bounds: payload {payload_len} bytes, {count} entries")]
    Bounds { payload_len: u32, count: u32 },
    #[error("payload check mismatch")]
    PayloadCheck,
    #[error("record end mismatch (padding not zero or end marker wrong)")]
    End,
    #[error("record of {expected} bytes followed by {extra} more")]
    Trailing { expected: usize, extra: usize },
}

fn fields(magic: [u8; 4], first_seq: u64, count: u32, payload_len: u32) -> [u8; FIELDS] {
    let mut out = [0u8; FIELDS];
    let parts: [&[u8]; 4] =
        [&magic, &payload_len.to_be_bytes(), &first_seq.to_be_bytes(), &count.to_be_bytes()];
    let mut at = 0;
    for part in parts {
        for (slot, byte) in out.iter_mut().skip(at).zip(part) {
            *slot = *byte;
        }
        at += part.len();
    }
    out
}

fn header_check(version: RecordVersion, fields: &[u8]) -> [u8; HEADER_CHECK_BYTES] {
    let full = blake3::derive_key(version.header_context(), fields);
    let mut out = [0u8; HEADER_CHECK_BYTES];
    out.iter_mut().zip(full).for_each(|(o, b)| *o = b);
    out
}

fn payload_check(version: RecordVersion, fields: &[u8], payload: &[u8]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new_derive_key(version.payload_context());
    hasher.update(fields);
    hasher.update(payload);
    *hasher.finalize().as_bytes()
}

/// Builds the record of a frame in the writer's format (v3): header ‖ payload ‖ padding ‖
/// end marker. The caller keeps the frame within its bounds (`payload` at most
/// [`MAX_FRAME_BYTES`], `count` 1 ..= [`MAX_FRAME_ENTRIES`]).
pub fn seal_record(first_seq: u64, count: u32, payload: &[u8]) -> Vec<u8> {
    seal_record_as(RecordVersion::V3, first_seq, count, payload)
}

/// Builds a record of the given format (v2 only for tests, vectors and tools: the writer
/// writes v3).
pub fn seal_record_as(version: RecordVersion, first_seq: u64, count: u32, payload: &[u8]) -> Vec<u8> {
    let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let fields = fields(version.magic(), first_seq, count, payload_len);
    let trailer = version.trailer(payload.len());
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len() + trailer);
    out.extend_from_slice(&fields);
    out.extend_from_slice(&header_check(version, &fields));
    out.extend_from_slice(&payload_check(version, &fields, payload));
    out.extend_from_slice(payload);
    if version == RecordVersion::V3 {
        out.resize(out.len() + version.padding(payload.len()), 0);
        out.extend_from_slice(&END_MARKER);
    }
    out
}

/// The payload of a record whose header was verified (`bytes` starts with the record):
/// the frame, without header, padding or end marker. Empty if `bytes` is shorter.
pub fn payload_of(bytes: &[u8]) -> &[u8] {
    let n = be_u32(bytes, 4) as usize;
    bytes.get(HEADER_BYTES..HEADER_BYTES.saturating_add(n)).unwrap_or_default()
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.iter_mut().zip(bytes.iter().skip(at)).for_each(|(o, i)| *o = *i);
    u32::from_be_bytes(b)
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.iter_mut().zip(bytes.iter().skip(at)).for_each(|(o, i)| *o = *i);
    u64::from_be_bytes(b)
}

/// Parses and checks the header at the start of `bytes` (which may hold more), in the
/// format its magic names.
pub fn parse_header(bytes: &[u8]) -> Result<RecordHeader, RecordFault> {
    match RecordVersion::of_record(bytes) {
        Some(version) => parse_header_as(version, bytes),
        None if bytes.len() < HEADER_BYTES => {
            Err(RecordFault::Incomplete { have: bytes.len(), need: HEADER_BYTES })
        }
        None => Err(RecordFault::Magic),
    }
}

/// Parses and checks the header at the start of `bytes` as a record of `version`.
pub fn parse_header_as(version: RecordVersion, bytes: &[u8]) -> Result<RecordHeader, RecordFault> {
    let Some(header) = bytes.get(..HEADER_BYTES) else {
        return Err(RecordFault::Incomplete { have: bytes.len(), need: HEADER_BYTES });
    };
    let (fields, rest) = header.split_at(FIELDS);
    if fields.get(..4) != Some(&version.magic()[..]) {
        return Err(RecordFault::Magic);
    }
    if rest.get(..HEADER_CHECK_BYTES) != Some(&header_check(version, fields)[..]) {
        return Err(RecordFault::HeaderCheck);
    }
    let parsed = RecordHeader {
        version,
        payload_len: be_u32(fields, 4),
        first_seq: be_u64(fields, 8),
        count: be_u32(fields, 16),
    };
    let len_ok = parsed.payload_len >= 1 && parsed.payload_len as usize <= MAX_FRAME_BYTES;
    let count_ok = parsed.count >= 1 && parsed.count as usize <= MAX_FRAME_ENTRIES;
    if !len_ok || !count_ok {
        return Err(RecordFault::Bounds { payload_len: parsed.payload_len, count: parsed.count });
    }
    Ok(parsed)
}

/// Checks the record at the start of `bytes` (header, length, payload check and, for v3,
/// padding and end marker), in the format its magic names, and returns its header and
/// payload; `bytes` may hold more after the record.
pub fn check_record(bytes: &[u8]) -> Result<(RecordHeader, &[u8]), RecordFault> {
    let header = parse_header(bytes)?;
    check_rest(header, bytes)
}

/// [`check_record`] for a record of `version` only.
pub fn check_record_as(version: RecordVersion, bytes: &[u8]) -> Result<(RecordHeader, &[u8]), RecordFault> {
    let header = parse_header_as(version, bytes)?;
    check_rest(header, bytes)
}

fn check_rest(header: RecordHeader, bytes: &[u8]) -> Result<(RecordHeader, &[u8]), RecordFault> {
    let need = header.record_len();
    let Some(record) = bytes.get(..need) else {
        return Err(RecordFault::Incomplete { have: bytes.len(), need });
    };
    let (head, body) = record.split_at(HEADER_BYTES);
    let (payload, trailer) = body.split_at((header.payload_len as usize).min(body.len()));
    let (fields, checks) = head.split_at(FIELDS);
    if checks.get(HEADER_CHECK_BYTES..) != Some(&payload_check(header.version, fields, payload)[..]) {
        return Err(RecordFault::PayloadCheck);
    }
    if header.version == RecordVersion::V3 {
        let (padding, marker) = trailer.split_at(trailer.len().saturating_sub(END_MARKER.len()));
        if padding.iter().any(|b| *b != 0) || marker != END_MARKER {
            return Err(RecordFault::End);
        }
    }
    Ok((header, payload))
}

/// [`check_record`] on bytes that must be exactly one record (a sled value).
pub fn open_record(bytes: &[u8]) -> Result<(RecordHeader, &[u8]), RecordFault> {
    let (header, payload) = check_record(bytes)?;
    let extra = bytes.len().saturating_sub(header.record_len());
    if extra > 0 {
        return Err(RecordFault::Trailing { expected: header.record_len(), extra });
    }
    Ok((header, payload))
}

/// What the bytes after the last intact record of a journal segment are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// v3 only: zero bytes after the last record of the last segment — space the writer
    /// preallocated and has not written yet. The segment ends cleanly before them; nothing
    /// is cut or reported.
    Unwritten,
    /// The prefix of the one write in flight at a crash: never acknowledged, may be cut.
    Torn,
    /// Damaged bytes: never to be discarded silently. `next_intact` is the offset (within
    /// the examined bytes) and first seq of the next intact record, if any.
    Damaged { next_intact: Option<(usize, u64)> },
}

/// The first intact record (of either format) starting after offset 0 of `bytes`:
/// `(offset, first seq)`.
pub fn next_intact(bytes: &[u8]) -> Option<(usize, u64)> {
    const COMMON: [u8; 3] = *b"CLJ";
    const _: () = assert!(RECORD_MAGIC[0] == COMMON[0] && RECORD_MAGIC_V3[2] == COMMON[2]);
    let mut from = 1;
    while let Some(rest) = bytes.get(from..) {
        // memchr's vectorised search: a preallocated segment's unwritten tail is up to
        // 1 MiB of zeros, scanned at every open.
        let at = from + memchr::memmem::find(rest, &COMMON)?;
        if let Some((header, _)) = bytes.get(at..).and_then(|b| check_record(b).ok()) {
            return Some((at, header.first_seq));
        }
        from = at + 1;
    }
    None
}

/// Whether `prefix` (shorter than a header) can be the start of a `version` header for
/// `next_seq`: its first `min(len, 4)` bytes are the magic, from 8 bytes on the payload
/// length is in bounds, from 16 bytes on bytes 8..16 are `next_seq`, from 20 bytes on the
/// count is in bounds, and from 28 bytes on the header check verifies.
fn header_prefix_ok(version: RecordVersion, prefix: &[u8], next_seq: u64) -> bool {
    let n = prefix.len();
    let magic_ok = prefix.iter().zip(version.magic()).all(|(a, b)| *a == b);
    let len_ok = n < 8 || (1..=MAX_FRAME_BYTES).contains(&(be_u32(prefix, 4) as usize));
    let count_ok = n < 20 || (1..=MAX_FRAME_ENTRIES).contains(&(be_u32(prefix, 16) as usize));
    let seq_ok = n < 16 || be_u64(prefix, 8) == next_seq;
    let check_ok = n < FIELDS + HEADER_CHECK_BYTES
        || prefix.get(FIELDS..FIELDS + HEADER_CHECK_BYTES)
            == prefix.get(..FIELDS).map(|f| header_check(version, f)).as_ref().map(|c| &c[..]);
    n < HEADER_BYTES && magic_ok && len_ok && count_ok && seq_ok && check_ok
}

/// Classifies `tail`: the bytes from the end of the last intact record to the end of a
/// v2 segment, where the next record would name `next_seq`. The v2 torn-tail rule: `tail` is
/// torn iff no intact record begins inside it, it is in the last segment (`is_last`), it
/// is shorter than one maximal record, and either
///
/// 1. every byte is zero (the file grew but the write's data never reached the disk), or
/// 2. it is shorter than a header and is the prefix of a header for `next_seq`: its first
///    `min(len, 4)` bytes are the magic, from 8 bytes on the payload length is in bounds,
///    from 16 bytes on bytes 8..16 are `next_seq`, from 20 bytes on the count is in bounds,
///    and from 28 bytes on the header check verifies; or
/// 3. it begins with a header that verifies, names `next_seq`, and claims a payload that
///    extends past the end of the segment.
///
/// Everything else — a bad magic, a header check or payload check that fails on bytes that
/// are all present, a header naming another seq, bytes after an intact record in any
/// segment but the last — is damage.
pub fn classify_tail(tail: &[u8], next_seq: u64, is_last: bool) -> Tail {
    let next = next_intact(tail);
    if next.is_some() || !is_last || tail.len() >= HEADER_BYTES + MAX_FRAME_BYTES {
        return Tail::Damaged { next_intact: next };
    }
    if tail.iter().all(|b| *b == 0) {
        return Tail::Torn;
    }
    let torn = if tail.len() < HEADER_BYTES {
        header_prefix_ok(RecordVersion::V2, tail, next_seq)
    } else {
        matches!(parse_header_as(RecordVersion::V2, tail),
            Ok(h) if h.first_seq == next_seq && h.record_len() > tail.len())
    };
    if torn { Tail::Torn } else { Tail::Damaged { next_intact: None } }
}

/// The v3 torn-tail rule, for `tail` after the last intact record of a v3 segment (see
/// docs/format.md, "The torn-tail rule, v3"). Let `w` be the length of `tail` without its
/// trailing zero bytes (what was written). If `tail` is empty or `w` is 0 and the segment
/// is the last, the rest is [`Tail::Unwritten`]. Otherwise `tail` is torn iff it is in the
/// last segment, no intact record begins inside it, and either
///
/// 1. `w` < 60 and the written bytes are a prefix of a v3 header for `next_seq` (as in v2); or
/// 2. it begins with a v3 header that verifies and names `next_seq`, and the record it
///    announces (length `L`) either extends past the end of `tail`, or ends with eight
///    zero bytes where its end marker belongs (`w <= L - 8`).
///
/// A complete record with one byte changed always keeps at least seven of its eight end
/// marker bytes (which are non-zero) at offsets ≥ 64, so `w` ≥ 64 and its marker is not
/// all zero: it is never torn. Everything else is damage.
pub fn classify_tail_v3(tail: &[u8], next_seq: u64, is_last: bool) -> Tail {
    let next = next_intact(tail);
    if next.is_some() || !is_last {
        return Tail::Damaged { next_intact: next };
    }
    let written = written_len(tail);
    if written == 0 {
        return Tail::Unwritten;
    }
    let prefix = tail.get(..written).unwrap_or_default();
    let torn = header_prefix_ok(RecordVersion::V3, prefix, next_seq)
        || matches!(parse_header_as(RecordVersion::V3, tail), Ok(h) if h.first_seq == next_seq
            && (h.record_len() > tail.len() || written <= h.record_len() - END_MARKER.len()));
    if torn { Tail::Torn } else { Tail::Damaged { next_intact: None } }
}

/// One past the last non-zero byte of `bytes` (0 if every byte is zero): whole blocks of
/// zeros from the end are skipped a block at a time, then the last one is searched.
fn written_len(bytes: &[u8]) -> usize {
    const BLOCK: usize = 64;
    const ZEROS: [u8; BLOCK] = [0; BLOCK];
    let mut end = bytes.len();
    while end >= BLOCK && bytes.get(end - BLOCK..end) == Some(&ZEROS[..]) {
        end -= BLOCK;
    }
    bytes.get(..end).and_then(|b| b.iter().rposition(|b| *b != 0)).map_or(0, |i| i + 1)
}

/// The torn-tail rule of a segment's format.
pub fn classify_tail_as(version: RecordVersion, tail: &[u8], next_seq: u64, is_last: bool) -> Tail {
    match version {
        RecordVersion::V2 => classify_tail(tail, next_seq, is_last),
        RecordVersion::V3 => classify_tail_v3(tail, next_seq, is_last),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_every_flipped_byte_is_caught() {
        for version in [RecordVersion::V2, RecordVersion::V3] {
            let record = seal_record_as(version, 7, 2, b"\xa2payload");
            let (h, p) = open_record(&record).unwrap();
            assert_eq!((h.first_seq, h.count, h.payload_len as usize, p), (7, 2, 8, &b"\xa2payload"[..]));
            assert_eq!(h.record_len(), record.len());
            for i in 0..record.len() {
                let mut bad = record.clone();
                bad[i] ^= 0x10;
                assert!(open_record(&bad).is_err(), "{version:?}: flip at {i} passed");
            }
        }
    }

    #[test]
    fn written_len_is_one_past_the_last_non_zero_byte() {
        let naive = |b: &[u8]| b.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 300] {
            let zeros = vec![0u8; len];
            assert_eq!(written_len(&zeros), 0, "{len} zeros");
            for at in 0..len {
                for more in [None, Some(0), Some(at / 2)] {
                    let mut b = zeros.clone();
                    b[at] = 0x80;
                    if let Some(m) = more {
                        b[m] = 1;
                    }
                    assert_eq!(written_len(&b), naive(&b), "len {len}, non-zero at {at}");
                }
            }
        }
    }

    #[test]
    fn torn_prefixes_of_the_next_write_are_torn_and_nothing_else_is() {
        let record = seal_record_as(RecordVersion::V2, 5, 1, b"\xa2frame-bytes");
        for cut in 1..record.len() {
            assert_eq!(classify_tail(&record[..cut], 5, true), Tail::Torn, "prefix of {cut} bytes");
            // The seq field is complete from 16 bytes on: then a prefix for another seq is damage.
            let other_seq = classify_tail(&record[..cut], 6, true);
            assert_eq!(other_seq == Tail::Torn, cut < 16, "prefix of {cut} bytes for the wrong seq");
            assert!(matches!(classify_tail(&record[..cut], 5, false), Tail::Damaged { .. }));
        }
        assert!(
            matches!(classify_tail(&record, 5, true), Tail::Damaged { .. }),
            "a whole record is not a tail"
        );
        let mut zeros_after = record[..30].to_vec();
        zeros_after.extend([0u8; 10]);
        assert_eq!(classify_tail(&zeros_after, 5, true), Tail::Torn);
        assert_eq!(classify_tail(&[0u8; 100], 5, true), Tail::Torn);
        assert!(matches!(classify_tail(b"\xa2\x61", 5, true), Tail::Damaged { .. }));
    }

    #[test]
    fn a_damaged_length_is_not_a_tail_when_an_intact_record_follows() {
        let a = seal_record_as(RecordVersion::V2, 1, 1, b"\xa2aaaa");
        let b = seal_record_as(RecordVersion::V2, 2, 1, b"\xa2bbbb");
        let mut bytes = [a.clone(), b.clone()].concat();
        bytes[5] ^= 0x01; // payload length of the first record
        assert_eq!(classify_tail(&bytes, 1, true), Tail::Damaged { next_intact: Some((a.len(), 2)) });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod v3_tests {
    use super::*;

    /// What a reader makes of a v3 segment image: the offset where its records end and
    /// the verdict on the rest (`None` when the records end exactly at the end).
    fn read_segment(segment: &[u8], first_seq: u64) -> (usize, u64, Option<Tail>) {
        let (mut at, mut next) = (0usize, first_seq);
        while at < segment.len() {
            match check_record_as(RecordVersion::V3, &segment[at..]) {
                Ok((h, _)) if h.first_seq == next => {
                    at += h.record_len();
                    next = h.last_seq() + 1;
                }
                _ => return (at, next, Some(classify_tail_v3(&segment[at..], next, true))),
            }
        }
        (at, next, None)
    }

    /// Payloads whose lengths cover every padding (0..=7) and that end in zero bytes (a
    /// frame may legitimately end in 00: the last entry's `timeMs`).
    fn payloads() -> Vec<Vec<u8>> {
        (0..8usize)
            .map(|i| {
                let mut p = vec![0xa2; 40 + i];
                let n = p.len();
                p[n - 1] = 0;
                p[n - 2] = 0;
                p
            })
            .collect()
    }

    #[test]
    fn v3_records_are_aligned_and_end_in_the_marker() {
        for (i, p) in payloads().iter().enumerate() {
            let r = seal_record(i as u64, 1, p);
            assert_eq!(r.len() % RECORD_ALIGN, 0, "payload of {} bytes", p.len());
            assert_eq!(&r[r.len() - 8..], &END_MARKER);
            assert_eq!(payload_of(&r), &p[..]);
            let (h, got) = open_record(&r).unwrap();
            assert_eq!((h.version, got), (RecordVersion::V3, &p[..]));
            // A v3 record is not a v2 one, and the reverse.
            assert!(check_record_as(RecordVersion::V2, &r).is_err());
            assert!(check_record_as(RecordVersion::V3, &seal_record_as(RecordVersion::V2, 0, 1, p)).is_err());
        }
    }

    /// The exhaustive proof behind the v3 rule: in a preallocated segment (records, then
    /// zeros to the end of the file), changing any single byte of any record — flipped
    /// bits, set to 00, set to FF — is never taken for a torn tail; while every prefix of
    /// the next write that stops before its end marker, and every write stopped at an
    /// 8-byte boundary, is.
    #[test]
    fn v3_no_single_damaged_byte_passes_for_a_torn_tail() {
        let records: Vec<Vec<u8>> =
            payloads().iter().enumerate().map(|(i, p)| seal_record(10 + i as u64, 1, p)).collect();
        let data: Vec<u8> = records.concat();
        let mut segment = data.clone();
        segment.resize(data.len() + 4096, 0);
        assert_eq!(read_segment(&segment, 10), (data.len(), 18, Some(Tail::Unwritten)));
        let mut checked = 0;
        for i in 0..data.len() {
            for change in [0x01u8, 0x80, 0xff] {
                for set in [false, true] {
                    let mut bad = segment.clone();
                    let new = if set { if change == 0xff { 0xff } else { 0x00 } } else { bad[i] ^ change };
                    if new == bad[i] {
                        continue;
                    }
                    bad[i] = new;
                    let (_, _, verdict) = read_segment(&bad, 10);
                    assert!(
                        matches!(verdict, Some(Tail::Damaged { .. })),
                        "byte {i} set to {new:#04x}: {verdict:?}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 3 * data.len());
        // Also with no zeros after the records (a segment that grew past its preallocation).
        let last = records.last().unwrap();
        let start = data.len() - last.len();
        for i in start..data.len() {
            let mut bad = data.clone();
            bad[i] = if bad[i] == 0 { 1 } else { 0 };
            assert!(
                matches!(read_segment(&bad, 10).2, Some(Tail::Damaged { .. })),
                "byte {i} zeroed, no zeros after"
            );
        }
    }

    #[test]
    fn v3_torn_writes_into_zeros_are_torn() {
        for p in payloads() {
            let next = seal_record(18, 1, &p);
            let l = next.len();
            let before = seal_record(17, 1, b"\xa2x");
            for cut in 0..=l {
                let mut segment = before.clone();
                segment.extend_from_slice(&next[..cut]);
                segment.resize(before.len() + l + 512, 0);
                let (at, _, verdict) = read_segment(&segment, 17);
                let want = if cut == l {
                    Tail::Unwritten // the write completed: an intact record, then zeros
                } else if cut <= l - 8 || cut % RECORD_ALIGN == 0 || next[cut..].iter().all(|b| *b == 0) {
                    Tail::Torn
                } else {
                    // A write torn inside the 8-aligned end marker (impossible at sector
                    // granularity): indistinguishable from one damaged marker byte.
                    Tail::Damaged { next_intact: None }
                };
                let want = if cut == 0 { Tail::Unwritten } else { want };
                assert_eq!(verdict, Some(want), "payload {} bytes, write cut at {cut}", p.len());
                assert_eq!(at, if cut == l { before.len() + l } else { before.len() });
                // The same prefix at the end of a file that grew (no zeros after it).
                let mut grown = before.clone();
                grown.extend_from_slice(&next[..cut]);
                let (_, _, verdict) = read_segment(&grown, 17);
                let want_grown = if cut == 0 || cut == l { None } else { Some(Tail::Torn) };
                assert_eq!(verdict, want_grown, "payload {} bytes, grown file cut at {cut}", p.len());
            }
            // A prefix naming another seq, once the seq field is complete, is damage.
            let other = seal_record(19, 1, &p);
            let mut segment = before.clone();
            segment.extend_from_slice(&other[..30]);
            segment.resize(before.len() + l + 512, 0);
            assert!(matches!(read_segment(&segment, 17).2, Some(Tail::Damaged { .. })));
            // Not the last segment: even zeros are damage.
            assert!(matches!(classify_tail_v3(&[0u8; 64], 18, false), Tail::Damaged { .. }));
        }
    }
}
