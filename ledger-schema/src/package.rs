//! The Context Package: the exact, canonical dispatch payload one worker receives for one
//! Attempt. Disposable (its digest is what the manifest binds); re-derivable from the
//! ledger by the compiler at any time.

use serde::{Deserialize, Serialize};

use crate::types::{Binding, CheckResult, Eligibility, Phase, ResultKind};
use crate::{Digest, Id};

/// Package schema versions grow with what is present.
pub const PACKAGE_SCHEMA_PLAIN: u16 = 1;
/// A repair context is present.
pub const PACKAGE_SCHEMA_REPAIR: u16 = 2;
/// The protected plan pair is present (with or without a repair context).
pub const PACKAGE_SCHEMA_PROTECTED: u16 = 3;
/// Feedback projection schema.
pub const FEEDBACK_SCHEMA: u16 = 1;
/// The closed Worker event schema a response must follow.
pub const WORKER_EVENT_SCHEMA: &str = "closure-ledger/worker-payload/v1";

/// A list that is omitted while empty is, when present, not empty: an empty one written out
/// is a second encoding of the same package. Refused here, by the type, because the codec's
/// strict fast path reads each value as its type asks and cannot know the field is skipped.
fn present_list<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    let list = Vec::<T>::deserialize(d)?;
    if list.is_empty() {
        return Err(serde::de::Error::invalid_length(0, &"a non-empty list (an empty one is omitted)"));
    }
    Ok(list)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextPackage {
    pub goal: PackageGoal,
    pub blockers: Vec<Blocker>,
    pub identity: PackageIdentity,
    /// Non-negotiable invariants of the policy.
    pub invariants: Vec<String>,
    pub policy_bundle: Binding,
    pub relevant_code: Vec<CodeExcerpt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair_context: Option<RepairContext>,
    pub schema_version: u16,
    pub selected_facts: Vec<SelectedFact>,
    pub phase_objective: String,
    /// The loaded sources of the task selection the Attempt names (compiler/3 and later):
    /// prompt-advisory material that grants no tool and no authority. Omitted while empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "present_list")]
    pub selected_skills: Vec<SelectedSkill>,
    pub capability_grant: CapabilityGrant,
    pub execution_profile: Binding,
    pub response_contract: ResponseContract,
    pub business_scenarios: Vec<Scenario>,
    pub selected_decisions: Vec<SelectedDecision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_attempt_feedback: Option<Feedback>,
    pub verification_obligations: Vec<Obligation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageIdentity {
    /// The AcceptanceCriticalVerificationPlan pair (protected profiles only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub phase: Phase,
    pub goal_id: Id,
    pub attempt_id: Id,
    pub workflow_id: Id,
    pub goal_revision: u32,
    pub workflow_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_base_digest: Option<Digest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_generation_id: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilityGrant {
    pub phase: Phase,
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PackageGoal {
    pub scope: Vec<String>,
    pub non_goals: Vec<String>,
    pub objective: String,
    pub success_criteria: Vec<String>,
    pub preservation_constraints: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectedFact {
    pub fact_id: Id,
    pub revision: u32,
    pub statement: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectedDecision {
    pub answer: String,
    pub question: String,
    pub decision_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub title: String,
    pub scenario_id: Id,
    pub description: String,
}

/// One loaded resource of a task-selected source: a skill's `SKILL.md` or a required
/// resource, its bytes as the registry recorded them (UTF-8 text), re-hashed against the
/// registry digest when compiled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectedSkill {
    /// The registry source id.
    pub id: String,
    /// The resource path inside the source (`SKILL.md`, `references/…`).
    pub path: String,
    /// The registry's resource digest.
    pub digest: Digest,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CodeExcerpt {
    pub path: String,
    pub digest: Digest,
    pub content: String,
    pub revision: String,
    pub source_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Obligation {
    pub check_spec_id: Id,
    pub description: String,
    pub obligation_id: Id,
    pub check_spec_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Blocker {
    pub blocker_id: Id,
    pub description: String,
}

/// The exact current repair authority and the failing Evidence of the parent generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepairContext {
    pub failed_evidence: Vec<FailedEvidence>,
    pub evidence_set_digest: Digest,
    pub input_manifest_digest: Digest,
    pub acceptance_decision_id: Id,
    pub constraints_to_preserve: Vec<String>,
    pub acceptance_repair_digest: Digest,
    pub rejected_candidate_digest: Digest,
    pub repair_candidate_sequence: u32,
    pub acceptance_decision_digest: Digest,
    pub rejected_candidate_version: u32,
    pub repair_candidate_base_digest: Digest,
    pub repair_candidate_generation_id: Id,
    pub rejected_candidate_generation_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailedEvidence {
    pub evidence_id: Id,
    pub result_status: CheckResult,
    pub check_specification_id: Id,
    pub evidence_record_digest: Digest,
    pub check_specification_digest: Digest,
    pub evidence_eligibility_state: Eligibility,
    pub verification_obligation_id: Id,
    pub evidence_eligibility_version: u32,
}

/// Bounded, non-authoritative feedback derived only from the closed repair source set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Feedback {
    pub items: Vec<FeedbackItem>,
    pub schema_version: u16,
    /// `Digest::of(Feedback, encode(items))`.
    pub feedback_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeedbackItem {
    pub kind: FeedbackKind,
    pub content: String,
    /// Sorted; aligned with `source_digests`.
    pub source_refs: Vec<String>,
    pub source_digests: Vec<Digest>,
}

impl FeedbackItem {
    /// The FAILED_CHECK item of a failing Evidence record, as compilers 2 and later project
    /// it: content `check <checkSpecId> of obligation <obligationId> failed: <detail>`,
    /// citing `evidence/<evidenceId>` and the record's digest. (The runtime sizes it when the
    /// record is admitted: a failure record is never truncated into feedback.)
    pub fn failed_check(
        evidence_id: Id,
        record_digest: Digest,
        check_spec_id: Id,
        obligation_id: Id,
        detail: &str,
    ) -> FeedbackItem {
        // "check {check} of obligation {obligation} failed: {detail}"
        let mut content = String::with_capacity(6 + 26 + 15 + 26 + 9 + detail.len());
        content.push_str("check ");
        check_spec_id.push_to(&mut content);
        content.push_str(" of obligation ");
        obligation_id.push_to(&mut content);
        content.push_str(" failed: ");
        content.push_str(detail);
        cited(FeedbackKind::FailedCheck, content, id_ref("evidence/", evidence_id), record_digest)
    }

    /// The PARENT_CHANGE_SET item of a repair of `parent` (frozen as `candidate` with
    /// `change_set`), as compilers 2 and later project it.
    pub fn parent_change_set(parent: Id, candidate: Digest, change_set: Digest) -> FeedbackItem {
        // "the rejected parent generation {id} froze as {candidate} with change set
        // {change set}; the repair starts from those exact bytes"
        let mut content = String::with_capacity(31 + 26 + 11 + 67 + 17 + 67 + 42);
        content.push_str("the rejected parent generation ");
        parent.push_to(&mut content);
        content.push_str(" froze as ");
        candidate.push_to(&mut content);
        content.push_str(" with change set ");
        change_set.push_to(&mut content);
        content.push_str("; the repair starts from those exact bytes");
        cited(FeedbackKind::ParentChangeSet, content, id_ref("generation/", parent), change_set)
    }

    /// A PRESERVATION_CONSTRAINT item: `constraint` of goal `goal` at `revision` (content
    /// digest `goal_digest`), as compilers 2 and later project it.
    pub fn preservation_constraint(
        constraint: &str,
        goal: Id,
        revision: u32,
        goal_digest: Digest,
    ) -> FeedbackItem {
        // "goal/{id}@{revision}"
        let mut goal_ref = id_ref("goal/", goal);
        goal_ref.push('@');
        goal_ref.push_str(&revision.to_string());
        cited(FeedbackKind::PreservationConstraint, constraint.to_owned(), goal_ref, goal_digest)
    }
}

/// `prefix` followed by `id`'s text.
fn id_ref(prefix: &str, id: Id) -> String {
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    id.push_to(&mut out);
    out
}

/// A feedback item citing one source record and its digest.
fn cited(kind: FeedbackKind, content: String, source_ref: String, digest: Digest) -> FeedbackItem {
    FeedbackItem { kind, content, source_refs: vec![source_ref], source_digests: vec![digest] }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FeedbackKind {
    FailedCheck,
    ParentChangeSet,
    PreservationConstraint,
}

/// What the worker may answer with: compiler-owned, never enlarged by the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseContract {
    pub max_event_bytes: u32,
    pub worker_event_schema: String,
    pub allowed_result_kinds: Vec<ResultKind>,
}
