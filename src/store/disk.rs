//! The real backend: the journal is the commit point, sled the index. Open is strict.

use std::fs::{DirBuilder, File};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use ledger_schema::events::LedgerInitialized;
use ledger_schema::record::{
    HEADER_BYTES, JOURNAL_FORMAT_VERSION, RecordFault, RecordHeader, Tail, classify_tail, open_record,
};
use ledger_schema::{Event, Id, SealedEntry, decode_frame};

use super::journal::{
    JournalWriter, MAX_SEGMENT_BYTES, SegmentReader, Split, V1_FIRST_BYTE, io, list_segments, sync_dir,
};
use super::{
    Chain, Checkpoint, CommitError, CommitReceipt, Corruption, Frame, Head, IoError, OpenError, ReadError,
    Replica, Store, check_next, receipt,
};

pub(super) const JOURNAL_DIR: &str = "journal";
pub(super) const SLED_DIR: &str = "sled";
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
#[serde(rename_all = "camelCase")]
pub struct TornTail {
    pub segment: PathBuf,
    pub offset: u64,
    pub bytes: u64,
    /// Where the cut bytes were moved (under `cut/`), once cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<PathBuf>,
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
    /// sled would not open and was rebuilt from the journal.
    pub index_rebuilt: Option<IndexRebuilt>,
}

/// Why the index was rebuilt on open, and where the old one went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRebuilt {
    pub reason: String,
    pub moved_aside: Option<PathBuf>,
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
    /// Which copies were verified.
    pub copies: Copies,
    /// A writer held the ledger: the journal was read up to its last complete record, and a
    /// torn tail is that writer's write in flight.
    pub live_writer: bool,
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

pub(super) fn create_dir_0700(path: &Path) -> Result<(), IoError> {
    DirBuilder::new().mode(0o700).create(path).map_err(io("create directory", path))
}

pub(super) fn lock(root: &Path, exclusive: bool) -> Result<File, OpenError> {
    let dir = ledger_journal_dir(root)?;
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

/// `root/journal`, or why `root` is not a readable ledger: missing → not a ledger; any
/// other failure (permission denied, I/O) → that I/O error with the OS reason.
fn ledger_journal_dir(root: &Path) -> Result<PathBuf, OpenError> {
    let dir = root.join(JOURNAL_DIR);
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => Ok(dir),
        Ok(_) => Err(OpenError::NotALedger(root.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::metadata(root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("stat", root)(e).into()),
            _ => Err(OpenError::NotALedger(root.to_path_buf())),
        },
        Err(e) => Err(io("stat", &dir)(e).into()),
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

pub(super) fn open_sled(path: &Path) -> Result<sled::Db, OpenError> {
    ensure_room_for_sled(path)?;
    open_sled_with(path, SLED_CACHE_BYTES)
}

/// Free bytes sled needs before it is opened: sled writes when it opens (its recovery and
/// a new segment), and on a full disk that write leaves it unopenable.
const SLED_MIN_FREE_BYTES: u64 = 16 << 20;

/// Refuses to open sled where its own open could fail half-way for want of space.
fn ensure_room_for_sled(path: &Path) -> Result<(), OpenError> {
    let probe = if path.exists() { path } else { path.parent().unwrap_or(path) };
    let stat = rustix::fs::statvfs(probe).map_err(|e| io("statvfs", probe)(e.into()))?;
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    if free < SLED_MIN_FREE_BYTES {
        return Err(OpenError::NoRoom { path: probe.to_path_buf(), free, needed: SLED_MIN_FREE_BYTES });
    }
    Ok(())
}

/// sled for a read-only audit: a small page cache, and never on a disk too full for sled's
/// own open (which writes).
fn open_sled_for_reading(path: &Path) -> Result<sled::Db, OpenError> {
    ensure_room_for_sled(path)?;
    open_sled_read(path)
}

/// sled for reading: a small page cache and no background flusher (an audit writes
/// nothing, and a flusher thread would hold the database — and its lock — after the last
/// handle drops, delaying the next open).
fn open_sled_read(path: &Path) -> Result<sled::Db, OpenError> {
    open_sled_config(path, VERIFY_SLED_CACHE_BYTES, false)
}

/// Is sled's own lock file (`db`, flocked by sled while open) held by another handle?
fn sled_lock_held(path: &Path) -> bool {
    File::open(path.join("db"))
        .map(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
        .unwrap_or(false)
}

/// Opens sled with a page cache of `cache_bytes` (read-only paths use a small one).
pub(super) fn open_sled_with(path: &Path, cache_bytes: u64) -> Result<sled::Db, OpenError> {
    open_sled_config(path, cache_bytes, true)
}

/// Opens sled at `path` (waiting while another handle of this process still holds its lock)
/// with a page cache of `cache_bytes`, and a background flusher only if `flusher`.
fn open_sled_config(path: &Path, cache_bytes: u64, flusher: bool) -> Result<sled::Db, OpenError> {
    if !path.is_dir() {
        return Err(OpenError::SledMissing(path.to_path_buf()));
    }
    let started = std::time::Instant::now();
    loop {
        let config = sled::Config::new().path(path).cache_capacity(cache_bytes);
        let config = if flusher { config } else { config.flush_every_ms(None) };
        match config.open() {
            Ok(db) => return Ok(db),
            // sled 0.34 reports a held lock only as an `ErrorKind::Other` message; probe the
            // lock file ourselves instead of matching text.
            Err(_) if sled_lock_held(path) => {
                if started.elapsed() >= SLED_LOCK_WAIT {
                    return Err(OpenError::Locked(path.to_path_buf()));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(OpenError::Sled(e)),
        }
    }
}

pub(super) fn trees(db: &sled::Db) -> Result<(sled::Tree, sled::Tree), OpenError> {
    let entries = db.open_tree(ENTRIES_TREE).map_err(OpenError::Sled)?;
    let meta = db.open_tree(META_TREE).map_err(OpenError::Sled)?;
    Ok((entries, meta))
}

pub(super) fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

pub(super) fn corrupt(seq: u64, replica: Replica, reason: Corruption) -> OpenError {
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
    let sealed = chain.seal(genesis, time_ms, ledger).map_err(OpenError::Genesis)?;
    let frame = Frame::new(vec![sealed]).map_err(OpenError::GenesisFrame)?;
    let mut writer = JournalWriter::create(&journal_dir, 0)?;
    writer.append(frame.bytes(), false, false)?;
    let db = open_sled(&root.join(SLED_DIR))?;
    let (entries, meta) = trees(&db)?;
    let sled_err = OpenError::Sled;
    meta.insert(META_LEDGER_ID, &ledger.to_bytes()[..]).map_err(sled_err)?;
    meta.insert(META_FORMAT_VERSION, &JOURNAL_FORMAT_VERSION.to_be_bytes()[..]).map_err(sled_err)?;
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

/// Where a tolerant scan stopped: the first record that does not verify, of any kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub segment: PathBuf,
    pub offset: u64,
    /// The seq the record at `offset` should hold (the last good seq + 1).
    pub seq: u64,
    pub kind: DamageKind,
    /// The next intact record after damaged bytes in the same segment: `(offset, first seq)`.
    pub next_intact: Option<(u64, u64)>,
    /// The segment's length.
    pub segment_len: u64,
    pub is_last: bool,
}

/// What is wrong at a [`Damage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DamageKind {
    /// The bytes are not an intact record (and not a torn tail).
    Record(RecordFault),
    /// An intact record that does not continue the chain where it stands (a missing,
    /// duplicated or reordered record, a misnamed or empty segment, an altered entry).
    Invalid { seq: u64, reason: Corruption },
}

impl Damage {
    pub(super) fn corruption(&self) -> OpenError {
        match &self.kind {
            DamageKind::Record(fault) => corrupt(
                self.seq,
                Replica::Journal,
                Corruption::Damaged(Box::new(super::DamagedAt {
                    segment: self.segment.display().to_string(),
                    offset: self.offset,
                    fault: *fault,
                    last_good: self.seq.checked_sub(1),
                    next_intact: self.next_intact,
                })),
            ),
            DamageKind::Invalid { seq, reason } => corrupt(*seq, Replica::Journal, reason.clone()),
        }
    }
}

/// What one pass over the journal (compared against sled, when given) established.
pub(super) struct Scan {
    pub(super) head: Head,
    /// The last verified entry (`None` only when a tolerant scan found damage at genesis).
    pub(super) verified: Option<Head>,
    pub(super) frames: u64,
    pub(super) entries: u64,
    pub(super) torn: Option<TornTail>,
    /// Damage where a tolerant scan stopped (a strict scan returns it as an error).
    pub(super) damage: Option<Damage>,
    /// Frames of the journal missing from sled's tail (bytes kept only when asked).
    pub(super) sled_lag: Vec<(u64, Vec<u8>)>,
    pub(super) sled_lag_frames: u64,
    /// The last segment and its verified length (where appends continue).
    pub(super) last_segment: Option<(PathBuf, u64)>,
}

/// Per-entry observer of a scan (checkpoints, replay).
pub type OnEntry<'a> = &'a mut dyn FnMut(&SealedEntry) -> Result<(), OpenError>;
/// Where a verified record sits, shown to a scan's per-record observer.
pub(super) struct FramePos<'a> {
    pub segment: &'a Path,
    pub offset: u64,
    pub first_seq: u64,
    pub record: &'a [u8],
    /// The chain's head before this record (`None` for the genesis record).
    pub before: Option<Head>,
}

/// Per-record observer of a scan (recovery inserts into a fresh sled).
pub(super) type OnFrame<'a> = &'a mut dyn FnMut(&FramePos<'_>) -> Result<(), OpenError>;

/// Which sled copy a scan compares with the journal, and how.
#[derive(Clone, Copy)]
pub(super) enum SledCopy<'a> {
    /// The journal alone.
    Off,
    /// sled must hold the journal's records, lacking at most a suffix.
    Strict(&'a sled::Tree),
    /// As `Strict`, but sled may also hold records after the journal's end (a live
    /// writer appended them after the journal was read).
    MayLead(&'a sled::Tree),
    /// As `Strict`, reading sled through a [`SledCursor`] that starts with this handle
    /// (bounded memory; read-only audits). A `Mutex` only so that the scan may run on a
    /// helper thread ([`Threads::Two`]); the scan takes the handle once.
    Streamed(&'a Path, &'a std::sync::Mutex<Option<sled::Db>>),
}

/// sled's `entries` tree in key order, read through a database handle that is dropped and
/// reopened after every [`SLED_CURSOR_BUDGET`] bytes of values, so an audit's memory stays
/// bounded whatever sled retains per handle.
struct SledCursor {
    path: PathBuf,
    iter: Option<(sled::Db, sled::Iter)>,
    /// The last key returned; a reopened iterator resumes after it.
    last: Option<sled::IVec>,
    read: usize,
}

/// sled's `entries` records in key order, however they are read.
type SledItems = dyn Iterator<Item = sled::Result<(sled::IVec, sled::IVec)>>;

/// Bytes of sled values read through one handle before the cursor reopens sled.
const SLED_CURSOR_BUDGET: usize = 16 << 20;

impl SledCursor {
    /// A cursor starting with the open handle `db`.
    fn new(path: &Path, db: sled::Db) -> Result<SledCursor, OpenError> {
        let iter = db.open_tree(ENTRIES_TREE).map_err(OpenError::Sled)?.iter();
        Ok(SledCursor { path: path.to_path_buf(), iter: Some((db, iter)), last: None, read: 0 })
    }
}

impl Iterator for SledCursor {
    type Item = sled::Result<(sled::IVec, sled::IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.read >= SLED_CURSOR_BUDGET {
            self.iter = None;
            self.read = 0;
        }
        if self.iter.is_none() {
            let db = match open_sled_read(&self.path) {
                Ok(db) => db,
                Err(OpenError::Sled(e)) => return Some(Err(e)),
                Err(e) => return Some(Err(sled::Error::Io(std::io::Error::other(e.to_string())))),
            };
            let tree = match db.open_tree(ENTRIES_TREE) {
                Ok(tree) => tree,
                Err(e) => return Some(Err(e)),
            };
            let iter = match &self.last {
                None => tree.iter(),
                Some(last) => tree.range::<&[u8], _>((
                    std::ops::Bound::Excluded(last.as_ref()),
                    std::ops::Bound::Unbounded,
                )),
            };
            self.iter = Some((db, iter));
        }
        let item = self.iter.as_mut().and_then(|(_, iter)| iter.next());
        if let Some(Ok((k, v))) = &item {
            self.last = Some(k.clone());
            self.read += v.len();
        }
        item
    }
}

/// How a scan treats damaged journal bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnDamage {
    /// Return it as a verification failure.
    Fail,
    /// Stop there and report it in [`Scan::damage`] (recovery).
    Stop,
}

/// A sled record that differs from the journal's, held until the scan knows whether the
/// journal's version is authenticated by a later `prev` link.
struct Held {
    first_seq: u64,
    /// The entry whose `prev` must link to the journal's version.
    authenticated_by: u64,
    /// sled's record passes its own checks (else sled is simply damaged).
    sled_intact: bool,
    finding: OpenError,
}

/// Verifies every record of the journal, in order, and — when `sled` is given — that sled
/// holds the same records under the right keys, allowing sled to lag only by a suffix.
/// A tolerant scan (`OnDamage::Stop`) stops at the first record that does not verify, of
/// any kind, and reports where (`Scan::damage`) with the chain as it was before it.
pub(super) fn scan(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    on_damage: OnDamage,
    on_entry: OnEntry<'_>,
    on_frame: OnFrame<'_>,
) -> Result<Scan, OpenError> {
    let mut each = |entries: Vec<SealedEntry>| -> Result<(), OpenError> {
        for sealed in &entries {
            on_entry(sealed)?;
        }
        Ok(())
    };
    scan_records(root, sled, keep_lag, on_damage, &mut each, on_frame)
}

/// Per-record observer of a scan's entries: the verified entries of one record, in order,
/// handed over by value (so a pipelined scan can send them to another thread uncopied).
type OnRecord<'a> = &'a mut dyn FnMut(Vec<SealedEntry>) -> Result<(), OpenError>;

/// [`scan`], showing each record's verified entries to `on_record` at the point where
/// [`scan`] shows them one by one to its `on_entry`.
fn scan_records(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    on_damage: OnDamage,
    on_record: OnRecord<'_>,
    on_frame: OnFrame<'_>,
) -> Result<Scan, OpenError> {
    let journal_dir = root.join(JOURNAL_DIR);
    let segments = list_segments(&journal_dir)?;
    let mut chain = Chain::empty();
    let mut sled_iter: Option<Box<SledItems>> = match sled {
        SledCopy::Off => None,
        SledCopy::Strict(t) | SledCopy::MayLead(t) => Some(Box::new(t.iter())),
        SledCopy::Streamed(path, db) => {
            match db.lock().map_or_else(|p| p.into_inner().take(), |mut d| d.take()) {
                Some(db) => Some(Box::new(SledCursor::new(path, db)?)),
                None => None,
            }
        }
    };
    let mut sled_lagging = false;
    let mut held: Option<Held> = None;
    let mut out = Scan {
        head: Head { ledger: Id::default(), seq: 0, hash: Default::default(), time_ms: 0 },
        verified: None,
        frames: 0,
        entries: 0,
        torn: None,
        damage: None,
        sled_lag: Vec::new(),
        sled_lag_frames: 0,
        last_segment: None,
    };
    let n_segments = segments.len();
    // Where a tolerant scan stops: a damage finding, or a verification failure (fail mode).
    let stop = |damage: Damage, out: &mut Scan| -> Result<(), OpenError> {
        match on_damage {
            OnDamage::Fail => Err(damage.corruption()),
            OnDamage::Stop => {
                out.damage = Some(damage);
                Ok(())
            }
        }
    };
    'segments: for (segment_idx, (named_seq, path)) in segments.into_iter().enumerate() {
        let is_last = segment_idx + 1 == n_segments;
        let size = std::fs::metadata(&path).map_err(io("stat", &path))?.len();
        if size > MAX_SEGMENT_BYTES {
            let reason = Corruption::SegmentTooLarge {
                segment: path.display().to_string(),
                len: size,
                max: MAX_SEGMENT_BYTES,
            };
            return Err(corrupt(chain.next_seq(), Replica::Journal, reason));
        }
        let mut reader = SegmentReader::open(&path)?;
        let segment = path.display().to_string();
        let segment_len = reader.len();
        let invalid = |offset: u64, seq: u64, reason: Corruption| Damage {
            segment: path.clone(),
            offset,
            seq,
            kind: DamageKind::Invalid { seq, reason },
            next_intact: None,
            segment_len,
            is_last,
        };
        let mut valid_len = 0;
        let mut records_here = 0u64;
        loop {
            let (offset, header, record) = match reader.next_record(&path)? {
                Split::Record { offset, header, record } => (offset, header, record),
                Split::End => break,
                Split::Fault { offset, fault } => {
                    let next_seq = chain.next_seq();
                    let rest = reader.rest(&path)?;
                    if offset == 0 && rest.first() == Some(&V1_FIRST_BYTE) {
                        return Err(corrupt(next_seq, Replica::Journal, Corruption::JournalV1 { segment }));
                    }
                    match classify_tail(rest, next_seq, is_last) {
                        Tail::Torn => {
                            out.torn = Some(TornTail {
                                segment: path.clone(),
                                offset,
                                bytes: rest.len() as u64,
                                moved_to: None,
                            });
                            break;
                        }
                        Tail::Damaged { next_intact } => {
                            let damage = Damage {
                                segment: path.clone(),
                                offset,
                                seq: next_seq,
                                kind: DamageKind::Record(fault),
                                next_intact: next_intact.map(|(at, seq)| (offset + at as u64, seq)),
                                segment_len,
                                is_last,
                            };
                            stop(damage, &mut out)?;
                            break 'segments;
                        }
                    }
                }
            };
            let first_seq = chain.next_seq();
            let before = chain.head();
            // Every entry of the record is verified on a copy of the chain first, so a
            // record that fails leaves the chain where it was.
            let verified = verify_record(chain, header, record).and_then(|(next_chain, entries)| {
                if offset == 0 && first_seq != named_seq {
                    let reason = Corruption::SegmentName {
                        segment: segment.clone(),
                        named: named_seq,
                        found: first_seq,
                    };
                    return Err((first_seq, reason));
                }
                Ok((next_chain, entries))
            });
            let entries = match verified {
                Ok((next_chain, entries)) => {
                    chain = next_chain;
                    entries
                }
                Err((seq, reason)) => {
                    stop(invalid(offset, seq, reason), &mut out)?;
                    break 'segments;
                }
            };
            if let Some(h) = held.as_mut()
                && entries.iter().any(|sealed| h.authenticated_by == sealed.entry.seq)
            {
                // The journal's version of the differing frame is linked from here on:
                // sled's differing copy is the wrong one.
                h.sled_intact = false;
            }
            let n = entries.len() as u64;
            on_record(entries)?;
            out.entries += n;
            on_frame(&FramePos { segment: &path, offset, first_seq, record, before })?;
            out.frames += 1;
            records_here += 1;
            valid_len = offset + record.len() as u64;
            if let Some(iter) = sled_iter.as_mut() {
                let next = if sled_lagging { None } else { iter.next() };
                match next {
                    None => {
                        sled_lagging = true;
                        out.sled_lag_frames += 1;
                        if keep_lag {
                            out.sled_lag.push((first_seq, record.to_vec()));
                        }
                    }
                    Some(Err(e)) => return Err(OpenError::Sled(e)),
                    Some(Ok((k, v))) => {
                        if let Err(finding) = compare_sled(first_seq, record, &k, &v)
                            && held.is_none()
                        {
                            held = Some(Held {
                                first_seq,
                                authenticated_by: chain.next_seq(),
                                sled_intact: open_record(&v).is_ok(),
                                finding,
                            });
                        }
                    }
                }
            }
        }
        // A segment with no record (empty, or holding only a torn write) is legal only as
        // the last one, named for the seq its first record would carry.
        if records_here == 0 {
            let next = chain.next_seq();
            let reason = if !is_last {
                Some(Corruption::EmptySegment { segment: segment.clone() })
            } else if named_seq != next {
                Some(Corruption::SegmentName { segment: segment.clone(), named: named_seq, found: next })
            } else {
                None
            };
            if let Some(reason) = reason {
                stop(invalid(0, next, reason), &mut out)?;
                out.torn = None;
                break 'segments;
            }
        }
        if is_last {
            out.last_segment =
                Some((path, out.torn.as_ref().map_or(valid_len.max(segment_len), |t| t.offset)));
        }
    }
    if let Some(h) = held {
        if h.sled_intact && out.damage.is_none() {
            // Both copies hold an intact record for the newest frame, and nothing later
            // says which is right: choose neither.
            return Err(corrupt(h.first_seq, Replica::Both, Corruption::CopiesDisagree));
        }
        return Err(h.finding);
    }
    // Beside a live writer sled may hold records appended after the journal was read.
    let sled_may_lead = matches!(sled, SledCopy::MayLead(_));
    if let Some(iter) = sled_iter.as_mut().filter(|_| !sled_lagging && out.damage.is_none() && !sled_may_lead)
    {
        match iter.next() {
            None => {}
            Some(Err(e)) => return Err(OpenError::Sled(e)),
            Some(Ok((k, _))) => {
                let seq = key_seq(&k).unwrap_or(chain.next_seq());
                return Err(corrupt(seq, Replica::Journal, Corruption::MissingInJournal));
            }
        }
    }
    out.verified = chain.head();
    match out.verified {
        Some(head) => out.head = head,
        // Nothing verified: only a tolerant scan may report that (recovery restores it).
        None if on_damage == OnDamage::Stop => {}
        None => return Err(OpenError::Empty),
    }
    Ok(out)
}

/// How a strict scan uses the machine's cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// Everything on the calling thread, entry after entry (the reference order).
    One,
    /// Two threads: a helper thread reads the journal and does every store check —
    /// record checks, frame and entry decoding (canonical form), hashing, the chain, the
    /// comparison with sled and the checkpoint — and hands the verified entries, in order,
    /// through a bounded channel to the calling thread, which shows them to the observer
    /// (a replay's fold). The result is the one [`Threads::One`] gives, failure included:
    /// the observer sees exactly the entries it would have seen, and its own first failure
    /// wins over anything the helper found later in the journal.
    #[default]
    Two,
}

/// Entries handed to the observer per channel message (amortises the hand-over).
const PIPELINE_BATCH_ENTRIES: usize = 256;
/// Batches queued between the two threads. At most four are alive at once: the one
/// being filled, one queued, the one being folded, and one folded batch on its way back
/// to be freed. Each holds [`PIPELINE_BATCH_ENTRIES`] entries, or one record's entries if
/// more (the sequential scan holds a whole record too: its entries are shown only once
/// all of them verified). Memory stays bounded whatever the ledger's length; one queued
/// batch is enough for the two threads to overlap.
const PIPELINE_BATCHES: usize = 1;

/// A strict scan (`OnDamage::Fail`, no per-frame observer) with `on_entry` run on the
/// calling thread, and the rest where `threads` says.
fn scan_strict(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    threads: Threads,
    on_entry: OnEntry<'_>,
) -> Result<Scan, OpenError> {
    match threads {
        Threads::One => scan(root, sled, keep_lag, OnDamage::Fail, on_entry, &mut |_| Ok(())),
        Threads::Two => scan_pipelined(root, sled, keep_lag, on_entry),
    }
}

/// [`Threads::Two`]: the scan on a helper thread, `on_entry` on this one.
fn scan_pipelined(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    on_entry: OnEntry<'_>,
) -> Result<Scan, OpenError> {
    pipelined(
        move |send: OnRecord<'_>| scan_records(root, sled, keep_lag, OnDamage::Fail, send, &mut |_| Ok(())),
        on_entry,
    )
}

/// Runs `produce` on a helper thread and shows every entry it hands over, in order, to
/// `on_entry` on the calling thread, through a bounded channel. `produce` hands each
/// entry over before it reads anything after it, and returns its own result (an error
/// where a sequential scan would have stopped) only once everything before that point has
/// been handed over; so `on_entry`'s first failure is the result if it comes first in seq
/// order, and `produce`'s otherwise — exactly as when `produce` calls `on_entry` itself.
/// When `on_entry` fails, dropping the receiver stops the helper at its next hand-over; a
/// helper that panics closes the channel and is reported as a failed task, never a hang.
fn pipelined<R: Send>(
    produce: impl FnOnce(OnRecord<'_>) -> Result<R, OpenError> + Send,
    on_entry: OnEntry<'_>,
) -> Result<R, OpenError> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SealedEntry>>(PIPELINE_BATCHES);
    // Folded batches go back to the helper, which allocated them, to be freed and reused
    // there: freeing them on the folding thread contends for the helper's malloc arena.
    // One at most: a spent batch waiting here still holds its entries.
    let (spent_tx, spent_rx) = std::sync::mpsc::sync_channel::<Vec<SealedEntry>>(1);
    std::thread::scope(|scope| {
        let helper =
            std::thread::Builder::new().name("ledger-scan".to_owned()).spawn_scoped(scope, move || {
                let mut batch: Vec<SealedEntry> = Vec::with_capacity(PIPELINE_BATCH_ENTRIES);
                let mut send = |entries: Vec<SealedEntry>| -> Result<(), OpenError> {
                    batch.extend(entries);
                    if batch.len() >= PIPELINE_BATCH_ENTRIES {
                        let next = match spent_rx.try_recv() {
                            Ok(mut spent) => {
                                spent.clear();
                                spent
                            }
                            Err(_) => Vec::with_capacity(PIPELINE_BATCH_ENTRIES),
                        };
                        let full = std::mem::replace(&mut batch, next);
                        // The receiver is gone only once `on_entry` failed: its error is the
                        // result, and this one is never seen.
                        tx.send(full).map_err(|_| OpenError::Task("replay fold"))?;
                    }
                    Ok(())
                };
                let produced = produce(&mut send);
                if !batch.is_empty() {
                    // Ignored for the same reason: a closed channel means `on_entry` failed.
                    let _ = tx.send(batch);
                }
                produced
            });
        let helper = match helper {
            Ok(helper) => helper,
            Err(_) => return Err(OpenError::Task("journal scan thread spawn")),
        };
        let mut observed = Ok(());
        'batches: for batch in rx.iter() {
            for sealed in &batch {
                observed = on_entry(sealed);
                if observed.is_err() {
                    break 'batches;
                }
            }
            // Back to the helper, or freed here if it is behind on taking them back.
            let _ = spent_tx.try_send(batch);
        }
        drop(rx);
        drop(spent_tx);
        let produced = helper.join();
        observed?;
        produced.unwrap_or(Err(OpenError::Task("journal scan thread")))
    })
}

/// Verifies one intact record against the chain: header position, frame decoding, entry
/// count, and every entry (decode, canonical form, hash, `prev`, seq, ledger, time). Returns
/// the chain after it and its entries, or the seq and reason of the first failure.
fn verify_record(
    chain: Chain,
    header: RecordHeader,
    record: &[u8],
) -> Result<(Chain, Vec<SealedEntry>), (u64, Corruption)> {
    let mut chain = chain;
    let first_seq = chain.next_seq();
    if header.first_seq != first_seq {
        return Err((first_seq, Corruption::SeqGap { expected: first_seq, found: header.first_seq }));
    }
    let payload = record.get(HEADER_BYTES..).unwrap_or_default();
    let entry_bytes = decode_frame(payload).map_err(|e| (first_seq, Corruption::Decode(e)))?;
    if entry_bytes.len() as u64 != u64::from(header.count) {
        let reason = Corruption::HeaderMismatch {
            header_seq: header.first_seq,
            header_count: header.count,
            found_seq: first_seq,
            found_count: entry_bytes.len() as u64,
        };
        return Err((first_seq, reason));
    }
    let mut entries = Vec::with_capacity(entry_bytes.len());
    for bytes in entry_bytes {
        let seq = chain.next_seq();
        match chain.verify(bytes) {
            Ok(sealed) => entries.push(sealed),
            // A link that does not match an altered earlier entry: name both.
            Err(reason @ Corruption::PrevMismatch { .. }) if seq > 0 => {
                return Err((seq - 1, Corruption::LinkBroken { next: seq, detail: reason.to_string() }));
            }
            Err(reason) => return Err((seq, reason)),
        }
    }
    Ok((chain, entries))
}

pub(super) fn key_seq(k: &[u8]) -> Option<u64> {
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
        let reason = match open_record(v) {
            Err(fault) => Corruption::Record(fault),
            Ok(_) => Corruption::Differs,
        };
        return Err(corrupt(first_seq, Replica::Sled, reason));
    }
    Ok(())
}

/// The meta tree must name the genesis ledger id and format version; `None` if it lacks
/// them (a sled lagging since genesis).
fn check_meta(meta: &sled::Tree, head: &Head) -> Result<bool, OpenError> {
    check_meta_values(read_meta(meta)?, head)
}

/// The meta tree's ledger id and format version, as stored.
type MetaValues = (Option<sled::IVec>, Option<sled::IVec>);

fn read_meta(meta: &sled::Tree) -> Result<MetaValues, OpenError> {
    Ok((
        meta.get(META_LEDGER_ID).map_err(OpenError::Sled)?,
        meta.get(META_FORMAT_VERSION).map_err(OpenError::Sled)?,
    ))
}

fn check_meta_values((id, version): MetaValues, head: &Head) -> Result<bool, OpenError> {
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
            if version.as_ref() != JOURNAL_FORMAT_VERSION.to_be_bytes() {
                return Err(corrupt(0, Replica::Sled, Corruption::Meta("format version differs".into())));
            }
            Ok(true)
        }
        _ => Err(corrupt(0, Replica::Sled, Corruption::Meta("half of the meta tree is missing".into()))),
    }
}

pub(super) fn write_meta(meta: &sled::Tree, ledger: Id) -> Result<(), OpenError> {
    let sled_err = OpenError::Sled;
    meta.insert(META_LEDGER_ID, &ledger.to_bytes()[..]).map_err(sled_err)?;
    meta.insert(META_FORMAT_VERSION, &JOURNAL_FORMAT_VERSION.to_be_bytes()[..]).map_err(sled_err)?;
    Ok(())
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
fn read_lock(root: &Path) -> Result<Option<File>, OpenError> {
    let dir = ledger_journal_dir(root)?;
    let file = File::open(&dir).map_err(io("open", &dir))?;
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io("lock", &dir)(e).into()),
    }
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
    let sled_dir = root.join(SLED_DIR);
    let db = match (scope, &lock) {
        (AuditScope::JournalOnly, _) => Err("not asked (--journal-only)".to_owned()),
        (AuditScope::Both, None) => {
            Err("held by a live writer; the journal was read up to its last complete record".to_owned())
        }
        (AuditScope::Both, Some(_)) => match open_sled_for_reading(&sled_dir) {
            Ok(db) => Ok(db),
            Err(OpenError::Locked(_)) => Err("held by a live writer".to_owned()),
            Err(e @ OpenError::NoRoom { .. }) => Err(format!("not opened: {e}")),
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
    let (copies, handle) = match db {
        Ok(db) => (Copies::Both, Some(db)),
        Err(reason) => (Copies::JournalOnly(reason), None),
    };
    let handle = std::sync::Mutex::new(handle);
    let mut checkpoint_seen = false;
    let mut on_entry = |sealed: &SealedEntry| -> Result<(), OpenError> {
        if let Some(cp) = checkpoint.filter(|cp| cp.seq == sealed.entry.seq) {
            cp.check(sealed).map_err(|reason| corrupt(cp.seq, Replica::Journal, reason))?;
            checkpoint_seen = true;
        }
        observe(sealed)
    };
    let sled = if meta.is_some() { SledCopy::Streamed(&sled_dir, &handle) } else { SledCopy::Off };
    let scan = scan_strict(root, sled, false, threads, &mut on_entry)?;
    if let Some(cp) = checkpoint
        && !checkpoint_seen
    {
        return Err(corrupt(cp.seq, Replica::Journal, Corruption::Truncated { head: scan.head.seq }));
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
        let mut index_rebuilt = None;
        let db = match open_sled(&root.join(SLED_DIR)) {
            Ok(db) => db,
            // The index is damaged, not the history: rebuild it from the journal (the old
            // one is moved aside) and report it.
            Err(e @ (OpenError::Sled(_) | OpenError::SledMissing(_))) => {
                let (moved, _) = super::recover::rebuild_index(root)?;
                index_rebuilt = Some(IndexRebuilt { reason: e.to_string(), moved_aside: moved });
                open_sled(&root.join(SLED_DIR))?
            }
            Err(e) => return Err(e),
        };
        let (entries_tree, meta) = trees(&db)?;
        let scan = scan_strict(root, SledCopy::Strict(&entries_tree), true, Threads::default(), on_entry)?;
        let meta_present = check_meta(&meta, &scan.head)?;
        // Everything verified: now, and only now, repair what a crash can leave behind.
        let sled_err = OpenError::Sled;
        if !meta_present {
            write_meta(&meta, scan.head.ledger)?;
        }
        for (first_seq, bytes) in &scan.sled_lag {
            entries_tree.insert(key(*first_seq), bytes.as_slice()).map_err(sled_err)?;
        }
        if !meta_present || !scan.sled_lag.is_empty() {
            db.flush().map_err(sled_err)?;
        }
        let mut torn_tail = scan.torn;
        if let Some(torn) = torn_tail.as_mut() {
            torn.moved_to = Some(super::recover::move_tail_aside(root, &torn.segment, torn.offset)?);
        }
        let journal_dir = root.join(JOURNAL_DIR);
        let journal = match scan.last_segment {
            Some((path, len)) => JournalWriter::resume(&journal_dir, path, len)?,
            None => return Err(OpenError::Empty),
        };
        let report = OpenReport {
            frames: scan.frames,
            entries: scan.entries,
            torn_tail,
            sled_restored_frames: scan.sled_lag.len() as u64,
            index_rebuilt,
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
        self.db.flush().map(|_| ()).map_err(ReadError::Sled)
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
    let found = tree.range(..=key(seq)).next_back().transpose().map_err(ReadError::Sled)?;
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

/// A thread-safe read handle on a ledger's sled copy (see [`DiskStore::reader`]).
#[derive(Debug, Clone)]
pub struct StoreReader {
    entries: sled::Tree,
}

impl StoreReader {
    /// The entries `from..=to` that sled holds, in order (fewer if `to` is not in sled yet).
    pub fn read_range(&self, from: u64, to: u64) -> Result<Vec<SealedEntry>, ReadError> {
        let last = match self.entries.last().map_err(ReadError::Sled)? {
            None => return Ok(Vec::new()),
            Some((k, v)) => {
                let first = key_seq(&k).unwrap_or(0);
                open_record(&v).map_or(first, |(header, _)| header.last_seq())
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use ledger_schema::events::LedgerInitialized;
    use ledger_schema::{Event, Id, SealedEntry};

    use super::{OnRecord, PIPELINE_BATCH_ENTRIES, pipelined};
    use crate::store::{Chain, Corruption, OpenError, Replica};

    /// `n` sealed entries (their content does not matter to the pipeline).
    fn entries(n: usize) -> Vec<SealedEntry> {
        let genesis = Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: "t".into() });
        let sealed = Chain::empty().seal(genesis, 1, Id(7)).unwrap();
        vec![sealed; n]
    }

    fn failure(seq: u64) -> OpenError {
        OpenError::Corrupt { seq, replica: Replica::Journal, reason: Corruption::Differs }
    }

    /// Hands `total` entries over in records of 1, 2, 3 … entries; then `end`.
    fn produce(
        total: usize,
        end: Result<u64, OpenError>,
    ) -> impl FnOnce(OnRecord<'_>) -> Result<u64, OpenError> {
        move |send: OnRecord<'_>| {
            let mut left = total;
            let mut size = 1;
            while left > 0 {
                let n = size.min(left);
                send(entries(n))?;
                left -= n;
                size += 1;
            }
            end
        }
    }

    /// Every entry arrives, in order, before the producer's result, whatever its sign.
    #[test]
    fn every_entry_then_the_producers_result() {
        for total in
            [0, 1, PIPELINE_BATCH_ENTRIES - 1, PIPELINE_BATCH_ENTRIES, 5 * PIPELINE_BATCH_ENTRIES + 3]
        {
            let mut seen = 0usize;
            let got = pipelined(produce(total, Ok(42)), &mut |_| {
                seen += 1;
                Ok(())
            });
            assert_eq!((got.unwrap(), seen), (42, total));
            let mut seen = 0usize;
            let got = pipelined(produce(total, Err(failure(9))), &mut |_| {
                seen += 1;
                Ok(())
            });
            assert!(matches!(got, Err(OpenError::Corrupt { seq: 9, .. })), "{got:?}");
            assert_eq!(seen, total, "every entry before the producer's failure is observed");
        }
    }

    /// The observer's failure wins over anything the producer found after it, and stops a
    /// producer that would otherwise never end.
    #[test]
    fn the_observers_failure_comes_first_and_stops_the_producer() {
        let mut seen = 0usize;
        let got = pipelined(produce(10 * PIPELINE_BATCH_ENTRIES, Err(failure(9))), &mut |_| {
            seen += 1;
            if seen == 300 { Err(failure(3)) } else { Ok(()) }
        });
        assert!(matches!(got, Err(OpenError::Corrupt { seq: 3, .. })), "{got:?}");
        assert_eq!(seen, 300);
        let endless = |send: OnRecord<'_>| -> Result<u64, OpenError> {
            loop {
                send(entries(7))?;
            }
        };
        let mut seen = 0usize;
        let got = pipelined(endless, &mut |_| {
            seen += 1;
            if seen == 1000 { Err(failure(4)) } else { Ok(()) }
        });
        assert!(matches!(got, Err(OpenError::Corrupt { seq: 4, .. })), "{got:?}");
    }

    /// A producer that panics — before or after handing entries over — is a typed error,
    /// never a hang.
    #[test]
    fn a_panicking_producer_is_a_failed_task() {
        for before in [0, 1, 3 * PIPELINE_BATCH_ENTRIES + 1] {
            let panicking = move |send: OnRecord<'_>| -> Result<u64, OpenError> {
                send(entries(before))?;
                panic!("injected panic in the scan thread");
            };
            let mut seen = 0usize;
            let got = pipelined(panicking, &mut |_| {
                seen += 1;
                Ok(())
            });
            assert!(matches!(got, Err(OpenError::Task("journal scan thread"))), "{got:?}");
            assert!(seen <= before);
        }
    }
}
