//! Acceptance decisions over an exact Evidence Set, bound by an Acceptance Input Manifest.

use ledger_schema::Event;
use ledger_schema::events::{AcceptanceDecided, AcceptanceInputManifest, EvidenceRef};
use ledger_schema::record_digests::evidence_set_digest;
use ledger_schema::types::{CheckResult, Eligibility, Phase, Verdict};

use super::command::DecideAcceptance;
use super::state::{DecisionState, State};
use super::{Rejection, Rule, RuleViolation, ensure, fresh, get, live_workflow, required_list, violation};

pub fn decide(state: &State, c: &DecideAcceptance) -> Result<Event, Rejection> {
    // A decision id already recorded: a redelivery that is not the same command (a same one
    // is a duplicate before this). Said against the decision recorded — what it was made
    // over — not against the state now (outside review 174 F3: after its repair the
    // refusal said the Evidence Set had 0 records, as if the decision had stood on none).
    if let Some(d) = state.decisions.get(&c.decision_id) {
        return Err(violation(
            Rule::IdReused,
            format!(
                "decision {} is already recorded (seq {}): {} of generation {} over the Evidence Set {:?} — a redelivery repeats that command exactly; a new decision takes a new id",
                c.decision_id,
                d.seq,
                super::wire(&d.verdict),
                d.generation_id,
                d.evidence.iter().map(ToString::to_string).collect::<Vec<_>>()
            ),
        )
        .into());
    }
    let wf = super::open_workflow(state, c.workflow_id)?;
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    let generation = get(&state.generations, c.generation_id, "generation")?;
    let candidate_digest = generation.frozen_digest().ok_or_else(|| {
        violation(Rule::GenerationNotFrozen, format!("generation {} is not frozen", c.generation_id))
    })?;
    // The Evidence Set is the ledger's: every current, eligible record of the generation.
    let ids = super::evidence::evidence_set(state, c.generation_id);
    if let Some(named) = &c.evidence_ids {
        let mut named = named.clone();
        named.sort_unstable();
        if named != ids {
            // Which ids differ, said (outside review 250, P3: an extra, superseded record was
            // refused without naming it).
            let listed = |v: Vec<String>| if v.is_empty() { "none".to_owned() } else { v.join(", ") };
            let extra =
                listed(named.iter().filter(|id| !ids.contains(id)).map(ToString::to_string).collect());
            let missing =
                listed(ids.iter().filter(|id| !named.contains(id)).map(ToString::to_string).collect());
            return Err(violation(
                Rule::EvidenceSet,
                format!(
                    "evidenceIds must be exactly the Evidence Set the ledger computes for generation {} ({} records: every current, eligible one); not in it: {extra}; left out: {missing}",
                    c.generation_id,
                    ids.len()
                ),
            )
            .into());
        }
    }
    let evidence = ids
        .iter()
        .map(|id| {
            get(&state.evidence, *id, "evidence")
                .map(|e| EvidenceRef { evidence_id: *id, record_digest: e.record_digest })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let input_manifest = AcceptanceInputManifest {
        goal_id: wf.goal_id,
        goal_revision: goal.revision,
        workflow_version: wf.version,
        policy: wf.policy,
        profile: Some(wf.profile),
        plan: wf.plan,
        evidence,
    };
    let mut decided = AcceptanceDecided {
        decision_id: c.decision_id,
        workflow_id: c.workflow_id,
        generation_id: c.generation_id,
        candidate_digest,
        verdict: c.verdict,
        input_manifest_digest: input_manifest.digest(),
        evidence_set_digest: evidence_set_digest(&input_manifest.evidence),
        input_manifest,
        decision_digest: Default::default(),
        reasons: c.reasons.clone(),
    };
    decided.decision_digest = decided.computed_digest();
    Ok(Event::AcceptanceDecided(Box::new(decided)))
}

pub fn apply_decided(state: &mut State, e: &AcceptanceDecided, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.decisions, e.decision_id, "decision")?;
    required_list("reasons", &e.reasons)?;
    let wf = live_workflow(state, e.workflow_id)?;
    ensure!(
        wf.phase == Phase::FinalVerify,
        Rule::AcceptancePhase,
        "acceptance happens in FINAL_VERIFY, not {}",
        super::wire(&wf.phase)
    );
    ensure!(wf.active_attempt.is_none(), Rule::AttemptActive, "an attempt is still active");
    let basis = super::candidate::judging_basis(state, wf.goal_id, wf.goal_revision);
    if e.verdict == Verdict::Accept
        && let Some(why) = super::candidate::judged_failing(
            state,
            wf.goal_id,
            e.candidate_digest,
            Some(e.generation_id),
            basis,
        )
    {
        // The same bytes judged failing in another generation of this goal — in a
        // workflow run beside this one, frozen before that judgment (outside review 20).
        return Err(violation(
            Rule::Verdict,
            format!("candidate {} cannot be accepted: it {why} for this goal", e.candidate_digest),
        ));
    }
    if e.verdict == Verdict::Accept
        && let Some((generation, workflow)) = super::candidate::judged_elsewhere_pending(
            state,
            wf.goal_id,
            e.candidate_digest,
            e.generation_id,
            basis,
        )
    {
        // A workflow bound to an earlier revision (of the same content) can no longer decide
        // (outside review 51: the refusal said "decide … there").
        let current = state.goals.get(&wf.goal_id).map(|g| g.revision);
        let can_decide = state.workflows.get(&workflow).is_some_and(|w| Some(w.goal_revision) == current);
        let then = if can_decide {
            "decide or cancel there first"
        } else {
            "cancel it there first (it is bound to an earlier goal revision and cannot decide)"
        };
        return Err(violation(
            Rule::Verdict,
            format!(
                "candidate {} is also frozen in generation {generation} of workflow {workflow}, not yet judged: {then} (bytes are judged once per goal content)",
                e.candidate_digest
            ),
        ));
    }
    if e.verdict == Verdict::Accept {
        // A raised blocker is a current, unresolved obstacle to the workflow (a bound input
        // of its context); ACCEPT closes the workflow, so it needs every blocker resolved.
        let open =
            state.blockers.iter().find(|(_, b)| b.workflow_id == e.workflow_id && b.resolution.is_none());
        if let Some((blocker_id, _)) = open {
            return Err(violation(
                Rule::OpenBlocker,
                format!(
                    "blocker {blocker_id} of workflow {} is unresolved; resolve it before ACCEPT (if it was open when the result's Attempt started, its resolution makes that result stale: then reject the generation or cancel the workflow)",
                    e.workflow_id
                ),
            ));
        }
    }
    let generation = get(&state.generations, e.generation_id, "generation")?;
    ensure!(
        wf.active_generation == Some(e.generation_id),
        Rule::EvidenceCandidate,
        "generation {} is not the workflow's active generation",
        e.generation_id
    );
    let frozen = generation.frozen_digest();
    ensure!(frozen.is_some(), Rule::GenerationNotFrozen, "generation {} is not frozen", e.generation_id);
    ensure!(
        frozen == Some(e.candidate_digest),
        Rule::EvidenceCandidate,
        "the decision names another candidate digest"
    );
    // One decision per generation — but a REJECT_REPAIRABLE not yet repaired gives way to a
    // new decision once a FAIL joined the generation after it (its repair would not carry
    // that FAIL: outside review 186 F1). The new one cannot ACCEPT: the FAIL is in its set.
    let superseded = generation.decision.and_then(|d| state.decisions.get(&d)).filter(|d| {
        d.verdict == Verdict::RejectRepairable
            && !d.repaired
            && super::evidence::fail_after_decision(state, d).is_some()
    });
    ensure!(
        generation.decision.is_none() || superseded.is_some(),
        Rule::AlreadyDecided,
        "generation {} is already decided",
        e.generation_id
    );
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    let im = &e.input_manifest;
    ensure!(
        im.goal_id == wf.goal_id
            && im.goal_revision == goal.revision
            && im.workflow_version == wf.version
            && im.policy == wf.policy,
        Rule::InputManifest,
        "the input manifest must bind the current goal revision, workflow version and policy"
    );
    // The profile and plan pair (DESIGN §5): bound exactly as the workflow binds them; a
    // decision recorded before they were (no `profile`) carries no plan either.
    let binding_refused = match im.profile {
        Some(profile) if profile != wf.profile => Some("binds another profile than the workflow's"),
        Some(_) if im.plan != wf.plan => Some("binds another plan pair than the workflow's"),
        Some(_) => None,
        None if im.plan.is_some() => Some("binds a plan pair without the profile"),
        None if state.decisions_bind_profile => {
            Some("binds no profile, after a decision of this ledger that binds it (the form never goes back)")
        }
        None => None,
    };
    if let Some(why) = binding_refused {
        return Err(super::violation(Rule::InputManifest, format!("the input manifest {why}")));
    }
    ensure!(
        e.input_manifest_digest == im.digest(),
        Rule::InputManifest,
        "input manifest digest {} is not the manifest's",
        e.input_manifest_digest
    );
    ensure!(!im.evidence.is_empty(), Rule::EvidenceSet, "the Evidence Set is empty");
    let computed = super::evidence::evidence_set(state, e.generation_id);
    ensure!(
        im.evidence.iter().map(|r| r.evidence_id).eq(computed.iter().copied()),
        Rule::EvidenceSet,
        "the Evidence Set must be every current, eligible Evidence record of generation {} ({} records), no subset",
        e.generation_id,
        computed.len()
    );
    ensure!(
        im.evidence.len() <= super::MAX_ITEMS,
        Rule::EvidenceSet,
        "the Evidence Set has over {} items, more than any verdict can cite: cancel the workflow (`cancelWorkflow`) and split its checks into smaller goals",
        super::MAX_ITEMS
    );
    ensure!(
        im.evidence.windows(2).all(|w| matches!(w, [a, b] if a.evidence_id < b.evidence_id)),
        Rule::EvidenceSet,
        "the Evidence Set must be sorted by evidence id without repeats"
    );
    let set_digest = evidence_set_digest(&im.evidence);
    ensure!(
        e.evidence_set_digest == set_digest,
        Rule::EvidenceSet,
        "evidence set digest {} is not the set's",
        e.evidence_set_digest
    );
    let mut results = Vec::with_capacity(im.evidence.len());
    for r in &im.evidence {
        let ev = get(&state.evidence, r.evidence_id, "evidence")?;
        ensure!(
            ev.record_digest == r.record_digest,
            Rule::EvidenceSet,
            "evidence {} digest differs",
            r.evidence_id
        );
        ensure!(
            ev.record.generation_id == e.generation_id && ev.record.candidate_digest == e.candidate_digest,
            Rule::EvidenceSet,
            "evidence {} is for another Candidate generation",
            r.evidence_id
        );
        ensure!(
            ev.eligibility == Eligibility::Eligible,
            Rule::EvidenceSet,
            "evidence {} is not eligible",
            r.evidence_id
        );
        results.push((ev.record.obligation_id, ev.record.result));
    }
    ensure!(
        e.decision_digest == e.computed_digest(),
        Rule::DecisionDigest,
        "decision digest {} is not the decision's",
        e.decision_digest
    );
    let any = |r: CheckResult| results.iter().any(|(_, x)| *x == r);
    if e.verdict != Verdict::RejectTerminal {
        ensure!(
            !any(CheckResult::Error),
            Rule::RunnerError,
            "a runner error is an engine error: re-run the check (back to EVIDENCE_BUILD: advancePhase)"
        );
    }
    match e.verdict {
        Verdict::Accept => {
            ensure!(!any(CheckResult::Fail), Rule::Verdict, "ACCEPT over a failing check");
            let uncovered = state
                .obligations
                .iter()
                .filter(|(_, o)| o.goal_id == wf.goal_id && o.retired_seq.is_none())
                .find(|(id, _)| !results.iter().any(|(ob, r)| ob == *id && *r == CheckResult::Pass));
            ensure!(
                uncovered.is_none(),
                Rule::Verdict,
                "ACCEPT leaves obligation {} without passing evidence (back to EVIDENCE_BUILD to check it: advancePhase; \
                 one recorded after the freeze also leaves the result stale — a failing check repairs it, otherwise \
                 cancel the workflow and start again)",
                uncovered.map(|u| u.0.to_string()).unwrap_or_default()
            );
        }
        Verdict::RejectRepairable => {
            // The way out named (outside review 164 F2: bytes a failure recorded on another
            // generation bars could be neither ACCEPTed nor, without one here, repaired).
            ensure!(
                any(CheckResult::Fail),
                Rule::Verdict,
                "REJECT_REPAIRABLE needs a failing check in this generation's Evidence Set (a failure recorded on \
                 another generation does not carry into a repair: re-run the check here — its failure opens the \
                 repair — or record REJECT_TERMINAL, or cancel the workflow)"
            );
            super::evidence::repair_feedback_fits(state, wf, e.generation_id)?;
        }
        Verdict::RejectTerminal => {}
    }
    let closes = matches!(e.verdict, Verdict::Accept | Verdict::RejectTerminal);
    state.decisions_bind_profile |= im.profile.is_some();
    state.decisions.insert(
        e.decision_id,
        DecisionState {
            workflow_id: e.workflow_id,
            generation_id: e.generation_id,
            candidate_digest: e.candidate_digest,
            verdict: e.verdict,
            decision_digest: e.decision_digest,
            input_manifest_digest: e.input_manifest_digest,
            evidence_set_digest: e.evidence_set_digest,
            evidence: im.evidence.iter().map(|r| r.evidence_id).collect(),
            reasons: e.reasons.clone(),
            repaired: false,
            seq,
        },
    );
    if let Some(g) = state.generations.get_mut(&e.generation_id) {
        g.decision = Some(e.decision_id);
    }
    if let Some(wf) = state.workflows.get_mut(&e.workflow_id) {
        wf.current_decision = Some(e.decision_id);
        wf.closed = closes;
    }
    Ok(())
}
