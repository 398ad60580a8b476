//! Replay and audit: stream every entry of a ledger's journal (the commit point and the
//! authority) — strict decode, hash, `prev`, seq contiguity (the store's chain), every rule
//! and every manifest re-derivation (the admission step) — and report what was proved.
//! Read-only; memory is bounded by the live state and one segment, not by the ledger's
//! length. Replay does not open sled: comparing the two copies is `ledger verify`'s job
//! (sled's page cache grows with the ledger, which would unbound replay's memory).

use std::collections::BTreeMap;
use std::path::Path;

use ledger_schema::types::Phase;
use ledger_schema::{Digest, Event, Id, SealedEntry};
use serde::Serialize;

use crate::admission;
use crate::compiler::Compiled;
use crate::runtime::State;
use crate::store::{self, Corruption, OpenError, Replica};

/// One Attempt whose Context Manifest was re-derived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptProof {
    pub id: Id,
    pub seq: u64,
    pub phase: Phase,
    pub manifest_digest: Digest,
    pub proved: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerEventCounts {
    pub admitted: u64,
    /// Redeliveries are never written, so a replay always counts 0 (a live engine reports them).
    pub duplicates: u64,
    pub ignored: u64,
}

/// The first failure of a replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub seq: u64,
    pub kind: String,
    pub copy: Option<Replica>,
    pub reason: String,
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
    pub goals: u64,
    pub workflows: u64,
    pub attempts: Vec<AttemptProof>,
    pub manifests_proved: u64,
    pub worker_events: WorkerEventCounts,
    /// Acceptance verdicts, by verdict.
    pub verdicts: BTreeMap<String, u64>,
    pub head_seq: u64,
    pub head_hash: Digest,
    pub state_digest: Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

/// Replays `root` up to `to` (inclusive; all by default). `progress` sees each seq.
/// A verification failure is reported in the returned report (`ok: false`); an I/O or
/// usage failure is an error.
pub fn replay(
    root: &Path,
    to: Option<u64>,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplayReport, OpenError> {
    let mut state = State::default();
    let mut report = ReplayReport::default();
    let mut failure: Option<Failure> = None;
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        let seq = sealed.entry.seq;
        progress(seq);
        if to.is_some_and(|to| seq > to) {
            return Ok(());
        }
        let kind = sealed.entry.event.kind();
        if let Event::AttemptStarted(a) = &sealed.entry.event {
            report.attempts.push(AttemptProof {
                id: a.attempt_id,
                seq,
                phase: a.phase,
                manifest_digest: a.manifest_digest,
                proved: false,
            });
        }
        if let Err(e) = admission::apply(&mut state, &sealed.entry) {
            failure = Some(Failure { seq, kind: kind.to_owned(), copy: None, reason: e.to_string() });
            return Err(OpenError::Corrupt {
                seq,
                replica: Replica::Journal,
                reason: Corruption::Inadmissible(e.to_string()),
            });
        }
        match &sealed.entry.event {
            Event::AttemptStarted(_) => {
                if let Some(p) = report.attempts.last_mut() {
                    p.proved = true;
                }
                report.manifests_proved += 1;
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
    };
    match store::replay_journal(root, &mut fold) {
        Ok(v) => {
            report.ok = true;
            report.entries = v.entries;
            report.frames = v.frames;
        }
        Err(OpenError::Corrupt { seq, replica, reason }) => {
            report.ok = false;
            report.failure = Some(failure.unwrap_or(Failure {
                seq,
                kind: "(undecodable)".to_owned(),
                copy: Some(replica),
                reason: reason.to_string(),
            }));
        }
        Err(e) => return Err(e),
    }
    report.goals = state.goals.len() as u64;
    report.workflows = state.workflows.len() as u64;
    report.state_digest = state.digest();
    Ok(report)
}

/// What `ledger compile --attempt` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recompiled {
    pub seq: u64,
    pub compiled: Compiled,
    pub recorded_manifest_digest: Digest,
    /// The recompiled manifest equals the recorded one, byte for byte.
    pub matches_recorded: bool,
}

/// Re-renders what Attempt `attempt` was given, from the ledger alone: replays up to its
/// `attemptStarted` entry and recompiles over the state before it.
pub fn recompile_attempt(root: &Path, attempt: Id) -> Result<Option<Recompiled>, OpenError> {
    let mut state = State::default();
    let mut found: Option<Recompiled> = None;
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        if found.is_some() {
            return Ok(());
        }
        let seq = sealed.entry.seq;
        let inadmissible = |e: admission::AdmissionError| OpenError::Corrupt {
            seq,
            replica: Replica::Journal,
            reason: Corruption::Inadmissible(e.to_string()),
        };
        if let Event::AttemptStarted(a) = &sealed.entry.event
            && a.attempt_id == attempt
        {
            let compiled = admission::recompile(&state, a).map_err(inadmissible)?;
            let matches_recorded =
                compiled.manifest == a.manifest && compiled.manifest_digest == a.manifest_digest;
            found = Some(Recompiled {
                seq,
                compiled,
                recorded_manifest_digest: a.manifest_digest,
                matches_recorded,
            });
            return Ok(());
        }
        admission::apply(&mut state, &sealed.entry).map_err(inadmissible)
    };
    store::replay_journal(root, &mut fold)?;
    Ok(found)
}
