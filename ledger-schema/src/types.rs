//! Small closed vocabularies and records shared by several event families.

use serde::{Deserialize, Serialize};

use crate::{Digest, Id};

/// An exact identity: an id together with the digest of its canonical content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Binding {
    pub id: Id,
    pub digest: Digest,
}

/// Workflow phases, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    Discovery,
    Plan,
    Implement,
    EvidenceBuild,
    FinalVerify,
}

/// Closed authority classes of Context Manifest entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AuthorityClass {
    Goal,
    RuntimeDecision,
    Evidence,
    ConfirmedFact,
    HumanDecision,
    ProjectSource,
    NonAuthoritativeWorking,
    /// A task-selected source (seed 003: a skill's `SKILL.md` and its required resources)
    /// rendered by compiler/3: prompt-advisory project material that grants no tool, no
    /// capability and no authority.
    PromptAdvisory,
}

/// Input classes of the Context Compiler, in semantic priority order; each has a byte
/// budget in the Policy Bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum InputClass {
    /// Identity and non-negotiable invariants.
    Identity,
    /// Phase objective and capability grant.
    Phase,
    /// Goal criteria, scope, non-goals and preservation constraints.
    Goal,
    /// Open blockers and Human Decisions.
    BlockersDecisions,
    /// Confirmed facts, scenarios and verification obligations.
    FactsScenariosObligations,
    /// Project sources.
    ProjectMaterial,
    /// Optional, non-authoritative working context (prior-attempt feedback).
    Working,
}

/// The result kinds a worker may end an Attempt with (the phase's response contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResultKind {
    /// DISCOVERY and PLAN end in proposals.
    Proposals,
    /// IMPLEMENT ends in a completion request.
    CompletionRequest,
}

/// Acceptance verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Accept,
    RejectRepairable,
    RejectTerminal,
}

/// Outcome of one verification check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckResult {
    Pass,
    Fail,
    /// The runner failed or timed out: an engine error, not a repairable failure.
    Error,
}

/// Whether an Evidence record may be used by an Acceptance decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Eligibility {
    Eligible,
    Ineligible,
}

/// Thread choice of an Attempt's Worker Session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ThreadChoice {
    Fresh,
    Resume,
}

/// History compaction mode selected by an Execution Profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompactionMode {
    Disabled,
    Manual,
    Automatic,
}
