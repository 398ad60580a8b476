//! Workflows: exact Goal revision and authority bindings, the plan pair, phase steps.

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
            selection_receipt: None,
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
    // A plan id names one plan: another workflow may bind the same pair, not the same id
    // with another digest (outside review 16, P2: both were admitted).
    let mut substituted = plan_pair();
    substituted.digest = digest_of("another plan");
    w.refused(start(0x34, 1, PROTECTED_PROFILE, Some(substituted)), Rule::PlanPair);
    w.ok(start(0x35, 1, PROTECTED_PROFILE, Some(plan_pair())));
    // A plan verifies one goal: another goal's workflow may not bind it (outside review 67).
    w.ok(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: goal_content() }));
    let other_goal = |id: u128, plan| {
        Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(id),
            goal_id: lid(0x21),
            goal_revision: 1,
            policy_id: lid(POLICY),
            profile_id: lid(PROTECTED_PROFILE),
            plan: Some(plan),
        })
    };
    let err = w.fails(other_goal(0x36, plan_pair()));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PlanPair), "{err}");
    assert!(err.to_string().contains("verification plan of goal"), "{err}");
    // Nor the same plan under a fresh id: the digest is the plan (outside review 84).
    let mut alias = plan_pair();
    alias.id = lid(0x7ff);
    let err = w.fails(other_goal(0x36, alias));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PlanPair), "{err}");
    assert!(err.to_string().contains("verification plan of goal"), "{err}");
    let mut its_own = alias;
    its_own.digest = digest_of("goal 0x21's own verification plan");
    w.ok(other_goal(0x36, its_own));
}

/// A plan verifies one revision of its goal (outside review 113 F3, P3: a workflow of goal
/// revision 2, which reversed the objective, bound revision 1's plan): by id or by digest,
/// refused; a plan of its own is admitted, and workflows of one revision share a plan.
#[test]
fn a_plan_verifies_one_goal_revision() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::InstallProfile(InstallProfile {
        profile_id: lid(PROTECTED_PROFILE),
        profile: profile(true),
    }));
    w.ok(start(0x33, 1, PROTECTED_PROFILE, Some(plan_pair())));
    w.ok(start(0x34, 1, PROTECTED_PROFILE, Some(plan_pair())));
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    let mut alias = plan_pair();
    alias.id = lid(0x7ff);
    for plan in [plan_pair(), alias] {
        let err = w.fails(start(0x35, 2, PROTECTED_PROFILE, Some(plan)));
        assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PlanPair), "{err}");
        assert!(err.to_string().contains("at revision 1"), "{err}");
    }
    let mut its_own = alias;
    its_own.digest = digest_of("revision 2's verification plan");
    w.ok(start(0x35, 2, PROTECTED_PROFILE, Some(its_own)));
}

/// A Policy's capabilities are the supervisor's prose, not read for surfaces: a protected
/// workflow admits a policy restating the seed's prohibitions or naming code that shares a
/// surface's word (outside review 116 F2: reading the prose refused "no web search, no
/// MCP", "edit src/hooks/mod.rs"); the bounded profile's surfaces are held at its input
/// closure and each dispatch claim's report (rules.md, `InputClosure`).
#[test]
fn a_protected_workflows_capabilities_are_prose() {
    let mut bundle = policy_bundle();
    if let Some(p) = bundle.phases.first_mut() {
        p.capabilities = vec![
            "edit src/hooks/mod.rs".to_owned(),
            "fix the MCP client module".to_owned(),
            "read the repository (no web search, no MCP, no subagents)".to_owned(),
        ];
    }
    let mut w = World::at(Stage::Setup);
    w.ok(Command::InstallPolicy(InstallPolicy { policy_id: lid(0x100), bundle }));
    w.ok(Command::InstallProfile(InstallProfile {
        profile_id: lid(PROTECTED_PROFILE),
        profile: profile(true),
    }));
    w.ok(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x31),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(0x100),
        profile_id: lid(PROTECTED_PROFILE),
        plan: Some(plan_pair()),
    }));
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

/// FINAL_VERIFY decides over the Evidence Set: leaving EVIDENCE_BUILD with none recorded is
/// refused (outside review 21: every verdict was then refused, a dead end but for cancel).
#[test]
fn phase_transition_needs_evidence_for_final_verify() {
    use ledger_schema::types::CheckResult;
    let mut w = World::at(Stage::Frozen);
    let version = |w: &World| w.ledger.state().workflows[&lid(WORKFLOW)].version;
    w.ok(advance(Phase::EvidenceBuild, version(&w) + 1));
    let v = version(&w) + 1;
    let err = w.fails(advance(Phase::FinalVerify, v));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PhaseTransition), "{err}");
    assert!(err.to_string().contains("Evidence Set is empty"), "{err}");
    w.with(|s| s.evidence(0x90, 0x80, CheckResult::Pass, "passed")).unwrap();
    w.ok(advance(Phase::FinalVerify, v));
}

/// FINAL_VERIFY steps back to EVIDENCE_BUILD before a verdict (outside review 39): a set it
/// cannot decide — a runner ERROR (neither ACCEPT nor REJECT_REPAIRABLE), an obligation
/// recorded after the checks ran with no failing one (no ACCEPT, no REJECT_REPAIRABLE; its
/// failing check then repairs under the current context) — gets its checks, instead of a terminal rejection judging the candidate on an engine
/// fault or a check never run. Not after a verdict, not from another phase.
#[test]
fn final_verify_steps_back_to_evidence_build_before_a_verdict() {
    use closure_ledger::runtime::command::{DecideAcceptance, RecordEvidence, RecordObligation};
    use ledger_schema::types::{CheckResult, Verdict};
    let version = |w: &World| w.ledger.state().workflows[&lid(WORKFLOW)].version;
    let decide = |verdict, id: u128| {
        Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(id),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict,
            evidence_ids: None,
            reasons: vec!["decided".into()],
        })
    };
    // A world in FINAL_VERIFY over generation 0x80 with one check (0x90) of `result`.
    let verifying = |result| {
        let mut w = World::at(Stage::Frozen);
        w.ok(advance(Phase::EvidenceBuild, version(&w) + 1));
        w.with(|s| s.evidence(0x90, 0x80, result, "first check")).unwrap();
        w.ok(advance(Phase::FinalVerify, version(&w) + 1));
        w
    };
    // A runner error: re-run after the step back, then decided.
    let mut w = verifying(CheckResult::Error);
    w.refused(decide(Verdict::RejectRepairable, 0xa5), Rule::RunnerError);
    w.refused(advance(Phase::Implement, version(&w) + 1), Rule::PhaseTransition);
    w.ok(advance(Phase::EvidenceBuild, version(&w) + 1));
    w.with(|s| s.evidence(0x91, 0x80, CheckResult::Pass, "passed on re-run")).unwrap();
    w.ok(advance(Phase::FinalVerify, version(&w) + 1));
    w.ok(decide(Verdict::Accept, 0xa5));
    // An obligation recorded in FINAL_VERIFY: checked after the step back.
    let mut w = verifying(CheckResult::Pass);
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x47),
        goal_id: lid(GOAL),
        description: "a second obligation".into(),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check 2"),
    }));
    w.refused(decide(Verdict::Accept, 0xa5), Rule::Verdict);
    w.refused(decide(Verdict::RejectRepairable, 0xa5), Rule::Verdict);
    w.ok(advance(Phase::EvidenceBuild, version(&w) + 1));
    let candidate_digest = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    w.ok(Command::RecordEvidence(RecordEvidence {
        evidence_id: lid(0x92),
        workflow_id: lid(WORKFLOW),
        generation_id: lid(0x80),
        candidate_digest,
        obligation_id: lid(0x47),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check 2"),
        result: CheckResult::Fail,
        detail: "failed".into(),
    }));
    w.ok(advance(Phase::FinalVerify, version(&w) + 1));
    w.ok(decide(Verdict::RejectRepairable, 0xa5));
    // After a verdict the generation is judged: no step back.
    let mut w = verifying(CheckResult::Fail);
    w.ok(decide(Verdict::RejectRepairable, 0xa5));
    let err = w.fails(advance(Phase::EvidenceBuild, version(&w) + 1));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PhaseTransition), "{err}");
    assert!(err.to_string().contains("its generation is decided"), "says why (outside review 43): {err}");
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

/// After `reviseGoal` nothing bound to the old revision advances the workflow: the old
/// Attempt's result is refused (`StaleGoalRevision`; its events are ignored receipts, see
/// `rules_worker::goal_revised_events_are_ignored_receipts`), so are blockers on the stale
/// workflow; the Attempt can still be cancelled, the stale workflow cancelled, and a new
/// workflow's Attempt compiles with the new revision.
#[test]
fn stale_goal_revision_refuses_results() {
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))
    })
    .unwrap();
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.refused(
        Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(0x60),
            result_kind: ledger_schema::types::ResultKind::Proposals,
            summary: "done".into(),
        }),
        Rule::StaleGoalRevision,
    );
    w.refused(
        Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0xe0),
            workflow_id: lid(WORKFLOW),
            description: "x".into(),
        }),
        Rule::StaleGoalRevision,
    );
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x60),
        workflow_version: 1,
        reason: "the goal was revised".into(),
    }));
    w.ok(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(WORKFLOW),
        workflow_version: 1,
        reason: "superseded by revision 2".into(),
    }));
    w.ok(start(0x31, 2, PROFILE, None));
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x68),
        workflow_id: lid(0x31),
        worker_session_id: lid(0x69),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    let Event::AttemptStarted(a) = w.last_event("attemptStarted") else { unreachable!() };
    assert_eq!(a.manifest.goal_revision, 2);
}

/// Every command that names a closed workflow — directly or through its attempt,
/// generation, blocker, decision or repair — is refused `WorkflowClosed` (after ACCEPT,
/// after REJECT_TERMINAL, after cancellation), writing nothing.
#[test]
fn workflow_closed_takes_no_work() {
    fn closed_commands(w: &World) -> Vec<Command> {
        let s = w.ledger.state();
        let wf = &s.workflows[&lid(WORKFLOW)];
        let generation = wf.active_generation.unwrap();
        let frozen = s.generations[&generation].frozen_digest().unwrap_or_default();
        vec![
            Command::RaiseBlocker(RaiseBlocker {
                blocker_id: lid(0xe0),
                workflow_id: lid(WORKFLOW),
                description: "x".into(),
            }),
            Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0xe1), resolution: "done".into() }),
            advance(Phase::Implement, wf.version + 1),
            Command::StartAttempt(StartAttempt {
                attempt_id: lid(0xe2),
                workflow_id: lid(WORKFLOW),
                worker_session_id: lid(0xe3),
                thread: ThreadChoice::Fresh,
                selection_receipt: None,
            }),
            Command::OpenGeneration(OpenGeneration {
                generation_id: lid(0xe4),
                workflow_id: lid(WORKFLOW),
                base_digest: digest_of("base"),
            }),
            Command::FreezeGeneration(FreezeGeneration {
                generation_id: generation,
                candidate_digest: digest_of("c"),
                change_set_digest: digest_of("s"),
            }),
            Command::RecordEvidence(RecordEvidence {
                evidence_id: lid(0xe5),
                workflow_id: lid(WORKFLOW),
                generation_id: generation,
                candidate_digest: frozen,
                obligation_id: lid(OBLIGATION),
                check_spec_id: lid(CHECK_SPEC),
                check_spec_digest: digest_of("check: cargo test parser::trailing"),
                result: ledger_schema::types::CheckResult::Pass,
                detail: "ok".into(),
            }),
            Command::DecideAcceptance(DecideAcceptance {
                decision_id: lid(0xe6),
                workflow_id: lid(WORKFLOW),
                generation_id: generation,
                verdict: ledger_schema::types::Verdict::RejectTerminal,
                evidence_ids: None,
                reasons: vec!["x".into()],
            }),
            Command::CancelWorkflow(CancelWorkflow {
                workflow_id: lid(WORKFLOW),
                workflow_version: wf.version,
                reason: "x".into(),
            }),
        ]
    }
    let blocker = Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xe1),
        workflow_id: lid(WORKFLOW),
        description: "CI is red".into(),
    });
    // ACCEPT (which needs the blocker resolved first: `OpenBlocker`; a resolved blocker of
    // a closed workflow is still named by `resolveBlocker`, refused as `WorkflowClosed`).
    let mut w = World::at(Stage::Setup);
    w.ok(blocker.clone());
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()?;
        s.reject_first()?;
        s.run(Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0xe1), resolution: "green".into() }))?;
        s.repair_and_accept()
    })
    .unwrap();
    assert!(w.ledger.state().workflows[&lid(WORKFLOW)].closed);
    for c in closed_commands(&w) {
        w.refused(c, Rule::WorkflowClosed);
    }
    // REJECT_TERMINAL.
    let mut w = World::at(Stage::Setup);
    w.ok(blocker.clone());
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, ledger_schema::types::CheckResult::Error, "runner crashed")?;
        s.advance(Phase::FinalVerify)?;
        s.run(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa0),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict: ledger_schema::types::Verdict::RejectTerminal,
            evidence_ids: None,
            reasons: vec!["the runner cannot run this check".into()],
        }))
    })
    .unwrap();
    for c in closed_commands(&w) {
        w.refused(c, Rule::WorkflowClosed);
    }
    let repair = w.with(|s| s.repair_command());
    w.refused(Command::RecordRepair(repair), Rule::WorkflowClosed);
    // Cancelled.
    let mut w = World::at(Stage::Setup);
    w.ok(blocker);
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()
    })
    .unwrap();
    w.ok(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(WORKFLOW),
        workflow_version: 3,
        reason: "withdrawn".into(),
    }));
    for c in closed_commands(&w) {
        w.refused(c, Rule::WorkflowClosed);
    }
}

/// Cancelling a workflow serializes on its version (a stale version is refused), ends the
/// active Attempt (interrupted: its late events are ignored receipts), and closes the
/// workflow; only the workflow and its Attempt change.
#[test]
fn cancel_workflow() {
    let mut w = World::at(Stage::Implementing);
    w.with(|s| {
        s.start(0x64, 0x65)?;
        s.claim(lid(0x64))
    })
    .unwrap();
    let cancel = |version| {
        Command::CancelWorkflow(CancelWorkflow {
            workflow_id: lid(WORKFLOW),
            workflow_version: version,
            reason: "the goal was withdrawn".into(),
        })
    };
    w.refused(cancel(2), Rule::StaleWorkflowVersion);
    w.refused(cancel(4), Rule::StaleWorkflowVersion);
    let mut blank = cancel(3);
    if let Command::CancelWorkflow(c) = &mut blank {
        c.reason = " ".into();
    }
    w.refused(blank, Rule::OutOfBounds);
    let before = w.ledger.state().clone();
    let cancelled = w.ok(cancel(3));
    let after = w.ledger.state().clone();
    let wf = &after.workflows[&lid(WORKFLOW)];
    assert!(wf.closed && wf.cancelled && wf.active_attempt.is_none());
    assert_eq!(wf.version, 3);
    assert_eq!(
        after.attempts[&lid(0x64)].status,
        closure_ledger::runtime::state::AttemptStatus::Cancelled { interrupted: true }
    );
    assert_eq!(
        (&after.goals, &after.generations, &after.evidence),
        (&before.goals, &before.generations, &before.evidence)
    );
    w.with(|s| {
        s.deliver(lid(0x64), 0x7a, payload(ledger_schema::events::WorkerEventKind::Progress, 1, "late"))
    })
    .unwrap();
    let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
    assert_eq!(i.reason, ledger_schema::events::IgnoredReason::AttemptEnded);
    // Exactly the same cancellation again is a redelivery (the original receipt); another
    // one is refused: the workflow is closed.
    assert_eq!(w.ok(cancel(3)).seq, cancelled.seq);
    let mut other = cancel(3);
    if let Command::CancelWorkflow(c) = &mut other {
        c.reason = "another reason".into();
    }
    w.refused(other, Rule::WorkflowClosed);
}

/// Back to IMPLEMENT before the repair is recorded: refused, naming the step that is missing
/// (outside review 211 F3: a bare "cannot go from FINAL_VERIFY to IMPLEMENT").
#[test]
fn back_to_implement_before_the_repair_names_record_repair() {
    let mut w = World::at(Stage::Rejected);
    let version = w.ledger.state().workflows[&lid(WORKFLOW)].version;
    let err = w.fails(Command::AdvancePhase(AdvancePhase {
        workflow_id: lid(WORKFLOW),
        phase: ledger_schema::types::Phase::Implement,
        version: version + 1,
    }));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PhaseTransition), "{err}");
    assert!(err.to_string().contains("`recordRepair`"), "{err}");
}
