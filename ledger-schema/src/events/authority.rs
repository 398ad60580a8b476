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
    /// What an App Server may add to a Turn besides the Context Package, bound by exact
    /// identity and digest (seed 000, "M2 App Server input closure"); every dispatch claim
    /// then reports what the App Server loaded, and anything unbound blocks it. Absent: the
    /// profile binds none (and a claim reports none). (Fields in canonical key order.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_closure: Option<InputClosure>,
    /// Thread for a new repair generation.
    pub repair_thread: ThreadChoice,
    /// Thread for a new Attempt within a phase.
    pub attempt_thread: ThreadChoice,
}

/// An App Server's effective inputs beside the Context Package: instruction sources (such
/// as a source-bound `AGENTS.md`) and tool surfaces by name and digest, the permission
/// profile, the effective non-secret configuration and (where the host has them) the
/// managed requirements, each by digest. In a profile: what may be loaded; in a dispatch
/// claim: what the App Server reported it loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputClosure {
    /// Sorted by name, unique (at most 128). (Fields in canonical key order.)
    pub tools: Vec<BoundInput>,
    pub config_digest: Digest,
    pub permission_digest: Digest,
    /// Sorted by name, unique (at most 128).
    pub instruction_sources: Vec<BoundInput>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_requirements_digest: Option<Digest>,
}

/// One instruction source (its path) or tool surface (its name), with the digest of what
/// it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoundInput {
    pub name: String,
    pub digest: Digest,
}
