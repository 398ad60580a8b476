//! The head mark: a third witness of how far the journal reached, for the one decision sled
//! cannot vouch for.
//!
//! sled is the journal's only witness of records the journal lost at its end; but when sled
//! will not open, the writer (and `recover`) rebuild it from the journal as it stands — and
//! where the journal *also* lost its end (zeroed in place: no trace in the journal itself),
//! the records only sled held were dropped and the next commit took their seqs. sled 0.34
//! reports some read failures inside its own open as damage to its files and rewrites its
//! log over them, so one transient EIO made this double fault (outside reviews 220 F1, 222).
//!
//! So each writer store, as it closes, and the writer's open, once both copies verified,
//! write `head.mark` in the ledger directory: the ledger id and the seq and hash of the
//! head (written whole: a temporary file, synced, renamed, the directory synced). Before
//! sled is rebuilt because it will not open, the journal's head is compared with it
//! ([`refuse_lost_end`]): a journal that ends before the mark lost acknowledged records,
//! and the rebuild is refused, changing nothing. A mark is evidence only while it is whole
//! and names this ledger; one that is not (damaged, another ledger's) is set aside as no
//! evidence, as before it existed. `recover`, which may cut the journal on the operator's
//! word (`--truncate-after`), writes the head it leaves.
//!
//! The mark is written per store, never per commit: what a writer committed since its last
//! mark (a writer killed before its close) has no third witness — the mark trails the head.
//! It is no checkpoint either: it lives in the ledger directory, so it guards against
//! accidents, not against whoever can write there.

use std::path::Path;

use ledger_schema::{Digest, Id};

use super::OpenError;
use super::chain::Head;

/// The mark's file, in the ledger directory.
pub const MARK: &str = "head.mark";
/// Its first line (its format's name and version).
const HEADER: &str = "closure-ledger head mark 1";
/// A mark longer than this is not one this build wrote.
const MAX_MARK_BYTES: u64 = 512;
/// `derive_key` context of the mark's check line.
const CHECK_CONTEXT: &str = "closure-ledger v1 head mark";

/// The head a mark names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub ledger: Id,
    pub seq: u64,
    pub hash: Digest,
}

impl Mark {
    pub fn of(head: &Head) -> Mark {
        Mark { ledger: head.ledger, seq: head.seq, hash: head.hash }
    }

    fn body(&self) -> String {
        format!("{HEADER}\nledger {}\nseq {}\nhash {}\n", self.ledger, self.seq, self.hash)
    }

    fn text(&self) -> String {
        let body = self.body();
        format!("{body}check {}\n", check(&body))
    }

    fn parse(text: &str) -> Option<Mark> {
        let (body, check_line) = text.strip_suffix('\n')?.rsplit_once('\n')?;
        let body = format!("{body}\n");
        (check_line.strip_prefix("check ")? == check(&body)).then_some(())?;
        let mut lines = body.strip_suffix('\n')?.split('\n');
        (lines.next()? == HEADER).then_some(())?;
        let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ').map(str::to_owned);
        let ledger = field("ledger")?.parse().ok()?;
        let seq_text = field("seq")?;
        // Decimal digits only (`u64::from_str` would also take a sign).
        (!seq_text.is_empty() && seq_text.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
        let seq = seq_text.parse().ok()?;
        let hash = field("hash")?.parse().ok()?;
        let mark = Mark { ledger, seq, hash };
        (lines.next().is_none() && mark.body() == body).then_some(mark)
    }
}

fn check(body: &str) -> String {
    let key = blake3::derive_key(CHECK_CONTEXT, body.as_bytes());
    let mut out = String::with_capacity(64);
    for b in key {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    out
}

/// Writes the mark of `head` (whole: temporary file, synced, renamed, directory synced).
pub(crate) fn write(root: &Path, head: &Head) -> Result<(), super::IoError> {
    super::swap::write_marker_file(root, MARK, &Mark::of(head).text())
}

/// The mark in `root`, if it is whole and names `ledger` (anything else is no evidence).
pub(crate) fn read(root: &Path, ledger: Id) -> Option<Mark> {
    let mark = read_whole(root)?;
    if mark.ledger != ledger {
        set_aside(root, format!("it names another ledger, {}", mark.ledger));
        return None;
    }
    Some(mark)
}

/// The mark in `root`, if it is whole, whatever ledger it names. One that is there but not
/// whole is no evidence — and said so ([`set_aside_note`]): a writer writes the mark whole,
/// so such a mark is damage or an edit, and the check it stands for is off until a writer
/// writes it again (outside review 257 F2: one flipped byte switched the lost-end guard off
/// without a word).
pub(crate) fn read_whole(root: &Path) -> Option<Mark> {
    let bytes = match super::swap::marker_bytes(&root.join(MARK), MAX_MARK_BYTES) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(why)) => {
            set_aside(root, why);
            return None;
        }
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            set_aside(root, e.to_string());
            return None;
        }
    };
    let mark = std::str::from_utf8(&bytes).ok().and_then(Mark::parse);
    if mark.is_none() {
        set_aside(
            root,
            "its check does not match what it says, or it is not the text a writer writes".to_owned(),
        );
    }
    mark
}

/// Notes the mark in `root` set aside, naming it (outside review 259 F2: two ledgers checked
/// in one loop could not be told apart).
fn set_aside(root: &Path, why: String) {
    let named = format!("{}: {why}", super::path_text::shown(&root.join(MARK)));
    SET_ASIDE.with(|set| set.replace(Some(named)));
}

/// Why a `head.mark` read on this thread was set aside as no evidence, if one was (reading
/// it clears it): the CLI says so on stderr.
pub fn set_aside_note() -> Option<String> {
    SET_ASIDE.with(std::cell::Cell::take)
}

/// Writes the mark of `head` where it names an earlier head of this ledger, none, or no
/// whole one — or, with `lower`, any other (`recover --truncate-after`: the operator named
/// the end). A write that fails is said on stderr by the CLI ([`write_failed`]): the
/// witness then trails (outside review 227 F4: it failed silently).
pub(crate) fn write_best_effort(root: &Path, head: &Head, lower: bool) {
    let keep = read(root, head.ledger)
        .is_some_and(|m| (m.seq == head.seq && m.hash == head.hash) || (!lower && m.seq > head.seq));
    if !keep && let Err(e) = write(root, head) {
        WRITE_FAILED.with(|failed| failed.replace(Some(e.to_string())));
    }
}

thread_local! {
    static WRITE_FAILED: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
    static SET_ASIDE: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// Why the last mark write on this thread failed, if one did (reading it clears it).
pub fn write_failed() -> Option<String> {
    WRITE_FAILED.with(std::cell::Cell::take)
}

/// The journal's entry at the mark's seq, noted as a scan passes it: a mark below the head
/// names an entry the journal must still hold (outside review 237 F5: both copies holding
/// another history from the mark's seq on passed every command, and the next writer
/// overwrote the mark).
#[derive(Debug, Default)]
pub(crate) struct AtMark {
    seq: Option<u64>,
    /// The hash of the journal's entry at the mark's seq, once the scan passed it.
    pub held: Option<Digest>,
}

impl AtMark {
    pub(crate) fn new(root: &Path) -> AtMark {
        AtMark { seq: read_whole(root).map(|m| m.seq), held: None }
    }

    pub(crate) fn note(&mut self, sealed: &ledger_schema::SealedEntry) {
        if self.seq == Some(sealed.entry.seq) {
            self.held = Some(sealed.hash);
        }
    }
}

/// Before a writer's open or `recover` goes on from a journal whose head is `head` without
/// another copy that holds more (`sled`: why, a clause naming sled): refused where the mark
/// names a later head — the journal lost acknowledged records at its end — or another entry
/// at the head's seq, unless `fork_decided` (the operator's `--prefer` or checkpoint chose
/// between two versions of that record: outside review 229 F2, a `recover --prefer` killed
/// before it wrote the mark was refused when run again). Nothing is changed.
///
/// `at_mark`: the journal's entry at the mark's seq, where the scan passed it ([`AtMark`]) —
/// another entry there, below the head, is refused the same way (its history was replaced).
pub(crate) fn refuse_lost_end(
    root: &Path,
    head: &Head,
    at_mark: Option<Digest>,
    sled: String,
    fork_decided: bool,
) -> Result<(), OpenError> {
    let replaced = |mark: &Mark| {
        !fork_decided
            && ((mark.seq == head.seq && mark.hash != head.hash)
                || (mark.seq < head.seq && at_mark.is_some_and(|held| held != mark.hash)))
    };
    match read(root, head.ledger) {
        Some(mark) if mark.seq > head.seq || replaced(&mark) => Err(OpenError::LostEnd {
            mark_seq: mark.seq,
            mark_hash: Box::new(mark.hash),
            journal_seq: head.seq,
            sled,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    /// A mark whose check line was computed from docs/format.md alone, in Python
    /// (`blake3.blake3(body, derive_key_context="closure-ledger v1 head mark")`), reads as
    /// written here, and this build writes the same bytes.
    #[test]
    fn a_mark_from_the_format_page_reads_and_is_written_alike() {
        let text = "closure-ledger head mark 1\nledger 01M98111ESS3CYDK60HD16RS5N\nseq 57\nhash \
                    b3:57df36088f6d93c4fe5e8bfa698cfc71fceb50db606e812058db4bea2ef5296d\ncheck \
                    2276204e35c27c5f19e97c93da7cb6cd49365bd4c9bfc8156a24c0c950a4c86f\n";
        let mark = Mark::parse(text).unwrap();
        assert_eq!(mark.seq, 57);
        assert_eq!(mark.ledger.to_string(), "01M98111ESS3CYDK60HD16RS5N");
        assert_eq!(mark.text(), text);
    }

    #[test]
    fn a_mark_reads_back_and_nothing_else_parses() {
        let mark = Mark {
            ledger: "01JC0000000000000000000010".parse().unwrap(),
            seq: 46,
            hash: Digest::of_repeated(ledger_schema::DigestKind::Source, b"x"),
        };
        let text = mark.text();
        assert_eq!(Mark::parse(&text), Some(mark));
        for bad in [
            text.replace("seq 46", "seq 47"),
            text.replace("seq 46", "seq +46"),
            text.replace("seq 46", "seq 046"),
            text.replace("mark 1\n", "mark 2\n"),
            format!("{text}extra\n"),
            text.trim_end().to_owned(),
            text.replace("check ", "check  "),
        ] {
            assert_eq!(Mark::parse(&bad), None, "{bad:?}");
        }
        // Every single byte changed is refused (the check covers the body; the check line
        // itself must match).
        for at in 0..text.len() {
            let mut b = text.clone().into_bytes();
            b[at] ^= 0x01;
            if let Ok(t) = String::from_utf8(b) {
                assert_eq!(Mark::parse(&t), None, "byte {at}");
            }
        }
    }
}
