//! The hash chain: sealing new entries and verifying stored ones, one entry at a time.
//!
//! Both directions share one `Chain`, so what a writer seals is exactly what a reader
//! accepts: strict decode, `seq` contiguity, the `prev` link, the ledger id, a
//! non-decreasing time, and the genesis shape.

use ledger_schema::codec::MAX_ENTRY_BYTES;
use ledger_schema::{DecodeError, Digest, Entry, Event, FORMAT_VERSION, Id, SealedEntry};

use super::Corruption;

/// The head of a verified chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub ledger: Id,
    /// Seq of the last entry.
    pub seq: u64,
    /// Hash of the last entry.
    pub hash: Digest,
    /// Admission time of the last entry.
    pub time_ms: u64,
}

/// Where the chain stands: nothing yet, or a verified head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chain {
    head: Option<Head>,
}

impl Chain {
    /// A chain that expects genesis next.
    pub fn empty() -> Chain {
        Chain { head: None }
    }

    /// A chain continuing from a verified head.
    pub fn from_head(head: Head) -> Chain {
        Chain { head: Some(head) }
    }

    pub fn head(&self) -> Option<Head> {
        self.head
    }

    /// The seq the next entry must have.
    pub fn next_seq(&self) -> u64 {
        self.head.map_or(0, |h| h.seq + 1)
    }

    /// Seals `event` as the next entry. The recorded time is the maximum of `clock_ms` and
    /// the latest recorded time, so a clock stepped back cannot reorder history.
    ///
    /// Genesis (`ledgerInitialized`) must come first and only first; `ledger` is used only
    /// for genesis (later entries inherit the chain's ledger id).
    pub fn seal(&mut self, event: Event, clock_ms: u64, ledger: Id) -> Result<SealedEntry, Corruption> {
        let (seq, prev, ledger, time_ms) = match self.head {
            None => (0, Digest::ZERO, ledger, clock_ms),
            Some(h) => (h.seq + 1, h.hash, h.ledger, clock_ms.max(h.time_ms)),
        };
        let sealed = SealedEntry::seal(Entry { v: FORMAT_VERSION, seq, prev, event, ledger, time_ms });
        // Never write what a reader would refuse: an entry over the decoder's bound would
        // make the whole ledger unreadable.
        if sealed.bytes.len() > MAX_ENTRY_BYTES {
            return Err(Corruption::Decode(DecodeError::TooLarge {
                len: sealed.bytes.len(),
                max: MAX_ENTRY_BYTES,
            }));
        }
        self.accept(&sealed)?;
        Ok(sealed)
    }

    /// Strictly decodes and verifies the stored bytes of the next entry, then advances.
    pub fn verify(&mut self, bytes: &[u8]) -> Result<SealedEntry, Corruption> {
        self.verify_opened(SealedEntry::open(bytes))
    }

    /// [`Chain::verify`] for an entry already opened ([`SealedEntry::open`], perhaps on
    /// another thread): the same result, the decoding failure included.
    pub fn verify_opened(
        &mut self,
        opened: Result<SealedEntry, DecodeError>,
    ) -> Result<SealedEntry, Corruption> {
        let sealed = opened.map_err(Corruption::Decode)?;
        self.accept(&sealed)?;
        Ok(sealed)
    }

    /// Checks the links of a decoded entry against the head, then advances the head.
    fn accept(&mut self, sealed: &SealedEntry) -> Result<(), Corruption> {
        let entry = &sealed.entry;
        let expected_seq = self.next_seq();
        if entry.seq != expected_seq {
            return Err(Corruption::SeqGap { expected: expected_seq, found: entry.seq });
        }
        let is_genesis_kind = matches!(entry.event, Event::LedgerInitialized(_));
        if is_genesis_kind != (entry.seq == 0) {
            return Err(Corruption::Genesis);
        }
        if let Some(h) = self.head {
            // Past entry 1 the head's ledger is the genesis's, vouched for by every link
            // since: an entry of another ledger is the foreign one, named at its own seq
            // (outside review 78: another ledger's record after the head was reported as a
            // broken link of the intact head, and recover's hint cut the head). At entry 1
            // the genesis may be the altered one: the broken link names both.
            if entry.seq >= 2 && entry.ledger != h.ledger {
                return Err(Corruption::LedgerMismatch { expected: h.ledger, found: entry.ledger });
            }
            h.hash
                .check(entry.prev)
                .map_err(|_| Corruption::PrevMismatch { expected: h.hash, found: entry.prev })?;
            if entry.ledger != h.ledger {
                return Err(Corruption::LedgerMismatch { expected: h.ledger, found: entry.ledger });
            }
            if entry.time_ms < h.time_ms {
                return Err(Corruption::TimeBackwards { previous_ms: h.time_ms, found_ms: entry.time_ms });
            }
        } else if entry.prev != Digest::ZERO {
            return Err(Corruption::PrevMismatch { expected: Digest::ZERO, found: entry.prev });
        }
        self.head =
            Some(Head { ledger: entry.ledger, seq: entry.seq, hash: sealed.hash, time_ms: entry.time_ms });
        Ok(())
    }
}
