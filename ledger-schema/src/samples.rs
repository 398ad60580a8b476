//! Deterministic sample events: one or more per kind of catalog v1. Used for the golden
//! vectors, the demo-free tests of other crates, benches and fuzz seeds. Pure data.
//!
//! Every digest a sample carries whose preimage is in the samples is the real digest of
//! that preimage (docs/format.md, "Record digests"; `vectors/crosscheck.py` recomputes
//! each): authority digests and the bindings that name them, goal content, manifests,
//! capability grants and response contracts, rendered entries, payloads, evidence,
//! acceptance and repair digests. Only opaque inputs — digests of things the ledger does
//! not hold (plan, package, feedback, check specs, candidate and change-set bytes, an
//! ignored delivery's payload, a stale manifest) — are labels hashed with `dg`.

use crate::events::profile;
use crate::events::*;
use crate::manifest::{ContextManifest, ManifestEntry, OmissionDecision};
use crate::types::*;
use crate::{Digest, DigestKind, Entry, FORMAT_VERSION, Id, SealedEntry};

fn id(n: u128) -> Id {
    Id(0x0190_0000_0000_0000_0000_0000_0000_0000 | n)
}

fn dg(label: &str) -> Digest {
    Digest::of(DigestKind::Source, label.as_bytes())
}

fn s(text: &str) -> String {
    text.to_owned()
}

/// The ledger id every sample entry carries.
pub const LEDGER: Id = Id(0x0190_0000_0000_0000_0000_0000_0000_0001);

/// `(name, event)` for every sample, covering every kind and both shapes of each
/// optional group.
pub fn events() -> Vec<(&'static str, Event)> {
    // Authority records first: every binding below carries their real digests.
    let bundle = PolicyBundle {
        budgets: vec![
            ClassBudget { class: InputClass::Identity, max_bytes: 4096 },
            ClassBudget { class: InputClass::Working, max_bytes: 16384 },
        ],
        feedback: FeedbackLimits { max_items: 16, max_item_bytes: 4096, max_total_bytes: 32768 },
        phases: vec![
            PhasePolicy {
                phase: Phase::Discovery,
                objective: s("find where the parser stops"),
                capabilities: vec![s("read")],
                required: vec![InputClass::Identity, InputClass::Goal],
                optional: vec![],
            },
            PhasePolicy {
                phase: Phase::Implement,
                objective: s("implement the plan"),
                capabilities: vec![s("edit"), s("run tests")],
                required: vec![InputClass::Identity, InputClass::Goal],
                optional: vec![InputClass::Working],
            },
        ],
        max_event_bytes: 65_536,
        invariants: vec![s("never weaken a check")],
    };
    let execution_profile = execution_profile_sample();
    // What the compiler derives from a phase policy: the capability grant and the
    // response contract (their digests are recorded in the manifest).
    let grant_and_contract = |phase: Phase, result_kind: ResultKind| {
        let capabilities = bundle
            .phases
            .iter()
            .find(|p| p.phase == phase)
            .map(|p| p.capabilities.clone())
            .unwrap_or_default();
        let grant = crate::package::CapabilityGrant { phase, capabilities };
        let contract = crate::package::ResponseContract {
            max_event_bytes: bundle.max_event_bytes,
            worker_event_schema: crate::package::WORKER_EVENT_SCHEMA.to_owned(),
            allowed_result_kinds: vec![result_kind],
        };
        (
            Digest::of(DigestKind::CapabilityGrant, &crate::codec::encode(&grant)),
            Digest::of(DigestKind::ResponseContract, &crate::codec::encode(&contract)),
        )
    };
    let (implement_grant, implement_contract) =
        grant_and_contract(Phase::Implement, ResultKind::CompletionRequest);
    let (discovery_grant, discovery_contract) = grant_and_contract(Phase::Discovery, ResultKind::Proposals);
    let policy = Binding { id: id(10), digest: bundle.digest() };
    let profile = Binding { id: id(11), digest: execution_profile.digest() };
    // The plan pair is an opaque input: the plan document is not in the ledger.
    let plan = Binding { id: id(12), digest: dg("plan") };
    let content = GoalContent {
        objective: s("Make the parser reject trailing bytes"),
        success_criteria: vec![s("trailing byte test passes"), s("no regression")],
        scope: vec![s("src/parser")],
        non_goals: vec![s("performance")],
        preservation_constraints: vec![s("public API unchanged")],
    };
    // The compiler renders a goal as its content, field for field (`PackageGoal`).
    let goal_entry = ManifestEntry {
        kind: s("goal"),
        source_ref: format!("goal/{}", id(20)),
        source_revision: 2,
        source_digest: Some(content.digest()),
        authority_class: AuthorityClass::Goal,
        rendered_digest: Digest::of(DigestKind::Rendered, &crate::codec::encode(&content)),
    };
    let manifest = ContextManifest {
        // The plan pair is present: package schema 3.
        schema_version: 3,
        compiler_version: s("closure-ledger-compiler/1"),
        goal_id: id(20),
        goal_revision: 2,
        workflow_id: id(30),
        workflow_version: 3,
        phase: Phase::Implement,
        attempt_id: id(40),
        generation_id: Some(id(50)),
        candidate_digest: Some(dg("base")),
        plan: Some(plan),
        profile,
        policy,
        capability_grant_digest: implement_grant,
        response_contract_digest: implement_contract,
        feedback_digest: Some(dg("feedback")),
        entries: vec![goal_entry.clone()],
        omission_decisions: vec![OmissionDecision {
            source_ref: s("feedback/3"),
            rule: s("feedback.maxItems"),
            reason: s("optional working context over budget"),
        }],
        package_digest: dg("package"),
        selection_receipt: None,
    };
    let manifest_digest = manifest.digest();
    // An identity entry: the one kind of manifest entry with no `sourceDigest`, rendered
    // as the package's identity record.
    let identity = crate::package::PackageIdentity {
        plan: None,
        phase: Phase::Discovery,
        goal_id: id(20),
        attempt_id: id(42),
        workflow_id: id(31),
        goal_revision: 2,
        workflow_version: 1,
        candidate_base_digest: None,
        candidate_generation_id: None,
    };
    let plain_manifest = ContextManifest {
        schema_version: 1,
        capability_grant_digest: discovery_grant,
        response_contract_digest: discovery_contract,
        attempt_id: id(42),
        workflow_id: id(31),
        workflow_version: 1,
        generation_id: None,
        candidate_digest: None,
        plan: None,
        feedback_digest: None,
        phase: Phase::Discovery,
        entries: vec![
            ManifestEntry {
                kind: s("identity"),
                source_ref: format!("workflow/{}", id(31)),
                source_revision: 1,
                source_digest: None,
                authority_class: AuthorityClass::RuntimeDecision,
                rendered_digest: Digest::of(DigestKind::Rendered, &crate::codec::encode(&identity)),
            },
            goal_entry,
        ],
        omission_decisions: vec![],
        ..manifest.clone()
    };
    let payload = WorkerPayload {
        kind: WorkerEventKind::Progress,
        observed_at_ms: 1_700_000_000_500,
        text: s("ran the tests"),
        items: vec![s("cargo test")],
    };
    let evidence = EvidenceRecorded {
        evidence_id: id(70),
        workflow_id: id(30),
        generation_id: id(50),
        candidate_digest: dg("frozen 50"),
        obligation_id: id(64),
        check_spec_id: id(65),
        check_spec_digest: dg("check spec"),
        result: CheckResult::Fail,
        eligibility_version: 1,
        eligibility_state: Eligibility::Eligible,
        detail: s("1 test failed"),
    };
    let input_manifest = AcceptanceInputManifest {
        goal_id: id(20),
        goal_revision: 2,
        workflow_version: 5,
        policy,
        profile: None,
        plan: None,
        evidence: vec![EvidenceRef { evidence_id: id(70), record_digest: evidence.record_digest() }],
    };
    let mut decision = AcceptanceDecided {
        decision_id: id(85),
        workflow_id: id(30),
        generation_id: id(50),
        candidate_digest: dg("frozen 50"),
        verdict: Verdict::RejectRepairable,
        input_manifest_digest: input_manifest.digest(),
        evidence_set_digest: crate::record_digests::evidence_set_digest(&input_manifest.evidence),
        input_manifest,
        decision_digest: Digest::ZERO,
        reasons: vec![s("check 65 failed")],
    };
    decision.decision_digest = decision.computed_digest();
    let bound_decision = decision.clone();
    let mut repair = RepairRecorded {
        repair_id: id(90),
        workflow_id: id(30),
        decision_id: id(85),
        decision_digest: decision.decision_digest,
        input_manifest_digest: decision.input_manifest_digest,
        evidence_set_digest: decision.evidence_set_digest,
        parent_generation_id: id(50),
        parent_candidate_digest: dg("frozen 50"),
        child_generation_id: id(51),
        constraints_to_preserve: vec![s("public API unchanged")],
        repair_digest: Digest::ZERO,
    };
    repair.repair_digest = repair.computed_digest();
    let mut samples = vec![
        (
            "ledger_initialized",
            Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: s("sample") }),
        ),
        (
            "policy_bundle_installed",
            Event::PolicyBundleInstalled(PolicyBundleInstalled {
                policy_id: id(10),
                digest: policy.digest,
                bundle,
            }),
        ),
        (
            "execution_profile_installed",
            Event::ExecutionProfileInstalled(ExecutionProfileInstalled {
                profile_id: id(11),
                digest: profile.digest,
                profile: execution_profile,
            }),
        ),
        ("goal_created", Event::GoalCreated(GoalCreated { goal_id: id(20), content: content.clone() })),
        ("goal_revised", Event::GoalRevised(GoalRevised { goal_id: id(20), revision: 2, content })),
        (
            "workflow_started_plain",
            Event::WorkflowStarted(WorkflowStarted {
                workflow_id: id(31),
                goal_id: id(20),
                goal_revision: 2,
                policy,
                profile,
                plan: None,
            }),
        ),
        (
            "workflow_started_protected",
            Event::WorkflowStarted(WorkflowStarted {
                workflow_id: id(30),
                goal_id: id(20),
                goal_revision: 2,
                policy,
                profile,
                plan: Some(plan),
            }),
        ),
        (
            "phase_advanced",
            Event::PhaseAdvanced(PhaseAdvanced { workflow_id: id(30), phase: Phase::Plan, version: 2 }),
        ),
        (
            "fact_proposed",
            Event::FactProposed(FactProposed {
                fact_id: id(60),
                goal_id: id(20),
                revision: 1,
                statement: s("the parser is in src/parser/mod.rs"),
                provenance: s("worker event 01"),
            }),
        ),
        (
            "fact_confirmed",
            Event::FactConfirmed(FactConfirmed {
                fact_id: id(60),
                revision: 1,
                confirmed_by: s("human:alice"),
            }),
        ),
        (
            "fact_invalidated",
            Event::FactInvalidated(FactInvalidated {
                fact_id: id(60),
                revision: 1,
                reason: s("file moved"),
                invalidated_by: None,
            }),
        ),
        (
            "human_decision_recorded",
            Event::HumanDecisionRecorded(HumanDecisionRecorded {
                decision_id: id(61),
                goal_id: id(20),
                question: s("keep the old error type?"),
                answer: s("yes"),
                decided_by: s("human:alice"),
                supersedes: None,
            }),
        ),
        (
            "project_source_recorded",
            Event::ProjectSourceRecorded(ProjectSourceRecorded {
                source_id: id(62),
                goal_id: id(20),
                path: s("src/parser/mod.rs"),
                revision: s("9f1c2e0"),
                digest: Digest::of(DigestKind::Source, b"fn parse() {}\n"),
                content: s("fn parse() {}\n"),
            }),
        ),
        (
            "scenario_recorded",
            Event::ScenarioRecorded(ScenarioRecorded {
                scenario_id: id(63),
                goal_id: id(20),
                title: s("trailing byte"),
                description: s("a document with one trailing byte is refused"),
            }),
        ),
        (
            "obligation_recorded",
            Event::ObligationRecorded(ObligationRecorded {
                obligation_id: id(64),
                goal_id: id(20),
                description: s("the trailing byte test passes"),
                check_spec_id: id(65),
                check_spec_digest: dg("check spec"),
            }),
        ),
        (
            "blocker_raised",
            Event::BlockerRaised(BlockerRaised {
                blocker_id: id(66),
                workflow_id: id(30),
                description: s("CI is red"),
            }),
        ),
        (
            "blocker_resolved",
            Event::BlockerResolved(BlockerResolved { blocker_id: id(66), resolution: s("CI fixed") }),
        ),
        (
            "generation_opened_first",
            Event::GenerationOpened(GenerationOpened {
                generation_id: id(50),
                workflow_id: id(30),
                sequence: 1,
                base_digest: dg("base"),
                parent: None,
                repair_id: None,
            }),
        ),
        (
            "generation_opened_repair",
            Event::GenerationOpened(GenerationOpened {
                generation_id: id(51),
                workflow_id: id(30),
                sequence: 2,
                base_digest: dg("frozen 50"),
                parent: Some(id(50)),
                repair_id: Some(id(90)),
            }),
        ),
        (
            "generation_frozen",
            Event::GenerationFrozen(GenerationFrozen {
                generation_id: id(50),
                candidate_digest: dg("frozen 50"),
                change_set_digest: dg("change set 50"),
            }),
        ),
        (
            "attempt_started_implement",
            Event::AttemptStarted(Box::new(AttemptStarted {
                attempt_id: id(40),
                workflow_id: id(30),
                workflow_version: 3,
                phase: Phase::Implement,
                worker_session_id: id(41),
                thread: ThreadChoice::Fresh,
                generation_id: Some(id(50)),
                manifest_digest,
                manifest,
                selection_receipt: None,
                replaces: None,
            })),
        ),
        (
            "attempt_started_discovery",
            Event::AttemptStarted(Box::new(AttemptStarted {
                attempt_id: id(42),
                workflow_id: id(31),
                workflow_version: 1,
                phase: Phase::Discovery,
                worker_session_id: id(43),
                thread: ThreadChoice::Fresh,
                generation_id: None,
                manifest_digest: Digest::of(DigestKind::Manifest, &crate::codec::encode(&plain_manifest)),
                manifest: plain_manifest.clone(),
                selection_receipt: None,
                replaces: None,
            })),
        ),
        (
            "dispatch_claimed",
            Event::DispatchClaimed(DispatchClaimed {
                attempt_id: id(40),
                workflow_version: 3,
                profile,
                manifest_digest,
                package_digest: dg("package"),
                plan: Some(plan),
                reported_inputs: None,
            }),
        ),
        (
            "attempt_finished",
            Event::AttemptFinished(AttemptFinished {
                attempt_id: id(40),
                result_kind: ResultKind::CompletionRequest,
                summary: s("done"),
            }),
        ),
        (
            "attempt_failed",
            Event::AttemptFailed(AttemptFailed { attempt_id: id(44), reason: s("worker crashed") }),
        ),
        (
            "attempt_cancelled",
            Event::AttemptCancelled(AttemptCancelled {
                attempt_id: id(45),
                workflow_version: 4,
                reason: s("goal revised"),
            }),
        ),
        (
            "worker_event_admitted",
            Event::WorkerEventAdmitted(WorkerEventAdmitted {
                attempt_id: id(40),
                worker_event_id: id(80),
                manifest_digest,
                payload_digest: Digest::of(DigestKind::WorkerPayload, &crate::codec::encode(&payload)),
                payload,
            }),
        ),
        (
            "worker_delivery_ignored",
            Event::WorkerDeliveryIgnored(WorkerDeliveryIgnored {
                attempt_id: id(44),
                worker_event_id: id(81),
                manifest_digest: dg("old manifest"),
                payload_digest: dg("payload 81"),
                reason: IgnoredReason::AttemptEnded,
            }),
        ),
        ("evidence_recorded", Event::EvidenceRecorded(evidence)),
        ("acceptance_decided", Event::AcceptanceDecided(Box::new(decision))),
        ("repair_recorded", Event::RepairRecorded(repair)),
        // Catalog additions of issue #13, appended so every earlier vector keeps its bytes.
        (
            "worker_delivery_ignored_goal_revised",
            Event::WorkerDeliveryIgnored(WorkerDeliveryIgnored {
                attempt_id: id(45),
                worker_event_id: id(82),
                manifest_digest: dg("manifest 45"),
                payload_digest: dg("payload 82"),
                reason: IgnoredReason::GoalRevised,
            }),
        ),
        (
            "workflow_cancelled",
            Event::WorkflowCancelled(WorkflowCancelled {
                reason: s("the goal was withdrawn"),
                workflow_id: id(30),
                workflow_version: 3,
            }),
        ),
        ("source_registry_recorded", Event::SourceRegistryRecorded(Box::new(registry_sample()))),
        (
            "profile_revision_recorded",
            Event::ProfileRevisionRecorded(profile::ProfileRevisionRecorded {
                action: profile::RevisionAction::Set,
                revision: 1,
                selection: profile::ProfileSelection {
                    mode: profile::SelectionMode::Manual,
                    target: profile::Target::Codex,
                    exclude: vec![],
                    include: vec![s("skill:testing")],
                    profile: s("lean@1"),
                },
                state_root: s("/srv/profile-store"),
                plan_digest: dg("plan of lean@1 + skill:testing"),
                rollback_to: None,
                registry_digest: registry_sample().registry_digest,
                generation_digest: dg("generation of lean@1 + skill:testing"),
            }),
        ),
        (
            "profile_revision_rollback",
            Event::ProfileRevisionRecorded(profile::ProfileRevisionRecorded {
                action: profile::RevisionAction::Rollback,
                revision: 3,
                selection: profile::ProfileSelection {
                    mode: profile::SelectionMode::Auto,
                    target: profile::Target::Claude,
                    exclude: vec![s("skill:python-patterns")],
                    include: vec![],
                    profile: s("full@1"),
                },
                state_root: s("/srv/profile-store"),
                plan_digest: dg("plan of full@1"),
                rollback_to: Some(2),
                registry_digest: registry_sample().registry_digest,
                generation_digest: dg("generation of full@1"),
            }),
        ),
        // Issue #15: a selection, with real binding and selection digests.
        ("selection_recorded", Event::SelectionRecorded(Box::new(selection_sample()))),
        // Catalog 1 (additive), compiler/3: an Attempt start that carries a task selection.
        ("attempt_started_with_selection", {
            let receipt = selection_sample().receipt().digest();
            let manifest = ContextManifest {
                compiler_version: "closure-ledger-compiler/3".to_owned(),
                selection_receipt: Some(receipt),
                ..plain_manifest.clone()
            };
            // The discovery Attempt's manifest (its entries render attempt 42's identity),
            // recompiled by compiler/3 with the selection bound.
            Event::AttemptStarted(Box::new(AttemptStarted {
                attempt_id: id(42),
                workflow_id: id(31),
                workflow_version: 1,
                phase: Phase::Discovery,
                worker_session_id: id(45),
                thread: ThreadChoice::Fresh,
                generation_id: None,
                manifest_digest: Digest::of(DigestKind::Manifest, &crate::codec::encode(&manifest)),
                manifest,
                selection_receipt: Some(receipt),
                replaces: None,
            }))
        }),
        // Every other reason a delivery is recorded but not admitted, so each reason code
        // has frozen bytes (STREAM_ENDED is a catalog addition of outside review 16).
        ignored("worker_delivery_ignored_stale_attempt", 83, IgnoredReason::StaleAttempt),
        ignored("worker_delivery_ignored_manifest_mismatch", 84, IgnoredReason::ManifestMismatch),
        ignored(
            "worker_delivery_ignored_workflow_version_changed",
            85,
            IgnoredReason::WorkflowVersionChanged,
        ),
        ignored("worker_delivery_ignored_context_changed", 86, IgnoredReason::ContextChanged),
        ignored("worker_delivery_ignored_stream_ended", 87, IgnoredReason::StreamEnded),
        // Catalog 1 (additive, 2026-12-05): a decision whose input manifest binds the
        // workflow's profile and plan pair (DESIGN §5), appended so earlier vectors keep
        // their bytes.
        ("acceptance_decided_binding_profile_and_plan", {
            let input_manifest = AcceptanceInputManifest {
                plan: Some(plan),
                profile: Some(profile),
                ..bound_decision.input_manifest.clone()
            };
            let mut d = AcceptanceDecided {
                decision_id: id(86),
                input_manifest_digest: input_manifest.digest(),
                input_manifest,
                ..bound_decision.clone()
            };
            d.decision_digest = d.computed_digest();
            Event::AcceptanceDecided(Box::new(d))
        }),
        // The optional `invalidatedBy` key (2026-12-05, fourteenth session), appended.
        (
            "fact_invalidated_by_a_human",
            Event::FactInvalidated(FactInvalidated {
                fact_id: id(61),
                revision: 1,
                reason: s("a human withdrew it"),
                invalidated_by: Some(s("human:alice")),
            }),
        ),
        // Retiring a scenario and an obligation after a goal revision (outside review 55),
        // appended.
        (
            "scenario_retired",
            Event::ScenarioRetired(ScenarioRetired {
                reason: s("revision 2 accepts it"),
                scenario_id: id(63),
            }),
        ),
        (
            "obligation_retired",
            Event::ObligationRetired(ObligationRetired {
                reason: s("revision 2 accepts it"),
                obligation_id: id(64),
            }),
        ),
        // A registry holding an executable resource (outside review 56), appended.
        ("source_registry_recorded_with_an_executable", {
            let mut r = registry_sample();
            if let Some(testing) = r.registry.sources.iter_mut().find(|s| s.id == "skill:testing") {
                let run = b"#!/bin/sh\nexit 0\n";
                testing.resources.push(profile::SourceResource {
                    path: s("scripts/run.sh"),
                    bytes: run.len() as u64,
                    digest: profile::SourceResource::digest_of(run),
                    content: Some(profile::Blob(run.to_vec())),
                    executable: true,
                });
                testing.content_digest = testing.computed_content_digest();
            }
            r.registry_digest = r.registry.digest();
            Event::SourceRegistryRecorded(Box::new(r))
        }),
        // A profile binding an App Server input closure and a claim reporting within it
        // (outside review 70; seed 000, "M2 App Server input closure"), appended.
        ("execution_profile_installed_with_an_input_closure", {
            let mut p = ExecutionProfile { name: s("bounded-m2-app-server"), ..execution_profile_sample() };
            p.input_closure = Some(input_closure_sample());
            Event::ExecutionProfileInstalled(ExecutionProfileInstalled {
                profile_id: id(13),
                digest: p.digest(),
                profile: p,
            })
        }),
        ("dispatch_claimed_with_reported_inputs", {
            let mut p = ExecutionProfile { name: s("bounded-m2-app-server"), ..execution_profile_sample() };
            p.input_closure = Some(input_closure_sample());
            let mut reported = input_closure_sample();
            reported.tools.clear();
            Event::DispatchClaimed(DispatchClaimed {
                attempt_id: id(40),
                workflow_version: 3,
                profile: Binding { id: id(13), digest: p.digest() },
                manifest_digest,
                package_digest: dg("package"),
                plan: None,
                reported_inputs: Some(reported),
            })
        }),
        // A decision that changes an answer by naming the one it replaces (outside review
        // 74), appended.
        (
            "human_decision_recorded_superseding",
            Event::HumanDecisionRecorded(HumanDecisionRecorded {
                decision_id: id(65),
                goal_id: id(20),
                question: s("keep the old error type?"),
                answer: s("no: replace it"),
                decided_by: s("human:alice"),
                supersedes: Some(id(61)),
            }),
        ),
    ];
    // A restart's replacement, naming the Attempt it replaces (outside review 74), appended:
    // the IMPLEMENT start's bytes with `replaces`.
    let replacement = samples.iter().find_map(|(name, e)| match e {
        Event::AttemptStarted(a) if *name == "attempt_started_implement" => {
            let mut a = a.clone();
            a.replaces = Some(id(39));
            Some(Event::AttemptStarted(a))
        }
        _ => None,
    });
    samples.extend(replacement.map(|e| ("attempt_started_replacing", e)));
    // A Runtime directive authorizing one manual compaction (outside review 84), appended.
    samples.push((
        "compaction_requested",
        Event::CompactionRequested(CompactionRequested { attempt_id: id(44), directive_id: id(66) }),
    ));
    // A project source withdrawn: its path left the project (outside review 100), appended.
    samples.push((
        "project_source_withdrawn",
        Event::ProjectSourceWithdrawn(ProjectSourceWithdrawn {
            reason: s("src/old_parser.rs was renamed to src/parser.rs"),
            source_id: id(23),
        }),
    ));
    // A registry snapshot that records the tree it was scanned from (outside review 114:
    // seed 003's source-drift check), appended.
    samples.push(("source_registry_recorded_with_its_root", {
        let mut r = registry_sample();
        r.source_root = Some(s("/srv/ecc/context-sources"));
        Event::SourceRegistryRecorded(Box::new(r))
    }));
    // A Human Decision withdrawn by a human (outside review 135), appended.
    samples.push((
        "human_decision_withdrawn",
        Event::HumanDecisionWithdrawn(HumanDecisionWithdrawn {
            reason: s("recorded on the wrong goal"),
            decision_id: id(31),
            withdrawn_by: s("human:maintainer"),
        }),
    ));
    samples
}

/// The sample Execution Profile (as `execution_profile_installed` records it).
fn execution_profile_sample() -> ExecutionProfile {
    ExecutionProfile {
        name: s("bounded-m2"),
        protected: true,
        compaction: CompactionMode::Manual,
        repair_thread: ThreadChoice::Fresh,
        attempt_thread: ThreadChoice::Resume,
        input_closure: None,
    }
}

/// An App Server input closure: one source-bound `AGENTS.md`, two tools, the permission
/// profile, configuration and managed requirements by digest.
fn input_closure_sample() -> InputClosure {
    InputClosure {
        instruction_sources: vec![BoundInput { name: s("AGENTS.md"), digest: dg("agents") }],
        tools: vec![
            BoundInput { name: s("apply_patch"), digest: dg("tool apply_patch") },
            BoundInput { name: s("shell"), digest: dg("tool shell") },
        ],
        permission_digest: dg("permission profile"),
        config_digest: dg("config"),
        managed_requirements_digest: Some(dg("managed requirements")),
    }
}

/// A sample `WorkerDeliveryIgnored` of attempt 44 for worker event `event`.
fn ignored(name: &'static str, event: u128, reason: IgnoredReason) -> (&'static str, Event) {
    let payload = format!("payload {event}");
    (
        name,
        Event::WorkerDeliveryIgnored(WorkerDeliveryIgnored {
            attempt_id: id(44),
            worker_event_id: id(event),
            manifest_digest: dg("manifest 44"),
            payload_digest: dg(&payload),
            reason,
        }),
    )
}

/// An explicit selection that loaded one `SKILL.md`; binding and selection digests real.
fn selection_sample() -> crate::events::selection::SelectionRecorded {
    use crate::events::selection::{self as sel, SelectionDecision};
    let plan_digest = dg("plan of lean@1 + skill:testing");
    let query_digest = Some(Digest::of(DigestKind::TaskQuery, b"write the tests"));
    let binding = sel::SelectionBinding {
        phase: "implement",
        task_id: "feature-1",
        session_id: "session-1",
        no_workflow: false,
        plan_digest,
        query_digest,
        task_revision: 1,
        routing_policy: "closure-ledger-routing/1",
        trigger_digest: dg("triggers"),
    };
    let binding_digest = binding.digest();
    let selected = vec![s("skill:testing")];
    let selection_digest =
        sel::selection_digest(binding_digest, SelectionDecision::Selected, &[], &selected, &selected);
    let body = b"---\nname: testing\n---\n# Testing\n";
    sel::SelectionRecorded {
        load: true,
        phase: s("implement"),
        reason: s("explicit"),
        reused: false,
        task_id: s("feature-1"),
        decision: SelectionDecision::Selected,
        previous: None,
        proposal: None,
        resources: vec![sel::LoadedResource {
            id: s("skill:testing"),
            path: s("SKILL.md"),
            bytes: body.len() as u64,
            digest: profile::SourceResource::digest_of(body),
        }],
        session_id: s("session-1"),
        candidates: vec![],
        no_workflow: false,
        plan_digest,
        explicit_ids: selected.clone(),
        proposed_ids: vec![],
        query_digest,
        selected_ids: selected,
        task_revision: 1,
        binding_digest,
        routing_policy: s("closure-ledger-routing/1"),
        trigger_digest: dg("triggers"),
        registry_digest: registry_sample().registry_digest,
        profile_revision: 1,
        selection_digest,
    }
}

/// A two-source registry: one resource stored, one recorded by digest only; real digests.
fn registry_sample() -> profile::SourceRegistryRecorded {
    let skill_md = b"---\nname: testing\n---\n# Testing\n".to_vec();
    let resource = |path: &str, bytes: &[u8], stored: bool| profile::SourceResource {
        path: s(path),
        bytes: bytes.len() as u64,
        digest: profile::SourceResource::digest_of(bytes),
        content: stored.then(|| profile::Blob(bytes.to_vec())),
        executable: false,
    };
    let source = |id: &str, name: &str, deps: Vec<String>, resources: Vec<profile::SourceResource>| {
        let mut src = profile::RegistrySource {
            id: s(id),
            name: s(name),
            resources,
            manual_only: false,
            description: format!("{name} patterns"),
            dependencies: deps,
            authority_keys: vec![],
            content_digest: Digest::ZERO,
            dynamic_content: false,
            required_resources: vec![],
        };
        src.content_digest = src.computed_content_digest();
        src
    };
    let mut testing = source(
        "skill:testing",
        "testing",
        vec![s("skill:python-patterns")],
        vec![resource("SKILL.md", &skill_md, true), resource("references/big.bin", b"not stored", false)],
    );
    testing.required_resources = vec![s("references/big.bin")];
    testing.content_digest = testing.computed_content_digest();
    let registry = profile::Registry {
        scanner: s("closure-ledger-scan/1"),
        sources: vec![
            source(
                "skill:python-patterns",
                "python-patterns",
                vec![],
                vec![resource("SKILL.md", b"---\n---\n", true)],
            ),
            testing,
        ],
        profiles: vec![
            profile::ProfileDefinition {
                id: s("full@1"),
                eager: vec![],
                eager_all: true,
                required: vec![],
                budget_mode: profile::BudgetMode::ReportOnly,
                description: s("everything"),
                budget_tokens: 8000,
            },
            profile::ProfileDefinition {
                id: s("lean@1"),
                eager: vec![s("skill:python-patterns")],
                eager_all: false,
                required: vec![s("skill:python-patterns")],
                budget_mode: profile::BudgetMode::Blocking,
                description: s("small base"),
                budget_tokens: 2000,
            },
        ],
    };
    profile::SourceRegistryRecorded { registry_digest: registry.digest(), registry, source_root: None }
}

/// The samples sealed as one valid chain from genesis: `(name, sealed entry)`.
pub fn chain() -> Vec<(&'static str, SealedEntry)> {
    let mut prev = Digest::ZERO;
    let mut out = Vec::new();
    for (seq, (name, event)) in (0u64..).zip(events()) {
        let sealed = SealedEntry::seal(Entry {
            v: FORMAT_VERSION,
            seq,
            prev,
            event,
            ledger: LEDGER,
            time_ms: 1_700_000_000_000 + seq,
        });
        prev = sealed.hash;
        out.push((name, sealed));
    }
    out
}
