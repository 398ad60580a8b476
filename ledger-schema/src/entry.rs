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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, arbitrary::Arbitrary)]
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
