//! An in-memory backend for tests and fuzzing: the same chain checks, no I/O.

use std::sync::Arc;

use ledger_schema::events::LedgerInitialized;
use ledger_schema::{Event, Id, SealedEntry};

use super::{Chain, CommitError, CommitReceipt, Frame, Head, ReadError, Store, check_next, receipt};

/// Frames kept as their exact bytes, plus the decoded entries. Both are shared between
/// clones (never changed once committed), so cloning a store copies pointers, not bytes.
#[derive(Debug, Clone)]
pub struct MemStore {
    frames: Vec<Arc<[u8]>>,
    entries: Vec<Arc<SealedEntry>>,
    head: Head,
}

impl MemStore {
    /// A new ledger holding only its genesis entry.
    pub fn new(ledger: Id, label: &str, time_ms: u64) -> MemStore {
        let mut chain = Chain::empty();
        let genesis = Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: label.to_owned() });
        #[expect(clippy::expect_used, reason = "an empty chain always accepts a well-formed genesis")]
        let sealed = chain.seal(genesis, time_ms, ledger).expect("genesis seals on an empty chain");
        #[expect(clippy::expect_used, reason = "a one-entry frame is within every frame bound")]
        let frame = Frame::new(vec![sealed]).expect("genesis frame");
        let head = chain.head().unwrap_or(Head { ledger, seq: 0, hash: Default::default(), time_ms });
        MemStore {
            frames: vec![Arc::from(frame.bytes())],
            entries: frame.into_entries().into_iter().map(Arc::new).collect(),
            head,
        }
    }

    /// Every frame's stored bytes, in order (tests compare them before and after).
    #[cfg(feature = "testkit")]
    pub fn frames(&self) -> &[Arc<[u8]>] {
        &self.frames
    }
}

impl Store for MemStore {
    fn head(&self) -> Head {
        self.head
    }

    fn commit(&mut self, frame: &Frame) -> Result<CommitReceipt, CommitError> {
        check_next(self.head, frame)?;
        self.frames.push(Arc::from(frame.bytes()));
        self.entries.extend(frame.entries().iter().cloned().map(Arc::new));
        self.head = frame.head_after(self.head.ledger);
        Ok(receipt(frame, None))
    }

    fn read(&self, seq: u64) -> Result<SealedEntry, ReadError> {
        usize::try_from(seq)
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|e| SealedEntry::clone(e))
            .ok_or(ReadError::NotFound { seq, head: self.head.seq })
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<SealedEntry>, ReadError> {
        let to = to.min(self.head.seq);
        (from..=to).map(|seq| self.read(seq)).collect()
    }
}
