//! Candidate generations: the first opened once; frozen once; nothing frozen under an
//! active attempt.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::Event;
use ledger_schema::events::GenerationOpened;
use replay_tests::world::{Stage, World};

fn freeze(id: u128) -> Command {
    Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(id),
        candidate_digest: digest_of("c"),
        change_set_digest: digest_of("cs"),
    })
}

/// A workflow's first generation is opened once; later ones come only from repairs — said
/// in every phase, not only IMPLEMENT (outside review 205 F4: past IMPLEMENT the refusal
/// sent the caller to IMPLEMENT, where this one then refused it).
#[test]
fn generation_open_once() {
    let open = || {
        Command::OpenGeneration(OpenGeneration {
            generation_id: lid(0x82),
            workflow_id: lid(WORKFLOW),
            base_digest: digest_of("b"),
        })
    };
    let mut w = World::at(Stage::Implementing);
    w.refused(open(), Rule::GenerationOpen);
    let mut w = World::at(Stage::Rejected);
    w.refused(open(), Rule::GenerationOpen);
}

/// A generation that claims a parent without a repair record is refused.
#[test]
fn generation_open_without_repair_has_no_parent() {
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.advance(ledger_schema::types::Phase::Plan)?;
        s.advance(ledger_schema::types::Phase::Implement)
    })
    .unwrap();
    w.forged(
        Event::GenerationOpened(GenerationOpened {
            generation_id: lid(0x82),
            workflow_id: lid(WORKFLOW),
            sequence: 2,
            base_digest: digest_of("b"),
            parent: Some(lid(0x80)),
            repair_id: None,
        }),
        Rule::GenerationOpen,
    );
}

/// Frozen is final.
#[test]
fn generation_not_mutable() {
    let mut w = World::at(Stage::Frozen);
    w.refused(freeze(0x80), Rule::GenerationNotMutable);
}

/// A generation does not freeze while an attempt works on it.
#[test]
fn attempt_active_blocks_freeze() {
    let mut w = World::at(Stage::Implementing);
    w.with(|s| s.start(0x64, 0x65)).unwrap();
    w.refused(freeze(0x80), Rule::AttemptActive);
}

fn open_first() -> Command {
    Command::OpenGeneration(OpenGeneration {
        generation_id: lid(0x80),
        workflow_id: lid(WORKFLOW),
        base_digest: digest_of("base"),
    })
}

/// Runs one IMPLEMENT Attempt to a COMPLETION_REQUEST result, as the lifecycle does.
fn implement(w: &mut World, attempt: u128, session: u128, event: u128) {
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    w.with(|s| {
        s.start(attempt, session)?;
        s.claim(lid(attempt))?;
        let t = s.time_ms;
        s.deliver(lid(attempt), event, payload(WorkerEventKind::CompletionRequest, t, "repaired"))?;
        s.finish(attempt, ResultKind::CompletionRequest)
    })
    .unwrap();
}

/// DISCOVERY and PLAN stay Candidate-free: a first generation opens only in IMPLEMENT
/// (refused as a command and as a forged event, so replay refuses it too).
#[test]
fn candidate_phase_open_only_in_implement() {
    let mut w = World::at(Stage::Setup);
    w.refused(open_first(), Rule::CandidatePhase);
    w.forged(
        Event::GenerationOpened(GenerationOpened {
            generation_id: lid(0x80),
            workflow_id: lid(WORKFLOW),
            sequence: 1,
            base_digest: digest_of("base"),
            parent: None,
            repair_id: None,
        }),
        Rule::CandidatePhase,
    );
    w.with(|s| s.advance(ledger_schema::types::Phase::Plan)).unwrap();
    w.refused(open_first(), Rule::CandidatePhase);
    w.with(|s| s.advance(ledger_schema::types::Phase::Implement)).unwrap();
    w.ok(open_first());
}

/// A generation freezes only in IMPLEMENT: a repair child opened in FINAL_VERIFY is not
/// frozen there (it would strand the workflow).
#[test]
fn candidate_phase_freeze_only_in_implement() {
    let mut w = World::at(Stage::Rejected);
    let repair = w.with(|s| s.repair_command());
    w.ok(Command::RecordRepair(repair));
    w.refused(freeze(0x81), Rule::CandidatePhase);
    w.forged(
        Event::GenerationFrozen(ledger_schema::events::GenerationFrozen {
            generation_id: lid(0x81),
            candidate_digest: digest_of("c"),
            change_set_digest: digest_of("cs"),
        }),
        Rule::CandidatePhase,
    );
}

/// A freeze needs a Worker's finished COMPLETION_REQUEST Attempt on that exact generation.
#[test]
fn candidate_work_freeze_needs_a_finished_attempt() {
    let mut w = World::at(Stage::Implementing);
    w.refused(freeze(0x80), Rule::CandidateWork);
    // An Attempt that started but did not finish is no work either.
    w.with(|s| {
        s.start(0x64, 0x65)?;
        s.run(Command::FailAttempt(FailAttempt { attempt_id: lid(0x64), reason: "crashed".to_owned() }))
    })
    .unwrap();
    w.refused(freeze(0x80), Rule::CandidateWork);
    implement(&mut w, 0x66, 0x67, 0x76);
    w.ok(freeze(0x80));
}

/// A freeze stands on the generation's last dispatched Attempt: one dispatched after the
/// finished result that then failed or was cancelled may have left half its edits in the
/// candidate, so the freeze waits for a new finished Attempt (outside review 21: the freeze
/// stood on the earlier result). An Attempt cancelled before its dispatch never ran and
/// does not count. Refused as a command and as a forged event.
#[test]
fn candidate_work_freeze_stands_on_the_last_dispatched_attempt() {
    use ledger_schema::events::WorkerEventKind;
    for crash in ["failed", "cancelled"] {
        let mut w = World::at(Stage::Implementing);
        implement(&mut w, 0x64, 0x65, 0x74);
        w.with(|s| {
            s.start(0x66, 0x67)?;
            s.claim(lid(0x66))?;
            let t = s.time_ms;
            s.deliver(
                lid(0x66),
                0x76,
                payload(WorkerEventKind::ToolActivity, t, "edited src/parser.rs (half)"),
            )?;
            let version = s.ledger.state().workflows[&lid(WORKFLOW)].version;
            s.run(match crash {
                "failed" => {
                    Command::FailAttempt(FailAttempt { attempt_id: lid(0x66), reason: "crashed".to_owned() })
                }
                _ => Command::CancelAttempt(CancelAttempt {
                    attempt_id: lid(0x66),
                    workflow_version: version,
                    reason: "stopped".to_owned(),
                }),
            })
        })
        .unwrap();
        let err = w.fails(freeze(0x80));
        assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{crash}: {err}");
        assert!(err.to_string().contains("last dispatched Attempt"), "{crash}: {err}");
        w.forged(
            Event::GenerationFrozen(ledger_schema::events::GenerationFrozen {
                generation_id: lid(0x80),
                candidate_digest: digest_of("c"),
                change_set_digest: digest_of("cs"),
            }),
            Rule::CandidateWork,
        );
        // One started and cancelled before its dispatch never ran: it does not count.
        w.with(|s| {
            s.start(0x68, 0x69)?;
            let version = s.ledger.state().workflows[&lid(WORKFLOW)].version;
            s.run(Command::CancelAttempt(CancelAttempt {
                attempt_id: lid(0x68),
                workflow_version: version,
                reason: "not needed".to_owned(),
            }))
        })
        .unwrap();
        w.refused(freeze(0x80), Rule::CandidateWork);
        implement(&mut w, 0x6a, 0x6b, 0x7a);
        w.ok(freeze(0x80));
    }
}

/// A failed check is not laundered through a no-change repair: the repair child needs a
/// finished repair Attempt, and it cannot freeze the parent's exact candidate digest.
#[test]
fn candidate_work_repair_child_differs_from_its_parent() {
    let mut w = World::at(Stage::Rejected);
    let repair = w.with(|s| s.repair_command());
    w.ok(Command::RecordRepair(repair));
    w.with(|s| s.advance(ledger_schema::types::Phase::Implement)).unwrap();
    let parent = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    let same = |d| {
        Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x81),
            candidate_digest: d,
            change_set_digest: digest_of("change set 2"),
        })
    };
    w.refused(same(parent), Rule::CandidateWork);
    implement(&mut w, 0x66, 0x67, 0x76);
    w.refused(same(parent), Rule::CandidateWork);
    w.ok(same(digest_of("candidate 2")));
}

/// A rejected candidate stays rejected for the goal it was judged against: no later
/// generation freezes its bytes again — not only the direct repair child (outside review 20:
/// X failed and was rejected, the repair child froze Y, failed and was rejected, the
/// grandchild froze X again, its re-run passed and ACCEPT was admitted).
#[test]
fn a_rejected_candidate_is_never_frozen_again() {
    use ledger_schema::types::{CheckResult, Phase, Verdict};
    let mut w = World::at(Stage::Rejected);
    let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    let repair = w.with(|s| s.repair_command());
    w.ok(Command::RecordRepair(repair));
    w.with(|s| s.advance(Phase::Implement)).unwrap();
    implement(&mut w, 0x66, 0x67, 0x76);
    let freeze = |generation: u128, d| {
        Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(generation),
            candidate_digest: d,
            change_set_digest: digest_of("change set"),
        })
    };
    w.ok(freeze(0x81, digest_of("candidate Y")));
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x92, 0x81, CheckResult::Fail, "still failing")?;
        s.advance(Phase::FinalVerify)?;
        s.run(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa2),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x81),
            verdict: Verdict::RejectRepairable,
            evidence_ids: None,
            reasons: vec!["still failing".to_owned()],
        }))
    })
    .unwrap();
    let d = w.ledger.state().decisions[&lid(0xa2)].clone();
    w.ok(Command::RecordRepair(RecordRepair {
        repair_id: lid(0xb2),
        decision_id: lid(0xa2),
        decision_digest: d.decision_digest,
        input_manifest_digest: d.input_manifest_digest,
        evidence_set_digest: d.evidence_set_digest,
        child_generation_id: lid(0x82),
        constraints_to_preserve: goal_content().preservation_constraints,
    }));
    w.with(|s| s.advance(Phase::Implement)).unwrap();
    implement(&mut w, 0x68, 0x69, 0x78);
    let err = w.fails(freeze(0x82, x));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
    assert!(err.to_string().contains("already judged"), "{err}");
    w.ok(freeze(0x82, digest_of("candidate Z")));
}

/// A failing check judges the candidate too, with no decision (outside review 20, second
/// pass: X failed its check, the workflow was cancelled before any decision, a new workflow
/// of the goal froze X, its re-run passed and ACCEPT was admitted).
#[test]
fn a_candidate_that_failed_its_check_is_not_frozen_in_another_workflow() {
    for revised in [false, true] {
        failed_then_frozen_in_another_workflow(revised);
    }
}

/// The body of the test above; `revised`: the goal is revised with identical content before
/// the second workflow starts (outside review 20: that re-opened the bytes).
fn failed_then_frozen_in_another_workflow(revised: bool) {
    use ledger_schema::types::{CheckResult, Phase};
    let mut w = World::at(Stage::Frozen);
    let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")
    })
    .unwrap();
    cancel_workflow(&mut w, WORKFLOW, "start over");
    if revised {
        w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    }
    failed_bytes_stay_barred(&mut w, x, if revised { 2 } else { 1 });
}

/// A new workflow of the goal at `revision` implements generation 0x88: the bytes `x` that
/// failed a check are refused for it (`CandidateWork`), other bytes freeze.
fn failed_bytes_stay_barred(w: &mut World, x: ledger_schema::Digest, revision: u32) {
    implemented_in_a_new_workflow(w, 0x2f, revision, 0x88, 0x6a, 0x7a);
    let freeze = |d| {
        Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x88),
            candidate_digest: d,
            change_set_digest: digest_of("change set"),
        })
    };
    let err = w.fails(freeze(x));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
    assert!(err.to_string().contains("failed check"), "{err}");
    w.ok(freeze(digest_of("candidate X2")));
}

/// A failure observed after the goal was revised past the workflow's revision (with the
/// same content) is recorded — it advances nothing: the stale workflow can only be
/// cancelled — and bars the failed bytes under the revision (outside review 150 F3: refused
/// as stale, the failure was lost, and the same bytes were frozen, passed and ACCEPTed in a
/// workflow of the revision). A pass there is refused as stale still.
#[test]
fn a_failure_observed_after_a_revision_is_recorded_and_bars_the_bytes() {
    use ledger_schema::types::{CheckResult, Phase};
    let mut w = World::at(Stage::Frozen);
    let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    let err = w.with(|s| s.evidence(0x91, 0x80, CheckResult::Pass, "passed")).unwrap_err();
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::StaleGoalRevision), "{err}");
    w.with(|s| s.evidence(0x90, 0x80, CheckResult::Fail, "failed")).unwrap();
    cancel_workflow(&mut w, WORKFLOW, "stale: the goal was revised");
    failed_bytes_stay_barred(&mut w, x, 2);
}

/// A failure that arrives late — in FINAL_VERIFY of a workflow the goal's revision made
/// stale, or after the workflow was cancelled while its check ran — is recorded and bars the
/// failed bytes (outside review 156 F1: refused there, `EvidencePhase` or `WorkflowClosed`,
/// and the same bytes were frozen, passed and ACCEPTed in a new workflow). Over an ACCEPT it
/// is recorded too, the verdict standing (outside review 164 F1).
#[test]
fn a_late_failure_is_recorded_and_bars_the_bytes() {
    use ledger_schema::types::{CheckResult, Phase};
    for late in ["final verify, stale", "cancelled"] {
        let mut w = World::at(Stage::Frozen);
        let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
        w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
        if late == "cancelled" {
            cancel_workflow(&mut w, WORKFLOW, "stopped while the check ran");
        } else {
            w.with(|s| {
                s.evidence(0x8f, 0x80, CheckResult::Error, "the runner crashed")?;
                s.advance(Phase::FinalVerify).map(drop)
            })
            .unwrap();
            w.ok(Command::ReviseGoal(ReviseGoal {
                goal_id: lid(GOAL),
                revision: 2,
                content: goal_content(),
            }));
        }
        w.with(|s| s.evidence(0x90, 0x80, CheckResult::Fail, "failed")).unwrap();
        let err = w.with(|s| s.evidence(0x91, 0x80, CheckResult::Pass, "passed")).unwrap_err();
        assert!(replay_tests::world::rule_of(&err).is_some(), "{late}: a pass is not recorded late: {err}");
        if late != "cancelled" {
            cancel_workflow(&mut w, WORKFLOW, "stale: the goal was revised");
        }
        failed_bytes_stay_barred(&mut w, x, if late == "cancelled" { 1 } else { 2 });
    }
    // Over an ACCEPT too (outside review 164 F1): the verdict stands, the bytes are barred.
    let mut w = World::at(Stage::Accepted);
    let since = |w: &World| {
        let counts = closure_ledger::replay::StateCounts::of(w.ledger.state());
        (closure_ledger::replay::failed_after_accept(w.ledger.state()), counts.workflows["failedAfterAccept"])
    };
    assert_eq!(since(&w), (0, 0));
    w.with(|s| s.evidence(0x9f, 0x81, CheckResult::Fail, "failed after the verdict")).unwrap();
    // And `status` and `replay` say so (outside review 171 F2: no summary showed it).
    assert_eq!(since(&w), (1, 1));
    w.with(|s| s.evidence(0x9e, 0x81, CheckResult::Fail, "failed again")).unwrap();
    assert_eq!(since(&w), (1, 1), "one decision, however many failures");
}

/// A failure of a repair's parent bytes that arrives once the repair opened its child
/// generation is recorded on the parent (outside review 159 F1: refused there,
/// `EvidenceCandidate`, the late failure was lost, and the same bytes were then frozen,
/// passed and ACCEPTed in a new workflow); a late pass there is not.
#[test]
fn a_failure_of_a_repairs_parent_bytes_is_recorded_after_the_repair() {
    use ledger_schema::types::CheckResult;
    let mut w = World::at(Stage::Rejected);
    w.with(|s| {
        let repair = s.repair_command();
        s.run(Command::RecordRepair(repair))
    })
    .unwrap();
    assert_ne!(w.ledger.state().workflows[&lid(WORKFLOW)].active_generation, Some(lid(0x80)));
    let err = w.with(|s| s.evidence(0x93, 0x80, CheckResult::Pass, "passed late")).unwrap_err();
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::EvidenceCandidate), "{err}");
    w.with(|s| s.evidence(0x92, 0x80, CheckResult::Fail, "failed again, late")).unwrap();
    let late = &w.ledger.state().evidence[&lid(0x92)];
    assert_eq!((late.record.generation_id, late.record.result), (lid(0x80), CheckResult::Fail));
    assert_eq!(
        (late.eligibility, late.eligibility_version),
        (ledger_schema::types::Eligibility::Ineligible, 2),
        "its generation is no longer the workflow's active one"
    );
    // The child goes on: its own pass and ACCEPT are not held back by its parent's record.
    w.with(|s| s.accept_repair()).unwrap();
    // After the ACCEPT of the child, a failure of the parent's bytes — never accepted — is
    // recorded still (outside review 161 F1: refused as "closed by its ACCEPT", it was lost
    // and the parent's bytes accepted in a new workflow), and so is one of the accepted
    // bytes (164 F1): the verdict stands.
    w.with(|s| s.evidence(0x94, 0x80, CheckResult::Fail, "failed after the child's ACCEPT")).unwrap();
    w.with(|s| s.evidence(0x95, 0x81, CheckResult::Fail, "failed after the verdict")).unwrap();
    let wf = &w.ledger.state().workflows[&lid(WORKFLOW)];
    let decision = &w.ledger.state().decisions[&wf.current_decision.unwrap()];
    assert_eq!(decision.verdict, ledger_schema::types::Verdict::Accept, "the verdict stands");
    let err = w.with(|s| s.evidence(0x96, 0x81, CheckResult::Pass, "passed after the verdict")).unwrap_err();
    assert!(replay_tests::world::rule_of(&err).is_some(), "a pass is not recorded after it: {err}");
}

/// Bytes are judged once per goal *content* (outside review 47: bytes accepted at revision
/// 1, or terminally rejected with every check passing — "revise the goal first" — could
/// never be judged against a revised goal): after a revision that changed the goal they
/// may be frozen again; after a revision with the same content they may not (outside
/// review 20), and a check that failed on them holds across every revision.
#[test]
fn a_revision_that_changed_the_goal_judges_the_bytes_again() {
    // Unchanged, changed, and changed only where no reader sees it (outside review 49, P1:
    // an NFD accent, a trailing or no-break space, reordered criteria re-opened the bytes).
    for (changed, invisibly) in [(false, false), (true, false), (false, true)] {
        let revised = |w: &mut World| {
            let mut content = goal_content();
            if changed {
                content.success_criteria.push("parse() reports the offset of the first bad byte".into());
            }
            if invisibly {
                content.objective =
                    "Make the config  parser reject a document with trailing\u{A0}bytes. ".into();
                content.success_criteria.reverse();
                content.scope = vec!["src/config/parser.rs".into()];
                content.preservation_constraints = vec!["the public API of parse() is unchanged".into()];
                assert_ne!(goal_content(), content, "the bytes differ");
            }
            w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content }));
        };
        let freeze = |d| {
            Command::FreezeGeneration(FreezeGeneration {
                generation_id: lid(0x88),
                candidate_digest: d,
                change_set_digest: digest_of("change set"),
            })
        };
        // Accepted at revision 1 (the failed bytes of 0x80 before them stay failed).
        let mut w = World::at(Stage::Accepted);
        let failed = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
        let accepted = w.ledger.state().generations[&lid(0x81)].frozen_digest().unwrap();
        revised(&mut w);
        implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
        let err = w.fails(freeze(failed));
        assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
        if changed {
            assert!(err.to_string().contains("failed check"), "the failed check holds: {err}");
        }
        if changed {
            w.ok(freeze(accepted));
        } else {
            let err = w.fails(freeze(accepted));
            assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
            assert!(err.to_string().contains("was accepted"), "{err}");
        }
        // Terminally rejected at revision 1 with its check passing.
        let (mut w, x) = rejected_terminally("the goal is ambiguous: revise it first");
        revised(&mut w);
        implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
        if changed {
            w.ok(freeze(x));
        } else {
            let err = w.fails(freeze(x));
            assert!(err.to_string().contains("was rejected"), "{err}");
        }
    }
}

/// A workflow left at an earlier goal content, holding the same bytes frozen and undecided
/// (it can no longer decide), does not hold back an ACCEPT against the revised content
/// (outside review 49, P3: "decide or cancel there first").
#[test]
fn a_workflow_left_at_an_earlier_content_does_not_hold_back_an_accept() {
    use ledger_schema::types::{CheckResult, Phase, Verdict};
    // Another content; then the same content differing only invisibly, where the earlier
    // workflow's judgment still counts: cancel it there (it cannot decide: outside review 51).
    for invisibly in [false, true] {
        let mut w = World::at(Stage::Frozen);
        let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
        let mut content = goal_content();
        if invisibly {
            content.objective = format!("{} ", content.objective);
        } else {
            content.success_criteria.push("parse() reports the offset of the first bad byte".into());
        }
        w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content }));
        implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
        w.ok(Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x88),
            candidate_digest: x,
            change_set_digest: digest_of("change set"),
        }));
        let wf = lid(0x2f);
        w.ok(Command::AdvancePhase(AdvancePhase {
            workflow_id: wf,
            phase: Phase::EvidenceBuild,
            version: 4,
        }));
        w.ok(Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(0x98),
            workflow_id: wf,
            generation_id: lid(0x88),
            candidate_digest: x,
            obligation_id: lid(OBLIGATION),
            check_spec_id: lid(CHECK_SPEC),
            check_spec_digest: digest_of("check: cargo test parser::trailing"),
            result: CheckResult::Pass,
            detail: "passed".into(),
        }));
        w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf, phase: Phase::FinalVerify, version: 5 }));
        let accept = Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa8),
            workflow_id: wf,
            generation_id: lid(0x88),
            verdict: Verdict::Accept,
            evidence_ids: None,
            reasons: vec!["passed against revision 2".into()],
        });
        if invisibly {
            let err = w.fails(accept.clone());
            assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::Verdict), "{err}");
            assert!(err.to_string().contains("cannot decide"), "{err}");
            cancel_workflow(&mut w, WORKFLOW, "left at revision 1");
        }
        w.ok(accept);
    }
}

/// Starts workflow `workflow` on the goal at `goal_revision`, advances it to IMPLEMENT, opens
/// generation `generation` and runs one IMPLEMENT Attempt (`attempt`, session `attempt + 1`,
/// its completion request event `event`) to its finish: the generation is ready to freeze.
fn implemented_in_a_new_workflow(
    w: &mut World,
    workflow: u128,
    goal_revision: u32,
    generation: u128,
    attempt: u128,
    event: u128,
) {
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::{Phase, ResultKind, ThreadChoice};
    let wf = lid(workflow);
    w.ok(Command::StartWorkflow(StartWorkflow {
        workflow_id: wf,
        goal_id: lid(GOAL),
        goal_revision,
        policy_id: lid(POLICY),
        profile_id: lid(PROFILE),
        plan: None,
    }));
    for (phase, version) in [(Phase::Plan, 2), (Phase::Implement, 3)] {
        w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf, phase, version }));
    }
    w.ok(Command::OpenGeneration(OpenGeneration {
        generation_id: lid(generation),
        workflow_id: wf,
        base_digest: digest_of("repo@9f1c2e0"),
    }));
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: wf,
        worker_session_id: lid(attempt + 1),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    w.with(|s| {
        s.claim(lid(attempt))?;
        s.deliver(lid(attempt), event, payload(WorkerEventKind::CompletionRequest, 1, "done"))?;
        s.finish(attempt, ResultKind::CompletionRequest)
    })
    .unwrap();
}

/// A world where workflow 1 froze X (generation 0x80, undecided) and workflow 2 (0x2f), of
/// the same goal, froze X too (generation 0x88) and stands in IMPLEMENT; returns X.
fn two_workflows_froze_the_same_bytes(w: &mut World) -> ledger_schema::Digest {
    let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    implemented_in_a_new_workflow(w, 0x2f, 1, 0x88, 0x6a, 0x7a);
    w.ok(Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x88),
        candidate_digest: x,
        change_set_digest: digest_of("change set"),
    }));
    x
}

/// Two workflows of one goal run side by side: the second freezes X before the
/// first judges it; once the first's check fails, the second cannot ACCEPT X (outside
/// review 20, second pass: the same bytes stood both rejected and accepted).
#[test]
fn a_candidate_failed_beside_cannot_be_accepted() {
    use ledger_schema::types::{CheckResult, Phase, Verdict};
    let mut w = World::at(Stage::Frozen);
    let x = two_workflows_froze_the_same_bytes(&mut w);
    let wf2 = lid(0x2f);
    let advance = |w: &mut World, phase, version| {
        w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf2, phase, version }))
    };
    // The first workflow's check of X fails.
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")
    })
    .unwrap();
    // The second's passes; its ACCEPT of X is refused.
    advance(&mut w, Phase::EvidenceBuild, 4);
    w.ok(second_generation_passes(wf2, x, "passed on a re-run"));
    advance(&mut w, Phase::FinalVerify, 5);
    let err = w.fails(Command::DecideAcceptance(DecideAcceptance {
        decision_id: lid(0xa8),
        workflow_id: wf2,
        generation_id: lid(0x88),
        verdict: Verdict::Accept,
        evidence_ids: None,
        reasons: vec!["passed".into()],
    }));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::Verdict), "{err}");
    assert!(err.to_string().contains("cannot be accepted"), "{err}");
}

/// A stale result cannot advance the workflow (seed 000, "Context Invalidation"): a bound
/// input recorded after the IMPLEMENT Attempt finished — a human decision, a confirmed fact —
/// makes its result stale, so the generation does not freeze on it (`ManifestStale`, through
/// the admission step, so replay refuses it too); a new Attempt on the generation, compiled
/// with the decision, gives a result that freezes (outside review 16, P2: the freeze, the
/// evidence and the ACCEPT were admitted with no worker ever seeing the decision).
#[test]
fn a_result_made_stale_after_it_finished_does_not_freeze() {
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = World::at(Stage::Implementing);
    let freeze = Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x80),
        candidate_digest: digest_of("candidate 1"),
        change_set_digest: digest_of("change set 1"),
    });
    // An IMPLEMENT Attempt on the generation, through its result.
    let implement = |w: &mut World, attempt: u128, event: u128| {
        w.with(|s| {
            s.start(attempt, attempt + 1)?;
            s.claim(lid(attempt))?;
            s.deliver(lid(attempt), event, payload(WorkerEventKind::CompletionRequest, 1, "ready"))?;
            s.finish(attempt, ResultKind::CompletionRequest)
        })
        .unwrap();
    };
    implement(&mut w, 0x64, 0x74);
    w.ok(Command::RecordHumanDecision(RecordHumanDecision {
        decision_id: lid(0x56),
        goal_id: lid(GOAL),
        question: "May parse() add a TrailingBytes variant?".into(),
        answer: "No: adding TrailingBytes is forbidden.".into(),
        decided_by: "human:alice".into(),
        supersedes: None,
    }));
    let err = w.fails(freeze.clone());
    assert!(
        err.to_string().contains("ManifestStale") && err.to_string().contains(&lid(0x64).to_string()),
        "{err}"
    );
    // A new Attempt on the same generation sees the decision; its result freezes.
    implement(&mut w, 0x66, 0x76);
    w.ok(freeze);
}

/// A Fact proposed, not confirmed, is no bound input of a Worker Context (seed: "selected
/// confirmed Fact revision"): the package a worker is given is unchanged, the manifest only
/// gains an omission. Proposed between an Attempt's start and its claim, during its run
/// and after its result, it refuses neither the claim, nor the result, nor the freeze
/// (outside review 22: it refused the freeze, and marked a running Attempt).
#[test]
fn a_proposed_fact_does_not_make_a_context_stale() {
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = World::at(Stage::Implementing);
    let propose = |id: u128, statement: &str| {
        Command::ProposeFact(ProposeFact {
            fact_id: lid(id),
            goal_id: lid(GOAL),
            revision: 1,
            statement: statement.into(),
            provenance: "a parallel discovery".into(),
        })
    };
    w.with(|s| s.start(0x64, 0x65)).unwrap();
    w.ok(propose(0x5a, "parse() may be slow on large inputs"));
    w.with(|s| s.claim(lid(0x64))).unwrap();
    w.ok(propose(0x5b, "parse() may allocate per byte"));
    assert!(!w.ledger.state().attempts[&lid(0x64)].context_changed);
    w.with(|s| {
        s.deliver(lid(0x64), 0x74, payload(WorkerEventKind::CompletionRequest, 1, "ready"))?;
        s.finish(0x64, ResultKind::CompletionRequest)
    })
    .unwrap();
    w.ok(propose(0x5c, "parse() may recurse deeply"));
    w.ok(freeze(0x80));
}

/// A passing check of the second workflow's generation 0x88 (candidate `x`) for the goal's
/// obligation.
fn second_generation_passes(workflow: ledger_schema::Id, x: ledger_schema::Digest, detail: &str) -> Command {
    use ledger_schema::types::CheckResult;
    Command::RecordEvidence(RecordEvidence {
        evidence_id: lid(0x98),
        workflow_id: workflow,
        generation_id: lid(0x88),
        candidate_digest: x,
        obligation_id: lid(OBLIGATION),
        check_spec_id: lid(CHECK_SPEC),
        check_spec_digest: digest_of("check: cargo test parser::trailing"),
        result: CheckResult::Pass,
        detail: detail.into(),
    })
}

/// The reverse order (outside review 20, fourth pass: the second workflow accepted X, then
/// the first recorded X failing and rejected it — one goal held both): an ACCEPT waits while
/// another open generation of the goal holds the same bytes undecided; once that one is
/// closed without a failing check, the ACCEPT stands, and the bytes are judged for the goal.
#[test]
fn bytes_awaiting_judgment_elsewhere_cannot_be_accepted_first() {
    use ledger_schema::types::{Phase, Verdict};
    let mut w = World::at(Stage::Frozen);
    let x = two_workflows_froze_the_same_bytes(&mut w);
    let wf2 = lid(0x2f);
    for (phase, version) in [(Phase::EvidenceBuild, 4), (Phase::FinalVerify, 5)] {
        if phase == Phase::FinalVerify {
            w.ok(second_generation_passes(wf2, x, "passed"));
        }
        w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf2, phase, version }));
    }
    let accept = Command::DecideAcceptance(DecideAcceptance {
        decision_id: lid(0xa8),
        workflow_id: wf2,
        generation_id: lid(0x88),
        verdict: Verdict::Accept,
        evidence_ids: None,
        reasons: vec!["passed".into()],
    });
    let err = w.fails(accept.clone());
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::Verdict), "{err}");
    assert!(err.to_string().contains("not yet judged"), "{err}");
    cancel_workflow(&mut w, WORKFLOW, "the other workflow judges these bytes");
    w.ok(accept);
    // Judged once per goal: a third workflow does not freeze the accepted bytes again.
    implemented_in_a_new_workflow(&mut w, 0x3f, 1, 0x89, 0x6c, 0x7c);
    let err = w.fails(Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x89),
        candidate_digest: x,
        change_set_digest: digest_of("change set"),
    }));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
    assert!(err.to_string().contains("was accepted"), "{err}");
}

/// The scenarios and obligations of an earlier goal revision can be retired after a
/// revision, and only then (outside review 55, P2: revision 1's obligation and scenario
/// reached revision 2's workers as requirements, held its ACCEPT to revision 1's check, and
/// the bytes that failed that check could never be frozen for revision 2). A retired
/// requirement is an omission in later contexts, takes no Evidence, is not needed by an
/// ACCEPT, and no longer judges bytes — its FAIL record and a rejection made before the
/// retirement stand no more.
#[test]
fn requirements_of_an_earlier_revision_can_be_retired() {
    use ledger_schema::types::{CheckResult, Phase, ThreadChoice, Verdict};
    let retire_obligation = |id: u128, reason: &str| {
        Command::RetireObligation(RetireObligation { obligation_id: lid(id), reason: reason.into() })
    };
    let retire_scenario = |id: u128| {
        Command::RetireScenario(RetireScenario {
            scenario_id: lid(id),
            reason: "revision 2 accepts it".into(),
        })
    };
    // Revision 1: the check failed on `failed`, which was rejected.
    let mut w = World::at(Stage::Rejected);
    let failed = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    let err = w.fails(retire_obligation(OBLIGATION, "revision 2 accepts it"));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::RequirementRetired), "{err}");
    assert!(err.to_string().contains("current revision 1"), "{err}");
    w.refused(retire_scenario(0x42), Rule::RequirementRetired);
    // Revision 2, the same content (a revision to change the requirements), and its own
    // obligation — which stands until the next revision.
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    let check = digest_of("check: cargo test parser::accepts_trailing");
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x44),
        goal_id: lid(GOAL),
        description: "the accepts-trailing test passes".into(),
        check_spec_id: lid(0x45),
        check_spec_digest: check,
    }));
    w.refused(retire_obligation(0x44, "not yet"), Rule::RequirementRetired);
    w.refused(retire_obligation(0x4f, "unknown"), Rule::Unknown);
    w.refused(retire_obligation(OBLIGATION, " "), Rule::OutOfBounds);
    // Bounded: it is copied into every later context's omission (outside review 64).
    w.refused(retire_obligation(OBLIGATION, &"x".repeat(1025)), Rule::OutOfBounds);
    // Revision 1's workflow is still open, with Evidence of the obligation: decided or
    // cancelled first (outside review 57).
    let err = w.fails(retire_obligation(OBLIGATION, "revision 2 accepts it"));
    assert!(err.to_string().contains("once that workflow is closed"), "{err}");
    cancel_workflow(&mut w, WORKFLOW, "the goal was revised");
    w.ok(retire_obligation(OBLIGATION, "revision 2 accepts it"));
    let again = w.ok(retire_obligation(OBLIGATION, "revision 2 accepts it"));
    assert!(again.duplicate, "an identical redelivery is a duplicate");
    let err = w.fails(retire_obligation(OBLIGATION, "another reason"));
    assert!(err.to_string().contains("already retired"), "{err}");
    w.ok(retire_scenario(0x42));
    // A workflow on revision 2: the retired requirements are omissions, named.
    implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
    let state = w.ledger.state();
    let start = StartAttempt {
        attempt_id: lid(0x6c),
        workflow_id: lid(0x2f),
        worker_session_id: lid(0x6d),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    };
    let compiled = closure_ledger::compiler::compile(
        state,
        &closure_ledger::runtime::attempt_binding(state, &start).unwrap(),
    )
    .unwrap();
    let obligations: Vec<_> =
        compiled.package.verification_obligations.iter().map(|o| o.obligation_id).collect();
    assert_eq!(obligations, [lid(0x44)]);
    assert!(compiled.package.business_scenarios.is_empty(), "{:?}", compiled.package.business_scenarios);
    let mut retired: Vec<_> = compiled
        .manifest
        .omission_decisions
        .iter()
        .filter(|o| o.rule == "freshness.requirementRetired")
        .map(|o| o.source_ref.clone())
        .collect();
    retired.sort();
    let mut want = [format!("obligation/{}", lid(OBLIGATION)), format!("scenario/{}", lid(0x42))];
    want.sort();
    assert_eq!(retired, want);
    // Each names its retirement's entry and reason (outside review 57, P3).
    assert!(
        compiled
            .manifest
            .omission_decisions
            .iter()
            .filter(|o| o.rule == "freshness.requirementRetired")
            .all(|o| o.reason.ends_with("): revision 2 accepts it") && o.reason.contains("(entry ")),
        "{:?}",
        compiled.manifest.omission_decisions
    );
    // The bytes revision 1 rejected over the retired check are judged afresh.
    w.ok(Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x88),
        candidate_digest: failed,
        change_set_digest: digest_of("change set"),
    }));
    let wf = lid(0x2f);
    w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf, phase: Phase::EvidenceBuild, version: 4 }));
    let evidence = |id: u128, obligation: u128, spec: u128, spec_digest| {
        Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(id),
            workflow_id: wf,
            generation_id: lid(0x88),
            candidate_digest: failed,
            obligation_id: lid(obligation),
            check_spec_id: lid(spec),
            check_spec_digest: spec_digest,
            result: CheckResult::Pass,
            detail: "ran".into(),
        })
    };
    let err =
        w.fails(evidence(0x96, OBLIGATION, CHECK_SPEC, digest_of("check: cargo test parser::trailing")));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::RequirementRetired), "{err}");
    w.ok(evidence(0x97, 0x44, 0x45, check));
    w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: wf, phase: Phase::FinalVerify, version: 5 }));
    w.ok(Command::DecideAcceptance(DecideAcceptance {
        decision_id: lid(0xa7),
        workflow_id: wf,
        generation_id: lid(0x88),
        verdict: Verdict::Accept,
        evidence_ids: None,
        reasons: vec!["revision 2's check passes".to_owned()],
    }));
    // Replay folds the same state.
    let replayed = closure_ledger::ledger::Ledger::from_store(w.ledger.store().clone()).unwrap();
    assert_eq!(replayed.state().digest(), w.ledger.state().digest());
}

/// A retirement judges bytes afresh only where it loosened what the goal required when
/// they were judged (outside review 57, P1/P2): a check retired and recorded again the same
/// — same check spec, under a new obligation — still holds its FAIL, and a requirement
/// added after a terminal rejection and retired again re-opens nothing.
#[test]
fn a_retirement_that_loosens_nothing_reopens_nothing() {
    use ledger_schema::types::{CheckResult, Phase};
    let retire_obligation = |id: u128| {
        Command::RetireObligation(RetireObligation { obligation_id: lid(id), reason: "restated".into() })
    };
    let freeze = |d| {
        Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x88),
            candidate_digest: d,
            change_set_digest: digest_of("change set"),
        })
    };
    // The check failed on `failed` (no decision: the workflow was cancelled); its
    // obligation is retired and recorded again, the same.
    let mut w = World::at(Stage::Frozen);
    let failed = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Fail, "failed")
    })
    .unwrap();
    cancel_workflow(&mut w, WORKFLOW, "revised");
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.ok(retire_obligation(OBLIGATION));
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x44),
        goal_id: lid(GOAL),
        description: "the trailing-bytes test passes (restated)".into(),
        check_spec_id: lid(CHECK_SPEC),
        check_spec_digest: digest_of("check: cargo test parser::trailing"),
    }));
    implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
    let err = w.fails(freeze(failed));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CandidateWork), "{err}");
    assert!(err.to_string().contains("failed check"), "{err}");
    // … and under a new check spec id for the same check (outside review 58): the same.
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 3, content: goal_content() }));
    cancel_workflow(&mut w, 0x2f, "x");
    w.ok(retire_obligation(0x44));
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x47),
        goal_id: lid(GOAL),
        description: "the same test under another spec id".into(),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check: cargo test parser::trailing"),
    }));
    implemented_in_a_new_workflow(&mut w, 0x2d, 3, 0x8a, 0x6b, 0x7b);
    let err = w.fails(Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x8a),
        candidate_digest: failed,
        change_set_digest: digest_of("change set"),
    }));
    assert!(err.to_string().contains("failed check"), "{err}");
    // Terminally rejected (checks passing); a scenario added after it and retired again.
    let (mut w, x) = rejected_terminally("adds a hidden admin login");
    w.ok(Command::RecordScenario(RecordScenario {
        scenario_id: lid(0x46),
        goal_id: lid(GOAL),
        title: "dummy".into(),
        description: "added to be retired".into(),
    }));
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    w.ok(Command::RetireScenario(RetireScenario { scenario_id: lid(0x46), reason: "dummy".into() }));
    implemented_in_a_new_workflow(&mut w, 0x2f, 2, 0x88, 0x6a, 0x7a);
    let err = w.fails(freeze(x));
    assert!(err.to_string().contains("was rejected"), "{err}");
    // Retiring a scenario the rejection stood under does loosen it: judged afresh.
    w.ok(Command::RetireScenario(RetireScenario { scenario_id: lid(0x42), reason: "dropped".into() }));
    implemented_in_a_new_workflow(&mut w, 0x2e, 2, 0x89, 0x6e, 0x7e);
    w.ok(Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x89),
        candidate_digest: x,
        change_set_digest: digest_of("change set"),
    }));
}

/// Generation 0x80 frozen, its check passing, and terminally rejected for `reason`; with
/// its candidate digest.
fn rejected_terminally(reason: &str) -> (World, ledger_schema::Digest) {
    use ledger_schema::types::{CheckResult, Phase, Verdict};
    let mut w = World::at(Stage::Frozen);
    let x = w.ledger.state().generations[&lid(0x80)].frozen_digest().unwrap();
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "passed")?;
        s.advance(Phase::FinalVerify)?;
        s.run(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa0),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict: Verdict::RejectTerminal,
            evidence_ids: None,
            reasons: vec![reason.to_owned()],
        }))
    })
    .unwrap();
    (w, x)
}

/// Cancels workflow `wf` at its current version.
fn cancel_workflow(w: &mut World, wf: u128, reason: &str) {
    let version = w.ledger.state().workflows[&lid(wf)].version;
    w.ok(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(wf),
        workflow_version: version,
        reason: reason.to_owned(),
    }));
}
