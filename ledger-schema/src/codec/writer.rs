//! A serde serializer that appends CBOR to a `Vec<u8>` directly: exactly the bytes
//! `serde_cbor` (0.11, default configuration: field names as keys, enums as maps) writes
//! for every value it supports, without its `io::Write` indirection.
//!
//! It supports what the canonical profile allows — integers, text, bytes, `false`/`true`,
//! `null`, arrays and maps of known length, structs, enums — and refuses the rest (floats,
//! sequences or maps of unknown length, integers beyond 64 bits) with [`Unsupported`],
//! after which [`super::encode_into`] encodes the value again with `serde_cbor` itself. So
//! the output is always `serde_cbor`'s (proved over arbitrary records by
//! `tests/it/codec.rs::fast_writer_matches_serde_cbor`).

use std::fmt;

use serde::ser::{self, Serialize};

/// A value this writer does not encode (`serde_cbor` does, in a form the canonical
/// profile refuses).
#[derive(Debug)]
pub(super) struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not supported by the fast CBOR writer")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Unsupported
    }
}

type Result<T = ()> = std::result::Result<T, Unsupported>;

/// Appends CBOR to `out`.
pub(super) struct Writer<'a> {
    pub(super) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    /// The head of a major type with argument `v`, in its shortest form (as
    /// `serde_cbor`'s `write_u64` … `write_u8` cascade writes it).
    #[inline]
    fn head(&mut self, major: u8, v: u64) {
        let m = major << 5;
        if v <= 0x17 {
            self.out.push(m | v as u8);
        } else if v <= 0xff {
            self.out.extend_from_slice(&[m | 24, v as u8]);
        } else if v <= 0xffff {
            let b = (v as u16).to_be_bytes();
            self.out.extend_from_slice(&[m | 25, b[0], b[1]]);
        } else if v <= 0xffff_ffff {
            let b = (v as u32).to_be_bytes();
            self.out.extend_from_slice(&[m | 26, b[0], b[1], b[2], b[3]]);
        } else {
            self.out.push(m | 27);
            self.out.extend_from_slice(&v.to_be_bytes());
        }
    }

    #[inline]
    fn text(&mut self, s: &str) {
        self.head(3, s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
    }

    #[inline]
    fn signed(&mut self, v: i64) {
        if v < 0 {
            // -(v + 1) as serde_cbor computes it: never overflows.
            self.head(1, !(v as u64));
        } else {
            self.head(0, v as u64);
        }
    }
}

impl<'a, 'b> ser::Serializer for &'a mut Writer<'b> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = &'a mut Writer<'b>;
    type SerializeTuple = &'a mut Writer<'b>;
    type SerializeTupleStruct = &'a mut Writer<'b>;
    type SerializeTupleVariant = &'a mut Writer<'b>;
    type SerializeMap = &'a mut Writer<'b>;
    type SerializeStruct = &'a mut Writer<'b>;
    type SerializeStructVariant = &'a mut Writer<'b>;

    fn serialize_bool(self, v: bool) -> Result {
        self.out.push(if v { 0xf5 } else { 0xf4 });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result {
        self.signed(i64::from(v));
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result {
        self.signed(i64::from(v));
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result {
        self.signed(i64::from(v));
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result {
        self.signed(v);
        Ok(())
    }
    fn serialize_i128(self, _v: i128) -> Result {
        Err(Unsupported)
    }
    fn serialize_u8(self, v: u8) -> Result {
        self.head(0, u64::from(v));
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result {
        self.head(0, u64::from(v));
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result {
        self.head(0, u64::from(v));
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result {
        self.head(0, v);
        Ok(())
    }
    fn serialize_u128(self, _v: u128) -> Result {
        Err(Unsupported)
    }
    fn serialize_f32(self, _v: f32) -> Result {
        Err(Unsupported)
    }
    fn serialize_f64(self, _v: f64) -> Result {
        Err(Unsupported)
    }
    fn serialize_char(self, v: char) -> Result {
        let mut buf = [0; 4];
        self.text(v.encode_utf8(&mut buf));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result {
        self.text(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result {
        self.head(2, v.len() as u64);
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result {
        self.out.push(0xf6);
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result {
        self.out.push(0xf6);
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result {
        self.out.push(0xf6);
        Ok(())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result {
        self.text(variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, value: &T) -> Result {
        // serde_cbor's tagged-value newtype (`serde_cbor::tags`) writes tags; no record
        // uses tags.
        if name == "\0cbor_tag" {
            return Err(Unsupported);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result {
        self.head(5, 1);
        self.text(variant);
        value.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq> {
        let len = len.ok_or(Unsupported)?;
        self.head(4, len as u64);
        Ok(self)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple> {
        self.head(4, len as u64);
        Ok(self)
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Self::SerializeTupleStruct> {
        self.head(4, len as u64);
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        self.head(5, 1);
        self.text(variant);
        self.head(4, len as u64);
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap> {
        let len = len.ok_or(Unsupported)?;
        self.head(5, len as u64);
        Ok(self)
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Self::SerializeStruct> {
        self.head(5, len as u64);
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant> {
        self.head(5, 1);
        self.text(variant);
        self.head(5, len as u64);
        Ok(self)
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The compound serializers whose elements are written one after another, each a plain
/// value (the head was written when the compound began).
macro_rules! elements {
    ($($compound:ident :: $method:ident),* $(,)?) => {$(
        impl ser::$compound for &mut Writer<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
                value.serialize(&mut **self)
            }
            fn end(self) -> Result {
                Ok(())
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
);

impl ser::SerializeMap for &mut Writer<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result {
        Ok(())
    }
}

/// The struct serializers: each present field is its name as text, then its value (a
/// skipped field writes nothing; the map head counted only present fields).
macro_rules! fields {
    ($($compound:ident),* $(,)?) => {$(
        impl ser::$compound for &mut Writer<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result {
                self.text(key);
                value.serialize(&mut **self)
            }
            fn skip_field(&mut self, _key: &'static str) -> Result {
                Ok(())
            }
            fn end(self) -> Result {
                Ok(())
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);
