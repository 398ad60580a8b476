//! Idempotent redelivery of every command (issue #13 item 10).
//!
//! Every admitted command takes one *step* of one record, and the step has a key: the
//! command's own id for a command that creates a record (`createGoal` → the goal id), or the
//! record and the version/revision the transition creates for one that has none of its own
//! (`advancePhase` → workflow and version, `reviseGoal` → goal and revision, `confirmFact` →
//! fact and revision), or the record alone for a transition that happens once
//! (`claimDispatch`, the end of an Attempt, `resolveBlocker`, `freezeGeneration`,
//! `cancelWorkflow`). Steps
//! never repeat, so a key names exactly one entry forever.
//!
//! The projection keeps, per key, only the seq of the command's receipt entry (the
//! [`Receipts`] index: one small item per admitted command, never the command). A command
//! whose key is taken is judged against the stored original entry ([`same_command`]): the
//! same command (same ids, same content) is a duplicate whose receipt is the original's;
//! anything else is decided as a new command, and its rules refuse it (the step is taken:
//! `IdReused`, `PhaseTransition`, `AttemptNotActive`, …), writing nothing. Worker events
//! keep their own index (`State::worker_events`) and conflict rule (`worker::redelivery`).

use ledger_schema::types::ThreadChoice;
use ledger_schema::{Event, Id};
use serde::{Serialize, Serializer};

use super::command::Command;
use super::state::State;

/// The step a command takes (the first byte of its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
enum Step {
    Policy = 1,
    Profile = 2,
    Goal = 3,
    GoalRevision = 4,
    Workflow = 5,
    Advance = 6,
    WorkflowCancel = 7,
    FactRevision = 8,
    FactConfirm = 9,
    FactInvalidate = 10,
    HumanDecision = 11,
    Source = 12,
    Scenario = 13,
    Obligation = 14,
    Blocker = 15,
    BlockerResolution = 16,
    Generation = 17,
    Freeze = 18,
    Attempt = 19,
    Claim = 20,
    AttemptEnd = 21,
    Evidence = 22,
    Decision = 23,
    Repair = 24,
    ScenarioRetirement = 25,
    ObligationRetirement = 26,
    CompactionDirective = 27,
    SourceWithdrawal = 28,
    DecisionWithdrawal = 29,
}

/// A command's key: its step, the record's id and (for versioned transitions) the
/// version or revision it creates (0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    step: Step,
    id: Id,
    version: u32,
}

impl Key {
    fn of(step: Step, id: Id) -> Key {
        Key { step, id, version: 0 }
    }

    fn at(step: Step, id: Id, version: u32) -> Key {
        Key { step, id, version }
    }

    /// 21 bytes: step, the 16 id bytes, the version big-endian — so the canonical order of
    /// the encoded keys (all the same length) is the order of `Key`.
    fn bytes(&self) -> [u8; 21] {
        let mut out = [0u8; 21];
        let (step, rest) = out.split_at_mut(1);
        let (id, version) = rest.split_at_mut(16);
        step.copy_from_slice(&[self.step as u8]);
        id.copy_from_slice(&self.id.to_bytes());
        version.copy_from_slice(&self.version.to_be_bytes());
        out
    }
}

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.bytes())
    }
}

/// The receipt index: every admitted command's key → the seq of its receipt entry. A plain
/// persistent map, not `state::Map`: its values are one `u64` each, which an `Arc` would only
/// cost an allocation per command (`ledger replay` −5 % measured with it).
pub type Receipts = imbl::OrdMap<Key, u64>;

/// The key an admitted entry records (for a two-entry command, its last entry's key is the
/// command's: `recordRepair`'s child opening overwrites the repair's own seq).
fn recorded_key(event: &Event) -> Option<Key> {
    use Step as S;
    Some(match event {
        Event::PolicyBundleInstalled(e) => Key::of(S::Policy, e.policy_id),
        Event::ExecutionProfileInstalled(e) => Key::of(S::Profile, e.profile_id),
        Event::GoalCreated(e) => Key::of(S::Goal, e.goal_id),
        Event::GoalRevised(e) => Key::at(S::GoalRevision, e.goal_id, e.revision),
        Event::WorkflowStarted(e) => Key::of(S::Workflow, e.workflow_id),
        Event::PhaseAdvanced(e) => Key::at(S::Advance, e.workflow_id, e.version),
        Event::WorkflowCancelled(e) => Key::of(S::WorkflowCancel, e.workflow_id),
        Event::FactProposed(e) => Key::at(S::FactRevision, e.fact_id, e.revision),
        Event::FactConfirmed(e) => Key::at(S::FactConfirm, e.fact_id, e.revision),
        Event::FactInvalidated(e) => Key::at(S::FactInvalidate, e.fact_id, e.revision),
        Event::HumanDecisionRecorded(e) => Key::of(S::HumanDecision, e.decision_id),
        Event::ProjectSourceRecorded(e) => Key::of(S::Source, e.source_id),
        Event::ScenarioRecorded(e) => Key::of(S::Scenario, e.scenario_id),
        Event::ObligationRecorded(e) => Key::of(S::Obligation, e.obligation_id),
        Event::BlockerRaised(e) => Key::of(S::Blocker, e.blocker_id),
        Event::BlockerResolved(e) => Key::of(S::BlockerResolution, e.blocker_id),
        Event::ScenarioRetired(e) => Key::of(S::ScenarioRetirement, e.scenario_id),
        Event::ObligationRetired(e) => Key::of(S::ObligationRetirement, e.obligation_id),
        Event::CompactionRequested(e) => Key::of(S::CompactionDirective, e.directive_id),
        Event::ProjectSourceWithdrawn(e) => Key::of(S::SourceWithdrawal, e.source_id),
        Event::HumanDecisionWithdrawn(e) => Key::of(S::DecisionWithdrawal, e.decision_id),
        Event::GenerationOpened(e) => match e.repair_id {
            Some(repair_id) => Key::of(S::Repair, repair_id),
            None => Key::of(S::Generation, e.generation_id),
        },
        Event::GenerationFrozen(e) => Key::of(S::Freeze, e.generation_id),
        Event::AttemptStarted(e) => Key::of(S::Attempt, e.attempt_id),
        Event::DispatchClaimed(e) => Key::of(S::Claim, e.attempt_id),
        Event::AttemptFinished(e) => Key::of(S::AttemptEnd, e.attempt_id),
        Event::AttemptFailed(e) => Key::of(S::AttemptEnd, e.attempt_id),
        Event::AttemptCancelled(e) => Key::of(S::AttemptEnd, e.attempt_id),
        Event::EvidenceRecorded(e) => Key::of(S::Evidence, e.evidence_id),
        Event::AcceptanceDecided(e) => Key::of(S::Decision, e.decision_id),
        Event::RepairRecorded(e) => Key::of(S::Repair, e.repair_id),
        Event::LedgerInitialized(_)
        | Event::WorkerEventAdmitted(_)
        | Event::WorkerDeliveryIgnored(_)
        | Event::SourceRegistryRecorded(_)
        | Event::ProfileRevisionRecorded(_)
        | Event::SelectionRecorded(_) => return None,
    })
}

/// Indexes an entry `apply` has just admitted.
pub(super) fn index(state: &mut State, event: &Event, seq: u64) {
    if let Some(key) = recorded_key(event) {
        state.receipts.insert(key, seq);
    }
}

/// The key a command takes; `None` for a worker event (its own index).
fn command_key(command: &Command) -> Option<Key> {
    use Command as C;
    use Step as S;
    Some(match command {
        C::InstallPolicy(c) => Key::of(S::Policy, c.policy_id),
        C::InstallProfile(c) => Key::of(S::Profile, c.profile_id),
        C::CreateGoal(c) => Key::of(S::Goal, c.goal_id),
        C::ReviseGoal(c) => Key::at(S::GoalRevision, c.goal_id, c.revision),
        C::StartWorkflow(c) => Key::of(S::Workflow, c.workflow_id),
        C::AdvancePhase(c) => Key::at(S::Advance, c.workflow_id, c.version),
        C::ProposeFact(c) => Key::at(S::FactRevision, c.fact_id, c.revision),
        C::ConfirmFact(c) => Key::at(S::FactConfirm, c.fact_id, c.revision),
        C::InvalidateFact(c) => Key::at(S::FactInvalidate, c.fact_id, c.revision),
        C::RecordHumanDecision(c) => Key::of(S::HumanDecision, c.decision_id),
        C::RecordProjectSource(c) => Key::of(S::Source, c.source_id),
        C::RecordScenario(c) => Key::of(S::Scenario, c.scenario_id),
        C::RecordObligation(c) => Key::of(S::Obligation, c.obligation_id),
        C::RaiseBlocker(c) => Key::of(S::Blocker, c.blocker_id),
        C::ResolveBlocker(c) => Key::of(S::BlockerResolution, c.blocker_id),
        C::RetireScenario(c) => Key::of(S::ScenarioRetirement, c.scenario_id),
        C::RetireObligation(c) => Key::of(S::ObligationRetirement, c.obligation_id),
        C::RequestCompaction(c) => Key::of(S::CompactionDirective, c.directive_id),
        C::WithdrawProjectSource(c) => Key::of(S::SourceWithdrawal, c.source_id),
        C::WithdrawHumanDecision(c) => Key::of(S::DecisionWithdrawal, c.decision_id),
        C::OpenGeneration(c) => Key::of(S::Generation, c.generation_id),
        C::FreezeGeneration(c) => Key::of(S::Freeze, c.generation_id),
        C::StartAttempt(c) => Key::of(S::Attempt, c.attempt_id),
        C::ClaimDispatch(c) => Key::of(S::Claim, c.attempt_id),
        C::DeliverWorkerEvent(_) => return None,
        C::FinishAttempt(c) => Key::of(S::AttemptEnd, c.attempt_id),
        C::FailAttempt(c) => Key::of(S::AttemptEnd, c.attempt_id),
        C::CancelAttempt(c) => Key::of(S::AttemptEnd, c.attempt_id),
        C::RecordEvidence(c) => Key::of(S::Evidence, c.evidence_id),
        C::DecideAcceptance(c) => Key::of(S::Decision, c.decision_id),
        C::RecordRepair(c) => Key::of(S::Repair, c.repair_id),
        C::CancelWorkflow(c) => Key::of(S::WorkflowCancel, c.workflow_id),
        C::RestartAttempt(c) => Key::of(S::Attempt, c.replacement_attempt_id),
    })
}

/// The seq of the receipt entry of the step `command` would take, if that step is taken:
/// the command is then either a redelivery of that entry's command or refused.
pub fn recorded(state: &State, command: &Command) -> Option<u64> {
    command_key(command).and_then(|key| state.receipts.get(&key).copied())
}

/// How many entries `command` writes (its receipt is the last): 2 for `recordRepair` (the
/// repair, the child's opening) and `restartAttempt` (the cancellation, the replacement's
/// start), 1 otherwise.
pub fn span(command: &Command) -> u64 {
    match command {
        Command::RecordRepair(_) | Command::RestartAttempt(_) => 2,
        _ => 1,
    }
}

/// Whether `originals` — the [`span`] entries ending at the receipt [`recorded`] names —
/// are exactly what `command` recorded: the same ids and the same content. Where a
/// command's events depend on nothing but the command, the events it decides now must equal
/// the stored ones byte for byte; where they also hold what the ledger derived from the state
/// at the time (bindings, computed sets and digests, compiled manifests), every field the
/// command supplied must equal the recorded one.
pub fn same_command(state: &State, command: &Command, originals: &[Event]) -> bool {
    use Command as C;
    if let Some(event) = super::decide_from_command(command) {
        return matches!(originals, [original] if *original == event);
    }
    match command {
        C::StartWorkflow(c) => matches!(originals, [Event::WorkflowStarted(e)]
            if e.workflow_id == c.workflow_id
                && e.goal_id == c.goal_id
                && e.goal_revision == c.goal_revision
                && e.policy.id == c.policy_id
                && e.profile.id == c.profile_id
                && e.plan == c.plan),
        C::StartAttempt(c) => matches!(originals, [Event::AttemptStarted(e)]
            if e.attempt_id == c.attempt_id
                && e.workflow_id == c.workflow_id
                && e.worker_session_id == c.worker_session_id
                && e.thread == c.thread
                && e.selection_receipt == c.selection_receipt),
        C::RestartAttempt(c) => match originals {
            [cancel @ Event::AttemptCancelled(_), Event::AttemptStarted(start)] => {
                *cancel == super::restart_cancellation(c)
                    && start.attempt_id == c.replacement_attempt_id
                    && start.worker_session_id == c.worker_session_id
                    && start.thread == ThreadChoice::Fresh
                    && state.attempts.get(&c.attempt_id).map(|a| (a.workflow_id, a.selection_receipt))
                        == Some((start.workflow_id, start.selection_receipt))
            }
            _ => false,
        },
        C::DecideAcceptance(c) => match originals {
            [Event::AcceptanceDecided(e)] => {
                let named_set_matches = c.evidence_ids.as_ref().is_none_or(|named| {
                    let mut named = named.clone();
                    named.sort_unstable();
                    named.iter().eq(e.input_manifest.evidence.iter().map(|r| &r.evidence_id))
                });
                e.decision_id == c.decision_id
                    && e.workflow_id == c.workflow_id
                    && e.generation_id == c.generation_id
                    && e.verdict == c.verdict
                    && e.reasons == c.reasons
                    && named_set_matches
            }
            _ => false,
        },
        C::RecordRepair(c) => match originals {
            [Event::RepairRecorded(r), Event::GenerationOpened(g)] => {
                r.repair_id == c.repair_id
                    && r.decision_id == c.decision_id
                    && r.decision_digest == c.decision_digest
                    && r.input_manifest_digest == c.input_manifest_digest
                    && r.evidence_set_digest == c.evidence_set_digest
                    && r.child_generation_id == c.child_generation_id
                    && same_set(&r.constraints_to_preserve, &c.constraints_to_preserve)
                    && g.generation_id == c.child_generation_id
                    && g.repair_id == Some(c.repair_id)
            }
            _ => false,
        },
        // Worker events are judged by `worker::redelivery` (a different payload is a
        // conflict, not a new command); every other command was compared above.
        _ => false,
    }
}

/// The same strings in any order: a repair records its constraints in the Goal's order
/// whatever order the command listed them in (`repair::in_goal_order`), so the same command
/// sent again is a redelivery in that order too (outside review 250 F1: it was refused as
/// `IdReused`).
fn same_set(recorded: &[String], given: &[String]) -> bool {
    fn sorted(v: &[String]) -> Vec<&String> {
        let mut v: Vec<&String> = v.iter().collect();
        v.sort_unstable();
        v
    }
    sorted(recorded) == sorted(given)
}
