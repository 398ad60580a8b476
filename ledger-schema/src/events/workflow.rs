//! Workflows: started bound to an exact Goal revision and authority, then advanced phase by
//! phase (each advance is workflow version + 1).

use serde::{Deserialize, Serialize};

use crate::Id;
use crate::types::{Binding, Phase};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowStarted {
    /// The AcceptanceCriticalVerificationPlan id/digest pair: present exactly when the
    /// profile is protected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub goal_id: Id,
    pub policy: Binding,
    pub profile: Binding,
    pub workflow_id: Id,
    pub goal_revision: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhaseAdvanced {
    pub phase: Phase,
    /// The workflow version after this advance: exactly the previous one + 1.
    pub version: u32,
    pub workflow_id: Id,
}

/// A supervisor's cancellation of a whole Workflow (catalog addition, issue #13): a closing
/// state distinct from ACCEPT and REJECT_TERMINAL, serialized on the workflow version like
/// dispatch. An Attempt still active ends cancelled with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkflowCancelled {
    pub reason: String,
    pub workflow_id: Id,
    /// The workflow's current version: a cancellation for another version is stale.
    pub workflow_version: u32,
}
