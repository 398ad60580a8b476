//! Attempts: one active per workflow, bound to the current phase and version, the exact
//! Candidate, a manifest the compiler derives; dispatch claims revalidate; results obey
//! the response contract; cancellation and dispatch serialize on the workflow version.

use closure_ledger::admission::Refusal;
use closure_ledger::ledger::SubmitError;
use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::state::AttemptStatus;
use closure_ledger::runtime::{Command, Rule};
use closure_ledger::store::Store;
use ledger_schema::events::{IgnoredReason, WorkerEventKind};
use ledger_schema::types::{Phase, ResultKind, ThreadChoice};
use ledger_schema::{Event, Id};
use replay_tests::world::{Stage, World, rule_of};

fn start(attempt: u128) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(WORKFLOW),
        worker_session_id: lid(attempt + 1),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    })
}

/// `attempt` started on `workflow` with Worker Session `session` as `thread`, no selection.
fn start_on(attempt: u128, session: u128, thread: ThreadChoice, workflow: u128) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(workflow),
        worker_session_id: lid(session),
        thread,
        selection_receipt: None,
    })
}

fn claim_of(w: &World, attempt: Id) -> ClaimDispatch {
    ClaimDispatch::for_attempt(w.ledger.state(), attempt).unwrap()
}

fn finish(attempt: u128, kind: ResultKind) -> Command {
    Command::FinishAttempt(FinishAttempt { attempt_id: lid(attempt), result_kind: kind, summary: "s".into() })
}

/// One active attempt per workflow.
#[test]
fn attempt_active_one_per_workflow() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.refused(start(0x62), Rule::AttemptActive);
}

/// No worker attempts in EVIDENCE_BUILD or FINAL_VERIFY.
#[test]
fn attempt_binding_phase() {
    let mut w = World::at(Stage::Frozen);
    w.ok(Command::AdvancePhase(AdvancePhase {
        workflow_id: lid(WORKFLOW),
        phase: Phase::EvidenceBuild,
        version: 4,
    }));
    w.refused(start(0x68), Rule::AttemptBinding);
}

/// IMPLEMENT needs the exact active MUTABLE Candidate: none open, or frozen, is refused.
#[test]
fn candidate_binding_implement() {
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))?;
        s.complete(0x60, ResultKind::Proposals)?;
        s.advance(Phase::Plan)?;
        s.advance(Phase::Implement)
    })
    .unwrap();
    w.refused(start(0x64), Rule::CandidateBinding);
    let mut w = World::at(Stage::Frozen);
    w.refused(start(0x68), Rule::CandidateBinding);
}

/// IMPLEMENT manifests name the generation and its base digest; DISCOVERY ones carry none.
#[test]
fn candidate_binding_in_manifests() {
    let mut w = World::at(Stage::Implementing);
    w.ok(start(0x64));
    let Event::AttemptStarted(a) = w.last_event("attemptStarted") else { unreachable!() };
    assert_eq!(a.generation_id, Some(lid(0x80)));
    assert_eq!(a.manifest.candidate_digest, Some(digest_of("repo@9f1c2e0")));
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    let Event::AttemptStarted(a) = w.last_event("attemptStarted") else { unreachable!() };
    assert_eq!((a.generation_id, a.manifest.candidate_digest), (None, None));
    // A forged DISCOVERY start that names a generation is refused.
    let mut w2 = World::at(Stage::Implementing);
    let mut forged = a.clone();
    forged.attempt_id = lid(0x6a);
    forged.worker_session_id = lid(0x6b);
    forged.workflow_version = 3;
    forged.phase = Phase::Implement;
    let err = w2.forged_error(vec![Event::AttemptStarted(forged)]);
    assert!(matches!(err, SubmitError::Refused(Refusal::ManifestMismatch(_))), "{err}");
}

/// The compiler owns manifest entries: a forged entry is refused even with the manifest
/// digest recomputed to match.
#[test]
fn manifest_binding_forged_entry() {
    let mut w = World::at(Stage::Setup);
    let before = World::at(Stage::Setup);
    w.ok(start(0x60));
    let Event::AttemptStarted(mut a) = w.last_event("attemptStarted") else { unreachable!() };
    let mut w = before;
    a.manifest.entries[0].authority_class = ledger_schema::types::AuthorityClass::NonAuthoritativeWorking;
    a.manifest_digest = a.manifest.digest();
    let err = w.forged_error(vec![Event::AttemptStarted(a.clone())]);
    assert!(matches!(err, SubmitError::Refused(Refusal::ManifestMismatch(_))), "{err}");
    // And a manifest digest that is not the manifest's is refused by the runtime rule.
    let mut w = World::at(Stage::Setup);
    let mut b = a;
    b.manifest = {
        let mut fresh = World::at(Stage::Setup);
        fresh.ok(start(0x60));
        let Event::AttemptStarted(x) = fresh.last_event("attemptStarted") else { unreachable!() };
        x.manifest
    };
    b.manifest_digest = digest_of("wrong");
    let err = w.forged_error(vec![Event::AttemptStarted(b)]);
    assert!(matches!(err, SubmitError::Refused(Refusal::ManifestMismatch(_))), "{err}");
}

/// A dispatch claim revalidates the profile, both digests and the plan pair.
#[test]
fn dispatch_claim_revalidates() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    let good = claim_of(&w, lid(0x60));
    let mut c = good.clone();
    c.package_digest = digest_of("another package");
    w.refused(Command::ClaimDispatch(c), Rule::DispatchClaim);
    let mut c = good.clone();
    c.manifest_digest = digest_of("another manifest");
    w.refused(Command::ClaimDispatch(c), Rule::DispatchClaim);
    let mut c = good.clone();
    c.profile.digest = digest_of("another profile");
    w.refused(Command::ClaimDispatch(c), Rule::DispatchClaim);
    let mut c = good.clone();
    c.plan = Some(plan_pair());
    // (Said as what it is, not "does not match": outside review 243 F3.)
    let err = w.fails(Command::ClaimDispatch(c)).to_string();
    assert!(err.contains("the plan pair is one the workflow does not bind"), "{err}");
    let mut c = good.clone();
    c.workflow_version = 2;
    w.refused(Command::ClaimDispatch(c), Rule::StaleWorkflowVersion);
    let first = w.ok(Command::ClaimDispatch(good.clone()));
    // Exactly the same claim again is a redelivery (the original receipt); any other claim
    // of a claimed Attempt is refused.
    let again = w.ok(Command::ClaimDispatch(good.clone()));
    assert!(again.duplicate && again.seq == first.seq);
    let mut other = good;
    other.package_digest = digest_of("another package");
    w.refused(Command::ClaimDispatch(other), Rule::DispatchClaim);
}

/// Cancelled before the dispatch claim: the claim is refused.
#[test]
fn cancelled_before_claim_refuses_the_claim() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    let claim = claim_of(&w, lid(0x60));
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x60),
        workflow_version: 1,
        reason: "stop".into(),
    }));
    w.refused(Command::ClaimDispatch(claim), Rule::DispatchClaim);
}

/// Cancelled after the claim: the attempt ends interrupted and later worker events are
/// only ignored receipts. A cancel for another workflow version is refused.
#[test]
fn cancel_serializes_on_the_workflow_version() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.refused(
        Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(0x60),
            workflow_version: 2,
            reason: "stop".into(),
        }),
        Rule::StaleWorkflowVersion,
    );
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x60),
        workflow_version: 1,
        reason: "stop".into(),
    }));
    assert_eq!(w.ledger.state().attempts[&lid(0x60)].status, AttemptStatus::Cancelled { interrupted: true });
    let t = w.time_ms;
    w.with(|s| {
        s.deliver(lid(0x60), 0x77, payload(ledger_schema::events::WorkerEventKind::Progress, t, "late"))
    })
    .unwrap();
    assert!(matches!(w.last_event("workerDeliveryIgnored"), Event::WorkerDeliveryIgnored(_)));
}

/// A result needs a dispatched attempt.
#[test]
fn not_dispatched() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.refused(finish(0x60, ResultKind::Proposals), Rule::NotDispatched);
}

/// PROPOSALS for DISCOVERY/PLAN, COMPLETION_REQUEST for IMPLEMENT — nothing else.
#[test]
fn result_kind_per_phase() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.refused(finish(0x60, ResultKind::CompletionRequest), Rule::ResultKind);
    w.with(|s| s.result(0x60, ResultKind::Proposals)).unwrap();
    w.ok(finish(0x60, ResultKind::Proposals));
    let mut w = World::at(Stage::Implementing);
    w.ok(start(0x64));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x64))));
    w.refused(finish(0x64, ResultKind::Proposals), Rule::ResultKind);
}

/// A result needs the worker's own terminal event (seed: "only a duplicate bound to the
/// exact current dispatch can satisfy terminal stream accounting"): a finish with no
/// admitted PROPOSALS / COMPLETION_REQUEST event is refused (`TerminalEvent`), live and as
/// a forged entry; a progress event does not count, a stale (ignored) result event does
/// not count; once the current terminal event is admitted the finish is.
#[test]
fn terminal_event_needed_to_finish() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.refused(finish(0x60, ResultKind::Proposals), Rule::TerminalEvent);
    w.forged(
        Event::AttemptFinished(ledger_schema::events::AttemptFinished {
            attempt_id: lid(0x60),
            result_kind: ResultKind::Proposals,
            summary: "forged".into(),
        }),
        Rule::TerminalEvent,
    );
    w.with(|s| s.deliver(lid(0x60), 0x70, payload(WorkerEventKind::Progress, 1, "working"))).unwrap();
    w.refused(finish(0x60, ResultKind::Proposals), Rule::TerminalEvent);
    // A result event naming another manifest is an ignored receipt: it does not count.
    w.ok(Command::DeliverWorkerEvent(closure_ledger::runtime::command::DeliverWorkerEvent {
        attempt_id: lid(0x60),
        worker_event_id: lid(0x71),
        manifest_digest: ledger_schema::Digest::ZERO,
        payload: payload(WorkerEventKind::Proposals, 2, "proposals for another manifest"),
    }));
    assert!(matches!(w.last_event("workerDeliveryIgnored"), Event::WorkerDeliveryIgnored(_)));
    w.refused(finish(0x60, ResultKind::Proposals), Rule::TerminalEvent);
    w.with(|s| s.result(0x60, ResultKind::Proposals)).unwrap();
    w.ok(finish(0x60, ResultKind::Proposals));
}

/// Ledgers written before the rule keep replaying: an Attempt started by the previous build
/// (its manifest records compiler/2) may still finish without a terminal event, as it
/// could then; the same Attempt started now (compiler/3) may not.
#[test]
fn terminal_event_is_not_required_of_attempts_of_the_previous_build() {
    use closure_ledger::compiler::{Registry, v1, v2};
    static PREVIOUS: Registry<'static> = Registry::new(&v2::V2, &[&v1::V1]);
    let mut w = World::at(Stage::Setup);
    let ctx = closure_ledger::runtime::Ctx { time_ms: replay_tests::T0 + 900_000 };
    let closure_ledger::runtime::Decided::Events(events) =
        closure_ledger::admission::decide_with(&PREVIOUS, w.ledger.state(), &start(0x60)).unwrap()
    else {
        panic!("not a redelivery")
    };
    w.ledger.admit(events, ctx).unwrap();
    assert_eq!(w.ledger.state().attempts[&lid(0x60)].compiler_version, v2::VERSION);
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.ok(finish(0x60, ResultKind::Proposals));
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.refused(finish(0x60, ResultKind::Proposals), Rule::TerminalEvent);
}

/// An ended attempt takes no second result, failure or cancel.
#[test]
fn attempt_not_active() {
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(Command::ClaimDispatch(claim_of(&w, lid(0x60))));
    w.with(|s| s.result(0x60, ResultKind::Proposals)).unwrap();
    w.ok(finish(0x60, ResultKind::Proposals));
    // Exactly the same finish is a redelivery; another result for the ended Attempt is not.
    assert!(w.ok(finish(0x60, ResultKind::Proposals)).duplicate);
    w.refused(
        Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(0x60),
            result_kind: ResultKind::Proposals,
            summary: "a second result".into(),
        }),
        Rule::AttemptNotActive,
    );
    w.refused(
        Command::FailAttempt(FailAttempt { attempt_id: lid(0x60), reason: "x".into() }),
        Rule::AttemptNotActive,
    );
    w.refused(
        Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(0x60),
            workflow_version: 1,
            reason: "x".into(),
        }),
        Rule::AttemptNotActive,
    );
}

/// Runtime-level (below the admission step): a manifest that binds other identities, or
/// whose digest is not its own, is refused by `runtime::apply` itself.
#[test]
fn manifest_binding_in_the_runtime() {
    let mut probe = World::at(Stage::Setup);
    probe.ok(start(0x60));
    let Event::AttemptStarted(a) = probe.last_event("attemptStarted") else { unreachable!() };
    let w = World::at(Stage::Setup);
    let entry = |event: Event| ledger_schema::Entry {
        v: 1,
        seq: w.ledger.state().entries,
        prev: ledger_schema::Digest::ZERO,
        event,
        ledger: replay_tests::LEDGER,
        time_ms: 0,
    };
    let mut wrong_digest = a.clone();
    wrong_digest.manifest_digest = digest_of("x");
    let mut wrong_policy = a.clone();
    wrong_policy.manifest.policy.digest = digest_of("x");
    wrong_policy.manifest_digest = wrong_policy.manifest.digest();
    for bad in [wrong_digest, wrong_policy] {
        let mut state = w.ledger.state().clone();
        let err = closure_ledger::runtime::apply(&mut state, &entry(Event::AttemptStarted(bad))).unwrap_err();
        assert_eq!(err.rule, Rule::ManifestBinding, "{err}");
        assert_eq!(&state, w.ledger.state(), "a refused entry leaves the state unchanged");
    }
    let mut state = w.ledger.state().clone();
    assert!(closure_ledger::runtime::apply(&mut state, &entry(Event::AttemptStarted(a))).is_ok());
}

/// Entries fold in seq order only.
#[test]
fn entry_out_of_order() {
    let w = World::at(Stage::Setup);
    let mut state = w.ledger.state().clone();
    let event = Event::BlockerRaised(ledger_schema::events::BlockerRaised {
        blocker_id: lid(0x45),
        workflow_id: lid(WORKFLOW),
        description: "x".into(),
    });
    let entry = ledger_schema::Entry {
        v: 1,
        seq: state.entries + 1,
        prev: ledger_schema::Digest::ZERO,
        event,
        ledger: replay_tests::LEDGER,
        time_ms: 0,
    };
    let err = closure_ledger::runtime::apply(&mut state, &entry).unwrap_err();
    assert_eq!(err.rule, Rule::EntryOutOfOrder);
}

fn start_with(attempt: u128, session: u128, thread: ThreadChoice) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(WORKFLOW),
        worker_session_id: lid(session),
        thread,
        selection_receipt: None,
    })
}

/// Under the reference profile (attemptThread and repairThread FRESH): a FRESH start needs
/// a Worker Session no Attempt has used, and RESUME is refused — within a phase, across a
/// phase, and for the repair generation; a new session on a FRESH thread is admitted.
#[test]
fn thread_policy_fresh_profile() {
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))?;
        s.complete(0x60, ResultKind::Proposals)
    })
    .unwrap();
    w.refused(start_with(0x62, 0x61, ThreadChoice::Fresh), Rule::ThreadPolicy);
    w.refused(start_with(0x62, 0x61, ThreadChoice::Resume), Rule::ThreadPolicy);
    w.ok(start_with(0x62, 0x63, ThreadChoice::Fresh));

    // The repair generation: neither the previous session nor RESUME.
    let mut w = World::at(Stage::Rejected);
    w.with(|s| {
        let r = s.repair_command();
        s.run(Command::RecordRepair(r))?;
        s.advance(Phase::Implement)
    })
    .unwrap();
    w.refused(start_with(0x66, 0x65, ThreadChoice::Resume), Rule::ThreadPolicy);
    w.refused(start_with(0x66, 0x65, ThreadChoice::Fresh), Rule::ThreadPolicy);
    w.refused(start_with(0x66, 0x61, ThreadChoice::Fresh), Rule::ThreadPolicy);
    w.ok(start_with(0x66, 0x67, ThreadChoice::Fresh));
}

/// Under a profile with attemptThread RESUME: RESUME continues the previous Attempt's
/// session after it finished in the same phase — an Attempt cancelled or failed before its
/// dispatch in between never ran and does not count; it is refused with another session, after a
/// failure or a cancellation (the replacement is FRESH), and across a phase boundary.
#[test]
fn thread_policy_resume_profile() {
    let mut w = World::at(Stage::Setup);
    let mut profile = profile(false);
    profile.name = "resuming".into();
    profile.attempt_thread = ThreadChoice::Resume;
    w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x14), profile }));
    w.ok(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x31),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(0x14),
        plan: None,
    }));
    let on = |attempt: u128, session: u128, thread| {
        Command::StartAttempt(StartAttempt {
            attempt_id: lid(attempt),
            workflow_id: lid(0x31),
            worker_session_id: lid(session),
            thread,
            selection_receipt: None,
        })
    };
    w.refused(on(0x60, 0x61, ThreadChoice::Resume), Rule::ThreadPolicy); // nothing to resume
    w.ok(on(0x60, 0x61, ThreadChoice::Fresh));
    w.with(|s| {
        s.claim(lid(0x60))?;
        s.complete(0x60, ResultKind::Proposals)
    })
    .unwrap();
    w.refused(on(0x62, 0x63, ThreadChoice::Resume), Rule::ThreadPolicy); // another session
    w.ok(on(0x62, 0x61, ThreadChoice::Resume));
    // Cancelled before its dispatch, 0x62 never ran: the Thread of 0x60 may still be resumed
    // (outside review 47: it was refused as "did not finish").
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x62),
        workflow_version: 1,
        reason: "its claim went stale".into(),
    }));
    // Failed before its dispatch, likewise (outside review 49).
    w.ok(on(0x6a, 0x61, ThreadChoice::Resume));
    w.ok(Command::FailAttempt(FailAttempt { attempt_id: lid(0x6a), reason: "its claim went stale".into() }));
    w.ok(on(0x68, 0x61, ThreadChoice::Resume));
    w.with(|s| s.claim(lid(0x68))).unwrap();
    w.ok(Command::FailAttempt(FailAttempt { attempt_id: lid(0x68), reason: "the worker crashed".into() }));
    w.refused(on(0x64, 0x61, ThreadChoice::Resume), Rule::ThreadPolicy); // after a failure
    w.ok(on(0x64, 0x65, ThreadChoice::Fresh));
    w.with(|s| {
        s.claim(lid(0x64))?;
        s.complete(0x64, ResultKind::Proposals)
    })
    .unwrap();
    w.ok(Command::AdvancePhase(AdvancePhase { workflow_id: lid(0x31), phase: Phase::Plan, version: 2 }));
    w.refused(on(0x66, 0x65, ThreadChoice::Resume), Rule::ThreadPolicy); // across a phase
    w.ok(on(0x66, 0x67, ThreadChoice::Fresh));
}

/// RESUME is refused when authority the resumed Attempt was given has been withdrawn since
/// it started — a Human Decision superseded (across a goal revision), a CONFIRMED fact
/// invalidated: the new package omits it without a word, and the worker's Thread would
/// hold both (outside review 41, P2; seed: "a resumed Thread does not make its history
/// authoritative"); so is one after a project source it was given is superseded or a
/// blocker it was given is resolved. A FRESH thread is admitted; additions (a new
/// decision) and what it was never given do not refuse RESUME.
#[test]
fn resume_is_refused_after_authority_was_withdrawn() {
    use closure_ledger::runtime::command::{InvalidateFact, RecordHumanDecision, ReviseGoal};
    let resuming = |w: &mut World, goal_revision: u32, workflow: u128| {
        w.ok(Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(workflow),
            goal_id: lid(GOAL),
            goal_revision,
            policy_id: lid(POLICY),
            profile_id: lid(0x14),
            plan: None,
        }));
    };
    let on = start_on;
    let decision = |id: u128, question: &str, answer: &str| {
        Command::RecordHumanDecision(RecordHumanDecision {
            decision_id: lid(id),
            goal_id: lid(GOAL),
            question: question.into(),
            answer: answer.into(),
            decided_by: "human:alice".into(),
            supersedes: None,
        })
    };
    let mut w = World::at(Stage::Setup);
    let mut profile = profile(false);
    profile.name = "resuming".into();
    profile.attempt_thread = ThreadChoice::Resume;
    w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x14), profile }));
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    resuming(&mut w, 2, 0x31);
    let first = |w: &mut World, attempt: u128, session: u128| {
        w.ok(on(attempt, session, ThreadChoice::Fresh, 0x31));
        w.with(|s| {
            s.claim(lid(attempt))?;
            s.complete(attempt, ResultKind::Proposals)
        })
        .unwrap();
    };
    first(&mut w, 0x60, 0x61);
    // A new question answered: no withdrawal, RESUME stands.
    w.ok(decision(0x5A, "May parse() allocate?", "yes"));
    w.ok(on(0x62, 0x61, ThreadChoice::Resume, 0x31));
    w.with(|s| {
        s.claim(lid(0x62))?;
        s.complete(0x62, ResultKind::Proposals)
    })
    .unwrap();
    // The revision-1 answer (0x52) superseded at revision 2: RESUME refused, FRESH admitted.
    w.ok(decision(0x5B, "Keep the existing Error enum?", "No: replace it."));
    let err = w.fails(on(0x64, 0x61, ThreadChoice::Resume, 0x31));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(
        err.to_string().contains(&format!("human decision {}, superseded by {}", lid(0x52), lid(0x5B))),
        "{err}"
    );
    first(&mut w, 0x64, 0x65);
    // A CONFIRMED fact invalidated after the resumed Attempt started: refused too.
    w.ok(Command::InvalidateFact(InvalidateFact {
        fact_id: lid(0x50),
        revision: 1,
        reason: "wrong".into(),
        invalidated_by: Some("human:bob".into()),
    }));
    let err = w.fails(on(0x66, 0x65, ThreadChoice::Resume, 0x31));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(err.to_string().contains(&format!("fact {} revision 1, invalidated", lid(0x50))), "{err}");
    // ... and still once a new revision of the fact is proposed and confirmed: the Thread
    // holds revision 1 (outside review 205 F1, P1: the newest revision's window alone was
    // kept, and this RESUME passed).
    w.ok(Command::ProposeFact(ProposeFact {
        fact_id: lid(0x50),
        goal_id: lid(GOAL),
        revision: 2,
        statement: "the lexer drops the bytes after the document".into(),
        provenance: "re-check".into(),
    }));
    w.ok(Command::ConfirmFact(ConfirmFact {
        fact_id: lid(0x50),
        revision: 2,
        confirmed_by: "human:bob".into(),
    }));
    let err = w.fails(on(0x66, 0x65, ThreadChoice::Resume, 0x31));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(err.to_string().contains(&format!("fact {} revision 1, invalidated", lid(0x50))), "{err}");
    first(&mut w, 0x66, 0x67);
    // A fact confirmed only after the resumed Attempt started, then invalidated: that
    // Thread was never given it — RESUME stands (outside review 43).
    w.ok(Command::ConfirmFact(ConfirmFact {
        fact_id: lid(0x51),
        revision: 1,
        confirmed_by: "human:bob".into(),
    }));
    w.ok(Command::InvalidateFact(InvalidateFact {
        fact_id: lid(0x51),
        revision: 1,
        reason: "wrong after all".into(),
        invalidated_by: Some("human:bob".into()),
    }));
    w.ok(on(0x68, 0x67, ThreadChoice::Resume, 0x31));
    w.with(|s| {
        s.claim(lid(0x68))?;
        s.complete(0x68, ResultKind::Proposals)
    })
    .unwrap();
    // A project source superseded by a later record of its path, a blocker resolved:
    // withdrawn from the context too (outside review 43).
    w.ok(Command::RecordProjectSource(RecordProjectSource {
        source_id: lid(0x49),
        goal_id: lid(GOAL),
        path: "src/config/parser.rs".into(),
        revision: "a00b11c".into(),
        content: "pub fn parse() {}\n".into(),
    }));
    let err = w.fails(on(0x6a, 0x67, ThreadChoice::Resume, 0x31));
    assert!(err.to_string().contains(&format!("project source {}", lid(0x43))), "{err}");
    first(&mut w, 0x6a, 0x6b);
    w.ok(Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xe5),
        workflow_id: lid(0x31),
        description: "do not touch the lexer".into(),
    }));
    first(&mut w, 0x6c, 0x6d);
    w.ok(Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0xe5), resolution: "done".into() }));
    let err = w.fails(on(0x6e, 0x6d, ThreadChoice::Resume, 0x31));
    assert!(err.to_string().contains(&format!("blocker {}, resolved", lid(0xe5))), "{err}");
    first(&mut w, 0x6e, 0x6f);
    // An obligation or a scenario the Thread was given, retired since: withdrawn too
    // (outside review 67, P1).
    w.ok(Command::RetireObligation(RetireObligation {
        obligation_id: lid(OBLIGATION),
        reason: "dropped".into(),
    }));
    let err = w.fails(on(0x70, 0x6f, ThreadChoice::Resume, 0x31));
    assert_eq!(rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(err.to_string().contains(&format!("obligation {}, retired", lid(OBLIGATION))), "{err}");
    first(&mut w, 0x70, 0x71);
    w.ok(Command::RetireScenario(RetireScenario { scenario_id: lid(0x42), reason: "dropped".into() }));
    let err = w.fails(on(0x72, 0x71, ThreadChoice::Resume, 0x31));
    assert!(err.to_string().contains(&format!("scenario {}, retired", lid(0x42))), "{err}");
    first(&mut w, 0x72, 0x73);
    // A project source's path withdrawn from the project since (outside review 100).
    w.ok(Command::WithdrawProjectSource(WithdrawProjectSource {
        source_id: lid(0x49),
        reason: "the file was deleted".into(),
    }));
    let err = w.fails(on(0x74, 0x73, ThreadChoice::Resume, 0x31));
    assert_eq!(rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(
        err.to_string().contains(&format!("project source {} (src/config/parser.rs), withdrawn", lid(0x49))),
        "{err}"
    );
    first(&mut w, 0x74, 0x75);
    // A Human Decision the Thread was given, withdrawn since (outside review 135).
    w.ok(Command::WithdrawHumanDecision(WithdrawHumanDecision {
        decision_id: lid(0x5A),
        reason: "asked of the wrong goal".into(),
        withdrawn_by: "human:alice".into(),
    }));
    let err = w.fails(on(0x76, 0x75, ThreadChoice::Resume, 0x31));
    assert_eq!(rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(err.to_string().contains(&format!("human decision {}, withdrawn", lid(0x5A))), "{err}");
    w.ok(on(0x76, 0x77, ThreadChoice::Fresh, 0x31));
}

/// A forged Attempt start that breaks the thread policy is refused by the admission step
/// (so by replay), whatever its manifest says.
#[test]
fn thread_policy_forged() {
    let mut probe = World::at(Stage::Setup);
    probe.ok(start_with(0x60, 0x61, ThreadChoice::Fresh));
    let Event::AttemptStarted(mut a) = probe.last_event("attemptStarted") else { unreachable!() };
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.start(0x6a, 0x61)?;
        s.claim(lid(0x6a))?;
        s.complete(0x6a, ResultKind::Proposals)
    })
    .unwrap();
    a.thread = ThreadChoice::Resume;
    w.forged(Event::AttemptStarted(a), Rule::ThreadPolicy);
}

/// After a supervisor restart: the active Attempt ends interrupted and the replacement
/// starts in one frame, freshly compiled, on a FRESH thread with a new session; the
/// interrupted Attempt's late events are ignored receipts; a replacement that reuses a
/// session (or names an Attempt that is not active, or a stale version) writes nothing.
#[test]
fn restart_attempt() {
    let mut w = World::at(Stage::Implementing);
    w.with(|s| {
        s.start(0x64, 0x65)?;
        s.claim(lid(0x64))
    })
    .unwrap();
    let restart = |replacement: u128, session: u128, version: u32| {
        Command::RestartAttempt(RestartAttempt {
            attempt_id: lid(0x64),
            workflow_version: version,
            replacement_attempt_id: lid(replacement),
            worker_session_id: lid(session),
            reason: "supervisor restarted".into(),
        })
    };
    w.refused(restart(0x66, 0x65, 3), Rule::ThreadPolicy);
    w.refused(restart(0x66, 0x61, 3), Rule::ThreadPolicy);
    w.refused(restart(0x66, 0x67, 2), Rule::StaleWorkflowVersion);
    let err = w.fails(restart(0x66, 0x67, 2)).to_string();
    assert!(err.contains("restartAttempt cancels attempt"), "said as a restart (outside review 47): {err}");
    let head = w.ledger.store().head().seq;
    let receipt = w.ok(restart(0x66, 0x67, 3));
    assert_eq!(receipt.seq, head + 2, "two entries: the interruption and the replacement");
    let s = w.ledger.state().clone();
    assert_eq!(s.attempts[&lid(0x64)].status, AttemptStatus::Cancelled { interrupted: true });
    let r = &s.attempts[&lid(0x66)];
    assert_eq!(
        (r.status, r.thread, r.worker_session_id),
        (AttemptStatus::Started, ThreadChoice::Fresh, lid(0x67))
    );
    assert_eq!(s.workflows[&lid(WORKFLOW)].active_attempt, Some(lid(0x66)));
    assert_ne!(r.manifest_digest, s.attempts[&lid(0x64)].manifest_digest, "freshly compiled");
    // The replacement names the Attempt it replaces (outside review 74: nothing linked them).
    let Event::AttemptStarted(started) = w.last_event("attemptStarted") else { unreachable!() };
    assert_eq!(started.replaces, Some(lid(0x64)));
    assert_eq!(r.replaces, Some(lid(0x64)));
    // The interrupted Attempt's late event: an ignored receipt.
    w.with(|s| s.deliver(lid(0x64), 0x7b, payload(WorkerEventKind::Progress, 1, "late"))).unwrap();
    let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
    assert_eq!(i.reason, IgnoredReason::AttemptEnded);
    // The replacement runs to completion; a restart of an ended Attempt is refused.
    w.with(|s| {
        s.claim(lid(0x66))?;
        s.complete(0x66, ResultKind::CompletionRequest)
    })
    .unwrap();
    w.refused(restart(0x68, 0x69, 3), Rule::AttemptNotActive);
}

/// A dispatch claim revalidates the request digests against the *current* context: a bound
/// input that changed between `startAttempt` and `claimDispatch` (a fact confirmed or
/// invalidated, a blocker, an obligation, a human decision, a project source) makes the
/// recorded manifest stale, and the claim is refused, writing nothing — as a forged
/// `dispatchClaimed` too, so replay refuses it. A change outside the context (another
/// Goal's records) leaves the claim admissible.
#[test]
fn manifest_stale_refuses_the_claim() {
    let changes: Vec<Command> = vec![
        Command::InvalidateFact(InvalidateFact {
            fact_id: lid(0x50),
            revision: 1,
            reason: "wrong".to_owned(),
            invalidated_by: Some("human:alice".to_owned()),
        }),
        Command::ConfirmFact(ConfirmFact {
            fact_id: lid(0x51),
            revision: 1,
            confirmed_by: "human:bob".to_owned(),
        }),
        Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0x58),
            workflow_id: lid(WORKFLOW),
            description: "the CI runner is down".to_owned(),
        }),
        Command::RecordObligation(RecordObligation {
            obligation_id: lid(0x59),
            goal_id: lid(GOAL),
            description: "the lexer test passes".to_owned(),
            check_spec_id: lid(0x5a),
            check_spec_digest: digest_of("check: cargo test lexer"),
        }),
        Command::RecordHumanDecision(RecordHumanDecision {
            decision_id: lid(0x5b),
            goal_id: lid(GOAL),
            question: "Rename the Error enum?".to_owned(),
            answer: "No.".to_owned(),
            decided_by: "human:alice".to_owned(),
            supersedes: None,
        }),
        Command::RecordProjectSource(RecordProjectSource {
            source_id: lid(0x5c),
            goal_id: lid(GOAL),
            path: "src/config/lexer.rs".to_owned(),
            revision: "9f1c2e0".to_owned(),
            content: "pub fn lex() {}\n".to_owned(),
        }),
    ];
    for change in changes {
        let kind = change.kind();
        let mut w = World::at(Stage::Setup);
        w.with(|s| s.start(0x60, 0x61)).unwrap();
        let claim = ClaimDispatch::for_attempt(w.ledger.state(), lid(0x60)).unwrap();
        w.ok(change);
        let err = w.fails(Command::ClaimDispatch(claim.clone()));
        assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "after {kind}: {err}");
        w.forged(
            Event::DispatchClaimed(ledger_schema::events::DispatchClaimed {
                plan: claim.plan,
                profile: claim.profile,
                attempt_id: claim.attempt_id,
                package_digest: claim.package_digest,
                manifest_digest: claim.manifest_digest,
                workflow_version: claim.workflow_version,
                reported_inputs: None,
            }),
            Rule::ManifestStale,
        );
        // The stale Attempt is cancelled; a new one compiles the current context and runs.
        w.ok(Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(0x60),
            workflow_version: 1,
            reason: "context changed".to_owned(),
        }));
        w.with(|s| {
            s.start(0x62, 0x63)?;
            s.claim(lid(0x62))
        })
        .unwrap();
    }
    // Outside the context: another Goal's records do not make the manifest stale.
    let mut w = World::at(Stage::Setup);
    w.with(|s| s.start(0x60, 0x61)).unwrap();
    w.ok(Command::CreateGoal(CreateGoal { goal_id: lid(0x5d), content: goal_content() }));
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x5e),
        goal_id: lid(0x5d),
        description: "another goal's test passes".to_owned(),
        check_spec_id: lid(0x5f),
        check_spec_digest: digest_of("check: cargo test other"),
    }));
    w.with(|s| s.claim(lid(0x60))).unwrap();
}

/// Seed 000, "M2 App Server input closure": a profile binds the App Server's effective
/// inputs beside the package — instruction sources and tools by name and digest, the
/// permission profile, configuration and managed requirements by digest — and every dispatch
/// claim under it reports what the App Server loaded: "An unknown source, an unbound tool, a
/// widened permission, or a changed configuration digest blocks dispatch" (outside review 70:
/// there was nowhere to bind or record them). A report within the binding is admitted and
/// recorded in the claim; a profile that binds none takes no report.
#[test]
fn dispatch_is_blocked_by_an_app_server_input_outside_the_profiles_closure() {
    use ledger_schema::events::{BoundInput, InputClosure};
    let input = |name: &str, what: &str| BoundInput { name: name.into(), digest: digest_of(what) };
    let bound = InputClosure {
        tools: vec![input("apply_patch", "tool apply_patch"), input("shell", "tool shell")],
        config_digest: digest_of("config"),
        permission_digest: digest_of("permission profile"),
        instruction_sources: vec![input("AGENTS.md", "agents")],
        managed_requirements_digest: None,
    };
    let mut w = World::at(Stage::Setup);
    let mut closed = profile(false);
    closed.name = "app-server".into();
    // A closure's lists are sets sorted by name.
    let mut twice = bound.clone();
    twice.tools.push(input("shell", "tool shell"));
    closed.input_closure = Some(twice);
    w.refused(
        Command::InstallProfile(InstallProfile { profile_id: lid(0x16), profile: closed.clone() }),
        Rule::InputClosure,
    );
    closed.input_closure = Some(bound.clone());
    w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x16), profile: closed }));
    w.ok(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x31),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(0x16),
        plan: None,
    }));
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x60),
        workflow_id: lid(0x31),
        worker_session_id: lid(0x61),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    let base = claim_of(&w, lid(0x60));
    let claim = |reported: Option<InputClosure>| {
        let mut c = base.clone();
        c.reported_inputs = reported;
        Command::ClaimDispatch(c)
    };
    let with = |edit: &dyn Fn(&mut InputClosure)| {
        let mut r = bound.clone();
        edit(&mut r);
        Some(r)
    };
    let cases: Vec<(&str, Option<InputClosure>, &str)> = vec![
        ("no report", None, "must report"),
        (
            "an unknown source",
            with(&|r| r.instruction_sources.push(input("CLAUDE.md", "x"))),
            "unbound instruction source \"CLAUDE.md\"",
        ),
        (
            "a changed source",
            with(&|r| r.instruction_sources[0].digest = digest_of("edited")),
            "instruction source \"AGENTS.md\" is",
        ),
        ("an unbound tool", with(&|r| r.tools.push(input("web_search", "x"))), "unbound tool \"web_search\""),
        (
            "a widened permission",
            with(&|r| r.permission_digest = digest_of("wider")),
            "permission profile digest",
        ),
        ("a changed configuration", with(&|r| r.config_digest = digest_of("other")), "configuration digest"),
        (
            "new managed requirements",
            with(&|r| r.managed_requirements_digest = Some(digest_of("m"))),
            "managed requirements digest",
        ),
        ("an unsorted list", with(&|r| r.tools.reverse()), "sorted by name"),
    ];
    for (what, reported, says) in cases {
        let err = w.fails(claim(reported));
        assert_eq!(rule_of(&err), Some(Rule::InputClosure), "{what}: {err}");
        assert!(err.to_string().contains(says), "{what}: {err}");
    }
    // Within the binding (a bound tool not loaded is fine): admitted, and recorded.
    let within = with(&|r| r.tools.truncate(1));
    w.ok(claim(within.clone()));
    let Event::DispatchClaimed(recorded) = w.last_event("dispatchClaimed") else { unreachable!() };
    assert_eq!(recorded.reported_inputs, within);
    // A profile that binds none takes no report.
    w.ok(start(0x62));
    let mut c = claim_of(&w, lid(0x62));
    c.reported_inputs = Some(bound);
    let err = w.fails(Command::ClaimDispatch(c));
    assert_eq!(rule_of(&err), Some(Rule::InputClosure), "{err}");
    assert!(err.to_string().contains("binds no App Server input closure"), "{err}");
}

/// A start that names an Attempt it replaces is what `restartAttempt` writes — right after
/// that Attempt's cancellation, in its workflow and version, FRESH, with its task selection,
/// once — so a forged link is refused by the admission step (and by replay).
#[test]
fn only_a_restart_names_the_attempt_it_replaces() {
    let cancel = |attempt: u128| {
        Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(attempt),
            workflow_version: 1,
            reason: "superseded".into(),
        })
    };
    // A start of `attempt` as the setup compiles it, for forging.
    let started = |attempt: u128| {
        let mut probe = World::at(Stage::Setup);
        probe.ok(start(attempt));
        let Event::AttemptStarted(a) = probe.last_event("attemptStarted") else { unreachable!() };
        a
    };
    let mut w = World::at(Stage::Setup);
    w.ok(start(0x60));
    w.ok(cancel(0x60));
    let mut a = started(0x62);
    a.replaces = Some(lid(0x61)); // not an Attempt
    w.forged(Event::AttemptStarted(a.clone()), Rule::Unknown);
    // Not right after the cancellation (outside review 75: a later frame claimed the link).
    w.ok(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: goal_content() }));
    a.replaces = Some(lid(0x60));
    w.forged(Event::AttemptStarted(a), Rule::AttemptActive);
    // A cancelled Attempt of the workflow, named by a FRESH start right after: the link says
    // what happened, once…
    w.ok(start(0x62));
    w.ok(cancel(0x62));
    let mut b = started(0x64);
    b.replaces = Some(lid(0x62));
    w.ledger
        .admit(
            vec![Event::AttemptStarted(b)],
            closure_ledger::runtime::Ctx { time_ms: replay_tests::T0 + 50_000 },
        )
        .unwrap();
    // …and never twice.
    w.ok(cancel(0x64));
    let mut c = started(0x66);
    c.replaces = Some(lid(0x62));
    w.forged(Event::AttemptStarted(c), Rule::AttemptActive);
}

/// What an earlier Attempt on a RESUMEd Thread was given and was withdrawn after the RESUME
/// started is seen at its dispatch claim and, once dispatched, marks it — also when the
/// RESUME's own package left the item out (here a confirmed fact pushed out of DISCOVERY's
/// FACTS budget by a longer one): the claim's currency proof compiles only this Attempt's
/// package, and the Thread still holds the item (outside review 90: the claim, the result,
/// a freeze and an ACCEPT were admitted; only a later RESUME's start was refused).
#[test]
fn a_resumed_threads_withdrawn_history_is_seen_at_the_claim_and_after_it() {
    use closure_ledger::runtime::command::InvalidateFact;
    use ledger_schema::types::InputClass;
    let setup = || {
        let mut w = World::at(Stage::Setup);
        let mut bundle = policy_bundle();
        for p in bundle.phases.iter_mut().filter(|p| p.phase == Phase::Discovery) {
            p.required.retain(|c| *c != InputClass::FactsScenariosObligations);
            p.optional.retain(|c| *c != InputClass::FactsScenariosObligations);
            p.optional.push(InputClass::FactsScenariosObligations);
            p.optional.sort();
        }
        for b in bundle.budgets.iter_mut().filter(|b| b.class == InputClass::FactsScenariosObligations) {
            b.max_bytes = 780;
        }
        w.ok(Command::InstallPolicy(InstallPolicy { policy_id: lid(0x15), bundle }));
        let mut resuming = profile(false);
        resuming.name = "resuming".into();
        resuming.attempt_thread = ThreadChoice::Resume;
        w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x14), profile: resuming }));
        w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
        w.ok(Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(0x31),
            goal_id: lid(GOAL),
            goal_revision: 2,
            policy_id: lid(0x15),
            profile_id: lid(0x14),
            plan: None,
        }));
        let on = |attempt: u128, thread| start_on(attempt, 0x61, thread, 0x31);
        // A0 is given fact 0x50 ...
        w.ok(on(0x60, ThreadChoice::Fresh));
        w.with(|s| {
            s.claim(lid(0x60))?;
            s.complete(0x60, ResultKind::Proposals)
        })
        .unwrap();
        // ... a longer fact, sorting first, leaves it out of A1's package.
        w.ok(Command::ProposeFact(ProposeFact {
            fact_id: lid(0x4F),
            goal_id: lid(GOAL),
            revision: 1,
            statement: format!("the lexer {}", "is unaffected by the change ".repeat(24)),
            provenance: "discovery notes".into(),
        }));
        w.ok(Command::ConfirmFact(ConfirmFact {
            fact_id: lid(0x4F),
            revision: 1,
            confirmed_by: "human:bob".into(),
        }));
        w.ok(on(0x62, ThreadChoice::Resume));
        let state = w.ledger.state();
        let binding = closure_ledger::runtime::current_binding(state, lid(0x62)).unwrap();
        let compiled = closure_ledger::compiler::compile(state, &binding).unwrap();
        assert!(
            compiled
                .manifest
                .omission_decisions
                .iter()
                .any(|o| o.rule.starts_with("budget.") && o.source_ref.contains(&lid(0x50).to_string())),
            "fact 0x50 is left out of A1's package: {:?}",
            compiled.manifest.omission_decisions
        );
        w
    };
    let invalidate = Command::InvalidateFact(InvalidateFact {
        fact_id: lid(0x50),
        revision: 1,
        reason: "wrong: parse() writes a cache".into(),
        invalidated_by: Some("human:bob".into()),
    });
    // Withdrawn between A1's start and its claim: the claim is refused.
    let mut w = setup();
    w.ok(invalidate.clone());
    let err = w.with(|s| s.claim(lid(0x62))).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ThreadPolicy), "{err}");
    assert!(err.to_string().contains(&format!("fact {} revision 1, invalidated", lid(0x50))), "{err}");
    // Withdrawn after the claim: the dispatched Attempt is marked, its result refused.
    let mut w = setup();
    w.with(|s| s.claim(lid(0x62)).map(drop)).unwrap();
    assert!(!w.ledger.state().attempts[&lid(0x62)].context_changed);
    w.ok(invalidate);
    assert!(w.ledger.state().attempts[&lid(0x62)].context_changed);
    let err = w.with(|s| s.complete(0x62, ResultKind::Proposals)).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
}

/// A protected (bounded) profile binds none of the tool surfaces seed 000 disables for it —
/// "hooks, plugins, MCP, apps, skills, subagents, dynamic tools, and Web Search" — by the
/// documented naming convention (`mcp:NAME`, `hook:NAME`, …; any case) or a web search tool
/// (outside review 90: a protected profile bound `hook:pre-commit`, `mcp:github` and
/// `web_search`, and claims reporting them dispatched). An unprotected profile may bind
/// them; a protected one binds ordinary tools.
#[test]
fn a_protected_profile_binds_no_surface_the_seed_disables() {
    use ledger_schema::events::{BoundInput, InputClosure};
    let closure = |tools: &[&str]| InputClosure {
        tools: {
            let mut v: Vec<BoundInput> =
                tools.iter().map(|t| BoundInput { name: (*t).into(), digest: digest_of(t) }).collect();
            v.sort_by(|a, b| a.name.cmp(&b.name));
            v
        },
        config_digest: digest_of("config"),
        permission_digest: digest_of("permission profile"),
        instruction_sources: Vec::new(),
        managed_requirements_digest: None,
    };
    let mut w = World::at(Stage::Setup);
    let mut id = 0x16;
    let mut install = |protected: bool, tools: &[&str]| {
        let mut p = profile(protected);
        p.name = format!("closure {id}");
        p.input_closure = Some(closure(tools));
        id += 1;
        Command::InstallProfile(InstallProfile { profile_id: lid(id), profile: p })
    };
    for tool in [
        "hook:pre-commit",
        "MCP:github",
        "plugin:x",
        "app:y",
        "skill:z",
        "subagent:a",
        "dynamic:b",
        "web_search",
        "WebSearch",
        // Outside review 93: the forms the first reading let through.
        "mcp__server__tool",
        " mcp:x",
        "mcp :x",
        "\u{FF4D}\u{FF43}\u{FF50}:x",
        "mcp\u{FF1A}x",
        "hooks:x",
        "skills:x",
        "search_web",
        // Outside review 108: camelCase names.
        "mcpServer",
        "MCPClient",
        "useMcp",
        "hookRunner",
        "pluginHost",
        "skillsLoader",
        "dynamicTools",
        "WebSearchTool",
        "spawnSubagent",
        "AppsSDK",
        // Outside review 109: the split alone let these through, and other spellings.
        "SubAgents",
        "subAgent",
        "PlugIns",
        "SKILLs",
        "HOOKs",
        "APPs",
        "MCPs",
        "PLUGINs",
        "SUBAGENTs",
        "mcpserver",
        "mcp2server",
        "mcps",
        "model_context_protocol",
        "sub_agent",
        "sub-agent",
        "plug_in",
        "web_searcher",
        "WebSearcher",
        "websearcher",
        "searching_web",
    ] {
        let c = install(true, &["apply_patch", tool]);
        let err = w.fails(c);
        assert_eq!(rule_of(&err), Some(Rule::InputClosure), "{tool}: {err}");
        let c = install(false, &["apply_patch", tool]);
        w.ok(c);
    }
    // Words that only contain those letters are not them.
    for tool in ["apply_patch", "shell", "happyPath", "Mapper", "webhookless", "readConfigFile"] {
        let c = install(true, &[tool]);
        w.ok(c);
    }
    // Instruction sources too: a skill, a hook's or the candidate's own config.
    for source in [
        "skills/deploy/SKILL.md",
        ".codex/config.toml",
        ".codex/hooks.json",
        "CONFIGs",
        "myCONFIGs",
        ".claude/settings.json",
    ] {
        let mut p = profile(true);
        p.name = format!("sources {source}");
        let mut c = closure(&["shell"]);
        c.instruction_sources = vec![BoundInput { name: source.into(), digest: digest_of(source) }];
        p.input_closure = Some(c);
        let err = w.fails(Command::InstallProfile(InstallProfile { profile_id: lid(0x7F), profile: p }));
        assert_eq!(rule_of(&err), Some(Rule::InputClosure), "{source}: {err}");
    }
    let mut p = profile(true);
    p.name = "agents".into();
    let mut c = closure(&["shell"]);
    c.instruction_sources = vec![BoundInput { name: "AGENTS.md".into(), digest: digest_of("agents") }];
    p.input_closure = Some(c);
    w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x7F), profile: p }));
}

/// A claim refused because the context no longer compiles names a way out that works: a
/// new Attempt would not compile it either (outside review 209 F2, P3: "start a new
/// Attempt" was refused in turn, "cannot compile the context").
#[test]
fn an_uncompilable_context_names_a_way_out_a_new_attempt_cannot_take() {
    let mut w = World::at(Stage::Setup);
    w.ok(start_with(0x60, 0x61, ThreadChoice::Fresh));
    let active = lid(0x60);
    let claim = Command::ClaimDispatch(claim_of(&w, active));
    // Scenarios past the required FACTS_SCENARIOS_OBLIGATIONS budget.
    let mut id = 0x300;
    let err = loop {
        w.ok(Command::RecordScenario(RecordScenario {
            scenario_id: lid(id),
            goal_id: lid(GOAL),
            title: format!("scenario {id}"),
            description: "the parser keeps every byte of a long document. ".repeat(60),
        }));
        id += 1;
        assert!(id < 0x400, "the budget was never reached");
        // Refused from the first scenario on (the package differs); then as uncompilable.
        let e = w.fails(claim.clone()).to_string();
        if e.contains("no longer compiles") {
            break e;
        }
    };
    assert!(err.contains("no new Attempt compiles this context either"), "{err}");
    assert!(!err.contains("start a new Attempt, which compiles"), "{err}");
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: active,
        workflow_version: 1,
        reason: "stale".into(),
    }));
    let err = w.fails(start_with(0x62, 0x63, ThreadChoice::Fresh));
    assert!(err.to_string().contains("cannot compile the context"), "{err}");
}
