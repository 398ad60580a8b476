//! Journal records, format v2: a fixed 60-byte header in front of each frame, so a reader
//! can tell an incomplete last write from damaged acknowledged bytes, and can find the
//! intact records that follow a damaged one.
//!
//! ```text
//! offset size field
//!  0      4   magic        "CLJ2" (43 4C 4A 32)
//!  4      4   payloadLen   u32 big-endian, 1 ..= MAX_FRAME_BYTES: the frame's length
//!  8      8   firstSeq     u64 big-endian: seq of the frame's first entry
//! 16      4   count        u32 big-endian, 1 ..= MAX_FRAME_ENTRIES: entries in the frame
//! 20      8   headerCheck  first 8 bytes of derive_key(HEADER_CONTEXT, bytes 0..20)
//! 28     32   payloadCheck derive_key(PAYLOAD_CONTEXT, bytes 0..20 ‖ payload)
//! 60      n   payload      the frame (canonical CBOR, `decode_frame`)
//! ```
//!
//! The checks are against accidental damage (bit rot, a flipped length, a torn write);
//! against deliberate edits the hash chain and checkpoints stand, as before.

use crate::codec::{MAX_FRAME_BYTES, MAX_FRAME_ENTRIES};

/// The record magic: "CLJ2".
pub const RECORD_MAGIC: [u8; 4] = *b"CLJ2";
/// Bytes of a record header.
pub const HEADER_BYTES: usize = 60;
/// Largest record: a header and a maximal frame.
pub const MAX_RECORD_BYTES: usize = HEADER_BYTES + MAX_FRAME_BYTES;
/// `derive_key` context of the header check.
pub const HEADER_CONTEXT: &str = "closure-ledger v2 journal record header";
/// `derive_key` context of the payload check.
pub const PAYLOAD_CONTEXT: &str = "closure-ledger v2 journal record payload";
/// The journal format version these records make.
pub const JOURNAL_FORMAT_VERSION: u64 = 2;

const FIELDS: usize = 20;
const HEADER_CHECK_BYTES: usize = 8;

/// The fields of a verified header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub payload_len: u32,
    pub first_seq: u64,
    pub count: u32,
}

impl RecordHeader {
    /// Header plus payload.
    pub fn record_len(&self) -> usize {
        HEADER_BYTES + self.payload_len as usize
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
    #[error("record of {expected} bytes followed by {extra} more")]
    Trailing { expected: usize, extra: usize },
}

fn fields(first_seq: u64, count: u32, payload_len: u32) -> [u8; FIELDS] {
    let mut out = [0u8; FIELDS];
    let parts: [&[u8]; 4] =
        [&RECORD_MAGIC, &payload_len.to_be_bytes(), &first_seq.to_be_bytes(), &count.to_be_bytes()];
    let mut at = 0;
    for part in parts {
        for (slot, byte) in out.iter_mut().skip(at).zip(part) {
            *slot = *byte;
        }
        at += part.len();
    }
    out
}

fn header_check(fields: &[u8]) -> [u8; HEADER_CHECK_BYTES] {
    let full = blake3::derive_key(HEADER_CONTEXT, fields);
    let mut out = [0u8; HEADER_CHECK_BYTES];
    out.iter_mut().zip(full).for_each(|(o, b)| *o = b);
    out
}

fn payload_check(fields: &[u8], payload: &[u8]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new_derive_key(PAYLOAD_CONTEXT);
    hasher.update(fields);
    hasher.update(payload);
    *hasher.finalize().as_bytes()
}

/// Builds the record of a frame: header ‖ payload. The caller keeps the frame within its
/// bounds (`payload` at most [`MAX_FRAME_BYTES`], `count` 1 ..= [`MAX_FRAME_ENTRIES`]).
pub fn seal_record(first_seq: u64, count: u32, payload: &[u8]) -> Vec<u8> {
    let payload_len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let fields = fields(first_seq, count, payload_len);
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(&fields);
    out.extend_from_slice(&header_check(&fields));
    out.extend_from_slice(&payload_check(&fields, payload));
    out.extend_from_slice(payload);
    out
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

/// Parses and checks the header at the start of `bytes` (which may hold more).
pub fn parse_header(bytes: &[u8]) -> Result<RecordHeader, RecordFault> {
    let Some(header) = bytes.get(..HEADER_BYTES) else {
        return Err(RecordFault::Incomplete { have: bytes.len(), need: HEADER_BYTES });
    };
    let (fields, rest) = header.split_at(FIELDS);
    if fields.get(..4) != Some(&RECORD_MAGIC[..]) {
        return Err(RecordFault::Magic);
    }
    if rest.get(..HEADER_CHECK_BYTES) != Some(&header_check(fields)[..]) {
        return Err(RecordFault::HeaderCheck);
    }
    let parsed = RecordHeader {
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

/// Checks the record at the start of `bytes` (header, length, payload check) and returns
/// its header and payload; `bytes` may hold more after the record.
pub fn check_record(bytes: &[u8]) -> Result<(RecordHeader, &[u8]), RecordFault> {
    let header = parse_header(bytes)?;
    let need = header.record_len();
    let Some(record) = bytes.get(..need) else {
        return Err(RecordFault::Incomplete { have: bytes.len(), need });
    };
    let (head, payload) = record.split_at(HEADER_BYTES);
    let (fields, checks) = head.split_at(FIELDS);
    if checks.get(HEADER_CHECK_BYTES..) != Some(&payload_check(fields, payload)[..]) {
        return Err(RecordFault::PayloadCheck);
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

/// What the bytes after the last intact record of a journal's last segment are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The prefix of the one write in flight at a crash: never acknowledged, may be cut.
    Torn,
    /// Damaged bytes: never to be discarded silently. `next_intact` is the offset (within
    /// the examined bytes) and first seq of the next intact record, if any.
    Damaged { next_intact: Option<(usize, u64)> },
}

/// The first intact record starting after offset 0 of `bytes`: `(offset, first seq)`.
pub fn next_intact(bytes: &[u8]) -> Option<(usize, u64)> {
    let mut from = 1;
    while let Some(rest) = bytes.get(from..) {
        let at = from + rest.windows(RECORD_MAGIC.len()).position(|w| w == RECORD_MAGIC)?;
        if let Some((header, _)) = bytes.get(at..).and_then(|b| check_record(b).ok()) {
            return Some((at, header.first_seq));
        }
        from = at + 1;
    }
    None
}

/// Classifies `tail`: the bytes from the end of the last intact record to the end of a
/// segment, where the next record would name `next_seq`. The v2 torn-tail rule: `tail` is
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
    if next.is_some() || !is_last || tail.len() >= MAX_RECORD_BYTES {
        return Tail::Damaged { next_intact: next };
    }
    if tail.iter().all(|b| *b == 0) {
        return Tail::Torn;
    }
    let torn = if tail.len() < HEADER_BYTES {
        let magic_ok = tail.iter().zip(RECORD_MAGIC).all(|(a, b)| *a == b);
        let len_ok = tail.len() < 8 || (1..=MAX_FRAME_BYTES).contains(&(be_u32(tail, 4) as usize));
        let count_ok = tail.len() < 20 || (1..=MAX_FRAME_ENTRIES).contains(&(be_u32(tail, 16) as usize));
        let seq_ok = tail.len() < 16 || be_u64(tail, 8) == next_seq;
        let check_ok = tail.len() < FIELDS + HEADER_CHECK_BYTES
            || tail.get(FIELDS..FIELDS + HEADER_CHECK_BYTES)
                == tail.get(..FIELDS).map(header_check).as_ref().map(|c| &c[..]);
        magic_ok && len_ok && count_ok && seq_ok && check_ok
    } else {
        matches!(parse_header(tail), Ok(h) if h.first_seq == next_seq && h.record_len() > tail.len())
    };
    if torn { Tail::Torn } else { Tail::Damaged { next_intact: None } }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_every_flipped_byte_is_caught() {
        let record = seal_record(7, 2, b"\xa2payload");
        let (h, p) = open_record(&record).unwrap();
        assert_eq!((h.first_seq, h.count, h.payload_len as usize, p), (7, 2, 8, &b"\xa2payload"[..]));
        for i in 0..record.len() {
            let mut bad = record.clone();
            bad[i] ^= 0x10;
            assert!(open_record(&bad).is_err(), "flip at {i} passed");
        }
    }

    #[test]
    fn torn_prefixes_of_the_next_write_are_torn_and_nothing_else_is() {
        let record = seal_record(5, 1, b"\xa2frame-bytes");
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
        let a = seal_record(1, 1, b"\xa2aaaa");
        let b = seal_record(2, 1, b"\xa2bbbb");
        let mut bytes = [a.clone(), b.clone()].concat();
        bytes[5] ^= 0x01; // payload length of the first record
        assert_eq!(classify_tail(&bytes, 1, true), Tail::Damaged { next_intact: Some((a.len(), 2)) });
    }
}
