//! Checkpoints: `{ledgerId, seq, hash}` as JSON. Verifying one proves the ledger still
//! holds that exact entry at that seq, i.e. it extends the checkpointed history — which
//! catches a chain rewritten with recomputed hashes, and a truncation.

use ledger_schema::{Digest, Id, SealedEntry};
use serde::{Deserialize, Serialize};

use super::Corruption;

/// Largest checkpoint file accepted (a real one is about 130 bytes).
pub const MAX_CHECKPOINT_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    pub ledger_id: Id,
    pub seq: u64,
    pub hash: Digest,
}

/// A checkpoint file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    #[error("checkpoint of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("not a checkpoint: {0}")]
    Parse(#[source] serde_json::Error),
}

impl Checkpoint {
    /// The checkpoint of a stored entry.
    pub fn of(sealed: &SealedEntry) -> Checkpoint {
        Checkpoint { ledger_id: sealed.entry.ledger, seq: sealed.entry.seq, hash: sealed.hash }
    }

    /// Parses checkpoint JSON, bounded before parsing.
    pub fn parse(bytes: &[u8]) -> Result<Checkpoint, CheckpointError> {
        if bytes.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge { len: bytes.len(), max: MAX_CHECKPOINT_BYTES });
        }
        serde_json::from_slice(bytes).map_err(CheckpointError::Parse)
    }

    pub fn to_json(&self) -> String {
        serde_json::json!({ "ledgerId": self.ledger_id, "seq": self.seq, "hash": self.hash }).to_string()
    }

    /// Checks the stored entry at `self.seq` against the checkpoint.
    pub fn check(&self, sealed: &SealedEntry) -> Result<(), Corruption> {
        if sealed.entry.ledger != self.ledger_id {
            return Err(Corruption::LedgerMismatch { expected: self.ledger_id, found: sealed.entry.ledger });
        }
        sealed
            .hash
            .check(self.hash)
            .map_err(|m| Corruption::Checkpoint { expected: m.expected, found: m.found })
    }
}

#[cfg(test)]
mod tests {
    use ledger_schema::events::LedgerInitialized;
    use ledger_schema::{Digest, DigestKind, Event, Id};

    use super::Checkpoint;
    use crate::store::Chain;

    /// A mismatch names the checkpoint's hash as expected and the ledger's as found.
    #[test]
    fn mismatch_says_expected_checkpoint_found_ledger() {
        let ledger = Id(7);
        let genesis = Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: "t".into() });
        let sealed = Chain::empty().seal(genesis, 1, ledger).unwrap_or_else(|e| panic!("{e}"));
        let claimed = Digest::of(DigestKind::Source, b"another history");
        let cp = Checkpoint { ledger_id: ledger, seq: 0, hash: claimed };
        let message = cp.check(&sealed).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(message, format!("checkpoint mismatch: expected {claimed}, found {}", sealed.hash));
        assert!(Checkpoint::of(&sealed).check(&sealed).is_ok());
    }
}
