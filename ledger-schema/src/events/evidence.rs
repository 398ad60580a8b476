//! Evidence: the result of one check, for one exact Candidate generation.

use serde::{Deserialize, Serialize};

use crate::types::{CheckResult, Eligibility};
use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvidenceRecorded {
    pub detail: String,
    pub result: CheckResult,
    pub evidence_id: Id,
    pub workflow_id: Id,
    pub check_spec_id: Id,
    pub generation_id: Id,
    pub obligation_id: Id,
    /// The frozen digest of that generation.
    pub candidate_digest: Digest,
    pub check_spec_digest: Digest,
    pub eligibility_state: Eligibility,
    pub eligibility_version: u32,
}
