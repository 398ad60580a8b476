//! The names compiler/2 writes for closed enum values: their serde wire names, the text
//! the value's canonical encoding holds (`InputClass::ProjectMaterial` is
//! `PROJECT_MATERIAL`), never their Rust `Debug` names.
//!
//! Written out here, one exhaustive `match` per type, rather than computed: the names are
//! part of compiler/2's frozen output, so they live in its own text, cannot fail, and a
//! new variant does not compile until it is named.
//! `replay-tests/tests/it/compiler_versions.rs::v2_names_are_the_wire_names` proves each name
//! equal to the variant's canonical encoding, for every variant.

use ledger_schema::package::FeedbackKind;
use ledger_schema::types::{CheckResult, InputClass, Phase, ResultKind};

use crate::runtime::state::FactStatus;

/// A closed enum value's serde wire name.
pub trait WireName: Copy {
    /// The text string the value's canonical encoding holds.
    fn wire_name(self) -> &'static str;
}

impl WireName for Phase {
    fn wire_name(self) -> &'static str {
        match self {
            Phase::Discovery => "DISCOVERY",
            Phase::Plan => "PLAN",
            Phase::Implement => "IMPLEMENT",
            Phase::EvidenceBuild => "EVIDENCE_BUILD",
            Phase::FinalVerify => "FINAL_VERIFY",
        }
    }
}

impl WireName for InputClass {
    fn wire_name(self) -> &'static str {
        match self {
            InputClass::Identity => "IDENTITY",
            InputClass::Phase => "PHASE",
            InputClass::Goal => "GOAL",
            InputClass::BlockersDecisions => "BLOCKERS_DECISIONS",
            InputClass::FactsScenariosObligations => "FACTS_SCENARIOS_OBLIGATIONS",
            InputClass::ProjectMaterial => "PROJECT_MATERIAL",
            InputClass::Working => "WORKING",
        }
    }
}

impl WireName for FactStatus {
    fn wire_name(self) -> &'static str {
        match self {
            FactStatus::Proposed => "PROPOSED",
            FactStatus::Confirmed => "CONFIRMED",
            FactStatus::Invalidated => "INVALIDATED",
        }
    }
}

impl WireName for ResultKind {
    fn wire_name(self) -> &'static str {
        match self {
            ResultKind::Proposals => "PROPOSALS",
            ResultKind::CompletionRequest => "COMPLETION_REQUEST",
        }
    }
}

impl WireName for CheckResult {
    fn wire_name(self) -> &'static str {
        match self {
            CheckResult::Pass => "PASS",
            CheckResult::Fail => "FAIL",
            CheckResult::Error => "ERROR",
        }
    }
}

impl WireName for FeedbackKind {
    fn wire_name(self) -> &'static str {
        match self {
            FeedbackKind::FailedCheck => "FAILED_CHECK",
            FeedbackKind::ParentChangeSet => "PARENT_CHANGE_SET",
            FeedbackKind::PreservationConstraint => "PRESERVATION_CONSTRAINT",
        }
    }
}

impl WireName for ledger_schema::types::Eligibility {
    fn wire_name(self) -> &'static str {
        match self {
            ledger_schema::types::Eligibility::Eligible => "ELIGIBLE",
            ledger_schema::types::Eligibility::Ineligible => "INELIGIBLE",
        }
    }
}
