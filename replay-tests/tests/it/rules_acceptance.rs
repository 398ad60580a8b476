//! Acceptance: FINAL_VERIFY, the exact Evidence Set of this generation, bound digests,
//! consistent verdicts, runner errors not repairable, one decision per generation.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::Event;
use ledger_schema::types::{CheckResult, Phase, Verdict};
use replay_tests::world::{Stage, World, rule_of};

fn decide(verdict: Verdict, evidence: &[u128]) -> Command {
    Command::DecideAcceptance(DecideAcceptance {
        decision_id: lid(0xa5),
        workflow_id: lid(WORKFLOW),
        generation_id: lid(0x80),
        verdict,
        evidence_ids: Some(evidence.iter().map(|e| lid(*e)).collect()),
        reasons: vec!["decided".into()],
    })
}

/// A world in FINAL_VERIFY over generation 0x80 with evidence `results` (ids 0x90…).
fn verifying(results: &[CheckResult]) -> World {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        for (i, r) in results.iter().enumerate() {
            s.evidence(0x90 + i as u128, 0x80, *r, "detail")?;
        }
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    w
}

/// Acceptance happens in FINAL_VERIFY only.
#[test]
fn acceptance_phase() {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")
    })
    .unwrap();
    w.refused(decide(Verdict::Accept, &[0x90]), Rule::AcceptancePhase);
}

/// ACCEPT over a failing check, REJECT_REPAIRABLE over passing ones: refused.
#[test]
fn verdict_consistency() {
    let mut w = verifying(&[CheckResult::Fail]);
    w.refused(decide(Verdict::Accept, &[0x90]), Rule::Verdict);
    let mut w = verifying(&[CheckResult::Pass]);
    w.refused(decide(Verdict::RejectRepairable, &[0x90]), Rule::Verdict);
    w.ok(decide(Verdict::Accept, &[0x90]));
}

/// ACCEPT needs passing evidence for every obligation of the goal.
#[test]
fn verdict_accept_covers_every_obligation() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x47),
        goal_id: lid(GOAL),
        description: "a second obligation".into(),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check 2"),
    }));
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")?;
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    w.refused(decide(Verdict::Accept, &[0x90]), Rule::Verdict);
}

/// A runner error is an engine error: neither ACCEPT nor REJECT_REPAIRABLE over it.
#[test]
fn runner_error() {
    let mut w = verifying(&[CheckResult::Fail, CheckResult::Error]);
    w.refused(decide(Verdict::RejectRepairable, &[0x90, 0x91]), Rule::RunnerError);
    w.ok(decide(Verdict::RejectTerminal, &[0x90, 0x91]));
}

/// An empty Evidence Set is refused; one decision per generation.
#[test]
fn evidence_set_and_already_decided() {
    let mut w = verifying(&[CheckResult::Fail]);
    w.refused(decide(Verdict::RejectTerminal, &[]), Rule::EvidenceSet);
    w.refused(decide(Verdict::RejectRepairable, &[0xdead]), Rule::EvidenceSet);
    w.ok(decide(Verdict::RejectRepairable, &[0x90]));
    let mut again = decide(Verdict::RejectRepairable, &[0x90]);
    if let Command::DecideAcceptance(d) = &mut again {
        d.decision_id = lid(0xa6);
    }
    w.refused(again, Rule::AlreadyDecided);
}

/// Forged decisions: a wrong Evidence Set digest, input manifest, decision digest, or
/// unsorted set is refused.
#[test]
fn forged_decision_digests() {
    let mut base = verifying(&[CheckResult::Fail, CheckResult::Fail]);
    let mut probe = verifying(&[CheckResult::Fail, CheckResult::Fail]);
    probe.ok(decide(Verdict::RejectRepairable, &[0x90, 0x91]));
    let Event::AcceptanceDecided(good) = probe.last_event("acceptanceDecided") else { unreachable!() };
    let mut d = good.clone();
    d.evidence_set_digest = digest_of("x");
    d.decision_digest = d.computed_digest();
    base.forged(Event::AcceptanceDecided(d), Rule::EvidenceSet);
    // `good` with its input manifest changed by `change`, every digest over it recomputed.
    let with_manifest = |change: &dyn Fn(&mut ledger_schema::events::AcceptanceInputManifest)| {
        let mut d = good.clone();
        change(&mut d.input_manifest);
        d.input_manifest_digest = d.input_manifest.digest();
        d.decision_digest = d.computed_digest();
        Event::AcceptanceDecided(d)
    };
    base.forged(with_manifest(&|im| im.workflow_version -= 1), Rule::InputManifest);
    // The decision binds the workflow's profile and plan pair (DESIGN §5): another profile,
    // a plan pair the workflow does not have, a plan pair without the profile are refused.
    assert_eq!(good.input_manifest.profile, Some(base.ledger.state().workflows[&lid(WORKFLOW)].profile));
    assert_eq!(good.input_manifest.plan, None, "an unprotected workflow has no plan pair");
    let other = ledger_schema::types::Binding { id: lid(0x99), digest: digest_of("p") };
    base.forged(with_manifest(&|im| im.profile = Some(other)), Rule::InputManifest);
    base.forged(with_manifest(&|im| im.plan = Some(plan_pair())), Rule::InputManifest);
    base.forged(
        with_manifest(&|im| {
            im.profile = None;
            im.plan = Some(plan_pair());
        }),
        Rule::InputManifest,
    );
    // The form without the binding is only older builds': after an Attempt of compiler/4
    // it is refused (outside review 25: dropping both passed replay).
    base.forged(with_manifest(&|im| im.profile = None), Rule::InputManifest);
    let mut d = good.clone();
    d.decision_digest = digest_of("x");
    base.forged(Event::AcceptanceDecided(d), Rule::DecisionDigest);
    let mut d = good.clone();
    d.input_manifest.evidence.reverse();
    d.input_manifest_digest = d.input_manifest.digest();
    d.evidence_set_digest = ledger_schema::record_digests::evidence_set_digest(&d.input_manifest.evidence);
    d.decision_digest = d.computed_digest();
    base.forged(Event::AcceptanceDecided(d), Rule::EvidenceSet);
}

/// The command without `evidenceIds`: the ledger's computed set.
fn decide_computed(verdict: Verdict) -> Command {
    let Command::DecideAcceptance(mut d) = decide(verdict, &[]) else { unreachable!() };
    d.evidence_ids = None;
    Command::DecideAcceptance(d)
}

/// The Evidence Set is the ledger's, not the caller's: every current, eligible record of
/// the generation, all obligations. Naming a subset (the passing one, leaving a failing
/// one out) is refused, as is a superset or a repeat; a forged decision over a subset —
/// with every digest recomputed — is refused too; without `evidenceIds` the set is
/// computed, and a FAIL in it rules out ACCEPT.
#[test]
fn evidence_set_is_computed() {
    let mut w = World::at(Stage::Setup);
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x47),
        goal_id: lid(GOAL),
        description: "a second obligation".into(),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check 2"),
    }));
    w.with(|s| {
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")?;
        let candidate_digest = s.ledger.state().generations.get(&lid(0x80)).and_then(|g| g.frozen_digest());
        s.run(Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(0x91),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            candidate_digest: candidate_digest.unwrap_or_default(),
            obligation_id: lid(0x47),
            check_spec_id: lid(0x48),
            check_spec_digest: digest_of("check 2"),
            result: CheckResult::Fail,
            detail: "check 2 failed".into(),
        }))?;
        s.advance(Phase::FinalVerify)
    })
    .unwrap();
    // A subset chosen by the caller, a superset, a repeat: refused.
    w.refused(decide(Verdict::Accept, &[0x90]), Rule::EvidenceSet);
    w.refused(decide(Verdict::RejectRepairable, &[0x91]), Rule::EvidenceSet);
    w.refused(decide(Verdict::RejectRepairable, &[0x90, 0x91, 0x92]), Rule::EvidenceSet);
    // The refusal names what differs (outside review 250, P3).
    let err = w.fails(decide(Verdict::RejectRepairable, &[0x90, 0x92])).to_string();
    assert!(
        err.contains(&format!("not in it: {}", lid(0x92)))
            && err.contains(&format!("left out: {}", lid(0x91))),
        "{err}"
    );
    w.refused(decide(Verdict::RejectRepairable, &[0x90, 0x91, 0x91]), Rule::EvidenceSet);
    // The computed set holds the failing record: no ACCEPT.
    w.refused(decide_computed(Verdict::Accept), Rule::Verdict);

    // A forged ACCEPT over the passing subset, every digest recomputed: refused by replay.
    let mut probe = verifying(&[CheckResult::Pass]);
    probe.ok(decide_computed(Verdict::Accept));
    let Event::AcceptanceDecided(subset) = probe.last_event("acceptanceDecided") else { unreachable!() };
    w.forged(Event::AcceptanceDecided(subset.clone()), Rule::EvidenceSet);

    // The exact set, named in any order, or not named at all, is the same decision.
    let mut named = w.ledger.clone();
    let ctx = closure_ledger::runtime::Ctx { time_ms: w.time_ms + 1000 };
    named.submit(&decide(Verdict::RejectRepairable, &[0x91, 0x90]), ctx).unwrap();
    w.ok(decide_computed(Verdict::RejectRepairable));
    let d = w.ledger.state().decisions.get(&lid(0xa5)).cloned().unwrap();
    assert_eq!(d.evidence, vec![lid(0x90), lid(0x91)]);
    assert_eq!(named.state().decisions.get(&lid(0xa5)), Some(&d));
}

/// No decision is made over no evidence at all: FINAL_VERIFY is not reached with an empty
/// Evidence Set (`PhaseTransition`), and naming no evidence where the set has some is
/// refused (`EvidenceSet`).
#[test]
fn evidence_set_empty() {
    let mut w = World::at(Stage::Frozen);
    w.with(|s| s.advance(Phase::EvidenceBuild)).unwrap();
    let err = w.with(|s| s.advance(Phase::FinalVerify)).unwrap_err();
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::PhaseTransition), "{err}");
    let mut w = verifying(&[CheckResult::Pass]);
    w.refused(decide(Verdict::RejectTerminal, &[]), Rule::EvidenceSet);
}

/// ACCEPT closes the workflow as done; an unresolved blocker raised on it says it is not
/// (a blocker is a current input of its context). ACCEPT is refused writing nothing, as a
/// forged `acceptanceDecided` too (so replay refuses it); once the blocker is resolved the
/// same ACCEPT is admitted.
#[test]
fn open_blocker_refuses_accept() {
    let mut probe = verifying(&[CheckResult::Pass]);
    probe.ok(decide(Verdict::Accept, &[0x90]));
    let Event::AcceptanceDecided(good) = probe.last_event("acceptanceDecided") else { unreachable!() };
    let mut w = verifying(&[CheckResult::Pass]);
    w.ok(Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xb0),
        workflow_id: lid(WORKFLOW),
        description: "security review pending".to_owned(),
    }));
    w.refused(decide(Verdict::Accept, &[0x90]), Rule::OpenBlocker);
    w.refused(decide_computed(Verdict::Accept), Rule::OpenBlocker);
    w.forged(Event::AcceptanceDecided(good), Rule::OpenBlocker);
    w.ok(Command::ResolveBlocker(ResolveBlocker {
        blocker_id: lid(0xb0),
        resolution: "reviewed".to_owned(),
    }));
    w.ok(decide(Verdict::Accept, &[0x90]));
}

/// A bound input that changes after the freeze makes the result the freeze stands on stale,
/// and a stale result cannot be accepted (seed 000, "Context Invalidation": "Stale results
/// cannot advance the workflow"; outside review 20: a Human Decision recorded in
/// FINAL_VERIFY, then ACCEPT, was admitted). A rejection stays open (REJECT_REPAIRABLE with
/// a failing check: the repair runs under the current context). Phases advanced since the freeze alone change nothing.
#[test]
fn a_stale_result_cannot_be_accepted() {
    let mut w = verifying(&[CheckResult::Pass]);
    let decision = Command::RecordHumanDecision(RecordHumanDecision {
        decision_id: lid(0x57),
        goal_id: lid(GOAL),
        question: "May parse() keep its API?".into(),
        answer: "No: the parse() API must change after all.".into(),
        decided_by: "human:alice".into(),
        supersedes: None,
    });
    w.ok(decision);
    let err = w.fails(decide(Verdict::Accept, &[0x90]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("stale result cannot be accepted"), "{err}");
    w.ok(decide(Verdict::RejectTerminal, &[0x90]));
    // Without the late decision the same ACCEPT is admitted (after EVIDENCE_BUILD and
    // FINAL_VERIFY advanced the workflow past the phase the result was bound to).
    let mut fresh = verifying(&[CheckResult::Pass]);
    fresh.ok(decide(Verdict::Accept, &[0x90]));
}

/// The decision form never goes back: folded by the runtime's rules alone (as a ledger of
/// the older builds is), decisions without the profile binding are admitted, but one
/// without it after one with it is refused (`InputManifest`).
#[test]
fn the_decision_form_never_goes_back() {
    use closure_ledger::runtime::State;
    use closure_ledger::store::Store;
    let w = World::at(Stage::Accepted);
    let entries = w.ledger.store().read_range(0, u64::MAX).unwrap();
    let decisions: Vec<_> = entries
        .iter()
        .filter_map(|e| match &e.entry.event {
            Event::AcceptanceDecided(d) => Some(d.decision_id),
            _ => None,
        })
        .collect();
    assert_eq!(decisions.len(), 2);
    // Legacy form for `legacy` decisions (and the repair over them), then a runtime fold.
    let fold = |legacy: &[ledger_schema::Id]| {
        let mut state = State::default();
        let mut digests = std::collections::BTreeMap::new();
        for sealed in &entries {
            let mut entry = sealed.entry.clone();
            replay_tests::to_legacy_decision(&mut entry.event, |id| legacy.contains(&id), &mut digests);
            closure_ledger::runtime::apply(&mut state, &entry).map_err(|e| (entry.seq, e))?;
        }
        Ok::<_, (u64, closure_ledger::runtime::RuleViolation)>(())
    };
    fold(&[]).unwrap();
    fold(&decisions).unwrap();
    let (seq, err) = fold(&decisions[1..]).unwrap_err();
    assert_eq!(err.rule, Rule::InputManifest, "{err}");
    assert!(
        matches!(&entries[seq as usize].entry.event, Event::AcceptanceDecided(d) if d.decision_id == decisions[1])
    );
}

/// The reference policy with `class` under a budget of `max_bytes`: required in IMPLEMENT
/// (outside review 146 F2: optional there, a tiny budget made its worker blind), optional
/// in DISCOVERY (BLOCKERS_DECISIONS), where a long record of the class is left out.
fn tight_budget(
    class: ledger_schema::types::InputClass,
    max_bytes: u32,
) -> ledger_schema::events::PolicyBundle {
    let mut bundle = policy_bundle();
    for b in bundle.budgets.iter_mut().filter(|b| b.class == class) {
        b.max_bytes = max_bytes;
    }
    bundle
}

/// A world under `bundle` in FINAL_VERIFY over frozen generation 0x80, its check passing.
fn accepting(bundle: ledger_schema::events::PolicyBundle) -> World {
    accepting_after(bundle, None)
}

/// [`accepting`], with `first` recorded right after the setup.
fn accepting_after(bundle: ledger_schema::events::PolicyBundle, first: Option<Command>) -> World {
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(bundle)?;
        if let Some(command) = first {
            s.run(command)?;
        }
        s.discover_and_plan()?;
        s.implement_first()?;
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    w
}

/// The claim of a DISCOVERY Attempt started under `bundle`, after `late` — recorded between
/// its start and the claim, and left out of the recompiled package by its budget — refused
/// as stale; its error.
fn claim_after_left_out(bundle: ledger_schema::events::PolicyBundle, late: Command) -> String {
    use closure_ledger::runtime::current_binding;
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(bundle)?;
        s.start(0x64, 0x65).map(drop)
    })
    .unwrap();
    w.ok(late);
    let state = w.ledger.state();
    let binding = current_binding(state, lid(0x64)).unwrap();
    let compiled = closure_ledger::compiler::compile(state, &binding).unwrap();
    assert_eq!(compiled.manifest.package_digest, state.attempts[&lid(0x64)].package_digest, "left out");
    let err = w.with(|s| s.claim(lid(0x64))).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    err.to_string()
}

fn decision(id: u128, words: usize) -> Command {
    Command::RecordHumanDecision(RecordHumanDecision {
        decision_id: lid(id),
        goal_id: lid(GOAL),
        question: "May we change the public API?".into(),
        answer: format!("No: {}", "do NOT change the public API; ".repeat(words)),
        decided_by: "human:alice".into(),
        supersedes: None,
    })
}

/// Seed 000 lists "scoped Human Decision" and the "blocker or verification-obligation set"
/// as bound inputs of a Context Manifest: a member recorded after the start makes it stale
/// even when the recompiled context would leave it out over its budget (outside review 77:
/// a long decision passed the claim and a late obligation passed ACCEPT where a short one
/// made them stale, and no entry said either was left out). Here the package is unchanged
/// — only the set rule refuses.
#[test]
fn a_bound_set_changed_makes_the_manifest_stale_whether_shown_or_not() {
    use ledger_schema::types::InputClass;
    // The claim: a decision recorded between a DISCOVERY Attempt's start and its claim, left
    // out by budget (DISCOVERY takes the class as optional).
    let err = claim_after_left_out(tight_budget(InputClass::BlockersDecisions, 600), decision(0x57, 40));
    assert!(
        err.to_string().contains("human decision") && err.to_string().contains("bound input set"),
        "{err}"
    );
    // A decision standing at the start (left out), answered anew since and that answer
    // withdrawn: no decision stands on the question now (outside review 161 F2: counted as
    // recorded and withdrawn since, it cancelled out and the claim passed).
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(tight_budget(InputClass::BlockersDecisions, 600))?;
        s.run(decision(0x57, 40))?;
        s.start(0x64, 0x65).map(drop)
    })
    .unwrap();
    w.ok(Command::RecordHumanDecision(RecordHumanDecision {
        decision_id: lid(0x58),
        goal_id: lid(GOAL),
        question: "May we change the public API?".into(),
        answer: format!("Yes: {}", "the API may change; ".repeat(40)),
        decided_by: "human:alice".into(),
        supersedes: Some(lid(0x57)),
    }));
    w.ok(Command::WithdrawHumanDecision(WithdrawHumanDecision {
        decision_id: lid(0x58),
        reason: "answered in error".into(),
        withdrawn_by: "human:alice".into(),
    }));
    let err = w.with(|s| s.claim(lid(0x64))).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("no longer stands"), "{err}");
    // After the claim, the same decision marks the dispatched Attempt's context changed.
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(tight_budget(InputClass::BlockersDecisions, 600))?;
        s.start(0x64, 0x65)?;
        s.claim(lid(0x64)).map(drop)
    })
    .unwrap();
    assert!(!w.ledger.state().attempts[&lid(0x64)].context_changed);
    w.ok(decision(0x57, 40));
    assert!(w.ledger.state().attempts[&lid(0x64)].context_changed);

    // The ACCEPT: a decision recorded in FINAL_VERIFY, over the IMPLEMENT result context's
    // budget (the class is required there: its recompilation fails; the set rule names it).
    let mut w = accepting(tight_budget(InputClass::BlockersDecisions, 600));
    w.ok(decision(0x57, 40));
    let err = w.fails(decide(Verdict::Accept, &[0x90]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("human decision"), "{err}");

    // A late verification obligation, left out, checked and passing: the ACCEPT is refused.
    let mut w = accepting(tight_budget(InputClass::FactsScenariosObligations, 2_000));
    w.ok(Command::RecordObligation(RecordObligation {
        obligation_id: lid(0x47),
        goal_id: lid(GOAL),
        description: "the lexer accepts every documented token; ".repeat(60),
        check_spec_id: lid(0x48),
        check_spec_digest: digest_of("check 2"),
    }));
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        let candidate_digest = s.ledger.state().generations.get(&lid(0x80)).and_then(|g| g.frozen_digest());
        s.run(Command::RecordEvidence(RecordEvidence {
            evidence_id: lid(0x91),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            candidate_digest: candidate_digest.unwrap_or_default(),
            obligation_id: lid(0x47),
            check_spec_id: lid(0x48),
            check_spec_digest: digest_of("check 2"),
            result: CheckResult::Pass,
            detail: "ok".into(),
        }))?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    let err = w.fails(decide(Verdict::Accept, &[0x90, 0x91]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("verification obligation"), "{err}");

    // A project source of the goal recorded after the start, left out over the
    // PROJECT_MATERIAL budget (outside review 159 F2: the claim, the freeze and the ACCEPT
    // all passed, where the same source small enough to show made each stale).
    let large_source = |id: u128| {
        Command::RecordProjectSource(RecordProjectSource {
            source_id: lid(id),
            goal_id: lid(GOAL),
            path: "src/config/lexer.rs".into(),
            revision: format!("a1b2c3d{id:x}"),
            content: "pub fn lex(bytes: &[u8]) -> Vec<Token> { Vec::new() }\n".repeat(80),
        })
    };
    let err = claim_after_left_out(tight_budget(InputClass::ProjectMaterial, 1_000), large_source(0x4a));
    assert!(err.to_string().contains("project source") && err.to_string().contains("lexer.rs"), "{err}");
    let mut w = accepting(tight_budget(InputClass::ProjectMaterial, 1_000));
    w.ok(large_source(0x4a));
    let err = w.fails(decide(Verdict::Accept, &[0x90]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("project source"), "{err}");
    // The path's record current at the start, superseded by one recorded since and then
    // withdrawn: the start's record is no longer current (outside review 161 F2: counted
    // as recorded and withdrawn since, it cancelled out and the ACCEPT stood).
    let mut w = accepting_after(tight_budget(InputClass::ProjectMaterial, 1_000), Some(large_source(0x4a)));
    w.ok(large_source(0x4b));
    w.ok(Command::WithdrawProjectSource(WithdrawProjectSource {
        source_id: lid(0x4b),
        reason: "deleted".into(),
    }));
    let err = w.fails(decide(Verdict::Accept, &[0x90]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("no longer current") && err.to_string().contains("lexer.rs"), "{err}");

    // A confirmed fact of the goal, left out over the FACTS_SCENARIOS_OBLIGATIONS budget
    // (outside review 189 F2: a shown one made the claim and the finish stale, one left out
    // passed them); a PROPOSED one changes nothing.
    let propose = |id: u128| {
        Command::ProposeFact(ProposeFact {
            fact_id: lid(id),
            goal_id: lid(GOAL),
            revision: 1,
            statement: format!("the lexer keeps a table of {id} token kinds; ").repeat(60),
            provenance: "docs/lexer.md".into(),
        })
    };
    let confirm = |id: u128| {
        Command::ConfirmFact(ConfirmFact {
            fact_id: lid(id),
            revision: 1,
            confirmed_by: "human:alice".into(),
        })
    };
    // DISCOVERY taking facts as optional: one over the budget is left out, not refused.
    let facts_optional = || {
        let mut bundle = tight_budget(InputClass::FactsScenariosObligations, 2_000);
        for p in bundle.phases.iter_mut().filter(|p| p.phase == Phase::Discovery) {
            p.required.retain(|c| *c != InputClass::FactsScenariosObligations);
            p.optional.push(InputClass::FactsScenariosObligations);
        }
        bundle
    };
    // The claim: confirmed between a DISCOVERY Attempt's start and its claim.
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(facts_optional())?;
        s.run(propose(0x4c))?;
        s.start(0x64, 0x65).map(drop)
    })
    .unwrap();
    w.ok(confirm(0x4c));
    let state = w.ledger.state();
    let binding = closure_ledger::runtime::current_binding(state, lid(0x64)).unwrap();
    let compiled = closure_ledger::compiler::compile(state, &binding).unwrap();
    assert_eq!(compiled.manifest.package_digest, state.attempts[&lid(0x64)].package_digest, "left out");
    let err = w.with(|s| s.claim(lid(0x64))).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("was confirmed"), "{err}");
    // The ACCEPT: proposed before the IMPLEMENT result (PROPOSED changes nothing), confirmed
    // in FINAL_VERIFY.
    let mut w =
        accepting_after(tight_budget(InputClass::FactsScenariosObligations, 2_000), Some(propose(0x4c)));
    w.ok(confirm(0x4c));
    let err = w.fails(decide(Verdict::Accept, &[0x90]));
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("fact") && err.to_string().contains("was confirmed"), "{err}");
    // One confirmed before a DISCOVERY Attempt's start (left out there) and invalidated
    // before its claim, likewise.
    let mut w = World::at(Stage::Empty);
    w.with(|s| {
        s.setup_with(facts_optional())?;
        s.run(propose(0x4c))?;
        s.run(confirm(0x4c))?;
        s.start(0x64, 0x65).map(drop)
    })
    .unwrap();
    w.ok(Command::InvalidateFact(InvalidateFact {
        fact_id: lid(0x4c),
        revision: 1,
        reason: "the table moved".into(),
        invalidated_by: Some("human:alice".into()),
    }));
    // A new revision proposed since leaves no revision confirmed: still stale (outside
    // review 191 F4: the re-proposal erased the invalidation).
    w.ok(Command::ProposeFact(ProposeFact {
        fact_id: lid(0x4c),
        goal_id: lid(GOAL),
        revision: 2,
        statement: "the lexer keeps its token kinds in a generated table".into(),
        provenance: "docs/lexer.md".into(),
    }));
    let err = w.with(|s| s.claim(lid(0x64))).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("was invalidated"), "{err}");

    // A blocker raised and resolved since leaves the set as it was: the ACCEPT stands.
    let mut w = accepting(tight_budget(InputClass::BlockersDecisions, 600));
    w.ok(Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xe9),
        workflow_id: lid(WORKFLOW),
        description: "wait for the schema review ".repeat(40),
    }));
    w.ok(Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0xe9), resolution: "reviewed".into() }));
    w.ok(decide(Verdict::Accept, &[0x90]));
}

/// A set is a bound input of the contexts whose phase takes its class. IMPLEMENT, which
/// makes the candidate a verdict judges, must take both judged sets: a policy keeping the
/// Human Decisions (or the obligations) out of it cannot start a workflow (outside review
/// 128 F2: an ACCEPT stood on a result made before a Human Decision was reversed, under a
/// policy that never showed IMPLEMENT a decision). Another phase may leave a set out: a
/// decision recorded after a DISCOVERY Attempt's start then leaves its claim current, where
/// the shipped policy (DISCOVERY takes decisions) makes it stale.
#[test]
fn a_set_outside_the_phase_is_not_bound() {
    use ledger_schema::types::InputClass;
    for class in [InputClass::BlockersDecisions, InputClass::FactsScenariosObligations] {
        let mut bundle = policy_bundle();
        for p in bundle.phases.iter_mut().filter(|p| p.phase == Phase::Implement) {
            p.optional.retain(|c| *c != class);
            p.required.retain(|c| *c != class);
        }
        let mut w = World::at(Stage::Empty);
        let err = w.with(|s| s.setup_with(bundle)).unwrap_err();
        assert_eq!(rule_of(&err), Some(Rule::PolicyBounds), "{err}");
        assert!(err.to_string().contains("IMPLEMENT phase does not require"), "{err}");
    }
    let claim_after_a_decision = |keep_out: bool| {
        let mut bundle = policy_bundle();
        for p in bundle.phases.iter_mut().filter(|p| p.phase == Phase::Discovery && keep_out) {
            p.optional.retain(|c| *c != InputClass::BlockersDecisions);
        }
        let mut w = World::at(Stage::Empty);
        w.with(|s| {
            s.setup_with(bundle)?;
            s.start(0x60, 0x61).map(drop)
        })
        .unwrap();
        w.ok(decision(0x57, 2));
        w.with(|s| s.claim(lid(0x60)))
    };
    claim_after_a_decision(true).unwrap();
    let err = claim_after_a_decision(false).unwrap_err();
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
}

/// A blocker raised after the result: the freeze is refused and names the way out that
/// works — resolve the blocker, then freeze (the set is as it was at the start) — not a new
/// Attempt while it is open, whose result its resolution would make stale with ACCEPT
/// needing it resolved (outside review 80).
#[test]
fn a_freeze_refused_over_an_open_blocker_names_the_way_out() {
    use closure_ledger::lifecycle::payload;
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = World::at(Stage::Implementing);
    w.with(|s| {
        s.start(0x64, 0x65)?;
        s.claim(lid(0x64))?;
        s.deliver(lid(0x64), 0x74, payload(WorkerEventKind::CompletionRequest, 1, "ready"))?;
        s.finish(0x64, ResultKind::CompletionRequest).map(drop)
    })
    .unwrap();
    w.ok(Command::RaiseBlocker(RaiseBlocker {
        blocker_id: lid(0xe9),
        workflow_id: lid(WORKFLOW),
        description: "wait for the schema review".into(),
    }));
    let freeze = Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(0x80),
        candidate_digest: digest_of("candidate 1"),
        change_set_digest: digest_of("change set 1"),
    });
    let err = w.fails(freeze.clone());
    assert_eq!(rule_of(&err), Some(Rule::ManifestStale), "{err}");
    assert!(err.to_string().contains("resolve blocker") && err.to_string().contains("first"), "{err}");
    w.ok(Command::ResolveBlocker(ResolveBlocker { blocker_id: lid(0xe9), resolution: "reviewed".into() }));
    w.ok(freeze);
    w.with(|s| {
        s.advance(Phase::EvidenceBuild)?;
        s.evidence(0x90, 0x80, CheckResult::Pass, "ok")?;
        s.advance(Phase::FinalVerify).map(drop)
    })
    .unwrap();
    w.ok(decide(Verdict::Accept, &[0x90]));
}

/// A decision id already recorded, named by a command that is not the same one, is refused
/// against the decision recorded — what it was made over — not the state now (outside review
/// 174 F3: after its repair the refusal said the Evidence Set held 0 records).
#[test]
fn a_recorded_decision_resubmitted_otherwise_is_named() {
    let mut w = verifying(&[CheckResult::Fail]);
    w.ok(decide(Verdict::RejectRepairable, &[0x90]));
    let redelivered = w.ok(decide(Verdict::RejectRepairable, &[0x90]));
    assert!(redelivered.duplicate);
    for other in [decide(Verdict::RejectRepairable, &[0x91]), decide(Verdict::RejectTerminal, &[0x90])] {
        let err = w.fails(other);
        assert_eq!(rule_of(&err), Some(Rule::IdReused), "{err}");
        let text = err.to_string();
        assert!(text.contains("already recorded") && text.contains(&lid(0x90).to_string()), "{text}");
    }
}
