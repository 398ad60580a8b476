//! Worker events: admitted with a closed payload, or recorded as an ignored delivery.

use serde::{Deserialize, Serialize};

use crate::{Digest, Id};

/// A current Worker event, admitted. Its `payloadDigest` covers every payload field,
/// including the observed time, so a redelivery that differs in any byte is a conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerEventAdmitted {
    pub payload: WorkerPayload,
    pub attempt_id: Id,
    /// `Digest::of(WorkerPayload, encode(payload))`.
    pub payload_digest: Digest,
    pub worker_event_id: Id,
    pub manifest_digest: Digest,
}

/// The durable receipt of a stale or mismatched delivery: nothing else changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerDeliveryIgnored {
    pub reason: IgnoredReason,
    pub attempt_id: Id,
    pub payload_digest: Digest,
    pub worker_event_id: Id,
    pub manifest_digest: Digest,
}

/// A Runtime directive (seed 000: "any manual trigger \[is\] selected by the Workflow-bound
/// Execution Profile rather than adapter discretion"): one manual compaction of a
/// dispatched Attempt's Thread is authorized; under a MANUAL profile its COMPACTION_STARTED
/// needs one, and consumes it (outside review 84: an adapter's unrequested compaction was
/// recorded exactly like an authorized one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionRequested {
    pub attempt_id: Id,
    pub directive_id: Id,
}

/// The closed Worker event payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkerPayload {
    pub kind: WorkerEventKind,
    pub text: String,
    pub items: Vec<String>,
    pub observed_at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkerEventKind {
    Progress,
    ToolActivity,
    CompactionStarted,
    CompactionCompleted,
    Proposals,
    CompletionRequest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IgnoredReason {
    /// The Attempt is no longer the workflow's current one.
    StaleAttempt,
    /// The Attempt has finished, failed or been cancelled.
    AttemptEnded,
    /// The event names a manifest other than the Attempt's.
    ManifestMismatch,
    /// The workflow advanced after the Attempt was bound.
    WorkflowVersionChanged,
    /// The Goal was revised after the Attempt was bound (catalog addition, issue #13).
    GoalRevised,
    /// A bound input of the Attempt's context (a fact, a blocker, an obligation, a human
    /// decision, a project source, a scenario) changed after its dispatch claim: the
    /// manifest is no longer current (catalog addition, issue #13).
    ContextChanged,
    /// The Attempt's stream already ended with its terminal Worker event (PROPOSALS or
    /// COMPLETION_REQUEST): a later event of another id is recorded, never admitted, so one
    /// result stands (catalog addition, outside review 16).
    StreamEnded,
}
