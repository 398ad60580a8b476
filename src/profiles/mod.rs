//! Context profiles at the edge (seed 003, issue #14): the I/O around the pure rules and
//! plan of `runtime::profile`. [`scan`] reads a source tree into a registry snapshot;
//! [`generation`] materialises a plan's generation under a state root through a recorded
//! transaction whose commit point is the ledger entry. What is recorded is an event folded
//! by `runtime::apply`, like every other fact.

pub mod generation;
pub mod scan;

use std::path::Path;

use ledger_schema::events::profile::SourceRegistryRecorded;
use ledger_schema::{Digest, Event, SealedEntry};

use crate::admission;
use crate::ledger::{Ledger, SubmitError};
use crate::runtime::profile::PlanError;
use crate::runtime::{Ctx, State};
use crate::store::{self, Corruption, DiskStore, OpenError, Replica};

/// Why a profile command failed. [`ProfileError::is_refusal`] tells a refusal (exit 1)
/// from a usage or I/O failure (exit 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    #[error("{0}")]
    Scan(#[from] scan::ScanError),
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{0}")]
    Submit(#[from] SubmitError),
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("{0}")]
    Generation(#[from] generation::GenerationError),
    #[error("expected revision {expected}, the store is at revision {found}")]
    StaleRevision { expected: u32, found: u32 },
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Usage(String),
}

impl ProfileError {
    /// A refusal of what was asked (exit 1), as opposed to usage or I/O (exit 2).
    pub fn is_refusal(&self) -> bool {
        match self {
            ProfileError::Scan(e) => !e.is_io(),
            ProfileError::Open(e) => e.is_verification_failure(),
            ProfileError::Submit(e) => e.is_rejection(),
            ProfileError::Generation(e) => !e.is_io(),
            ProfileError::Usage(_) => false,
            ProfileError::Plan(_) | ProfileError::StaleRevision { .. } | ProfileError::Refused(_) => true,
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The state of the ledger in `dir`, folded read-only from its journal through the one
/// admission step (writes nothing, waits for no writer).
pub fn read_state(dir: &Path) -> Result<State, OpenError> {
    let mut state = State::default();
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::Corrupt {
            seq: sealed.entry.seq,
            replica: Replica::Journal,
            reason: Corruption::Inadmissible(format!("{}: {e}", sealed.entry.event.kind())),
        })
    };
    store::replay_journal(dir, &mut fold)?;
    Ok(state)
}

/// What `sources scan` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanOutcome {
    /// False when the ledger already held this exact registry (nothing written).
    pub recorded: bool,
    /// The seq of the entry holding the registry.
    pub seq: u64,
    pub registry_digest: Digest,
    pub sources: u64,
    pub resources: u64,
    /// Resources recorded by digest only (over the storage bounds: not loadable).
    pub not_loadable: Vec<String>,
    pub profiles: Vec<String>,
}

/// Scans `root` and records the registry in the ledger at `dir` (one frame), unless the
/// current registry is byte-identical, which is a no-op returning the existing snapshot.
pub fn record_registry(dir: &Path, root: &Path) -> Result<ScanOutcome, ProfileError> {
    let recorded = scan::scan(root)?;
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    let cp = &ledger.state().context_profiles;
    let existing = if cp.registry_digest == Some(recorded.registry_digest) {
        cp.registries.get(&recorded.registry_digest).copied()
    } else {
        None
    };
    let outcome = |seq: u64, written: bool, r: &SourceRegistryRecorded| ScanOutcome {
        recorded: written,
        seq,
        registry_digest: r.registry_digest,
        sources: r.registry.sources.len() as u64,
        resources: r.registry.sources.iter().map(|s| s.resources.len() as u64).sum(),
        not_loadable: r
            .registry
            .sources
            .iter()
            .flat_map(|s| {
                s.resources
                    .iter()
                    .filter(|x| x.content.is_none())
                    .map(move |x| format!("{}:{}", s.id, x.path))
            })
            .collect(),
        profiles: r.registry.profiles.iter().map(|p| p.id.clone()).collect(),
    };
    if let Some(seq) = existing {
        return Ok(outcome(seq, false, &recorded));
    }
    let report = outcome(0, true, &recorded);
    let receipt =
        ledger.admit(vec![Event::SourceRegistryRecorded(Box::new(recorded))], Ctx { time_ms: now_ms() })?;
    Ok(ScanOutcome { seq: receipt.seq, ..report })
}
