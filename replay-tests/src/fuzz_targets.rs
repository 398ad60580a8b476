//! The bodies of the fuzz targets, shared by `fuzz/` (cargo-fuzz, libFuzzer) and by the
//! stable-toolchain test that replays every committed corpus file (`tests/fuzz_corpus.rs`).
//! Each panics only when a property fails.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use closure_ledger::compiler::compile;
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::{self, Script, lid};
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Ctx, State, attempt_binding};
use closure_ledger::store::{self, Checkpoint, DiskStore, MemStore, Store};
use ledger_schema::events::WorkerEventKind;
use ledger_schema::types::{CheckResult, Phase, ResultKind, ThreadChoice, Verdict};
use ledger_schema::{Digest, Entry, Id, SealedEntry, codec, decode_frame, encode_frame};

use crate::{LEDGER, T0};

/// Arbitrary bytes into the strict entry decoder: never a panic; anything accepted
/// re-encodes to the same bytes; and the codec's answer (the strict fast path, then the
/// reference path for what it refuses) is the reference path's, verdict and offset.
pub fn decode_entry(data: &[u8]) {
    let reference: Result<Entry, _> = codec::decode_borrowed_reference(data, codec::MAX_ENTRY_BYTES);
    assert_eq!(codec::decode_borrowed::<Entry>(data, codec::MAX_ENTRY_BYTES), reference);
    if let Ok(entry) = Entry::decode(data) {
        assert_eq!(entry.encode(), data, "accepted bytes must be canonical");
        assert!(data.len() <= codec::MAX_ENTRY_BYTES);
        assert_eq!(reference, Ok(entry));
    }
}

/// Arbitrary bytes into the strict frame decoder: never a panic; anything accepted
/// re-encodes to the same bytes, within the frame bounds.
pub fn decode_frame_target(data: &[u8]) {
    if let Ok(entries) = decode_frame(data) {
        assert!(!entries.is_empty() && entries.len() <= codec::MAX_FRAME_ENTRIES);
        assert_eq!(encode_frame(entries.iter().copied()), data);
        for e in entries {
            decode_entry(e);
        }
    }
}

fn world_ledger() -> &'static Ledger<MemStore> {
    static WORLD: OnceLock<Ledger<MemStore>> = OnceLock::new();
    WORLD.get_or_init(|| crate::world::World::at(crate::world::Stage::Implementing).ledger)
}

/// Arbitrary bytes into the JSON command parser: never a panic; a parsed command
/// round-trips through JSON; submitting it to a live ledger either admits it or leaves
/// every stored byte and the state unchanged.
pub fn decode_command_json(data: &[u8]) {
    if data.len() > MAX_COMMAND_BYTES {
        return;
    }
    let Ok(command) = serde_json::from_slice::<Command>(data) else { return };
    let again = serde_json::to_vec(&command).unwrap_or_default();
    assert_eq!(serde_json::from_slice::<Command>(&again).ok().as_ref(), Some(&command));
    let mut ledger = world_ledger().clone();
    let frames = ledger.store().frames().to_vec();
    let digest = ledger.state().digest();
    if ledger.submit(&command, Ctx { time_ms: T0 + 10_000_000 }).is_err() {
        assert_eq!(ledger.store().frames(), frames.as_slice(), "a refused command wrote bytes");
        assert_eq!(ledger.state().digest(), digest, "a refused command changed the state");
    }
}

fn checkpoint_store() -> &'static MemStore {
    static STORE: OnceLock<MemStore> = OnceLock::new();
    STORE.get_or_init(|| crate::world::World::at(crate::world::Stage::Accepted).ledger.into_store())
}

/// Arbitrary bytes into checkpoint parsing and verification: never a panic; a parsed
/// checkpoint verifies exactly when it names an entry's true hash and ledger.
pub fn checkpoint_json(data: &[u8]) {
    let Ok(cp) = Checkpoint::parse(data) else { return };
    let store = checkpoint_store();
    match store.read(cp.seq) {
        Ok(sealed) => {
            let ok = cp.check(&sealed).is_ok();
            assert_eq!(ok, sealed.hash == cp.hash && sealed.entry.ledger == cp.ledger_id);
        }
        Err(_) => assert!(cp.seq > store.head().seq),
    }
}

// ---------------------------------------------------------------------------------------
// command_sequence: model-based conformance.

/// One step of a run. `Submit` builds a command from the current state (mostly
/// admissible, sometimes perturbed), so runs reach deep states.
#[derive(Debug, Clone)]
pub enum Op {
    Submit(Pick),
    Reopen,
    Replay,
    Compile(u8),
}

impl<'a> Arbitrary<'a> for Op {
    /// Mostly submissions (about 94%): deep states need long admissible runs.
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Op> {
        Ok(match u8::arbitrary(u)? {
            0..=4 => Op::Reopen,
            5..=9 => Op::Replay,
            10..=15 => Op::Compile(u8::arbitrary(u)?),
            _ => Op::Submit(Pick::arbitrary(u)?),
        })
    }
}

/// Choices the generator turns into a command against the current state.
#[derive(Debug, Clone, Arbitrary)]
pub struct Pick {
    pub action: u8,
    pub target: u8,
    pub variant: u8,
    /// Perturb the otherwise admissible command (wrong digest, id, version, kind ...).
    pub perturb: Option<u8>,
}

fn nth<K: Copy + Ord, V: Clone>(map: &closure_ledger::runtime::state::Map<K, V>, i: u8) -> Option<(K, V)> {
    if map.is_empty() {
        return None;
    }
    let idx = usize::from(i) % map.len();
    map.iter().nth(idx).map(|(k, v)| (*k, v.clone()))
}

fn fresh_id(state: &State, salt: u8) -> Id {
    lid(0x50_0000 + u128::from(state.entries) * 256 + u128::from(salt))
}

/// Builds the command `pick` describes, from `state`.
pub fn command_for(state: &State, pick: &Pick) -> Option<Command> {
    use closure_ledger::lifecycle::{
        GOAL, POLICY, PROFILE, PROTECTED_PROFILE, digest_of, goal_content, plan_pair,
    };
    let wf = nth(&state.workflows, pick.target);
    let v = pick.variant;
    // Half of the picks take the next lifecycle step of a workflow, so runs go deep.
    if pick.action >= 64 {
        let mut c = match wf {
            Some((id, _)) => next_step(state, id, v),
            None => None,
        }
        .or_else(|| command_for(state, &Pick { action: 1, target: 0, variant: v, perturb: None }))?;
        if let Some(p) = pick.perturb.filter(|p| p.is_multiple_of(4)) {
            perturb(&mut c, p);
        }
        return Some(c);
    }
    let mut c = match pick.action % 16 {
        // Retiring the setup's obligation or scenario (admitted only after a revision).
        0 if v % 8 == 7 => Command::RetireObligation(RetireObligation {
            obligation_id: lid(lifecycle::OBLIGATION),
            reason: "revised".into(),
        }),
        0 if v % 8 == 6 => {
            Command::RetireScenario(RetireScenario { scenario_id: lid(0x42), reason: "revised".into() })
        }
        // The goal's standing Human Decision withdrawn, then the question answered again
        // (outside review 135).
        0 if v % 8 == 4 => {
            let (latest, d) = state
                .human_decisions
                .iter()
                .filter(|(_, d)| d.goal_id == lid(GOAL))
                .max_by_key(|(_, d)| d.seq)
                .map(|(id, d)| (*id, d.clone()))?;
            if d.withdrawn_seq.is_none() {
                Command::WithdrawHumanDecision(WithdrawHumanDecision {
                    decision_id: latest,
                    reason: "recorded in error".into(),
                    withdrawn_by: "human:alice".into(),
                })
            } else {
                Command::RecordHumanDecision(RecordHumanDecision {
                    decision_id: fresh_id(state, 17),
                    goal_id: lid(GOAL),
                    question: d.question,
                    answer: "No, keep it as it is.".into(),
                    decided_by: "human:alice".into(),
                    supersedes: None,
                })
            }
        }
        // The setup's project file withdrawn, then recorded again at its first revision
        // (outside review 100).
        0 if v % 8 == 5 => {
            let (latest, s) = state
                .sources
                .iter()
                .filter(|(_, s)| s.goal_id == lid(GOAL))
                .max_by_key(|(_, s)| s.seq)
                .map(|(id, s)| (*id, s.clone()))?;
            if s.withdrawn_seq.is_none() {
                Command::WithdrawProjectSource(WithdrawProjectSource {
                    source_id: latest,
                    reason: "the file was deleted".into(),
                })
            } else {
                Command::RecordProjectSource(RecordProjectSource {
                    source_id: fresh_id(state, 16),
                    goal_id: lid(GOAL),
                    path: s.path,
                    revision: s.revision,
                    content: s.content,
                })
            }
        }
        0 => Command::ReviseGoal(ReviseGoal {
            goal_id: lid(GOAL),
            revision: state.goals.get(&lid(GOAL)).map_or(1, |g| g.revision + 1),
            content: goal_content(),
        }),
        1 => {
            let protected = v.is_multiple_of(4);
            Command::StartWorkflow(StartWorkflow {
                workflow_id: fresh_id(state, 1),
                goal_id: lid(GOAL),
                goal_revision: state.goals.get(&lid(GOAL)).map_or(1, |g| g.revision),
                policy_id: lid(POLICY),
                profile_id: lid(if protected { PROTECTED_PROFILE } else { PROFILE }),
                plan: protected.then(plan_pair),
            })
        }
        2 => {
            let (id, w) = wf?;
            let phase = match v % 6 {
                0 => Phase::Implement,
                _ => closure_ledger::runtime::next_phase(w.phase).unwrap_or(Phase::Implement),
            };
            Command::AdvancePhase(AdvancePhase { workflow_id: id, phase, version: w.version + 1 })
        }
        3 => {
            let (id, w) = wf?;
            // RESUME continues the workflow's previous session (admitted only where the
            // profile allows it); FRESH takes a new one.
            let resume = !v.is_multiple_of(2);
            let previous_session =
                w.last_attempt.and_then(|a| state.attempts.get(&a)).map(|a| a.worker_session_id);
            Command::StartAttempt(StartAttempt {
                attempt_id: fresh_id(state, 3),
                workflow_id: id,
                worker_session_id: match previous_session {
                    Some(s) if resume => s,
                    _ => fresh_id(state, 4),
                },
                thread: if resume { ThreadChoice::Resume } else { ThreadChoice::Fresh },
                selection_receipt: None,
            })
        }
        4 => {
            let (aid, _) = nth(&state.attempts, v)?;
            Command::ClaimDispatch(ClaimDispatch::for_attempt(state, aid)?)
        }
        5 | 6 => {
            let (aid, a) = nth(&state.attempts, v)?;
            let event = match v % 4 {
                0 => {
                    let n = state.worker_events.len();
                    let at = if n == 0 { 0 } else { usize::from(pick.target) % n };
                    state.worker_events.iter().nth(at).map_or(fresh_id(state, 5), |(id, _)| id)
                }
                _ => fresh_id(state, 5),
            };
            // Compaction events too (their order, their empty payload, progress inside one),
            // with text now and then, which is refused.
            let kind = match v % 6 {
                0 | 3 => WorkerEventKind::Proposals,
                1 => WorkerEventKind::CompactionStarted,
                4 => WorkerEventKind::CompactionCompleted,
                _ => WorkerEventKind::Progress,
            };
            // Under MANUAL a compaction starts on a Runtime directive: mostly ask for one
            // first (now and then not, which is refused).
            if kind == WorkerEventKind::CompactionStarted
                && a.compaction_directive.is_none()
                && !a.compacting
                && !v.is_multiple_of(5)
            {
                return Some(Command::RequestCompaction(
                    closure_ledger::runtime::command::RequestCompaction {
                        directive_id: fresh_id(state, 9),
                        attempt_id: aid,
                    },
                ));
            }
            let lifecycle_only =
                matches!(kind, WorkerEventKind::CompactionStarted | WorkerEventKind::CompactionCompleted)
                    || (a.compacting && kind == WorkerEventKind::Progress);
            let text = if lifecycle_only && !v.is_multiple_of(4) { "" } else { "work" };
            Command::DeliverWorkerEvent(DeliverWorkerEvent {
                attempt_id: aid,
                worker_event_id: event,
                manifest_digest: if v.is_multiple_of(7) {
                    digest_of("old manifest")
                } else {
                    a.manifest_digest
                },
                payload: lifecycle::payload(kind, u64::from(v % 2), text),
            })
        }
        7 => {
            let (aid, a) = nth(&state.attempts, v)?;
            let kind = match (a.phase, v % 5) {
                (_, 0) => ResultKind::Proposals,
                (Phase::Implement, _) => ResultKind::CompletionRequest,
                _ => ResultKind::Proposals,
            };
            match v % 9 {
                0 => Command::FailAttempt(FailAttempt { attempt_id: aid, reason: "crash".into() }),
                7 => Command::RestartAttempt(RestartAttempt {
                    attempt_id: aid,
                    workflow_version: a.workflow_version,
                    replacement_attempt_id: fresh_id(state, 6),
                    worker_session_id: fresh_id(state, 7),
                    reason: "supervisor restart".into(),
                }),
                8 => {
                    let version = state.workflows.get(&a.workflow_id).map_or(0, |w| w.version);
                    Command::CancelWorkflow(CancelWorkflow {
                        workflow_id: a.workflow_id,
                        workflow_version: version,
                        reason: "withdrawn".into(),
                    })
                }
                1 => Command::CancelAttempt(CancelAttempt {
                    attempt_id: aid,
                    workflow_version: a.workflow_version,
                    reason: "stop".into(),
                }),
                _ => Command::FinishAttempt(FinishAttempt {
                    attempt_id: aid,
                    result_kind: kind,
                    summary: "done".into(),
                }),
            }
        }
        8 => {
            let (id, _) = wf?;
            Command::OpenGeneration(OpenGeneration {
                generation_id: fresh_id(state, 8),
                workflow_id: id,
                base_digest: digest_of("base"),
            })
        }
        9 => {
            let (gid, _) = nth(&state.generations, v)?;
            Command::FreezeGeneration(FreezeGeneration {
                generation_id: gid,
                candidate_digest: digest_of(&format!("candidate {gid}")),
                change_set_digest: digest_of("change set"),
            })
        }
        10 => {
            let (gid, g) = nth(&state.generations, v)?;
            let result = match v % 5 {
                0 | 1 => CheckResult::Fail,
                2 => CheckResult::Error,
                _ => CheckResult::Pass,
            };
            Command::RecordEvidence(RecordEvidence {
                evidence_id: fresh_id(state, 10),
                workflow_id: g.workflow_id,
                generation_id: gid,
                candidate_digest: g.frozen_digest().unwrap_or_default(),
                obligation_id: lid(lifecycle::OBLIGATION),
                check_spec_id: lid(lifecycle::CHECK_SPEC),
                check_spec_digest: digest_of("check: cargo test parser::trailing"),
                result,
                detail: "detail".into(),
            })
        }
        11 => {
            let (id, w) = wf?;
            let gen_id = w.active_generation?;
            let evidence: Vec<Id> = state
                .evidence
                .iter()
                .filter(|(_, e)| e.record.generation_id == gen_id)
                .map(|(id, _)| *id)
                .collect();
            let verdict = match v % 3 {
                0 => Verdict::Accept,
                1 => Verdict::RejectRepairable,
                _ => Verdict::RejectTerminal,
            };
            Command::DecideAcceptance(DecideAcceptance {
                decision_id: fresh_id(state, 11),
                workflow_id: id,
                generation_id: gen_id,
                verdict,
                evidence_ids: (!v.is_multiple_of(2)).then_some(evidence),
                reasons: vec!["fuzz".into()],
            })
        }
        12 => {
            let (did, d) = nth(&state.decisions, v)?;
            Command::RecordRepair(RecordRepair {
                repair_id: fresh_id(state, 12),
                decision_id: did,
                decision_digest: d.decision_digest,
                input_manifest_digest: d.input_manifest_digest,
                evidence_set_digest: d.evidence_set_digest,
                child_generation_id: fresh_id(state, 13),
                constraints_to_preserve: goal_content().preservation_constraints,
            })
        }
        13 => Command::ProposeFact(ProposeFact {
            fact_id: lid(0x60_0000 + u128::from(v % 4)),
            goal_id: lid(GOAL),
            revision: state.facts.get(&lid(0x60_0000 + u128::from(v % 4))).map_or(1, |f| f.revision + 1),
            statement: "a fact".into(),
            provenance: "fuzz".into(),
        }),
        14 => {
            let (fid, f) = nth(&state.facts, v)?;
            if v.is_multiple_of(2) {
                Command::ConfirmFact(ConfirmFact {
                    fact_id: fid,
                    revision: f.revision,
                    confirmed_by: "human:fuzz".into(),
                })
            } else {
                Command::InvalidateFact(InvalidateFact {
                    fact_id: fid,
                    revision: f.revision,
                    reason: "no".into(),
                    invalidated_by: (v % 4 == 1).then(|| "human:fuzz".into()),
                })
            }
        }
        _ => {
            let (id, _) = wf?;
            match nth(&state.blockers, v) {
                Some((bid, b)) if b.resolution.is_none() && v.is_multiple_of(2) => {
                    Command::ResolveBlocker(ResolveBlocker { blocker_id: bid, resolution: "done".into() })
                }
                _ => Command::RaiseBlocker(RaiseBlocker {
                    blocker_id: fresh_id(state, 15),
                    workflow_id: id,
                    description: "blocked".into(),
                }),
            }
        }
    };
    if let Some(p) = pick.perturb {
        perturb(&mut c, p);
    }
    Some(c)
}

/// The next step of the reference lifecycle for workflow `id`, from its state.
fn next_step(state: &State, id: Id, v: u8) -> Option<Command> {
    use closure_ledger::lifecycle::digest_of;
    use closure_ledger::runtime::state::{AttemptStatus, GenerationStatus};
    let w = state.workflows.get(&id)?;
    if w.closed {
        return None;
    }
    if let Some(aid) = w.active_attempt {
        let a = state.attempts.get(&aid)?;
        if !a.dispatched {
            return Some(Command::ClaimDispatch(ClaimDispatch::for_attempt(state, aid)?));
        }
        if a.events_admitted < u32::from(v % 4) {
            let kind =
                if v.is_multiple_of(3) { WorkerEventKind::ToolActivity } else { WorkerEventKind::Progress };
            return Some(Command::DeliverWorkerEvent(DeliverWorkerEvent {
                attempt_id: aid,
                worker_event_id: fresh_id(state, 20),
                manifest_digest: a.manifest_digest,
                payload: lifecycle::payload(kind, u64::from(v), "step"),
            }));
        }
        let kind =
            if a.phase == Phase::Implement { ResultKind::CompletionRequest } else { ResultKind::Proposals };
        return Some(Command::FinishAttempt(FinishAttempt {
            attempt_id: aid,
            result_kind: kind,
            summary: "ok".into(),
        }));
    }
    let finished_here = state.attempts.values().any(|a| {
        a.workflow_id == id
            && a.workflow_version == w.version
            && matches!(a.status, AttemptStatus::Finished { .. })
    });
    let start = || {
        Command::StartAttempt(StartAttempt {
            attempt_id: fresh_id(state, 21),
            workflow_id: id,
            worker_session_id: fresh_id(state, 22),
            thread: ThreadChoice::Fresh,
            selection_receipt: None,
        })
    };
    let advance =
        |phase| Command::AdvancePhase(AdvancePhase { workflow_id: id, phase, version: w.version + 1 });
    let generation = w.active_generation.and_then(|g| state.generations.get(&g).map(|s| (g, s.clone())));
    let repair_child_open = generation.as_ref().is_some_and(|(_, g)| g.status == GenerationStatus::Mutable);
    if matches!(w.phase, Phase::EvidenceBuild | Phase::FinalVerify) && repair_child_open {
        return Some(advance(Phase::Implement));
    }
    match w.phase {
        Phase::Discovery | Phase::Plan => {
            Some(if finished_here { advance(closure_ledger::runtime::next_phase(w.phase)?) } else { start() })
        }
        Phase::Implement => match generation {
            None => Some(Command::OpenGeneration(OpenGeneration {
                generation_id: fresh_id(state, 23),
                workflow_id: id,
                base_digest: digest_of("base"),
            })),
            Some((gid, g)) if g.status == GenerationStatus::Mutable => Some(if finished_here {
                Command::FreezeGeneration(FreezeGeneration {
                    generation_id: gid,
                    candidate_digest: digest_of(&format!("candidate {gid}")),
                    change_set_digest: digest_of(&format!("change set {gid}")),
                })
            } else {
                start()
            }),
            Some(_) => Some(advance(Phase::EvidenceBuild)),
        },
        Phase::EvidenceBuild => {
            let (gid, g) = generation?;
            let has = state.evidence.values().any(|e| e.record.generation_id == gid);
            if has {
                return Some(advance(Phase::FinalVerify));
            }
            Some(Command::RecordEvidence(RecordEvidence {
                evidence_id: fresh_id(state, 24),
                workflow_id: id,
                generation_id: gid,
                candidate_digest: g.frozen_digest()?,
                obligation_id: lid(lifecycle::OBLIGATION),
                check_spec_id: lid(lifecycle::CHECK_SPEC),
                check_spec_digest: digest_of("check: cargo test parser::trailing"),
                result: if v.is_multiple_of(3) { CheckResult::Pass } else { CheckResult::Fail },
                detail: "detail".into(),
            }))
        }
        Phase::FinalVerify => {
            let (gid, g) = generation?;
            match g.decision.and_then(|d| state.decisions.get(&d).map(|x| (d, x.clone()))) {
                None => {
                    let evidence: Vec<Id> = state
                        .evidence
                        .iter()
                        .filter(|(_, e)| e.record.generation_id == gid)
                        .map(|(eid, _)| *eid)
                        .collect();
                    let all_pass = state
                        .evidence
                        .values()
                        .filter(|e| e.record.generation_id == gid)
                        .all(|e| e.record.result == CheckResult::Pass);
                    Some(Command::DecideAcceptance(DecideAcceptance {
                        decision_id: fresh_id(state, 25),
                        workflow_id: id,
                        generation_id: gid,
                        verdict: if all_pass { Verdict::Accept } else { Verdict::RejectRepairable },
                        evidence_ids: Some(evidence),
                        reasons: vec!["decided".into()],
                    }))
                }
                Some((did, d)) if !d.repaired => Some(Command::RecordRepair(RecordRepair {
                    repair_id: fresh_id(state, 26),
                    decision_id: did,
                    decision_digest: d.decision_digest,
                    input_manifest_digest: d.input_manifest_digest,
                    evidence_set_digest: d.evidence_set_digest,
                    child_generation_id: fresh_id(state, 27),
                    constraints_to_preserve: lifecycle::goal_content().preservation_constraints,
                })),
                Some(_) => None,
            }
        }
    }
}

/// Makes a plausible command slightly wrong.
fn perturb(c: &mut Command, p: u8) {
    let wrong = Digest::of(ledger_schema::DigestKind::Source, &[p]);
    match c {
        Command::ClaimDispatch(x) => match p % 4 {
            0 => x.package_digest = wrong,
            1 => x.workflow_version = x.workflow_version.wrapping_add(1),
            2 => x.plan = Some(closure_ledger::lifecycle::plan_pair()),
            // An App Server report under a profile that binds no input closure.
            _ => {
                x.reported_inputs = Some(ledger_schema::events::InputClosure {
                    tools: Vec::new(),
                    config_digest: wrong,
                    permission_digest: wrong,
                    instruction_sources: Vec::new(),
                    managed_requirements_digest: None,
                })
            }
        },
        Command::RecordRepair(x) => match p % 3 {
            0 => x.decision_digest = wrong,
            1 => x.evidence_set_digest = wrong,
            _ => x.constraints_to_preserve.clear(),
        },
        Command::AdvancePhase(x) => x.version = x.version.wrapping_add(u32::from(p % 3)),
        Command::RecordEvidence(x) => x.candidate_digest = wrong,
        Command::DeliverWorkerEvent(x) => x.payload.text = "y".repeat(usize::from(p) * 300),
        Command::ReviseGoal(x) => x.revision = x.revision.wrapping_add(1),
        Command::FinishAttempt(x) => {
            x.result_kind =
                if p.is_multiple_of(2) { ResultKind::Proposals } else { ResultKind::CompletionRequest }
        }
        _ => {}
    }
}

fn base_ledger() -> &'static Ledger<MemStore> {
    static BASE: OnceLock<Ledger<MemStore>> = OnceLock::new();
    BASE.get_or_init(|| {
        let mut w = crate::world::World::at(crate::world::Stage::Setup);
        w.ok(Command::InstallProfile(InstallProfile {
            profile_id: lid(lifecycle::PROTECTED_PROFILE),
            profile: lifecycle::profile(true),
        }));
        w.ledger
    })
}

/// How many deep bases a sequence can start from (the first input byte picks one; base 0 is
/// the plain setup).
pub const BASES: u8 = 16;
/// Steps a sequence runs from its base. Depth comes from the base, so a sequence no longer
/// has to re-derive a deep state on every execution.
pub const MAX_STEPS: usize = 32;
/// Steps of the deterministic run that builds each deep base.
const BASE_STEPS: usize = 160;

/// The input that builds deep base `k`: lifecycle-biased submissions (the next step of a
/// workflow, sometimes a new workflow or another command), drawn from a fixed seed — so
/// every process builds the same bases, and a crash reproduces from its input alone.
fn base_script(k: u8) -> Vec<u8> {
    let mut rng = crate::Rng(0x0ba5_e000 + u64::from(k) * 7919);
    let mut data = Vec::with_capacity(BASE_STEPS * 5);
    for _ in 0..BASE_STEPS {
        let r = rng.next_u64().to_le_bytes();
        // Op byte >= 16: a submission; then Pick { action, target, variant, perturb: None }.
        let action = match r[0] % 16 {
            0 => 1,         // a new workflow
            1 => r[1] % 16, // any command
            _ => 64 | r[1], // the next lifecycle step
        };
        data.extend([16 | r[2], action, r[3], r[4], 0]);
    }
    data
}

/// The ledger a sequence starts from: base 0 is the setup, base `k > 0` the result of
/// [`base_script`] run from the setup through [`run_steps`] with every oracle — built once
/// per process and reused (cloning is cheap: the state's maps are persistent).
fn base(k: u8) -> &'static Ledger<MemStore> {
    static BASES_BUILT: [OnceLock<Ledger<MemStore>>; BASES as usize] =
        [const { OnceLock::new() }; BASES as usize];
    let k = k % BASES;
    let cell = BASES_BUILT.get(usize::from(k)).unwrap_or_else(|| unreachable!("k < BASES"));
    cell.get_or_init(|| {
        if k == 0 {
            return base_ledger().clone();
        }
        let mut run = Run::new(0);
        run.steps(&mut Unstructured::new(&base_script(k)), BASE_STEPS);
        run.finish();
        run.ledger
    })
}

/// A base's full replay from genesis, done once per process: the entries its store holds and
/// the state `Ledger::from_store` folds from them (checked equal to the base's live state).
struct BaseReplay {
    entries: Vec<SealedEntry>,
    state: State,
}

fn base_replay(k: u8) -> &'static BaseReplay {
    static REPLAYED: [OnceLock<BaseReplay>; BASES as usize] = [const { OnceLock::new() }; BASES as usize];
    let k = k % BASES;
    let cell = REPLAYED.get(usize::from(k)).unwrap_or_else(|| unreachable!("k < BASES"));
    cell.get_or_init(|| {
        let base = base(k);
        let replayed = Ledger::from_store(base.store().clone())
            .unwrap_or_else(|e| panic!("replay of base {k} from genesis failed: {e}"));
        assert!(replayed.state() == base.state(), "base {k}: live state != replayed state");
        assert_eq!(
            replayed.state().digest(),
            base.state().digest(),
            "base {k}: live state != replayed state"
        );
        let entries = base.store().read_range(0, u64::MAX).unwrap_or_else(|e| panic!("{e}"));
        // Equal values: keep the base's own (as the shadow adopts the live state), so a
        // replay resumed from it shares the nodes the sequence did not touch with the live
        // state, and the final comparison walks only what the sequence changed.
        BaseReplay { entries, state: base.state().clone() }
    })
}

/// Model-based conformance over a sequence of operations, from a deep base (the first
/// byte picks it). After every step: no panic; the live state equals the fold (replay) of
/// exactly the bytes written so far — kept incrementally by a shadow replica that strictly
/// decodes each new entry and admits it through the same admission step; the two are
/// compared for equality after each step, and after an equal comparison the shadow adopts
/// the live value, so the next comparison walks only the nodes that step changed (imbl
/// skips shared nodes) while the shadow remains, by induction, the fold of every byte from
/// genesis. Full replays from genesis are bounded to one per sequence: the first `Reopen`
/// replays and continues on the reopened ledger, or else a `Replay` is checked once at the
/// end of the sequence (every step's state was already checked against the shadow fold). Compiling the same request twice yields
/// identical bytes; a refused command changed no stored byte and no state. Returns the
/// number of admitted commands.
pub fn command_sequence(data: &[u8]) -> usize {
    run_sequence(data).1
}

/// Checks the shortcut behind `command_sequence`'s full replay against the real thing: runs
/// the sequence in `data`, then folds its whole store from genesis (`Ledger::from_store`)
/// and from the cached base (`Ledger::from_store_resumed`, as the target does) — the two
/// states must be equal and equal to the live one. For the corpus test, not the fuzzer.
pub fn resumed_replay_matches_genesis(data: &[u8]) {
    let k = data.first().map_or(0, |k| k % BASES);
    let (ledger, _) = run_sequence(data);
    let genesis = Ledger::from_store(ledger.store().clone()).unwrap_or_else(|e| panic!("{e}"));
    let prefix = base_replay(k);
    let held =
        ledger.store().read_range(0, prefix.entries.len() as u64 - 1).unwrap_or_else(|e| panic!("{e}"));
    assert!(held == prefix.entries);
    let resumed = Ledger::from_store_resumed(ledger.store().clone(), prefix.state.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(genesis.state() == ledger.state(), "genesis replay != live");
    assert_eq!(genesis.state().digest(), resumed.state().digest());
    assert!(resumed.state() == genesis.state(), "resumed replay != genesis replay");
}

/// How deep one command sequence went (for corpus statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    pub admitted: usize,
    pub repairs: usize,
    pub repairs_of_repairs: usize,
    pub protected_workflows: usize,
    pub worker_events: usize,
    pub decisions: usize,
    pub accepted: usize,
}

/// Runs a sequence and measures the state it reached.
pub fn command_sequence_depth(data: &[u8]) -> Depth {
    let (ledger, admitted) = run_sequence(data);
    let s = ledger.state();
    Depth {
        admitted,
        repairs: s.repairs.len(),
        repairs_of_repairs: s.generations.values().filter(|g| g.sequence >= 3).count(),
        protected_workflows: s.workflows.values().filter(|w| w.plan.is_some()).count(),
        worker_events: s.worker_events.len(),
        decisions: s.decisions.len(),
        accepted: s.decisions.values().filter(|d| d.verdict == ledger_schema::types::Verdict::Accept).count(),
    }
}

fn run_sequence(data: &[u8]) -> (Ledger<MemStore>, usize) {
    let mut u = Unstructured::new(data);
    let Ok(k) = u8::arbitrary(&mut u) else { return (base(0).clone(), 0) };
    let mut run = Run::new(k % BASES);
    run.steps(&mut u, MAX_STEPS);
    run.finish();
    (run.ledger, run.admitted)
}

/// One sequence in progress: the live ledger, the shadow fold of its bytes, and the
/// bookkeeping of the oracles.
struct Run {
    /// The base it started from (its full replay from genesis is cached: [`base_replay`]).
    base: u8,
    ledger: Ledger<MemStore>,
    shadow: State,
    folded: u64,
    time: u64,
    admitted: usize,
    reopened: bool,
    replay_due: bool,
}

impl Run {
    fn new(k: u8) -> Run {
        let base = base(k);
        Run {
            base: k,
            shadow: base.state().clone(),
            folded: base.store().head().seq + 1,
            time: base.store().head().time_ms.max(T0) + 1_000_000,
            ledger: base.clone(),
            admitted: 0,
            reopened: false,
            replay_due: false,
        }
    }

    fn steps(&mut self, u: &mut Unstructured<'_>, max: usize) {
        for _ in 0..max {
            let Ok(op) = Op::arbitrary(u) else { break };
            self.step(op);
        }
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Submit(pick) => self.submit(&pick),
            Op::Reopen => {
                // At most one full replay from genesis per sequence (a reopen, or else the
                // deferred `Replay` at the end); every step is checked against the shadow
                // fold regardless.
                if self.reopened {
                    return;
                }
                self.reopened = true;
                self.full_replay();
            }
            Op::Replay => self.replay_due = true,
            Op::Compile(pick) => {
                let state = self.ledger.state();
                let Some((wid, _)) = nth(&state.workflows, pick) else { return };
                let req = StartAttempt {
                    attempt_id: lid(0x70_0000),
                    workflow_id: wid,
                    worker_session_id: lid(1),
                    thread: ThreadChoice::Fresh,
                    selection_receipt: None,
                };
                if let Ok(b) = attempt_binding(state, &req) {
                    let one = compile(state, &b);
                    let two = compile(state, &b);
                    assert_eq!(one, two, "compile is not deterministic");
                }
            }
        }
    }

    fn submit(&mut self, pick: &Pick) {
        let ledger = &mut self.ledger;
        let Some(command) = command_for(ledger.state(), pick) else { return };
        self.time += 1000;
        let frames = ledger.store().frames().len();
        let last = ledger.store().frames().last().cloned();
        let before = ledger.state().clone();
        match ledger.submit(&command, Ctx { time_ms: self.time }) {
            Ok(r) if !r.duplicate => self.admitted += 1,
            Ok(_) => assert_eq!(ledger.store().frames().len(), frames, "a duplicate wrote bytes"),
            Err(_) => {
                assert_eq!(ledger.store().frames().len(), frames, "a refused command wrote a frame");
                assert_eq!(ledger.store().frames().last(), last.as_ref());
                assert!(ledger.state() == &before, "a refused command changed the state");
            }
        }
        // The shadow replica folds exactly what was written, from its bytes.
        let head = ledger.store().head().seq;
        if head >= self.folded {
            for sealed in ledger.store().read_range(self.folded, head).unwrap_or_default() {
                let reopened = SealedEntry::open(&sealed.bytes)
                    .unwrap_or_else(|e| panic!("stored bytes do not decode: {e}"));
                closure_ledger::admission::apply(&mut self.shadow, &reopened.entry)
                    .unwrap_or_else(|e| panic!("replay refuses admitted history: {e}"));
            }
            self.folded = head + 1;
        }
        assert!(&self.shadow == ledger.state(), "live state != replayed state");
        // Equal values: share the live nodes, so the next comparison walks only what the
        // next step changes. The shadow stays the fold of every byte written (induction).
        self.shadow = ledger.state().clone();
    }

    /// A strict reopen of everything written, from genesis; its state must be the live one.
    /// The fold of the base's entries from genesis is the same for every sequence on that
    /// base (the fold is a function of the entries), so it is done once per process
    /// ([`base_replay`], a real `from_store` checked against the base); here the store's
    /// entries must begin with exactly the base's entries, and the rest are folded onto
    /// that state by the same fold (`Ledger::from_store_resumed`) — the state
    /// `Ledger::from_store` would give, without redoing the base's part every execution.
    fn full_replay(&mut self) {
        let prefix = base_replay(self.base);
        let live = self.ledger.state().clone();
        // The store moves into the replay (no copy); the reopened ledger replaces the live one.
        let store = std::mem::replace(&mut self.ledger, base(0).clone()).into_store();
        let n = prefix.entries.len() as u64;
        let held = store
            .read_range(0, n.saturating_sub(1))
            .unwrap_or_else(|e| panic!("stored entries unreadable: {e}"));
        assert!(held == prefix.entries, "a commit changed an entry written before it");
        let replayed = Ledger::from_store_resumed(store, prefix.state.clone())
            .unwrap_or_else(|e| panic!("replay of admitted history failed: {e}"));
        // Structural equality over every field: implies equal digests (the digest is the
        // encoding of the same fields), with no hashing.
        assert!(replayed.state() == &live, "live state != replayed state");
        self.ledger = replayed;
    }

    /// The deferred `Replay`: once, from genesis, over the whole sequence — unless the
    /// sequence already reopened (the bound is one full replay per sequence). The sequence
    /// ends on the replayed ledger (its state equals the live one).
    fn finish(&mut self) {
        if self.replay_due && !self.reopened {
            self.replay_due = false;
            self.full_replay();
        }
    }
}

// ---------------------------------------------------------------------------------------
// store_corruption

/// The template ledger, held in memory only: its scratch directory is removed once read
/// (it lived in a never-dropped static before, so every fuzz process left one in /dev/shm).
struct Template {
    entries: Vec<SealedEntry>,
    /// Every directory and file as read from the template's directory, sorted (the corpus
    /// test compares a copy with these).
    original: Tree,
    /// The template ledger's directories and files (paths relative to its root), held in
    /// memory: every execution writes its copy from here, byte for byte.
    dirs: Vec<PathBuf>,
    files: Vec<(PathBuf, Sparse)>,
    /// The journal segment's bytes (the journal edits apply to a copy of these).
    segment: Vec<u8>,
}

/// Directories and files (with their bytes), paths relative to the ledger's root.
type Tree = (Vec<PathBuf>, Vec<(PathBuf, Vec<u8>)>);

/// [`read_tree`] of a whole ledger directory, sorted.
fn sorted_tree(root: &Path) -> Tree {
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    read_tree(root, Path::new(""), &mut dirs, &mut files);
    dirs.sort();
    files.sort();
    (dirs, files)
}

/// The files and directories under `root` (paths relative to it), directories first.
fn read_tree(root: &Path, rel: &Path, dirs: &mut Vec<PathBuf>, files: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(items) = std::fs::read_dir(root.join(rel)) else { return };
    for item in items.filter_map(Result::ok) {
        let rel = rel.join(item.file_name());
        if item.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(rel.clone());
            read_tree(root, &rel, dirs, files);
        } else {
            files.push((rel.clone(), std::fs::read(root.join(&rel)).unwrap_or_else(|e| panic!("{e}"))));
        }
    }
}

const BLOCK: usize = 4096;
static ZERO_BLOCK: [u8; BLOCK] = [0; BLOCK];

/// A file's bytes as its length and its 4 KiB blocks that are not all zeros.
struct Sparse {
    len: u64,
    blocks: Vec<(u64, Vec<u8>)>,
}

impl Sparse {
    fn of(bytes: &[u8]) -> Sparse {
        let blocks = bytes
            .chunks(BLOCK)
            .enumerate()
            .filter(|(_, block)| *block != &ZERO_BLOCK[..block.len()])
            .map(|(i, block)| ((i * BLOCK) as u64, block.to_vec()))
            .collect();
        Sparse { len: bytes.len() as u64, blocks }
    }

    /// Writes the file at `path` (new) as a sparse file: its length, then only the blocks
    /// that are not all zeros. It reads back byte for byte as the bytes it was made of
    /// (holes read as zeros); sled's 512 KiB segment and the journal's preallocated tail
    /// are almost all zeros, so this writes a few pages instead of copying ~600 KiB.
    fn write(&self, path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::create(path)?;
        file.set_len(self.len)?;
        for (at, block) in &self.blocks {
            file.write_all_at(block, *at)?;
        }
        Ok(())
    }
}

/// Waits (up to 5 s, as the store does) until no handle holds sled's lock on `root`'s sled
/// directory: sled releases it from a background thread after its last handle drops, and
/// the store's next open would otherwise find it held and sleep 10 ms before retrying.
/// Only when the next open starts changes, not what it does.
fn wait_sled_unlocked(root: &Path) {
    let Ok(file) = std::fs::File::open(root.join("sled").join("db")) else { return };
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => {
                let _ = file.unlock();
                return;
            }
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed().as_secs() < 5 => {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            Err(_) => return,
        }
    }
}

/// [`crate::with_sled`] for the target: sled opened without its background flusher (the
/// session ends with an explicit flush, as `with_sled`'s does), then waits until the lock is
/// released.
fn sled_session(root: &Path, f: impl FnOnce(&sled::Tree)) {
    let path = root.join("sled");
    let started = std::time::Instant::now();
    let db = loop {
        match sled::Config::new().path(&path).flush_every_ms(None).open() {
            Ok(db) => break db,
            Err(_) if started.elapsed().as_secs() < 5 => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            Err(e) => panic!("open sled: {e}"),
        }
    };
    let tree = db.open_tree("entries").unwrap_or_else(|e| panic!("open sled tree: {e}"));
    f(&tree);
    db.flush().unwrap_or_else(|e| panic!("flush sled: {e}"));
    drop(tree);
    drop(db);
    wait_sled_unlocked(root);
}

/// A scratch directory on tmpfs (`/dev/shm`) where there is one, else in the system's
/// temporary directory. `store_corruption` is about what strict open makes of edited bytes,
/// not about durability: on tmpfs the store's fsyncs cost nothing and the copies, sled's
/// segment reads and the cleanup never touch the disk.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::Builder::new().prefix("cl-fuzz-").tempdir_in(shm)
    {
        return Ok(dir);
    }
    tempfile::tempdir()
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = scratch_dir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("ledger");
        drop(store::init(&root, "t", LEDGER, T0).unwrap_or_else(|e| panic!("{e}")));
        let (mut ledger, _) = Ledger::open(&root).unwrap_or_else(|e| panic!("{e}"));
        Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() }
            .setup()
            .unwrap_or_else(|e| panic!("{e}"));
        let entries = ledger.store().read_range(0, u64::MAX).unwrap_or_else(|e| panic!("{e}"));
        drop(ledger);
        wait_sled_unlocked(&root);
        let original = sorted_tree(&root);
        drop(dir);
        let (dirs, mut files) = original.clone();
        let segment_rel = crate::segment(Path::new(""));
        let segment = files
            .iter()
            .find(|(rel, _)| *rel == segment_rel)
            .map(|(_, b)| b.clone())
            .unwrap_or_else(|| panic!("the template has no journal segment"));
        files.retain(|(rel, _)| *rel != segment_rel);
        let files = files.into_iter().map(|(rel, bytes)| (rel, Sparse::of(&bytes))).collect();
        Template { entries, original, dirs, files, segment }
    })
}

/// The copy `store_corruption` writes for an input without edits holds exactly the
/// template ledger's directories and files as read from its directory, byte for byte. For
/// the corpus test.
pub fn store_corruption_copy_is_exact() {
    let t = template();
    let dir = scratch_dir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path().join("ledger");
    assert!(write_copy(t, &root, &t.segment));
    let (want, got) = (&t.original, sorted_tree(&root));
    assert!(!want.1.is_empty());
    assert_eq!(want.0, got.0, "directories differ");
    assert_eq!(want.1.len(), got.1.len(), "files differ");
    for ((wp, wb), (gp, gb)) in want.1.iter().zip(&got.1) {
        assert_eq!(wp, gp);
        assert!(wb == gb, "{} differs", wp.display());
    }
}

/// Writes the template's copy at `root` with `segment` as its journal segment.
fn write_copy(t: &Template, root: &Path, segment: &[u8]) -> bool {
    std::fs::create_dir_all(root).is_ok()
        && t.dirs.iter().all(|d| std::fs::create_dir_all(root.join(d)).is_ok())
        && t.files.iter().all(|(rel, file)| file.write(&root.join(rel)).is_ok())
        && Sparse::of(segment).write(&crate::segment(root)).is_ok()
}

/// One edit of stored bytes.
#[derive(Debug, Clone, Arbitrary)]
pub enum Edit {
    /// XOR a byte of the journal at `at % len`.
    FlipJournal { at: u32, mask: u8 },
    /// Cut the journal to `len % (len + 1)` bytes.
    TruncateJournal { len: u32 },
    /// Append bytes to the journal.
    AppendJournal { bytes: Vec<u8> },
    /// XOR a byte of sled frame `frame` at `at`.
    FlipSled { frame: u8, at: u32, mask: u8 },
    /// Remove sled frame `frame`.
    RemoveSled { frame: u8 },
    /// Replace sled frame `frame` with `bytes`.
    ReplaceSled { frame: u8, bytes: Vec<u8> },
}

/// Arbitrary edits to a real ledger's frames, in the journal and in sled: strict open
/// returns a typed error, restores a lagging sled tail, cuts a torn tail, or finds the
/// edit was a no-op — never a panic, a hang, or a silent repair: whatever opens holds a
/// prefix of the original entries, byte for byte — except the newest entry when sled
/// lacked its frame. Nothing links to the newest entry, so when sled lags (legitimately:
/// it is not flushed per commit) the journal alone vouches for it; only a checkpoint can
/// (docs/SAFETY.md, known limits; `regression_an_edited_head_with_sled_lagging_is_only_caught_by_a_checkpoint`).
pub fn store_corruption(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(edits) = Vec::<Edit>::arbitrary(&mut u) else { return };
    let t = template();
    let Ok(dir) = scratch_dir() else { return };
    let root = dir.path().join("ledger");
    // The copy: the template's files written from memory, byte for byte (sparse). Journal
    // edits apply in order to the segment's bytes before it is written — the same final
    // bytes as editing the file in place edit by edit.
    let edits: Vec<&Edit> = edits.iter().take(8).collect();
    let mut segment = t.segment.clone();
    for edit in &edits {
        match edit {
            Edit::FlipJournal { at, mask } => {
                if !segment.is_empty() {
                    let i = *at as usize % segment.len();
                    segment[i] ^= mask;
                }
            }
            Edit::TruncateJournal { len } => {
                let keep = *len as usize % (segment.len() + 1);
                segment.truncate(keep);
            }
            Edit::AppendJournal { bytes } => segment.extend(bytes.iter().take(4096)),
            Edit::FlipSled { .. } | Edit::RemoveSled { .. } | Edit::ReplaceSled { .. } => {}
        }
    }
    assert!(write_copy(t, &root, &segment), "could not write the copy of the template ledger");
    // Sled edits apply in order to sled, all in one session (journal and sled edits touch
    // different files, so only the order within each copy matters, and one sled open
    // instead of one per edit).
    let sled_edits: Vec<&Edit> = edits
        .into_iter()
        .filter(|e| matches!(e, Edit::FlipSled { .. } | Edit::RemoveSled { .. } | Edit::ReplaceSled { .. }))
        .collect();
    if !sled_edits.is_empty() {
        sled_session(&root, |tree| {
            for edit in sled_edits {
                match edit {
                    Edit::FlipSled { frame, at, mask } => edit_sled(tree, *frame, |v| {
                        if !v.is_empty() {
                            let i = *at as usize % v.len();
                            v[i] ^= mask;
                        }
                        true
                    }),
                    Edit::RemoveSled { frame } => edit_sled(tree, *frame, |_| false),
                    Edit::ReplaceSled { frame, bytes } => edit_sled(tree, *frame, |v| {
                        *v = bytes.iter().take(4096).copied().collect();
                        true
                    }),
                    _ => {}
                }
            }
        });
    }
    let _ = store::verify(&root, None);
    wait_sled_unlocked(&root);
    if let Ok((store, report)) = DiskStore::open(&root) {
        let got =
            store.read_range(0, u64::MAX).unwrap_or_else(|e| panic!("an opened store cannot be read: {e}"));
        assert!(got.len() <= t.entries.len(), "open invented entries");
        let unanchored_head = report.sled_restored_frames > 0;
        for (i, (a, b)) in got.iter().zip(&t.entries).enumerate() {
            if unanchored_head && i + 1 == got.len() {
                continue;
            }
            assert_eq!(a.bytes, b.bytes, "open silently repaired or accepted an edited entry");
        }
    }
}

fn edit_sled(tree: &sled::Tree, frame: u8, f: impl FnOnce(&mut Vec<u8>) -> bool) {
    let keys: Vec<_> = tree.iter().keys().filter_map(Result::ok).collect();
    if keys.is_empty() {
        return;
    }
    let key = keys[usize::from(frame) % keys.len()].clone();
    let Ok(Some(v)) = tree.get(&key) else { return };
    let mut v = v.to_vec();
    if f(&mut v) {
        let _ = tree.insert(key, v);
    } else {
        let _ = tree.remove(key);
    }
}
