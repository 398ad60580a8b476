//! Read-only verification and replay: [`verify`], [`audit`] (both copies, or the journal
//! alone beside a live writer), [`audit_live`] and [`replay_journal`].

use std::fs::File;
use std::path::Path;

use ledger_schema::SealedEntry;

use super::index::{
    HOLDS_NO_LEDGER, check_meta_values, names_no_ledger, open_sled_for_reading, read_meta,
    refuse_newer_format, trees,
};
use super::read::StoreReader;
use super::scan::{OnEntry, SledCopy, Threads, scan_strict};
use super::{SLED_DIR, TornTail, corrupt, ledger_journal_dir};
use crate::store::journal::io;
use crate::store::{Checkpoint, Corruption, Head, OpenError, Replica};

/// What a read-only verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub head: Head,
    pub frames: u64,
    pub entries: u64,
    pub torn_tail: Option<TornTail>,
    /// Frames durable in the journal but missing from sled's tail: recoverable by opening.
    pub sled_lag_frames: u64,
    /// The checkpoint that was verified, if one was given.
    pub checkpoint: Option<Checkpoint>,
    /// Which copies were verified.
    pub copies: Copies,
    /// A writer held the ledger: the journal was read up to its last complete record, and a
    /// torn tail is that writer's write in flight.
    pub live_writer: bool,
}

/// Which copies an audit verified, and why sled was left out when it was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Copies {
    /// The journal, and sled compared frame by frame against it.
    Both,
    /// The journal alone; the text says why sled was not verified.
    JournalOnly(String),
}

/// Which copies an audit is asked to verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditScope {
    /// Both copies, falling back to the journal alone (and saying so) when sled is held by
    /// a live writer or cannot be opened without writing.
    Both,
    /// The journal alone (`--journal-only`).
    JournalOnly,
}

/// Takes the shared lock if no writer holds the ledger; `None` beside a live writer (whose
/// journal is append-only, so it can still be read up to its last complete record).
/// A writer waiting at the gate ([`super::writer_gate`]) counts as a live writer: the
/// shared lock is not taken past it (outside review 199 F1), so readers never hold a
/// waiting writer off for longer than the reads already under way.
pub(super) fn read_lock(root: &Path) -> Result<Option<File>, OpenError> {
    let dir = ledger_journal_dir(root)?;
    let file = File::open(&dir).map_err(io("open", &dir))?;
    let gate = super::writer_gate(root)?;
    match gate.try_lock_shared() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
        Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", root)(e).into()),
    }
    let locked = match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io("lock", &dir)(e).into()),
    };
    drop(gate);
    locked
}

/// Verifies a ledger without writing to it: every record of the journal, sled against the
/// journal, and (optionally) a checkpoint. A torn journal tail and a sled lagging by a
/// suffix are reported as recoverable (the next open repairs both).
pub fn verify(root: &Path, checkpoint: Option<&Checkpoint>) -> Result<VerifyReport, OpenError> {
    audit(root, checkpoint, AuditScope::Both, &mut |_| Ok(()))
}

/// [`verify`] over the copies `scope` asks for, showing every verified entry to `observe`
/// as it is read, in seq order (a read-only replay folds its state in the same pass).
/// Memory stays bounded by one record window and sled's small page cache. Never waits for
/// a writer: beside one, it reads the journal alone and says so.
pub fn audit(
    root: &Path,
    checkpoint: Option<&Checkpoint>,
    scope: AuditScope,
    observe: OnEntry<'_>,
) -> Result<VerifyReport, OpenError> {
    audit_with(root, checkpoint, scope, Threads::default(), observe)
}

/// [`audit`] on the cores `threads` says: with [`Threads::Two`] (the default) every store
/// check runs on a helper thread while `observe` runs on the calling thread; the report,
/// or the first failure, is the same as with [`Threads::One`].
pub fn audit_with(
    root: &Path,
    checkpoint: Option<&Checkpoint>,
    scope: AuditScope,
    threads: Threads,
    observe: OnEntry<'_>,
) -> Result<VerifyReport, OpenError> {
    let lock = read_lock(root)?;
    crate::store::swap::refuse_interrupted(root)?;
    let sled_dir = root.join(SLED_DIR);
    // A sled that will not open is reported after the journal is verified, so that damage
    // to the history is never hidden behind a broken index.
    let mut unopened = None;
    let mut read_only = None;
    let db = match (scope, &lock) {
        (AuditScope::JournalOnly, _) => Err("not asked (--journal-only)".to_owned()),
        (AuditScope::Both, None) => {
            Err("held by a live writer; the journal was read up to its last complete record".to_owned())
        }
        (AuditScope::Both, Some(_)) => match open_sled_for_reading(&sled_dir) {
            Ok(db) => Ok(db),
            Err(OpenError::Locked(_)) => Err("held by a live writer".to_owned()),
            Err(e @ OpenError::NoRoom { .. }) => Err(format!("not opened: {e}")),
            // A read-only filesystem refusing sled's open (which writes) — an auditor's
            // snapshot — is no damage: the journal is verified and its verdict given (outside
            // review 190 F3: exit 2 with it withheld), but without sled that is no pass (192
            // F3: a journal that lost its end verified, exit 0): `ReadOnlySled`, exit 2.
            Err(e @ OpenError::Sled(_)) if e.is_read_only_filesystem() => {
                let reason =
                    format!("not opened: {} (a read-only filesystem: sled's open writes)", e.index_reason());
                read_only = Some(e);
                Err(reason)
            }
            // (A file where sled opens one that is not a regular file too: outside review 165
            // F2, it was reported before journal damage it then hid.)
            Err(e @ (OpenError::Sled(_) | OpenError::SledMissing(_) | OpenError::NotRegularInSled(_))) => {
                let reason = format!("will not open: {e}");
                unopened = Some(e);
                Err(reason)
            }
            Err(e) => return Err(e),
        },
    };
    // Read the meta tree, then hand sled to a cursor that reopens it every few MiB: sled
    // 0.34 keeps every value it has read (its frames are stored as blobs, outside its cache
    // accounting) until the database drops.
    let meta = match &db {
        Ok(db) => Some(read_meta(&trees(db)?.1)?),
        Err(_) => None,
    };
    // A newer build's ledger is refused by name before its bytes could be read as damage.
    if let Some((_, version)) = &meta {
        refuse_newer_format(version.as_deref())?;
    }
    let (copies, handle) = match db {
        // A sled that names no ledger holds no copy to compare: what it lacks is all lag, and
        // the report says only the journal was verified (outside review 78: "journal and
        // sled" were reported verified with sled emptied).
        Ok(db) if meta.as_ref().is_some_and(names_no_ledger) => (
            Copies::JournalOnly(format!(
                "{HOLDS_NO_LEDGER}; the writer's next open fills it from the journal"
            )),
            Some(db),
        ),
        Ok(db) => (Copies::Both, Some(db)),
        Err(reason) => (Copies::JournalOnly(reason), None),
    };
    let handle = std::sync::Mutex::new(handle);
    let mut checkpoint_seen = false;
    // (The mark is read under the shared lock only: see below.)
    let mut at_mark =
        if lock.is_some() { crate::store::head_mark::AtMark::new(root) } else { Default::default() };
    let mut on_entry = |sealed: &SealedEntry| -> Result<(), OpenError> {
        at_mark.note(sealed);
        if let Some(cp) = checkpoint.filter(|cp| cp.seq == sealed.entry.seq) {
            cp.check(sealed).map_err(|reason| corrupt(cp.seq, Replica::Journal, reason))?;
            checkpoint_seen = true;
        }
        observe(sealed)
    };
    let sled = if meta.is_some() { SledCopy::Streamed(&sled_dir, &handle) } else { SledCopy::Off };
    // Beside a lock holder the segments may be swapped under this read by a `recover`
    // (outside review 131: a read that began before its marker and ended after it reported
    // half the journal, exit 0): those read must still be there, the same files, and no
    // marker. A live writer only appends and adds segments.
    // The swap counter too (outside review 133: a read whose listing fell inside a swap saw
    // only the rewritten first segment, unchanged at the end, and reported a prefix).
    let before =
        if lock.is_none() { Some((crate::store::swap::epoch(root), segment_files(root)?)) } else { None };
    let scanned = scan_strict(root, sled, false, threads, &mut on_entry);
    if let Some((epoch, files)) = &before
        && (crate::store::swap::epoch(root) != *epoch || replaced(root, files)?)
    {
        return Err(OpenError::ReadRaced);
    }
    let scan = scanned?;
    if let Some(cp) = checkpoint
        && !checkpoint_seen
    {
        return Err(corrupt(cp.seq, Replica::Journal, Corruption::Truncated { head: scan.head.seq }));
    }
    // The head mark names a head the journal does not hold: it lost acknowledged records,
    // and the auditor is told as the writer and `recover` are (outside review 233 F1: verify
    // and replay passed, exit 0, and called a lagging sled recoverable). Only under the shared
    // lock: beside a live writer or `recover` the mark may move while the journal is read.
    if lock.is_some() {
        let sled = match &copies {
            Copies::Both => "sled — their only other copy — does not hold them either".to_owned(),
            Copies::JournalOnly(_) => {
                "sled — their only other copy — was not compared here (`ledger verify` \
                                       compares it; `ledger recover` restores them if it holds them)"
                    .to_owned()
            }
        };
        crate::store::head_mark::refuse_lost_end(root, &scan.head, at_mark.held, sled, false)?;
    }
    if let Some(e) = read_only {
        return Err(OpenError::ReadOnlySled {
            source: Box::new(e),
            entries: scan.entries,
            head: scan.head.seq,
        });
    }
    if let Some(e) = unopened {
        return Err(match &scan.torn {
            Some(torn) => OpenError::torn_unchecked(torn, scan.head.seq + 1, &e),
            None => e,
        });
    }
    if let (Some(values), Some(torn)) = (&meta, &scan.torn)
        && names_no_ledger(values)
    {
        return Err(OpenError::torn_unvouched(torn, scan.head.seq + 1, HOLDS_NO_LEDGER.to_owned()));
    }
    let lag = match meta {
        Some(values) => {
            let meta_present = check_meta_values(values, &scan.head)?;
            scan.sled_lag_frames + u64::from(!meta_present && scan.sled_lag_frames == 0)
        }
        None => 0,
    };
    Ok(VerifyReport {
        head: scan.head,
        frames: scan.frames,
        entries: scan.entries,
        torn_tail: scan.torn,
        sled_lag_frames: lag,
        checkpoint: checkpoint.cloned(),
        copies,
        live_writer: lock.is_none(),
    })
}

/// The journal's segment files and their inode numbers.
fn segment_files(root: &Path) -> Result<Vec<(std::path::PathBuf, u64)>, OpenError> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for (_, path) in crate::store::journal::list_segments(&root.join(super::JOURNAL_DIR))? {
        let ino = match std::fs::symlink_metadata(&path) {
            Ok(m) => m.ino(),
            // Listed, then gone: a `recover` is moving segments (outside review 134: exit 2).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(OpenError::ReadRaced),
            Err(e) => return Err(io("stat", &path)(e).into()),
        };
        out.push((path, ino));
    }
    Ok(out)
}

/// Whether a segment of `before` is gone or is another file now, or a swap marker is there.
fn replaced(root: &Path, before: &[(std::path::PathBuf, u64)]) -> Result<bool, OpenError> {
    use std::os::unix::fs::MetadataExt;
    if crate::store::swap::refuse_interrupted(root).is_err() {
        return Ok(true);
    }
    Ok(before.iter().any(|(path, ino)| std::fs::symlink_metadata(path).map_or(true, |m| m.ino() != *ino)))
}

/// The audit an embedding process runs beside its own live writer: the journal read up to
/// each segment's length at open, and every record it holds compared with sled's copy
/// through the writer's own sled handle (`reader`), which may lead or lag the journal read.
pub fn audit_live(
    root: &Path,
    reader: &StoreReader,
    observe: OnEntry<'_>,
) -> Result<VerifyReport, OpenError> {
    ledger_journal_dir(root)?;
    let scan = scan_strict(root, SledCopy::MayLead(&reader.entries), false, Threads::default(), observe)?;
    Ok(VerifyReport {
        head: scan.head,
        frames: scan.frames,
        entries: scan.entries,
        torn_tail: scan.torn,
        sled_lag_frames: scan.sled_lag_frames,
        checkpoint: None,
        copies: Copies::Both,
        live_writer: true,
    })
}

/// Streams every entry of the journal — the commit point and the authority — to
/// `observe`, strictly verified, without opening sled (see [`audit`] for both copies).
pub fn replay_journal(root: &Path, observe: OnEntry<'_>) -> Result<VerifyReport, OpenError> {
    audit(root, None, AuditScope::JournalOnly, observe)
}
