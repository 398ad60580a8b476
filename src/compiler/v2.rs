//! `closure-ledger-compiler/2`: the newest released Context Compiler, **frozen** from its
//! release on, as compiler/1 is (`v1.rs`): replay re-derives every manifest that records
//! `compilerVersion = "closure-ledger-compiler/2"` with this code, so what it selects,
//! orders, budgets and renders never changes. A change in output is a new compiler
//! (`v3.rs`) registered as the newest, with this file left as it is.
//! `replay-tests/tests/it/golden_packages.rs` pins its packages, manifests and Markdown
//! (`golden/lifecycle-packages-v2.json`).
//!
//! **What changed from compiler/1.** Selection, order, budgets and the package bytes are
//! compiler/1's; only names that compiler/1 took from Rust `Debug` formatting now come from
//! the serde wire names (`v2/names.rs`), so renaming a Rust variant can never move a digest:
//!
//! - omission `rule` `phase.<PHASE>.excludes.<CLASS>` and `budget.<CLASS>`:
//!   `phase.DISCOVERY.excludes.PROJECT_MATERIAL`, `budget.PROJECT_MATERIAL` (compiler/1:
//!   `phase.Discovery.excludes.ProjectMaterial`, `budget.ProjectMaterial`);
//! - omission `reason` of an unconfirmed Fact: `fact is PROPOSED; …` (compiler/1:
//!   `fact is Proposed; …`);
//! - the manifest's `compilerVersion`;
//! - the Markdown rendering (`render.rs`): phase, result kinds, check results and feedback
//!   kinds by their wire names.
//!
//! **The pipeline** is the seed's, one function per stage, [`compile`] running them in
//! order: (1) `bind_identity` — the [`AttemptBinding`] the runtime derived, resolved to
//! its policy and goal; (2) `query_phase` — the phase policy's required and optional
//! input classes and the class budgets; (3) `filter_by_authority` — every candidate item
//! with its manifest entry: only confirmed Facts, only the exact current repair authority
//! and the bounded feedback derived from it; (4) `budget` — semantic priority (input
//! class order) and per-class byte budgets: required content that does not fit is an
//! error, optional overflow is a recorded omission; (5) `render_and_hash` — canonical
//! package bytes, manifest entries with their authority class, package and manifest
//! digests. No clock, randomness, environment or I/O.

mod names;
mod render;

use std::collections::BTreeMap;

use ledger_schema::codec::{encode_into, record_digest_repeated};
use ledger_schema::events::PhasePolicy;
use ledger_schema::manifest::{ContextManifest, ManifestEntry, OmissionDecision};
use ledger_schema::package::{
    Blocker, CapabilityGrant, CodeExcerpt, ContextPackage, FEEDBACK_SCHEMA, FailedEvidence, Feedback,
    FeedbackItem, Obligation, PACKAGE_SCHEMA_PLAIN, PACKAGE_SCHEMA_PROTECTED, PACKAGE_SCHEMA_REPAIR,
    PackageGoal, PackageIdentity, RepairContext, ResponseContract, Scenario, SelectedDecision, SelectedFact,
    SelectedSkill, WORKER_EVENT_SCHEMA,
};
use ledger_schema::types::{AuthorityClass, CheckResult, InputClass, Verdict};
use ledger_schema::{Digest, DigestKind, Id};
use serde::Serialize;

pub use names::WireName;
pub use render::{markdown, markdown_as, markdown_cited, markdown_styled};

use super::{CompileError, Compiled, Compiler};
use crate::runtime::state::{FactStatus, GenerationStatus, GoalState, PolicyState, State};
use crate::runtime::{AttemptBinding, result_kind_allowed};

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/2";
/// Budget of a class the policy names no budget for.
pub const DEFAULT_CLASS_BUDGET_BYTES: u32 = 65_536;

/// Compiler/2 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V2;

impl Compiler for V2 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    fn markdown(&self, package: &ContextPackage) -> String {
        markdown(package)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: the five stages in
/// order. Compiler/2 carries no task selection: an Attempt that names one is compiled by
/// compiler/3 (`v3.rs`).
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    if binding.selection.is_some() {
        return Err(CompileError::SelectionUnsupported { version: VERSION });
    }
    pipeline(state, binding, VERSION, Vec::new(), Rules::V2)
}

/// The five stages, shared with compiler/3 (`v3.rs`), which records its own `version` and
/// adds the `advisory` items of a task selection after stage 3's (they go through the
/// budgets like every other item). With no advisory items and [`VERSION`] this is exactly
/// compiler/2 (pinned by the golden packages).
pub(super) fn pipeline(
    state: &State,
    binding: &AttemptBinding,
    version: &'static str,
    advisory: Vec<Item>,
    rules: Rules,
) -> Result<Compiled, CompileError> {
    let bound = Bound { rules, ..bind_identity(state, binding)? };
    let query = query_phase(&bound)?;
    let mut selected = filter_by_authority(state, &bound, &query)?;
    selected.items.extend(advisory);
    let budgeted = budget(selected, &query, bound.rules)?;
    Ok(render_and_hash(&bound, query, budgeted, version))
}

/// A value per input class: a map over the seven classes without a map's allocations.
#[derive(Default)]
struct ClassMap<T: Copy>([Option<T>; 7]);

impl<T: Copy> ClassMap<T> {
    /// The class's slot: exhaustive, so a new class does not compile until it has one.
    fn slot(class: InputClass) -> usize {
        match class {
            InputClass::Identity => 0,
            InputClass::Phase => 1,
            InputClass::Goal => 2,
            InputClass::BlockersDecisions => 3,
            InputClass::FactsScenariosObligations => 4,
            InputClass::ProjectMaterial => 5,
            InputClass::Working => 6,
        }
    }

    fn get(&self, class: InputClass) -> Option<T> {
        self.0.get(Self::slot(class)).copied().flatten()
    }

    fn set(&mut self, class: InputClass, value: T) {
        if let Some(slot) = self.0.get_mut(Self::slot(class)) {
            *slot = Some(value);
        }
    }
}

/// Classes every phase requires, whatever its policy says.
const ALWAYS_REQUIRED: [InputClass; 3] = [InputClass::Identity, InputClass::Phase, InputClass::Goal];

// ---------------------------------------------------------------------------------------
// Stage 1: bind identity.

/// The Attempt's identity, resolved to the policy and goal it binds.
struct Bound<'s> {
    binding: &'s AttemptBinding,
    policy: &'s PolicyState,
    goal: &'s GoalState,
    /// The package identity: the binding's fields as the package carries them.
    identity: PackageIdentity,
    /// What differs between the compilers that share this pipeline ([`Rules`]).
    rules: Rules,
}

/// What the compilers sharing [`pipeline`] decide differently: compilers 2 and 3
/// ([`Rules::V2`]) and compiler/4 ([`Rules::V4`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rules {
    pub sources: SourceRule,
    pub feedback: FeedbackRule,
    /// Compiler/8: a confirmed Fact left out by the phase or a budget is named with its
    /// revision, `fact/<id>@<revision>`, as an unconfirmed one is (outside review 221 F4: an
    /// auditor could not tell which confirmed statement was left out).
    pub omitted_fact_revision: bool,
}

impl Rules {
    pub const V2: Rules =
        Rules { sources: SourceRule::Every, feedback: FeedbackRule::Optional, omitted_fact_revision: false };
    pub const V4: Rules = Rules {
        sources: SourceRule::LatestPerPath,
        feedback: FeedbackRule::AsPolicy,
        omitted_fact_revision: false,
    };
    pub const V8: Rules = Rules { omitted_fact_revision: true, ..Rules::V4 };
}

/// Whether a repair child's prior-attempt feedback may lose items to the policy's feedback
/// limits when the phase policy *requires* the WORKING class that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FeedbackRule {
    /// Always: an item over a limit is an omission (compilers 2 and 3).
    Optional,
    /// Only when WORKING is optional: where it is required, an item over a limit fails the
    /// compilation (seed 000: an overflow "fails compilation when policy marks the item
    /// required"; outside review 23). Compiler/4.
    AsPolicy,
}

/// Which project sources of the goal a package carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SourceRule {
    /// Every recorded one (compilers 1–3: two revisions of a path are both delivered).
    Every,
    /// Per path, the one recorded last; an earlier record of the path is an omission
    /// (`freshness.sourceSuperseded`: seed 000, "Reject or label … project excerpts whose
    /// source digest changed"). Compiler/4.
    LatestPerPath,
}

/// Stage 1: the binding the runtime derived, with its policy and goal looked up.
fn bind_identity<'s>(state: &'s State, b: &'s AttemptBinding) -> Result<Bound<'s>, CompileError> {
    let policy =
        state.policies.get(&b.policy.id).ok_or(CompileError::Unknown { what: "policy", id: b.policy.id })?;
    let goal = state.goals.get(&b.goal_id).ok_or(CompileError::Unknown { what: "goal", id: b.goal_id })?;
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
    Ok(Bound { binding: b, policy, goal, identity, rules: Rules::V2 })
}

// ---------------------------------------------------------------------------------------
// Stage 2: phase query.

/// What the phase policy asks for: its classes, its grant and response contract, and the
/// class budgets.
struct PhaseQuery<'s> {
    phase_policy: &'s PhasePolicy,
    grant: CapabilityGrant,
    contract: ResponseContract,
    budgets: ClassMap<u32>,
}

impl PhaseQuery<'_> {
    /// Required classes: IDENTITY, PHASE, GOAL always, and the phase policy's.
    fn required(&self, class: InputClass) -> bool {
        ALWAYS_REQUIRED.contains(&class) || self.phase_policy.required.contains(&class)
    }

    /// Required or optional: what the phase admits at all.
    fn wanted(&self, class: InputClass) -> bool {
        self.required(class) || self.phase_policy.optional.contains(&class)
    }

    /// The class's byte budget: the policy's first budget for it, or the default.
    fn budget(&self, class: InputClass) -> u32 {
        self.budgets.get(class).unwrap_or(DEFAULT_CLASS_BUDGET_BYTES)
    }
}

/// Stage 2: the phase policy of the bound phase, the capability grant and response
/// contract it implies, and the policy's class budgets.
fn query_phase<'s>(bound: &Bound<'s>) -> Result<PhaseQuery<'s>, CompileError> {
    let phase = bound.binding.phase;
    let bundle = &bound.policy.bundle;
    let phase_policy =
        bundle.phases.iter().find(|p| p.phase == phase).ok_or(CompileError::NoPhasePolicy(phase))?;
    let mut budgets = ClassMap::default();
    for class_budget in &bundle.budgets {
        // The first budget named for a class counts, as compiler/1's `find` did.
        if budgets.get(class_budget.class).is_none() {
            budgets.set(class_budget.class, class_budget.max_bytes);
        }
    }
    Ok(PhaseQuery {
        phase_policy,
        grant: CapabilityGrant { phase, capabilities: phase_policy.capabilities.clone() },
        contract: ResponseContract {
            allowed_result_kinds: result_kind_allowed(phase).into_iter().collect(),
            max_event_bytes: bundle.max_event_bytes,
            worker_event_schema: WORKER_EVENT_SCHEMA.to_owned(),
        },
        budgets,
    })
}

// ---------------------------------------------------------------------------------------
// Stage 3: authority and freshness.

/// One candidate item for the package: its class, its manifest entry, the size of its
/// rendering, and where it goes in the package.
pub(super) struct Item {
    class: InputClass,
    /// Its position among the candidates, set by stage 4 (the tie-break that makes its
    /// in-place sort stable).
    seq: usize,
    entry: ManifestEntry,
    bytes: usize,
    place: Place,
}

pub(super) enum Place {
    Invariant(String),
    Fact(SelectedFact),
    Decision(SelectedDecision),
    Scenario(Scenario),
    Code(CodeExcerpt),
    Obligation(Obligation),
    Blocker(Blocker),
    /// A task selection's loaded sources, whole (compiler/3).
    Skills(Vec<SelectedSkill>),
    /// The goal's content, rendered in its fixed field.
    Goal(PackageGoal),
    /// Identity, phase, candidate, repair entries: rendered in fixed fields.
    Fixed,
}

/// Where an item comes from: its manifest entry's fields but the rendered digest.
pub(super) struct Source {
    pub(super) kind: &'static str,
    pub(super) source_ref: String,
    pub(super) source_revision: u64,
    pub(super) source_digest: Option<Digest>,
    pub(super) authority_class: AuthorityClass,
}

/// An item of `class` rendering `value`, its manifest entry made from `source`.
pub(super) fn item<T: Serialize>(class: InputClass, source: Source, value: &T, place: Place) -> Item {
    let (rendered_digest, bytes) = record_digest_repeated(DigestKind::Rendered, value);
    let entry = ManifestEntry {
        kind: source.kind.to_owned(),
        source_ref: source.source_ref,
        source_revision: source.source_revision,
        source_digest: source.source_digest,
        authority_class: source.authority_class,
        rendered_digest,
    };
    Item { class, seq: 0, entry, bytes, place }
}

thread_local! {
    /// The (empty) items' vector of this thread's last compile, for the next to reuse.
    static ITEM_POOL: std::cell::Cell<Vec<Item>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An item of `class` rendering `value`, which then moves into its `place` (no copy of
/// the rendered value is made for the package).
pub(super) fn item_in<T: Serialize>(
    class: InputClass,
    source: Source,
    value: T,
    place: fn(T) -> Place,
) -> Item {
    let mut it = item(class, source, &value, Place::Fixed);
    it.place = place(value);
    it
}

/// `prefix` followed by `id`'s text: exactly `format!("{prefix}{id}")`, without the
/// formatter (a source ref is built for every item of every compile).
pub(super) fn id_ref(prefix: &str, id: Id) -> String {
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    id.push_to(&mut out);
    out
}

/// Appends `n` in decimal (exactly what `Display` writes), without the formatter.
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits by construction; the fallback is never taken.
    out.push_str(digits.get(start..).and_then(|d| std::str::from_utf8(d).ok()).unwrap_or_default());
}

/// What stage 3 admits: every item whose authority holds, in the order met, the
/// omissions it decided, and the repair context and feedback of a repair child.
struct Selection {
    items: Vec<Item>,
    omissions: Vec<OmissionDecision>,
    repair_context: Option<RepairContext>,
    feedback: Option<Feedback>,
}

/// Stage 3: the fixed items, then the durable sources in semantic order filtered by
/// authority, then (IMPLEMENT of a repair child) the repair authority and its feedback.
fn filter_by_authority(
    state: &State,
    bound: &Bound<'_>,
    query: &PhaseQuery<'_>,
) -> Result<Selection, CompileError> {
    let mut items = fixed_items(bound, query);
    let mut omissions = Vec::new();
    durable_sources(state, bound, &mut items, &mut omissions);
    let mut selection = Selection { items, omissions, repair_context: None, feedback: None };
    let b = bound.binding;
    if let Some((gen_id, _)) = b.generation {
        let generation =
            state.generations.get(&gen_id).ok_or(CompileError::Unknown { what: "generation", id: gen_id })?;
        if let Some(repair_id) = generation.repair_id {
            let repair = repair_authority(state, bound, gen_id, repair_id)?;
            if bound.rules.feedback == FeedbackRule::AsPolicy
                && repair.lost > 0
                && query.required(InputClass::Working)
            {
                return Err(CompileError::RequiredFeedback { lost: repair.lost });
            }
            selection.items.extend(repair.items);
            selection.omissions.extend(repair.omissions);
            selection.repair_context = Some(repair.context);
            selection.feedback = repair.feedback;
        }
    }
    Ok(selection)
}

/// Identity, policy, profile, invariants, phase, goal and (IMPLEMENT) candidate: always
/// present, from the binding alone.
fn fixed_items(bound: &Bound<'_>, query: &PhaseQuery<'_>) -> Vec<Item> {
    let b = bound.binding;
    let wf_ref = id_ref("workflow/", b.workflow_id);
    let policy_ref = id_ref("policy/", b.policy.id);
    let runtime = |kind, source_ref, source_revision, source_digest| Source {
        kind,
        source_ref,
        source_revision,
        source_digest,
        authority_class: AuthorityClass::RuntimeDecision,
    };
    let workflow_version = u64::from(b.workflow_version);
    // The items' vector is the previous compile's on this thread, emptied (its capacity
    // only: growing or allocating a vector of large items costs more than most items do).
    let mut items = ITEM_POOL.take();
    items.clear();
    items.reserve(32);
    items.extend([
        item(
            InputClass::Identity,
            runtime("identity", wf_ref.clone(), workflow_version, None),
            &bound.identity,
            Place::Fixed,
        ),
        item(
            InputClass::Identity,
            runtime("policy", policy_ref.clone(), 0, Some(b.policy.digest)),
            &b.policy,
            Place::Fixed,
        ),
        item(
            InputClass::Identity,
            runtime("profile", id_ref("profile/", b.profile.id), 0, Some(b.profile.digest)),
            &b.profile,
            Place::Fixed,
        ),
    ]);
    for invariant in &bound.policy.bundle.invariants {
        items.push(item(
            InputClass::Identity,
            runtime("invariant", policy_ref.clone(), 0, Some(b.policy.digest)),
            invariant,
            Place::Invariant(invariant.clone()),
        ));
    }
    items.push(item(
        InputClass::Phase,
        runtime("phase", [wf_ref.as_str(), "/phase"].concat(), workflow_version, Some(b.policy.digest)),
        &(&query.phase_policy.objective, &query.grant, &query.contract),
        Place::Fixed,
    ));
    items.push(item_in(
        InputClass::Goal,
        Source {
            kind: "goal",
            source_ref: id_ref("goal/", b.goal_id),
            source_revision: u64::from(bound.goal.revision),
            source_digest: Some(bound.goal.digest),
            authority_class: AuthorityClass::Goal,
        },
        package_goal(bound.goal),
        Place::Goal,
    ));
    if let Some((gen_id, base)) = b.generation {
        items.push(item(
            InputClass::Identity,
            runtime("candidate", id_ref("generation/", gen_id), 0, Some(base)),
            &(gen_id, base),
            Place::Fixed,
        ));
    }
    items
}

/// The goal content as the package carries it.
fn package_goal(goal: &GoalState) -> PackageGoal {
    PackageGoal {
        objective: goal.content.objective.clone(),
        success_criteria: goal.content.success_criteria.clone(),
        scope: goal.content.scope.clone(),
        non_goals: goal.content.non_goals.clone(),
        preservation_constraints: goal.content.preservation_constraints.clone(),
    }
}

/// The omission of a requirement (a scenario or an obligation) a goal revision retired
/// at entry `at` for `why` (outside reviews 55 and 57: the reason is the auditor's).
fn retired(source_ref: String, at: u64, why: &str) -> OmissionDecision {
    let mut reason = "retired after a goal revision (entry ".to_owned();
    push_decimal(&mut reason, at);
    reason.push_str("): ");
    reason.push_str(why);
    OmissionDecision { source_ref, rule: "freshness.requirementRetired".to_owned(), reason }
}

/// Open blockers of the workflow, Human Decisions (per question the latest; an earlier one
/// is an omission), confirmed Facts (an unconfirmed one is an omission), scenarios,
/// obligations (a retired one is an omission) and project sources of the goal, in that
/// order.
fn durable_sources(
    state: &State,
    bound: &Bound<'_>,
    items: &mut Vec<Item>,
    omissions: &mut Vec<OmissionDecision>,
) {
    let b = bound.binding;
    for (id, blocker) in
        state.blockers.iter().filter(|(_, x)| x.workflow_id == b.workflow_id && x.resolution.is_none())
    {
        let value = Blocker { blocker_id: *id, description: blocker.description.clone() };
        let source = Source {
            kind: "blocker",
            source_ref: id_ref("blocker/", *id),
            source_revision: blocker.seq,
            source_digest: None,
            authority_class: AuthorityClass::RuntimeDecision,
        };
        items.push(item_in(InputClass::BlockersDecisions, source, value, Place::Blocker));
    }
    // Per question, the decision that stands: the latest (a later one supersedes it only
    // across a goal revision: `DecisionConflict`). An earlier one is an omission.
    // (Each decision's key, `question_key`, is derived once when it is recorded.)
    let decisions: Vec<(&Id, &crate::runtime::state::HumanDecisionState, &str)> = state
        .human_decisions
        .iter()
        .filter(|(_, x)| x.goal_id == b.goal_id)
        .map(|(id, d)| (id, d, d.key.as_str()))
        .collect();
    let mut standing: BTreeMap<&str, (u64, Id)> = BTreeMap::new();
    for &(id, d, key) in &decisions {
        let latest = standing.entry(key).or_insert((d.seq, *id));
        if d.seq > latest.0 {
            *latest = (d.seq, *id);
        }
    }
    for &(id, d, key) in &decisions {
        // A withdrawn decision reaches no worker (outside review 135; no ledger before it
        // withdraws one, so no earlier package changes).
        if let Some(at) = d.withdrawn_seq {
            let mut reason = ["withdrawn by ", &d.withdrawn_by, " (entry "].concat();
            push_decimal(&mut reason, at);
            reason.push_str("): ");
            reason.push_str(&d.withdrawn_reason);
            omissions.push(OmissionDecision {
                source_ref: id_ref("humanDecision/", *id),
                rule: "freshness.decisionWithdrawn".to_owned(),
                reason,
            });
            continue;
        }
        if let Some(&(_, newer)) = standing.get(key).filter(|(seq, _)| *seq != d.seq) {
            omissions.push(OmissionDecision {
                source_ref: id_ref("humanDecision/", *id),
                rule: "freshness.decisionSuperseded".to_owned(),
                reason: [
                    "superseded by a later decision on the same question: ",
                    &id_ref("humanDecision/", newer),
                ]
                .concat(),
            });
            continue;
        }
        let value =
            SelectedDecision { decision_id: *id, question: d.question.clone(), answer: d.answer.clone() };
        let source = Source {
            kind: "humanDecision",
            source_ref: id_ref("humanDecision/", *id),
            source_revision: d.seq,
            source_digest: None,
            authority_class: AuthorityClass::HumanDecision,
        };
        items.push(item_in(InputClass::BlockersDecisions, source, value, Place::Decision));
    }
    for (id, fact) in state.facts.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        if fact.status != FactStatus::Confirmed {
            // PROPOSED and invalidated Facts never appear as confirmed.
            omissions.push(OmissionDecision {
                source_ref: {
                    // "fact/{id}@{revision}"
                    let mut r = id_ref("fact/", *id);
                    r.push('@');
                    push_decimal(&mut r, u64::from(fact.revision));
                    r
                },
                rule: "authority.factNotConfirmed".to_owned(),
                reason: ["fact is ", fact.status.wire_name(), "; only confirmed facts are authoritative"]
                    .concat(),
            });
            continue;
        }
        let value = SelectedFact { fact_id: *id, revision: fact.revision, statement: fact.statement.clone() };
        let source = Source {
            kind: "fact",
            source_ref: id_ref("fact/", *id),
            source_revision: u64::from(fact.revision),
            source_digest: Some(Digest::of_repeated(DigestKind::Source, fact.statement.as_bytes())),
            authority_class: AuthorityClass::ConfirmedFact,
        };
        items.push(item_in(InputClass::FactsScenariosObligations, source, value, Place::Fact));
    }
    for (id, s) in state.scenarios.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        if let Some(at) = s.retired_seq {
            omissions.push(retired(id_ref("scenario/", *id), at, &s.retired_reason));
            continue;
        }
        let value = Scenario { scenario_id: *id, title: s.title.clone(), description: s.description.clone() };
        let source = Source {
            kind: "scenario",
            source_ref: id_ref("scenario/", *id),
            source_revision: s.seq,
            source_digest: None,
            authority_class: AuthorityClass::Goal,
        };
        items.push(item_in(InputClass::FactsScenariosObligations, source, value, Place::Scenario));
    }
    for (id, o) in state.obligations.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        if let Some(at) = o.retired_seq {
            omissions.push(retired(id_ref("obligation/", *id), at, &o.retired_reason));
            continue;
        }
        let value = Obligation {
            obligation_id: *id,
            description: o.description.clone(),
            check_spec_id: o.check_spec_id,
            check_spec_digest: o.check_spec_digest,
        };
        let source = Source {
            kind: "obligation",
            source_ref: id_ref("obligation/", *id),
            source_revision: o.seq,
            source_digest: Some(o.check_spec_digest),
            authority_class: AuthorityClass::Goal,
        };
        items.push(item_in(InputClass::FactsScenariosObligations, source, value, Place::Obligation));
    }
    // Per path, the seq and id of its latest record, and its withdrawal if it was withdrawn.
    type Newest<'s> = (u64, Id, Option<(u64, &'s str)>);
    let mut latest: BTreeMap<&str, Newest<'_>> = BTreeMap::new();
    for (id, s) in state.sources.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        let this = (s.seq, *id, s.withdrawn_seq.map(|at| (at, s.withdrawn_reason.as_str())));
        let newest = latest.entry(s.path.as_str()).or_insert(this);
        if s.seq > newest.0 {
            *newest = this;
        }
    }
    for (id, s) in state.sources.iter().filter(|(_, x)| x.goal_id == b.goal_id) {
        // A path whose latest record is withdrawn left the project: none of its records is
        // delivered (outside review 100; no ledger before it withdraws one, so no earlier
        // package changes).
        if let Some(&(_, _, Some((at, why)))) = latest.get(s.path.as_str()) {
            let mut reason = "its path was withdrawn from the project (entry ".to_owned();
            push_decimal(&mut reason, at);
            reason.push_str("): ");
            reason.push_str(why);
            omissions.push(OmissionDecision {
                source_ref: id_ref("source/", *id),
                rule: "freshness.sourceWithdrawn".to_owned(),
                reason,
            });
            continue;
        }
        if let Some(&(_, newer, _)) = latest
            .get(s.path.as_str())
            .filter(|(seq, _, _)| bound.rules.sources == SourceRule::LatestPerPath && *seq != s.seq)
        {
            omissions.push(OmissionDecision {
                source_ref: id_ref("source/", *id),
                rule: "freshness.sourceSuperseded".to_owned(),
                reason: {
                    let mut r = "superseded by a later record of its path: ".to_owned();
                    r.push_str(&id_ref("source/", newer));
                    r
                },
            });
            continue;
        }
        let value = CodeExcerpt {
            source_id: *id,
            path: s.path.clone(),
            revision: s.revision.clone(),
            digest: s.digest,
            content: s.content.clone(),
        };
        let source = Source {
            kind: "projectSource",
            source_ref: id_ref("source/", *id),
            source_revision: s.seq,
            source_digest: Some(s.digest),
            authority_class: AuthorityClass::ProjectSource,
        };
        items.push(item_in(InputClass::ProjectMaterial, source, value, Place::Code));
    }
}

/// What the repair authority of a repair child contributes.
struct Repair {
    context: RepairContext,
    items: Vec<Item>,
    feedback: Option<Feedback>,
    omissions: Vec<OmissionDecision>,
    /// Feedback items (not blank) the policy's feedback limits left out.
    lost: usize,
}

/// The repair context of repair child `child_id`, proved from the exact current repair
/// authority, and the bounded feedback derived from that closed source set only.
fn repair_authority(
    state: &State,
    bound: &Bound<'_>,
    child_id: Id,
    repair_id: Id,
) -> Result<Repair, CompileError> {
    let b = bound.binding;
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
    let mut failed = Vec::with_capacity(decision.evidence.len());
    let mut items = Vec::with_capacity(decision.evidence.len() + 2);
    let mut fb_items = Vec::with_capacity(decision.evidence.len() + 1 + repair.constraints_to_preserve.len());
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
        let evidence_ref = id_ref("evidence/", *ev_id);
        let source = Source {
            kind: "failedEvidence",
            source_ref: evidence_ref,
            source_revision: ev.seq,
            source_digest: Some(ev.record_digest),
            authority_class: AuthorityClass::Evidence,
        };
        items.push(item(InputClass::Identity, source, &f, Place::Fixed));
        fb_items.push(FeedbackItem::failed_check(
            *ev_id,
            ev.record_digest,
            ev.record.check_spec_id,
            ev.record.obligation_id,
            &crate::runtime::shown_text(&ev.record.detail),
        ));
        failed.push(f);
    }
    fb_items.push(FeedbackItem::parent_change_set(
        repair.parent_generation_id,
        candidate_digest,
        change_set_digest,
    ));
    for c in &repair.constraints_to_preserve {
        fb_items.push(FeedbackItem::preservation_constraint(
            c,
            b.goal_id,
            bound.goal.revision,
            bound.goal.digest,
        ));
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
    let source = Source {
        kind: "repairDecision",
        source_ref: id_ref("decision/", repair.decision_id),
        source_revision: decision.seq,
        source_digest: Some(decision.decision_digest),
        authority_class: AuthorityClass::RuntimeDecision,
    };
    items.push(item(InputClass::Identity, source, &context, Place::Fixed));

    let (feedback, omissions, lost) = bounded_feedback(fb_items, bound.policy);
    if let Some(f) = &feedback {
        let source = Source {
            kind: "priorAttemptFeedback",
            source_ref: [id_ref("repair/", repair_id).as_str(), "/feedback"].concat(),
            source_revision: repair.seq,
            source_digest: Some(f.feedback_digest),
            authority_class: AuthorityClass::NonAuthoritativeWorking,
        };
        items.push(item(InputClass::Working, source, f, Place::Fixed));
    }
    Ok(Repair { context, items, feedback, omissions, lost })
}

/// The feedback items sorted by kind then content, each kept or omitted by the policy's
/// feedback limits (blank, item size, item count, total size — in that order), and how many
/// items (not blank) the limits left out.
fn bounded_feedback(
    mut fb_items: Vec<FeedbackItem>,
    policy: &PolicyState,
) -> (Option<Feedback>, Vec<OmissionDecision>, usize) {
    fb_items.sort();
    let limits = policy.bundle.feedback;
    let mut omissions = Vec::new();
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut lost = 0usize;
    for (idx, it) in fb_items.into_iter().enumerate() {
        let size = ledger_schema::codec::encoded_len(&it);
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
            Some(rule) => {
                lost += usize::from(rule != "feedback.blank");
                omissions.push(OmissionDecision {
                    source_ref: it.source_refs.first().cloned().unwrap_or_else(|| format!("feedback/{idx}")),
                    rule: rule.to_owned(),
                    reason: "optional working context over the policy's feedback limits".to_owned(),
                });
            }
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
    (feedback, omissions, lost)
}

// ---------------------------------------------------------------------------------------
// Stage 4: semantic priority and per-class byte budgets.

/// The `sourceRef` of an item stage 4 leaves out (the item is not needed any more, so its
/// ref moves into the omission): a confirmed Fact's with its revision under
/// [`Rules::omitted_fact_revision`].
fn omitted_ref(it: &mut Item, rules: Rules) -> String {
    let mut r = std::mem::take(&mut it.entry.source_ref);
    if rules.omitted_fact_revision && matches!(it.place, Place::Fact(_)) {
        r.push('@');
        push_decimal(&mut r, it.entry.source_revision);
    }
    r
}

/// What survived the phase query and the budgets, in package order.
struct Budgeted {
    kept: Vec<Item>,
    omissions: Vec<OmissionDecision>,
    repair_context: Option<RepairContext>,
    feedback: Option<Feedback>,
}

/// Stage 4: items in semantic priority (input class order; stable within a class), each
/// kept while its class fits its budget. A class the phase does not want is an omission;
/// required content over its budget is [`CompileError::RequiredOverflow`]; optional
/// content over it is an omission. The feedback stays only if its entry was kept.
fn budget(selection: Selection, query: &PhaseQuery<'_>, rules: Rules) -> Result<Budgeted, CompileError> {
    let Selection { mut items, mut omissions, repair_context, mut feedback } = selection;
    // Stable by class: positions as tie-break make an in-place (allocation-free) sort
    // stable.
    for (seq, it) in items.iter_mut().enumerate() {
        it.seq = seq;
    }
    items.sort_unstable_by_key(|i| (i.class, i.seq));
    let phase = query.phase_policy.phase.wire_name();
    let mut used: ClassMap<usize> = ClassMap::default();
    // In place, in order (the items dropped here become omissions and are not needed any
    // more, so their source refs move into them); the first required overflow stops it.
    let mut overflow = None;
    items.retain_mut(|it| {
        if let Some(CompileError::RequiredOverflow { class, bytes, .. }) = &mut overflow {
            // The error names all the class requires, so one budget change suffices
            // (outside review 60: it named the size at the first overflow).
            if *class == it.class
                && query.required(it.class)
                && it.entry.authority_class != AuthorityClass::PromptAdvisory
            {
                *bytes += it.bytes;
            }
            return false;
        }
        if !query.wanted(it.class) {
            omissions.push(OmissionDecision {
                source_ref: omitted_ref(it, rules),
                rule: ["phase.", phase, ".excludes.", it.class.wire_name()].concat(),
                reason: "the phase policy neither requires nor allows this input class".to_owned(),
            });
            return false;
        }
        let limit = query.budget(it.class);
        let total = used.get(it.class).unwrap_or(0) + it.bytes;
        if total > limit as usize {
            // Prompt-advisory material (compiler/3's selected sources) is never required.
            if query.required(it.class) && it.entry.authority_class != AuthorityClass::PromptAdvisory {
                overflow =
                    Some(CompileError::RequiredOverflow { class: it.class, bytes: total, budget: limit });
                return false;
            }
            omissions.push(OmissionDecision {
                source_ref: omitted_ref(it, rules),
                rule: ["budget.", it.class.wire_name()].concat(),
                reason: format!("optional content would bring the class to {total} of {limit} bytes"),
            });
            return false;
        }
        used.set(it.class, total);
        true
    });
    if let Some(error) = overflow {
        return Err(error);
    }
    let kept = items;
    if !kept.iter().any(|it| it.entry.kind == "priorAttemptFeedback") {
        feedback = None;
    }
    Ok(Budgeted { kept, omissions, repair_context, feedback })
}

// ---------------------------------------------------------------------------------------
// Stage 5: render and hash.

/// Stage 5: the package (every kept item in its place), its canonical bytes, and the
/// manifest binding them (entries in package order, omissions, digests).
fn render_and_hash(
    bound: &Bound<'_>,
    query: PhaseQuery<'_>,
    budgeted: Budgeted,
    version: &'static str,
) -> Compiled {
    let b = bound.binding;
    let Budgeted { mut kept, omissions, repair_context, feedback } = budgeted;
    // The grant and contract move into the package: digest them first.
    let capability_grant_digest = record_digest_repeated(DigestKind::CapabilityGrant, &query.grant).0;
    let response_contract_digest = record_digest_repeated(DigestKind::ResponseContract, &query.contract).0;
    let mut package = ContextPackage {
        schema_version: if b.plan.is_some() {
            PACKAGE_SCHEMA_PROTECTED
        } else if repair_context.is_some() {
            PACKAGE_SCHEMA_REPAIR
        } else {
            PACKAGE_SCHEMA_PLAIN
        },
        identity: bound.identity.clone(),
        phase_objective: query.phase_policy.objective.clone(),
        selected_skills: Vec::new(),
        capability_grant: query.grant,
        invariants: Vec::new(),
        // Set from the goal item's place below (the goal is always kept).
        goal: PackageGoal {
            objective: String::new(),
            success_criteria: Vec::new(),
            scope: Vec::new(),
            non_goals: Vec::new(),
            preservation_constraints: Vec::new(),
        },
        selected_facts: Vec::new(),
        selected_decisions: Vec::new(),
        business_scenarios: Vec::new(),
        relevant_code: Vec::new(),
        verification_obligations: Vec::new(),
        blockers: Vec::new(),
        repair_context,
        prior_attempt_feedback: feedback,
        execution_profile: b.profile,
        policy_bundle: b.policy,
        response_contract: query.contract,
    };
    let mut goal_placed = false;
    // The package holds every kept item's rendering plus a little framing: size it once.
    let package_estimate = kept.iter().map(|it| it.bytes).sum::<usize>() + 1024;
    let mut entries = Vec::with_capacity(kept.len());
    for it in kept.drain(..) {
        match it.place {
            Place::Invariant(v) => package.invariants.push(v),
            Place::Fact(v) => package.selected_facts.push(v),
            Place::Decision(v) => package.selected_decisions.push(v),
            Place::Scenario(v) => package.business_scenarios.push(v),
            Place::Code(v) => package.relevant_code.push(v),
            Place::Obligation(v) => package.verification_obligations.push(v),
            Place::Blocker(v) => package.blockers.push(v),
            Place::Skills(v) => package.selected_skills.extend(v),
            Place::Goal(v) => {
                package.goal = v;
                goal_placed = true;
            }
            Place::Fixed => {}
        }
        entries.push(it.entry);
    }
    if !goal_placed {
        package.goal = package_goal(bound.goal);
    }
    if kept.capacity() <= 1024 {
        ITEM_POOL.set(kept);
    }
    let mut package_bytes = Vec::with_capacity(package_estimate);
    encode_into(&package, &mut package_bytes);
    let manifest = ContextManifest {
        schema_version: package.schema_version,
        compiler_version: version.to_owned(),
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
        capability_grant_digest,
        response_contract_digest,
        feedback_digest: package.prior_attempt_feedback.as_ref().map(|f| f.feedback_digest),
        selection_receipt: b.selection,
        entries,
        omission_decisions: omissions,
        // A currency proof recompiles the same package again and again (every context-
        // changing entry, live, on reopen and on replay): remembered, compared byte for byte.
        package_digest: Digest::of_repeated(DigestKind::Package, &package_bytes),
    };
    Compiled { package, package_bytes, manifest }
}

#[cfg(test)]
mod tests {
    use super::{id_ref, push_decimal};
    use ledger_schema::Id;

    #[test]
    fn refs_and_decimals_match_format() {
        for n in [0u64, 1, 9, 10, 99, 100, 4_294_967_295, u64::MAX] {
            let mut out = String::from("goal/x@");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("goal/x@{n}"));
        }
        for id in [Id(0), Id(1), Id(u128::MAX), Id(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef)] {
            assert_eq!(id_ref("source/", id), format!("source/{id}"));
        }
    }
}
