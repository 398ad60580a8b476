//! The sealed entry (format version 1) and the frame that carries entries to storage.

use serde::{Deserialize, Serialize};

use crate::codec::{self, DecodeError, MAX_ENTRY_BYTES, MAX_FRAME_BYTES, MAX_FRAME_ENTRIES, RawBytes};
use crate::events::Event;
use crate::{Digest, DigestKind, Id};

/// The entry format this build writes. Older versions are still read (and upcast).
pub const FORMAT_VERSION: u64 = 1;
/// The frame format this build writes.
pub const FRAME_VERSION: u64 = 1;

/// One ledger entry. Field order is canonical key order (`v`, `seq`, `prev`, `event`,
/// `ledger`, `timeMs`), so `v` is always the first key and decoding can dispatch on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    /// Format version: lets a later build read, and upcast, version-1 history without
    /// rewriting or rehashing it.
    pub v: u64,
    /// Position in the ledger: genesis is 0, then +1 with no gap. Protects against deleted,
    /// duplicated and reordered entries.
    pub seq: u64,
    /// Hash of entry `seq - 1` (zero for genesis). Protects against any edit of history:
    /// changing one entry changes every later link.
    pub prev: Digest,
    pub event: Event,
    /// The ledger id fixed at genesis. Protects against splicing entries from another
    /// ledger with a valid chain of its own.
    pub ledger: Id,
    /// Admission time in ms since the Unix epoch; never decreases along the chain.
    pub time_ms: u64,
}

impl Entry {
    /// The canonical bytes of this entry.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Strictly decodes one entry, dispatching on its format version.
    pub fn decode(bytes: &[u8]) -> Result<Entry, DecodeError> {
        if bytes.len() > MAX_ENTRY_BYTES {
            return Err(DecodeError::TooLarge { len: bytes.len(), max: MAX_ENTRY_BYTES });
        }
        match peek_version(bytes)? {
            1 => codec::decode(bytes, MAX_ENTRY_BYTES),
            found => Err(DecodeError::UnsupportedVersion { found }),
        }
    }
}

/// Reads the version from a record whose first key is `"v"` (true of every canonical
/// entry and frame: `"v"` is the shortest key).
fn peek_version(bytes: &[u8]) -> Result<u64, DecodeError> {
    if let [map, 0x61, b'v', rest @ ..] = bytes
        && map & 0xe0 == 0xa0
    {
        let arg = |n: usize| rest.get(1..=n).map(|b| b.iter().fold(0u64, |a, x| a << 8 | u64::from(*x)));
        let version = match rest.first() {
            Some(info @ 0..=23) => Some(u64::from(*info)),
            Some(24) => arg(1),
            Some(25) => arg(2),
            Some(26) => arg(4),
            Some(27) => arg(8),
            _ => None,
        };
        if let Some(version) = version {
            return Ok(version);
        }
    }
    codec::check_canonical(bytes)?;
    Err(DecodeError::Schema("record does not begin with its format version `v`".into()))
}

/// The hash of an entry's canonical bytes: the chain link.
pub fn entry_hash(bytes: &[u8]) -> Digest {
    Digest::of(DigestKind::Entry, bytes)
}

/// An entry with its canonical bytes and hash, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]

pub struct SealedEntry {
    pub hash: Digest,
    pub bytes: Vec<u8>,
    pub entry: Entry,
}

impl SealedEntry {
    /// Encodes and hashes an entry.
    pub fn seal(entry: Entry) -> SealedEntry {
        let bytes = entry.encode();
        let hash = entry_hash(&bytes);
        SealedEntry { entry, bytes, hash }
    }

    /// Strictly decodes stored bytes and hashes them.
    pub fn open(bytes: &[u8]) -> Result<SealedEntry, DecodeError> {
        let entry = Entry::decode(bytes)?;
        Ok(SealedEntry { entry, hash: entry_hash(bytes), bytes: bytes.to_vec() })
    }
}

/// A frame: the consecutive entries of one group commit, each as its exact canonical
/// bytes (a CBOR byte string), so hashing needs no re-encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrameRepr<'a> {
    v: u64,
    #[serde(borrow)]
    entries: Vec<RawBytes<'a>>,
}

/// Encodes a frame from its entries' canonical bytes.
pub fn encode_frame<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let repr = FrameRepr { v: FRAME_VERSION, entries: entries.into_iter().map(RawBytes).collect() };
    codec::encode(&repr)
}

/// Strictly decodes a frame into its entries' bytes (borrowed from `bytes`). A frame holds
/// 1 to [`MAX_FRAME_ENTRIES`] entries of at most [`MAX_ENTRY_BYTES`] each.
pub fn decode_frame(bytes: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge { len: bytes.len(), max: MAX_FRAME_BYTES });
    }
    if let Some(entries) = frame_exact(bytes) {
        return Ok(entries);
    }
    decode_frame_reference(bytes)
}

/// The canonical frame's fixed opening: a map of 2, `"v": 1`, the key `"entries"`.
const FRAME_OPENING: [u8; 12] = [0xa2, 0x61, b'v', 0x01, 0x67, b'e', b'n', b't', b'r', b'i', b'e', b's'];

const _: () = assert!(FRAME_VERSION == 1, "FRAME_OPENING spells version 1");

/// The entries of a frame whose bytes are, byte for byte, the canonical encoding of a
/// valid frame — the fixed opening, an array head, and that many byte strings, every
/// head in shortest form, nothing after — or `None`. Reading exactly the encoder's layout
/// proves what the canonical walk, the strict decoder and the re-encode backstop prove
/// together, without a `Vec` of the frame's size; anything else (any fault, and every
/// limit) goes to the strict decoder, which names it (`decode_frame` is unchanged for
/// every input; the `frame_fast_path_agrees` tests hold it to [`decode_frame_reference`]).
fn frame_exact(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let rest = bytes.strip_prefix(&FRAME_OPENING)?;
    let (n, mut rest) = shortest_head(rest, 4)?;
    if n == 0 || n > MAX_FRAME_ENTRIES as u64 {
        return None;
    }
    let mut entries = Vec::with_capacity(usize::try_from(n).ok()?);
    for _ in 0..n {
        let (len, after) = shortest_head(rest, 2)?;
        let len = usize::try_from(len).ok().filter(|len| *len <= MAX_ENTRY_BYTES)?;
        let (entry, after) = after.split_at_checked(len)?;
        entries.push(entry);
        rest = after;
    }
    rest.is_empty().then_some(entries)
}

/// A CBOR head of `major` type in shortest form: its argument and the bytes after it.
fn shortest_head(bytes: &[u8], major: u8) -> Option<(u64, &[u8])> {
    let (&initial, rest) = bytes.split_first()?;
    if initial >> 5 != major {
        return None;
    }
    let (n, min) = match initial & 0x1f {
        info @ 0..=23 => return Some((u64::from(info), rest)),
        24 => (1, 24),
        25 => (2, 0x100),
        26 => (4, 0x1_0000),
        27 => (8, 0x1_0000_0000),
        _ => return None,
    };
    let (arg, rest) = rest.split_at_checked(n)?;
    let arg = arg.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b));
    (arg >= min).then_some((arg, rest))
}

/// [`decode_frame`] through the strict decoder alone (canonical walk, `serde`, re-encode
/// backstop), for tests and fuzzers to compare the exact-layout path with.
#[doc(hidden)]
pub fn decode_frame_reference(bytes: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(DecodeError::TooLarge { len: bytes.len(), max: MAX_FRAME_BYTES });
    }
    let version = peek_version(bytes)?;
    if version != FRAME_VERSION {
        return Err(DecodeError::UnsupportedVersion { found: version });
    }
    let repr: FrameRepr<'_> = codec::decode_borrowed(bytes, MAX_FRAME_BYTES)?;
    if repr.entries.is_empty() || repr.entries.len() > MAX_FRAME_ENTRIES {
        return Err(DecodeError::FrameEntries { n: repr.entries.len(), max: MAX_FRAME_ENTRIES });
    }
    let entries: Vec<&[u8]> = repr.entries.into_iter().map(|raw| raw.0).collect();
    if let Some(big) = entries.iter().find(|e| e.len() > MAX_ENTRY_BYTES) {
        return Err(DecodeError::TooLarge { len: big.len(), max: MAX_ENTRY_BYTES });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use super::{decode_frame, decode_frame_reference, encode_frame};
    use crate::Entry;
    use crate::codec::{self, DecodeError};
    use crate::samples;

    /// xorshift64*: deterministic mutations.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    fn frames() -> Vec<Vec<u8>> {
        let entries: Vec<Vec<u8>> = samples::events().into_iter().map(|(_, e)| codec::encode(&e)).collect();
        let mut out = Vec::new();
        for n in [1, 2, 3, 23, 24, 25, 255, 256, 300] {
            let picked: Vec<&[u8]> = (0..n).map(|i| entries[i % entries.len()].as_slice()).collect();
            out.push(encode_frame(picked));
        }
        // Entry lengths across every head size: 0, 23, 24, 255, 256, 65 536 bytes.
        for len in [0usize, 23, 24, 255, 256, 65_536] {
            let big = vec![0x5a; len];
            out.push(encode_frame([big.as_slice(), b"x".as_slice()]));
        }
        out
    }

    /// The exact-layout path gives the strict decoder's verdict on every input: the
    /// canonical frames, and thousands of mutations of them (byte flips, insertions,
    /// deletions, truncations, long-form heads).
    #[test]
    fn frame_fast_path_agrees() {
        let mut rng = Rng(0x0f4a_11e5);
        let mut cases = 0;
        for frame in frames() {
            assert_eq!(decode_frame(&frame), decode_frame_reference(&frame));
            assert!(decode_frame(&frame).is_ok());
            for _ in 0..400 {
                let mut m = frame.clone();
                match rng.below(5) {
                    0 => {
                        let at = rng.below(m.len());
                        m[at] ^= 1 << rng.below(8);
                    }
                    1 => {
                        let at = rng.below(m.len().min(40));
                        m[at] = rng.next() as u8;
                    }
                    2 => {
                        let at = rng.below(m.len() + 1);
                        m.insert(at, rng.next() as u8);
                    }
                    3 => {
                        let at = rng.below(m.len());
                        m.remove(at);
                    }
                    _ => m.truncate(rng.below(m.len())),
                }
                assert_eq!(decode_frame(&m), decode_frame_reference(&m), "{m:02x?}");
                cases += 1;
            }
        }
        // Hand-made near misses: a long-form array head, a long-form entry length, a
        // version 2, an empty frame, bytes after the frame, a text string for an entry.
        let one = encode_frame([b"abc".as_slice()]);
        let mut long_array = one.clone();
        long_array.splice(12..13, [0x98, 0x01]);
        let mut long_len = one.clone();
        long_len.splice(13..14, [0x58, 0x03]);
        let mut v2 = one.clone();
        v2[3] = 0x02;
        let mut empty = one[..12].to_vec();
        empty.push(0x80);
        let mut trailing = one.clone();
        trailing.push(0x00);
        let mut text = one.clone();
        text[13] = 0x63;
        for m in [long_array, long_len, v2, empty, trailing, text] {
            let got = decode_frame(&m);
            assert!(got.is_err(), "{m:02x?}");
            assert_eq!(got, decode_frame_reference(&m), "{m:02x?}");
        }
        assert!(cases > 5000);
    }

    /// The scratch-buffer backstop gives the reference backstop's verdict and offset, on
    /// the kinds only it decides and on mutated entries.
    #[test]
    fn scratch_backstop_agrees_with_the_reference_backstop() {
        let mut rng = Rng(0xbac5_7009);
        for (_, event) in samples::events() {
            let entry =
                Entry { v: 1, seq: 3, prev: crate::Digest::ZERO, event, ledger: crate::Id(9), time_ms: 5 };
            let bytes = entry.encode();
            let ok: Result<Entry, _> = codec::decode(&bytes, codec::MAX_ENTRY_BYTES);
            assert_eq!(ok.as_ref().ok(), Some(&entry));
            for _ in 0..200 {
                let mut m = bytes.clone();
                let at = rng.below(m.len());
                match rng.below(3) {
                    0 => m[at] ^= 1 << rng.below(8),
                    1 => m[at] = rng.next() as u8,
                    _ => {
                        m.remove(at);
                    }
                }
                let fast: Result<Entry, _> = codec::decode_borrowed(&m, codec::MAX_ENTRY_BYTES);
                let reference: Result<Entry, _> =
                    codec::decode_borrowed_reference(&m, codec::MAX_ENTRY_BYTES);
                assert_eq!(fast, reference, "{m:02x?}");
            }
            // Canonical CBOR that `serde` reads as the same value: the key `v` as an
            // integer (field index 0) or as a byte string. Only the backstop refuses them.
            for key in [&[0x00][..], &[0x41, b'v'][..]] {
                let mut m = vec![bytes[0]];
                m.extend_from_slice(key);
                m.extend_from_slice(&bytes[3..]);
                let fast: Result<Entry, _> = codec::decode(&m, codec::MAX_ENTRY_BYTES);
                let reference: Result<Entry, _> =
                    codec::decode_borrowed_reference(&m, codec::MAX_ENTRY_BYTES);
                assert_eq!(fast, reference);
                assert_eq!(fast, Err(DecodeError::NonCanonical { offset: 1 }));
            }
        }
    }
}
