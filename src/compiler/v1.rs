//! `closure-ledger-compiler/1`: the first released Context Compiler, **frozen**.
//!
//! Every manifest this compiler derived records `compilerVersion =
//! "closure-ledger-compiler/1"`, and replay re-derives those manifests with this code, so
//! what it selects, orders, budgets and renders must never change: not one package byte,
//! not one manifest entry. A change in compiler output is a new compiler (`v2.rs`) added to
//! [`super::RELEASED`] as the newest, with this file left as it is (it may be copied as
//! the starting point). `replay-tests/tests/it/compiler_versions.rs` replays a frozen ledger
//! written by this compiler; `golden_packages.rs` pins its bytes on the reference lifecycle.
//!
//! The pipeline follows the seed: (1) bind identity — the [`AttemptBinding`] the runtime
//! derived; (2) phase query — the phase policy's required and optional input classes;
//! (3) authority and freshness — only confirmed Facts, only the exact current repair
//! authority; (4) semantic priority and per-class byte budgets — required content that
//! does not fit is an error, optional overflow is a recorded omission; (5) render and hash
//! — canonical package bytes, manifest entries with their authority class, package and
//! manifest digests. No clock, randomness, environment or I/O.

use std::collections::BTreeMap;

use ledger_schema::codec::{encode_into, record_digest_repeated};
use ledger_schema::events::PhasePolicy;
use ledger_schema::manifest::{ContextManifest, ManifestEntry, OmissionDecision};
use ledger_schema::package::*;
use ledger_schema::types::{AuthorityClass, CheckResult, InputClass, Verdict};
use ledger_schema::{Digest, DigestKind, Id};
use serde::Serialize;

use super::{CompileError, Compiled, Compiler};
use crate::runtime::state::{FactStatus, GenerationStatus, State};
use crate::runtime::{AttemptBinding, result_kind_allowed};

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/1";
/// Budget of a class the policy names no budget for.
pub const DEFAULT_CLASS_BUDGET_BYTES: u32 = 65_536;

/// Compiler/1 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V1;

impl Compiler for V1 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }
}

/// Classes every phase requires, whatever its policy says.
const ALWAYS_REQUIRED: [InputClass; 3] = [InputClass::Identity, InputClass::Phase, InputClass::Goal];

/// One candidate item for the package: where it goes, what it is, and its manifest entry.
struct Item {
    class: InputClass,
    entry: ManifestEntry,
    bytes: usize,
    place: Place,
}

enum Place {
    Invariant(String),
    Fact(SelectedFact),
    Decision(SelectedDecision),
    Scenario(Scenario),
    Code(CodeExcerpt),
    Obligation(Obligation),
    Blocker(Blocker),
    /// Identity, phase, goal, candidate, repair entries: rendered in fixed fields.
    Fixed,
}

fn rendered<T: Serialize>(value: &T) -> (Digest, usize) {
    record_digest_repeated(DigestKind::Rendered, value)
}

#[expect(clippy::too_many_arguments, reason = "one manifest entry's fields, named at each call")]
fn item<T: Serialize>(
    class: InputClass,
    kind: &str,
    source_ref: String,
    source_revision: u64,
    source_digest: Option<Digest>,
    authority_class: AuthorityClass,
    value: &T,
    place: Place,
) -> Item {
    let (rendered_digest, bytes) = rendered(value);
    Item {
        class,
        entry: ManifestEntry {
            kind: kind.to_owned(),
            source_ref,
            source_revision,
            source_digest,
            authority_class,
            rendered_digest,
        },
        bytes,
        place,
    }
}

/// Compiles the Context Package and Manifest for one Attempt start, as compiler/1 does.
fn compile(state: &State, b: &AttemptBinding) -> Result<Compiled, CompileError> {
    if b.selection.is_some() {
        return Err(CompileError::SelectionUnsupported { version: VERSION });
    }
    let policy =
        state.policies.get(&b.policy.id).ok_or(CompileError::Unknown { what: "policy", id: b.policy.id })?;
    let goal = state.goals.get(&b.goal_id).ok_or(CompileError::Unknown { what: "goal", id: b.goal_id })?;
    let phase_policy: &PhasePolicy = policy
        .bundle
        .phases
        .iter()
        .find(|p| p.phase == b.phase)
        .ok_or(CompileError::NoPhasePolicy(b.phase))?;
    let budget = |class: InputClass| {
        policy
            .bundle
            .budgets
            .iter()
            .find(|c| c.class == class)
            .map_or(DEFAULT_CLASS_BUDGET_BYTES, |c| c.max_bytes)
    };
    let required =
        |class: InputClass| ALWAYS_REQUIRED.contains(&class) || phase_policy.required.contains(&class);
    let wanted = |class: InputClass| required(class) || phase_policy.optional.contains(&class);

    // 1. Identity, phase and goal: fixed, always present.
    let identity = PackageIdentity {
        goal_id: b.goal_id,
        goal_revision: b.goal_revision,
        workflow_id: b.workflow_id,
        workflow_version: b.workflow_version,
        phase: b.phase,
        attempt_id: b.attempt_id,
        candidate_generation_id: b.generation.map(|g| g.0),
        candidate_base_digest: b.generation.map(|g| g.1),
        plan: b.plan,
    };
    let grant = CapabilityGrant { phase: b.phase, capabilities: phase_policy.capabilities.clone() };
    let contract = ResponseContract {
        allowed_result_kinds: result_kind_allowed(b.phase).into_iter().collect(),
        max_event_bytes: policy.bundle.max_event_bytes,
        worker_event_schema: WORKER_EVENT_SCHEMA.to_owned(),
    };
    let package_goal = PackageGoal {
        objective: goal.content.objective.clone(),
        success_criteria: goal.content.success_criteria.clone(),
        scope: goal.content.scope.clone(),
        non_goals: goal.content.non_goals.clone(),
        preservation_constraints: goal.content.preservation_constraints.clone(),
    };
    let wf_ref = format!("workflow/{}", b.workflow_id);
    let mut items = vec![
        item(
            InputClass::Identity,
            "identity",
            wf_ref.clone(),
            u64::from(b.workflow_version),
            None,
            AuthorityClass::RuntimeDecision,
            &identity,
            Place::Fixed,
        ),
        item(
            InputClass::Identity,
            "policy",
            format!("policy/{}", b.policy.id),
            0,
            Some(b.policy.digest),
            AuthorityClass::RuntimeDecision,
            &b.policy,
            Place::Fixed,
        ),
        item(
            InputClass::Identity,
            "profile",
            format!("profile/{}", b.profile.id),
            0,
            Some(b.profile.digest),
            AuthorityClass::RuntimeDecision,
            &b.profile,
            Place::Fixed,
        ),
    ];
    for invariant in &policy.bundle.invariants {
        items.push(item(
            InputClass::Identity,
            "invariant",
            format!("policy/{}", b.policy.id),
            0,
            Some(b.policy.digest),
            AuthorityClass::RuntimeDecision,
            invariant,
            Place::Invariant(invariant.clone()),
        ));
    }
    items.push(item(
        InputClass::Phase,
        "phase",
        format!("{wf_ref}/phase"),
        u64::from(b.workflow_version),
        Some(b.policy.digest),
        AuthorityClass::RuntimeDecision,
        &(&phase_policy.objective, &grant, &contract),
        Place::Fixed,
    ));
    items.push(item(
        InputClass::Goal,
        "goal",
        format!("goal/{}", b.goal_id),
        u64::from(goal.revision),
        Some(goal.digest),
        AuthorityClass::Goal,
        &package_goal,
        Place::Fixed,
    ));
    if let Some((gen_id, base)) = b.generation {
        items.push(item(
            InputClass::Identity,
            "candidate",
            format!("generation/{gen_id}"),
            0,
            Some(base),
            AuthorityClass::RuntimeDecision,
            &(gen_id, base),
            Place::Fixed,
        ));
    }

    // 2–4. Durable sources, in semantic priority order, filtered by authority.
    let mut omissions = Vec::new();
    for (id, blocker) in
        state.blockers.iter().filter(|(_, x)| x.workflow_id == b.workflow_id && x.resolution.is_none())
    {
        let value = Blocker { blocker_id: *id, description: blocker.description.clone() };
        items.push(item(
            InputClass::BlockersDecisions,
            "blocker",
            format!("blocker/{id}"),
            blocker.seq,
            None,
            AuthorityClass::RuntimeDecision,
            &value,
            Place::Blocker(value.clone()),
        ));
    }
    for (id, d) in state.human_decisions.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        let value =
            SelectedDecision { decision_id: *id, question: d.question.clone(), answer: d.answer.clone() };
        items.push(item(
            InputClass::BlockersDecisions,
            "humanDecision",
            format!("humanDecision/{id}"),
            d.seq,
            None,
            AuthorityClass::HumanDecision,
            &value,
            Place::Decision(value.clone()),
        ));
    }
    for (id, fact) in state.facts.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        if fact.status != FactStatus::Confirmed {
            // PROPOSED and invalidated Facts never appear as confirmed.
            omissions.push(OmissionDecision {
                source_ref: format!("fact/{id}@{}", fact.revision),
                rule: "authority.factNotConfirmed".to_owned(),
                reason: format!("fact is {:?}; only confirmed facts are authoritative", fact.status),
            });
            continue;
        }
        let value = SelectedFact { fact_id: *id, revision: fact.revision, statement: fact.statement.clone() };
        let source = Digest::of_repeated(DigestKind::Source, fact.statement.as_bytes());
        items.push(item(
            InputClass::FactsScenariosObligations,
            "fact",
            format!("fact/{id}"),
            u64::from(fact.revision),
            Some(source),
            AuthorityClass::ConfirmedFact,
            &value,
            Place::Fact(value.clone()),
        ));
    }
    for (id, s) in state.scenarios.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        let value = Scenario { scenario_id: *id, title: s.title.clone(), description: s.description.clone() };
        items.push(item(
            InputClass::FactsScenariosObligations,
            "scenario",
            format!("scenario/{id}"),
            s.seq,
            None,
            AuthorityClass::Goal,
            &value,
            Place::Scenario(value.clone()),
        ));
    }
    for (id, o) in state.obligations.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        let value = Obligation {
            obligation_id: *id,
            description: o.description.clone(),
            check_spec_id: o.check_spec_id,
            check_spec_digest: o.check_spec_digest,
        };
        items.push(item(
            InputClass::FactsScenariosObligations,
            "obligation",
            format!("obligation/{id}"),
            o.seq,
            Some(o.check_spec_digest),
            AuthorityClass::Goal,
            &value,
            Place::Obligation(value.clone()),
        ));
    }
    for (id, s) in state.sources.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        let value = CodeExcerpt {
            source_id: *id,
            path: s.path.clone(),
            revision: s.revision.clone(),
            digest: s.digest,
            content: s.content.clone(),
        };
        items.push(item(
            InputClass::ProjectMaterial,
            "projectSource",
            format!("source/{id}"),
            s.seq,
            Some(s.digest),
            AuthorityClass::ProjectSource,
            &value,
            Place::Code(value.clone()),
        ));
    }

    // Repair authority (IMPLEMENT of a repair child) and its bounded feedback.
    let mut repair_context = None;
    let mut feedback = None;
    if let Some((gen_id, _)) = b.generation {
        let generation =
            state.generations.get(&gen_id).ok_or(CompileError::Unknown { what: "generation", id: gen_id })?;
        if let Some(repair_id) = generation.repair_id {
            let (context, repair_items, fb, fb_omissions) = repair(state, b, gen_id, repair_id, policy)?;
            items.extend(repair_items);
            omissions.extend(fb_omissions);
            repair_context = Some(context);
            feedback = fb;
        }
    }

    // Budgets, class by class in priority order.
    items.sort_by_key(|i| i.class);
    let mut used: BTreeMap<InputClass, usize> = BTreeMap::new();
    let mut kept = Vec::with_capacity(items.len());
    for it in items {
        let limit = budget(it.class);
        if !wanted(it.class) {
            omissions.push(OmissionDecision {
                source_ref: it.entry.source_ref.clone(),
                rule: format!("phase.{:?}.excludes.{:?}", b.phase, it.class),
                reason: "the phase policy neither requires nor allows this input class".to_owned(),
            });
            continue;
        }
        let total = used.get(&it.class).copied().unwrap_or(0) + it.bytes;
        if total > limit as usize {
            if required(it.class) {
                return Err(CompileError::RequiredOverflow { class: it.class, bytes: total, budget: limit });
            }
            omissions.push(OmissionDecision {
                source_ref: it.entry.source_ref.clone(),
                rule: format!("budget.{:?}", it.class),
                reason: format!("optional content would bring the class to {total} of {limit} bytes"),
            });
            continue;
        }
        used.insert(it.class, total);
        kept.push(it);
    }
    // The feedback is in the package only if its manifest entry survived the phase query
    // and the WORKING budget.
    if !kept.iter().any(|it| it.entry.kind == "priorAttemptFeedback") {
        feedback = None;
    }

    let mut package = ContextPackage {
        schema_version: if b.plan.is_some() {
            PACKAGE_SCHEMA_PROTECTED
        } else if repair_context.is_some() {
            PACKAGE_SCHEMA_REPAIR
        } else {
            PACKAGE_SCHEMA_PLAIN
        },
        identity,
        phase_objective: phase_policy.objective.clone(),
        selected_skills: Vec::new(),
        capability_grant: grant.clone(),
        invariants: Vec::new(),
        goal: package_goal,
        selected_facts: Vec::new(),
        selected_decisions: Vec::new(),
        business_scenarios: Vec::new(),
        relevant_code: Vec::new(),
        verification_obligations: Vec::new(),
        blockers: Vec::new(),
        repair_context,
        prior_attempt_feedback: feedback.clone(),
        execution_profile: b.profile,
        policy_bundle: b.policy,
        response_contract: contract.clone(),
    };
    // The package holds every kept item's rendering plus a little framing: size it once.
    let package_estimate = kept.iter().map(|it| it.bytes).sum::<usize>() + 1024;
    let mut entries = Vec::with_capacity(kept.len());
    for it in kept {
        match it.place {
            Place::Invariant(v) => package.invariants.push(v),
            Place::Fact(v) => package.selected_facts.push(v),
            Place::Decision(v) => package.selected_decisions.push(v),
            Place::Scenario(v) => package.business_scenarios.push(v),
            Place::Code(v) => package.relevant_code.push(v),
            Place::Obligation(v) => package.verification_obligations.push(v),
            Place::Blocker(v) => package.blockers.push(v),
            Place::Fixed => {}
        }
        entries.push(it.entry);
    }
    let mut package_bytes = Vec::with_capacity(package_estimate);
    encode_into(&package, &mut package_bytes);
    let manifest = ContextManifest {
        schema_version: package.schema_version,
        compiler_version: VERSION.to_owned(),
        goal_id: b.goal_id,
        goal_revision: b.goal_revision,
        workflow_id: b.workflow_id,
        workflow_version: b.workflow_version,
        phase: b.phase,
        attempt_id: b.attempt_id,
        generation_id: b.generation.map(|g| g.0),
        candidate_digest: b.generation.map(|g| g.1),
        plan: b.plan,
        profile: b.profile,
        policy: b.policy,
        capability_grant_digest: record_digest_repeated(DigestKind::CapabilityGrant, &grant).0,
        response_contract_digest: record_digest_repeated(DigestKind::ResponseContract, &contract).0,
        feedback_digest: feedback.as_ref().map(|f| f.feedback_digest),
        selection_receipt: None,
        entries,
        omission_decisions: omissions,
        // A currency proof recompiles the same package again and again (every context-
        // changing entry, live, on reopen and on replay): remembered, compared byte for byte.
        package_digest: Digest::of_repeated(DigestKind::Package, &package_bytes),
    };
    Ok(Compiled { package, package_bytes, manifest })
}

type RepairParts = (RepairContext, Vec<Item>, Option<Feedback>, Vec<OmissionDecision>);

/// The repair context of a repair child, proved from the exact current repair authority,
/// and the bounded feedback derived from that closed source set only.
fn repair(
    state: &State,
    b: &AttemptBinding,
    child_id: Id,
    repair_id: Id,
    policy: &crate::runtime::state::PolicyState,
) -> Result<RepairParts, CompileError> {
    let fail = |m: String| CompileError::Repair(m);
    let repair =
        state.repairs.get(&repair_id).ok_or_else(|| fail(format!("repair {repair_id} is missing")))?;
    let wf = state
        .workflows
        .get(&b.workflow_id)
        .ok_or(CompileError::Unknown { what: "workflow", id: b.workflow_id })?;
    let decision = state
        .decisions
        .get(&repair.decision_id)
        .ok_or_else(|| fail(format!("decision {} is missing", repair.decision_id)))?;
    if wf.current_decision != Some(repair.decision_id) || decision.verdict != Verdict::RejectRepairable {
        return Err(fail(format!("decision {} is not the current REJECT_REPAIRABLE", repair.decision_id)));
    }
    if repair.child_generation_id != child_id || decision.generation_id != repair.parent_generation_id {
        return Err(fail("the parent/child Candidate relationship does not match".to_owned()));
    }
    let parent = state
        .generations
        .get(&repair.parent_generation_id)
        .ok_or_else(|| fail(format!("parent generation {} is missing", repair.parent_generation_id)))?;
    let child = state
        .generations
        .get(&child_id)
        .ok_or_else(|| fail(format!("child generation {child_id} is missing")))?;
    let GenerationStatus::Frozen { candidate_digest, change_set_digest } = parent.status else {
        return Err(fail("the parent generation is not frozen".to_owned()));
    };
    if child.base_digest != candidate_digest || decision.candidate_digest != candidate_digest {
        return Err(fail("the child's base digest is not the parent's frozen digest".to_owned()));
    }
    let goal = state.goals.get(&b.goal_id).ok_or(CompileError::Unknown { what: "goal", id: b.goal_id })?;
    let mut failed = Vec::new();
    let mut items = Vec::new();
    let mut fb_items = Vec::new();
    for ev_id in &decision.evidence {
        let ev = state.evidence.get(ev_id).ok_or_else(|| fail(format!("evidence {ev_id} is missing")))?;
        if ev.record.generation_id != repair.parent_generation_id
            || ev.record.candidate_digest != candidate_digest
        {
            return Err(fail(format!("evidence {ev_id} is for another Candidate generation")));
        }
        if ev.record.result != CheckResult::Fail {
            continue;
        }
        let f = FailedEvidence {
            evidence_id: *ev_id,
            evidence_record_digest: ev.record_digest,
            evidence_eligibility_version: ev.record.eligibility_version,
            evidence_eligibility_state: ev.record.eligibility_state,
            result_status: ev.record.result,
            verification_obligation_id: ev.record.obligation_id,
            check_specification_id: ev.record.check_spec_id,
            check_specification_digest: ev.record.check_spec_digest,
        };
        items.push(item(
            InputClass::Identity,
            "failedEvidence",
            format!("evidence/{ev_id}"),
            ev.seq,
            Some(ev.record_digest),
            AuthorityClass::Evidence,
            &f,
            Place::Fixed,
        ));
        fb_items.push(FeedbackItem {
            kind: FeedbackKind::FailedCheck,
            content: format!(
                "check {} of obligation {} failed: {}",
                ev.record.check_spec_id,
                ev.record.obligation_id,
                crate::runtime::shown_text(&ev.record.detail)
            ),
            source_refs: vec![format!("evidence/{ev_id}")],
            source_digests: vec![ev.record_digest],
        });
        failed.push(f);
    }
    fb_items.push(FeedbackItem {
        kind: FeedbackKind::ParentChangeSet,
        content: format!(
            "the rejected parent generation {} froze as {candidate_digest} with change set {change_set_digest}; the repair starts from those exact bytes",
            repair.parent_generation_id
        ),
        source_refs: vec![format!("generation/{}", repair.parent_generation_id)],
        source_digests: vec![change_set_digest],
    });
    for c in &repair.constraints_to_preserve {
        fb_items.push(FeedbackItem {
            kind: FeedbackKind::PreservationConstraint,
            content: c.clone(),
            source_refs: vec![format!("goal/{}@{}", b.goal_id, goal.revision)],
            source_digests: vec![goal.digest],
        });
    }
    let context = RepairContext {
        acceptance_repair_digest: repair.repair_digest,
        acceptance_decision_id: repair.decision_id,
        acceptance_decision_digest: decision.decision_digest,
        input_manifest_digest: decision.input_manifest_digest,
        evidence_set_digest: decision.evidence_set_digest,
        rejected_candidate_generation_id: repair.parent_generation_id,
        rejected_candidate_version: parent.sequence,
        rejected_candidate_digest: candidate_digest,
        repair_candidate_generation_id: child_id,
        repair_candidate_sequence: child.sequence,
        repair_candidate_base_digest: child.base_digest,
        failed_evidence: failed,
        constraints_to_preserve: repair.constraints_to_preserve.clone(),
    };
    items.push(item(
        InputClass::Identity,
        "repairDecision",
        format!("decision/{}", repair.decision_id),
        decision.seq,
        Some(decision.decision_digest),
        AuthorityClass::RuntimeDecision,
        &context,
        Place::Fixed,
    ));

    // Feedback: sorted by kind then content; deterministic omission by the policy's limits.
    fb_items.sort();
    let limits = policy.bundle.feedback;
    let mut omissions = Vec::new();
    let mut kept = Vec::new();
    let mut total = 0usize;
    for (idx, it) in fb_items.into_iter().enumerate() {
        let size = ledger_schema::codec::encode(&it).len();
        let rule = if it.content.trim().is_empty() {
            Some("feedback.blank")
        } else if size > limits.max_item_bytes as usize {
            Some("feedback.maxItemBytes")
        } else if kept.len() >= usize::from(limits.max_items) {
            Some("feedback.maxItems")
        } else if total + size > limits.max_total_bytes as usize {
            Some("feedback.maxTotalBytes")
        } else {
            None
        };
        match rule {
            Some(rule) => omissions.push(OmissionDecision {
                source_ref: it.source_refs.first().cloned().unwrap_or_else(|| format!("feedback/{idx}")),
                rule: rule.to_owned(),
                reason: "optional working context over the policy's feedback limits".to_owned(),
            }),
            None => {
                total += size;
                kept.push(it);
            }
        }
    }
    let feedback = (!kept.is_empty()).then(|| Feedback {
        schema_version: FEEDBACK_SCHEMA,
        feedback_digest: record_digest_repeated(DigestKind::Feedback, &kept).0,
        items: kept,
    });
    if let Some(f) = &feedback {
        items.push(item(
            InputClass::Working,
            "priorAttemptFeedback",
            format!("repair/{repair_id}/feedback"),
            repair.seq,
            Some(f.feedback_digest),
            AuthorityClass::NonAuthoritativeWorking,
            f,
            Place::Fixed,
        ));
    }
    Ok((context, items, feedback, omissions))
}
