//! Goals: revision strictly +1, content bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use replay_tests::world::{Stage, World};

fn revise(revision: u32) -> Command {
    Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision, content: goal_content() })
}

/// Revisions go strictly +1: skipping or repeating a revision is refused; +1 is admitted.
#[test]
fn goal_revision_not_next() {
    let mut w = World::at(Stage::Setup);
    w.refused(revise(3), Rule::GoalRevisionNotNext);
    w.refused(revise(1), Rule::GoalRevisionNotNext);
    w.ok(revise(2));
    assert_eq!(w.ledger.state().goals[&lid(GOAL)].revision, 2);
    w.refused(revise(2), Rule::GoalRevisionNotNext);
}

/// Revising an unknown goal is refused.
#[test]
fn unknown_goal() {
    let mut w = World::at(Stage::Setup);
    w.refused(
        Command::ReviseGoal(ReviseGoal { goal_id: lid(0xdead), revision: 2, content: goal_content() }),
        Rule::Unknown,
    );
}

/// A goal id is created once.
#[test]
fn id_reused_goal() {
    let mut w = World::at(Stage::Setup);
    w.refused(
        Command::CreateGoal(CreateGoal { goal_id: lid(GOAL), content: goal_content() }),
        Rule::IdReused,
    );
}

/// Blank objectives, text over 65,536 bytes and lists over 128 items are refused.
#[test]
fn out_of_bounds_goal_content() {
    let mut w = World::at(Stage::Setup);
    let mut c = goal_content();
    c.objective = "  ".into();
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
    let mut c = goal_content();
    c.scope = vec!["x".repeat(65_537)];
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
    let mut c = goal_content();
    c.success_criteria = vec!["c".into(); 129];
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
}

/// Regression (found in review): every field within its own bound could still add up to an
/// entry over the 1 MiB decoder limit, which would have been written and then made the
/// whole ledger unreadable. Such a command is refused and nothing is written.
#[test]
fn regression_oversized_entry_is_refused_not_written() {
    let mut w = World::at(Stage::Setup);
    let mut c = goal_content();
    c.scope = vec!["s".repeat(60_000); 20]; // 1.2 MB in total, each item within bounds
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
}
