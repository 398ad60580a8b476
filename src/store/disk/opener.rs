//! Opening a record's entries (strict decode and hash, [`SealedEntry::open`]) on this
//! thread, or split with one helper thread.
//!
//! Opening is the scan's largest cost and depends on nothing but an entry's own bytes, so
//! the entries of one record can be opened in any order on any thread. The chain — `seq`,
//! `prev`, ledger, time — is still checked by the scan, in order, on the results. The
//! results are those of opening every entry in order on one thread, the first failure
//! included; a split only adds work after a failure, which is thrown away.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use ledger_schema::{DecodeError, SealedEntry};

/// Records with fewer entries are opened on this thread alone. Handing half a record over
/// costs a copy and two wake-ups; measured on the engine's group commits at 64 submitters
/// (33 entries a frame), splitting every record made replay ~30 % slower, so only records
/// from a backlog (up to 2,048 entries) are split.
const MIN_SPLIT_ENTRIES: usize = 128;

/// What opening one entry gives.
pub(super) type Opened = Result<SealedEntry, DecodeError>;

/// Opens entries on this thread ([`Opener::inline`]) or, for records of at least
/// [`MIN_SPLIT_ENTRIES`] entries, with their second half on a helper thread
/// ([`Opener::split`]).
pub(super) struct Opener {
    helper: Option<Helper>,
}

/// The helper: one job at a time — a copy of the entries' bytes and where each ends —
/// answered by the opened entries, in order.
struct Helper {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Vec<Opened>>,
    thread: Option<JoinHandle<()>>,
}

struct Job {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Opener {
    /// Every entry opened on the calling thread.
    pub(super) fn inline() -> Opener {
        Opener { helper: None }
    }

    /// Large records split with a helper thread. If the thread cannot be started, every
    /// entry is opened on the calling thread: the results are the same.
    pub(super) fn split() -> Opener {
        let (jobs, job_rx) = sync_channel::<Job>(1);
        let (done_tx, done) = sync_channel::<Vec<Opened>>(1);
        let thread = std::thread::Builder::new().name("ledger-open".to_owned()).spawn(move || {
            for job in job_rx.iter() {
                let mut start = 0;
                let mut opened = Vec::with_capacity(job.ends.len());
                for &end in &job.ends {
                    opened.push(
                        job.bytes
                            .get(start..end)
                            .map_or(Err(DecodeError::Truncated { offset: start }), SealedEntry::open),
                    );
                    start = end;
                }
                if done_tx.send(opened).is_err() {
                    return;
                }
            }
        });
        match thread {
            Ok(thread) => Opener { helper: Some(Helper { jobs: Some(jobs), done, thread: Some(thread) }) },
            Err(_) => Opener::inline(),
        }
    }

    /// Opens every entry of one record, in order.
    pub(super) fn open_all(&mut self, entries: &[&[u8]]) -> Vec<Opened> {
        let helper = match self.helper.as_mut() {
            Some(helper) if entries.len() >= MIN_SPLIT_ENTRIES => helper,
            _ => return entries.iter().map(|bytes| SealedEntry::open(bytes)).collect(),
        };
        let (mine, theirs) = entries.split_at(entries.len() / 2);
        let mut job =
            Job { bytes: Vec::with_capacity(theirs.iter().map(|b| b.len()).sum()), ends: Vec::new() };
        for bytes in theirs {
            job.bytes.extend_from_slice(bytes);
            job.ends.push(job.bytes.len());
        }
        let sent = helper.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok());
        let mut opened: Vec<Opened> = mine.iter().map(|bytes| SealedEntry::open(bytes)).collect();
        match helper.done.recv().ok().filter(|_| sent).filter(|half| half.len() == theirs.len()) {
            Some(half) => opened.extend(half),
            None => {
                // The helper is gone (it cannot fail otherwise): this thread opens the rest,
                // and every later record.
                self.helper = None;
                opened.extend(theirs.iter().map(|bytes| SealedEntry::open(bytes)));
            }
        }
        opened
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Closing the job channel ends the helper's loop.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use ledger_schema::events::LedgerInitialized;
    use ledger_schema::{Digest, Entry, Event, FORMAT_VERSION, Id, SealedEntry};

    use super::{MIN_SPLIT_ENTRIES, Opener};

    fn entry_bytes(seq: u64) -> Vec<u8> {
        let event = Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: format!("entry {seq}") });
        let entry =
            Entry { v: FORMAT_VERSION, seq, prev: Digest::ZERO, event, ledger: Id::default(), time_ms: seq };
        SealedEntry::seal(entry).bytes
    }

    /// Split or not, every record's entries open exactly as one by one on this thread —
    /// values, hashes, and each failure in its place.
    #[test]
    fn a_split_opens_exactly_what_this_thread_opens() {
        let mut split = Opener::split();
        let mut inline = Opener::inline();
        for n in [1, MIN_SPLIT_ENTRIES - 1, MIN_SPLIT_ENTRIES, MIN_SPLIT_ENTRIES + 1, 33, 2000] {
            let mut owned: Vec<Vec<u8>> = (0..n as u64).map(entry_bytes).collect();
            // Damage one entry in each half, and cut one short.
            if n > 3 {
                owned[1][0] ^= 0x01;
                let last = owned[n - 2].len() - 1;
                owned[n - 2].truncate(last);
            }
            let entries: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            let reference: Vec<_> = entries.iter().map(|b| SealedEntry::open(b)).collect();
            assert_eq!(split.open_all(&entries), reference, "{n} entries, split");
            assert_eq!(inline.open_all(&entries), reference, "{n} entries, inline");
            if n > 3 {
                assert!(reference[1].is_err() && reference[n - 2].is_err() && reference[n - 1].is_ok());
            }
        }
        assert!(split.helper.is_some(), "the helper stayed up");
    }
}
