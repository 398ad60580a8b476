//! Commands: what a supervisor (or `ledger submit`) asks for. JSON, closed
//! (`deny_unknown_fields`), one command per object `{ "kindOfCommand": { ... } }`.
//! Ids are chosen by the command's author (ULIDs made outside the pure core); digests of
//! content are computed by `decide`, never trusted from the command.

use ledger_schema::Digest;
use ledger_schema::Id;
use ledger_schema::events::{ExecutionProfile, GoalContent, PolicyBundle, WorkerPayload};
use ledger_schema::types::{Binding, CheckResult, Phase, ResultKind, ThreadChoice, Verdict};
use serde::{Deserialize, Serialize};

/// Largest JSON command line accepted (checked before parsing).
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Command {
    InstallPolicy(InstallPolicy),
    InstallProfile(InstallProfile),
    CreateGoal(CreateGoal),
    ReviseGoal(ReviseGoal),
    StartWorkflow(StartWorkflow),
    AdvancePhase(AdvancePhase),
    ProposeFact(ProposeFact),
    ConfirmFact(ConfirmFact),
    InvalidateFact(InvalidateFact),
    RecordHumanDecision(RecordHumanDecision),
    RecordProjectSource(RecordProjectSource),
    RecordScenario(RecordScenario),
    RecordObligation(RecordObligation),
    RaiseBlocker(RaiseBlocker),
    ResolveBlocker(ResolveBlocker),
    OpenGeneration(OpenGeneration),
    FreezeGeneration(FreezeGeneration),
    StartAttempt(StartAttempt),
    ClaimDispatch(ClaimDispatch),
    DeliverWorkerEvent(DeliverWorkerEvent),
    FinishAttempt(FinishAttempt),
    FailAttempt(FailAttempt),
    CancelAttempt(CancelAttempt),
    RecordEvidence(RecordEvidence),
    DecideAcceptance(DecideAcceptance),
    RecordRepair(RecordRepair),
    CancelWorkflow(CancelWorkflow),
    RestartAttempt(RestartAttempt),
    RetireScenario(RetireScenario),
    RetireObligation(RetireObligation),
    RequestCompaction(RequestCompaction),
    WithdrawProjectSource(WithdrawProjectSource),
    WithdrawHumanDecision(WithdrawHumanDecision),
}

impl Command {
    /// The command's kind, as written in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::InstallPolicy(_) => "installPolicy",
            Command::InstallProfile(_) => "installProfile",
            Command::CreateGoal(_) => "createGoal",
            Command::ReviseGoal(_) => "reviseGoal",
            Command::StartWorkflow(_) => "startWorkflow",
            Command::AdvancePhase(_) => "advancePhase",
            Command::ProposeFact(_) => "proposeFact",
            Command::ConfirmFact(_) => "confirmFact",
            Command::InvalidateFact(_) => "invalidateFact",
            Command::RecordHumanDecision(_) => "recordHumanDecision",
            Command::RecordProjectSource(_) => "recordProjectSource",
            Command::RecordScenario(_) => "recordScenario",
            Command::RecordObligation(_) => "recordObligation",
            Command::RaiseBlocker(_) => "raiseBlocker",
            Command::ResolveBlocker(_) => "resolveBlocker",
            Command::OpenGeneration(_) => "openGeneration",
            Command::FreezeGeneration(_) => "freezeGeneration",
            Command::StartAttempt(_) => "startAttempt",
            Command::ClaimDispatch(_) => "claimDispatch",
            Command::DeliverWorkerEvent(_) => "deliverWorkerEvent",
            Command::FinishAttempt(_) => "finishAttempt",
            Command::FailAttempt(_) => "failAttempt",
            Command::CancelAttempt(_) => "cancelAttempt",
            Command::RecordEvidence(_) => "recordEvidence",
            Command::DecideAcceptance(_) => "decideAcceptance",
            Command::RecordRepair(_) => "recordRepair",
            Command::CancelWorkflow(_) => "cancelWorkflow",
            Command::RestartAttempt(_) => "restartAttempt",
            Command::RetireScenario(_) => "retireScenario",
            Command::RetireObligation(_) => "retireObligation",
            Command::RequestCompaction(_) => "requestCompaction",
            Command::WithdrawProjectSource(_) => "withdrawProjectSource",
            Command::WithdrawHumanDecision(_) => "withdrawHumanDecision",
        }
    }
}

macro_rules! command {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name { $($(#[$fdoc])* pub $field: $ty,)* }
    };
}

command!(InstallPolicy { policy_id: Id, bundle: PolicyBundle });
command!(InstallProfile { profile_id: Id, profile: ExecutionProfile });
command!(CreateGoal { goal_id: Id, content: GoalContent });
command!(
    /// `revision` is the new revision: the current one + 1.
    ReviseGoal { goal_id: Id, revision: u32, content: GoalContent }
);
command!(
    /// `plan` is the AcceptanceCriticalVerificationPlan pair, required exactly under a
    /// protected profile.
    StartWorkflow {
        workflow_id: Id,
        goal_id: Id,
        goal_revision: u32,
        policy_id: Id,
        profile_id: Id,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<Binding>,
    }
);
command!(
    /// `version` is the new workflow version: the current one + 1.
    AdvancePhase { workflow_id: Id, phase: Phase, version: u32 }
);
command!(ProposeFact { fact_id: Id, goal_id: Id, revision: u32, statement: String, provenance: String });
command!(ConfirmFact { fact_id: Id, revision: u32, confirmed_by: String });
command!(
    /// `invalidatedBy` is required, a human principal, when the revision is CONFIRMED.
    InvalidateFact {
        fact_id: Id,
        revision: u32,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        invalidated_by: Option<String>,
    }
);
command!(
    /// A human's answer to a question of the goal. `supersedes` names the decision it replaces
    /// — the one standing on the same question — which a decision made at the goal's current
    /// revision needs (outside review 74: an answer could not be changed without revising the
    /// goal).
    RecordHumanDecision {
        decision_id: Id,
        goal_id: Id,
        question: String,
        answer: String,
        decided_by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        supersedes: Option<Id>,
    }
);
command!(RecordProjectSource { source_id: Id, goal_id: Id, path: String, revision: String, content: String });
command!(
    /// Withdraws a project source: its path left the project (deleted or renamed). Names the
    /// path's current record (outside review 100).
    WithdrawProjectSource { source_id: Id, reason: String }
);
command!(
    /// Withdraws the Human Decision standing on its question, by a human, with a reason:
    /// made in error, it reaches no worker from now on (outside review 135 F1).
    WithdrawHumanDecision { decision_id: Id, reason: String, withdrawn_by: String }
);
command!(RecordScenario { scenario_id: Id, goal_id: Id, title: String, description: String });
command!(RecordObligation {
    obligation_id: Id,
    goal_id: Id,
    description: String,
    check_spec_id: Id,
    check_spec_digest: Digest,
});
command!(
    /// Retires a scenario recorded before its goal's current revision (outside review 55).
    RetireScenario { scenario_id: Id, reason: String }
);
command!(
    /// Retires an obligation recorded before its goal's current revision (outside review 55).
    RetireObligation { obligation_id: Id, reason: String }
);
command!(
    /// A Runtime directive: authorizes one manual compaction of a dispatched Attempt's
    /// Thread (seed 000: the manual trigger is the Execution Profile's, not the adapter's).
    /// Under a MANUAL profile a COMPACTION_STARTED needs one and consumes it.
    RequestCompaction { directive_id: Id, attempt_id: Id }
);
command!(RaiseBlocker { blocker_id: Id, workflow_id: Id, description: String });
command!(ResolveBlocker { blocker_id: Id, resolution: String });
command!(
    /// Opens a workflow's first Candidate generation (repair children are opened by
    /// `recordRepair`).
    OpenGeneration { generation_id: Id, workflow_id: Id, base_digest: Digest }
);
command!(FreezeGeneration { generation_id: Id, candidate_digest: Digest, change_set_digest: Digest });
command!(
    /// Starts an Attempt in the workflow's current phase; the Context Manifest is compiled
    /// by the admission step, never supplied by the command. `selectionReceipt` names a
    /// recorded task selection (its `receiptDigest`) whose loaded sources the context
    /// carries (issue #15; docs/selection.md "Into the Context Compiler").
    StartAttempt {
        attempt_id: Id,
        workflow_id: Id,
        worker_session_id: Id,
        thread: ThreadChoice,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selection_receipt: Option<Digest>,
    }
);
command!(
    /// The supervisor's view of what it is about to dispatch; every field is revalidated.
    ClaimDispatch {
        attempt_id: Id,
        workflow_version: u32,
        profile: Binding,
        manifest_digest: Digest,
        package_digest: Digest,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<Binding>,
        /// What the App Server reported it loaded besides the package: required exactly
        /// when the bound profile binds an input closure (`InputClosure`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reported_inputs: Option<ledger_schema::events::InputClosure>,
    }
);
command!(DeliverWorkerEvent {
    attempt_id: Id,
    worker_event_id: Id,
    manifest_digest: Digest,
    payload: WorkerPayload
});
command!(FinishAttempt { attempt_id: Id, result_kind: ResultKind, summary: String });
command!(FailAttempt { attempt_id: Id, reason: String });
command!(CancelAttempt { attempt_id: Id, workflow_version: u32, reason: String });
command!(RecordEvidence {
    evidence_id: Id,
    workflow_id: Id,
    generation_id: Id,
    candidate_digest: Digest,
    obligation_id: Id,
    check_spec_id: Id,
    check_spec_digest: Digest,
    result: CheckResult,
    detail: String,
});
command!(
    /// Decides over the generation's Evidence Set, which the ledger computes (every
    /// current, eligible record); `evidenceIds`, if given, must be exactly that set.
    DecideAcceptance {
        decision_id: Id,
        workflow_id: Id,
        generation_id: Id,
        verdict: Verdict,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evidence_ids: Option<Vec<Id>>,
        reasons: Vec<String>,
    }
);
command!(
    /// Records the repair of the exact current REJECT_REPAIRABLE decision and opens the
    /// repair child generation. Every digest must match the decision exactly.
    RecordRepair {
        repair_id: Id,
        decision_id: Id,
        decision_digest: Digest,
        input_manifest_digest: Digest,
        evidence_set_digest: Digest,
        child_generation_id: Id,
        constraints_to_preserve: Vec<String>,
    }
);

command!(
    /// Cancels a whole Workflow at its current version (closing it; an active Attempt ends
    /// cancelled with it).
    CancelWorkflow { workflow_id: Id, workflow_version: u32, reason: String }
);
command!(
    /// After a supervisor restart: ends the workflow's active Attempt `attemptId` as
    /// cancelled (interrupted if it was dispatched) and starts the replacement
    /// `replacementAttemptId` in the same phase and version, with freshly compiled context,
    /// on a FRESH thread with the new Worker Session `workerSessionId`. Both entries are
    /// one frame.
    RestartAttempt {
        attempt_id: Id,
        workflow_version: u32,
        replacement_attempt_id: Id,
        worker_session_id: Id,
        reason: String,
    }
);

impl ClaimDispatch {
    /// The claim a supervisor makes for `attempt_id`: exactly what the ledger recorded for
    /// it (workflow version, profile, manifest and package digests, plan pair); no App Server
    /// report (a profile binding an input closure needs the App Server's own, added by the
    /// caller).
    pub fn for_attempt(state: &super::State, attempt_id: Id) -> Option<ClaimDispatch> {
        let a = state.attempts.get(&attempt_id)?;
        let wf = state.workflows.get(&a.workflow_id)?;
        Some(ClaimDispatch {
            attempt_id,
            workflow_version: a.workflow_version,
            profile: wf.profile,
            manifest_digest: a.manifest_digest,
            package_digest: a.package_digest,
            plan: wf.plan,
            reported_inputs: None,
        })
    }
}
