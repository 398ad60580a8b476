//! Attempts: started with their full Context Manifest, dispatch-claimed, then finished,
//! failed or cancelled.

use serde::{Deserialize, Serialize};

use crate::manifest::ContextManifest;
use crate::types::{Binding, Phase, ResultKind, ThreadChoice};
use crate::{Digest, Id};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttemptStarted {
    pub phase: Phase,
    pub thread: ThreadChoice,
    pub manifest: ContextManifest,
    /// The Attempt this one replaces after a supervisor restart (`restartAttempt`, cancelled
    /// in the entry before it, same frame); absent for every other start (outside review 74:
    /// nothing linked a replacement to the Attempt it replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<Id>,
    pub attempt_id: Id,
    pub workflow_id: Id,
    /// The exact active MUTABLE generation (IMPLEMENT only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_id: Option<Id>,
    /// `Digest::of(Manifest, encode(manifest))`.
    pub manifest_digest: Digest,
    pub worker_session_id: Id,
    /// The workflow version the Attempt is bound to; any later advance makes it stale.
    pub workflow_version: u32,
    /// The `receiptDigest` of the task selection (issue #15) whose loaded sources the
    /// context carries (compiler/3 and later); absent when none is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_receipt: Option<Digest>,
}

/// The immutable dispatch claim: revalidates the workflow version, the bound profile and
/// every request digest right before the worker is invoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DispatchClaimed {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Binding>,
    pub profile: Binding,
    pub attempt_id: Id,
    pub package_digest: Digest,
    pub manifest_digest: Digest,
    /// What the App Server reported it loaded besides the package (seed 000, "M2 App Server
    /// input closure"): present exactly when the bound profile binds an input closure, and
    /// within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_inputs: Option<super::authority::InputClosure>,
    pub workflow_version: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttemptFinished {
    pub summary: String,
    pub attempt_id: Id,
    /// Must be allowed by the phase's response contract.
    pub result_kind: ResultKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttemptFailed {
    pub reason: String,
    pub attempt_id: Id,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttemptCancelled {
    pub reason: String,
    pub attempt_id: Id,
    /// Cancellation and dispatch serialize on the workflow version.
    pub workflow_version: u32,
}
