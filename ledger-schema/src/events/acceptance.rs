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
    /// The workflow's AcceptanceCriticalVerificationPlan pair (protected profiles only):
    /// present exactly when `profile` is and the workflow has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub goal_id: Id,
    pub policy: Binding,
    /// The workflow's Execution Profile: every decision since catalog 1's additive change of
    /// 2026-12-05 binds it (DESIGN §5: a decision digest covers "policy and profile digests
    /// and the plan pair"); absent in decisions recorded before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Binding>,
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
