//! Task selection into the Context Compiler (issue #15, third part): an Attempt start that
//! names a selection's receipt carries its loaded sources as prompt-advisory project
//! material (compiler/3 and later), the manifest binds the receipt, every way the selection can be
//! the wrong one is refused (`AttemptSelection`), a selection gone stale after the start
//! makes the Attempt's manifest stale, and replay / `ledger compile` re-derive it all.

use std::path::Path;

use super::profiles_util::{Setup, cli, write};
use closure_ledger::Refusal;
use closure_ledger::admission;
use closure_ledger::compiler::{self, Compiler, v2, v3};
use closure_ledger::ledger::{Ledger, Receipt, SubmitError};
use closure_ledger::lifecycle::{GOAL, POLICY, PROFILE, Script, WORKFLOW, lid};
use closure_ledger::runtime::command::{
    ClaimDispatch, RestartAttempt, ReviseGoal, StartAttempt, StartWorkflow,
};
use closure_ledger::runtime::{Command, Ctx, Rule};
use closure_ledger::store::{DiskStore, Store};
use ledger_schema::types::{AuthorityClass, ThreadChoice};
use ledger_schema::{Digest, Event, Id};
use serde_json::{Value, json};

use replay_tests::T0;

/// A ledger with the profile fixture's registry configured (Lean, `mode`) and the
/// reference lifecycle's setup (goal, sources, a workflow in DISCOVERY).
struct World {
    s: Setup,
    time_ms: u64,
}

fn world(mode: &str) -> World {
    let s = Setup::new();
    // The golden packages' registry is the fixture's own, byte for byte.
    std::fs::remove_dir_all(s.src.join("skills/deploy/agents")).unwrap();
    let skill = |dir: &str, desc: &str| {
        write(
            &s.src.join(format!("skills/{dir}/SKILL.md")),
            &format!(
                "---\nname: {dir}\ndescription: {desc}\n---\n\n# {dir}\n\nBody of {dir}: ```rust\nfn x() {{}}\n```\n"
            ),
        );
    };
    skill("postgres-tuning", "Tune PostgreSQL queries, indexes and vacuum settings.");
    skill("react-components", "Build React components with hooks and accessible markup.");
    assert_eq!(s.scan().0, 0);
    let root = s.tmp.path().join("store");
    let (code, _, err) =
        s.run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap(), "--selection", mode]);
    assert_eq!(code, 0, "{err}");
    let mut w = World { s, time_ms: T0 + 10_000_000 };
    w.with_ledger(|script| script.setup()).unwrap();
    w
}

/// A skill `dir` under `src/skills/` with a SKILL.md of `description` and `body`.
fn skill(src: &Path, dir: &str, description: &str, body: &str) {
    write(
        &src.join(format!("skills/{dir}/SKILL.md")),
        &format!("---\nname: {dir}\ndescription: {description}\n---\n\n{body}\n"),
    );
}

/// `skill:zz-loaded`, sorting after every other, of 20,000 bytes (within a load's cap).
fn write_zz_loaded(w: &World) {
    skill(&w.s.src, "zz-loaded", "The loaded skill.", &"loaded text. ".repeat(1_530));
}

impl World {
    fn dir(&self) -> &Path {
        &self.s.ledger
    }

    /// Runs `f` over the ledger opened in-process (closed again afterwards, so the CLI can
    /// open it).
    fn with_ledger<T>(
        &mut self,
        f: impl FnOnce(&mut Script<'_, DiskStore>) -> Result<T, SubmitError>,
    ) -> Result<T, SubmitError> {
        let (mut ledger, _) = Ledger::<DiskStore>::open(self.dir()).unwrap();
        let mut script = Script { ledger: &mut ledger, time_ms: self.time_ms, log: Vec::new() };
        let out = f(&mut script);
        self.time_ms = script.time_ms;
        out
    }

    fn submit(&mut self, command: Command) -> Result<Receipt, SubmitError> {
        self.with_ledger(|script| script.run(command))
    }

    fn state(&self) -> closure_ledger::runtime::State {
        let (ledger, _) = Ledger::<DiskStore>::open(self.dir()).unwrap();
        ledger.state().clone()
    }

    /// `ledger select` with `task` (and `rest`), as JSON; asserts exit 0.
    fn select(&self, task: &Value, rest: &[&str]) -> Value {
        let f = self.s.tmp.path().join("task.json");
        std::fs::write(&f, serde_json::to_vec(task).unwrap()).unwrap();
        let mut args = vec!["--task-input", f.to_str().unwrap(), "--json"];
        args.extend_from_slice(rest);
        let (code, out, err) = self.s.run(&["select"], &args);
        assert_eq!(code, 0, "{out}{err}");
        serde_json::from_str(&out).unwrap()
    }

    fn head(&self) -> u64 {
        self.s.head().0
    }
}

/// A task for the reference goal at `revision` in `phase`.
fn task(phase: &str, revision: u32) -> Value {
    json!({"sessionId": "supervisor-1", "taskId": lid(GOAL).to_string(), "revision": revision, "phase": phase})
}

fn explicit(phase: &str, ids: &[&str]) -> Value {
    let mut t = task(phase, 1);
    t["explicitIds"] = json!(ids);
    t
}

fn receipt(v: &Value) -> Digest {
    v["receipt"]["receiptDigest"].as_str().unwrap().parse().unwrap()
}

fn start(attempt: u128, workflow: u128, selection: Option<Digest>) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(workflow),
        worker_session_id: lid(attempt + 1),
        thread: ThreadChoice::Fresh,
        selection_receipt: selection,
    })
}

fn refused_rule(r: Result<Receipt, SubmitError>) -> (Rule, String) {
    match r {
        Err(SubmitError::Refused(Refusal::Rule(v))) => (v.rule, v.detail),
        other => panic!("expected a rule refusal, got {other:?}"),
    }
}

/// The golden case (golden_packages.rs, `lifecycle-packages-v3.json`): the reference
/// setup with the fixture registry under Lean/Auto, an explicit loaded selection of
/// `skill:api-design`, and a DISCOVERY Attempt carrying it — its event and its package.
pub(super) fn golden_selection_case() -> (
    ledger_schema::events::AttemptStarted,
    closure_ledger::runtime::State,
    closure_ledger::runtime::AttemptBinding,
) {
    // The selection as routing/1 recorded it (the frozen goldens carry its receipt): the
    // same explicit task, decided under that policy and admitted in-process.
    use closure_ledger::runtime::selection::{self, ROUTING_POLICY_V1, Request, Task};
    let mut w = world("auto");
    let sel = w
        .with_ledger(|s| {
            let task = Task {
                session_id: "supervisor-1".into(),
                task_id: lid(GOAL).to_string(),
                revision: 1,
                phase: "discovery".into(),
                query: None,
                explicit_ids: vec!["skill:api-design".into()],
                proposed_ids: Vec::new(),
                no_workflow: false,
            };
            let request = Request { load: true, ..Request::default() };
            let event = selection::decide(
                s.ledger.state(),
                &task,
                None,
                &request,
                ROUTING_POLICY_V1,
                &|_, routable| Ok(selection::lexical(None, routable)),
            )
            .unwrap();
            let receipt = event.receipt().digest();
            s.time_ms += 1000;
            s.ledger.admit(vec![Event::SelectionRecorded(Box::new(event))], Ctx { time_ms: s.time_ms })?;
            Ok(receipt)
        })
        .unwrap();
    w.submit(start(0x60, WORKFLOW, Some(sel))).unwrap();
    let found = closure_ledger::replay::recompile_attempt(w.dir(), lid(0x60)).unwrap().unwrap();
    assert!(found.matches_recorded);
    let (ledger, _) = Ledger::<DiskStore>::open(w.dir()).unwrap();
    let mut state = closure_ledger::runtime::State::default();
    for e in ledger.store().read_range(0, found.seq - 1).unwrap() {
        admission::apply(&mut state, &e.entry).unwrap();
    }
    let sealed = ledger.store().read(found.seq).unwrap();
    let Event::AttemptStarted(a) = &sealed.entry.event else { panic!("an attempt start") };
    let binding = closure_ledger::runtime::attempt_binding(
        &state,
        &StartAttempt {
            attempt_id: a.attempt_id,
            workflow_id: a.workflow_id,
            worker_session_id: a.worker_session_id,
            thread: a.thread,
            selection_receipt: a.selection_receipt,
        },
    )
    .unwrap();
    (ledger_schema::events::AttemptStarted::clone(a), state, binding)
}

/// The explicit selection's resources, as loaded (id, path, content).
fn loaded(v: &Value) -> Vec<(String, String, String)> {
    v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["path"].as_str().unwrap().to_owned(),
                r["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// An Attempt that names a loaded, current selection carries each loaded resource as a
/// `selectedSkill` entry of authority class PROMPT_ADVISORY (class PROJECT_MATERIAL, after
/// the goal's project sources), exactly the bytes `--load` returned; the manifest binds the
/// receipt; the capability grant and response contract are the ones an Attempt without the
/// selection gets (advisory material grants nothing); replay proves the manifest and
/// `ledger compile --attempt` re-renders it byte for byte, in another process too.
#[test]
fn an_attempt_carries_its_selection_as_advisory_project_material() {
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    assert_eq!(sel["decision"], "selected");
    let r = receipt(&sel);
    let expected = loaded(&sel);
    assert_eq!(expected.len(), 5, "{expected:?}"); // api-design, python-patterns (+ reference), testing (+ checklist)
    w.submit(start(0x60, WORKFLOW, Some(r))).unwrap();

    let state = w.state();
    let a = &state.attempts[&lid(0x60)];
    assert_eq!(a.compiler_version, compiler::COMPILER_VERSION);
    assert_eq!(a.selection_receipt, Some(r));
    let found = closure_ledger::replay::recompile_attempt(w.dir(), lid(0x60)).unwrap().unwrap();
    assert!(found.matches_recorded);
    let c = &found.compiled;
    assert_eq!(c.manifest.selection_receipt, Some(r));
    let skills: Vec<(String, String, String)> =
        c.package.selected_skills.iter().map(|k| (k.id.clone(), k.path.clone(), k.content.clone())).collect();
    assert_eq!(skills, expected);
    // One entry for the whole selection (its dependency closure is kept or omitted whole).
    let entries: Vec<_> = c.manifest.entries.iter().filter(|e| e.kind == "taskSelection").collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].authority_class, AuthorityClass::PromptAdvisory);
    assert_eq!(entries[0].source_ref, format!("selection/{r}"));
    assert_eq!(entries[0].source_digest, Some(r));
    for k in &c.package.selected_skills {
        let recorded = sel["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == k.id.as_str() && x["path"] == k.path.as_str())
            .unwrap();
        assert_eq!(k.digest.to_string(), recorded["digest"].as_str().unwrap());
    }
    // Project material order: the goal's project source first, then the advisory sources.
    let kinds: Vec<&str> = c
        .manifest
        .entries
        .iter()
        .filter(|e| e.kind == "projectSource" || e.kind == "taskSelection")
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"projectSource"), "{kinds:?}");
    // No authority: the same grant and contract as the same Attempt without a selection.
    let state_before = {
        let (ledger, _) = Ledger::<DiskStore>::open(w.dir()).unwrap();
        let mut st = closure_ledger::runtime::State::default();
        for e in ledger.store().read_range(0, found.seq - 1).unwrap() {
            admission::apply(&mut st, &e.entry).unwrap();
        }
        st
    };
    let mut binding = closure_ledger::runtime::attempt_binding(
        &state_before,
        &StartAttempt {
            attempt_id: lid(0x60),
            workflow_id: lid(WORKFLOW),
            worker_session_id: lid(0x61),
            thread: ThreadChoice::Fresh,
            selection_receipt: Some(r),
        },
    )
    .unwrap();
    binding.selection = None;
    let plain = v3::V3.compile(&state_before, &binding).unwrap();
    assert_eq!(plain.manifest.capability_grant_digest, c.manifest.capability_grant_digest);
    assert_eq!(plain.manifest.response_contract_digest, c.manifest.response_contract_digest);
    assert_eq!(plain.package.capability_grant, c.package.capability_grant);
    assert!(plain.package.selected_skills.is_empty() && plain.manifest.selection_receipt.is_none());
    // Older compilers cannot carry a selection: they refuse rather than drop it.
    binding.selection = Some(r);
    assert!(matches!(
        v2::V2.compile(&state_before, &binding),
        Err(compiler::CompileError::SelectionUnsupported { .. })
    ));
    // The Markdown shows each skill in a fence its own code block cannot close.
    let md = c.markdown();
    assert!(md.contains("## Selected skill `skill:api-design` — `SKILL.md`"), "{md}");
    assert!(md.contains("```\n# Details\n"), "{md}");
    let mut fenced = c.package.clone();
    fenced.selected_skills[0].content = "before\n```rust\nfn x() {}\n```\nafter".to_owned();
    let md = v3::V3.markdown(&fenced);
    assert!(md.contains("````\nbefore\n```rust\nfn x() {}\n```\nafter\n````\n"), "{md}");

    // Replay proves it; `ledger compile` re-renders it byte for byte (another process).
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["ok"], true);
    let (code, out, err) =
        cli(&["compile", w.dir().to_str().unwrap(), "--attempt", &lid(0x60).to_string(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["manifestDigest"].as_str().unwrap(), c.manifest_digest().to_string());
    assert_eq!(shown["packageDigest"].as_str().unwrap(), c.manifest.package_digest.to_string());
    // Another process re-derives the same package bytes.
    let bytes_file = w.s.tmp.path().join("child-package.cbor");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "selection_attempt::child_compiles_the_attempt", "--nocapture"])
        .env(CHILD, format!("{}\n{}", w.dir().display(), bytes_file.display()))
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read(&bytes_file).unwrap(), c.package_bytes, "byte-identical in another process");
}

const CHILD: &str = "SELECTION_ATTEMPT_CHILD";

/// The child of the test above (a no-op unless it is that child): recompiles Attempt 0x60
/// of the ledger it is given and writes the package bytes.
#[test]
fn child_compiles_the_attempt() {
    let Ok(arg) = std::env::var(CHILD) else { return };
    let (dir, out) = arg.split_once('\n').unwrap();
    let found = closure_ledger::replay::recompile_attempt(Path::new(dir), lid(0x60)).unwrap().unwrap();
    assert!(found.matches_recorded);
    std::fs::write(out, &found.compiled.package_bytes).unwrap();
}

/// Every way the named selection can be the wrong one is refused (`AttemptSelection`),
/// writing nothing: unknown receipt; pending; selected but not loaded; made with
/// noWorkflow; another task (goal); another goal revision; another phase; stale after
/// source drift or a profile change. A completed `none` decision is carried (it binds
/// nothing but the receipt).
#[test]
fn a_wrong_selection_is_refused_at_attempt_start() {
    let mut w = world("auto");
    let mut cases: Vec<(&str, Digest, &str)> = Vec::new();
    cases.push(("unknown", Digest::of(ledger_schema::DigestKind::Source, b"nothing"), "is recorded"));
    let mut pending = task("discovery", 1);
    pending["query"] = json!("write something with files and markup");
    let p = w.select(&pending, &[]);
    assert_eq!(p["decision"], "pending");
    cases.push(("pending", receipt(&p), "pending"));
    let unloaded = w.select(&explicit("discovery", &["skill:api-design"]), &[]);
    cases.push(("not loaded", receipt(&unloaded), "without loading"));
    let mut nw = task("discovery", 1);
    nw["noWorkflow"] = json!(true);
    cases.push(("noWorkflow", receipt(&w.select(&nw, &[])), "noWorkflow"));
    let mut other_task = explicit("discovery", &["skill:api-design"]);
    other_task["taskId"] = json!("feature-1");
    cases.push(("other goal", receipt(&w.select(&other_task, &["--load"])), "not goal"));
    let mut other_rev = explicit("discovery", &["skill:api-design"]);
    other_rev["revision"] = json!(2);
    cases.push(("other revision", receipt(&w.select(&other_rev, &["--load"])), "revision 2"));
    let other_phase = w.select(&explicit("implement", &["skill:api-design"]), &["--load"]);
    cases.push(("other phase", receipt(&other_phase), "phase"));

    for (what, r, needle) in &cases {
        let head = w.head();
        let (rule, detail) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(*r))));
        assert_eq!(rule, Rule::AttemptSelection, "{what}: {detail}");
        assert!(detail.contains(needle), "{what}: {detail}");
        assert_eq!(w.head(), head, "{what}: nothing written");
    }

    // A completed `none` decision (no match) is carried: it binds only the receipt.
    let mut none = task("discovery", 1);
    none["query"] = json!("zzzz qqqq");
    let n = w.select(&none, &[]);
    assert_eq!(n["decision"], "none");
    let good = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);

    // Stale: a profile change after the selection (mode) refuses it ...
    let root = w.s.tmp.path().join("store");
    let status: Value = w.s.json(&["profile", "status"], &["--json"]);
    let revision = status["revision"].as_u64().unwrap().to_string();
    let (code, _, err) = w.s.run(&["profile", "mode"], &["suggest", "--expected-revision", &revision]);
    assert_eq!(code, 0, "{err}");
    let head = w.head();
    let (rule, detail) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(receipt(&good)))));
    assert_eq!((rule, detail.contains("stale")), (Rule::AttemptSelection, true), "{detail}");
    let (rule, _) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(receipt(&n)))));
    assert_eq!(rule, Rule::AttemptSelection);
    assert_eq!(w.head(), head);
    // ... and so does source drift (a changed routable source) after going back.
    let revision = (revision.parse::<u64>().unwrap() + 1).to_string();
    let (code, _, err) = w.s.run(&["profile", "mode"], &["auto", "--expected-revision", &revision]);
    assert_eq!(code, 0, "{err}");
    let fresh = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    write(
        &w.s.src.join("skills/postgres-tuning/SKILL.md"),
        "---\nname: postgres-tuning\ndescription: Tune PostgreSQL queries and vacuum.\n---\n\n# changed\n",
    );
    assert_eq!(w.s.scan().0, 0);
    let (rule, detail) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(receipt(&fresh)))));
    assert_eq!((rule, detail.contains("stale")), (Rule::AttemptSelection, true), "{detail}");
    let _ = root;
}

/// Seed 000: "skills ... are disabled for the bounded profile" — a protected workflow's
/// Attempt carries no task selection (outside review 95, P2: a selected skill's body reached
/// its worker), a `none` decision included; the same selection starts an Attempt on an
/// unprotected workflow of the goal.
#[test]
fn a_protected_workflow_carries_no_task_selection() {
    use closure_ledger::lifecycle::{PROTECTED_PROFILE, plan_pair, profile};
    use closure_ledger::runtime::command::InstallProfile;
    let mut w = world("auto");
    w.submit(Command::InstallProfile(InstallProfile {
        profile_id: lid(PROTECTED_PROFILE),
        profile: profile(true),
    }))
    .unwrap();
    let protected = 0x33;
    w.submit(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(protected),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(PROTECTED_PROFILE),
        plan: Some(plan_pair()),
    }))
    .unwrap();
    let loaded = receipt(&w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]));
    let mut none = task("discovery", 1);
    none["query"] = json!("zzzz qqqq");
    let none = w.select(&none, &[]);
    assert_eq!(none["decision"], "none");
    for (what, r) in [("loaded", loaded), ("none", receipt(&none))] {
        let head = w.head();
        let (rule, detail) = refused_rule(w.submit(start(0x60, protected, Some(r))));
        assert_eq!(rule, Rule::AttemptSelection, "{what}: {detail}");
        assert!(detail.contains("protected (bounded) profile, which disables skills"), "{what}: {detail}");
        assert_eq!(w.head(), head, "{what}: nothing written");
    }
    w.submit(start(0x60, protected, None)).unwrap();
    w.submit(start(0x62, WORKFLOW, Some(loaded))).unwrap();
}

/// Staleness is by profile revision, not by plan equality: a selection made before a
/// `profile mode suggest` + `profile mode auto` round trip (the same plan again) stays
/// stale, before the start and after it (a claim refused as stale never becomes
/// admissible by toggling back). A selection made in suggest mode is never carried.
#[test]
fn a_toggled_profile_does_not_revive_a_stale_selection() {
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    let toggle = |w: &World| {
        for mode in ["suggest", "auto"] {
            let status: Value = w.s.json(&["profile", "status"], &["--json"]);
            let revision = status["revision"].as_u64().unwrap().to_string();
            let (code, _, err) = w.s.run(&["profile", "mode"], &[mode, "--expected-revision", &revision]);
            assert_eq!(code, 0, "{err}");
        }
    };
    toggle(&w);
    let claim = ClaimDispatch::for_attempt(&w.state(), lid(0x60)).unwrap();
    let (rule, detail) = refused_rule(w.submit(Command::ClaimDispatch(claim)));
    assert_eq!(rule, Rule::ManifestStale, "{detail}");
    assert!(detail.contains("revision"), "{detail}");
    let version = w.state().workflows[&lid(WORKFLOW)].version;
    w.submit(Command::CancelAttempt(closure_ledger::runtime::command::CancelAttempt {
        attempt_id: lid(0x60),
        workflow_version: version,
        reason: "stale selection".to_owned(),
    }))
    .unwrap();
    let sel2 = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    toggle(&w);
    let (rule, detail) = refused_rule(w.submit(start(0x62, WORKFLOW, Some(receipt(&sel2)))));
    assert_eq!(rule, Rule::AttemptSelection, "{detail}");

    // Suggest mode: a completed `none` decision is still never delivered.
    let mut w = world("suggest");
    let mut t = task("discovery", 1);
    t["query"] = json!("zzzz qqqq");
    let n = w.select(&t, &[]);
    assert_eq!(n["decision"], "none");
    let (rule, detail) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(receipt(&n)))));
    assert_eq!(rule, Rule::AttemptSelection, "{detail}");
    assert!(detail.contains("suggest"), "{detail}");
    // So is an explicit selection made there, with the reason that applies (outside review
    // 52: it said "select again with --load", which suggest mode refuses).
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &[]);
    let (rule, detail) = refused_rule(w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))));
    assert_eq!(rule, Rule::AttemptSelection, "{detail}");
    assert!(detail.contains("suggest mode") && !detail.contains("--load"), "{detail}");
}

/// A `none` selection is carried (the manifest binds its receipt, no skill is rendered).
#[test]
fn a_none_selection_is_carried_and_binds_its_receipt() {
    let mut w = world("manual");
    let n = w.select(&task("discovery", 1), &[]);
    assert_eq!((n["decision"].as_str(), n["reason"].as_str()), (Some("none"), Some("manual")));
    w.submit(start(0x60, WORKFLOW, Some(receipt(&n)))).unwrap();
    let found = closure_ledger::replay::recompile_attempt(w.dir(), lid(0x60)).unwrap().unwrap();
    assert!(found.matches_recorded);
    assert_eq!(found.compiled.manifest.selection_receipt, Some(receipt(&n)));
    assert!(found.compiled.package.selected_skills.is_empty());
}

/// After the start, a change that makes the selection stale (a profile revision, a new
/// registry) makes the Attempt's manifest stale: the dispatch claim is refused
/// (`ManifestStale`, naming the selection). Once dispatched, the Attempt is an existing
/// session and keeps the selection as decided (seed 003: "Existing sessions retain their
/// original context"; outside review 22): a profile revision does not mark it, and its
/// result is finished; a rescan that changes a loaded skill's bytes does mark it
/// CONTEXT_CHANGED (its context can no longer be shown). Replay reproduces each.
#[test]
fn a_selection_gone_stale_makes_the_manifest_stale() {
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    let status: Value = w.s.json(&["profile", "status"], &["--json"]);
    let revision = status["revision"].as_u64().unwrap();
    let (code, _, err) =
        w.s.run(&["profile", "mode"], &["suggest", "--expected-revision", &revision.to_string()]);
    assert_eq!(code, 0, "{err}");
    let claim = ClaimDispatch::for_attempt(&w.state(), lid(0x60)).unwrap();
    let (rule, detail) = refused_rule(w.submit(Command::ClaimDispatch(claim)));
    assert_eq!(rule, Rule::ManifestStale, "{detail}");
    assert!(detail.contains("stale"), "names the selection: {detail}");
    // A new Attempt leaves a stale selection: the refusal says so, not that no Attempt
    // compiles (outside review 210 F4).
    assert!(detail.contains("start a new Attempt, which compiles the current context"), "{detail}");
    assert!(!detail.contains("no new Attempt compiles"), "{detail}");

    // Dispatched first, then the change: the Attempt is marked.
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    assert!(!w.state().attempts[&lid(0x60)].context_changed);
    let status: Value = w.s.json(&["profile", "status"], &["--json"]);
    let revision = status["revision"].as_u64().unwrap();
    let (code, _, err) =
        w.s.run(&["profile", "mode"], &["suggest", "--expected-revision", &revision.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !w.state().attempts[&lid(0x60)].context_changed,
        "a profile revision keeps the session's context"
    );
    // The loaded skill's bytes change in the registry: the context cannot be shown any more.
    let skill = w.s.src.join("skills/api-design/SKILL.md");
    let text = std::fs::read_to_string(&skill).unwrap();
    std::fs::write(&skill, text + "\nOne more line.\n").unwrap();
    assert_eq!(w.s.scan().0, 0);
    assert!(w.state().attempts[&lid(0x60)].context_changed, "marked by the registry change");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");

    // Dispatched, a profile revision, then the worker's result: it is finished.
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    let revision = w.s.json(&["profile", "status"], &["--json"])["revision"].as_u64().unwrap();
    let (code, _, err) =
        w.s.run(&["profile", "mode"], &["suggest", "--expected-revision", &revision.to_string()]);
    assert_eq!(code, 0, "{err}");
    w.with_ledger(|s| {
        use ledger_schema::events::WorkerEventKind;
        let t = s.time_ms;
        let r = s.deliver(
            lid(0x60),
            0x70,
            closure_ledger::lifecycle::payload(WorkerEventKind::Proposals, t, "done"),
        )?;
        assert!(!r.duplicate);
        s.finish(0x60, ledger_schema::types::ResultKind::Proposals)
    })
    .unwrap();
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Advisory material never overflows a budget: with a PROJECT_MATERIAL budget too small
/// for the skills — even where the phase *requires* project material — each is a recorded
/// `budget.PROJECT_MATERIAL` omission and the Attempt starts.
#[test]
fn advisory_material_over_its_budget_is_an_omission() {
    let mut w = world("auto");
    let mut bundle = closure_ledger::lifecycle::policy_bundle();
    for p in &mut bundle.phases {
        if p.phase == ledger_schema::types::Phase::Discovery {
            p.required.push(ledger_schema::types::InputClass::ProjectMaterial);
            p.required.sort();
            p.optional.retain(|c| *c != ledger_schema::types::InputClass::ProjectMaterial);
        }
    }
    for b in &mut bundle.budgets {
        if b.class == ledger_schema::types::InputClass::ProjectMaterial {
            b.max_bytes = 400; // the goal's project source fits, the skills do not
        }
    }
    w.submit(Command::InstallPolicy(closure_ledger::runtime::command::InstallPolicy {
        policy_id: lid(0x15),
        bundle,
    }))
    .unwrap();
    w.submit(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x32),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(0x15),
        profile_id: lid(PROFILE),
        plan: None,
    }))
    .unwrap();
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x6a, 0x32, Some(receipt(&sel)))).unwrap();
    let found = closure_ledger::replay::recompile_attempt(w.dir(), lid(0x6a)).unwrap().unwrap();
    let m = &found.compiled.manifest;
    assert!(found.matches_recorded);
    assert!(m.entries.iter().any(|e| e.kind == "projectSource"), "the required source is kept");
    let omitted: Vec<_> =
        m.omission_decisions.iter().filter(|o| o.rule == "budget.PROJECT_MATERIAL").collect();
    assert_eq!(omitted.len(), 1, "one omission: the selection, whole: {:?}", m.omission_decisions);
    assert_eq!(omitted[0].source_ref, format!("selection/{}", receipt(&sel)));
    assert!(!m.entries.iter().any(|e| e.kind == "taskSelection"));
    assert!(found.compiled.package.selected_skills.is_empty(), "never half a skill");
    let _ = POLICY;
}

/// A restart's replacement carries the interrupted Attempt's selection; a redelivered
/// start is a duplicate only with the same selection; a revised goal makes the selection
/// (made for the old revision) refused.
#[test]
fn restart_redelivery_and_goal_revision() {
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    let r = receipt(&sel);
    let first = w.submit(start(0x60, WORKFLOW, Some(r))).unwrap();
    let again = w.submit(start(0x60, WORKFLOW, Some(r))).unwrap();
    assert!(again.duplicate && again.seq == first.seq);
    let (rule, _) = refused_rule(w.submit(start(0x60, WORKFLOW, None)));
    assert_eq!(rule, Rule::IdReused, "the same id with another selection is a new command");
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    let version = w.state().workflows[&lid(WORKFLOW)].version;
    w.submit(Command::RestartAttempt(RestartAttempt {
        attempt_id: lid(0x60),
        workflow_version: version,
        replacement_attempt_id: lid(0x62),
        worker_session_id: lid(0x63),
        reason: "worker crashed".to_owned(),
    }))
    .unwrap();
    let state = w.state();
    assert_eq!(state.attempts[&lid(0x62)].selection_receipt, Some(r));
    let found = closure_ledger::replay::recompile_attempt(w.dir(), lid(0x62)).unwrap().unwrap();
    assert!(found.matches_recorded && !found.compiled.package.selected_skills.is_empty());
    // A selection gone stale stops a restart, which carries it; the refusal names the way
    // out (the interrupted Attempt stays active): cancel it, start anew.
    let status: Value = w.s.json(&["profile", "status"], &["--json"]);
    let revision = status["revision"].as_u64().unwrap().to_string();
    assert_eq!(w.s.run(&["profile", "mode"], &["manual", "--expected-revision", &revision]).0, 0);
    let version = w.state().workflows[&lid(WORKFLOW)].version;
    let (rule, detail) = refused_rule(w.submit(Command::RestartAttempt(RestartAttempt {
        attempt_id: lid(0x62),
        workflow_version: version,
        replacement_attempt_id: lid(0x64),
        worker_session_id: lid(0x65),
        reason: "worker crashed again".to_owned(),
    })));
    assert_eq!(rule, Rule::AttemptSelection, "{detail}");
    assert!(detail.contains("stale") && detail.contains("cancelAttempt"), "{detail}");

    // A revised goal: the old revision's selection is refused for a new workflow.
    let mut w = world("auto");
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(Command::ReviseGoal(ReviseGoal {
        goal_id: lid(GOAL),
        revision: 2,
        content: closure_ledger::lifecycle::goal_content(),
    }))
    .unwrap();
    w.submit(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x32),
        goal_id: lid(GOAL),
        goal_revision: 2,
        policy_id: lid(POLICY),
        profile_id: lid(PROFILE),
        plan: None,
    }))
    .unwrap();
    let (rule, detail) = refused_rule(w.submit(start(0x6a, 0x32, Some(receipt(&sel)))));
    assert_eq!(rule, Rule::AttemptSelection, "{detail}");
    let mut t = explicit("discovery", &["skill:api-design"]);
    t["revision"] = json!(2);
    let sel2 = w.select(&t, &["--load"]);
    w.submit(start(0x6a, 0x32, Some(receipt(&sel2)))).unwrap();
    let _: Id = lid(0);
    let _ = Event::AttemptStarted;
    let _ = Ctx { time_ms: 0 };
}

/// A resource that is not deliverable text refuses the scan, with that reason: one not UTF-8
/// that its name does not mark as binary (a NUL byte or not), one with a control character
/// (ESC, NUL: they would reach the worker and a supervisor's terminal), a bidirectional
/// override or a TAG character — a generation would copy it into the agent's skill folder
/// (outside reviews 19, 91, 93), and nothing is recorded. (A binary file's `--load`
/// refusal: `resume_is_refused_after_a_loaded_skill_became_unselectable`.)
#[test]
fn a_resource_that_is_not_deliverable_text_is_refused_by_its_reason() {
    let w = world("auto");
    for (bytes, reason) in [
        (vec![0xff, 0xfe, 0x00, b'x'], "not UTF-8, and not binary"),
        (vec![0xff, 0xfe, b'x'], "not UTF-8, and not binary"),
        (b"clear \x1b[2J the screen\n".to_vec(), "a control character"),
        (b"nul \0 byte\n".to_vec(), "a control character"),
        ("reads \u{202E}backwards\n".as_bytes().to_vec(), "a bidirectional override"),
        ("hides \u{E0049}\u{E0067}\n".as_bytes().to_vec(), "a TAG character"),
    ] {
        std::fs::write(w.s.src.join("skills/python-patterns/references/details.md"), &bytes).unwrap();
        let head = w.head();
        let (code, _, err) = w.s.scan();
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("not deliverable text") && err.contains(reason), "{reason}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!err.contains('\u{1b}') && !err.contains('\u{202E}'), "never echoed raw: {err}");
        assert_eq!(w.head(), head, "nothing recorded");
    }
}

/// A profile change after the result does not make a passing result unacceptable: an
/// existing session keeps its context (seed 003), so a freeze and an ACCEPT hold the task
/// selection to what it was decided over, not to the profile configured since (outside
/// review 20, fifth pass: `profile mode` after the freeze refused the ACCEPT for good;
/// review 21: it also refused the freeze). Every other bound input is held as ever: a Human
/// Decision recorded after the freeze refuses the ACCEPT, with or without a profile change,
/// and so does one too large for its required budget — a context that no longer compiles
/// fails closed (review 21: it was admitted).
#[test]
fn a_profile_change_after_the_result_does_not_block_freeze_or_accept() {
    use closure_ledger::lifecycle::{digest_of, payload};
    use closure_ledger::runtime::command::{DecideAcceptance, FreezeGeneration, RecordHumanDecision};
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::{CheckResult, Phase, ResultKind, Verdict};
    #[derive(Clone, Copy, PartialEq)]
    enum Change {
        None,
        BeforeFreeze,
        AfterFreeze,
    }
    let huge = "Do not accept. ".repeat(2_600); // 39,000 bytes: over the 32 KiB class budget
    let cases = [
        ("profile change after the freeze", Change::AfterFreeze, None, true),
        ("profile change before the freeze", Change::BeforeFreeze, None, true),
        ("late decision", Change::None, Some("No: it changes."), false),
        ("profile change and a late decision", Change::AfterFreeze, Some("No: it changes."), false),
        ("decision over its budget", Change::None, Some(huge.as_str()), false),
    ];
    for (case, change, late_decision, accepted) in cases {
        let mut w = world("auto");
        w.with_ledger(|s| s.discover_and_plan()).unwrap();
        let sel = w.select(&explicit("implement", &["skill:api-design"]), &["--load"]);
        w.submit(start(0x64, WORKFLOW, Some(receipt(&sel)))).unwrap();
        w.with_ledger(|s| {
            s.claim(lid(0x64))?;
            let t = s.time_ms;
            s.deliver(lid(0x64), 0x74, payload(WorkerEventKind::CompletionRequest, t, "ready"))?;
            s.finish(0x64, ResultKind::CompletionRequest)
        })
        .unwrap();
        let profile_change = |w: &mut World| {
            let status: Value = w.s.json(&["profile", "status"], &["--json"]);
            let revision = status["revision"].as_u64().unwrap().to_string();
            let (code, _, err) =
                w.s.run(&["profile", "mode"], &["suggest", "--expected-revision", &revision]);
            assert_eq!(code, 0, "{case}: {err}");
        };
        if change == Change::BeforeFreeze {
            profile_change(&mut w);
        }
        w.submit(Command::FreezeGeneration(FreezeGeneration {
            generation_id: lid(0x80),
            candidate_digest: digest_of("candidate 1"),
            change_set_digest: digest_of("change set 1"),
        }))
        .unwrap_or_else(|e| panic!("{case}: the freeze: {e}"));
        if change == Change::AfterFreeze {
            profile_change(&mut w);
        }
        if let Some(answer) = late_decision {
            w.submit(Command::RecordHumanDecision(RecordHumanDecision {
                decision_id: lid(0x57),
                goal_id: lid(GOAL),
                question: "Keep parse()'s API?".into(),
                answer: answer.into(),
                decided_by: "human:alice".into(),
                supersedes: None,
            }))
            .unwrap();
        }
        w.with_ledger(|s| {
            s.advance(Phase::EvidenceBuild)?;
            s.evidence(0x90, 0x80, CheckResult::Pass, "passed")?;
            s.advance(Phase::FinalVerify)
        })
        .unwrap();
        let accept = w.submit(Command::DecideAcceptance(DecideAcceptance {
            decision_id: lid(0xa0),
            workflow_id: lid(WORKFLOW),
            generation_id: lid(0x80),
            verdict: Verdict::Accept,
            evidence_ids: None,
            reasons: vec!["passed".into()],
        }));
        if accepted {
            accept.unwrap_or_else(|e| panic!("{case}: {e}"));
        } else {
            let (rule, detail) = refused_rule(accept);
            assert_eq!(rule, Rule::ManifestStale, "{case}: {detail}");
        }
        let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{case}: {out}{err}");
    }
}

/// RESUME is refused once a skill the resumed Attempt's task selection loaded has been
/// withdrawn — excluded from the profile (outside review 47: the excluded skill's
/// instructions stayed in the resumed Thread while the new manifest showed no skill) — and
/// admitted after a profile change that withdraws nothing (seed 003 keeps an existing
/// session's context). Replay agrees either way.
#[test]
fn resume_is_refused_after_a_selected_skill_was_withdrawn() {
    for exclude in [true, false] {
        let mut w = ran_with_a_loaded_skill();
        let root = w.s.tmp.path().join("store");
        let (code, _, err) = if exclude {
            w.s.run(
                &["profile", "set"],
                &["lean", "--state-root", root.to_str().unwrap(), "--exclude", "skill:api-design"],
            )
        } else {
            w.s.run(&["profile", "mode"], &["manual", "--expected-revision", "1"])
        };
        assert_eq!(code, 0, "{err}");
        let resumed = w.submit(on_session_0x61(0x62, ThreadChoice::Resume, None));
        if exclude {
            let (rule, detail) = refused_rule(resumed);
            assert_eq!(rule, Rule::ThreadPolicy, "{detail}");
            assert!(detail.contains("skill:api-design") && detail.contains("excluded"), "{detail}");
        } else {
            resumed.unwrap();
        }
        let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{out}{err}");
    }
}

/// A rescan that changes no byte a selection loaded but makes its skill never selectable
/// (Codex's `agents/openai.yaml` adds `tools`: authority-bearing) withdraws it as an
/// exclusion does: RESUME is refused (outside review 85: it was admitted). A skill become
/// manual-only stays loadable where the user named it (an explicit selection): RESUME is
/// admitted. Replay agrees either way.
#[test]
fn resume_is_refused_after_a_loaded_skill_became_unselectable() {
    // A dependency added that cannot be loaded (a file it requires is not text): the
    // selection's load could no longer be made (outside review 86).
    let unloadable_dependency = |src: &Path| {
        write(
            &src.join("skills/zz-bin/SKILL.md"),
            "---\nname: zz-bin\ndescription: binary data\n---\n\n# bin\n",
        );
        std::fs::write(src.join("skills/zz-bin/data.bin"), [0xff_u8, 0xfe, 0x00]).unwrap();
        let registry = src.join("manifests/context-packs/skill-registry@1.json");
        let text = std::fs::read_to_string(&registry).unwrap();
        let text = text
            .replace(
                "\"dependencies\": [\"skill:testing\", \"skill:python-patterns\"]",
                "\"dependencies\": [\"skill:testing\", \"skill:python-patterns\", \"skill:zz-bin\"]",
            )
            .replacen(
                "\"skills\": [",
                "\"skills\": [\n    {\"id\": \"skill:zz-bin\", \"requiredResources\": [\"skills/zz-bin/data.bin\"]},",
                1,
            );
        write(&registry, &text);
    };
    for (yaml, refused) in [
        (Some("tools:\n  - name: shell\n"), true),
        (Some("policy:\n  allow_implicit_invocation: false\n"), false),
        (None, true),
    ] {
        let mut w = ran_with_a_loaded_skill();
        match yaml {
            Some(yaml) => write(&w.s.src.join("skills/api-design/agents/openai.yaml"), yaml),
            None => unloadable_dependency(&w.s.src),
        }
        let (code, _, err) = w.s.scan();
        assert_eq!(code, 0, "{err}");
        let resumed = w.submit(on_session_0x61(0x62, ThreadChoice::Resume, None));
        if refused {
            let (rule, detail) = refused_rule(resumed);
            assert_eq!(rule, Rule::ThreadPolicy, "{detail}");
            let why = if yaml.is_some() { "authority-bearing" } else { "not deliverable text" };
            assert!(detail.contains("could no longer be made") && detail.contains(why), "{detail}");
        } else {
            resumed.unwrap();
        }
        let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{out}{err}");
    }
}

/// The withdrawal of a skill is seen along a chain of RESUMEs and at a RESUME's dispatch
/// claim (outside review 49, P1s: A1 loaded the skill, A2 resumed A1 with no selection;
/// after the exclusion A3's RESUME of A2 was admitted, and so was the claim of a RESUME
/// started before the exclusion — neither package holds the skill, so no manifest changed).
#[test]
fn a_withdrawn_skill_is_seen_along_a_resume_chain_and_at_the_claim() {
    use closure_ledger::lifecycle::payload;
    use closure_ledger::runtime::command::CancelAttempt;
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = resuming_world();
    let on = on_session_0x61;
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(on(0x60, ThreadChoice::Fresh, Some(receipt(&sel)))).unwrap();
    let run = |w: &mut World, attempt: u128| {
        w.with_ledger(|s| {
            s.claim(lid(attempt))?;
            let t = s.time_ms;
            s.deliver(
                lid(attempt),
                attempt + 0x100,
                payload(WorkerEventKind::Proposals, t, "the proposals"),
            )?;
            s.finish(attempt, ResultKind::Proposals)
        })
    };
    run(&mut w, 0x60).unwrap();
    w.submit(on(0x62, ThreadChoice::Resume, None)).unwrap();
    run(&mut w, 0x62).unwrap();
    // A RESUME started before the exclusion is not dispatched after it.
    w.submit(on(0x64, ThreadChoice::Resume, None)).unwrap();
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w.s.run(
        &["profile", "set"],
        &["lean", "--state-root", root.to_str().unwrap(), "--exclude", "skill:api-design"],
    );
    assert_eq!(code, 0, "{err}");
    let (rule, detail) = refused_rule(w.with_ledger(|s| s.claim(lid(0x64))));
    assert_eq!(rule, Rule::ThreadPolicy, "{detail}");
    assert!(detail.contains("skill:api-design") && detail.contains("FRESH"), "{detail}");
    let version = w.state().workflows[&lid(0x31)].version;
    w.submit(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x64),
        workflow_version: version,
        reason: "its Thread holds an excluded skill".into(),
    }))
    .unwrap();
    // A3 resuming A2, whose Thread holds A1's skill.
    let (rule, detail) = refused_rule(w.submit(on(0x66, ThreadChoice::Resume, None)));
    assert_eq!(rule, Rule::ThreadPolicy, "{detail}");
    assert!(detail.contains("skill:api-design"), "{detail}");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A rescan that adds sources does not push out the stored bytes an open workflow's
/// Attempt stands on (outside review 52, P1: ~640 KiB of new skills sorting before the
/// loaded one took the registry entry's stored bytes, the dispatched Attempt — whose skill
/// had not changed — was marked CONTEXT_CHANGED, and its result was ignored).
#[test]
fn a_rescan_keeps_the_bytes_an_open_attempt_loaded() {
    use closure_ledger::lifecycle::payload;
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = world("auto");
    // A skill sorting after every other, of 20,000 bytes (within a load's cap).
    write_zz_loaded(&w);
    assert_eq!(w.s.scan().0, 0);
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w
        .s
        .run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap(), "--selection", "auto"]);
    assert_eq!(code, 0, "{err}");
    let sel = w.select(&explicit("discovery", &["skill:zz-loaded"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    // Eleven skills of ~58 KB sorting before it: past the entry's 640 KiB of stored bytes.
    for i in 0..11 {
        let dir = format!("aa-filler-{i:02}");
        write(
            &w.s.src.join(format!("skills/{dir}/SKILL.md")),
            &format!(
                "---\nname: {dir}\ndescription: Filler skill {i}.\n---\n\n{}\n",
                "filler text. ".repeat(4_500)
            ),
        );
    }
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let state = w.state();
    assert!(!state.attempts[&lid(0x60)].context_changed, "the loaded skill did not change");
    let registry = state.context_profiles.registry.clone().unwrap();
    let loaded = registry.sources.iter().find(|s| s.id == "skill:zz-loaded").unwrap();
    assert!(loaded.resources.iter().all(|r| r.content.is_some()), "its bytes stay stored");
    assert!(
        registry.sources.iter().flat_map(|s| &s.resources).any(|r| r.content.is_none()),
        "the entry's bound was reached: some bytes are stored by digest only"
    );
    w.with_ledger(|s| {
        let t = s.time_ms;
        s.deliver(lid(0x60), 0x70, payload(WorkerEventKind::Proposals, t, "the proposals"))?;
        s.finish(0x60, ResultKind::Proposals)
    })
    .unwrap();
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Nor do other skills' native flags files, which are always stored: they come after the
/// bytes an open Attempt loaded, and a tree whose flags files do not fit beside those is
/// refused, nothing recorded (outside review 206 F1, P2: three unrelated skills with 210 KB
/// `agents/openai.yaml` files each, stored first, pushed the loaded skill's unchanged bytes
/// out, and the dispatched Attempt was marked CONTEXT_CHANGED).
#[test]
fn other_skills_flags_files_do_not_push_out_the_bytes_an_open_attempt_loaded() {
    let mut w = world("auto");
    write_zz_loaded(&w);
    assert_eq!(w.s.scan().0, 0);
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w
        .s
        .run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap(), "--selection", "auto"]);
    assert_eq!(code, 0, "{err}");
    let sel = w.select(&explicit("discovery", &["skill:zz-loaded"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    let registry_before = w.state().context_profiles.registry.clone();
    for i in 0..3 {
        let dir = format!("big-{i}");
        skill(&w.s.src, &dir, &format!("Big flags {i}."), "Small.");
        write(
            &w.s.src.join(format!("skills/{dir}/agents/openai.yaml")),
            &format!("policy:\n  allow_implicit_invocation: true\n{}", "# padding\n".repeat(21_500)),
        );
    }
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("a native flags file is always stored"), "{err}");
    let state = w.state();
    assert_eq!(state.context_profiles.registry, registry_before, "nothing recorded");
    assert!(!state.attempts[&lid(0x60)].context_changed, "the loaded skill did not change");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// Nor does the configured base, grown past the bound: the bytes an open Attempt loaded are
/// stored before the configured generation's (outside review 207 F2, P2: both in one tier,
/// filled in id order, a base sorting first pushed the loaded skill's unchanged bytes out,
/// and the dispatched Attempt was marked CONTEXT_CHANGED); the base is then not loadable.
#[test]
fn a_grown_base_does_not_push_out_the_bytes_an_open_attempt_loaded() {
    let mut w = world("auto");
    write_zz_loaded(&w);
    for i in 0..3 {
        write(&w.s.src.join(format!("skills/testing/ref-{i}.md")), "reference line.\n");
    }
    assert_eq!(w.s.scan().0, 0);
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w.s.run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let sel = w.select(&explicit("discovery", &["skill:zz-loaded"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x60))).unwrap();
    // The Lean base (`skill:testing`, sorting before it) grows by 645 KB in the files its
    // generation installs, leaving less than the loaded skill's 20 KB free.
    for (i, lines) in [15_625, 15_625, 9_062].into_iter().enumerate() {
        write(&w.s.src.join(format!("skills/testing/ref-{i}.md")), &"reference line. ".repeat(lines));
    }
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let state = w.state();
    assert!(!state.attempts[&lid(0x60)].context_changed, "the loaded skill did not change");
    let registry = state.context_profiles.registry.clone().unwrap();
    let loaded = registry.sources.iter().find(|s| s.id == "skill:zz-loaded").unwrap();
    assert!(loaded.resources.iter().all(|r| r.content.is_some()), "its bytes stay stored");
    let base = registry.sources.iter().find(|s| s.id == "skill:testing").unwrap();
    assert!(base.resources.iter().any(|r| r.content.is_none()), "the grown base is what did not fit");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A resource is kept for the bytes an Attempt loaded, not for its name: files an earlier
/// Attempt of the open workflow loaded, changed since, do not go first and push out the
/// unchanged bytes a dispatched Attempt stands on (outside review 210 F1, P1: kept by
/// (id, path), three grown files took the stored bytes, and the dispatched Attempt was
/// marked CONTEXT_CHANGED).
#[test]
fn changed_files_an_earlier_attempt_loaded_are_not_kept_before_unchanged_ones() {
    use closure_ledger::lifecycle::payload;
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::{Phase, ResultKind};
    let mut w = world("auto");
    for dir in ["aa-1", "aa-2", "aa-3"] {
        skill(&w.s.src, dir, &format!("Small skill {dir}."), "Small.");
    }
    write_zz_loaded(&w);
    assert_eq!(w.s.scan().0, 0);
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w.s.run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let sel = w.select(&explicit("discovery", &["skill:aa-1", "skill:aa-2", "skill:aa-3"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| {
        s.claim(lid(0x60))?;
        let t = s.time_ms;
        s.deliver(lid(0x60), 0x70, payload(WorkerEventKind::Proposals, t, "the proposals"))?;
        s.finish(0x60, ResultKind::Proposals)?;
        s.advance(Phase::Plan)
    })
    .unwrap();
    let sel = w.select(&explicit("plan", &["skill:zz-loaded"]), &["--load"]);
    w.submit(start(0x62, WORKFLOW, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| s.claim(lid(0x62))).unwrap();
    // The first Attempt's files grow to fill the entry's stored bytes; zz-loaded is untouched.
    for (dir, size) in [("aa-1", 262_000), ("aa-2", 262_000), ("aa-3", 125_000)] {
        skill(&w.s.src, dir, &format!("Small skill {dir}."), &"x".repeat(size));
    }
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let state = w.state();
    assert!(!state.attempts[&lid(0x62)].context_changed, "the loaded skill did not change");
    let registry = state.context_profiles.registry.clone().unwrap();
    let loaded = registry.sources.iter().find(|s| s.id == "skill:zz-loaded").unwrap();
    assert!(loaded.resources.iter().all(|r| r.content.is_some()), "its bytes stay stored");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// An unchanged tree rescanned records nothing while the current snapshot stores every byte
/// open Attempts and the configured generation stand on — another choice of stored bytes
/// would be a newer snapshot, staling every open selection (outside review 210 F3, P2: after
/// a workflow closed, an identical rescan recorded one, and another workflow's Attempt could
/// not be claimed).
#[test]
fn an_unchanged_tree_rescanned_records_nothing_while_nothing_needed_is_missing() {
    use closure_ledger::runtime::command::{CancelWorkflow, StartWorkflow};
    let mut w = world("auto");
    let before = w.state().context_profiles.registry_seq;
    assert_eq!(w.s.scan().0, 0);
    assert_eq!(w.state().context_profiles.registry_seq, before, "identical: nothing recorded");
    write(
        &w.s.src.join("skills/zz-x/SKILL.md"),
        &format!("---\nname: zz-x\ndescription: Notes on x.\n---\n\n{}\n", "x".repeat(30_000)),
    );
    assert_eq!(w.s.scan().0, 0);
    // Workflow W1's Attempt loads zz-x; three big skills then fill the entry: zz-x is kept,
    // the last big one is stored by digest only.
    let sel = w.select(&explicit("discovery", &["skill:zz-x"]), &["--load"]);
    w.submit(start(0x60, WORKFLOW, Some(receipt(&sel)))).unwrap();
    for i in 0..3 {
        write(
            &w.s.src.join(format!("skills/big-{i}/SKILL.md")),
            &format!("---\nname: big-{i}\ndescription: Big skill {i}.\n---\n\n{}\n", "y".repeat(212_000)),
        );
    }
    assert_eq!(w.s.scan().0, 0);
    let recorded = w.state().context_profiles.registry_seq;
    // W1 ends; W2's Attempt, over a selection of unchanged, stored bytes, waits for its claim.
    let (version, policy, profile) = {
        let st = w.state();
        let wf = &st.workflows[&lid(WORKFLOW)];
        (wf.version, wf.policy.id, wf.profile.id)
    };
    w.submit(Command::CancelWorkflow(CancelWorkflow {
        workflow_id: lid(WORKFLOW),
        workflow_version: version,
        reason: "done".into(),
    }))
    .unwrap();
    w.submit(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x3F),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: policy,
        profile_id: profile,
        plan: None,
    }))
    .unwrap();
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(start(0x62, 0x3F, Some(receipt(&sel)))).unwrap();
    // The tree is unchanged: nothing is recorded, and the claim is admitted.
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(w.state().context_profiles.registry_seq, recorded, "nothing recorded");
    w.with_ledger(|s| s.claim(lid(0x62))).unwrap();
    // No Attempt awaits its claim now: the rescan chooses the stored bytes again, so what an
    // earlier need pushed out can be stored (outside review 213 F2: it never could be).
    let (code, out, err) = w.s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let state = w.state();
    assert_ne!(state.context_profiles.registry_seq, recorded, "the choice made again is recorded");
    let registry = state.context_profiles.registry.clone().unwrap();
    let big = registry.sources.iter().find(|s| s.id == "skill:big-2").unwrap();
    assert!(big.resources.iter().all(|r| r.content.is_some()), "stored once nothing keeps zz-x first");
}

/// The previous revision's generation — kept only so `rollback` can return to it — is stored
/// after every native flags file: a tree whose flags files fit beside what the configured
/// generation needs is not refused for it (outside review 207 F1, P2: Full's bytes, kept for
/// a rollback after `set lean`, refused a new skill's flags file, and every `select` and
/// `set` with it).
#[test]
fn the_previous_generation_does_not_refuse_a_flags_file() {
    let s = Setup::new();
    for i in 0..3 {
        write(
            &s.src.join(format!("skills/big-{i}/SKILL.md")),
            &format!(
                "---\nname: big-{i}\ndescription: Big skill {i}.\n---\n\n{}\n",
                "big text. ".repeat(20_000)
            ),
        );
    }
    assert_eq!(s.scan().0, 0);
    let root = s.tmp.path().join("store");
    for profile in ["full", "lean"] {
        let (code, _, err) = s.run(&["profile", "set"], &[profile, "--state-root", root.to_str().unwrap()]);
        assert_eq!(code, 0, "{profile}: {err}");
    }
    write(
        &s.src.join("skills/newtool/SKILL.md"),
        "---\nname: newtool\ndescription: A new tool.\n---\n\nNew.\n",
    );
    write(
        &s.src.join("skills/newtool/agents/openai.yaml"),
        &format!("policy:\n  allow_implicit_invocation: true\n{}", "# padding\n".repeat(6_000)),
    );
    let (code, out, err) = s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = s.run(&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

/// [`world`] in auto mode with workflow 0x31 under a profile whose `attemptThread` is RESUME.
/// Session 0x61's Attempt 0x60 started FRESH with an explicit selection that loaded
/// `skill:api-design`, dispatched and finished — a Thread a later Attempt may RESUME.
fn ran_with_a_loaded_skill() -> World {
    use closure_ledger::lifecycle::payload;
    use ledger_schema::events::WorkerEventKind;
    use ledger_schema::types::ResultKind;
    let mut w = resuming_world();
    let sel = w.select(&explicit("discovery", &["skill:api-design"]), &["--load"]);
    w.submit(on_session_0x61(0x60, ThreadChoice::Fresh, Some(receipt(&sel)))).unwrap();
    w.with_ledger(|s| {
        s.claim(lid(0x60))?;
        let t = s.time_ms;
        s.deliver(lid(0x60), 0x70, payload(WorkerEventKind::Proposals, t, "the proposals"))?;
        s.finish(0x60, ResultKind::Proposals)
    })
    .unwrap();
    w
}

/// Attempt `attempt` of workflow 0x31 on session 0x61.
fn on_session_0x61(attempt: u128, thread: ThreadChoice, selection: Option<Digest>) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(0x31),
        worker_session_id: lid(0x61),
        thread,
        selection_receipt: selection,
    })
}

fn resuming_world() -> World {
    use closure_ledger::lifecycle::profile;
    use closure_ledger::runtime::command::InstallProfile;
    let mut w = world("auto");
    let mut resuming = profile(false);
    resuming.name = "resuming".into();
    resuming.attempt_thread = ThreadChoice::Resume;
    w.submit(Command::InstallProfile(InstallProfile { profile_id: lid(0x14), profile: resuming })).unwrap();
    w.submit(Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(0x31),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(0x14),
        plan: None,
    }))
    .unwrap();
    w
}

/// A skill an earlier Attempt on the Thread loaded, withdrawn after a RESUME's dispatch
/// claim — the RESUME carrying no selection of its own — marks the dispatched RESUME: its
/// result is refused (outside review 93: only a RESUME carrying a selection was recompiled
/// after a profile change, and this one finished its result).
#[test]
fn a_skill_withdrawn_after_a_resumes_claim_marks_it() {
    use ledger_schema::types::ResultKind;
    let mut w = ran_with_a_loaded_skill();
    w.submit(on_session_0x61(0x62, ThreadChoice::Resume, None)).unwrap();
    w.with_ledger(|s| s.claim(lid(0x62)).map(drop)).unwrap();
    assert!(!w.state().attempts[&lid(0x62)].context_changed);
    let root = w.s.tmp.path().join("store");
    let (code, _, err) = w.s.run(
        &["profile", "set"],
        &["lean", "--state-root", root.to_str().unwrap(), "--exclude", "skill:api-design"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(w.state().attempts[&lid(0x62)].context_changed, "the dispatched RESUME is marked");
    let (rule, detail) = refused_rule(w.with_ledger(|s| s.finish(0x62, ResultKind::Proposals)));
    assert_eq!(rule, Rule::ManifestStale, "{detail}");
    let (code, out, err) = cli(&["replay", w.dir().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    // `compile` names the mark and the entry that made it — the profile revision (outside
    // review 104: no reader named it); the earlier Attempt, never marked, names none.
    let head = w.s.head().0;
    let dir = w.dir().to_str().unwrap().to_owned();
    let compile = |attempt: u128| cli(&["compile", &dir, "--attempt", &lid(attempt).to_string(), "--json"]);
    let (code, out, err) = compile(0x62);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["contextChangedAt"], json!({"seq": head, "kind": "profileRevisionRecorded"}), "{v}");
    assert!(err.contains(&format!("context changed while it was dispatched, at seq {head}")), "{err}");
    assert!(err.contains("ignored receipts (CONTEXT_CHANGED)") && err.contains("(ManifestStale)"), "{err}");
    assert_eq!(v["goalRevisedAt"], Value::Null, "{v}");
    // The Goal revised afterwards: that takes precedence from there on, and is named too
    // (outside review 109: only the first change's reasons were named).
    {
        use closure_ledger::lifecycle::{GOAL, goal_content};
        use closure_ledger::runtime::command::ReviseGoal;
        let mut content = goal_content();
        content.objective.push_str(" Also accept tabs.");
        w.submit(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content })).unwrap();
    }
    let revised = w.s.head().0;
    let (code, out, err) = compile(0x62);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["contextChangedAt"], json!({"seq": head, "kind": "profileRevisionRecorded"}), "{v}");
    assert_eq!(v["goalRevisedAt"], json!(revised), "{v}");
    assert!(
        err.contains(&format!("its Goal was revised at seq {revised}")) && err.contains("GOAL_REVISED"),
        "{err}"
    );
    let (code, out, err) = compile(0x60);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["contextChangedAt"], Value::Null, "{v}");
    assert!(!err.contains("context changed"), "{err}");
}

/// A Goal revised while an Attempt is dispatched changes its context too: `compile` names
/// the revision (`contextChangedAt`) and `status` counts the Attempt as `contextChanged`
/// (outside review 105: both said nothing, though its events were ignored receipts and
/// its finish refused).
#[test]
fn a_goal_revised_while_dispatched_is_named_as_the_change() {
    use closure_ledger::lifecycle::{GOAL, goal_content};
    use closure_ledger::runtime::command::ReviseGoal;
    let mut w = ran_with_a_loaded_skill();
    w.submit(on_session_0x61(0x62, ThreadChoice::Resume, None)).unwrap();
    w.with_ledger(|s| s.claim(lid(0x62)).map(drop)).unwrap();
    let mut content = goal_content();
    content.objective.push_str(" Also accept tabs.");
    w.submit(Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content })).unwrap();
    let head = w.s.head().0;
    let dir = w.dir().to_str().unwrap().to_owned();
    let (code, out, err) = cli(&["compile", &dir, "--attempt", &lid(0x62).to_string(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["contextChangedAt"], json!({"seq": head, "kind": "goalRevised"}), "{v}");
    assert!(err.contains("ignored receipts (GOAL_REVISED)") && err.contains("(StaleGoalRevision)"), "{err}");
    let (code, out, err) = cli(&["status", &dir, "--json"]);
    assert_eq!(code, 0, "{err}");
    let st: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(st["counts"]["attempts"]["contextChanged"], 1, "{st}");
}

/// `compile` of a RESUME Attempt names the Thread it continued — the worker session and the
/// earlier Attempts whose Turns it holds — beside the package (a note, and `resumedThread` in
/// `--json`); a FRESH Attempt's shows none (outside review 95 F2: the output read as if the
/// package were all the worker had).
#[test]
fn compile_names_a_resumed_thread() {
    use closure_ledger::runtime::command::CancelAttempt;
    let mut w = ran_with_a_loaded_skill();
    // A RESUME cancelled before its dispatch claim never reached the Thread: not one of the
    // Attempts whose Turns the worker had (outside review 193 F1: it was listed).
    w.submit(on_session_0x61(0x63, ThreadChoice::Resume, None)).unwrap();
    let version = w.with_ledger(|s| Ok(s.ledger.state().workflows[&lid(0x31)].version)).unwrap();
    w.submit(Command::CancelAttempt(CancelAttempt {
        attempt_id: lid(0x63),
        workflow_version: version,
        reason: "not needed".into(),
    }))
    .unwrap();
    w.submit(on_session_0x61(0x62, ThreadChoice::Resume, None)).unwrap();
    let dir = w.dir().to_str().unwrap().to_owned();
    let compile = |attempt: u128| cli(&["compile", &dir, "--attempt", &lid(attempt).to_string(), "--json"]);
    let (code, out, err) = compile(0x62);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        v["resumedThread"],
        json!({"workerSessionId": lid(0x61).to_string(), "earlierAttempts": [lid(0x60).to_string()]}),
        "{v}"
    );
    assert!(
        err.contains("resumed the Thread of worker session") && err.contains(&lid(0x60).to_string()),
        "{err}"
    );
    let (code, out, err) = compile(0x60);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["resumedThread"], Value::Null, "{v}");
    assert!(!err.contains("resumed"), "{err}");
}
