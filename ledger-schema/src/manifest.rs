//! The Context Manifest: the durable, semantic record of what one Attempt's worker was
//! given. Its digest (`DigestKind::Manifest` over its canonical bytes) excludes the record
//! envelope (ids and times of the entry holding it) but covers every binding.

use serde::{Deserialize, Serialize};

use crate::types::{AuthorityClass, Binding, Phase};
use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextManifest {
    /// The AcceptanceCriticalVerificationPlan pair (protected profiles only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub phase: Phase,
    pub goal_id: Id,
    pub policy: Binding,
    pub entries: Vec<ManifestEntry>,
    pub profile: Binding,
    pub attempt_id: Id,
    pub workflow_id: Id,
    /// The exact active MUTABLE Candidate generation (IMPLEMENT only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_id: Option<Id>,
    pub goal_revision: u32,
    pub package_digest: Digest,
    /// Manifest/package schema version: grows with what is present (plain, repair,
    /// protected plan).
    pub schema_version: u16,
    /// Digest of the prior-attempt feedback projection (repair contexts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_digest: Option<Digest>,
    /// The base digest of that generation (IMPLEMENT only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_digest: Option<Digest>,
    pub compiler_version: String,
    pub workflow_version: u32,
    /// The `receiptDigest` of the task selection whose loaded sources the package carries
    /// (compiler/3 and later; absent when the Attempt names none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_receipt: Option<Digest>,
    pub omission_decisions: Vec<OmissionDecision>,
    pub capability_grant_digest: Digest,
    pub response_contract_digest: Digest,
}

/// One source rendered into the package, with its authority class.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestEntry {
    pub kind: String,
    pub source_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_digest: Option<Digest>,
    pub authority_class: AuthorityClass,
    pub rendered_digest: Digest,
    pub source_revision: u64,
}

/// A potentially relevant source deliberately left out, and the rule that chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OmissionDecision {
    pub rule: String,
    pub reason: String,
    pub source_ref: String,
}
