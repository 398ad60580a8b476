//! sled, the derived index: opening it (locks, free space, a read-only configuration),
//! reading it in bounded memory ([`SledCursor`]), comparing its frames with the journal's
//! and its meta tree.

use std::fs::File;
use std::path::{Path, PathBuf};

use ledger_schema::Id;
use ledger_schema::record::{JOURNAL_FORMAT_VERSION, open_record};

use super::corrupt;
use crate::store::journal::io;
use crate::store::{Corruption, Head, MetaFault, OpenError, Replica};

pub(super) const ENTRIES_TREE: &str = "entries";

pub(super) const META_TREE: &str = "meta";

pub(super) const META_LEDGER_ID: &str = "ledgerId";

pub(super) const META_FORMAT_VERSION: &str = "formatVersion";

/// sled's page cache; the journal, not sled, is what must be fast to append.
pub(super) const SLED_CACHE_BYTES: u64 = 64 << 20;

/// sled's page cache for read-only verification and replay: they stream sled once.
pub(super) const VERIFY_SLED_CACHE_BYTES: u64 = 8 << 20;

/// How long to wait for sled's own file lock. sled releases it from a background thread
/// after the last handle of a database drops, so a reopen in the same process can find
/// it still held for a moment (our `journal/` lock already excludes other processes).
pub(super) const SLED_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

pub(in crate::store) fn open_sled(path: &Path) -> Result<sled::Db, OpenError> {
    ensure_room_for_sled(path)?;
    open_sled_with(path, SLED_CACHE_BYTES)
}

/// Free bytes sled needs before it is opened: sled writes when it opens (its recovery and
/// a new segment), and on a full disk that write leaves it unopenable.
pub(super) const SLED_MIN_FREE_BYTES: u64 = 16 << 20;

/// Refuses to open sled where its own open could fail half-way for want of space.
pub(super) fn ensure_room_for_sled(path: &Path) -> Result<(), OpenError> {
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
pub(super) fn open_sled_for_reading(path: &Path) -> Result<sled::Db, OpenError> {
    ensure_room_for_sled(path)?;
    open_sled_read(path)
}

/// sled for reading: a small page cache and no background flusher (an audit writes
/// nothing, and a flusher thread would hold the database — and its lock — after the last
/// handle drops, delaying the next open).
pub(super) fn open_sled_read(path: &Path) -> Result<sled::Db, OpenError> {
    open_sled_config(path, VERIFY_SLED_CACHE_BYTES, false)
}

/// Is sled's own lock file (`db`, flocked by sled while open) held by another handle?
pub(super) fn sled_lock_held(path: &Path) -> bool {
    File::open(path.join("db"))
        .map(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
        .unwrap_or(false)
}

/// Opens sled with a page cache of `cache_bytes` (read-only paths use a small one).
pub(in crate::store) fn open_sled_with(path: &Path, cache_bytes: u64) -> Result<sled::Db, OpenError> {
    open_sled_config(path, cache_bytes, true)
}

/// Opens sled at `path` (waiting while another handle of this process still holds its lock)
/// with a page cache of `cache_bytes`, and a background flusher only if `flusher`.
pub(super) fn open_sled_config(path: &Path, cache_bytes: u64, flusher: bool) -> Result<sled::Db, OpenError> {
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

pub(in crate::store) fn trees(db: &sled::Db) -> Result<(sled::Tree, sled::Tree), OpenError> {
    let entries = db.open_tree(ENTRIES_TREE).map_err(OpenError::Sled)?;
    let meta = db.open_tree(META_TREE).map_err(OpenError::Sled)?;
    Ok((entries, meta))
}

pub(in crate::store) fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

/// One record of sled's `entries` tree, as sled's iterators yield it.
pub(super) type SledItem = sled::Result<(sled::IVec, sled::IVec)>;

/// Items a [`Prefetched`] reader keeps ready: one frame being compared, the next ready.
const PREFETCH_ITEMS: usize = 2;

/// A sled reader on its own thread, a few items ahead of the scan: reading sled's copy
/// (and the cursor's reopens, which re-read sled's log) then overlaps the journal scan's
/// decoding and hashing instead of adding to it. Yields exactly the cursor's items, in
/// order; a reader thread that stops before its end (a panic) yields an error, never a
/// shorter copy (a shorter copy would read as sled lagging). Dropping it stops and joins
/// the thread, so sled's handle is closed when the scan returns.
pub(super) struct Prefetched {
    /// `Some(item)` per cursor item, then `None` once the cursor ended.
    rx: Option<std::sync::mpsc::Receiver<Option<SledItem>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    ended: bool,
}

impl Prefetched {
    /// Reads `items` (a [`SledCursor`]) on a new thread.
    pub(super) fn spawn<I>(items: I) -> Result<Prefetched, OpenError>
    where
        I: Iterator<Item = SledItem> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(PREFETCH_ITEMS);
        let thread = std::thread::Builder::new()
            .name("ledger-sled".to_owned())
            .spawn(move || {
                for item in items {
                    let failed = item.is_err();
                    // A closed channel: the scan stopped reading; stop too.
                    if tx.send(Some(item)).is_err() || failed {
                        return;
                    }
                }
                let _ = tx.send(None);
            })
            .map_err(|_| OpenError::Task("sled reader thread spawn"))?;
        Ok(Prefetched { rx: Some(rx), thread: Some(thread), ended: false })
    }
}

impl Iterator for Prefetched {
    type Item = SledItem;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        let received = self.rx.as_ref().map(std::sync::mpsc::Receiver::recv);
        match received {
            Some(Ok(Some(item))) => {
                self.ended = item.is_err();
                Some(item)
            }
            Some(Ok(None)) => {
                self.ended = true;
                None
            }
            Some(Err(_)) | None => {
                self.ended = true;
                Some(Err(sled::Error::Io(std::io::Error::other("the sled reader thread stopped early"))))
            }
        }
    }
}

impl Drop for Prefetched {
    fn drop(&mut self) {
        // Closing the channel first wakes a reader blocked on a full channel.
        drop(self.rx.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// sled's `entries` tree in key order, read through a database handle that is dropped and
/// reopened after every [`SLED_CURSOR_BUDGET`] bytes of values, so an audit's memory stays
/// bounded whatever sled retains per handle.
pub(super) struct SledCursor {
    path: PathBuf,
    iter: Option<(sled::Db, sled::Iter)>,
    /// The last key returned; a reopened iterator resumes after it.
    last: Option<sled::IVec>,
    read: usize,
}

/// sled's `entries` records in key order, however they are read.
pub(super) type SledItems = dyn Iterator<Item = SledItem>;

/// Bytes of sled values read through one handle before the cursor reopens sled.
pub(super) const SLED_CURSOR_BUDGET: usize = 16 << 20;

impl SledCursor {
    /// A cursor starting with the open handle `db`.
    pub(super) fn new(path: &Path, db: sled::Db) -> Result<SledCursor, OpenError> {
        let iter = db.open_tree(ENTRIES_TREE).map_err(OpenError::Sled)?.iter();
        Ok(SledCursor { path: path.to_path_buf(), iter: Some((db, iter)), last: None, read: 0 })
    }
}

impl Iterator for SledCursor {
    type Item = SledItem;

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

pub(in crate::store) fn key_seq(k: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(k).ok().map(u64::from_be_bytes)
}

/// The sled frame at this position must be the journal's frame, under its first seq.
pub(super) fn compare_sled(
    first_seq: u64,
    journal_bytes: &[u8],
    k: &[u8],
    v: &[u8],
) -> Result<(), OpenError> {
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
pub(super) fn check_meta(meta: &sled::Tree, head: &Head) -> Result<bool, OpenError> {
    check_meta_values(read_meta(meta)?, head)
}

/// The meta tree's ledger id and format version, as stored.
pub(super) type MetaValues = (Option<sled::IVec>, Option<sled::IVec>);

pub(super) fn read_meta(meta: &sled::Tree) -> Result<MetaValues, OpenError> {
    Ok((
        meta.get(META_LEDGER_ID).map_err(OpenError::Sled)?,
        meta.get(META_FORMAT_VERSION).map_err(OpenError::Sled)?,
    ))
}

pub(super) fn check_meta_values((id, version): MetaValues, head: &Head) -> Result<bool, OpenError> {
    match (id, version) {
        (None, None) => Ok(false),
        (Some(id), Some(version)) => {
            if id.as_ref() != head.ledger.to_bytes() {
                return Err(corrupt(
                    0,
                    Replica::Sled,
                    Corruption::Meta(MetaFault::LedgerId { expected: head.ledger }),
                ));
            }
            if !READABLE_FORMAT_VERSIONS.iter().any(|v| version.as_ref() == v.to_be_bytes()) {
                return Err(corrupt(0, Replica::Sled, Corruption::Meta(MetaFault::FormatVersion)));
            }
            Ok(true)
        }
        _ => Err(corrupt(0, Replica::Sled, Corruption::Meta(MetaFault::HalfMissing))),
    }
}

/// Journal formats a ledger's meta tree may name: 2 (a ledger no v3 writer has opened yet)
/// or 3 (the writer's: v3 segments may follow v2 ones).
pub(super) const READABLE_FORMAT_VERSIONS: [u64; 2] = [2, JOURNAL_FORMAT_VERSION];

/// Whether the meta tree names the writer's format ([`JOURNAL_FORMAT_VERSION`]); a writer
/// raises an older one before it appends, so a build that reads only v2 refuses the ledger
/// by its meta instead of reporting v3 segments as damage.
pub(super) fn meta_is_current(meta: &sled::Tree) -> Result<bool, OpenError> {
    let version = meta.get(META_FORMAT_VERSION).map_err(OpenError::Sled)?;
    Ok(version.is_some_and(|v| v.as_ref() == JOURNAL_FORMAT_VERSION.to_be_bytes()))
}

pub(in crate::store) fn write_meta(meta: &sled::Tree, ledger: Id) -> Result<(), OpenError> {
    let sled_err = OpenError::Sled;
    meta.insert(META_LEDGER_ID, &ledger.to_bytes()[..]).map_err(sled_err)?;
    meta.insert(META_FORMAT_VERSION, &JOURNAL_FORMAT_VERSION.to_be_bytes()[..]).map_err(sled_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    type Item = SledItem;

    fn item(i: u64) -> Item {
        Ok((key(i).as_slice().into(), i.to_le_bytes().as_slice().into()))
    }

    fn keys(items: impl Iterator<Item = Item>) -> Vec<Result<u64, String>> {
        items.map(|r| r.map(|(k, _)| key_seq(&k).unwrap_or(u64::MAX)).map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn prefetched_yields_exactly_the_source_items_in_order() {
        let source = (0..100).map(item);
        let got = keys(Prefetched::spawn(source).unwrap());
        assert_eq!(got, (0..100).map(Ok).collect::<Vec<_>>());
        assert_eq!(keys(Prefetched::spawn(std::iter::empty()).unwrap()), vec![]);
    }

    #[test]
    fn prefetched_stops_after_the_source_error() {
        let source =
            (0..3).map(item).chain([Err(sled::Error::Unsupported("x".into()))]).chain((3..6).map(item));
        let got = keys(Prefetched::spawn(source).unwrap());
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[3].is_err());
    }

    #[test]
    fn a_reader_thread_that_dies_is_an_error_not_a_shorter_copy() {
        let source = (0..5).map(|i| if i == 3 { panic!("reader dies") } else { item(i) });
        let got = keys(Prefetched::spawn(source).unwrap());
        assert_eq!(got[..3], [Ok(0), Ok(1), Ok(2)]);
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got[3].as_ref().is_err_and(|e| e.contains("stopped early")), "{got:?}");
    }

    #[test]
    fn dropping_a_prefetched_reader_early_stops_its_thread() {
        let mut reader = Prefetched::spawn((0..).map(item)).unwrap();
        assert!(matches!(reader.next(), Some(Ok(_))));
        drop(reader); // joins: an endless source must not keep it alive
    }
}
