//! Identifiers: ULIDs produced outside the pure core and written into events.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A ULID. 16 bytes (big-endian) in CBOR, its 26-character Crockford text in JSON.
///
/// Any 128-bit value is a valid ULID, so decoding cannot produce an invalid id.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Id(pub u128);

impl Id {
    /// Wraps a ULID.
    pub fn from_ulid(ulid: ulid::Ulid) -> Id {
        Id(ulid.0)
    }

    /// The big-endian bytes, as stored.
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    /// Appends the id's 26-character text (exactly what `Display` writes) to `out`,
    /// without going through a formatter.
    pub fn push_to(self, out: &mut String) {
        let mut text = [0u8; ulid::ULID_LEN];
        out.push_str(ulid::Ulid(self.0).array_to_str(&mut text));
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [0u8; ulid::ULID_LEN];
        f.pad(ulid::Ulid(self.0).array_to_str(&mut text))
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Text that is not a 26-character ULID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a ULID: \"{0}\"")]
pub struct ParseIdError(pub String);

impl FromStr for Id {
    type Err = ParseIdError;

    /// Exact: the text must be the id's own 26-character form (case aside). A first
    /// character over `7` (more than 128 bits) is refused rather than wrapped into another
    /// id that could collide with a later one.
    fn from_str(text: &str) -> Result<Id, ParseIdError> {
        let refuse = || ParseIdError(text.chars().take(40).collect());
        let id = ulid::Ulid::from_string(text).map(Id::from_ulid).map_err(|_| refuse())?;
        if !id.to_string().eq_ignore_ascii_case(text) {
            return Err(refuse());
        }
        Ok(id)
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serializer.serialize_bytes(&self.to_bytes())
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 16-byte ULID")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Id, E> {
                <[u8; 16]>::try_from(v)
                    .map(|b| Id(u128::from_be_bytes(b)))
                    .map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                v.parse().map_err(E::custom)
            }
        }
        if deserializer.is_human_readable() {
            deserializer.deserialize_str(IdVisitor)
        } else {
            deserializer.deserialize_bytes(IdVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are exact: over 128 bits is refused, not wrapped (issue #13).
    #[test]
    fn out_of_range_ulid_is_refused() {
        assert!("8ZZZZZZZZZZZZZZZZZZZZZZZZZ".parse::<Id>().is_err());
        assert!("ZZZZZZZZZZZZZZZZZZZZZZZZZZ".parse::<Id>().is_err());
        let max = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ".parse::<Id>().map(|id| id.0);
        assert_eq!(max, Ok(u128::MAX));
        assert_eq!(
            "01jc0000000000000000000010".parse::<Id>().map(|id| id.to_string()),
            Ok("01JC0000000000000000000010".to_owned())
        );
    }

    /// An id displays as the `ulid` crate's own `to_string` (Crockford base32, 26 chars).
    #[test]
    fn display_matches_ulid() {
        for v in [0u128, 1, 42, u128::MAX, 0x0193_0000_0000_0000_0000_0000_0000_0001] {
            assert_eq!(Id(v).to_string(), ulid::Ulid(v).to_string());
            assert_eq!(Id(v).to_string().len(), 26);
        }
    }
}
