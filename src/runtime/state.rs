//! The projection: everything the rules and the compiler need, folded from entries.
//!
//! It is encoded canonically (maps keyed by `Id` serialize in id order, which is canonical
//! order for 16-byte keys; struct fields are declared in canonical key order) and hashed
//! under its own context, so two states compare by digest.

use ledger_schema::events::{EvidenceRecorded, ExecutionProfile, GoalContent, PolicyBundle};
use ledger_schema::types::{Binding, Eligibility, Phase, ResultKind, ThreadChoice, Verdict};
use ledger_schema::{Digest, DigestKind, Id, codec};
use serde::Serialize;

/// The projection's maps: persistent ordered maps (structural sharing) with their values
/// behind `Arc`, so a snapshot of the whole state is an O(1) clone and an update copies one
/// path and one value. They iterate — and so encode — in key order, like a `BTreeMap`.
pub use super::map::Map;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub facts: Map<Id, FactState>,
    pub goals: Map<Id, GoalState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ledger: Option<Id>,
    /// Entries folded so far (= next seq).
    pub entries: u64,
    pub repairs: Map<Id, RepairState>,
    pub sources: Map<Id, SourceState>,
    pub attempts: Map<Id, AttemptState>,
    pub blockers: Map<Id, BlockerState>,
    pub evidence: Map<Id, EvidenceState>,
    pub policies: Map<Id, PolicyState>,
    pub profiles: Map<Id, ProfileState>,
    /// The receipt index: every admitted command's key (its own id, or its record and the
    /// version it created) → the seq of its receipt entry. One small item per command,
    /// never the command: a redelivery is judged against the stored entry
    /// (`dedup::same_command`).
    pub receipts: super::dedup::Receipts,
    pub decisions: Map<Id, DecisionState>,
    pub scenarios: Map<Id, ScenarioState>,
    pub workflows: Map<Id, WorkflowState>,
    /// Time of the last entry (ms).
    pub last_time_ms: u64,
    pub generations: Map<Id, GenerationState>,
    pub obligations: Map<Id, ObligationState>,
    /// The dedup index: every Worker event id ever recorded (admitted or ignored) → the
    /// seq of its entry. Kept to one seq per id in a compact index (20 bytes per id,
    /// encoded as the map it stands for) — it grows with every worker event — so
    /// a redelivery is told apart from a conflict against the stored entry itself
    /// (`worker::redelivery`).
    pub worker_events: super::seq_index::SeqIndex,
    pub human_decisions: Map<Id, HumanDecisionState>,
    /// Context profiles (seed 003): registry snapshots and profile revisions. Omitted
    /// while empty, so ledgers without them keep their state digest.
    #[serde(skip_serializing_if = "super::profile::ContextProfiles::is_empty")]
    pub context_profiles: super::profile::ContextProfiles,
    /// Task selections (issue #15) by receipt digest. Omitted while empty.
    #[serde(skip_serializing_if = "super::selection::Selections::is_empty")]
    pub selections: super::selection::Selections,
    /// Compaction directives (`requestCompaction`) by id → the Attempt each authorized
    /// (outside review 84). Omitted while empty, so ledgers without them keep their state
    /// digest.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub compaction_directives: Map<Id, Id>,
    /// The newest compiler version an Attempt start of this ledger records, kept by the
    /// admission step (a later start may not record an older one). Derived from
    /// `attempts`, so not encoded: the state digest is unchanged.
    #[serde(skip)]
    pub compiler_floor: Option<&'static str>,
    /// A decision of this ledger binds the profile and plan pair: every later one must (the
    /// form never goes back). Derived from the decisions, so not encoded.
    #[serde(skip)]
    pub decisions_bind_profile: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl State {
    /// The canonical encoding of the projection.
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// `Digest::of(State, encode(state))`.
    pub fn digest(&self) -> Digest {
        codec::encode_digest(DigestKind::State, self)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyState {
    pub bundle: PolicyBundle,
    pub digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileState {
    pub digest: Digest,
    pub profile: ExecutionProfile,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GoalState {
    /// Seq of the entry that made this revision current.
    pub seq: u64,
    /// `content.digest()` of the current revision.
    pub digest: Digest,
    pub content: GoalContent,
    pub revision: u32,
    /// `goal::judging_key` of every revision, revision 1 first: what a judgment under an
    /// earlier revision was made against (`candidate::judged_failing`). Derived by the
    /// fold, not encoded (the state digest is unchanged).
    #[serde(skip)]
    pub revision_keys: Vec<Digest>,
}

impl GoalState {
    /// The judging key of revision `revision`, if the goal has reached it.
    pub fn key_of_revision(&self, revision: u32) -> Option<Digest> {
        let index = usize::try_from(revision.checked_sub(1)?).ok()?;
        self.revision_keys.get(index).copied()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub phase: Phase,
    /// ACCEPT or REJECT_TERMINAL was decided, or the workflow was cancelled: it is closed.
    pub closed: bool,
    pub goal_id: Id,
    pub policy: Binding,
    pub profile: Binding,
    pub version: u32,
    /// Closed by `workflowCancelled` (a closing state distinct from a verdict).
    #[serde(skip_serializing_if = "is_false")]
    pub cancelled: bool,
    /// The Attempt started last on this workflow (its thread is the one RESUME continues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<Id>,
    pub goal_revision: u32,
    /// The Attempt that has started and not ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_attempt: Option<Id>,
    /// The latest Acceptance decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_decision: Option<Id>,
    /// The current Candidate generation (the latest opened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_generation: Option<Id>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FactStatus {
    Proposed,
    Confirmed,
    Invalidated,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FactState {
    pub goal_id: Id,
    pub status: FactStatus,
    pub revision: u32,
    pub statement: String,
    pub provenance: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalidated_by: Option<String>,
    /// The seq at which a CONFIRMED revision was invalidated (withdrawn authority: a
    /// RESUME of a Thread that was given it is refused), kept by later revisions proposed
    /// after it. Derived by the fold, not encoded.
    #[serde(skip)]
    pub withdrawn_seq: Option<u64>,
    /// The seq at which the newest confirmed revision was confirmed (derived by the fold, not
    /// encoded; kept by later revisions proposed after it): whether an Attempt started at
    /// some seq was given it. The current revision is confirmed only while `status` says so.
    #[serde(skip)]
    pub confirmed_seq: Option<u64>,
    /// Every CONFIRMED revision since invalidated, oldest first, kept by later revisions
    /// (derived by the fold, not encoded): what a Thread started while one stood was given
    /// (outside review 205 F1: the newest window alone lost r1's once r2 was confirmed, and
    /// a RESUME of a Thread given r1 passed).
    #[serde(skip)]
    pub withdrawn: Vec<WithdrawnRevision>,
}

/// A CONFIRMED fact revision, and the seqs at which it was confirmed and invalidated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithdrawnRevision {
    pub revision: u32,
    pub confirmed_seq: u64,
    pub withdrawn_seq: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanDecisionState {
    pub seq: u64,
    pub answer: String,
    pub goal_id: Id,
    pub question: String,
    pub decided_by: String,
    /// The seq of its withdrawal (`withdrawHumanDecision`); absent while it stands. Omitted
    /// when absent, so earlier state digests are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withdrawn_seq: Option<u64>,
    /// The withdrawal's reason and principal (derived by the fold, not encoded, as a
    /// retirement's).
    #[serde(skip)]
    pub withdrawn_reason: String,
    #[serde(skip)]
    pub withdrawn_by: String,
    /// The question as two decisions are compared (`source::question_key`), and the two
    /// forms a look-alike is read in (`source::looks`): derived once, when the decision is
    /// recorded, not at every decision, compile and currency proof after it (issue #16).
    #[serde(skip)]
    pub key: String,
    #[serde(skip)]
    pub looks: [String; 2],
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceState {
    pub seq: u64,
    pub path: String,
    pub digest: Digest,
    pub goal_id: Id,
    pub content: String,
    pub revision: String,
    /// The seq of its withdrawal (`withdrawProjectSource`: its path left the project);
    /// absent while it stands. Omitted when absent, so earlier state digests are unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withdrawn_seq: Option<u64>,
    /// The withdrawal's reason (derived by the fold, not encoded, as a retirement's).
    #[serde(skip)]
    pub withdrawn_reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScenarioState {
    pub seq: u64,
    pub title: String,
    pub goal_id: Id,
    /// The seq of its retirement (`retireScenario`); absent while it is a requirement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_seq: Option<u64>,
    pub description: String,
    /// The retirement's reason (derived by the fold from the entry `retired_seq` names, not
    /// encoded: the state digest covers that entry already).
    #[serde(skip)]
    pub retired_reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObligationState {
    pub seq: u64,
    pub goal_id: Id,
    /// The seq of its retirement (`retireObligation`); absent while it is a requirement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_seq: Option<u64>,
    /// The retirement's reason (derived by the fold, not encoded, as for a scenario).
    #[serde(skip)]
    pub retired_reason: String,
    pub check_spec_id: Id,
    pub description: String,
    pub check_spec_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockerState {
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    pub workflow_id: Id,
    pub description: String,
    /// The seq of its resolution (derived by the fold, not encoded: the state digest is
    /// unchanged): a RESUME of a Thread that was given it open is refused.
    #[serde(skip)]
    pub resolved_seq: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GenerationStatus {
    Mutable,
    Frozen { candidate_digest: Digest, change_set_digest: Digest },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationState {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<Id>,
    pub status: GenerationStatus,
    /// The Acceptance decision made over this generation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Id>,
    /// Every Evidence record of this generation, sorted by id.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Id>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repair_id: Option<Id>,
    pub sequence: u32,
    pub base_digest: Digest,
    pub workflow_id: Id,
}

impl GenerationState {
    pub fn frozen_digest(&self) -> Option<Digest> {
        match self.status {
            GenerationStatus::Frozen { candidate_digest, .. } => Some(candidate_digest),
            GenerationStatus::Mutable => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum AttemptStatus {
    /// Started, not yet dispatched.
    Started,
    /// The dispatch claim is recorded: the worker may run.
    Dispatched,
    Finished {
        result_kind: ResultKind,
    },
    Failed,
    /// Cancelled; `interrupted` when it had been dispatched.
    Cancelled {
        interrupted: bool,
    },
}

impl AttemptStatus {
    pub fn is_active(self) -> bool {
        matches!(self, AttemptStatus::Started | AttemptStatus::Dispatched)
    }
}

/// Fields in canonical key order (length, then bytes), as the state digest encodes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptState {
    /// Seq of the `attemptStarted` entry.
    pub seq: u64,
    pub phase: Phase,
    pub status: AttemptStatus,
    pub thread: ThreadChoice,
    /// The Attempt it replaces after a restart (`attemptStarted.replaces`). Omitted when
    /// absent, so ledgers without it keep their state digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Id>,
    /// The seq of its `attemptCancelled` entry, if it was cancelled so (derived by the fold,
    /// not encoded): a replacement's start must follow it directly.
    #[serde(skip)]
    pub cancelled_seq: Option<u64>,
    /// A compaction is open: COMPACTION_STARTED admitted, COMPACTION_COMPLETED not yet
    /// (`CompactionOrder`). Omitted while false.
    #[serde(skip_serializing_if = "is_false")]
    pub compacting: bool,
    /// The dispatch claim was recorded (it stays true after the Attempt ends).
    pub dispatched: bool,
    pub workflow_id: Id,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_id: Option<Id>,
    pub package_digest: Digest,
    /// A bound input of its context changed after its dispatch claim (marked by the
    /// admission step, `runtime::mark_context_changed`): its worker events are ignored
    /// receipts (CONTEXT_CHANGED) and `finishAttempt` is refused (`ManifestStale`). Omitted
    /// while false, so ledgers without it keep their state digest.
    #[serde(skip_serializing_if = "is_false")]
    pub context_changed: bool,
    pub events_admitted: u32,
    pub manifest_digest: Digest,
    /// The `compilerVersion` its manifest records (the dispatch claim recompiles with it).
    pub compiler_version: String,
    /// A current terminal Worker event (PROPOSALS / COMPLETION_REQUEST: the phase's result
    /// kind) was admitted: what `finishAttempt` needs (terminal stream accounting). Omitted
    /// while false.
    #[serde(skip_serializing_if = "is_false")]
    pub result_delivered: bool,
    pub worker_session_id: Id,
    pub workflow_version: u32,
    /// The task selection its context carries (issue #15). Omitted while absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection_receipt: Option<Digest>,
    /// A compaction directive not yet used by a COMPACTION_STARTED (outside review 84).
    /// Omitted while absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_directive: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceState {
    pub seq: u64,
    pub record: EvidenceRecorded,
    /// The current eligibility, derived by the ledger (the record holds the snapshot taken
    /// when it was recorded: version 1, ELIGIBLE).
    pub eligibility: Eligibility,
    pub record_digest: Digest,
    /// +1 at every change of `eligibility`.
    pub eligibility_version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionState {
    pub seq: u64,
    pub reasons: Vec<String>,
    pub verdict: Verdict,
    /// The Evidence Set, sorted by id.
    pub evidence: Vec<Id>,
    /// A Repair record already consumed this decision.
    pub repaired: bool,
    pub workflow_id: Id,
    pub generation_id: Id,
    pub decision_digest: Digest,
    pub candidate_digest: Digest,
    pub evidence_set_digest: Digest,
    pub input_manifest_digest: Digest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RepairState {
    pub seq: u64,
    pub decision_id: Id,
    pub workflow_id: Id,
    /// The child generation has been opened.
    pub child_opened: bool,
    pub repair_digest: Digest,
    pub child_generation_id: Id,
    pub parent_generation_id: Id,
    pub constraints_to_preserve: Vec<String>,
}
