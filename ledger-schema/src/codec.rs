//! The canonical codec: the only module that touches `serde_cbor`.
//!
//! Canonical means RFC 8949 §4.2.1 core deterministic encoding: definite lengths,
//! shortest-form arguments, map keys in bytewise order of their encodings, no floats, no
//! tags, no duplicate keys. `serde_cbor` writes shortest forms and definite lengths, and
//! struct fields in *declaration* order, so every encoded struct declares its fields in
//! canonical key order (proved by `tests/it/key_order.rs`). On input `serde_cbor` accepts far
//! more than that, so the reference path of [`decode`] first runs [`check_canonical`] — a
//! bounded, allocation-free walk of the raw bytes — then decodes with unknown fields
//! denied, and finally re-encodes and compares (re-encoding into a reused per-thread
//! buffer), so exactly one byte string stands for each value.
//!
//! [`decode`] tries a fast path first: `strict`, a deserializer that reads only the
//! canonical encoding of the value it returns, in one pass (2.4× fewer instructions for a
//! Worker event entry). Whatever it does not vouch for goes to the reference path, which
//! then gives the verdict and the offset — so the fast path can change how long a decode
//! takes, never what it answers. The `decode_entry` fuzz target, `key_order.rs`, the
//! negative vectors and `compiler.rs::a_package_has_one_encoding` hold it to the reference
//! path.

use serde::Serialize;
use serde::de::DeserializeOwned;

mod strict;
mod writer;

/// Largest encoded entry (format v1). Checked before anything is decoded or allocated.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// Most entries one frame (one group commit) may hold.
pub const MAX_FRAME_ENTRIES: usize = 4096;
/// Largest encoded frame. A frame of [`MAX_FRAME_ENTRIES`] maximal entries would not fit:
/// writers must also respect this byte bound.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// Deepest nesting of arrays and maps the decoder walks (v1 records nest far less).
pub const MAX_DEPTH: u32 = 32;

const _: () = assert!(MAX_ENTRY_BYTES <= MAX_FRAME_BYTES);
const _: () = assert!(MAX_FRAME_ENTRIES >= 1);

/// Why bytes were refused. Offsets are byte positions in the refused input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("input of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("input ends inside an item at byte {offset}")]
    Truncated { offset: usize },
    #[error("trailing bytes after the item, from byte {offset}")]
    TrailingBytes { offset: usize },
    #[error("non-shortest integer or length at byte {offset}")]
    NonShortest { offset: usize },
    #[error("indefinite-length item at byte {offset}")]
    Indefinite { offset: usize },
    #[error("tag at byte {offset} (tags are not allowed)")]
    Tag { offset: usize },
    #[error("float at byte {offset} (floats are not allowed)")]
    Float { offset: usize },
    #[error("simple value at byte {offset} (only false and true are allowed)")]
    Simple { offset: usize },
    #[error("reserved or malformed initial byte at {offset}")]
    Malformed { offset: usize },
    #[error("map key at byte {offset} is out of canonical order")]
    KeyOrder { offset: usize },
    #[error("duplicate map key at byte {offset}")]
    DuplicateKey { offset: usize },
    #[error("nesting deeper than {max} at byte {offset}")]
    TooDeep { offset: usize, max: u32 },
    #[error("unknown field or variant: {0}")]
    UnknownField(String),
    #[error("does not match the schema: {0}")]
    Schema(String),
    #[error("format version {found} is not supported (this build reads version 1)")]
    UnsupportedVersion { found: u64 },
    #[error("a frame must hold 1 to {max} entries, this one holds {n}")]
    FrameEntries { n: usize, max: usize },
    #[error("not in canonical form: re-encoding differs from byte {offset}")]
    NonCanonical { offset: usize },
}

/// Encodes a record canonically.
///
/// Every encoded type in this crate is plain data with fields in canonical key order, so
/// serialization into a `Vec` cannot fail.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    encode_into(value, &mut out);
    out
}

/// Encodes a record canonically, appending to `out`: through `writer`'s direct
/// serializer, or — for a value it does not support (none of the canonical records) —
/// through `serde_cbor`. Both write the same bytes.
pub fn encode_into<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    let start = out.len();
    if value.serialize(&mut writer::Writer { out: &mut *out }).is_ok() {
        return;
    }
    out.truncate(start);
    encode_into_serde_cbor(value, out);
}

/// [`encode_into`] through `serde_cbor` alone: the reference the direct writer is tested
/// against.
#[doc(hidden)]
pub fn encode_into_serde_cbor<T: Serialize>(value: &T, out: &mut Vec<u8>) {
    #[expect(
        clippy::expect_used,
        reason = "writing derived plain-data records into a Vec has no failure path"
    )]
    serde_cbor::to_writer(&mut *out, value).expect("encoding a plain record into a Vec");
}

/// `encode(value).len()`, encoded into the reused per-thread scratch buffer (no
/// allocation).
pub fn encoded_len<T: Serialize>(value: &T) -> usize {
    with_scratch(value, <[u8]>::len)
}

/// `Digest::of(kind, &encode(value))` and the encoding's length, for records (bounded by
/// an entry): encoded into a per-thread scratch buffer that is reused, so hashing a record
/// costs no allocation and no regrowth. A scratch grown past 1 MiB is not kept.
pub fn record_digest<T: Serialize>(kind: crate::DigestKind, value: &T) -> (crate::Digest, usize) {
    with_scratch(value, |bytes| (crate::Digest::of(kind, bytes), bytes.len()))
}

/// [`record_digest`] through [`crate::Digest::of_repeated`]'s memo: for values that are
/// rendered again and again with the same bytes (a compile's items).
pub fn record_digest_repeated<T: Serialize>(kind: crate::DigestKind, value: &T) -> (crate::Digest, usize) {
    with_scratch(value, |bytes| (crate::Digest::of_repeated(kind, bytes), bytes.len()))
}

/// [`record_digest`] through [`crate::Digest::of_recent`]'s one-slot memo: for a value
/// hashed twice in a row (a Worker payload at admission: decided, then applied).
pub fn record_digest_recent<T: Serialize>(kind: crate::DigestKind, value: &T) -> crate::Digest {
    with_scratch(value, |bytes| crate::Digest::of_recent(kind, bytes))
}

/// `then(&encode(value))`, with the encoding in a per-thread scratch buffer that is reused
/// (a scratch grown past 1 MiB is not kept).
fn with_scratch<T: Serialize, R>(value: &T, then: impl FnOnce(&[u8]) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut bytes = SCRATCH.take();
    bytes.clear();
    encode_into(value, &mut bytes);
    let out = then(&bytes);
    if bytes.capacity() <= MAX_ENTRY_BYTES {
        SCRATCH.set(bytes);
    }
    out
}

/// `Digest::of(kind, &encode(value))`, computed by streaming the canonical encoding into
/// the hasher instead of materialising it (for large records such as the whole state).
pub fn encode_digest<T: Serialize>(kind: crate::DigestKind, value: &T) -> crate::Digest {
    let mut hasher = kind.hasher();
    #[expect(
        clippy::expect_used,
        reason = "writing derived plain-data records into a hasher has no failure path"
    )]
    serde_cbor::to_writer(&mut hasher, value).expect("encoding a plain record into a hasher");
    crate::Digest(*hasher.finalize().as_bytes())
}

/// Strictly decodes one canonical record that must occupy all of `bytes`.
///
/// Refuses, in this order: input over `max_bytes` (before reading anything); anything
/// [`check_canonical`] refuses; unknown fields and schema mismatches; and any input whose
/// re-encoding is not byte-identical. (Input the strict fast path reads whole is the
/// canonical encoding of the value it returns, so it passes all three.)
pub fn decode<T: DeserializeOwned + Serialize>(bytes: &[u8], max_bytes: usize) -> Result<T, DecodeError> {
    decode_borrowed(bytes, max_bytes)
}

fn classify(error: serde_cbor::Error) -> DecodeError {
    let message = error.to_string();
    if message.contains("unknown field") || message.contains("unknown variant") {
        DecodeError::UnknownField(message)
    } else {
        DecodeError::Schema(message)
    }
}

/// Checks that `bytes` is exactly one well-formed item in the canonical profile.
pub fn check_canonical(bytes: &[u8]) -> Result<(), DecodeError> {
    let end = item_end(bytes, 0)?;
    if end == bytes.len() { Ok(()) } else { Err(DecodeError::TrailingBytes { offset: end }) }
}

/// Where the canonical item starting at `start` ends. [`DecodeError::Truncated`] means the
/// bytes end inside the item (a reader of a CBOR sequence uses it to find a torn tail).
pub fn item_end(bytes: &[u8], start: usize) -> Result<usize, DecodeError> {
    scan(bytes, start, 0)
}

/// The argument of the head at `pos` (major type `major`, additional info `info`, major
/// types 0–5) in shortest form only, and where the head ends. The one reader of heads: the
/// canonical walk and the strict fast path (`strict.rs`) both use it.
#[inline]
fn head_argument(bytes: &[u8], pos: usize, major: u8, info: u8) -> Result<(u64, usize), DecodeError> {
    let (arg, next) = match info {
        0..=23 => (u64::from(info), pos + 1),
        24 => (read_be(bytes, pos + 1, 1)?, pos + 2),
        25 => (read_be(bytes, pos + 1, 2)?, pos + 3),
        26 => (read_be(bytes, pos + 1, 4)?, pos + 5),
        27 => (read_be(bytes, pos + 1, 8)?, pos + 9),
        31 if matches!(major, 2..=5) => return Err(DecodeError::Indefinite { offset: pos }),
        _ => return Err(DecodeError::Malformed { offset: pos }),
    };
    let shortest = match info {
        24 => arg >= 24,
        25 => arg > 0xff,
        26 => arg > 0xffff,
        27 => arg > 0xffff_ffff,
        _ => true,
    };
    if !shortest {
        return Err(DecodeError::NonShortest { offset: pos });
    }
    Ok((arg, next))
}

#[inline]
fn read_be(bytes: &[u8], from: usize, n: usize) -> Result<u64, DecodeError> {
    let end = from.checked_add(n).ok_or(DecodeError::Truncated { offset: from })?;
    let slice = bytes.get(from..end).ok_or(DecodeError::Truncated { offset: from })?;
    Ok(slice.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

/// Walks one item without allocating; recursion is bounded by [`MAX_DEPTH`] and every
/// declared length is checked against the bytes that remain before it is trusted.
fn scan(bytes: &[u8], pos: usize, depth: u32) -> Result<usize, DecodeError> {
    let initial = *bytes.get(pos).ok_or(DecodeError::Truncated { offset: pos })?;
    let major = initial >> 5;
    let info = initial & 0x1f;
    if major == 7 {
        return match info {
            20 | 21 => Ok(pos + 1),
            25..=27 => Err(DecodeError::Float { offset: pos }),
            31 => Err(DecodeError::Malformed { offset: pos }),
            _ => Err(DecodeError::Simple { offset: pos }),
        };
    }
    if major == 6 {
        return Err(DecodeError::Tag { offset: pos });
    }
    let (arg, mut next) = head_argument(bytes, pos, major, info)?;
    let remaining = (bytes.len() - next.min(bytes.len())) as u64;
    match major {
        0 | 1 => Ok(next),
        2 | 3 => {
            if arg > remaining {
                return Err(DecodeError::Truncated { offset: pos });
            }
            Ok(next + arg as usize)
        }
        4 | 5 => {
            let per_entry = if major == 4 { 1 } else { 2 };
            if arg.saturating_mul(per_entry) > remaining {
                return Err(DecodeError::Truncated { offset: pos });
            }
            if depth >= MAX_DEPTH {
                return Err(DecodeError::TooDeep { offset: pos, max: MAX_DEPTH });
            }
            let mut previous_key: Option<(usize, usize)> = None;
            for _ in 0..arg {
                if major == 4 {
                    next = scan(bytes, next, depth + 1)?;
                    continue;
                }
                let key_start = next;
                let key_end = scan(bytes, key_start, depth + 1)?;
                if let Some((prev_start, prev_end)) = previous_key {
                    // Bytewise order of the encoded keys (RFC 8949 §4.2.1).
                    let prev = bytes.get(prev_start..prev_end);
                    let this = bytes.get(key_start..key_end);
                    match this.cmp(&prev) {
                        std::cmp::Ordering::Less => {
                            return Err(DecodeError::KeyOrder { offset: key_start });
                        }
                        std::cmp::Ordering::Equal => {
                            return Err(DecodeError::DuplicateKey { offset: key_start });
                        }
                        std::cmp::Ordering::Greater => {}
                    }
                }
                previous_key = Some((key_start, key_end));
                next = scan(bytes, key_end, depth + 1)?;
            }
            Ok(next)
        }
        _ => Err(DecodeError::Malformed { offset: pos }),
    }
}

/// A borrowed byte string that encodes as a CBOR byte string (not an array of integers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBytes<'a>(pub &'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for RawBytes<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = RawBytes<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a borrowed byte string")
            }
            fn visit_borrowed_bytes<E: serde::de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(RawBytes(v))
            }
        }
        deserializer.deserialize_bytes(V(std::marker::PhantomData))
    }
}

/// Strictly decodes a record that borrows from `bytes` (used for frames, whose entries
/// are borrowed byte strings). Same checks as [`decode`].
pub fn decode_borrowed<'a, T: serde::Deserialize<'a> + Serialize>(
    bytes: &'a [u8],
    max_bytes: usize,
) -> Result<T, DecodeError> {
    if bytes.len() > max_bytes {
        return Err(DecodeError::TooLarge { len: bytes.len(), max: max_bytes });
    }
    match strict::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(strict::Refused) => decode_checked(bytes),
    }
}

/// The reference path: the canonical walk, `serde_cbor`, then the re-encode backstop.
/// It decides every input the strict fast path does not vouch for, so every refusal and
/// its offset is this path's.
fn decode_checked<'a, T: serde::Deserialize<'a> + Serialize>(bytes: &'a [u8]) -> Result<T, DecodeError> {
    check_canonical(bytes)?;
    let value: T = serde_cbor::from_slice(bytes).map_err(classify)?;
    reencodes_to(&value, bytes)?;
    Ok(value)
}

/// The re-encode backstop: `value`'s canonical encoding must be `bytes`, byte for byte.
///
/// The canonical walk proves the CBOR profile, not that the schema maps the value back to
/// the same bytes: `serde` also accepts a struct's field named by an integer or a byte
/// string, a text field given as a byte string, an id given as text — each canonical
/// CBOR, each a second byte string for one value (the `integer_key`, `byte_string_key`,
/// `byte_string_for_text` and `ulid_text_for_id` negative vectors; only this check refuses
/// them). So it is never skipped; it is made cheaper instead: the re-encoding goes into a
/// per-thread scratch buffer that is reused (`with_scratch`, as [`record_digest`] does), so it
/// costs no allocation. The offset is the first differing byte, or the shorter length.
fn reencodes_to<T: Serialize>(value: &T, bytes: &[u8]) -> Result<(), DecodeError> {
    with_scratch(value, |again| {
        if again == bytes {
            Ok(())
        } else {
            let offset = again.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            Err(DecodeError::NonCanonical { offset })
        }
    })
}

/// The strict fast path alone: `None` where it does not vouch for `bytes` (and
/// [`decode_borrowed`] would ask the reference path). For tests that hold the fast path to
/// reading every canonical record itself.
#[doc(hidden)]
pub fn decode_strict_only<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    strict::from_slice(bytes).ok()
}

/// [`decode_borrowed`] with the backstop as it was first written — a fresh re-encoding,
/// then compared — kept so tests and fuzzers can hold the scratch-buffer backstop to it
/// (same verdict, same offset).
#[doc(hidden)]
pub fn decode_borrowed_reference<'a, T: serde::Deserialize<'a> + Serialize>(
    bytes: &'a [u8],
    max_bytes: usize,
) -> Result<T, DecodeError> {
    if bytes.len() > max_bytes {
        return Err(DecodeError::TooLarge { len: bytes.len(), max: max_bytes });
    }
    check_canonical(bytes)?;
    let value: T = serde_cbor::from_slice(bytes).map_err(classify)?;
    let again = encode(&value);
    if again != bytes {
        let offset = again.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        return Err(DecodeError::NonCanonical { offset });
    }
    Ok(value)
}
