//! Goals: created at revision 1, then revised strictly +1, each revision in full.

use serde::{Deserialize, Serialize};

use crate::Id;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalCreated {
    pub goal_id: Id,
    pub content: GoalContent,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalRevised {
    pub goal_id: Id,
    pub content: GoalContent,
    /// The new revision: exactly the current one + 1.
    pub revision: u32,
}

/// The full content of one Goal revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GoalContent {
    pub scope: Vec<String>,
    pub non_goals: Vec<String>,
    pub objective: String,
    pub success_criteria: Vec<String>,
    pub preservation_constraints: Vec<String>,
}
