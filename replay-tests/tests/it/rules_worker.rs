//! Worker events: size, dispatch claim, dedup (duplicate / conflict), staleness receipts.

use closure_ledger::Refusal;
use closure_ledger::ledger::SubmitError;
use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Ctx, Rejection, Rule};
use closure_ledger::store::Store;
use ledger_schema::events::{
    IgnoredReason, WorkerDeliveryIgnored, WorkerEventAdmitted, WorkerEventKind, WorkerPayload,
};
use ledger_schema::types::ThreadChoice;
use ledger_schema::{Digest, Event};
use replay_tests::world::{Stage, World};

/// A world with attempt 0x60 started; `claimed` also records its dispatch claim.
fn world(claimed: bool) -> World {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x60),
        workflow_id: lid(WORKFLOW),
        worker_session_id: lid(0x61),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    if claimed {
        w.with(|s| s.claim(lid(0x60))).unwrap();
    }
    w
}

fn manifest(w: &World) -> Digest {
    w.ledger.state().attempts[&lid(0x60)].manifest_digest
}

fn deliver(w: &World, event: u128, p: WorkerPayload) -> Command {
    Command::DeliverWorkerEvent(DeliverWorkerEvent {
        attempt_id: lid(0x60),
        worker_event_id: lid(event),
        manifest_digest: manifest(w),
        payload: p,
    })
}

/// Attempt 0x60 dispatched on workflow 0x31 under a profile of compaction `mode`.
fn compaction_world(mode: ledger_schema::types::CompactionMode) -> World {
    let mut w = World::at(Stage::Setup);
    let mut profile = profile(false);
    profile.name = format!("compaction {mode:?}");
    profile.compaction = mode;
    w.ok(Command::InstallProfile(InstallProfile { profile_id: lid(0x14), profile }));
    w.ok(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x31),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(0x14),
        plan: None,
    }));
    w.ok(Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x60),
        workflow_id: lid(0x31),
        worker_session_id: lid(0x61),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    }));
    w.with(|s| s.claim(lid(0x60))).unwrap();
    w
}

/// A compaction directive for attempt 0x60 (what a MANUAL profile's COMPACTION_STARTED needs).
fn request(directive: u128) -> Command {
    Command::RequestCompaction(closure_ledger::runtime::command::RequestCompaction {
        directive_id: lid(directive),
        attempt_id: lid(0x60),
    })
}

fn progress(text: &str) -> WorkerPayload {
    payload(WorkerEventKind::Progress, 1, text)
}

/// A canonical payload over maxEventBytes is refused (before anything else is checked).
#[test]
fn payload_too_large() {
    let mut w = world(true);
    let c = deliver(&w, 0x70, progress(&"x".repeat(65_530)));
    w.refused(c, Rule::PayloadTooLarge);
    let c = deliver(&w, 0x70, progress(&"x".repeat(65_000)));
    w.ok(c);
}

/// A worker event without the attempt's dispatch claim is a control-plane error.
#[test]
fn missing_dispatch_claim() {
    let mut w = world(false);
    let c = deliver(&w, 0x70, progress("early"));
    w.refused(c, Rule::MissingDispatchClaim);
}

/// Same id + same canonical payload = duplicate: nothing written, the original seq returned.
#[test]
fn duplicate_returns_the_original_seq() {
    let mut w = world(true);
    let first = w.ok(deliver(&w, 0x70, progress("p")));
    let frames = w.ledger.store().frames().len();
    let again = w.ok(deliver(&w, 0x70, progress("p")));
    assert!(again.duplicate);
    assert_eq!((again.seq, again.hash), (first.seq, first.hash));
    assert_eq!(w.ledger.store().frames().len(), frames, "a duplicate writes nothing");
}

/// Same id + any other byte (here: only the observed time) = conflict.
#[test]
fn conflict_on_a_different_payload() {
    let mut w = world(true);
    let first = w.ok(deliver(&w, 0x70, progress("p")));
    let mut other = progress("p");
    other.observed_at_ms += 1;
    let c = deliver(&w, 0x70, other);
    let err = w.fails(c);
    assert!(
        matches!(err, SubmitError::Refused(Refusal::Conflict { original_seq, .. }) if original_seq == first.seq),
        "{err}"
    );
}

/// The dedup index keeps only id → seq; the original entry decides duplicate vs conflict,
/// also when it is an ignored receipt, when it sits in the same group commit, and when
/// only the attempt differs.
#[test]
fn redelivery_is_judged_against_the_stored_original() {
    let mut w = world(true);
    // An ignored receipt (stale manifest) is an original too.
    let mut stale = deliver(&w, 0x71, progress("s"));
    if let Command::DeliverWorkerEvent(d) = &mut stale {
        d.manifest_digest = digest_of("an old manifest");
    }
    let ignored = w.ok(stale.clone());
    let again = w.ok(stale.clone());
    assert!(again.duplicate && again.seq == ignored.seq);
    // Against the original's event: same id, attempt and payload digest = duplicate; another
    // attempt, another id, or an entry that is no worker event = conflict.
    let Command::DeliverWorkerEvent(d) = &stale else { unreachable!() };
    let original = w.ledger.store().read(ignored.seq).unwrap().entry.event;
    assert_eq!(closure_ledger::runtime::redelivery(d, &original, ignored.seq), Ok(()));
    let mut other_attempt = d.clone();
    other_attempt.attempt_id = lid(0x61);
    let mut other_id = d.clone();
    other_id.worker_event_id = lid(0x79);
    let genesis = w.ledger.store().read(0).unwrap().entry.event;
    for (c, e) in [(&other_attempt, &original), (&other_id, &original), (d, &genesis)] {
        assert!(matches!(
            closure_ledger::runtime::redelivery(c, e, ignored.seq),
            Err(Rejection::Conflict { original_seq, .. }) if original_seq == ignored.seq
        ));
    }
    // Original and redeliveries in one group commit: one entry, the rest duplicates or a conflict.
    let fresh = deliver(&w, 0x72, progress("f"));
    let mut changed = progress("f");
    changed.observed_at_ms += 1;
    let batch = [fresh.clone(), fresh, deliver(&w, 0x72, changed)];
    let frames = w.ledger.store().frames().len();
    let (results, processed) = w.ledger.submit_batch(&batch, Ctx { time_ms: replay_tests::T0 + 500_000 });
    assert_eq!(processed, 3);
    let first = results[0].as_ref().unwrap();
    let second = results[1].as_ref().unwrap();
    assert!(!first.duplicate && second.duplicate && second.seq == first.seq && second.hash == first.hash);
    assert!(
        matches!(&results[2], Err(SubmitError::Refused(Refusal::Conflict { original_seq, .. })) if *original_seq == first.seq)
    );
    assert_eq!(w.ledger.store().frames().len(), frames + 1, "one frame, one entry");
    assert_eq!(w.ledger.state().worker_events.get(&lid(0x72)), Some(first.seq));
}

/// A delivery for an ended attempt or another manifest becomes only an ignored receipt.
#[test]
fn delivery_staleness_receipts() {
    let mut w = world(true);
    let mut c = deliver(&w, 0x70, progress("p"));
    if let Command::DeliverWorkerEvent(d) = &mut c {
        d.manifest_digest = digest_of("an old manifest");
    }
    w.ok(c);
    let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
    assert_eq!(i.reason, IgnoredReason::ManifestMismatch);
    w.with(|s| s.complete(0x60, ledger_schema::types::ResultKind::Proposals)).unwrap();
    w.ok(deliver(&w, 0x71, progress("late")));
    let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
    assert_eq!(i.reason, IgnoredReason::AttemptEnded);
    assert_eq!(w.ledger.state().attempts[&lid(0x60)].events_admitted, 1, "only the terminal result event");
}

/// A redelivery naming another manifest than the recorded one is another delivery, not a
/// duplicate (outside review 20: after a MANIFEST_MISMATCH receipt, the same id and payload
/// for the current manifest returned the ignored receipt as `duplicate`, and the worker's
/// result could never count): it is refused as a conflict, writes nothing, and the result
/// under a new id is admitted.
#[test]
fn a_redelivery_for_another_manifest_is_a_conflict() {
    let mut w = world(true);
    let mut misaddressed = deliver(&w, 0x70, progress("p"));
    if let Command::DeliverWorkerEvent(d) = &mut misaddressed {
        d.manifest_digest = digest_of("an old manifest");
    }
    let ignored = w.ok(misaddressed);
    let frames = w.ledger.store().frames().len();
    let err = w
        .ledger
        .submit(&deliver(&w, 0x70, progress("p")), Ctx { time_ms: replay_tests::T0 + 600_000 })
        .unwrap_err();
    assert!(
        matches!(&err, SubmitError::Refused(Refusal::Conflict { original_seq, differs, .. })
            if *original_seq == ignored.seq && *differs == "for another manifest"),
        "{err}"
    );
    assert_eq!(w.ledger.store().frames().len(), frames, "a conflict writes nothing");
    let admitted = w.ok(deliver(&w, 0x71, progress("p")));
    assert!(!admitted.duplicate);
    assert_eq!(w.ledger.state().attempts[&lid(0x60)].events_admitted, 1);
}

/// Forged: admitting a stale delivery, or an ignored receipt for a current one, is refused.
#[test]
fn delivery_staleness_forged() {
    let mut w = world(true);
    let p = progress("p");
    w.forged(
        Event::WorkerDeliveryIgnored(WorkerDeliveryIgnored {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x70),
            manifest_digest: manifest(&w),
            payload_digest: p.digest(),
            reason: IgnoredReason::AttemptEnded,
        }),
        Rule::DeliveryStaleness,
    );
    w.forged(
        Event::WorkerEventAdmitted(WorkerEventAdmitted {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x70),
            manifest_digest: digest_of("old"),
            payload_digest: p.digest(),
            payload: p.clone(),
        }),
        Rule::DeliveryStaleness,
    );
}

/// A payload digest that is not the payload's is refused.
#[test]
fn payload_digest() {
    let mut w = world(true);
    let p = progress("p");
    let m = manifest(&w);
    w.forged(
        Event::WorkerEventAdmitted(WorkerEventAdmitted {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x70),
            manifest_digest: m,
            payload_digest: digest_of("x"),
            payload: p,
        }),
        Rule::PayloadDigest,
    );
}

/// The phase's response contract, for events as for results: a COMPLETION_REQUEST event in
/// DISCOVERY or PLAN, a PROPOSALS event in IMPLEMENT, is refused (`ResultKind`) — live and
/// as a forged entry — writing nothing; the permitted kinds are admitted.
#[test]
fn result_kind_event_outside_its_phase() {
    use WorkerEventKind as K;
    let mut w = world(true);
    let c = deliver(&w, 0x70, payload(K::CompletionRequest, 1, "done already"));
    w.refused(c, Rule::ResultKind);
    // Forged: the same event as an admitted entry, digest correct.
    let p = payload(K::CompletionRequest, 1, "done already");
    let forged = WorkerEventAdmitted {
        attempt_id: lid(0x60),
        worker_event_id: lid(0x70),
        manifest_digest: manifest(&w),
        payload_digest: p.digest(),
        payload: p,
    };
    w.forged(Event::WorkerEventAdmitted(forged), Rule::ResultKind);
    let c = deliver(&w, 0x71, payload(K::Proposals, 1, "fact: parse() drops trailing bytes"));
    w.ok(c);

    // PLAN: no COMPLETION_REQUEST either.
    let mut w = World::at(Stage::Setup);
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))?;
        s.complete(0x60, ledger_schema::types::ResultKind::Proposals)?;
        s.advance(ledger_schema::types::Phase::Plan)?;
        s.start(0x62, 0x63)?;
        s.claim(lid(0x62))
    })
    .unwrap();
    let m = w.ledger.state().attempts[&lid(0x62)].manifest_digest;
    let c = Command::DeliverWorkerEvent(DeliverWorkerEvent {
        attempt_id: lid(0x62),
        worker_event_id: lid(0x72),
        manifest_digest: m,
        payload: payload(K::CompletionRequest, 1, "done"),
    });
    w.refused(c, Rule::ResultKind);

    // IMPLEMENT: no PROPOSALS.
    let mut w = World::at(Stage::Implementing);
    w.with(|s| {
        s.start(0x64, 0x65)?;
        s.claim(lid(0x64))
    })
    .unwrap();
    let m = w.ledger.state().attempts[&lid(0x64)].manifest_digest;
    let event = |kind, id| {
        Command::DeliverWorkerEvent(DeliverWorkerEvent {
            attempt_id: lid(0x64),
            worker_event_id: lid(id),
            manifest_digest: m,
            payload: payload(kind, 1, "work"),
        })
    };
    w.refused(event(K::Proposals, 0x73), Rule::ResultKind);
    w.ok(event(K::CompletionRequest, 0x74));
}

/// Worker payload text is required (non-blank after trimming), and so is every item.
#[test]
fn blank_payload_is_refused() {
    let mut w = world(true);
    for text in ["", "   ", "\n\t"] {
        let c = deliver(&w, 0x70, progress(text));
        w.refused(c, Rule::OutOfBounds);
    }
    let mut p = progress("reading");
    p.items = vec!["src/config".into(), " ".into()];
    let c = deliver(&w, 0x70, p);
    w.refused(c, Rule::OutOfBounds);
    let c = deliver(&w, 0x70, progress("reading"));
    w.ok(c);
}

/// After `reviseGoal`, the old Attempt's worker events are ignored receipts (GOAL_REVISED)
/// that change nothing else, and a forged admission of one is refused.
#[test]
fn goal_revised_events_are_ignored_receipts() {
    let mut w = world(true);
    w.ok(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: goal_content() }));
    let attempt = w.ledger.state().attempts[&lid(0x60)].clone();
    let c = deliver(&w, 0x70, progress("still working on revision 1"));
    let receipt = w.ok(c);
    assert_eq!(receipt.ignored, Some(IgnoredReason::GoalRevised), "the receipt says it was ignored");
    let c = deliver(&w, 0x70, progress("still working on revision 1"));
    let again = w.ok(c);
    assert_eq!(
        (again.duplicate, again.seq, again.ignored),
        (true, receipt.seq, Some(IgnoredReason::GoalRevised))
    );
    let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
    assert_eq!(i.reason, IgnoredReason::GoalRevised);
    assert_eq!(w.ledger.state().attempts[&lid(0x60)], attempt, "the attempt did not change");
    // A forged admission of such an event is refused.
    let p = progress("forged");
    let forged = WorkerEventAdmitted {
        attempt_id: lid(0x60),
        worker_event_id: lid(0x71),
        manifest_digest: manifest(&w),
        payload_digest: p.digest(),
        payload: p,
    };
    w.forged(Event::WorkerEventAdmitted(forged), Rule::DeliveryStaleness);
}

/// Seed: "An in-flight worker may finish, but its result is evaluated against the current
/// Attempt and manifest. Stale results cannot advance the workflow." A bound input of a
/// dispatched Attempt's context that changes (a fact confirmed or invalidated, a blocker,
/// an obligation, a human decision, a project source) marks it once, in the admission step:
/// its worker events become ignored receipts (CONTEXT_CHANGED) that change nothing else, a
/// forged admission of one is refused, `finishAttempt` is refused (`ManifestStale`) writing
/// nothing, and `failAttempt` stays possible. A refold of the stored entries through the
/// admission step (what reopen and `ledger replay` do) reproduces the mark exactly. Another
/// Goal's records leave the Attempt current and its result advances the workflow.
#[test]
fn context_changed_results_do_not_advance() {
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
        // The setup's decision withdrawn (outside review 135).
        Command::WithdrawHumanDecision(WithdrawHumanDecision {
            decision_id: lid(0x52),
            reason: "asked of the wrong goal".to_owned(),
            withdrawn_by: "human:alice".to_owned(),
        }),
    ];
    let finish = || {
        Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(0x60),
            result_kind: ledger_schema::types::ResultKind::Proposals,
            summary: "done".to_owned(),
        })
    };
    for change in changes {
        let kind = change.kind();
        let mut w = world(true);
        // Before the change the Attempt is current: a receipt claiming otherwise is forged.
        let p = progress("forged");
        let forged = WorkerDeliveryIgnored {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x72),
            manifest_digest: manifest(&w),
            payload_digest: p.digest(),
            reason: IgnoredReason::ContextChanged,
        };
        w.forged(Event::WorkerDeliveryIgnored(forged), Rule::DeliveryStaleness);
        w.ok(change);
        assert!(w.ledger.state().attempts[&lid(0x60)].context_changed, "after {kind}: marked");
        let attempt = w.ledger.state().attempts[&lid(0x60)].clone();
        let c = deliver(&w, 0x70, payload(WorkerEventKind::Proposals, 1, "fact: parse() drops errors"));
        let receipt = w.ok(c);
        assert_eq!(receipt.ignored, Some(IgnoredReason::ContextChanged), "after {kind}");
        let Event::WorkerDeliveryIgnored(i) = w.last_event("workerDeliveryIgnored") else { unreachable!() };
        assert_eq!(i.reason, IgnoredReason::ContextChanged);
        assert_eq!(
            w.ledger.state().attempts[&lid(0x60)],
            attempt,
            "after {kind}: the attempt did not change"
        );
        let p = progress("forged");
        let forged = WorkerEventAdmitted {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x71),
            manifest_digest: manifest(&w),
            payload_digest: p.digest(),
            payload: p,
        };
        w.forged(Event::WorkerEventAdmitted(forged), Rule::DeliveryStaleness);
        w.refused(finish(), Rule::ManifestStale);
        // Replay: refolding every stored entry through the admission step gives this state.
        let head = w.ledger.store().head().seq;
        let mut refolded = closure_ledger::runtime::State::default();
        for entry in w.ledger.store().read_range(0, head).unwrap() {
            closure_ledger::admission::apply(&mut refolded, &entry.entry).unwrap();
        }
        assert_eq!(refolded.digest(), w.ledger.state().digest(), "after {kind}: replay reproduces the mark");
        w.ok(Command::FailAttempt(FailAttempt {
            attempt_id: lid(0x60),
            reason: "context changed".to_owned(),
        }));
    }
    // Outside the context: another Goal's records leave the result current.
    let mut w = world(true);
    w.ok(Command::CreateGoal(CreateGoal { goal_id: lid(0x5d), content: goal_content() }));
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x5e),
        goal_id: lid(0x5d),
        description: "another goal's test passes".to_owned(),
        check_spec_id: lid(0x5f),
        check_spec_digest: digest_of("check: cargo test other"),
    }));
    assert!(!w.ledger.state().attempts[&lid(0x60)].context_changed);
    let c = deliver(&w, 0x70, payload(WorkerEventKind::Proposals, 1, "fact: parse() drops errors"));
    assert_eq!(w.ok(c).ignored, None);
    w.ok(finish());
}

/// Seed: "Admission measures the strictly decoded event's canonical UTF-8 JSON bytes against
/// that limit". The canonical JSON of a payload is its compact serde_json form with sorted
/// keys, written out here by hand: at exactly maxEventBytes (65,536) it is admitted, one
/// byte more is refused writing nothing — although its CBOR encoding is well under the
/// limit (what was measured before). Escapes count: a newline is two JSON bytes.
#[test]
fn payload_too_large_measures_canonical_json() {
    let max = 65_536usize;
    let json =
        |text: &str| format!("{{\"items\":[],\"kind\":\"PROGRESS\",\"observedAtMs\":1,\"text\":{text:?}}}");
    let overhead = json("").len();
    let fits = "x".repeat(max - overhead);
    assert_eq!(json(&fits).len(), max);
    assert_eq!(closure_ledger::runtime::canonical_json_len(&progress(&fits)), max);
    let over = "x".repeat(max - overhead + 1);
    assert!(ledger_schema::codec::encode(&progress(&over)).len() <= max, "CBOR is under the limit");
    let mut w = world(true);
    let c = deliver(&w, 0x70, progress(&over));
    w.refused(c, Rule::PayloadTooLarge);
    // Escapes are measured as written: each newline is `\n`, two bytes.
    let escaped = format!("{}\n", "x".repeat(max - overhead - 1));
    assert_eq!(json(&escaped).len(), max + 1);
    let c = deliver(&w, 0x70, progress(&escaped));
    w.refused(c, Rule::PayloadTooLarge);
    let c = deliver(&w, 0x70, progress(&fits));
    w.ok(c);
}

/// Seed: compaction mode is "selected by the Workflow-bound Execution Profile rather than
/// adapter discretion". Under a profile with compaction DISABLED a current
/// COMPACTION_STARTED or COMPACTION_COMPLETED event is refused (`CompactionMode`) writing
/// nothing, as a forged admission too; other events are admitted, and under the MANUAL
/// profile the same compaction events are admitted.
#[test]
fn compaction_disabled_refuses_compaction_events() {
    let mut w = compaction_world(ledger_schema::types::CompactionMode::Disabled);
    for kind in [WorkerEventKind::CompactionStarted, WorkerEventKind::CompactionCompleted] {
        let c = deliver(&w, 0x70, payload(kind, 1, ""));
        w.refused(c, Rule::CompactionMode);
        let p = payload(kind, 1, "");
        let forged = WorkerEventAdmitted {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x71),
            manifest_digest: manifest(&w),
            payload_digest: p.digest(),
            payload: p,
        };
        w.forged(Event::WorkerEventAdmitted(forged), Rule::CompactionMode);
    }
    w.refused(request(0x90), Rule::CompactionMode);
    let c = deliver(&w, 0x70, progress("reading"));
    w.ok(c);
    // The MANUAL profile of the setup workflow admits them, on a directive.
    let mut w = world(true);
    w.ok(request(0x90));
    let c = deliver(&w, 0x70, payload(WorkerEventKind::CompactionStarted, 1, ""));
    assert_eq!(w.ok(c).ignored, None);
    let c = deliver(&w, 0x71, payload(WorkerEventKind::CompactionCompleted, 2, ""));
    assert_eq!(w.ok(c).ignored, None);
}

/// Compactions open and close in turn, and no result is admitted inside one (outside
/// review 39; seed: a manual compaction's turn progress "is not a new Worker dispatch,
/// Attempt, or completion request and MUST NOT be admitted as one"): COMPLETED with none
/// open, STARTED twice, a result while one is open — refused (`CompactionOrder`); progress
/// inside one is admitted, and the result after COMPLETED.
#[test]
fn compaction_events_come_in_order() {
    use WorkerEventKind::{CompactionCompleted, CompactionStarted, Proposals};
    let mut w = world(true);
    w.refused(deliver(&w, 0x70, payload(CompactionCompleted, 1, "")), Rule::CompactionOrder);
    w.ok(request(0x90));
    w.ok(deliver(&w, 0x71, payload(CompactionStarted, 1, "")));
    assert!(w.ledger.state().attempts[&lid(0x60)].compacting);
    w.refused(deliver(&w, 0x72, payload(CompactionStarted, 2, "")), Rule::CompactionOrder);
    w.refused(deliver(&w, 0x73, payload(Proposals, 3, "the turn ended")), Rule::CompactionOrder);
    w.ok(deliver(&w, 0x74, progress("")));
    w.ok(deliver(&w, 0x75, payload(CompactionCompleted, 4, "")));
    assert!(!w.ledger.state().attempts[&lid(0x60)].compacting);
    w.refused(deliver(&w, 0x76, payload(CompactionCompleted, 5, "")), Rule::CompactionOrder);
    assert_eq!(w.ok(deliver(&w, 0x77, payload(Proposals, 6, "the proposals"))).ignored, None);
}

/// A compaction turn's progress that arrives after its Attempt ended with the compaction
/// open is an ignored receipt, as any late delivery — not refused for its empty text
/// (outside review 211 F1, P2: refused as blank after a cancel, fail or restart, while the
/// same delivery after a goal revision was an ignored receipt).
#[test]
fn a_late_compaction_turn_progress_is_an_ignored_receipt() {
    use WorkerEventKind::{CompactionStarted, ToolActivity};
    let mut w = world(true);
    w.ok(request(0x90));
    w.ok(deliver(&w, 0x71, payload(CompactionStarted, 1, "")));
    w.ok(deliver(&w, 0x72, progress("")));
    let version = w.ledger.state().workflows[&lid(WORKFLOW)].version;
    w.ok(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x60),
        workflow_version: version,
        reason: "the supervisor stopped it".into(),
    }));
    assert_eq!(w.ok(deliver(&w, 0x73, progress(""))).ignored, Some(IgnoredReason::AttemptEnded));
    assert_eq!(
        w.ok(deliver(&w, 0x74, payload(ToolActivity, 2, ""))).ignored,
        Some(IgnoredReason::AttemptEnded)
    );
}

/// A compaction event is a lifecycle observation (outside review 47; seed 000: CodeClosure
/// "does not require a human-readable compaction payload", and private reasoning and opaque
/// compaction state "MUST NOT be copied into" the Store): its text empty and no items, or
/// it is refused (`CompactionPayload`) writing nothing — a forged admission too — and no
/// text of it reaches the ledger; an empty one is admitted. Progress inside a compaction is
/// its turn's maintenance, held the same way. Other events still need text.
#[test]
fn compaction_events_carry_no_payload() {
    use WorkerEventKind::{CompactionCompleted, CompactionStarted};
    let mut w = world(true);
    let mut with_items = payload(CompactionStarted, 1, "");
    with_items.items = vec!["hidden chain of thought, step 1".into()];
    for p in [payload(CompactionStarted, 1, "SUMMARY OF PRIVATE REASONING"), with_items] {
        w.refused(deliver(&w, 0x70, p.clone()), Rule::CompactionPayload);
        let forged = WorkerEventAdmitted {
            attempt_id: lid(0x60),
            worker_event_id: lid(0x70),
            manifest_digest: manifest(&w),
            payload_digest: p.digest(),
            payload: p,
        };
        w.forged(Event::WorkerEventAdmitted(forged), Rule::CompactionPayload);
    }
    w.ok(request(0x90));
    w.ok(deliver(&w, 0x71, payload(CompactionStarted, 1, "")));
    // The compaction's own turn progress is maintenance too (outside review 49: the summary
    // moved into a PROGRESS or TOOL_ACTIVITY event inside the compaction).
    for kind in [WorkerEventKind::Progress, WorkerEventKind::ToolActivity] {
        let text = "Compacted history: I considered approach A, rejected B";
        w.refused(deliver(&w, 0x74, payload(kind, 2, text)), Rule::CompactionPayload);
    }
    w.ok(deliver(&w, 0x74, progress("")));
    // A stale delivery inside it is an ignored receipt as ever, which keeps only the
    // payload's digest (outside review 51: it was refused).
    let mut stale = deliver(&w, 0x75, progress("a summary, for another manifest"));
    if let Command::DeliverWorkerEvent(d) = &mut stale {
        d.manifest_digest = digest_of("an old manifest");
    }
    assert_eq!(w.ok(stale).ignored, Some(IgnoredReason::ManifestMismatch));
    w.refused(
        deliver(&w, 0x72, payload(CompactionCompleted, 2, "opaque state=eyJhbGciOi")),
        Rule::CompactionPayload,
    );
    w.ok(deliver(&w, 0x72, payload(CompactionCompleted, 2, "")));
    // Outside a compaction, progress needs its text again.
    w.refused(deliver(&w, 0x73, progress("")), Rule::OutOfBounds);
    w.ok(deliver(&w, 0x73, progress("reading the parser")));
}

/// Under a MANUAL profile the trigger is the Runtime's (seed 000: "any manual trigger [is]
/// selected by the Workflow-bound Execution Profile rather than adapter discretion"):
/// a COMPACTION_STARTED needs a standing compaction directive and uses it, one each
/// (outside review 84: unrequested compactions were recorded like authorized ones). A
/// directive needs a dispatched, active Attempt, a fresh id, and no compaction open or
/// directive standing; under AUTOMATIC none is needed. Replay agrees with every step.
#[test]
fn a_manual_compaction_starts_only_on_a_directive() {
    use WorkerEventKind::{CompactionCompleted, CompactionStarted};
    let mut w = world(false);
    w.refused(request(0x90), Rule::AttemptNotActive);
    w.with(|s| s.claim(lid(0x60))).unwrap();
    w.refused(deliver(&w, 0x70, payload(CompactionStarted, 1, "")), Rule::CompactionMode);
    w.ok(request(0x90));
    w.refused(request(0x91), Rule::CompactionOrder);
    w.ok(deliver(&w, 0x70, payload(CompactionStarted, 1, "")));
    assert_eq!(w.ledger.state().attempts[&lid(0x60)].compaction_directive, None, "used");
    w.refused(request(0x91), Rule::CompactionOrder);
    w.ok(deliver(&w, 0x71, payload(CompactionCompleted, 2, "")));
    w.refused(deliver(&w, 0x72, payload(CompactionStarted, 3, "")), Rule::CompactionMode);
    // The same directive again is a duplicate (its receipt, nothing written); its id for
    // another Attempt is refused.
    assert!(w.ok(request(0x90)).duplicate);
    w.refused(
        Command::RequestCompaction(closure_ledger::runtime::command::RequestCompaction {
            directive_id: lid(0x90),
            attempt_id: lid(0x62),
        }),
        Rule::IdReused,
    );
    w.ok(request(0x91));
    w.ok(deliver(&w, 0x72, payload(CompactionStarted, 3, "")));
    w.ok(deliver(&w, 0x73, payload(CompactionCompleted, 4, "")));
    // After the result the stream has ended (outside review 86).
    w.ok(deliver(&w, 0x74, payload(WorkerEventKind::Proposals, 5, "the proposals")));
    w.refused(request(0x92), Rule::AttemptNotActive);
    let replayed = closure_ledger::ledger::Ledger::from_store(w.ledger.store().clone()).unwrap();
    assert_eq!(replayed.state().digest(), w.ledger.state().digest(), "replay agrees");
    // AUTOMATIC (an unprotected profile may select it): no directive needed — and none is
    // admitted: a directive is the manual trigger, which AUTOMATIC does not select (outside
    // review 90).
    let mut w = compaction_world(ledger_schema::types::CompactionMode::Automatic);
    let err = w.fails(request(0x90));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CompactionMode), "{err}");
    assert!(err.to_string().contains("AUTOMATIC"), "{err}");
    w.ok(deliver(&w, 0x70, payload(CompactionStarted, 1, "")));
    // A directive for an Attempt that ended with its cancelled workflow names the Attempt's
    // end, as every command on such an Attempt does (commands.md, `cancelWorkflow`; outside
    // review 211: it said `WorkflowClosed`).
    let mut w = compaction_world(ledger_schema::types::CompactionMode::Manual);
    let version = w.ledger.state().workflows[&lid(0x31)].version;
    w.ok(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(0x31),
        workflow_version: version,
        reason: "superseded".to_owned(),
    }));
    w.refused(request(0x90), Rule::AttemptNotActive);
}

/// The terminal event ends the stream: a later event of another id — progress, or a second,
/// different result — is an ignored receipt (STREAM_ENDED), never admitted, so one result
/// stands and the finish is judged on it (outside review 16: both were admitted, and the
/// finish then had two results on record). The terminal event itself redelivered is still a
/// duplicate. A forged admission after the terminal event is refused by the admission step.
#[test]
fn events_after_the_terminal_event_are_ignored_receipts() {
    let mut w = world(true);
    let terminal = payload(WorkerEventKind::Proposals, 5, "the proposals");
    let first = w.ok(deliver(&w, 0x70, terminal.clone()));
    assert_eq!(first.ignored, None);
    assert!(w.ledger.state().attempts[&lid(0x60)].result_delivered);
    for (id, p) in [
        (0x71, payload(WorkerEventKind::Progress, 0, "late progress")),
        (0x72, payload(WorkerEventKind::Proposals, u64::MAX, "other proposals")),
    ] {
        let receipt = w.ok(deliver(&w, id, p));
        assert_eq!(receipt.ignored, Some(IgnoredReason::StreamEnded));
    }
    let again = w.ok(deliver(&w, 0x70, terminal));
    assert!(again.duplicate && again.seq == first.seq);
    let admitted = w.ledger.state().attempts[&lid(0x60)].events_admitted;
    assert_eq!(admitted, 1, "only the terminal event was admitted");
    let Event::WorkerEventAdmitted(mut forged) = w.last_event("workerEventAdmitted") else { unreachable!() };
    forged.worker_event_id = lid(0x73);
    w.forged(Event::WorkerEventAdmitted(forged), Rule::DeliveryStaleness);
    w.ok(Command::FinishAttempt(FinishAttempt {
        attempt_id: lid(0x60),
        result_kind: ledger_schema::types::ResultKind::Proposals,
        summary: "done".into(),
    }));
}
