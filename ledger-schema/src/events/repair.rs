//! Repair records: from the exact current REJECT_REPAIRABLE decision to a repair child.

use serde::{Deserialize, Serialize};

use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepairRecorded {
    pub repair_id: Id,
    pub decision_id: Id,
    pub workflow_id: Id,
    /// `Digest::of(Repair, ...)` over the record without `repairDigest` (docs/format.md).
    pub repair_digest: Digest,
    pub decision_digest: Digest,
    pub child_generation_id: Id,
    pub evidence_set_digest: Digest,
    pub parent_generation_id: Id,
    pub input_manifest_digest: Digest,
    pub constraints_to_preserve: Vec<String>,
    pub parent_candidate_digest: Digest,
}
