//! The closed event catalog, version 1 (grown by issue #13: `workflowCancelled` and the
//! ignored reason `GOAL_REVISED`; every older entry decodes as it did): one file per
//! event family, gathered by [`Event`].
//!
//! Every record is plain data (no rules: those live in the runtime's `apply`), closed
//! (`deny_unknown_fields`), free of floats, `HashMap`s and `usize`, and declares its fields
//! in canonical CBOR key order.

pub mod acceptance;
pub mod attempt;
pub mod authority;
pub mod candidate;
pub mod evidence;
pub mod genesis;
pub mod goal;
pub mod profile;
pub mod repair;
pub mod selection;
pub mod source;
pub mod worker;
pub mod workflow;

use serde::{Deserialize, Serialize};

pub use acceptance::{AcceptanceDecided, AcceptanceInputManifest, EvidenceRef};
pub use attempt::{AttemptCancelled, AttemptFailed, AttemptFinished, AttemptStarted, DispatchClaimed};
pub use authority::{
    BoundInput, ClassBudget, ExecutionProfile, ExecutionProfileInstalled, FeedbackLimits, InputClosure,
    PhasePolicy, PolicyBundle, PolicyBundleInstalled,
};
pub use candidate::{GenerationFrozen, GenerationOpened};
pub use evidence::EvidenceRecorded;
pub use genesis::{CATALOG_VERSION, LedgerInitialized};
pub use goal::{GoalContent, GoalCreated, GoalRevised};
pub use profile::{ProfileRevisionRecorded, SourceRegistryRecorded};
pub use repair::RepairRecorded;
pub use selection::SelectionRecorded;
pub use source::{
    BlockerRaised, BlockerResolved, FactConfirmed, FactInvalidated, FactProposed, HumanDecisionRecorded,
    HumanDecisionWithdrawn, ObligationRecorded, ObligationRetired, ProjectSourceRecorded,
    ProjectSourceWithdrawn, ScenarioRecorded, ScenarioRetired,
};
pub use worker::{
    CompactionRequested, IgnoredReason, WorkerDeliveryIgnored, WorkerEventAdmitted, WorkerEventKind,
    WorkerPayload,
};
pub use workflow::{PhaseAdvanced, WorkflowCancelled, WorkflowStarted};

macro_rules! catalog {
    ($($variant:ident($ty:ty) = $name:literal,)*) => {
        /// Exactly one event per entry. Encoded as a one-key map `{kind: record}`.
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        #[serde(deny_unknown_fields)]
        pub enum Event {
            $(#[serde(rename = $name)] $variant($ty),)*
        }

        impl Event {
            /// Every kind name of catalog v1, in declaration order.
            pub const KINDS: &'static [&'static str] = &[$($name),*];

            /// The kind name, as encoded (the enum's map key).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Event::$variant(_) => $name,)*
                }
            }
        }
    };
}

catalog! {
    LedgerInitialized(LedgerInitialized) = "ledgerInitialized",
    PolicyBundleInstalled(PolicyBundleInstalled) = "policyBundleInstalled",
    ExecutionProfileInstalled(ExecutionProfileInstalled) = "executionProfileInstalled",
    GoalCreated(GoalCreated) = "goalCreated",
    GoalRevised(GoalRevised) = "goalRevised",
    WorkflowStarted(WorkflowStarted) = "workflowStarted",
    PhaseAdvanced(PhaseAdvanced) = "phaseAdvanced",
    FactProposed(FactProposed) = "factProposed",
    FactConfirmed(FactConfirmed) = "factConfirmed",
    FactInvalidated(FactInvalidated) = "factInvalidated",
    HumanDecisionRecorded(HumanDecisionRecorded) = "humanDecisionRecorded",
    ProjectSourceRecorded(ProjectSourceRecorded) = "projectSourceRecorded",
    ScenarioRecorded(ScenarioRecorded) = "scenarioRecorded",
    ObligationRecorded(ObligationRecorded) = "obligationRecorded",
    BlockerRaised(BlockerRaised) = "blockerRaised",
    BlockerResolved(BlockerResolved) = "blockerResolved",
    GenerationOpened(GenerationOpened) = "generationOpened",
    GenerationFrozen(GenerationFrozen) = "generationFrozen",
    AttemptStarted(Box<AttemptStarted>) = "attemptStarted",
    DispatchClaimed(DispatchClaimed) = "dispatchClaimed",
    AttemptFinished(AttemptFinished) = "attemptFinished",
    AttemptFailed(AttemptFailed) = "attemptFailed",
    AttemptCancelled(AttemptCancelled) = "attemptCancelled",
    WorkerEventAdmitted(WorkerEventAdmitted) = "workerEventAdmitted",
    WorkerDeliveryIgnored(WorkerDeliveryIgnored) = "workerDeliveryIgnored",
    EvidenceRecorded(EvidenceRecorded) = "evidenceRecorded",
    AcceptanceDecided(Box<AcceptanceDecided>) = "acceptanceDecided",
    RepairRecorded(RepairRecorded) = "repairRecorded",
    WorkflowCancelled(WorkflowCancelled) = "workflowCancelled",
    SourceRegistryRecorded(Box<SourceRegistryRecorded>) = "sourceRegistryRecorded",
    ProfileRevisionRecorded(ProfileRevisionRecorded) = "profileRevisionRecorded",
    SelectionRecorded(Box<SelectionRecorded>) = "selectionRecorded",
    ScenarioRetired(ScenarioRetired) = "scenarioRetired",
    ObligationRetired(ObligationRetired) = "obligationRetired",
    CompactionRequested(CompactionRequested) = "compactionRequested",
    ProjectSourceWithdrawn(ProjectSourceWithdrawn) = "projectSourceWithdrawn",
    HumanDecisionWithdrawn(HumanDecisionWithdrawn) = "humanDecisionWithdrawn",
}
