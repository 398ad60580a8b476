//! Authority installs: Policy Bundles and Execution Profiles. Each is installed once under
//! its id, with the digest of its canonical content.

use serde::{Deserialize, Serialize};

use crate::types::{CompactionMode, InputClass, Phase, ThreadChoice};
use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyBundleInstalled {
    pub bundle: PolicyBundle,
    /// `Digest::of(Policy, encode(bundle))`.
    pub digest: Digest,
    pub policy_id: Id,
}

/// Context budgets, feedback limits and per-phase policies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyBundle {
    /// One policy per phase, sorted by phase.
    pub phases: Vec<PhasePolicy>,
    /// One byte budget per input class, sorted by class.
    pub budgets: Vec<ClassBudget>,
    pub feedback: FeedbackLimits,
    pub invariants: Vec<String>,
    /// Largest canonical Worker event payload (the response contract's limit).
    pub max_event_bytes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClassBudget {
    pub class: InputClass,
    pub max_bytes: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackLimits {
    pub max_items: u16,
    pub max_item_bytes: u32,
    pub max_total_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhasePolicy {
    pub phase: Phase,
    pub optional: Vec<InputClass>,
    pub required: Vec<InputClass>,
    pub objective: String,
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionProfileInstalled {
    /// `Digest::of(Profile, encode(profile))`.
    pub digest: Digest,
    pub profile: ExecutionProfile,
    pub profile_id: Id,
}

/// Thread policy, compaction mode and whether the profile is acceptance-critical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecutionProfile {
    pub name: String,
    /// A protected profile requires the AcceptanceCriticalVerificationPlan pair.
    pub protected: bool,
    pub compaction: CompactionMode,
    /// Thread for a new repair generation.
    pub repair_thread: ThreadChoice,
    /// Thread for a new Attempt within a phase.
    pub attempt_thread: ThreadChoice,
}
