//! Workflows: exact Goal revision and authority bindings, the plan pair, phase steps.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::Event;
use ledger_schema::events::WorkflowStarted;
use ledger_schema::types::{Binding, Phase, ThreadChoice};
use replay_tests::world::{Stage, World};

fn start(id: u128, revision: u32, profile: u128, plan: Option<Binding>) -> Command {
    Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(id),
        goal_id: lid(GOAL),
        goal_revision: revision,
        policy_id: lid(POLICY),
        profile_id: lid(profile),
        plan,
    })
}

fn advance(phase: Phase, version: u32) -> Command {
    Command::AdvancePhase(AdvancePhase { workflow_id: lid(WORKFLOW), phase, version })
}

/// A workflow must bind the goal's current revision.
#[test]
fn stale_goal_revision_at_start() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.refused(start(0x31, 1, PROFILE, None), Rule::StaleGoalRevision);
    w.ok(start(0x31, 2, PROFILE, None));
}

/// Work bound to a stale goal revision is refused: no attempt, no phase advance.
#[test]
fn stale_goal_revision_refuses_work() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.refused(
        Command::StartAttempt(StartAttempt {
            attempt_id: lid(0x60),
            workflow_id: lid(WORKFLOW),
            worker_session_id: lid(0x61),
            thread: ThreadChoice::Fresh,
        }),
        Rule::StaleGoalRevision,
    );
    w.refused(advance(Phase::Plan, 2), Rule::StaleGoalRevision);
}

/// A workflow whose policy binding names another digest is refused.
#[test]
fn authority_binding() {
    let mut w = World::at(Stage::Setup);
    let wf = w.ledger.state().workflows[&lid(WORKFLOW)].clone();
    w.forged(
        Event::WorkflowStarted(WorkflowStarted {
            workflow_id: lid(0x31),
            goal_id: lid(GOAL),
            goal_revision: 1,
            policy: Binding { id: wf.policy.id, digest: digest_of("an older policy") },
            profile: wf.profile,
            plan: None,
        }),
        Rule::AuthorityBinding,
    );
}

/// Under a protected profile the plan pair is required; without protection it is refused.
#[test]
fn plan_pair_present_exactly_under_protection() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::InstallProfile(InstallProfile {
        profile_id: lid(PROTECTED_PROFILE),
        profile: profile(true),
    }));
    w.refused(start(0x31, 1, PROTECTED_PROFILE, None), Rule::PlanPair);
    w.refused(start(0x32, 1, PROFILE, Some(plan_pair())), Rule::PlanPair);
    w.ok(start(0x33, 1, PROTECTED_PROFILE, Some(plan_pair())));
    assert_eq!(w.ledger.state().workflows[&lid(0x33)].plan, Some(plan_pair()));
}

/// Phases advance one step with version +1; skipping, repeating or a wrong version is refused.
#[test]
fn phase_transition() {
    let mut w = World::at(Stage::Setup);
    w.refused(advance(Phase::Implement, 2), Rule::PhaseTransition);
    w.refused(advance(Phase::Plan, 3), Rule::PhaseTransition);
    w.refused(advance(Phase::Discovery, 2), Rule::PhaseTransition);
    w.ok(advance(Phase::Plan, 2));
}

/// Leaving IMPLEMENT needs the active generation frozen.
#[test]
fn phase_transition_needs_a_frozen_candidate() {
    let mut w = World::at(Stage::Implementing);
    w.refused(advance(Phase::EvidenceBuild, 4), Rule::PhaseTransition);
}

/// A phase does not advance under an active attempt.
#[test]
fn attempt_active_blocks_advance() {
    let mut w = World::at(Stage::Setup);
    w.with(|s| s.start(0x60, 0x61)).unwrap();
    w.refused(advance(Phase::Plan, 2), Rule::AttemptActive);
}

/// A closed (accepted) workflow takes no more work.
#[test]
fn workflow_closed() {
    let mut w = World::at(Stage::Accepted);
    w.refused(advance(Phase::Implement, 9), Rule::WorkflowClosed);
    w.refused(
        Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0xee),
            workflow_id: lid(0xdead),
            description: "x".into(),
        }),
        Rule::Unknown,
    );
}
