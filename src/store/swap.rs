//! The one step of `recover` that replaces journal segments, made safe against a crash.
//!
//! A rewrite moves the original segments aside into `cut/N/` and puts the rewritten ones
//! in their place. Between those two moves the journal is incomplete, and the originals
//! may hold acknowledged records that no other copy holds (sled lags the journal after an
//! ordinary crash): a recovery that ran on from there rebuilt the journal from sled alone,
//! with exit 0, and the next writer reused the lost seqs (outside review 130, P1). So the
//! rewritten segments are written and synced under `cut/N/staged/` first, then a marker,
//! `recover.txn` in the ledger directory, names the swap, and only then do the files move;
//! the marker goes once the rewritten journal verified. While it is there every open,
//! verify, replay and audit refuses the ledger ([`refuse_interrupted`]), and `recover`
//! first puts the originals back ([`undo_interrupted`]) — rename by rename, each atomic,
//! so from any point the originals are whole in `journal/` or in `cut/N/`. No byte is
//! deleted by the undo: rewritten segments it takes out of `journal/` go to
//! `cut/N/undone/`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::disk::{JOURNAL_DIR, create_dir_0700};
use super::journal::{io, segment_name, sync_dir};
use super::{IoError, OpenError};

/// The marker of a segment swap in progress, in the ledger directory.
pub const MARKER: &str = "recover.txn";
/// The marker's first line (its format's name and version).
const HEADER: &str = "closure-ledger recover swap 1";
/// A marker longer than this is not one this build wrote.
const MAX_MARKER_BYTES: u64 = 16 << 20;

/// A swap of `originals` (segment file names in `journal/`, moved into `into`) for the
/// rewritten segments `new` (names, written under `into/staged/` first).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Txn {
    /// The `cut/N/` directory's number.
    cut: u32,
    originals: Vec<String>,
    new: Vec<String>,
}

impl Txn {
    fn text(&self) -> String {
        let mut out = format!("{HEADER}\ncut {}\n", self.cut);
        for name in &self.originals {
            out.push_str(&format!("original {name}\n"));
        }
        for name in &self.new {
            out.push_str(&format!("new {name}\n"));
        }
        out
    }

    /// The marker's text, read strictly: every line one this build writes.
    fn parse(text: &str) -> Option<Txn> {
        let mut lines = text.strip_suffix('\n')?.split('\n');
        (lines.next()? == HEADER).then_some(())?;
        let cut = lines.next()?.strip_prefix("cut ")?;
        let cut = cut.parse().ok().filter(|_| cut.bytes().all(|b| b.is_ascii_digit()))?;
        let mut txn = Txn { cut, originals: Vec::new(), new: Vec::new() };
        for line in lines {
            let (list, name) = match line.split_once(' ')? {
                ("original", name) if txn.new.is_empty() => (&mut txn.originals, name),
                ("new", name) => (&mut txn.new, name),
                _ => return None,
            };
            is_segment_name(name).then_some(())?;
            list.push(name.to_owned());
        }
        Some(txn)
    }
}

fn is_segment_name(name: &str) -> bool {
    name.strip_suffix(".clj").is_some_and(|d| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit()))
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Refuses a ledger whose segment swap was interrupted (or is running in a `recover` that
/// holds the lock): its journal may be incomplete until `recover` puts the originals back.
pub fn refuse_interrupted(root: &Path) -> Result<(), OpenError> {
    let marker = root.join(MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(_) => Err(OpenError::RecoveryInterrupted(marker)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("stat", &marker)(e).into()),
    }
}

/// Replaces the segments `originals` of `journal` with `files` (first seq, bytes): staged
/// and synced under `into/staged/`, the marker written, the originals moved into `into`,
/// the staged files moved into `journal`. Returns where the originals went. The caller
/// verifies the journal, then calls [`commit`] or [`undo`]. An error on the way leaves the
/// marker for `recover` (nothing is half-done without it).
pub(super) fn swap(
    root: &Path,
    journal: &Path,
    into: &Path,
    originals: &[PathBuf],
    files: &[(u64, Vec<u8>)],
) -> Result<Vec<PathBuf>, OpenError> {
    let cut =
        into.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok()).ok_or_else(|| {
            OpenError::Usage(format!("{} is not a numbered cut/ directory", into.display()))
        })?;
    let txn = Txn {
        cut,
        originals: originals.iter().map(|p| file_name(p)).collect(),
        new: files.iter().map(|(seq, _)| segment_name(*seq)).collect(),
    };
    let staged = into.join("staged");
    create_dir_0700(&staged)?;
    for (name, (_, content)) in txn.new.iter().zip(files) {
        let path = staged.join(name);
        let mut f =
            OpenOptions::new().write(true).create_new(true).open(&path).map_err(io("create", &path))?;
        f.write_all(content).and_then(|()| f.sync_all()).map_err(io("write", &path))?;
    }
    sync_dir(&staged)?;
    sync_dir(into)?;
    write_marker(root, &txn)?;
    let mut moved = Vec::with_capacity(originals.len());
    for original in originals {
        let target = into.join(file_name(original));
        std::fs::rename(original, &target).map_err(io("rename", original))?;
        moved.push(target);
    }
    sync_dir(into)?;
    sync_dir(journal)?;
    for name in &txn.new {
        let from = staged.join(name);
        std::fs::rename(&from, journal.join(name)).map_err(io("rename", &from))?;
    }
    sync_dir(journal)?;
    sync_dir(&staged)?;
    Ok(moved)
}

fn write_marker(root: &Path, txn: &Txn) -> Result<(), IoError> {
    let marker = root.join(MARKER);
    let tmp = root.join(format!("{MARKER}.tmp"));
    let mut f =
        OpenOptions::new().write(true).create(true).truncate(true).open(&tmp).map_err(io("create", &tmp))?;
    f.write_all(txn.text().as_bytes()).and_then(|()| f.sync_all()).map_err(io("write", &tmp))?;
    std::fs::rename(&tmp, &marker).map_err(io("rename", &tmp))?;
    sync_dir(root)
}

/// The swap into `into` verified: the marker goes, and the emptied staging directory.
pub(super) fn commit(root: &Path, into: &Path) -> Result<(), OpenError> {
    let marker = root.join(MARKER);
    std::fs::remove_file(&marker).map_err(io("remove", &marker))?;
    sync_dir(root)?;
    let staged = into.join("staged");
    if std::fs::remove_dir(&staged).is_ok() {
        sync_dir(into)?;
    }
    Ok(())
}

/// The swap into `into` did not verify: the rewritten segments are removed, the originals
/// put back, and `into` (with `cut/` if it is then empty) removed — nothing changed.
pub(super) fn undo(root: &Path, into: &Path) -> Result<(), OpenError> {
    let txn = read_marker(root)?;
    put_back(root, &txn, Discard::Delete)?;
    let staged = into.join("staged");
    for name in &txn.new {
        let _ = std::fs::remove_file(staged.join(name));
    }
    let _ = std::fs::remove_dir(&staged);
    let _ = std::fs::remove_dir(into);
    let _ = std::fs::remove_dir(root.join(super::CUT_DIR));
    let marker = root.join(MARKER);
    std::fs::remove_file(&marker).map_err(io("remove", &marker))?;
    sync_dir(root)?;
    Ok(())
}

/// `recover`'s first step over an interrupted swap: the originals back in `journal/`, the
/// rewritten segments found there moved to `cut/N/undone/`, the marker removed. Returns
/// the `cut/N/` directory, or `None` when there was no marker.
pub(super) fn undo_interrupted(root: &Path) -> Result<Option<PathBuf>, OpenError> {
    if refuse_interrupted(root).is_ok() {
        // A marker never completed: the swap had not begun.
        let _ = std::fs::remove_file(root.join(format!("{MARKER}.tmp")));
        return Ok(None);
    }
    let txn = read_marker(root)?;
    let into = put_back(root, &txn, Discard::MoveAside)?;
    let marker = root.join(MARKER);
    std::fs::remove_file(&marker).map_err(io("remove", &marker))?;
    sync_dir(root)?;
    Ok(Some(into))
}

fn read_marker(root: &Path) -> Result<Txn, OpenError> {
    let marker = root.join(MARKER);
    let file = File::open(&marker).map_err(io("open", &marker))?;
    let mut text = String::new();
    file.take(MAX_MARKER_BYTES + 1).read_to_string(&mut text).map_err(io("read", &marker))?;
    let unreadable = || {
        OpenError::Usage(format!(
            "{} is not a swap marker this build wrote: the journal's original segments are under cut/; put them \
             back in journal/ by hand (the marker lists them) and remove the marker",
            marker.display()
        ))
    };
    if text.len() as u64 > MAX_MARKER_BYTES {
        return Err(unreadable());
    }
    Txn::parse(&text).ok_or_else(unreadable)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Discard {
    /// Rewritten segments are deleted (their bytes are copies this recovery made).
    Delete,
    /// Rewritten segments move to `cut/N/undone/` (an interrupted run's: kept).
    MoveAside,
}

/// Every rewritten segment out of `journal/` and every original back in, then synced.
/// Each step is a rename, so this may itself be interrupted and run again.
fn put_back(root: &Path, txn: &Txn, discard: Discard) -> Result<PathBuf, OpenError> {
    let journal = root.join(JOURNAL_DIR);
    let into = root.join(super::CUT_DIR).join(txn.cut.to_string());
    let undone = into.join("undone");
    for name in &txn.new {
        let path = journal.join(name);
        // A name of an original not yet moved aside is still the original.
        let rewritten = !txn.originals.contains(name) || exists(&into.join(name));
        if !exists(&path) || !rewritten {
            continue;
        }
        match discard {
            Discard::Delete => std::fs::remove_file(&path).map_err(io("remove", &path))?,
            Discard::MoveAside => {
                if !undone.is_dir() {
                    create_dir_0700(&undone)?;
                    sync_dir(&into)?;
                }
                let target = undone.join(name);
                if exists(&target) {
                    return Err(OpenError::NoFreeName(target));
                }
                std::fs::rename(&path, &target).map_err(io("rename", &path))?;
            }
        }
    }
    if undone.is_dir() {
        sync_dir(&undone)?;
    }
    for name in &txn.originals {
        let kept = into.join(name);
        if exists(&kept) {
            std::fs::rename(&kept, journal.join(name)).map_err(io("rename", &kept))?;
        }
    }
    sync_dir(&journal)?;
    if into.is_dir() {
        sync_dir(&into)?;
    }
    Ok(into)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use super::*;

    #[test]
    fn the_marker_reads_back_and_nothing_else_does() {
        let txn =
            Txn { cut: 3, originals: vec![segment_name(0), segment_name(1620)], new: vec![segment_name(0)] };
        assert_eq!(Txn::parse(&txn.text()), Some(txn.clone()));
        let text = txn.text();
        for bad in [
            text.replace("swap 1", "swap 2"),
            text.replace("cut 3", "cut -3"),
            text.replace("cut 3", "cut +3"),
            text.replace(".clj", ".cborseq"),
            text.replace("original ", "origin "),
            text.trim_end().to_owned(),
            format!("{text}original {}\n", segment_name(9)),
            text.replace(&segment_name(1620), "../00000000000000001620.clj"),
        ] {
            assert_eq!(Txn::parse(&bad), None, "{bad:?}");
        }
    }
}
