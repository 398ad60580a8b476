//! The operator's cut (`recover --truncate-after N`), made safe against a crash.
//!
//! A cut moves the journal's bytes past seq N into `cut/M/` — the tail of the segment that
//! holds N copied there and synced, then that segment truncated; every later segment
//! renamed there — and then rebuilds sled from what remains. Until sled is rebuilt, sled
//! still holds the records that were cut: a crash in between left a journal that read as
//! having lost acknowledged bytes at its end, and nothing named the interrupted cut or
//! undid it (outside review 181 F3). So a marker, `recover.cut` in the ledger directory,
//! names the cut — the seq, the `cut/M/` directory, the segment and the offset — before
//! anything moves, and goes once sled is rebuilt without the cut records (or once a
//! refused cut is put back). While it is there every open, verify, replay and audit refuses
//! the ledger ([`refuse_interrupted`]), and `recover` first puts the cut bytes back
//! (`recover::undo_interrupted_cut`), as it undoes an interrupted segment swap: the ledger
//! is then as it was before the cut, and a `--truncate-after` given again cuts again.

use std::path::{Path, PathBuf};

use super::journal::{io, sync_dir};
use super::{IoError, OpenError};

/// The marker of an operator's cut in progress, in the ledger directory.
pub const MARKER: &str = "recover.cut";
/// The marker's first line (its format's name and version).
const HEADER: &str = "closure-ledger recover cut 1";
/// A marker longer than this is not one this build wrote.
const MAX_MARKER_BYTES: u64 = 4096;

/// A cut of the journal after seq `after`: the bytes of `segment` from offset `end` on, and
/// every later segment, move into `cut/<cut>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cut {
    pub(super) after: u64,
    pub(super) cut: u32,
    pub(super) segment: String,
    pub(super) end: u64,
}

impl Cut {
    fn text(&self) -> String {
        let Cut { after, cut, segment, end } = self;
        format!("{HEADER}\nafter {after}\ncut {cut}\nsegment {segment}\nend {end}\n")
    }

    fn parse(text: &str) -> Option<Cut> {
        let mut lines = text.strip_suffix('\n')?.split('\n');
        (lines.next()? == HEADER).then_some(())?;
        let mut field = |name: &str| -> Option<&str> {
            let value = lines.next()?.strip_prefix(name)?.strip_prefix(' ')?;
            // Decimal digits only (`u64::from_str` would also take a sign).
            (name == "segment" || (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())))
                .then_some(value)
        };
        let after = field("after")?.parse().ok()?;
        let cut = field("cut")?.parse().ok()?;
        let segment = field("segment")?.to_owned();
        let end = field("end")?.parse().ok()?;
        // A segment's own name, never a path (`journal::segment_name`).
        let digits = segment.strip_suffix(".clj")?;
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
        lines.next().is_none().then_some(Cut { after, cut, segment, end })
    }
}

/// Names the cut before anything moves: written whole (a temporary file, synced, renamed).
pub(super) fn write(root: &Path, cut: &Cut) -> Result<(), IoError> {
    super::swap::write_marker_file(root, MARKER, &cut.text())
}

/// The cut is done (sled rebuilt without its records) or put back: the marker goes.
pub(super) fn remove(root: &Path) -> Result<(), IoError> {
    let marker = root.join(MARKER);
    match std::fs::remove_file(&marker) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other.map_err(io("remove", &marker)),
    }?;
    sync_dir(root)
}

/// Refuses a ledger whose cut was interrupted (or is running in a `recover` that holds the
/// lock): sled may still hold records the journal no longer does.
pub fn refuse_interrupted(root: &Path) -> Result<(), OpenError> {
    let marker = root.join(MARKER);
    match std::fs::symlink_metadata(&marker) {
        Ok(_) => Err(OpenError::CutInterrupted(marker)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io("stat", &marker)(e).into()),
    }
}

/// The interrupted cut the marker names, if there is a marker (a temporary one never
/// completed is removed: its cut had not begun).
pub(super) fn read(root: &Path) -> Result<Option<(PathBuf, Cut)>, OpenError> {
    let marker = root.join(MARKER);
    let unresolved = |why: String| OpenError::CutUnresolved { marker: marker.clone(), why };
    match std::fs::symlink_metadata(&marker) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let _ = std::fs::remove_file(root.join(format!("{MARKER}.tmp")));
            return Ok(None);
        }
        other => other.map_err(io("stat", &marker))?,
    };
    let bytes = super::swap::marker_bytes(&marker, MAX_MARKER_BYTES)?.map_err(unresolved)?;
    let cut = std::str::from_utf8(&bytes)
        .ok()
        .and_then(Cut::parse)
        .ok_or_else(|| unresolved("it is not a cut marker this build wrote".to_owned()))?;
    Ok(Some((marker, cut)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_reads_back_and_nothing_else_parses() {
        let cut = Cut { after: 41, cut: 3, segment: "00000000000000000012.clj".to_owned(), end: 4096 };
        assert_eq!(Cut::parse(&cut.text()), Some(cut.clone()));
        let text = cut.text();
        for bad in [
            text.replace("after 41", "after +41"),
            text.replace("after 41", "after"),
            text.replace("cut 3", "cut -3"),
            text.replace("00000000000000000012.clj", "../00000000000000000012.clj"),
            text.replace("00000000000000000012.clj", "0012.clj"),
            text.replace("end 4096", "end 4096 "),
            text.replace("1\nafter", "2\nafter"),
            format!("{text}extra\n"),
            text.trim_end().to_owned(),
        ] {
            assert_eq!(Cut::parse(&bad), None, "{bad:?}");
        }
    }
}
