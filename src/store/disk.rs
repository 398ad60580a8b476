//! The real backend: the journal is the commit point, sled the index. Open is strict.

use std::fs::{DirBuilder, File};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use ledger_schema::events::LedgerInitialized;
use ledger_schema::{Event, FORMAT_VERSION, Id, SealedEntry, decode_frame};

use super::journal::{JournalWriter, SegmentReader, Split, io, list_segments, sync_dir};
use super::{
    Chain, Checkpoint, CommitError, CommitReceipt, Corruption, Frame, Head, IoError, OpenError, ReadError,
    Replica, Store, check_next, receipt,
};

const JOURNAL_DIR: &str = "journal";
const SLED_DIR: &str = "sled";
const ENTRIES_TREE: &str = "entries";
const META_TREE: &str = "meta";
const META_LEDGER_ID: &str = "ledgerId";
const META_FORMAT_VERSION: &str = "formatVersion";
/// sled's page cache; the journal, not sled, is what must be fast to append.
const SLED_CACHE_BYTES: u64 = 64 << 20;
/// sled's page cache for read-only verification and replay: they stream sled once.
const VERIFY_SLED_CACHE_BYTES: u64 = 8 << 20;
/// Frames that may be durable in the journal but not yet in sled before the store stops
/// accepting commits (the next open restores them).
const MAX_SLED_LAG_FRAMES: usize = 1024;

/// Where a fault is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// The journal write stops half-way and errors.
    JournalWrite,
    /// The journal's fdatasync errors.
    Fdatasync,
    /// The sled insert errors (after the frame is durable).
    SledInsert,
}

/// Fail the operation at `point` once `after` earlier operations there have succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    pub point: FaultPoint,
    pub after: u64,
}

#[derive(Debug, Default)]
struct Faults {
    plan: Option<FaultPlan>,
    seen: [u64; 3],
}

impl Faults {
    fn hit(&mut self, point: FaultPoint) -> bool {
        let Some(plan) = self.plan else { return false };
        let slot = match point {
            FaultPoint::JournalWrite => 0,
            FaultPoint::Fdatasync => 1,
            FaultPoint::SledInsert => 2,
        };
        let Some(seen) = self.seen.get_mut(slot) else {
            return false;
        };
        let fire = plan.point == point && *seen == plan.after;
        *seen += 1;
        fire
    }
}

/// A torn frame found (and, when opening, cut off) at the journal's tail.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TornTail {
    pub segment: PathBuf,
    pub offset: u64,
    pub bytes: u64,
}

/// What a strict open found and repaired.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpenReport {
    pub frames: u64,
    pub entries: u64,
    /// A never-acknowledged partial frame cut off the journal's tail.
    pub torn_tail: Option<TornTail>,
    /// Frames that were durable in the journal but missing from sled's tail, re-inserted.
    pub sled_restored_frames: u64,
}

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
}

/// What `recover` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoverReport {
    pub head: Head,
    pub frames: u64,
    pub entries: u64,
    /// Where the previous sled directory was moved (never deleted).
    pub moved_aside: Option<PathBuf>,
    pub torn_tail: Option<TornTail>,
}

/// The journal + sled backend.
#[derive(Debug)]
pub struct DiskStore {
    root: PathBuf,
    journal: JournalWriter,
    db: sled::Db,
    entries: sled::Tree,
    head: Head,
    /// Frames durable in the journal whose sled insert failed, oldest first.
    sled_pending: Vec<(u64, Vec<u8>)>,
    poisoned: bool,
    faults: Faults,
    /// Held for the store's lifetime: one writer per ledger directory.
    _lock: File,
}

fn create_dir_0700(path: &Path) -> Result<(), IoError> {
    DirBuilder::new().mode(0o700).create(path).map_err(io("create directory", path))
}

fn lock(root: &Path, exclusive: bool) -> Result<File, OpenError> {
    let dir = root.join(JOURNAL_DIR);
    if !dir.is_dir() {
        return Err(OpenError::NotALedger(root.to_path_buf()));
    }
    let file = File::open(&dir).map_err(io("open", &dir))?;
    let deadline = std::time::Instant::now() + JOURNAL_LOCK_WAIT;
    loop {
        let locked = if exclusive { file.try_lock() } else { file.try_lock_shared() };
        match locked {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Err(OpenError::Locked(dir)),
            Err(std::fs::TryLockError::Error(e)) => return Err(io("lock", &dir)(e).into()),
        }
    }
}

/// How long to wait for the `journal/` lock before reporting `Locked`. A lock just released
/// can still be held for a moment by a descriptor a child process inherited between fork
/// and exec (another thread spawning a process while the lock was held) — that is no other
/// writer. Found as a flaky `crash.rs::engine_kill_9_loses_no_receipt` under load.
const JOURNAL_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// How long to wait for sled's own file lock. sled releases it from a background thread
/// after the last handle of a database drops, so a reopen in the same process can find
/// it still held for a moment (our `journal/` lock already excludes other processes).
const SLED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn open_sled(path: &Path) -> Result<sled::Db, OpenError> {
    open_sled_with(path, SLED_CACHE_BYTES)
}

/// Opens sled with a page cache of `cache_bytes` (read-only paths use a small one).
fn open_sled_with(path: &Path, cache_bytes: u64) -> Result<sled::Db, OpenError> {
    if !path.is_dir() {
        return Err(OpenError::Sled(format!("{} is missing", path.display())));
    }
    let started = std::time::Instant::now();
    loop {
        match sled::Config::new().path(path).cache_capacity(cache_bytes).open() {
            Ok(db) => return Ok(db),
            Err(e) if e.to_string().contains("could not acquire lock") => {
                if started.elapsed() >= SLED_LOCK_WAIT {
                    return Err(OpenError::Locked(path.to_path_buf()));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(OpenError::Sled(e.to_string())),
        }
    }
}

fn trees(db: &sled::Db) -> Result<(sled::Tree, sled::Tree), OpenError> {
    let entries = db.open_tree(ENTRIES_TREE).map_err(|e| OpenError::Sled(e.to_string()))?;
    let meta = db.open_tree(META_TREE).map_err(|e| OpenError::Sled(e.to_string()))?;
    Ok((entries, meta))
}

fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

fn corrupt(seq: u64, replica: Replica, reason: Corruption) -> OpenError {
    OpenError::Corrupt { seq, replica, reason }
}

/// Creates a new ledger at `root` holding its genesis entry.
pub fn init(root: &Path, label: &str, ledger: Id, time_ms: u64) -> Result<DiskStore, OpenError> {
    if root.exists() {
        let mut items = std::fs::read_dir(root).map_err(io("read directory", root))?;
        if items.next().is_some() {
            return Err(OpenError::AlreadyExists(root.to_path_buf()));
        }
    } else {
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io("create directory", parent))?;
        }
        create_dir_0700(root)?;
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    let journal_dir = root.join(JOURNAL_DIR);
    create_dir_0700(&journal_dir)?;
    create_dir_0700(&root.join(SLED_DIR))?;
    sync_dir(root)?;
    let lock_file = lock(root, true)?;
    let mut chain = Chain::empty();
    let genesis = Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: label.to_owned() });
    let sealed = chain.seal(genesis, time_ms, ledger).map_err(|e| OpenError::Genesis(e.to_string()))?;
    let frame = Frame::new(vec![sealed]).map_err(|e| OpenError::Genesis(e.to_string()))?;
    let mut writer = JournalWriter::create(&journal_dir, 0)?;
    writer.append(frame.bytes(), false, false)?;
    let db = open_sled(&root.join(SLED_DIR))?;
    let (entries, meta) = trees(&db)?;
    let sled_err = |e: sled::Error| OpenError::Sled(e.to_string());
    meta.insert(META_LEDGER_ID, &ledger.to_bytes()[..]).map_err(sled_err)?;
    meta.insert(META_FORMAT_VERSION, &FORMAT_VERSION.to_be_bytes()[..]).map_err(sled_err)?;
    entries.insert(key(0), frame.bytes()).map_err(sled_err)?;
    db.flush().map_err(sled_err)?;
    let head = chain.head().ok_or(OpenError::Empty)?;
    Ok(DiskStore {
        root: root.to_path_buf(),
        journal: writer,
        db,
        entries,
        head,
        sled_pending: Vec::new(),
        poisoned: false,
        faults: Faults::default(),
        _lock: lock_file,
    })
}

/// What one pass over the journal (compared against sled, when given) established.
struct Scan {
    head: Head,
    frames: u64,
    entries: u64,
    torn: Option<TornTail>,
    /// Frames of the journal missing from sled's tail (bytes kept only when asked).
    sled_lag: Vec<(u64, Vec<u8>)>,
    sled_lag_frames: u64,
    /// The last segment and its verified length (where appends continue).
    last_segment: Option<(PathBuf, u64)>,
}

/// Per-entry observer of a scan (checkpoints, replay).
pub type OnEntry<'a> = &'a mut dyn FnMut(&SealedEntry) -> Result<(), OpenError>;
/// Per-frame observer of a scan (recovery inserts into a fresh sled).
type OnFrame<'a> = &'a mut dyn FnMut(u64, &[u8]) -> Result<(), OpenError>;

/// Verifies every frame of the journal, in order, and — when `sled` is given — that sled
/// holds the same frames under the right keys, allowing sled to lag only by a suffix.
fn scan(
    root: &Path,
    sled: Option<&sled::Tree>,
    keep_lag: bool,
    on_entry: OnEntry<'_>,
    on_frame: OnFrame<'_>,
) -> Result<Scan, OpenError> {
    let journal_dir = root.join(JOURNAL_DIR);
    let segments = list_segments(&journal_dir)?;
    let mut chain = Chain::empty();
    let mut sled_iter = sled.map(|t| t.iter());
    let mut sled_lagging = false;
    // A sled frame that differs from the journal is only pinned on sled once the journal's
    // version is authenticated by the next entry's `prev` link; until then a journal
    // failure takes precedence. `(last seq of the frame, the finding)`.
    let mut held: Option<(u64, OpenError)> = None;
    let mut out = Scan {
        head: Head { ledger: Id::default(), seq: 0, hash: Default::default(), time_ms: 0 },
        frames: 0,
        entries: 0,
        torn: None,
        sled_lag: Vec::new(),
        sled_lag_frames: 0,
        last_segment: None,
    };
    let n_segments = segments.len();
    for (segment_idx, (named_seq, path)) in segments.into_iter().enumerate() {
        let is_last = segment_idx + 1 == n_segments;
        let mut reader = SegmentReader::open(&path)?;
        let segment = path.display().to_string();
        if reader.len() == 0 && (!is_last || named_seq != chain.next_seq()) {
            let reason = Corruption::SegmentName { segment, named: named_seq, found: chain.next_seq() };
            return Err(corrupt(chain.next_seq(), Replica::Journal, reason));
        }
        loop {
            let (pos, frame_bytes) = match reader.next_frame(&path)? {
                Split::Frame { offset, bytes } => (offset, bytes),
                Split::End => break,
                Split::Torn { offset } if is_last => {
                    out.torn = Some(TornTail { segment: path.clone(), offset, bytes: reader.len() - offset });
                    break;
                }
                split => {
                    let (offset, detail) = match split {
                        Split::Garbage { offset, error } => (offset, error.to_string()),
                        Split::Torn { offset } => {
                            (offset, "a partial frame before the end of the last segment".to_owned())
                        }
                        Split::Frame { offset, .. } => (offset, String::new()),
                        Split::End => (reader.len(), String::new()),
                    };
                    let reason = Corruption::Garbage {
                        segment: segment.clone(),
                        offset,
                        bytes: reader.len().saturating_sub(offset),
                        detail,
                    };
                    return Err(corrupt(chain.next_seq(), Replica::Journal, reason));
                }
            };
            let first_seq = chain.next_seq();
            let entry_bytes = decode_frame(frame_bytes)
                .map_err(|e| corrupt(first_seq, Replica::Journal, Corruption::Decode(e)))?;
            for bytes in entry_bytes {
                let seq = chain.next_seq();
                let sealed = chain.verify(bytes).map_err(|reason| corrupt(seq, Replica::Journal, reason))?;
                on_entry(&sealed)?;
                out.entries += 1;
            }
            if pos == 0 && first_seq != named_seq {
                let reason =
                    Corruption::SegmentName { segment: segment.clone(), named: named_seq, found: first_seq };
                return Err(corrupt(first_seq, Replica::Journal, reason));
            }
            on_frame(first_seq, frame_bytes)?;
            out.frames += 1;
            if let Some(iter) = sled_iter.as_mut() {
                let next = if sled_lagging { None } else { iter.next() };
                match next {
                    None => {
                        sled_lagging = true;
                        out.sled_lag_frames += 1;
                        if keep_lag {
                            out.sled_lag.push((first_seq, frame_bytes.to_vec()));
                        }
                    }
                    Some(Err(e)) => return Err(OpenError::Sled(e.to_string())),
                    Some(Ok((k, v))) => {
                        if let Err(finding) = compare_sled(first_seq, frame_bytes, &k, &v) {
                            held.get_or_insert((chain.next_seq().saturating_sub(1), finding));
                        }
                    }
                }
            }
        }
        if is_last {
            let valid_len = out.torn.as_ref().map_or(reader.len(), |t| t.offset);
            out.last_segment = Some((path, valid_len));
        }
    }
    if let Some((_, finding)) = held {
        return Err(finding);
    }
    if let Some(iter) = sled_iter.as_mut().filter(|_| !sled_lagging) {
        match iter.next() {
            None => {}
            Some(Err(e)) => return Err(OpenError::Sled(e.to_string())),
            Some(Ok((k, _))) => {
                let seq = key_seq(&k).unwrap_or(chain.next_seq());
                return Err(corrupt(seq, Replica::Journal, Corruption::MissingInJournal));
            }
        }
    }
    out.head = chain.head().ok_or(OpenError::Empty)?;
    Ok(out)
}

fn key_seq(k: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(k).ok().map(u64::from_be_bytes)
}

/// The sled frame at this position must be the journal's frame, under its first seq.
fn compare_sled(first_seq: u64, journal_bytes: &[u8], k: &[u8], v: &[u8]) -> Result<(), OpenError> {
    match key_seq(k) {
        Some(key) if key == first_seq => {}
        Some(key) if key > first_seq => {
            return Err(corrupt(first_seq, Replica::Sled, Corruption::MissingInSled));
        }
        Some(key) => {
            return Err(corrupt(key, Replica::Sled, Corruption::KeyMismatch { key, first_seq }));
        }
        None => {
            return Err(corrupt(
                first_seq,
                Replica::Sled,
                Corruption::KeyMismatch { key: u64::MAX, first_seq },
            ));
        }
    }
    if v != journal_bytes {
        let reason = match decode_frame(v) {
            Err(e) => Corruption::Decode(e),
            Ok(_) => Corruption::Differs,
        };
        return Err(corrupt(first_seq, Replica::Sled, reason));
    }
    Ok(())
}

/// The meta tree must name the genesis ledger id and format version; `None` if it lacks
/// them (a sled lagging since genesis).
fn check_meta(meta: &sled::Tree, head: &Head) -> Result<bool, OpenError> {
    let sled_err = |e: sled::Error| OpenError::Sled(e.to_string());
    let id = meta.get(META_LEDGER_ID).map_err(sled_err)?;
    let version = meta.get(META_FORMAT_VERSION).map_err(sled_err)?;
    match (id, version) {
        (None, None) => Ok(false),
        (Some(id), Some(version)) => {
            if id.as_ref() != head.ledger.to_bytes() {
                return Err(corrupt(
                    0,
                    Replica::Sled,
                    Corruption::Meta(format!("ledger id is not {}", head.ledger)),
                ));
            }
            if version.as_ref() != FORMAT_VERSION.to_be_bytes() {
                return Err(corrupt(0, Replica::Sled, Corruption::Meta("format version differs".into())));
            }
            Ok(true)
        }
        _ => Err(corrupt(0, Replica::Sled, Corruption::Meta("half of the meta tree is missing".into()))),
    }
}

fn write_meta(meta: &sled::Tree, ledger: Id) -> Result<(), OpenError> {
    let sled_err = |e: sled::Error| OpenError::Sled(e.to_string());
    meta.insert(META_LEDGER_ID, &ledger.to_bytes()[..]).map_err(sled_err)?;
    meta.insert(META_FORMAT_VERSION, &FORMAT_VERSION.to_be_bytes()[..]).map_err(sled_err)?;
    Ok(())
}

fn cut_torn_tail(torn: &TornTail) -> Result<(), IoError> {
    let file =
        std::fs::OpenOptions::new().write(true).open(&torn.segment).map_err(io("open", &torn.segment))?;
    file.set_len(torn.offset).map_err(io("truncate", &torn.segment))?;
    file.sync_all().map_err(io("fsync", &torn.segment))
}

/// Verifies a ledger without writing to it: every frame of the journal, sled against the
/// journal, and (optionally) a checkpoint. A torn journal tail and a sled lagging by a
/// suffix are reported as recoverable (the next open repairs both).
pub fn verify(root: &Path, checkpoint: Option<&Checkpoint>) -> Result<VerifyReport, OpenError> {
    verify_observed(root, checkpoint, &mut |_| Ok(()))
}

/// [`verify`], showing every verified entry to `observe` as it is read, in seq order (a
/// read-only replay folds its state in the same pass; memory stays bounded by a segment).
pub fn verify_observed(
    root: &Path,
    checkpoint: Option<&Checkpoint>,
    observe: OnEntry<'_>,
) -> Result<VerifyReport, OpenError> {
    let _lock = lock(root, false)?;
    let db = open_sled_with(&root.join(SLED_DIR), VERIFY_SLED_CACHE_BYTES)?;
    let (entries_tree, meta) = trees(&db)?;
    let mut checkpoint_seen = false;
    let mut on_entry = |sealed: &SealedEntry| -> Result<(), OpenError> {
        if let Some(cp) = checkpoint.filter(|cp| cp.seq == sealed.entry.seq) {
            cp.check(sealed).map_err(|reason| corrupt(cp.seq, Replica::Journal, reason))?;
            checkpoint_seen = true;
        }
        observe(sealed)
    };
    let scan = scan(root, Some(&entries_tree), false, &mut on_entry, &mut |_, _| Ok(()))?;
    if let Some(cp) = checkpoint
        && !checkpoint_seen
    {
        return Err(corrupt(cp.seq, Replica::Journal, Corruption::Truncated { head: scan.head.seq }));
    }
    let meta_present = check_meta(&meta, &scan.head)?;
    let lag = scan.sled_lag_frames + u64::from(!meta_present && scan.sled_lag_frames == 0);
    Ok(VerifyReport {
        head: scan.head,
        frames: scan.frames,
        entries: scan.entries,
        torn_tail: scan.torn,
        sled_lag_frames: lag,
        checkpoint: checkpoint.cloned(),
    })
}

/// What a journal-only pass established (see [`replay_journal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalReport {
    pub head: Head,
    pub frames: u64,
    pub entries: u64,
    /// A torn tail of the last segment (not an error: the next open cuts it).
    pub torn_tail: Option<TornTail>,
}

/// Streams every entry of the journal — the commit point and the authority — to
/// `observe`, strictly verified (frame and entry decoding, hash, `prev`, seq contiguity,
/// segment names), without opening sled. Memory stays bounded by one segment. This is
/// what `ledger replay` folds; comparing sled against the journal is [`verify`]'s job.
/// Takes the shared lock, so it never races a writer.
pub fn replay_journal(root: &Path, observe: OnEntry<'_>) -> Result<JournalReport, OpenError> {
    let _lock = lock(root, false)?;
    let scan = scan(root, None, false, observe, &mut |_, _| Ok(()))?;
    Ok(JournalReport { head: scan.head, frames: scan.frames, entries: scan.entries, torn_tail: scan.torn })
}

/// Rebuilds sled from a journal that verifies. The old `sled/` is moved aside (never
/// deleted); if the journal does not verify, nothing is changed.
pub fn recover(root: &Path) -> Result<RecoverReport, OpenError> {
    let _lock = lock(root, true)?;
    let first = scan(root, None, false, &mut |_| Ok(()), &mut |_, _| Ok(()))?;
    let sled_dir = root.join(SLED_DIR);
    let mut moved_aside = None;
    if sled_dir.exists() {
        let aside = (1u32..)
            .map(|n| root.join(format!("sled.broken-{n}")))
            .find(|p| !p.exists())
            .ok_or_else(|| OpenError::Sled("no free name to move sled/ aside".into()))?;
        std::fs::rename(&sled_dir, &aside).map_err(io("rename", &sled_dir))?;
        moved_aside = Some(aside);
    }
    create_dir_0700(&sled_dir)?;
    sync_dir(root)?;
    let db = open_sled(&sled_dir)?;
    let (entries_tree, meta) = trees(&db)?;
    let mut insert = |first_seq: u64, bytes: &[u8]| -> Result<(), OpenError> {
        entries_tree.insert(key(first_seq), bytes).map(|_| ()).map_err(|e| OpenError::Sled(e.to_string()))
    };
    let second = scan(root, None, false, &mut |_| Ok(()), &mut insert)?;
    if second.head != first.head {
        return Err(OpenError::Sled("the journal changed during recovery".into()));
    }
    write_meta(&meta, second.head.ledger)?;
    db.flush().map_err(|e| OpenError::Sled(e.to_string()))?;
    if let Some(torn) = &second.torn {
        cut_torn_tail(torn)?;
    }
    Ok(RecoverReport {
        head: second.head,
        frames: second.frames,
        entries: second.entries,
        moved_aside,
        torn_tail: second.torn,
    })
}

impl DiskStore {
    /// Opens a ledger strictly: every frame of both copies is verified; a sled lagging by a
    /// suffix is restored from the journal and a torn journal tail is cut off (both
    /// reported); any other difference is an error and nothing is changed.
    pub fn open(root: &Path) -> Result<(DiskStore, OpenReport), OpenError> {
        Self::open_observed(root, None, &mut |_| Ok(()))
    }

    /// [`DiskStore::open`] with injected faults.
    pub fn open_with_faults(root: &Path, plan: FaultPlan) -> Result<(DiskStore, OpenReport), OpenError> {
        Self::open_observed(root, Some(plan), &mut |_| Ok(()))
    }

    /// [`DiskStore::open`], showing every verified entry to `on_entry` as it is read (a
    /// replay folds its state in the same pass).
    pub fn open_observed(
        root: &Path,
        faults: Option<FaultPlan>,
        on_entry: OnEntry<'_>,
    ) -> Result<(DiskStore, OpenReport), OpenError> {
        let lock_file = lock(root, true)?;
        let db = open_sled(&root.join(SLED_DIR))?;
        let (entries_tree, meta) = trees(&db)?;
        let scan = scan(root, Some(&entries_tree), true, on_entry, &mut |_, _| Ok(()))?;
        let meta_present = check_meta(&meta, &scan.head)?;
        // Everything verified: now, and only now, repair what a crash can leave behind.
        let sled_err = |e: sled::Error| OpenError::Sled(e.to_string());
        if !meta_present {
            write_meta(&meta, scan.head.ledger)?;
        }
        for (first_seq, bytes) in &scan.sled_lag {
            entries_tree.insert(key(*first_seq), bytes.as_slice()).map_err(sled_err)?;
        }
        if !meta_present || !scan.sled_lag.is_empty() {
            db.flush().map_err(sled_err)?;
        }
        if let Some(torn) = &scan.torn {
            cut_torn_tail(torn)?;
        }
        let journal_dir = root.join(JOURNAL_DIR);
        let journal = match scan.last_segment {
            Some((path, len)) => JournalWriter::resume(&journal_dir, path, len)?,
            None => return Err(OpenError::Empty),
        };
        let report = OpenReport {
            frames: scan.frames,
            entries: scan.entries,
            torn_tail: scan.torn,
            sled_restored_frames: scan.sled_lag.len() as u64,
        };
        let store = DiskStore {
            root: root.to_path_buf(),
            journal,
            db,
            entries: entries_tree,
            head: scan.head,
            sled_pending: Vec::new(),
            poisoned: false,
            faults: Faults { plan: faults, seen: [0; 3] },
            _lock: lock_file,
        };
        Ok((store, report))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Flushes sled (not needed for durability — the journal is the commit point — but it
    /// makes the next open cheaper). Called on orderly shutdown.
    pub fn flush_index(&self) -> Result<(), ReadError> {
        self.db.flush().map(|_| ()).map_err(|e| ReadError::Sled(e.to_string()))
    }

    /// Inserts pending frames into sled, oldest first; stops at the first failure so sled
    /// only ever lags by a suffix.
    fn drain_sled_pending(&mut self) -> Result<(), String> {
        while let Some((first_seq, bytes)) = self.sled_pending.first() {
            if self.faults.hit(FaultPoint::SledInsert) {
                return Err("injected fault: sled insert".into());
            }
            self.entries.insert(key(*first_seq), bytes.as_slice()).map_err(|e| e.to_string())?;
            self.sled_pending.remove(0);
        }
        Ok(())
    }

    /// The frame holding `seq`: from the pending list, else from sled.
    fn frame_bytes_holding(&self, seq: u64) -> Result<(u64, Vec<u8>), ReadError> {
        if let Some((first, bytes)) = self.sled_pending.iter().rev().find(|(first, _)| *first <= seq) {
            return Ok((*first, bytes.clone()));
        }
        frame_in_tree(&self.entries, seq, self.head.seq)
    }

    /// A read handle that can be used from other threads while this store keeps writing.
    /// It reads sled only: it sees a frame once its sled insert is done (right after the
    /// frame is durable, unless that insert failed — then after the next open).
    pub fn reader(&self) -> StoreReader {
        StoreReader { entries: self.entries.clone() }
    }
}

/// The frame of `tree` holding `seq` (`head` is only for the error message).
fn frame_in_tree(tree: &sled::Tree, seq: u64, head: u64) -> Result<(u64, Vec<u8>), ReadError> {
    let found =
        tree.range(..=key(seq)).next_back().transpose().map_err(|e| ReadError::Sled(e.to_string()))?;
    let (k, v) = found.ok_or(ReadError::NotFound { seq, head })?;
    let first = key_seq(&k).ok_or(ReadError::Corrupt {
        seq,
        reason: Corruption::KeyMismatch { key: u64::MAX, first_seq: seq },
    })?;
    Ok((first, v.to_vec()))
}

/// Decodes the entries `from..=to` out of consecutive frames fetched by `frame_at`.
fn read_frames(
    from: u64,
    to: u64,
    mut frame_at: impl FnMut(u64) -> Result<(u64, Vec<u8>), ReadError>,
) -> Result<Vec<SealedEntry>, ReadError> {
    let mut out = Vec::new();
    let mut seq = from;
    while seq <= to {
        let (first, bytes) = frame_at(seq)?;
        let entries =
            decode_frame(&bytes).map_err(|e| ReadError::Corrupt { seq, reason: Corruption::Decode(e) })?;
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

/// A thread-safe read handle on a ledger's sled copy (see [`DiskStore::reader`]).
#[derive(Debug, Clone)]
pub struct StoreReader {
    entries: sled::Tree,
}

impl StoreReader {
    /// The entries `from..=to` that sled holds, in order (fewer if `to` is not in sled yet).
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<SealedEntry>, ReadError> {
        let last = match self.entries.last().map_err(|e| ReadError::Sled(e.to_string()))? {
            None => return Ok(Vec::new()),
            Some((k, v)) => {
                let first = key_seq(&k).unwrap_or(0);
                first.saturating_add(decode_frame(&v).map(|e| e.len() as u64).unwrap_or(1)).saturating_sub(1)
            }
        };
        if from > last {
            return Ok(Vec::new());
        }
        read_frames(from, to.min(last), |seq| frame_in_tree(&self.entries, seq, last))
    }
}

impl Store for DiskStore {
    fn head(&self) -> Head {
        self.head
    }

    fn commit(&mut self, frame: &Frame) -> Result<CommitReceipt, CommitError> {
        if self.poisoned {
            return Err(CommitError::Poisoned);
        }
        check_next(self.head, frame)?;
        let fail_write = self.faults.hit(FaultPoint::JournalWrite);
        let fail_sync = !fail_write && self.faults.hit(FaultPoint::Fdatasync);
        let appended = self
            .journal
            .roll_if_full(frame.first_seq())
            .and_then(|()| self.journal.append(frame.bytes(), fail_write, fail_sync));
        if let Err(e) = appended {
            self.poisoned = true;
            return Err(CommitError::NotDurable(e));
        }
        // Durable from here on: the commit stands whatever sled does.
        if let Some(last) = frame.entries().last() {
            self.head = Head {
                ledger: self.head.ledger,
                seq: last.entry.seq,
                hash: last.hash,
                time_ms: last.entry.time_ms,
            };
        }
        self.sled_pending.push((frame.first_seq(), frame.bytes().to_vec()));
        let sled_lag = self.drain_sled_pending().err();
        if self.sled_pending.len() >= MAX_SLED_LAG_FRAMES {
            self.poisoned = true;
        }
        Ok(receipt(frame, sled_lag))
    }

    fn read(&self, seq: u64) -> Result<SealedEntry, ReadError> {
        if seq > self.head.seq {
            return Err(ReadError::NotFound { seq, head: self.head.seq });
        }
        read_frames(seq, seq, |s| self.frame_bytes_holding(s))?
            .pop()
            .ok_or(ReadError::NotFound { seq, head: self.head.seq })
    }

    fn read_range(&self, from: u64, to: u64) -> Result<Vec<SealedEntry>, ReadError> {
        read_frames(from, to.min(self.head.seq), |s| self.frame_bytes_holding(s))
    }
}
