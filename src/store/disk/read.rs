//! Reading committed frames back out of sled (and the writer's pending list).

use ledger_schema::record::open_record;
use ledger_schema::{SealedEntry, decode_frame};

use super::index::{frame_at_or_before, key_seq};
use crate::store::{Corruption, ReadError};

/// The frame of `tree` holding `seq` (`head` is only for the error message).
pub(super) fn frame_in_tree(tree: &sled::Tree, seq: u64, head: u64) -> Result<(u64, Vec<u8>), ReadError> {
    let found = frame_at_or_before(tree, Some(seq)).map_err(ReadError::Sled)?;
    let (k, v) = found.ok_or(ReadError::NotFound { seq, head })?;
    let first = key_seq(&k).ok_or(ReadError::Corrupt {
        seq,
        reason: Corruption::KeyMismatch { key: u64::MAX, first_seq: seq },
    })?;
    Ok((first, v.to_vec()))
}

/// Decodes the entries `from..=to` out of consecutive frames fetched by `frame_at`.
pub(super) fn read_frames(
    from: u64,
    to: u64,
    mut frame_at: impl FnMut(u64) -> Result<(u64, Vec<u8>), ReadError>,
) -> Result<Vec<SealedEntry>, ReadError> {
    let mut out = Vec::new();
    let mut seq = from;
    while seq <= to {
        let (first, bytes) = frame_at(seq)?;
        let (_, payload) = open_record(&bytes)
            .map_err(|fault| ReadError::Corrupt { seq, reason: Corruption::Record(fault) })?;
        let entries =
            decode_frame(payload).map_err(|e| ReadError::Corrupt { seq, reason: Corruption::Decode(e) })?;
        let n = entries.len() as u64;
        for (entry_seq, entry) in (first..).zip(entries) {
            if entry_seq < seq || entry_seq > to {
                continue;
            }
            let sealed = SealedEntry::open(entry)
                .map_err(|e| ReadError::Corrupt { seq: entry_seq, reason: Corruption::Decode(e) })?;
            if sealed.entry.seq != entry_seq {
                return Err(ReadError::Corrupt {
                    seq: entry_seq,
                    reason: Corruption::SeqGap { expected: entry_seq, found: sealed.entry.seq },
                });
            }
            out.push(sealed);
        }
        let next = first.saturating_add(n.max(1));
        if next <= seq {
            break;
        }
        seq = next;
    }
    Ok(out)
}

/// A thread-safe read handle on a ledger's sled copy (see [`super::DiskStore::reader`]).
#[derive(Debug, Clone)]
pub struct StoreReader {
    pub(in crate::store) entries: sled::Tree,
}

impl StoreReader {
    /// The entries `from..=to` that sled holds, in order (fewer if `to` is not in sled yet).
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<SealedEntry>, ReadError> {
        let last = match frame_at_or_before(&self.entries, None).map_err(ReadError::Sled)? {
            None => return Ok(Vec::new()),
            // sled's newest record names the last seq it holds; damage there is an error
            // naming it, never a guessed seq.
            Some((k, v)) => {
                let first = key_seq(&k).ok_or(ReadError::Corrupt {
                    seq: from,
                    reason: Corruption::KeyMismatch { key: u64::MAX, first_seq: from },
                })?;
                let (header, _) = open_record(&v)
                    .map_err(|fault| ReadError::Corrupt { seq: first, reason: Corruption::Record(fault) })?;
                header.last_seq()
            }
        };
        if from > last {
            return Ok(Vec::new());
        }
        read_frames(from, to.min(last), |seq| frame_in_tree(&self.entries, seq, last))
    }
}
