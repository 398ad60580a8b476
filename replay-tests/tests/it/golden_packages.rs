//! Golden packages: each released compiler's Context Packages (exact bytes) and Manifest
//! digests are frozen, so any change in a compiler's output fails here.
//!
//! - `golden/lifecycle-packages.json`: compiler/1 on the reference lifecycle (package
//!   bytes, package and manifest digests). Frozen with compiler/1: never re-blessed.
//! - `golden/lifecycle-packages-v2.json`: compiler/2 on the reference lifecycle and on a
//!   "names" Workflow whose manifest records a phase exclusion and a budget omission;
//!   package and manifest bytes and digests and the Markdown rendering. Frozen with
//!   compiler/2 (compiler/3 made it an older version): never re-blessed.
//! - `golden/lifecycle-packages-v3.json`: compiler/3 on the same cases plus an Attempt
//!   carrying a task selection (issue #15: `selectedSkills`, `selectionReceipt`,
//!   PROMPT_ADVISORY entries). Frozen with compiler/3 (compiler/4 made it an older
//!   version): never re-blessed.
//! - `golden/lifecycle-packages-v4.json`: compiler/4 on the same cases plus an Attempt whose
//!   goal recorded one project path twice (the earlier record is an omission,
//!   `freshness.sourceSuperseded`). Frozen with compiler/4 (compiler/5 made it an older
//!   version): never re-blessed.
//! - `golden/lifecycle-packages-v5.json`: compiler/5 on the same cases (its Markdown keeps
//!   ledger text visible to a viewer, with backslashes where needed). Frozen with
//!   compiler/5 (compiler/6 made it an older version): never re-blessed.
//! - `golden/lifecycle-packages-v6.json`: compiler/6 on the same cases (its Markdown shows
//!   each repair item's digests). Frozen with compiler/6 (compiler/7 made it an older
//!   version): never re-blessed.
//! - `golden/lifecycle-packages-v7.json`: compiler/7 on the same cases (its Markdown escapes
//!   every `$`). Frozen with compiler/7 (compiler/8 made it an older version): never
//!   re-blessed.
//! - `golden/lifecycle-packages-v8.json`: compiler/8, the newest, on the same cases plus
//!   the labelled case (a confirmed Fact over its class budget; a decision, a scenario and
//!   a blocker whose texts imitate compiler/7's separators). The newest compiler's file: a
//!   change fails until `COMPILER_VERSION` is bumped and the goldens are re-blessed on
//!   purpose (`BLESS_GOLDEN=1 cargo test -p replay-tests --test it golden_packages`), which
//!   writes only this file.
//!
//! `golden/crosscheck.py` re-verifies every file independently of the Rust code (Python
//! `cbor2` + `blake3`, from docs/format.md): canonical bytes, every digest, every manifest
//! entry's rendered digest against the package, and the wire names in omission rules.

use std::path::PathBuf;

use closure_ledger::admission;
use closure_ledger::compiler::{COMPILER_VERSION, Compiled, Compiler, v1, v2, v3, v4, v5, v6, v7, v8};
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{GOAL, PROFILE, Script, lid, policy_bundle};
use closure_ledger::runtime::command::{
    ConfirmFact, InstallPolicy, ProposeFact, RaiseBlocker, RecordHumanDecision, RecordProjectSource,
    RecordScenario, StartAttempt, StartWorkflow,
};
use closure_ledger::runtime::{self, AttemptBinding, Command, State};
use closure_ledger::store::{MemStore, Store};
use ledger_schema::events::AttemptStarted;
use ledger_schema::manifest::ContextManifest;
use ledger_schema::types::{InputClass, Phase, ThreadChoice};
use ledger_schema::{Event, codec};
use replay_tests::*;
use serde_json::json;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden").join(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_golden(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(golden_path(name)).unwrap()).unwrap()
}

/// The "names" Workflow's policy: DISCOVERY admits BLOCKERS_DECISIONS (8 bytes) but not
/// PROJECT_MATERIAL, so its manifest records `phase.DISCOVERY.excludes.PROJECT_MATERIAL`
/// and `budget.BLOCKERS_DECISIONS` — names whose wire and `Debug` forms differ.
const NAMES_POLICY: u128 = 0x15;
const NAMES_WORKFLOW: u128 = 0x32;

fn names_policy() -> ledger_schema::events::PolicyBundle {
    let mut bundle = policy_bundle();
    for p in &mut bundle.phases {
        if p.phase == Phase::Discovery {
            p.optional = vec![InputClass::BlockersDecisions];
        }
    }
    for b in &mut bundle.budgets {
        if b.class == InputClass::BlockersDecisions {
            b.max_bytes = 8;
        }
    }
    bundle
}

/// One Attempt start of the golden ledger: the state before it, its event, its binding.
struct Case {
    state: State,
    attempt: AttemptStarted,
    binding: AttemptBinding,
}

/// The golden ledger, written through the live path (so by the newest compiler): the
/// reference lifecycle (four Attempts), then the "names" Workflow's DISCOVERY Attempt.
fn golden_ledger() -> Ledger<MemStore> {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "golden", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.lifecycle().unwrap();
    script
        .run(Command::InstallPolicy(InstallPolicy { policy_id: lid(NAMES_POLICY), bundle: names_policy() }))
        .unwrap();
    script
        .run(Command::StartWorkflow(StartWorkflow {
            workflow_id: lid(NAMES_WORKFLOW),
            goal_id: lid(GOAL),
            goal_revision: 1,
            policy_id: lid(NAMES_POLICY),
            profile_id: lid(PROFILE),
            plan: None,
        }))
        .unwrap();
    script
        .run(Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0x45),
            workflow_id: lid(NAMES_WORKFLOW),
            description: "the names workflow waits for a reviewer".to_owned(),
        }))
        .unwrap();
    script
        .run(Command::StartAttempt(StartAttempt {
            attempt_id: lid(0x6a),
            workflow_id: lid(NAMES_WORKFLOW),
            worker_session_id: lid(0x6b),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        }))
        .unwrap();

    ledger
}

/// Every Attempt start of the golden ledger.
fn cases() -> Vec<Case> {
    let cases = cases_of(&golden_ledger());
    assert_eq!(cases.len(), 5);
    cases
}

/// The golden cases over the golden ledger as the builds before 2026-12-05 wrote it: its
/// decisions without the profile binding (and the repair record over their digests), folded
/// by the runtime's rules. The frozen goldens of compilers 1–3 were derived over those
/// decisions — the repair child's package carries the decision's digests — so they are
/// compared over these states; the newest compiler's golden is over the ledger as written.
fn legacy_cases() -> Vec<Case> {
    use std::collections::BTreeMap;
    let ledger = golden_ledger();
    let mut state = State::default();
    let mut cases = Vec::new();
    let mut legacy: BTreeMap<ledger_schema::Id, (ledger_schema::Digest, ledger_schema::Digest)> =
        BTreeMap::new();
    for sealed in ledger.store().read_range(0, u64::MAX).unwrap() {
        let mut entry = sealed.entry.clone();
        replay_tests::to_legacy_decision(&mut entry.event, |_| true, &mut legacy);
        if let Event::AttemptStarted(a) = &entry.event {
            cases.push(case_at(&state, a));
        }
        runtime::apply(&mut state, &entry).unwrap();
    }
    assert_eq!(cases.len(), 5);
    cases
}

/// The case of Attempt start `a` over `state`, the state before it.
fn case_at(state: &State, a: &AttemptStarted) -> Case {
    let start = StartAttempt {
        attempt_id: a.attempt_id,
        workflow_id: a.workflow_id,
        worker_session_id: a.worker_session_id,
        thread: a.thread,
        selection_receipt: None,
    };
    let binding = runtime::attempt_binding(state, &start).unwrap();
    Case { state: state.clone(), attempt: a.clone(), binding }
}

/// Every Attempt start of `ledger`, with the state before it and its binding.
fn cases_of(ledger: &Ledger<MemStore>) -> Vec<Case> {
    let mut state = State::default();
    let mut cases = Vec::new();
    for sealed in ledger.store().read_range(0, u64::MAX).unwrap() {
        if let Event::AttemptStarted(a) = &sealed.entry.event {
            cases.push(case_at(&state, a));
        }
        admission::apply(&mut state, &sealed.entry).unwrap();
    }
    cases
}

/// The project source the superseded case records over the reference setup's 0x43.
const NEWER_SOURCE: u128 = 0x44;

/// The superseded-source case: the reference setup (which records `src/config/parser.rs`
/// at 9f1c2e0 as source 0x43), a second record of that path at another revision, then a
/// DISCOVERY Attempt.
fn superseded_case() -> Case {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "golden", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.setup().unwrap();
    script
        .run(Command::RecordProjectSource(RecordProjectSource {
            source_id: lid(NEWER_SOURCE),
            goal_id: lid(GOAL),
            path: "src/config/parser.rs".to_owned(),
            revision: "a71d3b5".to_owned(),
            content: "pub fn parse(bytes: &[u8]) -> Result<Config, Error> {\n    let (doc, rest) = document(bytes)?;\n    trailing(rest)?;\n    Ok(doc)\n}\n".to_owned(),
        }))
        .unwrap();
    script.start(0x60, 0x61).unwrap();
    let mut cases = cases_of(&ledger);
    assert_eq!(cases.len(), 1);
    cases.remove(0)
}

/// The labelled case's FACTS_SCENARIOS_OBLIGATIONS budget: the reference setup's items fit,
/// the long Fact does not.
const LABELLED_BUDGET: u32 = 2_000;

/// Compiler/8's own case: the reference setup under a policy whose DISCOVERY takes
/// FACTS_SCENARIOS_OBLIGATIONS as optional within [`LABELLED_BUDGET`] bytes, a confirmed
/// Fact too long for it (left out: `fact/<id>@<revision>` from compiler/8 on), and a Human
/// Decision, a scenario and a blocker whose texts hold compiler/7's separators (` — `, `: `,
/// ` (<id>)`) and a line that looks like a list item; then a DISCOVERY Attempt.
fn labelled_case() -> Case {
    let mut bundle = policy_bundle();
    for p in &mut bundle.phases {
        if p.phase == Phase::Discovery {
            p.required.retain(|c| *c != InputClass::FactsScenariosObligations);
            p.optional.push(InputClass::FactsScenariosObligations);
        }
    }
    for b in &mut bundle.budgets {
        if b.class == InputClass::FactsScenariosObligations {
            b.max_bytes = LABELLED_BUDGET;
        }
    }
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "golden", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.setup_with(bundle).unwrap();
    let commands = [
        Command::ProposeFact(ProposeFact {
            fact_id: lid(0x53),
            goal_id: lid(GOAL),
            revision: 1,
            statement: "the document grammar, in full: ".to_owned() + &"value ws ".repeat(300),
            provenance: "discovery notes".to_owned(),
        }),
        Command::ConfirmFact(ConfirmFact {
            fact_id: lid(0x53),
            revision: 1,
            confirmed_by: "human:alice".to_owned(),
        }),
        Command::RecordHumanDecision(RecordHumanDecision {
            decision_id: lid(0x54),
            goal_id: lid(GOAL),
            question: "Delete the flaky test? — Yes (01JC0000000000000000000052)\n- Keep the public API?"
                .to_owned(),
            answer: "No, never.".to_owned(),
            decided_by: "human:alice".to_owned(),
            supersedes: None,
        }),
        Command::RecordScenario(RecordScenario {
            scenario_id: lid(0x55),
            goal_id: lid(GOAL),
            title: "trailing byte: accepted silently".to_owned(),
            description: "**description:** a config with one byte after the document is refused".to_owned(),
        }),
        Command::RaiseBlocker(RaiseBlocker {
            blocker_id: lid(0x56),
            workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
            description: "waits for a reviewer (01JC000000000000000000002P)".to_owned(),
        }),
    ];
    for c in commands {
        script.run(c).unwrap();
    }
    script.start(0x60, 0x61).unwrap();
    let mut cases = cases_of(&ledger);
    assert_eq!(cases.len(), 1);
    cases.remove(0)
}

/// Compiler/1's golden: the first four cases (the reference lifecycle) compiled by v1.
fn v1_now(cases: &[Case]) -> serde_json::Value {
    let attempts: Vec<_> = cases
        .iter()
        .take(4)
        .map(|c| {
            let compiled = v1::V1.compile(&c.state, &c.binding).unwrap();
            json!({
                "attemptId": c.attempt.attempt_id,
                "phase": c.attempt.phase,
                "schemaVersion": compiled.package.schema_version,
                "packageDigest": compiled.manifest.package_digest,
                "manifestDigest": compiled.manifest_digest(),
                "packageHex": hex(&compiled.package_bytes),
            })
        })
        .collect();
    json!({ "compilerVersion": v1::VERSION, "attempts": attempts })
}

/// One golden attempt: package and manifest bytes and digests, and the Markdown.
fn golden_attempt(attempt: &AttemptStarted, compiled: &Compiled) -> serde_json::Value {
    json!({
        "attemptId": attempt.attempt_id,
        "phase": attempt.phase,
        "schemaVersion": compiled.package.schema_version,
        "packageDigest": compiled.manifest.package_digest,
        "manifestDigest": compiled.manifest_digest(),
        "packageHex": hex(&compiled.package_bytes),
        "manifestHex": hex(&codec::encode(&compiled.manifest)),
        "markdown": compiled.markdown(),
    })
}

/// Compiler/2's golden: every case compiled by compiler/2 (no case names a selection).
fn v2_now(cases: &[Case]) -> serde_json::Value {
    let attempts: Vec<_> = cases
        .iter()
        .map(|c| golden_attempt(&c.attempt, &v2::V2.compile(&c.state, &c.binding).unwrap()))
        .collect();
    json!({ "compilerVersion": v2::VERSION, "attempts": attempts })
}

/// Compiler/3's golden: every case and the Attempt that carries a task selection, compiled
/// by compiler/3.
fn v3_now(cases: &[Case]) -> serde_json::Value {
    let mut attempts: Vec<_> = cases
        .iter()
        .map(|c| golden_attempt(&c.attempt, &v3::V3.compile(&c.state, &c.binding).unwrap()))
        .collect();
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let compiled = v3::V3.compile(&state, &binding).unwrap();
    let mut one = golden_attempt(&attempt, &compiled);
    one["selectionReceipt"] = json!(compiled.manifest.selection_receipt);
    attempts.push(one);
    json!({ "compilerVersion": v3::VERSION, "attempts": attempts })
}

/// Compiler/4's golden: every case, the Attempt that carries a task selection, then the
/// superseded-source case, compiled by compiler/4.
fn v4_now(cases: &[Case]) -> serde_json::Value {
    now_with(&v4::V4, cases)
}

/// A compiler's golden over every case, the Attempt that carries a task selection, then the
/// superseded-source case (the cases of compilers 4 and later), each compiled by `compiler`.
fn now_with(compiler: &dyn Compiler, cases: &[Case]) -> serde_json::Value {
    let mut attempts: Vec<_> = cases
        .iter()
        .map(|c| golden_attempt(&c.attempt, &compiler.compile(&c.state, &c.binding).unwrap()))
        .collect();
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let compiled = compiler.compile(&state, &binding).unwrap();
    let mut one = golden_attempt(&attempt, &compiled);
    one["selectionReceipt"] = json!(compiled.manifest.selection_receipt);
    attempts.push(one);
    let c = superseded_case();
    attempts.push(golden_attempt(&c.attempt, &compiler.compile(&c.state, &c.binding).unwrap()));
    json!({ "compilerVersion": compiler.version(), "attempts": attempts })
}

/// The newest compiler's golden: every case as recorded (re-derived by admission, which
/// the recorded manifest must match), the Attempt that carries a task selection, then the
/// superseded-source case.
fn newest_now(cases: &[Case]) -> serde_json::Value {
    let recorded = |c: &AttemptStarted, state: &State| {
        let compiled = admission::recompile(state, c).unwrap();
        assert_eq!(compiled.manifest, c.manifest, "the recorded manifest is the derived one");
        compiled
    };
    let mut attempts: Vec<_> =
        cases.iter().map(|c| golden_attempt(&c.attempt, &recorded(&c.attempt, &c.state))).collect();
    let (attempt, state, _) = super::selection_attempt::golden_selection_case();
    let compiled = recorded(&attempt, &state);
    let mut one = golden_attempt(&attempt, &compiled);
    one["selectionReceipt"] = json!(compiled.manifest.selection_receipt);
    attempts.push(one);
    let c = superseded_case();
    attempts.push(golden_attempt(&c.attempt, &recorded(&c.attempt, &c.state)));
    let c = labelled_case();
    attempts.push(golden_attempt(&c.attempt, &recorded(&c.attempt, &c.state)));
    json!({ "compilerVersion": COMPILER_VERSION, "attempts": attempts })
}

/// Compiler/1's output for the reference lifecycle is byte for byte the frozen one, also
/// now that compiler/2 writes the ledger it is compiled from.
#[test]
fn v1_lifecycle_packages_are_frozen() {
    let now = v1_now(&legacy_cases());
    let frozen = read_golden("lifecycle-packages.json");
    assert_eq!(frozen["compilerVersion"], v1::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 4);
    assert!(frozen == now, "compiler/1's output changed: compiler/1 is frozen, never re-blessed");
}

/// Compiler/2's output for the golden ledger is byte for byte the frozen one, also now
/// that compiler/3 writes the ledger it is compiled from.
#[test]
fn v2_packages_are_frozen() {
    let now = v2_now(&legacy_cases());
    let frozen = read_golden("lifecycle-packages-v2.json");
    assert_eq!(frozen["compilerVersion"], v2::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 5);
    assert!(frozen == now, "compiler/2's output changed: compiler/2 is frozen, never re-blessed");
}

/// Compiler/3 without a selection is compiler/2 but for `compilerVersion`: the same
/// package bytes on every golden case, and manifests equal once the version is replaced.
#[test]
fn v3_without_a_selection_differs_from_v2_only_in_its_version() {
    for c in cases() {
        let two = v2::V2.compile(&c.state, &c.binding).unwrap();
        let three = v3::V3.compile(&c.state, &c.binding).unwrap();
        assert_eq!(two.package_bytes, three.package_bytes);
        let mut renamed = two.manifest.clone();
        renamed.compiler_version = v3::VERSION.to_owned();
        assert_eq!(renamed, three.manifest);
        assert_eq!(two.markdown(), three.markdown());
    }
}

/// Compiler/3's output for the golden cases is byte for byte the frozen one, also now that
/// compiler/4 writes the ledgers they are compiled from.
#[test]
fn v3_packages_are_frozen() {
    let now = v3_now(&legacy_cases());
    let frozen = read_golden("lifecycle-packages-v3.json");
    assert_eq!(frozen["compilerVersion"], v3::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 6);
    assert!(frozen == now, "compiler/3's output changed: compiler/3 is frozen, never re-blessed");
}

/// Compiler/4 where no project path is recorded twice is compiler/3 but for
/// `compilerVersion` (every golden case and the selection case); where one is, it delivers
/// the path once, as recorded last, and records the earlier record as an omission —
/// compiler/3 delivered both.
#[test]
fn v4_differs_from_v3_only_where_a_path_is_recorded_twice() {
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let mut same = cases();
    same.push(Case { state, attempt, binding });
    for c in same {
        let three = v3::V3.compile(&c.state, &c.binding).unwrap();
        let four = v4::V4.compile(&c.state, &c.binding).unwrap();
        assert_eq!(three.package_bytes, four.package_bytes);
        let mut renamed = three.manifest.clone();
        renamed.compiler_version = v4::VERSION.to_owned();
        assert_eq!(renamed, four.manifest);
        assert_eq!(three.markdown(), four.markdown());
    }
    let c = superseded_case();
    let three = v3::V3.compile(&c.state, &c.binding).unwrap();
    let four = v4::V4.compile(&c.state, &c.binding).unwrap();
    let revisions = |p: &ledger_schema::package::ContextPackage| {
        p.relevant_code.iter().map(|x| (x.path.clone(), x.revision.clone())).collect::<Vec<_>>()
    };
    let path = "src/config/parser.rs".to_owned();
    assert_eq!(
        revisions(&three.package),
        [(path.clone(), "9f1c2e0".to_owned()), (path.clone(), "a71d3b5".to_owned())]
    );
    assert_eq!(revisions(&four.package), [(path, "a71d3b5".to_owned())]);
    let superseded: Vec<_> =
        four.manifest.omission_decisions.iter().filter(|o| o.rule == "freshness.sourceSuperseded").collect();
    assert_eq!(superseded.len(), 1, "{:?}", four.manifest.omission_decisions);
    assert_eq!(superseded[0].source_ref, format!("source/{}", lid(0x43)));
    assert!(
        superseded[0].reason.ends_with(&format!("source/{}", lid(NEWER_SOURCE))),
        "{}",
        superseded[0].reason
    );
    assert!(!four.manifest.entries.iter().any(|e| e.source_ref == superseded[0].source_ref));
    let md = four.markdown();
    assert!(md.contains("a71d3b5") && !md.contains("9f1c2e0"), "{md}");
}

/// Compiler/4's output for the golden cases is byte for byte the frozen one, also now that
/// compiler/5 writes the ledgers they are compiled from.
#[test]
fn v4_packages_are_frozen() {
    let now = v4_now(&cases());
    let frozen = read_golden("lifecycle-packages-v4.json");
    assert_eq!(frozen["compilerVersion"], v4::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 7);
    assert!(frozen == now, "compiler/4's output changed: compiler/4 is frozen, never re-blessed");
}

/// Compiler/5 is compiler/4 but for `compilerVersion` in every package and manifest; its
/// Markdown is compiler/4's with backslashes before what a Markdown viewer would hide or
/// reshape (outside reviews 113 F2, 118, 119; the end-to-end view is
/// `compiler::ledger_text_stays_visible_in_a_markdown_viewer`).
#[test]
fn v5_differs_from_v4_only_in_its_markdown_escapes() {
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let mut all = cases();
    all.push(Case { state, attempt, binding });
    all.push(superseded_case());
    for c in all {
        let four = v4::V4.compile(&c.state, &c.binding).unwrap();
        let five = v5::V5.compile(&c.state, &c.binding).unwrap();
        assert_eq!(four.package_bytes, five.package_bytes);
        let mut renamed = four.manifest.clone();
        renamed.compiler_version = v5::VERSION.to_owned();
        assert_eq!(renamed, five.manifest);
        // Its Markdown is compiler/4's with backslashes inserted (these cases' text holds
        // none of its own before those characters).
        let mut unescaped = String::new();
        let rendered = five.markdown();
        let mut chars = rendered.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' && chars.peek().is_some_and(|n| "`<*|~&[(_\\".contains(*n)) {
                continue;
            }
            unescaped.push(c);
        }
        assert_eq!(four.markdown(), unescaped);
    }
}

/// Compiler/5's output for the golden cases is byte for byte the frozen one, also now that
/// compiler/6 writes the ledgers they are compiled from.
#[test]
fn v5_packages_are_frozen() {
    let now = now_with(&v5::V5, &cases());
    let frozen = read_golden("lifecycle-packages-v5.json");
    assert_eq!(frozen["compilerVersion"], v5::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 7);
    assert!(frozen == now, "compiler/5's output changed: compiler/5 is frozen, never re-blessed");
}

/// Compiler/6 is compiler/5 but for `compilerVersion` in every package and manifest; its
/// Markdown is compiler/5's with the digests the package cites for each repair item shown
/// (outside reviews 128 F5, 146 F6): every line that differs is a repair item's, and holds
/// the digests the package cites for it.
#[test]
fn v6_differs_from_v5_only_in_the_digests_its_markdown_cites() {
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let mut all = cases();
    all.push(Case { state, attempt, binding });
    all.push(superseded_case());
    let mut repairs = 0;
    for c in all {
        let five = v5::V5.compile(&c.state, &c.binding).unwrap();
        let six = v6::V6.compile(&c.state, &c.binding).unwrap();
        assert_eq!(five.package_bytes, six.package_bytes);
        let mut renamed = five.manifest.clone();
        renamed.compiler_version = v6::VERSION.to_owned();
        assert_eq!(renamed, six.manifest);
        let (old, new) = (five.markdown(), six.markdown());
        let (old, new): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
        assert_eq!(old.len(), new.len());
        let Some(feedback) = &six.package.prior_attempt_feedback else {
            assert_eq!(old, new, "no repair items: the same Markdown");
            continue;
        };
        repairs += 1;
        let repair = six.package.repair_context.as_ref().unwrap();
        let mut cited: Vec<String> =
            feedback.items.iter().flat_map(|i| i.source_digests.iter().map(|d| d.to_string())).collect();
        for f in &repair.failed_evidence {
            cited.push(f.evidence_record_digest.to_string());
            cited.push(f.check_specification_digest.to_string());
        }
        for (a, b) in old.iter().zip(&new) {
            if a != b {
                assert!(b.starts_with("- failed: evidence") || b.starts_with("- ["), "{b}");
                assert!(
                    cited.iter().any(|d| b.matches(d.as_str()).count() > a.matches(d.as_str()).count()),
                    "{a}\n{b}"
                );
            }
        }
        for d in &cited {
            assert!(new.iter().any(|l| l.contains(d.as_str())), "{d} is shown");
        }
    }
    assert!(repairs > 0, "a golden case compiles a repair");
}

/// Compiler/6's output for the golden cases is byte for byte the frozen one, also now that
/// compiler/7 writes the ledgers they are compiled from.
#[test]
fn v6_packages_are_frozen() {
    let now = now_with(&v6::V6, &cases());
    let frozen = read_golden("lifecycle-packages-v6.json");
    assert_eq!(frozen["compilerVersion"], v6::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 7);
    assert!(frozen == now, "compiler/6's output changed: compiler/6 is frozen, never re-blessed");
}

/// Compiler/7 is compiler/6 but for `compilerVersion` in every package and manifest; its
/// Markdown is compiler/6's with a backslash before every `$` of ledger text (outside review
/// 221 F2: GitHub's viewer renders `$…$` as math, where `\phantom{…}` hides its text).
#[test]
fn v7_differs_from_v6_only_in_its_dollar_escapes() {
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let mut all = cases();
    all.push(Case { state, attempt, binding });
    all.push(superseded_case());
    for c in all {
        let six = v6::V6.compile(&c.state, &c.binding).unwrap();
        let seven = v7::V7.compile(&c.state, &c.binding).unwrap();
        assert_eq!(six.package_bytes, seven.package_bytes);
        let mut renamed = six.manifest.clone();
        renamed.compiler_version = v7::VERSION.to_owned();
        assert_eq!(renamed, seven.manifest);
        assert_eq!(six.markdown(), seven.markdown().replace("\\$", "$"));
    }
    // A `$` in ledger text: escaped by compiler/7 alone.
    let mut c = cases().remove(0);
    let text = "Never delete a test $\\phantom{(except this one)}$";
    let id = *c.state.goals.keys().next().unwrap();
    c.state.goals.get_mut(&id).unwrap().content.preservation_constraints = vec![text.to_owned()];
    let six = v6::V6.compile(&c.state, &c.binding).unwrap();
    let seven = v7::V7.compile(&c.state, &c.binding).unwrap();
    assert!(six.markdown().contains("test $\\phantom"), "compiler/6 left it as written");
    assert!(seven.markdown().contains("test \\$\\phantom{(except this one)}\\$"), "{}", seven.markdown());
}

/// Compiler/7's output for the golden cases is byte for byte the frozen one, also now that
/// compiler/8 writes the ledgers they are compiled from.
#[test]
fn v7_packages_are_frozen() {
    let now = now_with(&v7::V7, &cases());
    let frozen = read_golden("lifecycle-packages-v7.json");
    assert_eq!(frozen["compilerVersion"], v7::VERSION);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 7);
    assert!(frozen == now, "compiler/7's output changed: compiler/7 is frozen, never re-blessed");
}

/// Compiler/8 is compiler/7 but for `compilerVersion` and, in an omission of a confirmed
/// Fact by the phase or a budget, the Fact's revision after its `sourceRef` (outside review
/// 221 F4); its Markdown writes the compiler's fields first and each text of an item after a
/// bold label (or, alone, a colon), so a text cannot imitate a separator (outside reviews
/// 209 F1, 221 F5).
#[test]
fn v8_differs_from_v7_only_in_omitted_fact_revisions_and_labels() {
    let (attempt, state, binding) = super::selection_attempt::golden_selection_case();
    let mut all = cases();
    all.push(Case { state, attempt, binding });
    all.push(superseded_case());
    all.push(labelled_case());
    let mut fact_omissions = 0;
    for c in &all {
        let seven = v7::V7.compile(&c.state, &c.binding).unwrap();
        let eight = v8::V8.compile(&c.state, &c.binding).unwrap();
        assert_eq!(seven.package_bytes, eight.package_bytes);
        let mut renamed = seven.manifest.clone();
        renamed.compiler_version = v8::VERSION.to_owned();
        for o in &mut renamed.omission_decisions {
            if o.source_ref.starts_with("fact/") && !o.source_ref.contains('@') {
                let id: ledger_schema::Id = o.source_ref["fact/".len()..].parse().unwrap();
                o.source_ref = format!("{}@{}", o.source_ref, c.state.facts[&id].revision);
                fact_omissions += 1;
            }
        }
        assert_eq!(renamed, eight.manifest);
        // Every decision, scenario and fact line leads with the compiler's fields.
        let md = eight.markdown();
        for d in &eight.package.selected_decisions {
            assert!(md.contains(&format!("\n- {} **question:** ", d.decision_id)), "{md}");
        }
        for x in &eight.package.business_scenarios {
            assert!(md.contains(&format!("\n- {} **title:** ", x.scenario_id)), "{md}");
        }
        for f in &eight.package.selected_facts {
            assert!(md.contains(&format!("\n- {} r{}: ", f.fact_id, f.revision)), "{md}");
        }
        // A project source's heading names its record (outside review 225 F2).
        for c in &eight.package.relevant_code {
            assert!(md.contains(&format!(" ({}, source/{})\n", c.digest, c.source_id)), "{md}");
        }
    }
    assert_eq!(fact_omissions, 1, "the labelled case leaves out one confirmed Fact");
    // The imitating texts: compiler/7 renders the decision as a line another package's
    // question and answer render too; compiler/8's labels are the compiler's alone.
    let c = labelled_case();
    let seven = v7::V7.compile(&c.state, &c.binding).unwrap().markdown();
    let eight = v8::V8.compile(&c.state, &c.binding).unwrap().markdown();
    assert!(seven.contains("- Delete the flaky test? — Yes (01JC0000000000000000000052)"), "{seven}");
    assert!(
        eight.contains(
            "- 01JC000000000000000000002M **question:** Delete the flaky test? — Yes (01JC0000000000000000000052)\n  \\- Keep the public API? **answer:** No, never.\n"
        ),
        "{eight}"
    );
    assert!(
        eight.contains("- 01JC000000000000000000002P: waits for a reviewer (01JC000000000000000000002P)\n"),
        "{eight}"
    );
    assert!(
        eight.contains(
            "- 01JC000000000000000000002N **title:** trailing byte: accepted silently **description:** \\*\\*description:\\*\\* a config"
        ),
        "{eight}"
    );
    // Outside the labels, no `**` of the compiler's own: every `*` of ledger text is escaped.
    let labels = ["**question:**", "**answer:**", "**title:**", "**description:**", "**content:**"];
    let mut rest = eight.clone();
    for l in labels {
        rest = rest.replace(l, "");
    }
    assert!(!rest.replace("\\*", "").contains('*'), "{rest}");
}

/// The newest compiler's output for the golden ledger is byte for byte the frozen one.
#[test]
fn newest_packages_are_frozen() {
    assert_eq!(COMPILER_VERSION, v8::VERSION, "the v8 golden is the newest compiler's");
    let now = newest_now(&cases());
    let name = "lifecycle-packages-v8.json";
    if std::env::var_os("BLESS_GOLDEN").is_some() {
        std::fs::write(golden_path(name), serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
    }
    let frozen = read_golden(name);
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 8);
    if frozen != now {
        assert_ne!(
            frozen["compilerVersion"], now["compilerVersion"],
            "compiler output changed without a compilerVersion bump: bump COMPILER_VERSION, then re-bless"
        );
        panic!("compilerVersion changed: re-bless the goldens on purpose (BLESS_GOLDEN=1)");
    }
}

/// Compiler/1's manifest as compiler/2 writes it: the version, and the three names v1
/// took from Rust `Debug` spelled by their wire names. This is the whole of the change.
fn v1_manifest_renamed(mut m: ContextManifest) -> ContextManifest {
    let classes = [
        ("Identity", "IDENTITY"),
        ("Phase", "PHASE"),
        ("Goal", "GOAL"),
        ("BlockersDecisions", "BLOCKERS_DECISIONS"),
        ("FactsScenariosObligations", "FACTS_SCENARIOS_OBLIGATIONS"),
        ("ProjectMaterial", "PROJECT_MATERIAL"),
        ("Working", "WORKING"),
    ];
    let phases = [
        ("Discovery", "DISCOVERY"),
        ("Plan", "PLAN"),
        ("Implement", "IMPLEMENT"),
        ("EvidenceBuild", "EVIDENCE_BUILD"),
        ("FinalVerify", "FINAL_VERIFY"),
    ];
    m.compiler_version = v2::VERSION.to_owned();
    for o in &mut m.omission_decisions {
        if let Some(class) = o.rule.strip_prefix("budget.") {
            let (_, wire) = classes.iter().find(|(debug, _)| *debug == class).unwrap();
            o.rule = format!("budget.{wire}");
        } else if let Some(rest) = o.rule.strip_prefix("phase.") {
            let (phase, class) = rest.split_once(".excludes.").unwrap();
            let (_, phase) = phases.iter().find(|(debug, _)| *debug == phase).unwrap();
            let (_, class) = classes.iter().find(|(debug, _)| *debug == class).unwrap();
            o.rule = format!("phase.{phase}.excludes.{class}");
        } else if o.rule == "authority.factNotConfirmed" {
            for (debug, wire) in [("Proposed", "PROPOSED"), ("Invalidated", "INVALIDATED")] {
                o.reason = o.reason.replace(&format!("fact is {debug};"), &format!("fact is {wire};"));
            }
        }
    }
    m
}

/// The `Debug` names compiler/1 wrote that differ from the wire names.
const DEBUG_NAMES: [&str; 11] = [
    "BlockersDecisions",
    "FactsScenariosObligations",
    "ProjectMaterial",
    "Discovery",
    "Implement",
    "EvidenceBuild",
    "FinalVerify",
    "Proposed",
    "Invalidated",
    ".Identity",
    ".Working",
];

/// Compiler/2 selects, orders, budgets and encodes exactly as compiler/1: on every golden
/// case the package bytes are identical, and the manifests differ only in the version and
/// the wire names — which every case exercises (the unconfirmed Fact's reason everywhere,
/// a phase exclusion and a budget omission in the "names" case).
#[test]
fn v2_differs_from_v1_only_in_names() {
    let mut renamed_rules = Vec::new();
    for c in cases() {
        let one: Compiled = v1::V1.compile(&c.state, &c.binding).unwrap();
        let two: Compiled = v2::V2.compile(&c.state, &c.binding).unwrap();
        assert_eq!(one.package_bytes, two.package_bytes, "{}", c.attempt.attempt_id);
        assert_ne!(one.manifest, two.manifest);
        assert_eq!(v1_manifest_renamed(one.manifest.clone()), two.manifest, "{}", c.attempt.attempt_id);
        assert!(one.manifest.omission_decisions.iter().any(|o| o.reason.contains("fact is Proposed;")));
        for o in &two.manifest.omission_decisions {
            for debug in DEBUG_NAMES {
                assert!(!o.rule.contains(debug) && !o.reason.contains(debug), "{debug} in {o:?}");
            }
            renamed_rules.push(o.rule.clone());
        }
    }
    assert!(
        renamed_rules.contains(&"phase.DISCOVERY.excludes.PROJECT_MATERIAL".to_owned()),
        "{renamed_rules:?}"
    );
    assert!(renamed_rules.contains(&"budget.BLOCKERS_DECISIONS".to_owned()), "{renamed_rules:?}");
}

/// Each compiler renders its own packages: a v1 package's Markdown is compiler/1's (Rust
/// `Debug` names, unchanged), a v2 package's uses wire names, and `Compiled::markdown`
/// picks the rendering by the manifest's `compilerVersion`.
#[test]
fn markdown_is_rendered_by_the_compiler_that_derived_the_package() {
    let cases = cases();
    let repair = &cases[3];
    assert_eq!(repair.binding.phase, Phase::Implement);
    let one = v1::V1.compile(&repair.state, &repair.binding).unwrap();
    let two = v2::V2.compile(&repair.state, &repair.binding).unwrap();
    assert_eq!(one.markdown(), closure_ledger::compiler::markdown(&one.package));
    assert_eq!(two.markdown(), v2::V2.markdown(&two.package));
    let (old, new) = (one.markdown(), two.markdown());
    for (debug, wire) in [
        ("- phase: Implement", "- phase: IMPLEMENT"),
        ("(Fail) obligation", "(FAIL) obligation"),
        ("- [FailedCheck]", "- [FAILED_CHECK]"),
        ("- [ParentChangeSet]", "- [PARENT_CHANGE_SET]"),
        ("- [PreservationConstraint]", "- [PRESERVATION_CONSTRAINT]"),
        ("result kinds: CompletionRequest", "result kinds: COMPLETION_REQUEST"),
    ] {
        assert!(old.contains(debug) && !old.contains(wire), "v1: {debug}");
        assert!(new.contains(wire) && !new.contains(debug), "v2: {wire}");
    }
    // Apart from those names the two renderings are the same text.
    let normalize = |s: &str| {
        [
            ("- phase: Implement", "- phase: IMPLEMENT"),
            ("(Fail) obligation", "(FAIL) obligation"),
            ("- [FailedCheck]", "- [FAILED_CHECK]"),
            ("- [ParentChangeSet]", "- [PARENT_CHANGE_SET]"),
            ("- [PreservationConstraint]", "- [PRESERVATION_CONSTRAINT]"),
            ("result kinds: CompletionRequest", "result kinds: COMPLETION_REQUEST"),
        ]
        .iter()
        .fold(s.to_owned(), |s, (a, b)| s.replace(a, b))
    };
    assert_eq!(normalize(&old), new);
}

/// Compiler/4 holds a repair child's prior-attempt feedback to the phase policy: with
/// WORKING required in IMPLEMENT, feedback items lost to the policy's feedback limits fail
/// the compilation (seed: an overflow "fails compilation when policy marks the item
/// required"; outside review 23: the repair shipped with no feedback at all); with WORKING
/// optional they stay recorded omissions. Compiler/3 records omissions either way.
#[test]
fn v4_fails_a_repair_whose_required_feedback_does_not_fit() {
    use closure_ledger::compiler::CompileError;
    let cases = cases();
    let repair = &cases[3];
    assert_eq!(repair.binding.phase, Phase::Implement);
    let four = v4::V4.compile(&repair.state, &repair.binding).unwrap();
    assert!(four.package.prior_attempt_feedback.is_some(), "the reference repair carries feedback");
    for required in [true, false] {
        let mut state = repair.state.clone();
        let policy = state.policies.get_mut(&repair.binding.policy.id).unwrap();
        policy.bundle.feedback.max_total_bytes = 1;
        for p in &mut policy.bundle.phases {
            if p.phase == Phase::Implement {
                p.required.retain(|c| *c != InputClass::Working);
                p.optional.retain(|c| *c != InputClass::Working);
                if required {
                    p.required.push(InputClass::Working);
                    p.required.sort();
                } else {
                    p.optional.push(InputClass::Working);
                    p.optional.sort();
                }
            }
        }
        let three = v3::V3.compile(&state, &repair.binding).unwrap();
        assert!(three.package.prior_attempt_feedback.is_none());
        assert!(three.manifest.omission_decisions.iter().any(|o| o.rule == "feedback.maxTotalBytes"));
        match v4::V4.compile(&state, &repair.binding) {
            Err(CompileError::RequiredFeedback { lost }) => {
                assert!(required, "refused with WORKING optional");
                assert_eq!(lost, four.package.prior_attempt_feedback.as_ref().unwrap().items.len());
            }
            Ok(compiled) => {
                assert!(!required, "compiled with WORKING required");
                assert!(compiled.package.prior_attempt_feedback.is_none());
                assert!(
                    compiled.manifest.omission_decisions.iter().any(|o| o.rule == "feedback.maxTotalBytes")
                );
            }
            Err(other) => panic!("{other}"),
        }
    }
}
