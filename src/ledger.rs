//! A ledger: a store plus the state folded from it. Opening replays every entry through
//! the admission step; submitting decides, admits into a working copy of the state, and
//! commits one frame — or writes nothing.

use std::path::Path;

use ledger_schema::{Digest, Event, SealedEntry};

use crate::admission::{self, AdmissionError};
use crate::runtime::{Command, Ctx, Decided, Rejection, State};
use crate::store::{CommitError, DiskStore, Frame, FrameError, OpenError, OpenReport, Replica, Store};

/// A durable admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Seq of the (last) entry recorded; for a duplicate, the original's seq.
    pub seq: u64,
    /// Hash of that entry.
    pub hash: Digest,
    /// The command was a redelivered Worker event: nothing was written.
    pub duplicate: bool,
    /// Set when the commit is durable but sled lags (the next open restores it).
    pub sled_lag: Option<String>,
}

/// Why a submission wrote nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    #[error("rejected: {0}")]
    Rejected(#[from] Rejection),
    #[error("rejected: {0}")]
    Inadmissible(#[from] AdmissionError),
    #[error("rejected: {0}")]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("reading the original of a duplicate failed: {0}")]
    Read(#[from] crate::store::ReadError),
}

impl SubmitError {
    /// True when the command itself was refused (as opposed to a storage failure).
    pub fn is_rejection(&self) -> bool {
        matches!(self, SubmitError::Rejected(_) | SubmitError::Inadmissible(_) | SubmitError::Frame(_))
    }
}

/// A store and its projection, always in step.
#[derive(Debug)]
pub struct Ledger<S: Store> {
    store: S,
    state: State,
}

impl Ledger<DiskStore> {
    /// Opens a ledger directory strictly, replaying every entry through the admission step.
    pub fn open(path: &Path) -> Result<(Ledger<DiskStore>, OpenReport), OpenError> {
        let mut state = State::default();
        let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
            admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::Corrupt {
                seq: sealed.entry.seq,
                replica: Replica::Journal,
                reason: crate::store::Corruption::Inadmissible(format!("{}: {e}", sealed.entry.event.kind())),
            })
        };
        let (store, report) = DiskStore::open_observed(path, None, &mut fold)?;
        Ok((Ledger { store, state }, report))
    }
}

impl<S: Store> Ledger<S> {
    /// A ledger over a store whose entries are folded from genesis (e.g. a fresh `MemStore`).
    pub fn from_store(store: S) -> Result<Ledger<S>, SubmitError> {
        let entries = store.read_range(0, store.head().seq)?;
        let mut state = State::default();
        for sealed in &entries {
            admission::apply(&mut state, &sealed.entry)?;
        }
        Ok(Ledger { store, state })
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn into_store(self) -> S {
        self.store
    }

    /// Decides, admits and commits one command as one frame. On any error nothing is
    /// written and the state is unchanged.
    pub fn submit(&mut self, command: &Command, ctx: Ctx) -> Result<Receipt, SubmitError> {
        match admission::decide(&self.state, command, ctx)? {
            Decided::Duplicate { seq } => {
                let original = self.store.read(seq)?;
                Ok(Receipt { seq, hash: original.hash, duplicate: true, sled_lag: None })
            }
            Decided::Events(events) => self.admit(events, ctx),
        }
    }

    /// Admits already-built events as one frame, through the same admission step as
    /// everything else (used by `submit`, and by tests that forge events to show a rule
    /// holds even when `decide` is bypassed). All or nothing.
    pub fn admit(&mut self, events: Vec<Event>, ctx: Ctx) -> Result<Receipt, SubmitError> {
        let mut chain = self.store.chain();
        let mut working = self.state.clone();
        let mut sealed = Vec::with_capacity(events.len());
        let ledger = self.store.head().ledger;
        for event in events {
            let entry = chain.seal(event, ctx.time_ms, ledger).map_err(|e| {
                SubmitError::Rejected(Rejection::Rule(crate::runtime::violation(
                    crate::runtime::Rule::Genesis,
                    e.to_string(),
                )))
            })?;
            admission::apply(&mut working, &entry.entry)?;
            sealed.push(entry);
        }
        let frame = Frame::new(sealed)?;
        let receipt = self.store.commit(&frame)?;
        self.state = working;
        Ok(Receipt {
            seq: receipt.last_seq,
            hash: receipt.hash,
            duplicate: false,
            sled_lag: receipt.sled_lag,
        })
    }
}
