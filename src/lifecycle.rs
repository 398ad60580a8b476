//! The reference lifecycle, as commands: goal → discovery → plan → implement (worker
//! events incl. a duplicate and a stale delivery) → failing evidence → REJECT_REPAIRABLE →
//! repair → implement → passing evidence → ACCEPT.
//!
//! Ids are fixed, and everything a supervisor would read back (manifest and package
//! digests for dispatch claims, decision digests for the repair) is read from the
//! ledger's own state, so the script is deterministic: `examples/lifecycle.jsonl` is this
//! script serialized, and it is admitted by any fresh ledger.

use ledger_schema::events::{
    ClassBudget, ExecutionProfile, FeedbackLimits, GoalContent, PhasePolicy, PolicyBundle, WorkerEventKind,
    WorkerPayload,
};
use ledger_schema::types::{
    Binding, CheckResult, CompactionMode, InputClass, Phase, ResultKind, ThreadChoice, Verdict,
};
use ledger_schema::{Digest, DigestKind, Id};

use crate::ledger::{Ledger, Receipt, SubmitError};
use crate::runtime::command::*;
use crate::runtime::{Command, Ctx};
use crate::store::Store;

/// A fixed id of the reference lifecycle (`01J…`-style ULIDs from a constant base).
pub fn lid(n: u128) -> Id {
    Id(0x0193_0000_0000_0000_0000_0000_0000_0000 | n)
}

pub const POLICY: u128 = 0x10;
pub const PROFILE: u128 = 0x11;
pub const PROTECTED_PROFILE: u128 = 0x12;
pub const GOAL: u128 = 0x20;
pub const WORKFLOW: u128 = 0x30;
pub const OBLIGATION: u128 = 0x40;
pub const CHECK_SPEC: u128 = 0x41;

pub fn digest_of(label: &str) -> Digest {
    Digest::of(DigestKind::Source, label.as_bytes())
}

/// The reference policy: every phase, a budget for every class.
pub fn policy_bundle() -> PolicyBundle {
    let all = [
        InputClass::Identity,
        InputClass::Phase,
        InputClass::Goal,
        InputClass::BlockersDecisions,
        InputClass::FactsScenariosObligations,
        InputClass::ProjectMaterial,
        InputClass::Working,
    ];
    let phase =
        |phase: Phase, objective: &str, required: &[InputClass], optional: &[InputClass]| PhasePolicy {
            phase,
            objective: objective.to_owned(),
            capabilities: match phase {
                Phase::Implement => vec!["edit files in scope".to_owned(), "run the test suite".to_owned()],
                _ => vec!["read the repository".to_owned()],
            },
            required: required.to_vec(),
            optional: optional.to_vec(),
        };
    use InputClass as C;
    PolicyBundle {
        budgets: all.iter().map(|&class| ClassBudget { class, max_bytes: 32_768 }).collect(),
        feedback: FeedbackLimits { max_items: 16, max_item_bytes: 4096, max_total_bytes: 16_384 },
        phases: vec![
            phase(
                Phase::Discovery,
                "Map the code relevant to the goal; propose facts.",
                &[C::FactsScenariosObligations],
                &[C::ProjectMaterial, C::BlockersDecisions],
            ),
            phase(
                Phase::Plan,
                "Propose a plan that meets every success criterion.",
                &[C::FactsScenariosObligations, C::BlockersDecisions],
                &[C::ProjectMaterial],
            ),
            phase(
                Phase::Implement,
                "Implement the plan in the candidate generation.",
                &[C::FactsScenariosObligations, C::BlockersDecisions],
                &[C::ProjectMaterial, C::Working],
            ),
            phase(
                Phase::EvidenceBuild,
                "Run the exact check specifications on the frozen candidate.",
                &[C::FactsScenariosObligations],
                &[],
            ),
            phase(
                Phase::FinalVerify,
                "Decide acceptance over the evidence set.",
                &[C::FactsScenariosObligations],
                &[],
            ),
        ],
        max_event_bytes: 65_536,
        invariants: vec!["Never weaken a check to make it pass.".to_owned()],
    }
}

pub fn profile(protected: bool) -> ExecutionProfile {
    ExecutionProfile {
        name: if protected { "bounded-m2-protected" } else { "bounded-m2" }.to_owned(),
        protected,
        compaction: CompactionMode::Manual,
        repair_thread: ThreadChoice::Fresh,
        attempt_thread: ThreadChoice::Fresh,
        input_closure: None,
    }
}

pub fn goal_content() -> GoalContent {
    GoalContent {
        objective: "Make the config parser reject a document with trailing bytes.".to_owned(),
        success_criteria: vec![
            "`parse(b\"{}x\")` returns TrailingBytes".to_owned(),
            "the existing tests still pass".to_owned(),
        ],
        scope: vec!["src/config/parser.rs".to_owned()],
        non_goals: vec!["performance work".to_owned()],
        preservation_constraints: vec!["the public API of parse() is unchanged".to_owned()],
    }
}

pub fn payload(kind: WorkerEventKind, at_ms: u64, text: &str) -> WorkerPayload {
    WorkerPayload { kind, observed_at_ms: at_ms, text: text.to_owned(), items: vec![] }
}

/// Runs the script against `ledger`, returning every command with its receipt.
pub struct Script<'a, S: Store> {
    pub ledger: &'a mut Ledger<S>,
    pub time_ms: u64,
    pub log: Vec<(Command, Receipt)>,
}

impl<S: Store> Script<'_, S> {
    pub fn run(&mut self, command: Command) -> Result<Receipt, SubmitError> {
        self.time_ms += 1000;
        let receipt = self.ledger.submit(&command, Ctx { time_ms: self.time_ms })?;
        self.log.push((command, receipt.clone()));
        Ok(receipt)
    }

    /// Claims the dispatch of an Attempt with exactly what the ledger recorded.
    pub fn claim(&mut self, attempt: Id) -> Result<Receipt, SubmitError> {
        let claim = ClaimDispatch::for_attempt(self.ledger.state(), attempt).ok_or_else(|| {
            SubmitError::Refused(crate::admission::Refusal::Rule(crate::runtime::violation(
                crate::runtime::Rule::Unknown,
                format!("unknown attempt {attempt}"),
            )))
        })?;
        self.run(Command::ClaimDispatch(claim))
    }

    pub fn deliver(&mut self, attempt: Id, event: u128, p: WorkerPayload) -> Result<Receipt, SubmitError> {
        let manifest_digest =
            self.ledger.state().attempts.get(&attempt).map(|a| a.manifest_digest).unwrap_or_default();
        self.run(Command::DeliverWorkerEvent(DeliverWorkerEvent {
            attempt_id: attempt,
            worker_event_id: lid(event),
            manifest_digest,
            payload: p,
        }))
    }

    pub fn start(&mut self, attempt: u128, session: u128) -> Result<Receipt, SubmitError> {
        self.run(Command::StartAttempt(StartAttempt {
            attempt_id: lid(attempt),
            workflow_id: lid(WORKFLOW),
            worker_session_id: lid(session),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        }))
    }

    /// Delivers the Attempt's terminal Worker event of `kind` (its result; event id
    /// `attempt + 0x1000`), which `finishAttempt` needs.
    pub fn result(&mut self, attempt: u128, kind: ResultKind) -> Result<Receipt, SubmitError> {
        let event_kind = match kind {
            ResultKind::Proposals => WorkerEventKind::Proposals,
            ResultKind::CompletionRequest => WorkerEventKind::CompletionRequest,
        };
        let t = self.time_ms;
        self.deliver(lid(attempt), attempt + 0x1000, payload(event_kind, t, "result"))
    }

    /// [`Script::result`], then [`Script::finish`].
    pub fn complete(&mut self, attempt: u128, kind: ResultKind) -> Result<Receipt, SubmitError> {
        self.result(attempt, kind)?;
        self.finish(attempt, kind)
    }

    pub fn advance(&mut self, phase: Phase) -> Result<Receipt, SubmitError> {
        let version = self.ledger.state().workflows.get(&lid(WORKFLOW)).map_or(0, |w| w.version) + 1;
        self.run(Command::AdvancePhase(AdvancePhase { workflow_id: lid(WORKFLOW), phase, version }))
    }

    pub fn finish(&mut self, attempt: u128, kind: ResultKind) -> Result<Receipt, SubmitError> {
        self.run(Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(attempt),
            result_kind: kind,
            summary: "done".to_owned(),
        }))
    }

    pub fn evidence(
        &mut self,
        id: u128,
        generation: u128,
        result: CheckResult,
        detail: &str,
    ) -> Result<Receipt, SubmitError> {
        let candidate_digest = self
            .ledger
            .state()
            .generations
            .get(&lid(generation))
            .and_then(|g| g.frozen_digest())
            .unwrap_or_default();
        self.run(Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(id),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(generation),
            candidate_digest,
            obligation_id: lid(OBLIGATION),
            check_spec_id: lid(CHECK_SPEC),
            check_spec_digest: digest_of("check: cargo test parser::trailing"),
            result,
            detail: detail.to_owned(),
        }))
    }

    /// The authority installs, goal, durable sources and the workflow.
    pub fn setup(&mut self) -> Result<(), SubmitError> {
        self.setup_with(policy_bundle())
    }

    /// [`Script::setup`] with `bundle` as the policy.
    pub fn setup_with(&mut self, bundle: PolicyBundle) -> Result<(), SubmitError> {
        self.setup_goal(bundle, goal_content())
    }

    /// [`Script::setup`] with `bundle` as the policy and `goal` as the Goal's content.
    pub fn setup_goal(&mut self, bundle: PolicyBundle, goal: GoalContent) -> Result<(), SubmitError> {
        self.run(Command::InstallPolicy(InstallPolicy { policy_id: lid(POLICY), bundle }))?;
        self.run(Command::InstallProfile(InstallProfile {
            profile_id: lid(PROFILE),
            profile: profile(false),
        }))?;
        self.run(Command::CreateGoal(CreateGoal { goal_id: lid(GOAL), content: goal }))?;
        self.run(Command::RecordObligation(RecordObligation {
            obligation_id: lid(OBLIGATION),
            goal_id: lid(GOAL),
            description: "the trailing-bytes test passes".to_owned(),
            check_spec_id: lid(CHECK_SPEC),
            check_spec_digest: digest_of("check: cargo test parser::trailing"),
        }))?;
        self.run(Command::RecordScenario(RecordScenario {
            scenario_id: lid(0x42),
            goal_id: lid(GOAL),
            title: "trailing byte".to_owned(),
            description: "a config file with one byte after the document is refused".to_owned(),
        }))?;
        self.run(Command::RecordProjectSource(RecordProjectSource {
            source_id: lid(0x43),
            goal_id: lid(GOAL),
            path: "src/config/parser.rs".to_owned(),
            revision: "9f1c2e0".to_owned(),
            content: "pub fn parse(bytes: &[u8]) -> Result<Config, Error> {\n    let (doc, _rest) = document(bytes)?;\n    Ok(doc)\n}\n".to_owned(),
        }))?;
        self.run(Command::ProposeFact(ProposeFact {
            fact_id: lid(0x50),
            goal_id: lid(GOAL),
            revision: 1,
            statement: "parse() ignores the bytes after the document".to_owned(),
            provenance: "discovery notes".to_owned(),
        }))?;
        self.run(Command::ConfirmFact(ConfirmFact {
            fact_id: lid(0x50),
            revision: 1,
            confirmed_by: "human:alice".to_owned(),
        }))?;
        self.run(Command::ProposeFact(ProposeFact {
            fact_id: lid(0x51),
            goal_id: lid(GOAL),
            revision: 1,
            statement: "the lexer might also be affected".to_owned(),
            provenance: "worker hypothesis".to_owned(),
        }))?;
        self.run(Command::RecordHumanDecision(RecordHumanDecision {
            decision_id: lid(0x52),
            goal_id: lid(GOAL),
            question: "Keep the existing Error enum?".to_owned(),
            answer: "Yes, add a variant.".to_owned(),
            decided_by: "human:alice".to_owned(),
            supersedes: None,
        }))?;
        self.run(Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(WORKFLOW),
            goal_id: lid(GOAL),
            goal_revision: 1,
            policy_id: lid(POLICY),
            profile_id: lid(PROFILE),
            plan: None,
        }))?;
        Ok(())
    }

    /// The whole reference lifecycle.
    pub fn lifecycle(&mut self) -> Result<(), SubmitError> {
        self.setup()?;
        self.discover_and_plan()?;
        self.implement_first()?;
        self.reject_first()?;
        self.repair_and_accept()
    }

    /// DISCOVERY (an event delivered twice: the second is a duplicate) and PLAN.
    pub fn discover_and_plan(&mut self) -> Result<(), SubmitError> {
        use WorkerEventKind as K;
        self.start(0x60, 0x61)?;
        self.claim(lid(0x60))?;
        let t = self.time_ms;
        self.deliver(lid(0x60), 0x70, payload(K::Progress, t, "reading src/config"))?;
        self.deliver(lid(0x60), 0x70, payload(K::Progress, t, "reading src/config"))?;
        self.deliver(lid(0x60), 0x71, payload(K::Proposals, t + 1, "fact: parse() drops trailing bytes"))?;
        self.finish(0x60, ResultKind::Proposals)?;
        self.advance(Phase::Plan)?;
        self.start(0x62, 0x63)?;
        self.claim(lid(0x62))?;
        let t = self.time_ms;
        self.deliver(lid(0x62), 0x72, payload(K::Proposals, t, "plan: check rest.is_empty()"))?;
        self.finish(0x62, ResultKind::Proposals)?;
        self.advance(Phase::Implement)?;
        self.run(Command::OpenGeneration(OpenGeneration {
            generation_id: lid(0x80),
            workflow_id: lid(WORKFLOW),
            base_digest: digest_of("repo@9f1c2e0"),
        }))?;
        Ok(())
    }

    /// IMPLEMENT generation 1, then a stale delivery after the attempt finished; freeze.
    pub fn implement_first(&mut self) -> Result<(), SubmitError> {
        use WorkerEventKind as K;
        self.start(0x64, 0x65)?;
        self.claim(lid(0x64))?;
        let t = self.time_ms;
        self.deliver(lid(0x64), 0x73, payload(K::ToolActivity, t, "edited src/config/parser.rs"))?;
        self.deliver(lid(0x64), 0x74, payload(K::CompletionRequest, t + 1, "ready for evidence"))?;
        self.finish(0x64, ResultKind::CompletionRequest)?;
        self.deliver(lid(0x64), 0x75, payload(K::Progress, t + 2, "late progress after the attempt ended"))?;
        self.run(Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x80),
            candidate_digest: digest_of("candidate 1"),
            change_set_digest: digest_of("change set 1"),
        }))?;
        Ok(())
    }

    /// EVIDENCE_BUILD: the check fails. FINAL_VERIFY: REJECT_REPAIRABLE.
    pub fn reject_first(&mut self) -> Result<(), SubmitError> {
        self.advance(Phase::EvidenceBuild)?;
        self.evidence(
            0x90,
            0x80,
            CheckResult::Fail,
            "parser::trailing failed: expected TrailingBytes, got Ok",
        )?;
        self.advance(Phase::FinalVerify)?;
        self.run(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa0),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict: Verdict::RejectRepairable,
            evidence_ids: None,
            reasons: vec!["check parser::trailing failed".to_owned()],
        }))?;
        Ok(())
    }

    /// The repair command for the exact current decision `0xa0`, as a supervisor reads it.
    pub fn repair_command(&self) -> RecordRepair {
        let state = self.ledger.state();
        let d = state.decisions.get(&lid(0xa0)).cloned();
        let (decision_digest, input_manifest_digest, evidence_set_digest) = d
            .map(|d| (d.decision_digest, d.input_manifest_digest, d.evidence_set_digest))
            .unwrap_or_default();
        RecordRepair {
            repair_id: lid(0xb0),
            decision_id: lid(0xa0),
            decision_digest,
            input_manifest_digest,
            evidence_set_digest,
            child_generation_id: lid(0x81),
            constraints_to_preserve: state
                .goals
                .get(&lid(GOAL))
                .map(|g| g.content.preservation_constraints.clone())
                .unwrap_or_default(),
        }
    }

    /// Repair from the exact decision (the child starts from the parent's frozen bytes),
    /// implement again, pass, ACCEPT.
    pub fn repair_and_accept(&mut self) -> Result<(), SubmitError> {
        let repair = self.repair_command();
        self.run(Command::RecordRepair(repair))?;
        self.accept_repair()
    }

    /// After the repair is recorded: implement the child again, pass, ACCEPT.
    pub fn accept_repair(&mut self) -> Result<(), SubmitError> {
        use WorkerEventKind as K;
        self.advance(Phase::Implement)?;
        self.start(0x66, 0x67)?;
        self.claim(lid(0x66))?;
        let t = self.time_ms;
        self.deliver(lid(0x66), 0x76, payload(K::CompletionRequest, t, "now returns TrailingBytes"))?;
        self.finish(0x66, ResultKind::CompletionRequest)?;
        self.run(Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x81),
            candidate_digest: digest_of("candidate 2"),
            change_set_digest: digest_of("change set 2"),
        }))?;
        self.advance(Phase::EvidenceBuild)?;
        self.evidence(0x91, 0x81, CheckResult::Pass, "parser::trailing passed")?;
        self.advance(Phase::FinalVerify)?;
        self.run(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa1),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x81),
            verdict: Verdict::Accept,
            evidence_ids: None,
            reasons: vec!["every obligation has passing evidence".to_owned()],
        }))?;
        Ok(())
    }
}

/// A protected workflow's binding pair, for tests of the plan pair.
pub fn plan_pair() -> Binding {
    Binding { id: lid(0x13), digest: digest_of("acceptance-critical verification plan v1") }
}
