//! BLAKE3 digests and the one place that owns every `derive_key` context string.
//!
//! Every digest kind hashes under its own context, so a digest of one kind can never stand
//! in for another (a package digest is not a manifest digest, even over the same bytes).

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

mod memo;

/// A 32-byte BLAKE3 digest; printed and parsed as `b3:` + 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Digest(pub [u8; 32]);

/// What a digest is a digest *of*. Each kind owns one `derive_key` context string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DigestKind {
    /// A sealed ledger entry (the chain link).
    Entry,
    /// A journal/sled frame (reserved: frames are not hashed in format v1).
    Frame,
    /// A Context Package's canonical bytes (the dispatch payload).
    Package,
    /// A Context Manifest's semantic content.
    Manifest,
    /// A Policy Bundle's canonical content.
    Policy,
    /// An Execution Profile's canonical content.
    Profile,
    /// A set of Evidence records bound by an Acceptance decision.
    EvidenceSet,
    /// One Evidence record.
    Evidence,
    /// An Acceptance decision (excluding its envelope).
    Decision,
    /// An Acceptance Input Manifest.
    InputManifest,
    /// A Repair record.
    Repair,
    /// The bounded prior-attempt feedback projection.
    Feedback,
    /// A Worker event's canonical payload.
    WorkerPayload,
    /// A capability grant.
    CapabilityGrant,
    /// A response contract.
    ResponseContract,
    /// Rendered content of one manifest entry.
    Rendered,
    /// Source content (Goal revision, Fact, project source, ...).
    Source,
    /// The canonical encoding of the whole runtime projection.
    State,
    /// A checkpoint file's identity.
    Checkpoint,
    /// A source registry snapshot (seed 003).
    SourceRegistry,
    /// The bytes of one source resource (a file of a skill's tree).
    SourceResource,
    /// One registry source's content: its resources' `{path, bytes, digest}`.
    RegistrySource,
    /// A context profile definition (`lean@1`, `full@1`).
    ContextProfile,
    /// A context profile plan (a projection of the registry and a selection).
    ProfilePlan,
    /// A materialised generation's manifest.
    ProfileGeneration,
    /// A task's query text (a selection binds its digest, never the prose; issue #15).
    TaskQuery,
    /// The routable sources' names and descriptions (a selection's triggers).
    SelectionTriggers,
    /// Everything that invalidates reuse of a selection.
    SelectionBinding,
    /// A selection decision (binding, decision, candidates, explicit and selected ids).
    Selection,
    /// A selection receipt (without its own digest).
    SelectionReceipt,
}

impl DigestKind {
    /// The BLAKE3 `derive_key` context string of this kind. Never change one: every
    /// recorded digest of that kind depends on it.
    pub const fn context(self) -> &'static str {
        match self {
            DigestKind::Entry => "closure-ledger v1 entry",
            DigestKind::Frame => "closure-ledger v1 frame",
            DigestKind::Package => "closure-ledger v1 context package",
            DigestKind::Manifest => "closure-ledger v1 context manifest",
            DigestKind::Policy => "closure-ledger v1 policy bundle",
            DigestKind::Profile => "closure-ledger v1 execution profile",
            DigestKind::EvidenceSet => "closure-ledger v1 evidence set",
            DigestKind::Evidence => "closure-ledger v1 evidence record",
            DigestKind::Decision => "closure-ledger v1 acceptance decision",
            DigestKind::InputManifest => "closure-ledger v1 acceptance input manifest",
            DigestKind::Repair => "closure-ledger v1 repair record",
            DigestKind::Feedback => "closure-ledger v1 prior attempt feedback",
            DigestKind::WorkerPayload => "closure-ledger v1 worker payload",
            DigestKind::CapabilityGrant => "closure-ledger v1 capability grant",
            DigestKind::ResponseContract => "closure-ledger v1 response contract",
            DigestKind::Rendered => "closure-ledger v1 rendered entry",
            DigestKind::Source => "closure-ledger v1 source",
            DigestKind::State => "closure-ledger v1 state",
            DigestKind::Checkpoint => "closure-ledger v1 checkpoint",
            DigestKind::SourceRegistry => "closure-ledger v1 source registry",
            DigestKind::SourceResource => "closure-ledger v1 source resource",
            DigestKind::RegistrySource => "closure-ledger v1 registry source",
            DigestKind::ContextProfile => "closure-ledger v1 context profile",
            DigestKind::ProfilePlan => "closure-ledger v1 profile plan",
            DigestKind::ProfileGeneration => "closure-ledger v1 profile generation",
            DigestKind::TaskQuery => "closure-ledger v1 task query",
            DigestKind::SelectionTriggers => "closure-ledger v1 selection triggers",
            DigestKind::SelectionBinding => "closure-ledger v1 selection binding",
            DigestKind::Selection => "closure-ledger v1 selection",
            DigestKind::SelectionReceipt => "closure-ledger v1 selection receipt",
        }
    }

    /// A hasher in `derive_key` mode for this kind, before any input. Deriving the context
    /// key costs a BLAKE3 compression of its own; it is done once per kind per process and
    /// the prepared hasher cloned, which gives exactly `new_derive_key(context)`.
    pub fn hasher(self) -> blake3::Hasher {
        static PREPARED: std::sync::OnceLock<[blake3::Hasher; 30]> = std::sync::OnceLock::new();
        let prepared =
            PREPARED.get_or_init(|| DigestKind::ALL.map(|k| blake3::Hasher::new_derive_key(k.context())));
        // `ALL` lists the kinds in declaration order, so a kind's discriminant is its index.
        match prepared.get(self as usize) {
            Some(hasher) => hasher.clone(),
            None => blake3::Hasher::new_derive_key(self.context()),
        }
    }

    /// Every kind, for tests that check the context strings are distinct.
    pub const ALL: [DigestKind; 30] = [
        DigestKind::Entry,
        DigestKind::Frame,
        DigestKind::Package,
        DigestKind::Manifest,
        DigestKind::Policy,
        DigestKind::Profile,
        DigestKind::EvidenceSet,
        DigestKind::Evidence,
        DigestKind::Decision,
        DigestKind::InputManifest,
        DigestKind::Repair,
        DigestKind::Feedback,
        DigestKind::WorkerPayload,
        DigestKind::CapabilityGrant,
        DigestKind::ResponseContract,
        DigestKind::Rendered,
        DigestKind::Source,
        DigestKind::State,
        DigestKind::Checkpoint,
        DigestKind::SourceRegistry,
        DigestKind::SourceResource,
        DigestKind::RegistrySource,
        DigestKind::ContextProfile,
        DigestKind::ProfilePlan,
        DigestKind::ProfileGeneration,
        DigestKind::TaskQuery,
        DigestKind::SelectionTriggers,
        DigestKind::SelectionBinding,
        DigestKind::Selection,
        DigestKind::SelectionReceipt,
    ];
}

/// Two digests that should have been equal were not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("digest mismatch: expected {expected}, found {found}")]
pub struct DigestMismatch {
    pub expected: Digest,
    pub found: Digest,
}

impl Digest {
    /// The all-zero digest: `prev` of the genesis entry.
    pub const ZERO: Digest = Digest([0; 32]);

    /// Hash `bytes` under the context of `kind`.
    ///
    /// Each thread keeps one prepared hasher per kind and [`blake3::Hasher::reset`]s it
    /// after use (which restores exactly its fresh `derive_key` state): a `Hasher` is about
    /// 2 KB, and cloning and moving a fresh one for every digest cost more than hashing a
    /// short record.
    pub fn of(kind: DigestKind, bytes: &[u8]) -> Digest {
        thread_local! {
            static HASHERS: std::cell::RefCell<Vec<Option<blake3::Hasher>>> =
                const { std::cell::RefCell::new(Vec::new()) };
        }
        let once = |hasher: &mut blake3::Hasher| {
            hasher.update(bytes);
            let digest = Digest(*hasher.finalize().as_bytes());
            hasher.reset();
            digest
        };
        let reused = HASHERS.try_with(|cell| {
            let mut slots = cell.try_borrow_mut().ok()?;
            if slots.is_empty() {
                slots.resize_with(DigestKind::ALL.len(), || None);
            }
            let slot = slots.get_mut(kind as usize)?;
            Some(once(slot.get_or_insert_with(|| kind.hasher())))
        });
        match reused {
            Ok(Some(digest)) => digest,
            // Thread-local storage torn down, or a kind without a slot.
            _ => once(&mut kind.hasher()),
        }
    }

    /// [`Digest::of`] for bytes the caller expects to hash again soon: a compile renders
    /// mostly what the previous one rendered (goal, policy, profile, facts, decisions,
    /// evidence). Each thread keeps a bounded memo (4 MiB, 4,096 inputs of at most 64 KiB)
    /// keyed by the kind and the whole bytes — a hit compares every byte — so the answer
    /// is always exactly `Digest::of(kind, bytes)`.
    pub fn of_repeated(kind: DigestKind, bytes: &[u8]) -> Digest {
        if bytes.len() > memo::MAX_INPUT {
            return Digest::of(kind, bytes);
        }
        memo::of(kind, bytes)
    }

    /// `Digest::of(kind, bytes)`, without hashing when `bytes` are exactly the input of
    /// this thread's previous `of_recent` call (a one-slot memo, compared byte for byte):
    /// admission hashes a Worker payload when it decides the entry and again when `apply`
    /// checks the entry's `payloadDigest`, one right after the other. An input that is new
    /// costs a copy into the slot.
    pub fn of_recent(kind: DigestKind, bytes: &[u8]) -> Digest {
        thread_local! {
            static LAST: std::cell::RefCell<Option<(DigestKind, Vec<u8>, Digest)>> =
                const { std::cell::RefCell::new(None) };
        }
        if bytes.len() > memo::MAX_INPUT {
            return Digest::of(kind, bytes);
        }
        let recent = LAST.try_with(|cell| {
            let mut last = cell.try_borrow_mut().ok()?;
            if let Some((k, input, digest)) = last.as_ref()
                && *k == kind
                && input.as_slice() == bytes
            {
                return Some(*digest);
            }
            let digest = Digest::of(kind, bytes);
            match last.as_mut() {
                Some((k, input, d)) => {
                    *k = kind;
                    input.clear();
                    input.extend_from_slice(bytes);
                    *d = digest;
                }
                None => *last = Some((kind, bytes.to_vec(), digest)),
            }
            Some(digest)
        });
        recent.ok().flatten().unwrap_or_else(|| Digest::of(kind, bytes))
    }

    /// `Ok` when `self` equals `expected`; otherwise the typed mismatch carrying both.
    pub fn check(self, expected: Digest) -> Result<(), DigestMismatch> {
        if self == expected { Ok(()) } else { Err(DigestMismatch { expected, found: self }) }
    }
}

impl Digest {
    /// The digest's text, `b3:` and 64 lowercase hex digits (ASCII).
    fn text(&self) -> [u8; 67] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 67];
        let (prefix, hex) = text.split_at_mut(3);
        prefix.copy_from_slice(b"b3:");
        for (pair, byte) in hex.chunks_exact_mut(2).zip(self.0) {
            let digit = |nibble: u8| HEX.get(usize::from(nibble)).copied().unwrap_or(b'0');
            pair.copy_from_slice(&[digit(byte >> 4), digit(byte & 0xf)]);
        }
        text
    }

    /// Appends the digest's text (exactly what `Display` writes) to `out`, without going
    /// through a formatter.
    pub fn push_to(&self, out: &mut String) {
        let text = self.text();
        // The text is ASCII by construction; the fallback is never taken.
        out.push_str(std::str::from_utf8(&text).unwrap_or_default());
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.text();
        f.pad(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A string that is not `b3:` followed by 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a digest (want b3: and 64 lowercase hex digits): \"{0}\"")]
pub struct ParseDigestError(pub String);

impl FromStr for Digest {
    type Err = ParseDigestError;

    fn from_str(text: &str) -> Result<Digest, ParseDigestError> {
        let fail = || ParseDigestError(text.chars().take(80).collect());
        let hex = text.strip_prefix("b3:").ok_or_else(fail)?;
        if hex.len() != 64 {
            return Err(fail());
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            let [hi, lo] = pair else { return Err(fail()) };
            *byte = (nibble(*hi).ok_or_else(fail)? << 4) | nibble(*lo).ok_or_else(fail)?;
        }
        Ok(Digest(out))
    }
}

/// Lowercase hex only: uppercase would give one digest two spellings.
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// In CBOR a digest is a 32-byte byte string; in JSON (human-readable) its `b3:` text.
impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            serializer.collect_str(self)
        } else {
            serializer.serialize_bytes(&self.0)
        }
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Digest, D::Error> {
        struct DigestVisitor;
        impl Visitor<'_> for DigestVisitor {
            type Value = Digest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a 32-byte digest")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Digest, E> {
                <[u8; 32]>::try_from(v).map(Digest).map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Digest, E> {
                v.parse().map_err(E::custom)
            }
        }
        if deserializer.is_human_readable() {
            deserializer.deserialize_str(DigestVisitor)
        } else {
            deserializer.deserialize_bytes(DigestVisitor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-slot memo answers exactly `Digest::of`: for the same input twice, the same
    /// bytes under another kind, an input one byte apart (first, middle, last), a prefix,
    /// the empty input, and one over the memo's bound.
    #[test]
    #[allow(clippy::indexing_slicing)] // tests may panic
    fn of_recent_is_of() {
        let base: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let mut inputs = vec![base.clone(), base.clone(), base[..299].to_vec(), Vec::new(), Vec::new()];
        for at in [0, 150, 299] {
            let mut v = base.clone();
            v[at] ^= 1;
            inputs.push(v.clone());
            inputs.push(v);
        }
        inputs.push(vec![9; memo::MAX_INPUT + 1]);
        inputs.push(vec![9; memo::MAX_INPUT + 1]);
        for bytes in &inputs {
            for kind in [DigestKind::WorkerPayload, DigestKind::Entry, DigestKind::WorkerPayload] {
                assert_eq!(
                    Digest::of_recent(kind, bytes),
                    Digest::of(kind, bytes),
                    "{kind:?}, {} bytes",
                    bytes.len()
                );
            }
        }
    }

    /// The text form is `b3:` and 64 lowercase hex digits — checked against a naive
    /// per-byte rendering — and parses back to the same digest; width flags still pad.
    #[test]
    fn display_is_b3_and_lowercase_hex() {
        for seed in [0u8, 1, 0x7f, 0xa5, 0xff] {
            let d = Digest(std::array::from_fn(|i| {
                seed.wrapping_mul(31).wrapping_add((i as u8).wrapping_mul(17))
            }));
            let naive: String = d.0.iter().map(|b| format!("{b:02x}")).collect();
            let text = d.to_string();
            assert_eq!(text, format!("b3:{naive}"));
            assert_eq!(text.parse::<Digest>(), Ok(d));
            assert_eq!(format!("{d:>70}"), format!("   {text}"));
        }
    }

    /// Every kind's prepared hasher is its own `derive_key` context: the digest equals
    /// `blake3::derive_key(context, bytes)` computed afresh (empty, short and multi-chunk
    /// inputs), and no two kinds share a prepared hasher.
    #[test]
    fn prepared_hashers_are_each_kinds_derive_key() {
        let long = vec![0xa5u8; 5000];
        for input in [&b""[..], b"x", &long] {
            let mut seen = std::collections::BTreeSet::new();
            for kind in DigestKind::ALL {
                let expected = blake3::derive_key(kind.context(), input);
                assert_eq!(Digest::of(kind, input).0, expected, "{kind:?}");
                assert!(seen.insert(expected), "{kind:?} shares a digest with another kind");
            }
        }
    }
}
