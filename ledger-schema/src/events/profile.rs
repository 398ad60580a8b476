//! Context profiles (seed 003): a source registry snapshot, and the configured profile's
//! revisions. Plain data; the rules (and the plan, a pure projection) live in the
//! runtime (`src/runtime/profile.rs`).
//!
//! Vocabulary values (`codex`, `manual`, `report-only`, ...) keep ECC's spelling: they are
//! what a user types on the command line.

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Digest;

/// Opaque bytes, encoded as a CBOR byte string (never an array of integers).
#[derive(Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Blob(pub Vec<u8>);

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.0.len())
    }
}

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Blob, D::Error> {
        struct BlobVisitor;
        impl<'de> Visitor<'de> for BlobVisitor {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Blob, E> {
                Ok(Blob(v))
            }
        }
        deserializer.deserialize_bytes(BlobVisitor)
    }
}

/// One file of a source's tree. `content` is present exactly when the bytes are stored in
/// the ledger (within the registry's storage bounds); otherwise the resource is recorded
/// by digest only and is not loadable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceResource {
    /// Relative to the skill's directory, `/`-separated (e.g. `SKILL.md`, `references/a.md`).
    pub path: String,
    /// Length of the file in bytes.
    pub bytes: u64,
    /// `Digest::of(SourceResource, file bytes)`.
    pub digest: Digest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Blob>,
    /// The file was executable in the source tree (an execute bit set): a generation
    /// writes its copy 0700, so a skill's own script still runs (outside review 56). Absent
    /// when false: every registry scanned before it keeps its bytes and digests.
    #[serde(default, skip_serializing_if = "is_false", deserialize_with = "true_only")]
    pub executable: bool,
}

/// `skip_serializing_if` for a flag absent when false.
pub fn is_false(b: &bool) -> bool {
    !*b
}

/// A flag absent when false is, when present, `true`: a written-out `false` is a second
/// encoding of the same value, which the canonical form forbids (outside review 62: it
/// passed `verify` and `replay` with a different entry hash).
fn true_only<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    if bool::deserialize(d)? {
        Ok(true)
    } else {
        Err(de::Error::custom("`executable: false` is not canonical: the key is absent when false"))
    }
}

/// One source (a skill) of the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrySource {
    /// `skill:<dir>`.
    pub id: String,
    pub name: String,
    /// Sorted by path, unique; `SKILL.md` among them.
    pub resources: Vec<SourceResource>,
    /// `disable-model-invocation: true`: loads only when named explicitly.
    pub manual_only: bool,
    /// Whitespace collapsed to single spaces, trimmed.
    pub description: String,
    /// Source ids, sorted, unique.
    pub dependencies: Vec<String>,
    /// Authority-bearing front-matter keys present (`allowed-tools`, `hooks`, ...), sorted.
    pub authority_keys: Vec<String>,
    /// `Digest::of(RegistrySourceContent, canonical [{path, bytes, digest}] of its resources)`.
    pub content_digest: Digest,
    /// The body holds a dynamic `` !`cmd` `` snippet.
    pub dynamic_content: bool,
    /// Resource paths (relative to the skill's directory), sorted, unique, each a resource.
    pub required_resources: Vec<String>,
}

/// How a profile's token budget applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum BudgetMode {
    /// Over budget refuses the plan (Lean).
    #[serde(rename = "blocking")]
    Blocking,
    /// Over budget is reported, never refused (Full).
    #[serde(rename = "report-only")]
    ReportOnly,
}

/// A context profile definition (`lean@1`, `full@1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileDefinition {
    /// `lean@1`, `full@1`.
    pub id: String,
    /// Eager source ids, sorted, unique (empty when `eager_all`).
    pub eager: Vec<String>,
    /// `"eager": "all"` (Full).
    pub eager_all: bool,
    /// Always eager, never excludable; sorted, unique.
    pub required: Vec<String>,
    pub budget_mode: BudgetMode,
    pub description: String,
    pub budget_tokens: u32,
}

/// A registry snapshot: everything a scan read, resource bytes included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registry {
    /// The scanner that read the tree (`closure-ledger-scan/1`).
    pub scanner: String,
    /// Sorted by id, unique.
    pub sources: Vec<RegistrySource>,
    /// Sorted by id, unique.
    pub profiles: Vec<ProfileDefinition>,
}

/// `sourceRegistryRecorded`: one scan of a source tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceRegistryRecorded {
    pub registry: Registry,
    /// The scanned tree's absolute path (seed 003's source-drift check: `profile status`,
    /// `set` and `select` scan it again and compare; outside review 114). Not part of the
    /// registry or its digest. Absent in snapshots scanned before it was recorded, which
    /// keep their bytes. (Fields in canonical key order: length, then bytes.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_root: Option<String>,
    /// `Digest::of(SourceRegistry, canonical registry)`: covers everything recorded.
    pub registry_digest: Digest,
}

/// The provider a generation is laid out for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Codex,
    Claude,
}

/// Task-selection mode (issue #15 routes with it; the plan binds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum SelectionMode {
    Manual,
    Suggest,
    Auto,
}

/// What a user chose: the inputs of a plan besides the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileSelection {
    pub mode: SelectionMode,
    pub target: Target,
    /// Source ids, sorted, unique.
    pub exclude: Vec<String>,
    /// Source ids, sorted, unique.
    pub include: Vec<String>,
    /// `lean@1` or `full@1`.
    pub profile: String,
}

/// What a profile revision did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum RevisionAction {
    /// `profile set`: a new plan (and generation) over the current registry.
    Set,
    /// `profile mode`: the same plan with another selection mode.
    Mode,
    /// `profile rollback`: back to the revision before the current one.
    Rollback,
}

/// `profileRevisionRecorded`: the configured profile's next store revision. The commit
/// point of a generation transaction (docs/profiles.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileRevisionRecorded {
    pub action: RevisionAction,
    /// Strictly +1 (the first is 1; 0 = unconfigured).
    pub revision: u32,
    pub selection: ProfileSelection,
    /// The absolute state root the generation is materialised under.
    pub state_root: String,
    /// The plan's digest, re-derived by `apply` from the state.
    pub plan_digest: Digest,
    /// For a rollback: the revision whose configuration it returns to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_to: Option<u32>,
    pub registry_digest: Digest,
    pub generation_digest: Digest,
}

/// What a registry source's `contentDigest` covers: each resource without its bytes.
#[derive(Serialize)]
struct ResourceRef<'a> {
    path: &'a str,
    bytes: u64,
    digest: Digest,
    #[serde(skip_serializing_if = "is_false")]
    executable: bool,
}

impl SourceResource {
    /// `Digest::of(SourceResource, bytes)`: the digest a resource's file must have.
    pub fn digest_of(bytes: &[u8]) -> Digest {
        Digest::of(crate::DigestKind::SourceResource, bytes)
    }
}

impl RegistrySource {
    /// The digest `content_digest` must hold: the canonical list of `{path, bytes, digest}`
    /// of its resources, in their (sorted) order.
    pub fn computed_content_digest(&self) -> Digest {
        let refs: Vec<ResourceRef<'_>> = self
            .resources
            .iter()
            .map(|r| ResourceRef {
                path: &r.path,
                bytes: r.bytes,
                digest: r.digest,
                executable: r.executable,
            })
            .collect();
        crate::codec::record_digest(crate::DigestKind::RegistrySource, &refs).0
    }
}

impl Registry {
    /// The digest `registryDigest` must hold: the whole canonical registry, bytes included.
    pub fn digest(&self) -> Digest {
        crate::codec::record_digest(crate::DigestKind::SourceRegistry, self).0
    }
}

impl ProfileDefinition {
    /// A profile's digest (a plan's `profileDigest`).
    pub fn digest(&self) -> Digest {
        crate::codec::record_digest(crate::DigestKind::ContextProfile, self).0
    }

    /// `lean` for `lean@1`.
    pub fn name(&self) -> &str {
        self.id.split('@').next().unwrap_or(&self.id)
    }
}
