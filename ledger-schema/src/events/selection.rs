//! Task selection (seed 003, issue #15): one routing decision over the configured
//! profile, recorded with everything that binds it. Plain data; the rules (and the
//! routing itself, a pure function) live in the runtime (`src/runtime/selection.rs`).
//!
//! The task prose is never recorded: only `queryDigest`.

use serde::{Deserialize, Serialize};

use crate::{Digest, DigestKind, codec};

/// What a selection decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "lowercase")]
pub enum SelectionDecision {
    /// Sources were selected (`selectedIds`, the sorted dependency closure).
    Selected,
    /// Nothing is selected (a completed decision: it can be reused).
    None,
    /// Ambiguous: a shortlist (`candidates`) awaits a bounded agent proposal. Never reused
    /// as a completed decision.
    Pending,
}

/// One ranked candidate (a shortlist entry, or the match a ranked decision chose).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionCandidate {
    pub id: String,
    /// BM25 score × 1000, rounded (the routing policy's unit).
    pub score: u32,
    /// The query terms the source matched, sorted, unique.
    pub matched: Vec<String>,
    /// The description was cut to its first 2,048 characters.
    pub truncated: bool,
    pub description: String,
}

/// One loaded resource: a selected source's `SKILL.md` or a declared required resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadedResource {
    pub id: String,
    pub path: String,
    pub bytes: u64,
    pub digest: Digest,
}

/// `selectionRecorded`: one task-selection decision. Fields in canonical key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectionRecorded {
    /// `--load`: the selected sources' bodies were returned (`resources`).
    pub load: bool,
    pub phase: String,
    /// Why (`explicit`, `reused`, `directive`, `ranked`, `proposal`, ...; docs/selection.md).
    pub reason: String,
    /// A completed decision was reused from `previous`.
    pub reused: bool,
    pub task_id: String,
    pub decision: SelectionDecision,
    /// The `selectionDigest` of the receipt given with `--previous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Digest>,
    /// A provider's admitted answer (`--proposal`): zero or one id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<Vec<String>>,
    /// What `--load` returned (empty without it), sorted by (id, path).
    pub resources: Vec<LoadedResource>,
    pub session_id: String,
    /// The shortlist (pending) or the ranked match (ranked); at most five.
    pub candidates: Vec<SelectionCandidate>,
    pub no_workflow: bool,
    /// The configured profile's plan.
    pub plan_digest: Digest,
    /// The task's explicit ids, sorted.
    pub explicit_ids: Vec<String>,
    /// The task's agent-proposed ids, sorted.
    pub proposed_ids: Vec<String>,
    /// `Digest::of(TaskQuery, query bytes)`, when the task has a query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_digest: Option<Digest>,
    /// The dependency closure of the choice, sorted, at most eight.
    pub selected_ids: Vec<String>,
    pub task_revision: u32,
    pub binding_digest: Digest,
    /// `closure-ledger-routing/2` (`/1` in selections recorded before 2026-12-05).
    pub routing_policy: String,
    /// `Digest::of(SelectionTriggers, [{id, name, description}] of the routable sources)`.
    pub trigger_digest: Digest,
    pub registry_digest: Digest,
    /// The configured store revision the selection resolved against.
    pub profile_revision: u32,
    pub selection_digest: Digest,
}

/// Everything that invalidates reuse. `bindingDigest = Digest::of(SelectionBinding, …)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionBinding<'a> {
    pub phase: &'a str,
    pub task_id: &'a str,
    pub session_id: &'a str,
    pub no_workflow: bool,
    pub plan_digest: Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_digest: Option<Digest>,
    pub task_revision: u32,
    pub routing_policy: &'a str,
    pub trigger_digest: Digest,
}

impl SelectionBinding<'_> {
    pub fn digest(&self) -> Digest {
        codec::record_digest(DigestKind::SelectionBinding, self).0
    }
}

/// What `selectionDigest` covers: the decision itself, not how it was reached (a reuse
/// and a load of the same decision have the same digest).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SelectionBody<'a> {
    decision: SelectionDecision,
    candidates: Vec<&'a str>,
    explicit_ids: &'a [String],
    selected_ids: &'a [String],
    binding_digest: Digest,
}

/// `Digest::of(Selection, {bindingDigest, decision, candidates (ids), explicitIds,
/// selectedIds})`.
pub fn selection_digest(
    binding_digest: Digest,
    decision: SelectionDecision,
    candidates: &[SelectionCandidate],
    explicit_ids: &[String],
    selected_ids: &[String],
) -> Digest {
    let body = SelectionBody {
        decision,
        candidates: candidates.iter().map(|c| c.id.as_str()).collect(),
        explicit_ids,
        selected_ids,
        binding_digest,
    };
    codec::record_digest(DigestKind::Selection, &body).0
}

/// A selection receipt without its own digest: what a caller saves and gives back with
/// `--previous`. Never the task prose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReceiptBody {
    pub phase: String,
    pub reason: String,
    pub task_id: String,
    pub decision: SelectionDecision,
    pub loaded_ids: Vec<String>,
    pub resources: Vec<LoadedResource>,
    pub session_id: String,
    pub plan_digest: Digest,
    pub explicit_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_digest: Option<Digest>,
    pub selected_ids: Vec<String>,
    pub task_revision: u32,
    pub binding_digest: Digest,
    pub routing_policy: String,
    pub registry_digest: Digest,
    pub profile_revision: u32,
    pub selection_digest: Digest,
}

impl ReceiptBody {
    /// `receiptDigest = Digest::of(SelectionReceipt, canonical body)`.
    pub fn digest(&self) -> Digest {
        codec::record_digest(DigestKind::SelectionReceipt, self).0
    }
}

impl SelectionRecorded {
    /// The receipt of this selection.
    pub fn receipt(&self) -> ReceiptBody {
        let mut loaded_ids: Vec<String> = self.resources.iter().map(|r| r.id.clone()).collect();
        loaded_ids.dedup();
        ReceiptBody {
            phase: self.phase.clone(),
            reason: self.reason.clone(),
            task_id: self.task_id.clone(),
            decision: self.decision,
            loaded_ids,
            resources: self.resources.clone(),
            session_id: self.session_id.clone(),
            plan_digest: self.plan_digest,
            explicit_ids: self.explicit_ids.clone(),
            query_digest: self.query_digest,
            selected_ids: self.selected_ids.clone(),
            task_revision: self.task_revision,
            binding_digest: self.binding_digest,
            routing_policy: self.routing_policy.clone(),
            registry_digest: self.registry_digest,
            profile_revision: self.profile_revision,
            selection_digest: self.selection_digest,
        }
    }
}
