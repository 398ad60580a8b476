//! Acceptance decisions, bound to an Acceptance Input Manifest and an Evidence Set digest.

use serde::{Deserialize, Serialize};

use crate::types::{Binding, Verdict};
use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptanceDecided {
    pub reasons: Vec<String>,
    pub verdict: Verdict,
    pub decision_id: Id,
    pub workflow_id: Id,
    pub generation_id: Id,
    pub input_manifest: AcceptanceInputManifest,
    /// Digest of the decision without its envelope (see docs/format.md).
    pub decision_digest: Digest,
    pub candidate_digest: Digest,
    /// `Digest::of(EvidenceSet, encode(input_manifest.evidence))`.
    pub evidence_set_digest: Digest,
    /// `Digest::of(InputManifest, encode(input_manifest))`.
    pub input_manifest_digest: Digest,
}

/// What the decision was made over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptanceInputManifest {
    pub goal_id: Id,
    pub policy: Binding,
    /// The Evidence Set, sorted by evidence id.
    pub evidence: Vec<EvidenceRef>,
    pub goal_revision: u32,
    pub workflow_version: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvidenceRef {
    pub evidence_id: Id,
    /// `Digest::of(Evidence, encode(record))`.
    pub record_digest: Digest,
}
