//! A ledger: a store plus the state folded from it. Opening replays every entry through
//! the admission step; submitting decides, admits into a working copy of the state, and
//! commits one frame — or writes nothing.

use std::path::Path;

use ledger_schema::events::IgnoredReason;
use ledger_schema::{Digest, Event, SealedEntry};

use std::sync::Arc;

use crate::admission::{self, Refusal};
use crate::runtime::{Command, Ctx, Decided, Rejection, State};
use crate::store::{CommitError, DiskStore, Frame, FrameError, OpenError, OpenReport, ReadError, Store};
use ledger_schema::codec::{MAX_FRAME_BYTES, MAX_FRAME_ENTRIES};

/// A durable admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// Seq of the (last) entry recorded; for a duplicate, the original's seq.
    pub seq: u64,
    /// Hash of that entry.
    pub hash: Digest,
    /// The command was a redelivery of one already recorded (the same ids and content):
    /// nothing was written, and `seq`/`hash` are the original receipt's.
    pub duplicate: bool,
    /// The entry is an ignored delivery receipt (a stale or mismatched Worker event), and
    /// why: the event was recorded but admitted as nothing.
    pub ignored: Option<IgnoredReason>,
    /// Set when the commit is durable but sled lags (the next open restores it).
    pub sled_lag: Option<String>,
}

/// Why a submission wrote nothing.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The command was refused; nothing was written and the state is unchanged.
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    /// The storage failed: the command was not committed (or, for a duplicate, its
    /// original could not be read back).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// A storage failure met by a submission. Shared (`Arc`) because one failed commit fails
/// every command of its batch, and the engine answers every later request with it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The frame was not committed (`CommitError::NotDurable` says why, with the OS reason).
    #[error(transparent)]
    Commit(Arc<CommitError>),
    /// The batch's admitted entries did not form a frame; nothing was written.
    #[error("not committed: {0}")]
    Frame(#[source] FrameError),
    #[error("reading the original of a duplicate failed: {0}")]
    Read(#[source] Arc<ReadError>),
}

impl From<CommitError> for SubmitError {
    fn from(e: CommitError) -> SubmitError {
        SubmitError::Storage(StorageError::Commit(Arc::new(e)))
    }
}

impl From<ReadError> for SubmitError {
    fn from(e: ReadError) -> SubmitError {
        SubmitError::Storage(StorageError::Read(Arc::new(e)))
    }
}

impl From<Rejection> for SubmitError {
    fn from(e: Rejection) -> SubmitError {
        SubmitError::Refused(e.into())
    }
}

impl SubmitError {
    /// True when the command itself was refused (as opposed to a storage failure).
    pub fn is_refusal(&self) -> bool {
        self.refusal().is_some()
    }

    /// The refusal, when the command itself was refused (as opposed to a storage failure).
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            SubmitError::Refused(r) => Some(r),
            SubmitError::Storage(_) => None,
        }
    }
}

/// Why an event could not be sealed, as a refusal: an entry over the size bound, or an
/// event that cannot follow the head (a second genesis).
fn seal_error(e: crate::store::Corruption) -> SubmitError {
    let rule = match e {
        crate::store::Corruption::Decode(_) => crate::runtime::Rule::OutOfBounds,
        _ => crate::runtime::Rule::Genesis,
    };
    SubmitError::Refused(Refusal::Rule(crate::runtime::violation(
        rule,
        format!("the entry cannot be sealed: {e}"),
    )))
}

/// What a command becomes in [`Ledger::submit_batch`].
enum Decision {
    /// Exactly the command whose receipt is this seq: nothing to write.
    Duplicate(u64),
    Events(Vec<Event>),
}

/// A store and its projection, always in step.
#[derive(Debug, Clone)]
pub struct Ledger<S: Store> {
    store: S,
    state: State,
    /// A commit failed after admission mutated the state: refuse everything until reopened.
    poisoned: bool,
    /// The entries of the last frame `submit_batch` committed.
    last_committed: Vec<SealedEntry>,
}

impl Ledger<DiskStore> {
    /// Opens a ledger directory strictly, replaying every entry through the admission step.
    pub fn open(path: &Path) -> Result<(Ledger<DiskStore>, OpenReport), OpenError> {
        let mut state = State::default();
        let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
            admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::inadmissible(sealed, e))
        };
        let (store, report) = DiskStore::open_observed(path, &mut fold)?;
        Ok((Ledger { store, state, poisoned: false, last_committed: Vec::new() }, report))
    }
}

impl<S: Store> Ledger<S> {
    /// A ledger over a store whose entries are folded from genesis (e.g. a fresh `MemStore`).
    pub fn from_store(store: S) -> Result<Ledger<S>, SubmitError> {
        Self::fold_from(store, State::default())
    }

    /// [`Ledger::from_store`] resumed from a fold already done: `prefix` must be the state
    /// the fold of this store's entries `0..prefix.entries` gives (e.g. the state of an
    /// earlier `from_store` over a store whose entries this one's begin with, byte for
    /// byte — the caller checks that); the remaining entries are folded onto it exactly as
    /// `from_store` folds them. Tests and fuzzing only: a wrong `prefix` is not detected.
    #[cfg(feature = "testkit")]
    pub fn from_store_resumed(store: S, prefix: State) -> Result<Ledger<S>, SubmitError> {
        Self::fold_from(store, prefix)
    }

    /// Folds the store's entries from `state.entries` on, onto `state`.
    fn fold_from(store: S, mut state: State) -> Result<Ledger<S>, SubmitError> {
        let head = store.head().seq;
        if state.entries <= head {
            for sealed in &store.read_range(state.entries, head)? {
                admission::apply(&mut state, &sealed.entry)?;
            }
        }
        Ok(Ledger { store, state, poisoned: false, last_committed: Vec::new() })
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
        let (mut results, processed) = self.submit_batch(std::slice::from_ref(command), ctx);
        assert_eq!(processed, 1, "a batch processes at least its first command");
        match results.pop() {
            Some(result) => result,
            None => unreachable!("a processed command has a result"),
        }
    }

    /// Group commit: decides and admits each command in order against the state as the
    /// earlier ones left it, then commits every admitted event as **one frame** (one
    /// fdatasync). A refused command adds nothing to the frame and disturbs no other.
    /// Returns one result per processed command and how many were processed (a prefix:
    /// the rest did not fit the frame bounds and must be submitted again).
    ///
    /// Every rule checks before it mutates, so a single-event command is admitted in place;
    /// a multi-event command is admitted on a copy. If the commit itself fails, the store
    /// is poisoned and so is this ledger (the state may hold the unwritten frame): reopen.
    pub fn submit_batch(
        &mut self,
        commands: &[Command],
        ctx: Ctx,
    ) -> (Vec<Result<Receipt, SubmitError>>, usize) {
        enum Outcome {
            Refused(SubmitError),
            Duplicate(u64),
            Admitted(usize),
        }
        if self.poisoned {
            let results = commands.iter().map(|_| Err(SubmitError::from(CommitError::Poisoned))).collect();
            return (results, commands.len());
        }
        let ledger = self.store.head().ledger;
        let mut chain = self.store.chain();
        let mut sealed: Vec<SealedEntry> = Vec::new();
        let mut frame_bytes = 64usize;
        let mut outcomes = Vec::with_capacity(commands.len());
        for command in commands {
            let events = match self.decide(command, &sealed) {
                Err(e) => {
                    outcomes.push(Outcome::Refused(e));
                    continue;
                }
                Ok(Decision::Duplicate(seq)) => {
                    outcomes.push(Outcome::Duplicate(seq));
                    continue;
                }
                Ok(Decision::Events(events)) => events,
            };
            let chain_before = chain;
            let mut mine = Vec::with_capacity(events.len());
            let mut refused: Option<SubmitError> = None;
            for event in events {
                match chain.seal(event, ctx.time_ms, ledger) {
                    Ok(entry) => mine.push(entry),
                    Err(e) => {
                        refused = Some(seal_error(e));
                        break;
                    }
                }
            }
            let size: usize = mine.iter().map(|e| e.bytes.len() + 8).sum();
            if refused.is_none()
                && (sealed.len() + mine.len() > MAX_FRAME_ENTRIES || frame_bytes + size > MAX_FRAME_BYTES)
            {
                if !sealed.is_empty() {
                    // Does not fit this frame: leave it (and the rest) for the next one.
                    break;
                }
                // Fits no frame at all: refused, so that a batch always makes progress.
                refused = Some(SubmitError::Refused(Refusal::Rule(crate::runtime::violation(
                    crate::runtime::Rule::OutOfBounds,
                    format!("its {} entries ({size} bytes) do not fit one frame", mine.len()),
                ))));
            }
            let backup = (mine.len() > 1 && refused.is_none()).then(|| self.state.clone());
            if refused.is_none() {
                for entry in &mine {
                    if let Err(e) = admission::apply(&mut self.state, &entry.entry) {
                        refused = Some(e.into());
                        break;
                    }
                }
            }
            if let Some(e) = refused {
                if let Some(backup) = backup {
                    self.state = backup;
                }
                chain = chain_before;
                outcomes.push(Outcome::Refused(e));
                continue;
            }
            frame_bytes += size;
            sealed.extend(mine);
            outcomes.push(Outcome::Admitted(sealed.len() - 1));
        }
        let processed = outcomes.len();
        let mut frame_receipt = None;
        if !sealed.is_empty() {
            let committed = match Frame::new(std::mem::take(&mut sealed)) {
                Ok(frame) => {
                    let committed = self.store.commit(&frame).map_err(|e| StorageError::Commit(Arc::new(e)));
                    sealed = frame.into_entries();
                    committed
                }
                Err(e) => Err(StorageError::Frame(e)),
            };
            match committed {
                Ok(r) => frame_receipt = Some(r),
                Err(e) => {
                    self.poisoned = true;
                    let results = outcomes
                        .into_iter()
                        .map(|o| match o {
                            Outcome::Refused(e) => Err(e),
                            _ => Err(SubmitError::Storage(e.clone())),
                        })
                        .collect();
                    return (results, processed);
                }
            }
        }
        let sled_lag = frame_receipt.as_ref().and_then(|r| r.sled_lag.clone());
        let first_seq = sealed.first().map_or(u64::MAX, |e| e.entry.seq);
        let results = outcomes
            .into_iter()
            .map(|o| match o {
                Outcome::Refused(e) => Err(e),
                Outcome::Admitted(idx) => match sealed.get(idx) {
                    Some(e) => Ok(Receipt {
                        seq: e.entry.seq,
                        hash: e.hash,
                        duplicate: false,
                        ignored: ignored_reason(&e.entry.event),
                        sled_lag: sled_lag.clone(),
                    }),
                    None => unreachable!("an admitted command's entry {idx} is in the committed frame"),
                },
                Outcome::Duplicate(seq) => {
                    let original =
                        match seq.checked_sub(first_seq).and_then(|i| sealed.get(usize::try_from(i).ok()?)) {
                            Some(e) => Ok((e.hash, ignored_reason(&e.entry.event))),
                            None => self
                                .store
                                .read(seq)
                                .map(|e| (e.hash, ignored_reason(&e.entry.event)))
                                .map_err(SubmitError::from),
                        };
                    original.map(|(hash, ignored)| Receipt {
                        seq,
                        hash,
                        duplicate: true,
                        ignored,
                        sled_lag: None,
                    })
                }
            })
            .collect();
        self.last_committed = sealed;
        (results, processed)
    }

    /// What `command` becomes against the current state: events to admit, or — when its
    /// step is already recorded and the stored original (in the frame being built, or in
    /// the store) is exactly this command — a duplicate of that receipt. A redelivered Worker
    /// event with another payload is a conflict; any other command whose step is taken but
    /// which is not the same command is decided anew, and its rules refuse it.
    fn decide(&self, command: &Command, pending: &[SealedEntry]) -> Result<Decision, SubmitError> {
        let seq = match admission::decide(&self.state, command)? {
            Decided::Events(events) => return Ok(Decision::Events(events)),
            Decided::Redelivered { seq } => seq,
        };
        if let Command::DeliverWorkerEvent(c) = command {
            let original = self.original(seq, pending)?;
            crate::runtime::redelivery(c, &original, seq)?;
            return Ok(Decision::Duplicate(seq));
        }
        let span = crate::runtime::dedup::span(command);
        let originals = match seq.checked_sub(span.saturating_sub(1)) {
            Some(first) => (first..=seq).map(|s| self.original(s, pending)).collect::<Result<Vec<_>, _>>()?,
            None => Vec::new(),
        };
        if crate::runtime::dedup::same_command(&self.state, command, &originals) {
            return Ok(Decision::Duplicate(seq));
        }
        match admission::decide_new(&self.state, command)? {
            Decided::Events(events) => Ok(Decision::Events(events)),
            // Only a Worker event is decided as a redelivery anew, and it returned above.
            Decided::Redelivered { seq } => {
                unreachable!("{} decided as a redelivery of seq {seq} twice", command.kind())
            }
        }
    }

    /// The event recorded at `seq`: in the frame being built, or in the store.
    fn original(&self, seq: u64, pending: &[SealedEntry]) -> Result<Event, SubmitError> {
        match pending.iter().find(|e| e.entry.seq == seq) {
            Some(e) => Ok(e.entry.event.clone()),
            None => Ok(self.store.read(seq)?.entry.event),
        }
    }

    /// The entries of the last frame committed by `submit`/`submit_batch` (empty if that
    /// batch wrote nothing).
    pub fn last_committed(&self) -> &[SealedEntry] {
        &self.last_committed
    }

    /// Admits already-built events as one frame, through the same admission step as
    /// everything else: the events the CLI derives outside `decide` (a source registry
    /// snapshot, a profile revision), and tests that forge events to show a rule holds even
    /// when `decide` is bypassed. All or nothing.
    pub fn admit(&mut self, events: Vec<Event>, ctx: Ctx) -> Result<Receipt, SubmitError> {
        let mut chain = self.store.chain();
        let mut working = self.state.clone();
        let mut sealed = Vec::with_capacity(events.len());
        let ledger = self.store.head().ledger;
        for event in events {
            let entry = chain.seal(event, ctx.time_ms, ledger).map_err(seal_error)?;
            admission::apply(&mut working, &entry.entry)?;
            sealed.push(entry);
        }
        let ignored = sealed.last().and_then(|e| ignored_reason(&e.entry.event));
        let frame = Frame::new(sealed).map_err(Refusal::Frame)?;
        let receipt = self.store.commit(&frame)?;
        self.state = working;
        Ok(Receipt {
            seq: receipt.last_seq,
            hash: receipt.hash,
            duplicate: false,
            ignored,
            sled_lag: receipt.sled_lag,
        })
    }
}

/// The reason of an ignored delivery receipt.
fn ignored_reason(event: &Event) -> Option<IgnoredReason> {
    match event {
        Event::WorkerDeliveryIgnored(e) => Some(e.reason),
        _ => None,
    }
}
