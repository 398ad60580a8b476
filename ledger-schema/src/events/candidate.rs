//! Candidate generations: opened MUTABLE from a base digest, then frozen.

use serde::{Deserialize, Serialize};

use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerationOpened {
    /// The rejected parent generation (repair children only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Id>,
    /// The Repair record that opened this generation (repair children only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_id: Option<Id>,
    /// 1 for the first generation of a workflow; a repair child's is ≥ 2.
    pub sequence: u32,
    /// The bytes the generation starts from; a repair child's is its parent's frozen digest.
    pub base_digest: Digest,
    pub workflow_id: Id,
    pub generation_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerationFrozen {
    pub generation_id: Id,
    pub candidate_digest: Digest,
    pub change_set_digest: Digest,
}
