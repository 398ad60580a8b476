//! The fast path of [`super::decode_borrowed`]: a `serde` deserializer that reads the
//! canonical encoding of a record and nothing else, in one pass over the bytes.
//!
//! It accepts exactly what [`super::writer`] writes for the value it returns:
//! - every head in shortest form with a definite length; no tag, no float, no `null`, no
//!   simple value but `false` and `true`;
//! - each item read by the method the schema type asks for, so a text field comes only
//!   from a text string, a byte field (digest, id, blob) only from a byte string, an
//!   integer only from an integer, a struct field only by its name as text;
//! - every map's keys in strictly increasing bytewise order of their encodings (RFC 8949
//!   §4.2.1), which also refuses a duplicate;
//! - a newtype variant only as a one-key map, a unit variant only as its name;
//! - the whole input, with nothing after the item.
//!
//! `null` is refused even where a schema type could take it: every optional field of the
//! catalog is skipped when absent (`skip_serializing_if`), so its canonical form has no
//! `null` (a type that did write `null` would only be slower: the reference path reads it).
//! A field skipped when *empty* (`Vec::is_empty`) is the one way this reader could return a
//! value that re-encodes shorter, so such a field must refuse an empty value itself (the
//! package's `selectedSkills` does: `present_list`). `decode_entry`'s fuzz property,
//! `key_order.rs` and `compiler.rs::a_package_has_one_encoding` hold every accepted input to
//! re-encode to itself.
//!
//! Anything else is [`Refused`], without a reason: the caller then runs the reference path
//! (the canonical walk, `serde_cbor`, the re-encode backstop), which gives the verdict and
//! its offset. So a refusal here never changes an answer; it only costs time.

use std::fmt;

use serde::de::value::BorrowedBytesDeserializer;
use serde::de::{self, DeserializeSeed, Visitor};

use super::MAX_DEPTH;

/// The fast path does not vouch for the input (the reference path decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Refused;

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read by the strict fast path")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: fmt::Display>(_message: T) -> Refused {
        Refused
    }
}

type Result<T> = std::result::Result<T, Refused>;

/// Decodes the one canonical item that is all of `bytes`.
pub(super) fn from_slice<'de, T: de::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T> {
    let mut reader = Strict { bytes, pos: 0, depth: 0 };
    let value = T::deserialize(&mut reader)?;
    if reader.pos == bytes.len() { Ok(value) } else { Err(Refused) }
}

struct Strict<'de> {
    bytes: &'de [u8],
    pos: usize,
    depth: u32,
}

const FALSE: u8 = 0xf4;
const TRUE: u8 = 0xf5;

impl<'de> Strict<'de> {
    fn peek(&self) -> Result<u8> {
        self.bytes.get(self.pos).copied().ok_or(Refused)
    }

    /// Reads a head of `major` type and returns its argument, in shortest form only.
    fn head(&mut self, major: u8) -> Result<u64> {
        let initial = self.peek()?;
        if initial >> 5 != major || major == 7 {
            return Err(Refused);
        }
        let (arg, next) =
            super::head_argument(self.bytes, self.pos, major, initial & 0x1f).map_err(|_| Refused)?;
        self.pos = next;
        Ok(arg)
    }

    /// The next `len` bytes, checked against what remains before anything is trusted.
    fn take(&mut self, len: u64) -> Result<&'de [u8]> {
        let len = usize::try_from(len).map_err(|_| Refused)?;
        let end = self.pos.checked_add(len).ok_or(Refused)?;
        let taken = self.bytes.get(self.pos..end).ok_or(Refused)?;
        self.pos = end;
        Ok(taken)
    }

    fn text(&mut self) -> Result<&'de str> {
        let len = self.head(3)?;
        std::str::from_utf8(self.take(len)?).map_err(|_| Refused)
    }

    /// A field or variant name: a text string, handed over as its bytes. serde's derived
    /// identifiers match them against their names, so no UTF-8 check is needed: only bytes
    /// equal to a (valid UTF-8) name are accepted, anything else is an unknown name.
    fn name(&mut self) -> Result<&'de [u8]> {
        let len = self.head(3)?;
        self.take(len)
    }

    fn byte_string(&mut self) -> Result<&'de [u8]> {
        let len = self.head(2)?;
        self.take(len)
    }

    /// The element count of an array or map, bounded by the bytes that remain (each
    /// element is at least one byte) before a visitor sizes anything by it.
    fn count(&mut self, major: u8) -> Result<u64> {
        let count = self.head(major)?;
        let remaining = (self.bytes.len() - self.pos) as u64;
        let per_element = if major == 5 { 2 } else { 1 };
        if count.saturating_mul(per_element) > remaining { Err(Refused) } else { Ok(count) }
    }

    fn integer(&mut self) -> Result<i64> {
        if self.peek()? >> 5 == 1 {
            let arg = i64::try_from(self.head(1)?).map_err(|_| Refused)?;
            Ok(-1 - arg)
        } else {
            i64::try_from(self.head(0)?).map_err(|_| Refused)
        }
    }

    /// Runs `f` one nesting level deeper, bounded by [`MAX_DEPTH`].
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_DEPTH {
            return Err(Refused);
        }
        self.depth += 1;
        let value = f(self)?;
        self.depth -= 1;
        Ok(value)
    }

    fn seq<V: Visitor<'de>>(&mut self, expected: Option<usize>, visitor: V) -> Result<V::Value> {
        let left = self.count(4)?;
        if expected.is_some_and(|n| n as u64 != left) {
            return Err(Refused);
        }
        self.nested(|de| {
            let mut access = Elements { de, left };
            let value = visitor.visit_seq(&mut access)?;
            if access.left == 0 { Ok(value) } else { Err(Refused) }
        })
    }

    fn map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let left = self.count(5)?;
        self.nested(|de| {
            let mut access = Entries { de, left, previous_key: None };
            let value = visitor.visit_map(&mut access)?;
            if access.left == 0 { Ok(value) } else { Err(Refused) }
        })
    }
}

/// An array's elements.
struct Elements<'a, 'de> {
    de: &'a mut Strict<'de>,
    left: u64,
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok()
    }
}

/// A map's entries (a struct's fields), each key's encoding above the previous one's.
struct Entries<'a, 'de> {
    de: &'a mut Strict<'de>,
    left: u64,
    previous_key: Option<&'de [u8]>,
}

impl<'de> de::MapAccess<'de> for Entries<'_, 'de> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let start = self.de.pos;
        let key = seed.deserialize(&mut *self.de)?;
        let encoded = self.de.bytes.get(start..self.de.pos).ok_or(Refused)?;
        if self.previous_key.is_some_and(|previous| encoded <= previous) {
            return Err(Refused);
        }
        self.previous_key = Some(encoded);
        Ok(Some(key))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.de)
    }

    fn size_hint(&self) -> Option<usize> {
        usize::try_from(self.left).ok()
    }
}

/// An externally tagged variant: a unit variant's name, or a one-key map `{name: value}`.
struct Variant<'a, 'de> {
    de: &'a mut Strict<'de>,
    unit: bool,
}

impl<'a, 'de> de::EnumAccess<'de> for Variant<'a, 'de> {
    type Error = Refused;
    type Variant = Variant<'a, 'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Variant<'a, 'de>)> {
        let name = self.de.name()?;
        let variant = seed.deserialize(BorrowedBytesDeserializer::<Refused>::new(name))?;
        Ok((variant, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Refused;

    fn unit_variant(self) -> Result<()> {
        if self.unit { Ok(()) } else { Err(Refused) }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        if self.unit {
            return Err(Refused);
        }
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        if self.unit {
            return Err(Refused);
        }
        self.de.seq(Some(len), visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        if self.unit {
            return Err(Refused);
        }
        self.de.map(visitor)
    }
}

impl<'de> de::Deserializer<'de> for &mut Strict<'de> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek()? {
            FALSE | TRUE => self.deserialize_bool(visitor),
            initial => match initial >> 5 {
                0 => visitor.visit_u64(self.head(0)?),
                1 => visitor.visit_i64(self.integer()?),
                2 => visitor.visit_borrowed_bytes(self.byte_string()?),
                3 => visitor.visit_borrowed_str(self.text()?),
                4 => self.seq(None, visitor),
                5 => self.map(visitor),
                _ => Err(Refused),
            },
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let value = match self.peek()? {
            FALSE => false,
            TRUE => true,
            _ => return Err(Refused),
        };
        self.pos += 1;
        visitor.visit_bool(value)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_i64(self.integer()?)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_i64(self.integer()?)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_i64(self.integer()?)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_i64(self.integer()?)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_u64(self.head(0)?)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_u64(self.head(0)?)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_u64(self.head(0)?)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_u64(self.head(0)?)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_char<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_str(self.text()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_str(self.text()?)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_bytes(self.byte_string()?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_bytes(self.byte_string()?)
    }

    /// A present field is `Some`; `null` is refused (absent fields are skipped, module doc).
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.peek()? == 0xf6 { Err(Refused) } else { visitor.visit_some(self) }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _name: &'static str, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.seq(None, visitor)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        self.seq(Some(len), visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.seq(Some(len), visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.map(visitor)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        if self.peek()? >> 5 == 3 {
            return visitor.visit_enum(Variant { de: self, unit: true });
        }
        if self.count(5)? != 1 {
            return Err(Refused);
        }
        self.nested(|de| visitor.visit_enum(Variant { de, unit: false }))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_borrowed_bytes(self.name()?)
    }

    /// Unknown fields are refused here; the reference path names them.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn is_human_readable(&self) -> bool {
        false
    }
}
