//! Ledgers replay across compiler versions (issue 11, item 3).
//!
//! `fixtures/compiler-v1/ledger.cborseq` is a ledger written once by compiler/1 (through
//! the live path, by `fixtures/compiler-v1/generate.rs`) and then frozen: a CBOR sequence
//! of its entries' canonical bytes, independent of the journal layout. These tests read
//! that file — they never regenerate it — and replay it through `replay::replay_entries`
//! (the store's chain checks and the same fold as `ledger replay`), with every Attempt's
//! manifest re-derived by the compiler its `compilerVersion` names.
//!
//! The binary releases compiler/2 (newest) and compiler/1. A ledger of v1 Attempts
//! followed by v2 Attempts replays under the released registry, each manifest re-derived by
//! its own version; a registry lacking either refuses at that version's first Attempt. A
//! later compiler is simulated by `NextCompiler` — a test-only compiler that renders
//! differently — to prove the dispatch beside a version this build does not have.

use std::collections::BTreeSet;
use std::path::PathBuf;

use closure_ledger::admission::{self, Refusal};
use closure_ledger::compiler::{
    self, COMPILER_VERSION, CompileError, Compiled, Compiler, RELEASED, Registry, v1, v2, v3, v4, v5, v6, v7,
    v8,
};
use closure_ledger::ledger::{Ledger, SubmitError};
use closure_ledger::lifecycle::{GOAL, POLICY, PROFILE, Script, lid};
use closure_ledger::replay::replay_entries;
use closure_ledger::runtime::command::{StartAttempt, StartWorkflow};
use closure_ledger::runtime::{self, AttemptBinding, Command, Ctx, Decided, State};
use closure_ledger::store::{Chain, MemStore, Store};
use ledger_schema::codec::{self, MAX_ENTRY_BYTES, RawBytes};
use ledger_schema::events::AttemptStarted;
use ledger_schema::package::{PACKAGE_SCHEMA_PLAIN, PACKAGE_SCHEMA_PROTECTED, PACKAGE_SCHEMA_REPAIR};
use ledger_schema::types::ThreadChoice;
use ledger_schema::{Digest, DigestKind, Entry, Event, FORMAT_VERSION, SealedEntry};
use replay_tests::{LEDGER, T0};

const V1: &str = "closure-ledger-compiler/1";
const V2: &str = "closure-ledger-compiler/2";
const V3: &str = "closure-ledger-compiler/3";
const V4: &str = "closure-ledger-compiler/4";
const V5: &str = "closure-ledger-compiler/5";
const V6: &str = "closure-ledger-compiler/6";
const V7: &str = "closure-ledger-compiler/7";
const V8: &str = "closure-ledger-compiler/8";
/// The fixture's head: seq 50, the hash of its last entry. Frozen with the file.
const FIXTURE_HEAD_SEQ: u64 = 50;
const FIXTURE_HEAD_HASH: &str = "b3:4165cc3e024ff49754ef4b6cb4fb089e80e2f0bfa98664d66a1ad76213872619";

/// A test-only "next" compiler: compiler/1's selection with a different rendering of the
/// phase objective, so its package bytes differ from v1's for every Attempt.
struct NextCompiler;

const NEXT: &str = "replay-tests/next-compiler";

impl Compiler for NextCompiler {
    fn version(&self) -> &'static str {
        NEXT
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        let mut c = v1::V1.compile(state, binding)?;
        c.package.phase_objective = format!("Phase objective: {}", c.package.phase_objective);
        c.package_bytes = codec::encode(&c.package);
        c.manifest.package_digest = Digest::of(DigestKind::Package, &c.package_bytes);
        c.manifest.compiler_version = NEXT.to_owned();
        Ok(c)
    }
}

/// A build after a compiler change: the next compiler is the newest, v1 is kept.
static WITH_NEXT: Registry<'static> = Registry::new(&NextCompiler, &[&v1::V1]);
/// A build that dropped v1.
static NEXT_ONLY: Registry<'static> = Registry::new(&NextCompiler, &[]);
/// A build from before compiler/2: v1 only.
static V1_ONLY: Registry<'static> = Registry::new(&v1::V1, &[]);
/// A build that dropped compiler/1.
static WITHOUT_V1: Registry<'static> =
    Registry::new(&v8::V8, &[&v7::V7, &v6::V6, &v5::V5, &v4::V4, &v3::V3, &v2::V2]);

fn fixture_file() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/compiler-v1/ledger.cborseq");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Splits the CBOR sequence into its byte strings (each strictly decoded, canonical).
fn entries(file: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < file.len() {
        let end = codec::item_end(file, at).unwrap();
        let raw: RawBytes<'_> = codec::decode_borrowed(&file[at..end], MAX_ENTRY_BYTES + 9).unwrap();
        out.push(raw.0);
        at = end;
    }
    out
}

fn sealed(file: &[u8]) -> Vec<SealedEntry> {
    entries(file).into_iter().map(|b| SealedEntry::open(b).unwrap()).collect()
}

fn attempt(e: &SealedEntry) -> Option<&AttemptStarted> {
    match &e.entry.event {
        Event::AttemptStarted(a) => Some(a),
        _ => None,
    }
}

/// The frozen compiler/1 ledger replays under this build: chain, every rule, and all
/// five manifests re-derived by compiler/1, ending on the frozen head.
#[test]
fn compiler_v1_fixture_replays() {
    let file = fixture_file();
    let entries = entries(&file);
    // The parser consumed exactly the file: nothing skipped, nothing trailing.
    let again: Vec<u8> = entries.iter().flat_map(|e| codec::encode(&RawBytes(e))).collect();
    assert_eq!(again, file);

    let report = replay_entries(&RELEASED, entries.iter().copied());
    assert!(report.ok, "{:?}", report.failure);
    assert_eq!(report.entries, FIXTURE_HEAD_SEQ + 1);
    assert_eq!(report.folded, FIXTURE_HEAD_SEQ + 1);
    assert_eq!(report.head_seq, FIXTURE_HEAD_SEQ);
    assert_eq!(report.head_hash.to_string(), FIXTURE_HEAD_HASH);
    assert_eq!(report.manifests_proved, 5);
    assert_eq!(report.attempts.len(), 5);
    for a in &report.attempts {
        assert!(a.proved, "{a:?}");
        assert_eq!(a.compiler_version, V1, "{a:?}");
    }
    assert_eq!(report.verdicts.get("ACCEPT"), Some(&1));
    assert_eq!(report.verdicts.get("REJECT_REPAIRABLE"), Some(&1));
    assert_eq!((report.goals, report.workflows), (1, 2));
}

/// The fixture exercises each package schema: plain, repair (with feedback) and
/// protected (plan pair), and each manifest is re-derived through the registry entry for
/// its recorded version, package bytes matching the recorded package digest.
#[test]
fn fixture_manifests_are_derived_through_the_registry() {
    let file = fixture_file();
    let mut state = State::default();
    let mut schemas = BTreeSet::new();
    let mut feedback = 0;
    for e in sealed(&file) {
        if let Some(a) = attempt(&e) {
            let by_version = compiler::for_version(&a.manifest.compiler_version).expect("released");
            assert_eq!(by_version.version(), V1);
            let compiled = admission::recompile(&state, a).unwrap();
            assert_eq!(compiled.manifest, a.manifest);
            assert_eq!(compiled.manifest_digest(), a.manifest_digest);
            assert_eq!(Digest::of(DigestKind::Package, &compiled.package_bytes), a.manifest.package_digest);
            schemas.insert(compiled.package.schema_version);
            feedback += usize::from(compiled.package.prior_attempt_feedback.is_some());
        }
        admission::apply(&mut state, &e.entry).unwrap();
    }
    assert_eq!(
        schemas,
        BTreeSet::from([PACKAGE_SCHEMA_PLAIN, PACKAGE_SCHEMA_REPAIR, PACKAGE_SCHEMA_PROTECTED])
    );
    assert_eq!(feedback, 1);
}

/// After a compiler change the v1 ledger still replays: beside a newer compiler whose
/// packages differ, each v1 manifest is re-derived by v1. A build without v1 cannot
/// prove them and says which version it lacks, at the first Attempt.
#[test]
fn v1_fixture_replays_beside_a_newer_compiler() {
    let file = fixture_file();
    let entries = entries(&file);
    let report = replay_entries(&WITH_NEXT, entries.iter().copied());
    assert!(report.ok, "{:?}", report.failure);
    assert_eq!(report.manifests_proved, 5);
    assert!(report.attempts.iter().all(|a| a.compiler_version == V1));
    assert_eq!(report.head_hash.to_string(), FIXTURE_HEAD_HASH);

    // The premise: the newer compiler really derives other bytes for these Attempts, so
    // only dispatch on the recorded version can have proved them.
    let mut state = State::default();
    let mut differing = 0;
    for e in sealed(&file) {
        if let Some(a) = attempt(&e) {
            let old = admission::recompile_with(&WITH_NEXT, &state, a).unwrap();
            let binding = runtime::attempt_binding(
                &state,
                &StartAttempt {
                    attempt_id: a.attempt_id,
                    workflow_id: a.workflow_id,
                    worker_session_id: a.worker_session_id,
                    thread: a.thread,
                    selection_receipt: None,
                },
            )
            .unwrap();
            let new = WITH_NEXT.newest().compile(&state, &binding).unwrap();
            assert_ne!(new.package_bytes, old.package_bytes);
            assert_ne!(new.manifest_digest(), a.manifest_digest);
            differing += 1;
        }
        admission::apply_with(&WITH_NEXT, &mut state, &e.entry).unwrap();
    }
    assert_eq!(differing, 5);

    let first_attempt = sealed(&file).iter().find(|e| attempt(e).is_some()).unwrap().entry.seq;
    let refused = replay_entries(&NEXT_ONLY, entries.iter().copied());
    assert!(!refused.ok);
    let failure = refused.failure.unwrap();
    assert_eq!((failure.seq, failure.kind.as_str()), (first_attempt, "attemptStarted"));
    assert!(failure.reason.contains("compiler version \"closure-ledger-compiler/1\""), "{}", failure.reason);
    assert!(failure.reason.contains(NEXT), "{}", failure.reason);
    assert_eq!(refused.folded, first_attempt);
}

/// The fixture's entry bytes followed by `commands`, each decided and admitted under
/// `registry` (so a `startAttempt` compiles with its newest); also the compiler versions
/// the new Attempt starts recorded.
fn fixture_then(registry: &Registry<'_>, commands: &[Command]) -> (Vec<Vec<u8>>, Vec<String>) {
    let file = fixture_file();
    let mut chain = Chain::empty();
    let mut state = State::default();
    let mut all: Vec<Vec<u8>> = Vec::new();
    for bytes in entries(&file) {
        let e = chain.verify(bytes).unwrap();
        admission::apply_with(registry, &mut state, &e.entry).unwrap();
        all.push(e.bytes);
    }
    let mut recorded = Vec::new();
    let mut time_ms = chain.head().unwrap().time_ms;
    for command in commands {
        time_ms += 1000;
        let Decided::Events(events) = admission::decide_with(registry, &state, command).unwrap() else {
            panic!("not a redelivery");
        };
        for event in events {
            if let Event::AttemptStarted(a) = &event {
                recorded.push(a.manifest.compiler_version.clone());
            }
            let e = chain.seal(event, time_ms, LEDGER).unwrap();
            admission::apply_with(registry, &mut state, &e.entry).unwrap();
            all.push(e.bytes);
        }
    }
    (all, recorded)
}

/// A new Workflow on the fixture's goal, in DISCOVERY.
fn start_workflow(workflow: u128) -> Command {
    Command::StartWorkflow(StartWorkflow {
        workflow_id: lid(workflow),
        goal_id: lid(GOAL),
        goal_revision: 1,
        policy_id: lid(POLICY),
        profile_id: lid(PROFILE),
        plan: None,
    })
}

fn start_attempt(attempt: u128, workflow: u128) -> Command {
    Command::StartAttempt(StartAttempt {
        attempt_id: lid(attempt),
        workflow_id: lid(workflow),
        worker_session_id: lid(attempt + 1),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    })
}

/// The released build: a ledger of compiler/1 Attempts (the frozen fixture) followed by
/// newest-compiler (compiler/8) Attempts replays, each manifest re-derived by the version it
/// records. A build from before compiler/2 refuses at the first new Attempt, naming
/// compiler/8; a build without compiler/1 refuses at the first v1 Attempt, naming
/// compiler/1.
#[test]
fn v1_attempts_then_newest_attempts_replay() {
    let commands =
        [start_workflow(0x32), start_attempt(0x6a, 0x32), start_workflow(0x33), start_attempt(0x6c, 0x33)];
    let (all, recorded) = fixture_then(&RELEASED, &commands);
    assert_eq!(recorded, [V8, V8], "new Attempts start on compiler/8");
    let report = replay_entries(&RELEASED, all.iter().map(Vec::as_slice));
    assert!(report.ok, "{:?}", report.failure);
    let versions: Vec<&str> = report.attempts.iter().map(|a| a.compiler_version.as_str()).collect();
    assert_eq!(versions, [V1, V1, V1, V1, V1, V8, V8]);
    assert!(report.attempts.iter().all(|a| a.proved));
    assert_eq!(report.manifests_proved, 7);
    assert_eq!(report.head_seq, FIXTURE_HEAD_SEQ + 4);

    let first_v2 = FIXTURE_HEAD_SEQ + 2;
    let before_v2 = replay_entries(&V1_ONLY, all.iter().map(Vec::as_slice));
    let failure = before_v2.failure.unwrap();
    assert_eq!((failure.seq, failure.kind.as_str()), (first_v2, "attemptStarted"));
    assert!(failure.reason.contains(&format!("compiler version {V8:?}")), "{}", failure.reason);
    assert_eq!(before_v2.folded, first_v2);

    let first_v1 = sealed(&fixture_file()).iter().find(|e| attempt(e).is_some()).unwrap().entry.seq;
    let without_v1 = replay_entries(&WITHOUT_V1, all.iter().map(Vec::as_slice));
    let failure = without_v1.failure.unwrap();
    assert_eq!(failure.seq, first_v1);
    assert!(failure.reason.contains(&format!("compiler version {V1:?}")), "{}", failure.reason);
}

/// The build before compiler/3 (compiler/2 newest).
static PREVIOUS: Registry<'static> = Registry::new(&v2::V2, &[&v1::V1]);

/// A ledger the previous build wrote — compiler/1 Attempts, then compiler/2 ones — replays
/// on this build with each manifest proved by the compiler it names.
#[test]
fn v2_ledgers_of_the_previous_build_replay() {
    let commands = [start_workflow(0x32), start_attempt(0x6a, 0x32)];
    let (all, recorded) = fixture_then(&PREVIOUS, &commands);
    assert_eq!(recorded, [V2]);
    let report = replay_entries(&RELEASED, all.iter().map(Vec::as_slice));
    assert!(report.ok, "{:?}", report.failure);
    let versions: Vec<&str> = report.attempts.iter().map(|a| a.compiler_version.as_str()).collect();
    assert_eq!(versions, [V1, V1, V1, V1, V1, V2]);
    assert!(report.attempts.iter().all(|a| a.proved));
    assert_eq!(report.manifests_proved, 6);
}

/// New Attempts start on the newest compiler, at admission too: on top of the v1 ledger a
/// new Attempt records the next compiler, and the mixed ledger replays with each manifest
/// proved by its own version. The released build, lacking that version, refuses it.
#[test]
fn new_attempts_start_on_the_newest_compiler() {
    let (all, recorded) = fixture_then(&WITH_NEXT, &[start_workflow(0x32), start_attempt(0x6a, 0x32)]);
    assert_eq!(recorded, [NEXT]);
    let new_attempt = FIXTURE_HEAD_SEQ + 2;

    let mixed = replay_entries(&WITH_NEXT, all.iter().map(Vec::as_slice));
    assert!(mixed.ok, "{:?}", mixed.failure);
    let versions: Vec<&str> = mixed.attempts.iter().map(|a| a.compiler_version.as_str()).collect();
    assert_eq!(versions, [V1, V1, V1, V1, V1, NEXT]);
    assert_eq!(mixed.manifests_proved, 6);
    assert_eq!(mixed.head_seq, new_attempt);

    let released = replay_entries(&RELEASED, all.iter().map(Vec::as_slice));
    assert!(!released.ok);
    let failure = released.failure.unwrap();
    assert_eq!(failure.seq, new_attempt);
    assert!(failure.reason.contains(&format!("compiler version {NEXT:?}")), "{}", failure.reason);
    assert!(failure.reason.contains(V1), "it names what it has: {}", failure.reason);
}

/// Live admission refuses an Attempt start whose manifest names a compiler this build
/// lacks — a typed error carrying the version — and writes nothing.
#[test]
fn unknown_compiler_version_is_refused_by_name() {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.setup().unwrap();
    let start = Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x60),
        workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
        worker_session_id: lid(0x61),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    });
    let ctx = Ctx { time_ms: T0 + 100_000 };
    let Decided::Events(events) = admission::decide(ledger.state(), &start).unwrap() else {
        panic!("not a redelivery");
    };
    let Some(Event::AttemptStarted(mut a)) = events.into_iter().next() else { panic!("an attempt start") };
    assert_eq!(a.manifest.compiler_version, COMPILER_VERSION);

    let before = (ledger.store().head(), ledger.state().digest());
    for version in ["closure-ledger-compiler/9", "closure-ledger-compiler/0", "", &"x\n".repeat(500)] {
        a.manifest.compiler_version = version.to_owned();
        a.manifest_digest = a.manifest.digest(); // a consistent manifest, but not derivable here
        let err = ledger.admit(vec![Event::AttemptStarted(a.clone())], ctx).unwrap_err();
        match &err {
            SubmitError::Refused(Refusal::UnknownCompilerVersion { attempt, version: v, known }) => {
                assert_eq!(*attempt, lid(0x60));
                assert_eq!(v, version);
                assert_eq!(known, &[V8, V7, V6, V5, V4, V3, V2, V1]);
            }
            other => panic!("{other:?}"),
        }
        let message = err.to_string();
        assert!(!message.contains('\n'), "one line: {message}");
        assert!(message.len() < 512, "clipped: {message}");
        let shown = format!("{:?}", version.get(..20).unwrap_or(version));
        assert!(message.contains(shown.trim_end_matches('"')), "names {shown}: {message}");
        assert_eq!((ledger.store().head(), ledger.state().digest()), before, "nothing written");
    }
    // The derived one is admitted.
    a.manifest.compiler_version = COMPILER_VERSION.to_owned();
    a.manifest_digest = a.manifest.digest();
    ledger.admit(vec![Event::AttemptStarted(a)], ctx).unwrap();
}

/// The released registry: newest is `COMPILER_VERSION`, versions are unique, each
/// resolves to itself, and each compiler records its own version in what it derives.
#[test]
fn released_registry_is_keyed_by_version() {
    let versions = RELEASED.versions();
    assert_eq!(versions.first(), Some(&COMPILER_VERSION));
    assert_eq!(RELEASED.newest().version(), COMPILER_VERSION);
    assert_eq!(versions.iter().collect::<BTreeSet<_>>().len(), versions.len(), "unique: {versions:?}");
    assert_eq!(
        versions,
        [V8, V7, V6, V5, V4, V3, V2, V1],
        "compiler/8 is the newest; compilers 1 to 7 wrote ledgers: they are never dropped"
    );
    assert_eq!(RELEASED.newest().version(), v8::VERSION);
    assert!(compiler::for_version("closure-ledger-compiler/0").is_none());
    assert!(compiler::for_version("closure-ledger-compiler/1 ").is_none());

    let file = fixture_file();
    let mut state = State::default();
    for e in sealed(&file) {
        if let Some(a) = attempt(&e) {
            let start = StartAttempt {
                attempt_id: a.attempt_id,
                workflow_id: a.workflow_id,
                worker_session_id: a.worker_session_id,
                thread: a.thread,
                selection_receipt: None,
            };
            let binding = runtime::attempt_binding(&state, &start).unwrap();
            for version in &versions {
                let c = compiler::for_version(version).unwrap();
                assert_eq!(c.version(), *version);
                assert_eq!(c.compile(&state, &binding).unwrap().manifest.compiler_version, *version);
            }
        }
        admission::apply(&mut state, &e.entry).unwrap();
    }
}

/// The event catalog: the fixture was written under catalog 1 (its genesis says so) in
/// entry format 1; each entry decodes strictly under this build's catalog, re-encodes to
/// the same bytes, and every kind it holds is still a kind of the catalog.
#[test]
fn catalog_v1_entries_decode_under_this_build() {
    let file = fixture_file();
    let all = sealed(&file);
    let Event::LedgerInitialized(genesis) = &all[0].entry.event else { panic!("genesis first") };
    assert_eq!(genesis.catalog, 1);
    let mut kinds = BTreeSet::new();
    for e in &all {
        assert_eq!(e.entry.v, 1);
        assert!(e.entry.v <= FORMAT_VERSION);
        assert_eq!(Entry::decode(&e.bytes).unwrap().encode(), e.bytes);
        assert!(Event::KINDS.contains(&e.entry.event.kind()));
        kinds.insert(e.entry.event.kind());
    }
    assert!(kinds.len() >= 20, "the fixture covers most kinds: {kinds:?}");
}

/// Compiler/2 writes every closed enum value by its serde wire name: for every variant of
/// each type it names, the name's canonical encoding is the value's own (so a renamed Rust
/// variant cannot move a byte, and a name that drifted from the wire fails here).
#[test]
fn v2_names_are_the_wire_names() {
    use closure_ledger::compiler::v2::WireName;
    use closure_ledger::runtime::state::FactStatus;
    use ledger_schema::package::FeedbackKind;
    use ledger_schema::types::{CheckResult, InputClass, Phase, ResultKind};

    macro_rules! check {
        ($all:expr) => {{
            let all = $all;
            for v in &all {
                assert_eq!(codec::encode(v), codec::encode(&v.wire_name()), "{v:?}");
                assert!(v.wire_name().bytes().all(|b| b.is_ascii_uppercase() || b == b'_'), "{v:?}");
            }
            all.len()
        }};
    }
    use InputClass as C;
    let n =
        check!([Phase::Discovery, Phase::Plan, Phase::Implement, Phase::EvidenceBuild, Phase::FinalVerify])
            + check!([
                C::Identity,
                C::Phase,
                C::Goal,
                C::BlockersDecisions,
                C::FactsScenariosObligations,
                C::ProjectMaterial,
                C::Working,
            ])
            + check!([FactStatus::Proposed, FactStatus::Confirmed, FactStatus::Invalidated])
            + check!([ResultKind::Proposals, ResultKind::CompletionRequest])
            + check!([CheckResult::Pass, CheckResult::Fail, CheckResult::Error])
            + check!([
                FeedbackKind::FailedCheck,
                FeedbackKind::ParentChangeSet,
                FeedbackKind::PreservationConstraint
            ]);
    assert_eq!(n, 23);
}

/// Compiler versions never go back along a ledger: once an Attempt start records
/// compiler/4, a later start recording compiler/3 or /2 — a consistent manifest that
/// compiler derives, as a hand-built ledger could hold — is refused
/// (`Refusal::CompilerDowngrade`), so an older version's older rules (compiler/2 Attempts
/// finish without a terminal Worker event) cannot be picked per Attempt (outside review
/// 23). The same start on the newest compiler is admitted.
#[test]
fn compiler_versions_never_go_back() {
    use closure_ledger::runtime::command::CancelAttempt;
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap();
    let mut script = Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() };
    script.setup().unwrap();
    script.start(0x60, 0x61).unwrap();
    script
        .run(Command::CancelAttempt(CancelAttempt {
            attempt_id: lid(0x60),
            workflow_version: 1,
            reason: "superseded".to_owned(),
        }))
        .unwrap();
    let start = Command::StartAttempt(StartAttempt {
        attempt_id: lid(0x62),
        workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
        worker_session_id: lid(0x63),
        thread: ThreadChoice::Fresh,
        selection_receipt: None,
    });
    let Decided::Events(events) = admission::decide(ledger.state(), &start).unwrap() else {
        panic!("not a redelivery");
    };
    let Some(Event::AttemptStarted(newest)) = events.into_iter().next() else { panic!("an attempt start") };
    let binding = closure_ledger::runtime::attempt_binding(
        ledger.state(),
        &StartAttempt {
            attempt_id: lid(0x62),
            workflow_id: lid(closure_ledger::lifecycle::WORKFLOW),
            worker_session_id: lid(0x63),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        },
    )
    .unwrap();
    let ctx = Ctx { time_ms: T0 + 100_000 };
    let before = (ledger.store().head(), ledger.state().digest());
    for older in [&v7::V7 as &dyn Compiler, &v6::V6, &v5::V5, &v4::V4, &v3::V3, &v2::V2] {
        let compiled = older.compile(ledger.state(), &binding).unwrap();
        let mut a = newest.clone();
        a.manifest_digest = compiled.manifest_digest();
        a.manifest = compiled.manifest;
        let err = ledger.admit(vec![Event::AttemptStarted(a)], ctx).unwrap_err();
        match &err {
            SubmitError::Refused(Refusal::CompilerDowngrade { attempt, version, newer }) => {
                assert_eq!(*attempt, lid(0x62));
                assert_eq!(version, older.version());
                assert_eq!(*newer, v8::VERSION);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((ledger.store().head(), ledger.state().digest()), before, "nothing written");
    }
    ledger.admit(vec![Event::AttemptStarted(newest)], ctx).unwrap();
}
