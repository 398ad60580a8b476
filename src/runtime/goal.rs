//! Goals: revision 1 at creation, then strictly +1, each revision in full.

use ledger_schema::Event;
use ledger_schema::events::{GoalContent, GoalCreated, GoalRevised};

use super::command::{CreateGoal, ReviseGoal};
use super::state::{GoalState, State};
use super::{Rule, RuleViolation, ensure, fresh, get_mut, list, required_list, required_text};

pub fn decide_create(c: &CreateGoal) -> Event {
    Event::GoalCreated(GoalCreated { goal_id: c.goal_id, content: c.content.clone() })
}

pub fn decide_revise(c: &ReviseGoal) -> Event {
    Event::GoalRevised(GoalRevised { goal_id: c.goal_id, revision: c.revision, content: c.content.clone() })
}

pub(crate) fn check_content(c: &GoalContent) -> Result<(), RuleViolation> {
    required_text("objective", &c.objective)?;
    required_list("successCriteria", &c.success_criteria)?;
    required_list("scope", &c.scope)?;
    list("nonGoals", &c.non_goals)?;
    list("preservationConstraints", &c.preservation_constraints)
}

pub fn apply_created(state: &mut State, e: &GoalCreated, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.goals, e.goal_id, "goal")?;
    check_content(&e.content)?;
    let digest = e.content.digest();
    let revision_digests = vec![digest];
    state.goals.insert(
        e.goal_id,
        GoalState { revision: 1, content: e.content.clone(), digest, seq, revision_digests },
    );
    Ok(())
}

pub fn apply_revised(state: &mut State, e: &GoalRevised, seq: u64) -> Result<(), RuleViolation> {
    check_content(&e.content)?;
    let goal = get_mut(&mut state.goals, e.goal_id, "goal")?;
    ensure!(
        Some(e.revision) == goal.revision.checked_add(1),
        Rule::GoalRevisionNotNext,
        "goal {} is at revision {}; a revision must be {}",
        e.goal_id,
        goal.revision,
        goal.revision.saturating_add(1)
    );
    let digest = e.content.digest();
    goal.revision_digests.push(digest);
    goal.revision = e.revision;
    goal.content = e.content.clone();
    goal.digest = digest;
    goal.seq = seq;
    Ok(())
}
