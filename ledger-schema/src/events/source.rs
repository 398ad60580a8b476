//! Durable sources the Context Compiler may select: Facts, Human Decisions, project
//! sources, scenarios, verification obligations and blockers.

use serde::{Deserialize, Serialize};

use crate::{Digest, Id};

/// A Fact enters as PROPOSED; it is never used as confirmed until a `FactConfirmed` for
/// the same revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FactProposed {
    pub fact_id: Id,
    pub goal_id: Id,
    pub revision: u32,
    pub statement: String,
    /// Where the statement came from (a worker event, a human, a tool run).
    pub provenance: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FactConfirmed {
    pub fact_id: Id,
    pub revision: u32,
    pub confirmed_by: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FactInvalidated {
    pub fact_id: Id,
    pub reason: String,
    pub revision: u32,
    /// Who withdrew it: required, a human principal, when the revision is CONFIRMED
    /// (absent in entries written before 2026-12-05's fourteenth session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalidated_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanDecisionRecorded {
    pub answer: String,
    pub goal_id: Id,
    pub question: String,
    pub decided_by: String,
    pub decision_id: Id,
    /// The decision on the same question this one replaces (outside review 74); absent for a
    /// first answer, or one superseding an answer made before a later goal revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSourceRecorded {
    pub path: String,
    /// `Digest::of(Source, content bytes)`.
    pub digest: Digest,
    pub goal_id: Id,
    /// Bounded content (the entry size limit bounds it).
    pub content: String,
    /// The project revision (e.g. a commit) the content was read at.
    pub revision: String,
    pub source_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioRecorded {
    pub title: String,
    pub goal_id: Id,
    pub scenario_id: Id,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObligationRecorded {
    pub goal_id: Id,
    pub check_spec_id: Id,
    pub description: String,
    pub obligation_id: Id,
    pub check_spec_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockerRaised {
    pub blocker_id: Id,
    pub workflow_id: Id,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockerResolved {
    pub blocker_id: Id,
    pub resolution: String,
}

/// A scenario recorded before the goal's current revision, retired by it: no longer a
/// requirement of the goal (an omission in every later context).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioRetired {
    pub reason: String,
    pub scenario_id: Id,
}

/// A project source withdrawn: its path is no longer in the project (deleted, or renamed —
/// the new path is recorded as a source of its own). Named by the path's current record;
/// no record of the path reaches a worker until the path is recorded again (outside review
/// 100).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSourceWithdrawn {
    pub reason: String,
    pub source_id: Id,
}

/// A Human Decision withdrawn by a human, with a reason: the decision standing on its
/// question, made in error (the wrong goal, a question that no longer applies). No
/// decision stands on that question until a human answers it again; the withdrawn one
/// reaches no worker (outside review 135 F1: a mistaken decision could only be replaced by
/// another answer, itself delivered as authority, for every later revision of the goal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanDecisionWithdrawn {
    pub reason: String,
    pub decision_id: Id,
    pub withdrawn_by: String,
}

/// An obligation recorded before the goal's current revision, retired by it: no ACCEPT
/// needs its evidence, and no Evidence is recorded for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObligationRetired {
    pub reason: String,
    pub obligation_id: Id,
}
