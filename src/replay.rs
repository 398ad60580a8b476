//! Replay and audit: stream every entry of a ledger's journal (the commit point and the
//! authority) — strict decode, hash, `prev`, seq contiguity (the store's chain), every rule
//! and every manifest re-derivation (the admission step, by the compiler each manifest
//! names) — and report what was proved. [`replay_entries`] runs the same checks and fold
//! over entry bytes given in order, whatever file they came from.
//! Read-only; memory is bounded by the live state, one record window, sled's small page
//! cache and the few batches of verified entries between the two threads, not by the
//! ledger's length. Reading and verifying records runs on a helper thread while the fold
//! runs on the caller's ([`store::Threads`]), with the sequential result. By default both copies are verified (sled compared
//! frame by frame with the journal as the fold goes); the report names the copies verified.

use std::collections::BTreeMap;
use std::path::Path;

use ledger_schema::types::Phase;
use ledger_schema::{Digest, Event, Id, SealedEntry};
use serde::Serialize;

use crate::admission;
use crate::compiler::{self, Compiled, Registry};
use crate::runtime::State;
use crate::store::{self, Chain, OpenError, Replica};

/// One Attempt whose Context Manifest was re-derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptProof {
    pub id: Id,
    pub seq: u64,
    pub phase: Phase,
    /// The compiler its manifest names, which re-derived it.
    pub compiler_version: String,
    pub manifest_digest: Digest,
    pub proved: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerEventCounts {
    pub admitted: u64,
    /// Stale or mismatched deliveries, recorded as ignored. (Exact redeliveries write no
    /// entry, so a replay cannot count them: the submitter's receipts say `duplicate`.)
    pub ignored: u64,
}

/// The first failure of a replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFailure {
    pub seq: u64,
    /// The entry's event kind, or `store check` when the store's checks (record, decoding,
    /// canonical form, hash, chain, sled's copy) failed before the entry could be folded.
    pub kind: String,
    pub copy: Option<Replica>,
    pub reason: String,
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seq {} ({}): {}", self.seq, self.kind, self.reason)
    }
}

/// Acceptance verdicts as text: `ACCEPT 1, REJECT_REPAIRABLE 1` (or `none`).
pub fn verdicts_text(verdicts: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = verdicts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    if parts.is_empty() { "none".to_owned() } else { parts.join(", ") }
}

/// What a replay proved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    pub ok: bool,
    pub entries: u64,
    pub frames: u64,
    /// Entries folded into the state (all of them, or up to `--to`).
    pub folded: u64,
    /// `--to` stopped between the two entries one command wrote (`restartAttempt`'s cancel
    /// and replacement, `recordRepair`'s repair and child generation): the kind of the entry
    /// after it that completes the command. Such a state no command left (outside review 193
    /// F3); the CLI refuses it.
    #[serde(skip)]
    pub to_splits: Option<&'static str>,
    pub goals: u64,
    pub workflows: u64,
    pub attempts: Vec<AttemptProof>,
    pub manifests_proved: u64,
    /// Profile revisions whose plan and generation digests were re-derived (issue #14).
    pub plans_proved: u64,
    /// Source registries whose digests (and every resource digest) were re-derived.
    pub registries_proved: u64,
    /// Task selections re-derived whole — decision, receipt and what each loaded (issue #15;
    /// outside review 87: the report did not say so).
    pub selections_proved: u64,
    /// The skill resources those selections loaded, each held to its registry bytes.
    pub loaded_resources_proved: u64,
    pub worker_events: WorkerEventCounts,
    /// Acceptance verdicts, by verdict.
    pub verdicts: BTreeMap<String, u64>,
    /// ACCEPT decisions whose accepted bytes failed since ([`failed_after_accept`]).
    pub failed_after_accept: u64,
    pub head_seq: u64,
    pub head_hash: Digest,
    pub state_digest: Digest,
    /// Which copies were verified (and why sled was not, when it was not).
    pub copies: Option<store::Copies>,
    /// A live writer held the ledger: the journal was read up to its last complete record.
    pub live_writer: bool,
    /// A torn journal tail (never acknowledged; the next open moves it to `cut/`), or the
    /// live writer's write in flight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn_tail: Option<store::TornTail>,
    /// Frames durable in the journal that sled lacks at its tail (the next open restores them).
    pub sled_lag_frames: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<ReplayFailure>,
}

/// The audit fold shared by [`replay`] and [`replay_entries`]: every entry through the
/// admission step (each Attempt start re-derived by the compiler its manifest names),
/// counted into the report.
struct Audit<'r> {
    registry: &'r Registry<'r>,
    to: Option<u64>,
    state: State,
    report: ReplayReport,
    failure: Option<ReplayFailure>,
}

impl<'r> Audit<'r> {
    fn new(registry: &'r Registry<'r>, to: Option<u64>) -> Audit<'r> {
        Audit { registry, to, state: State::default(), report: ReplayReport::default(), failure: None }
    }

    /// Folds one chain-verified entry; an inadmissible one is the replay's failure.
    fn fold(&mut self, sealed: &SealedEntry) -> Result<(), OpenError> {
        let seq = sealed.entry.seq;
        if let Some(to) = self.to.filter(|to| seq > *to) {
            // The second entry of a two-entry command, right after `to`: `to` splits it.
            let completes = match &sealed.entry.event {
                Event::AttemptStarted(a) => a.replaces.is_some(),
                Event::GenerationOpened(g) => g.repair_id.is_some(),
                _ => false,
            };
            if seq == to + 1 && completes {
                self.report.to_splits = Some(sealed.entry.event.kind());
            }
            return Ok(());
        }
        let kind = sealed.entry.event.kind();
        if let Event::AttemptStarted(a) = &sealed.entry.event {
            self.report.attempts.push(AttemptProof {
                id: a.attempt_id,
                seq,
                phase: a.phase,
                compiler_version: a.manifest.compiler_version.clone(),
                manifest_digest: a.manifest_digest,
                proved: false,
            });
        }
        if let Err(e) = admission::apply_with(self.registry, &mut self.state, &sealed.entry) {
            self.failure =
                Some(ReplayFailure { seq, kind: kind.to_owned(), copy: None, reason: e.to_string() });
            return Err(OpenError::inadmissible(sealed, e));
        }
        let report = &mut self.report;
        match &sealed.entry.event {
            Event::AttemptStarted(_) => {
                if let Some(p) = report.attempts.last_mut() {
                    p.proved = true;
                }
                report.manifests_proved += 1;
            }
            Event::ProfileRevisionRecorded(_) => report.plans_proved += 1,
            Event::SourceRegistryRecorded(_) => report.registries_proved += 1,
            Event::SelectionRecorded(e) => {
                report.selections_proved += 1;
                report.loaded_resources_proved += e.resources.len() as u64;
            }
            Event::WorkerEventAdmitted(_) => report.worker_events.admitted += 1,
            Event::WorkerDeliveryIgnored(_) => report.worker_events.ignored += 1,
            Event::AcceptanceDecided(d) => {
                let name = serde_json::to_value(d.verdict).ok().and_then(|v| v.as_str().map(str::to_owned));
                *report.verdicts.entry(name.unwrap_or_default()).or_default() += 1;
            }
            _ => {}
        }
        report.folded += 1;
        report.head_seq = seq;
        report.head_hash = sealed.hash;
        Ok(())
    }

    /// The report, with the state's totals and the first failure (or `fallback`, a
    /// failure found before the fold: an entry that did not decode or link).
    fn finish(mut self, fallback: Option<ReplayFailure>) -> ReplayReport {
        if let Some(failure) = self.failure.or(fallback) {
            self.report.ok = false;
            self.report.failure = Some(failure);
        }
        self.report.goals = self.state.goals.len() as u64;
        self.report.workflows = self.state.workflows.len() as u64;
        self.report.failed_after_accept = failed_after_accept(&self.state);
        self.report.state_digest = self.state.digest();
        self.report
    }
}

/// Replays `root` up to `to` (inclusive; all by default). `progress` sees each seq.
/// A verification failure is reported in the returned report (`ok: false`); an I/O or
/// usage failure is an error.
pub fn replay(
    root: &Path,
    to: Option<u64>,
    scope: store::AuditScope,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplayReport, OpenError> {
    replay_with(root, to, scope, store::Threads::default(), progress)
}

/// [`replay`] on the cores `threads` says. With [`store::Threads::Two`] (the default) one
/// thread reads and verifies the records (record checks, decode, canonical form, hash,
/// chain, sled's copy) while the calling thread folds the entries (rules, manifest
/// proofs); the report — the state digest and the first failure included — is the one
/// [`store::Threads::One`] gives.
pub fn replay_with(
    root: &Path,
    to: Option<u64>,
    scope: store::AuditScope,
    threads: store::Threads,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplayReport, OpenError> {
    let mut audit = Audit::new(&compiler::RELEASED, to);
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        progress(sealed.entry.seq);
        audit.fold(sealed)
    };
    let fallback = match store::audit_with(root, None, scope, threads, &mut fold) {
        Ok(v) => {
            audit.report.ok = true;
            audit.report.entries = v.entries;
            audit.report.frames = v.frames;
            audit.report.copies = Some(v.copies);
            audit.report.live_writer = v.live_writer;
            audit.report.torn_tail = v.torn_tail;
            audit.report.sled_lag_frames = v.sled_lag_frames;
            None
        }
        // The fold's own failure, already recorded by `Audit::fold`.
        Err(OpenError::Inadmissible { .. }) => None,
        Err(OpenError::Corrupt { seq, replica, reason }) => Some(ReplayFailure {
            seq,
            kind: "store check".to_owned(),
            copy: Some(replica),
            reason: reason.to_string(),
        }),
        Err(e) => return Err(e),
    };
    Ok(audit.finish(fallback))
}

/// Replays a ledger given as its entries' canonical bytes in seq order, from genesis —
/// a frozen fixture, independent of how a journal frames them. Each entry passes the
/// store's chain checks (`Chain::verify`: strict decode, seq, `prev`, ledger id, time,
/// genesis) and then the same fold as [`replay`], with every Attempt's manifest
/// re-derived by the compiler of `registry` it names. `frames` is 0: there are none.
pub fn replay_entries<'b>(
    registry: &Registry<'_>,
    entries: impl IntoIterator<Item = &'b [u8]>,
) -> ReplayReport {
    let mut audit = Audit::new(registry, None);
    let mut chain = Chain::empty();
    for bytes in entries {
        let seq = chain.next_seq();
        let sealed = match chain.verify(bytes) {
            Ok(sealed) => sealed,
            Err(reason) => {
                let failure = ReplayFailure {
                    seq,
                    kind: "store check".to_owned(),
                    copy: None,
                    reason: reason.to_string(),
                };
                return audit.finish(Some(failure));
            }
        };
        audit.report.entries += 1;
        if audit.fold(&sealed).is_err() {
            return audit.finish(None);
        }
    }
    audit.report.ok = true;
    audit.finish(None)
}

/// What `ledger compile --attempt` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recompiled {
    pub seq: u64,
    pub compiled: Compiled,
    pub recorded_manifest_digest: Digest,
    /// The recompiled manifest equals the recorded one, byte for byte.
    pub matches_recorded: bool,
    /// A dispatch claim for the Attempt is recorded: a worker was given the package. (Without
    /// one — say the claim was refused as stale — the package was compiled, never delivered.)
    pub dispatched: bool,
    /// A RESUME Attempt's Thread: its worker session and the earlier Attempts whose Turns it
    /// holds, in ledger order — history the worker also had, outside the package and not
    /// authoritative (seed 000; outside review 95: `compile` read as if the package were
    /// all). `None` for a FRESH Thread.
    pub resumed: Option<ResumedThread>,
    /// The entry after which the Attempt's context changed while it was dispatched (its
    /// seq and kind): from there on its worker events were ignored receipts and its finish
    /// was refused (outside review 104: no reader named the mark or its cause).
    pub context_changed_at: Option<(u64, &'static str)>,
    /// The seq of the Goal revision made while the Attempt was dispatched, if any: from there
    /// its events are GOAL_REVISED receipts and its finish is refused as `StaleGoalRevision`
    /// (a revision is checked before any other change; outside review 109: `compile` named
    /// only an earlier change's reasons).
    pub goal_revised_at: Option<u64>,
    /// Over the whole ledger: why a dispatch claim of the (undispatched) Attempt, or a freeze
    /// or ACCEPT on its (finished) result, would be refused as stale now
    /// ([`admission::stale_now`]); `None` while current.
    pub stale_now: Option<String>,
    /// Its status over the whole ledger: an Attempt that ended before any dispatch claim
    /// (cancelled, or with its workflow) can never be claimed, whatever `stale_now` says
    /// (outside review 223 F1: `staleNow` null read as "current").
    pub status: crate::runtime::state::AttemptStatus,
}

/// An Attempt status as `status --json` counts it and `compile --json` shows it.
pub fn status_key(status: crate::runtime::state::AttemptStatus) -> &'static str {
    use crate::runtime::state::AttemptStatus;
    match status {
        AttemptStatus::Started => "STARTED",
        AttemptStatus::Dispatched => "DISPATCHED",
        AttemptStatus::Finished { .. } => "FINISHED",
        AttemptStatus::Failed => "FAILED",
        AttemptStatus::Cancelled { interrupted: false } => "CANCELLED",
        AttemptStatus::Cancelled { interrupted: true } => "INTERRUPTED",
    }
}

/// The Thread a RESUME Attempt continued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumedThread {
    pub worker_session_id: Id,
    pub earlier_attempts: Vec<Id>,
}

/// Re-renders what Attempt `attempt` was given, from the ledger alone: replays up to its
/// `attemptStarted` entry and recompiles over the state before it; then folds the rest to
/// say whether it was dispatched and where its context changed.
pub fn recompile_attempt(root: &Path, attempt: Id) -> Result<Option<Recompiled>, OpenError> {
    let mut state = State::default();
    let mut found: Option<Recompiled> = None;
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        let seq = sealed.entry.seq;
        let inadmissible = |e: admission::Refusal| OpenError::inadmissible(sealed, e);
        if let Some(found) = found.as_mut() {
            if let Event::DispatchClaimed(c) = &sealed.entry.event
                && c.attempt_id == attempt
            {
                found.dispatched = true;
            }
            admission::apply(&mut state, &sealed.entry).map_err(inadmissible)?;
            if found.context_changed_at.is_none() && context_changed(&state, attempt) {
                found.context_changed_at = Some((seq, sealed.entry.event.kind()));
            }
            if found.goal_revised_at.is_none() && goal_revised(&state, attempt) {
                found.goal_revised_at = Some(seq);
            }
            return Ok(());
        }
        if let Event::AttemptStarted(a) = &sealed.entry.event
            && a.attempt_id == attempt
        {
            let compiled = admission::recompile(&state, a).map_err(inadmissible)?;
            let matches_recorded =
                compiled.manifest == a.manifest && compiled.manifest_digest() == a.manifest_digest;
            let resumed = (a.thread == ledger_schema::types::ThreadChoice::Resume).then(|| {
                let mut earlier: Vec<(u64, Id)> = state
                    .attempts
                    .iter()
                    // Only those a worker was given: one cancelled before its dispatch claim
                    // never reached the Thread (outside review 193 F1).
                    .filter(|(_, e)| e.worker_session_id == a.worker_session_id && e.dispatched)
                    .map(|(id, e)| (e.seq, *id))
                    .collect();
                earlier.sort_unstable();
                ResumedThread {
                    worker_session_id: a.worker_session_id,
                    earlier_attempts: earlier.into_iter().map(|(_, id)| id).collect(),
                }
            });
            found = Some(Recompiled {
                seq,
                compiled,
                recorded_manifest_digest: a.manifest_digest,
                matches_recorded,
                dispatched: false,
                resumed,
                context_changed_at: None,
                goal_revised_at: None,
                stale_now: None,
                status: crate::runtime::state::AttemptStatus::Started,
            });
        }
        admission::apply(&mut state, &sealed.entry).map_err(inadmissible)
    };
    store::replay_journal(root, &mut fold)?;
    Ok(found.map(|found| Recompiled {
        stale_now: admission::stale_now(&state, attempt),
        status: state.attempts.get(&attempt).map_or(found.status, |a| a.status),
        ..found
    }))
}

/// Whether dispatched Attempt `attempt`'s context changed: a bound input changed after its
/// claim (the admission step's mark), or its Goal was revised (outside review 105: a
/// revision, the first of seed 000's invalidations, was not counted) — either way its
/// worker events are ignored receipts and its finish is refused.
fn context_changed(state: &State, attempt: Id) -> bool {
    use crate::runtime::state::AttemptStatus;
    state.attempts.get(&attempt).is_some_and(|a| {
        a.status == AttemptStatus::Dispatched && (a.context_changed || goal_revised(state, attempt))
    })
}

/// Whether dispatched Attempt `attempt`'s Goal was revised since its workflow bound it.
fn goal_revised(state: &State, attempt: Id) -> bool {
    use crate::runtime::state::AttemptStatus;
    let Some(a) = state.attempts.get(&attempt).filter(|a| a.status == AttemptStatus::Dispatched) else {
        return false;
    };
    state
        .workflows
        .get(&a.workflow_id)
        .and_then(|wf| Some((wf.goal_revision, state.goals.get(&wf.goal_id)?.revision)))
        .is_some_and(|(bound, current)| bound != current)
}

/// The ACCEPT decisions whose accepted bytes (their Candidate digest) have a `FAIL` Evidence
/// record after the decision, in any workflow. The verdict stands — it was judged on the
/// evidence then — and the failure bars those bytes from every later freeze (docs/rules.md);
/// a summary shows it, or an auditor reading `status` or `replay` never learns that an
/// ACCEPTed change failed a check since (outside review 171 F2).
pub fn failed_after_accept(state: &State) -> u64 {
    use ledger_schema::types::{CheckResult, Verdict};
    let mut last_fail: BTreeMap<Digest, u64> = BTreeMap::new();
    for ev in state.evidence.values().filter(|ev| ev.record.result == CheckResult::Fail) {
        let at = last_fail.entry(ev.record.candidate_digest).or_default();
        *at = (*at).max(ev.seq);
    }
    let failed_since = |d: &&crate::runtime::state::DecisionState| {
        last_fail.get(&d.candidate_digest).is_some_and(|at| *at > d.seq)
    };
    state.decisions.values().filter(|d| d.verdict == Verdict::Accept).filter(failed_since).count() as u64
}

/// Counts of a state's records by state, as `ledger status` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateCounts {
    /// Goals: `total`, and `revised` (at a revision after 1; 0 shown).
    pub goals: BTreeMap<String, u64>,
    /// Workflows: `total`; an open one by its phase (`DISCOVERY` … `FINAL_VERIFY`); a
    /// closed one as `ACCEPT`, `REJECT_TERMINAL` or `CANCELLED`; and `staleGoalRevision`
    /// (0 shown): the open ones bound to a Goal revision since superseded, which can take
    /// no more work (`StaleGoalRevision`) and can only be cancelled — also counted by phase;
    /// and `failedAfterAccept` (0 shown): the ACCEPT decisions whose accepted bytes failed a
    /// check since ([`failed_after_accept`]), also counted as `ACCEPT`.
    pub workflows: BTreeMap<String, u64>,
    /// Attempts: `total`, and by status (`STARTED`, `DISPATCHED`, `FINISHED`, `FAILED`,
    /// `CANCELLED`, `INTERRUPTED` — cancelled after its dispatch); and `contextChanged` (0
    /// shown): the DISPATCHED ones whose context changed after the claim — a bound input,
    /// or their Goal revised — whose events are ignored receipts and whose finish is refused:
    /// they can only be failed or cancelled (also counted as DISPATCHED).
    pub attempts: BTreeMap<String, u64>,
    /// Evidence records: `total`, and by current eligibility (`ELIGIBLE`, `INELIGIBLE`: the
    /// ledger's projection — a record's bytes keep the snapshot taken when it was recorded;
    /// docs/rules.md, "Evidence eligibility"; outside review 104: no reader showed it).
    pub evidence: BTreeMap<String, u64>,
}

impl StateCounts {
    pub fn of(state: &State) -> StateCounts {
        use crate::runtime::state::AttemptStatus;
        use crate::runtime::wire;
        let zero = || BTreeMap::from([("total".to_owned(), 0)]);
        let mut counts = StateCounts { goals: zero(), workflows: zero(), attempts: zero(), evidence: zero() };
        counts.goals.insert("revised".to_owned(), 0);
        counts.workflows.insert("staleGoalRevision".to_owned(), 0);
        counts.workflows.insert("failedAfterAccept".to_owned(), failed_after_accept(state));
        counts.attempts.insert("contextChanged".to_owned(), 0);
        let add = |map: &mut BTreeMap<String, u64>, key: &str| *map.entry(key.to_owned()).or_default() += 1;
        for goal in state.goals.values() {
            add(&mut counts.goals, "total");
            if goal.revision > 1 {
                add(&mut counts.goals, "revised");
            }
        }
        for wf in state.workflows.values() {
            add(&mut counts.workflows, "total");
            let key = if wf.cancelled {
                "CANCELLED".to_owned()
            } else if wf.closed {
                wf.current_decision
                    .and_then(|d| state.decisions.get(&d))
                    .map_or_else(|| "CLOSED".to_owned(), |d| wire(&d.verdict))
            } else {
                if state.goals.get(&wf.goal_id).is_some_and(|g| g.revision != wf.goal_revision) {
                    add(&mut counts.workflows, "staleGoalRevision");
                }
                wire(&wf.phase)
            };
            add(&mut counts.workflows, &key);
        }
        for (id, attempt) in state.attempts.iter() {
            add(&mut counts.attempts, "total");
            if attempt.status == AttemptStatus::Dispatched && context_changed(state, *id) {
                add(&mut counts.attempts, "contextChanged");
            }
            add(&mut counts.attempts, status_key(attempt.status));
        }
        for ev in state.evidence.values() {
            add(&mut counts.evidence, "total");
            add(&mut counts.evidence, &wire(&ev.eligibility));
        }
        counts
    }
}

/// What `ledger status` reports: the head and the state folded up to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub ledger_id: Id,
    pub head_seq: u64,
    pub head_hash: Digest,
    pub entries: u64,
    /// The digest of the state every entry folds to — the same fold as reopen, `replay`
    /// and the engine's live state, so the three compare by this digest.
    pub state_digest: Digest,
    pub counts: StateCounts,
    /// A live writer held the ledger: the journal was read up to its last complete record.
    pub live_writer: bool,
    /// A partial record after the head, not judged by this journal-only read (`verify`
    /// checks it against sled; the next writer's open cuts it or refuses).
    pub torn_tail: Option<store::TornTail>,
}

/// The ledger's head and state, read-only and without waiting for a writer: the journal
/// (verified as `replay --journal-only` verifies it) folded through the admission step. An
/// entry that does not fold is a verification failure.
pub fn status(root: &Path) -> Result<Status, OpenError> {
    let mut state = State::default();
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::inadmissible(sealed, e))
    };
    let report = store::replay_journal(root, &mut fold)?;
    Ok(Status {
        ledger_id: report.head.ledger,
        head_seq: report.head.seq,
        head_hash: report.head.hash,
        entries: report.entries,
        state_digest: state.digest(),
        counts: StateCounts::of(&state),
        live_writer: report.live_writer,
        torn_tail: report.torn_tail,
    })
}
