//! The one pass over the journal that every open, audit and recovery runs: each record
//! verified in order (record checks, decoding, canonical form, hash, chain), compared with
//! sled's copy when asked, on one thread or two.

use std::path::{Path, PathBuf};

use ledger_schema::record::{
    RecordFault, RecordHeader, RecordVersion, Tail, classify_tail_as, open_record, payload_of,
};
use ledger_schema::{Id, SealedEntry, decode_frame};

use super::index::{Prefetched, SledCursor, SledFrames, SledItems, chunk_of, compare_sled, key_seq, parting};
use super::opener::Opener;
use super::{JOURNAL_DIR, TornTail, corrupt};
use crate::store::journal::{MAX_SEGMENT_BYTES, SegmentReader, Split, V1_FIRST_BYTE, io, list_segments};
use crate::store::{Chain, Corruption, Head, OpenError, Replica};

/// How many times one scan reads damage in the last (v3) segment again before reporting it.
const MAX_TAIL_REREADS: u32 = 8;

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
    /// The next segment and the seq its first record begins with, when this damage has no
    /// intact record after it in its own segment, is not in the last segment, and that
    /// record is intact (its header and payload checks verify): records written after the
    /// damaged one, which is then no torn end of the journal. Read best effort, for the report.
    pub(in crate::store) fn next_segment(&self) -> Option<(String, u64)> {
        if self.is_last || self.next_intact.is_some() {
            return None;
        }
        next_segment_intact(&self.segment)
    }

    pub(in crate::store) fn corruption(&self) -> OpenError {
        match &self.kind {
            DamageKind::Record(fault) => corrupt(
                self.seq,
                Replica::Journal,
                Corruption::Damaged(Box::new(crate::store::DamagedAt {
                    segment: crate::store::path_text::shown(&self.segment),
                    offset: self.offset,
                    fault: *fault,
                    last_good: self.seq.checked_sub(1),
                    next_intact: self.next_intact,
                    next_segment: self.next_segment(),
                    stray_at: crate::store::stray_after_zeros(&self.segment, self.offset),
                })),
            ),
            DamageKind::Invalid { seq, reason } => corrupt(*seq, Replica::Journal, reason.clone()),
        }
    }
}

/// The segment after `segment` and the seq its first record begins with, when that record
/// is intact (its header and payload checks verify). Read best effort, for reports.
pub(in crate::store) fn next_segment_intact(segment: &Path) -> Option<(String, u64)> {
    let dir = segment.parent()?;
    let segments = crate::store::journal::list_segments(dir).ok()?;
    let (_, next) = segments.iter().skip_while(|(_, p)| p.as_path() != segment).nth(1)?;
    let mut reader = SegmentReader::open(next).ok()?;
    match reader.next_record(next).ok()? {
        Split::Record { header, .. } => Some((crate::store::path_text::shown(next), header.first_seq)),
        _ => None,
    }
}

/// What one pass over the journal (compared against sled, when given) established.
pub(in crate::store) struct Scan {
    pub(in crate::store) head: Head,
    /// The last verified entry (`None` only when a tolerant scan found damage at genesis).
    pub(in crate::store) verified: Option<Head>,
    pub(in crate::store) frames: u64,
    pub(in crate::store) entries: u64,
    pub(in crate::store) torn: Option<TornTail>,
    /// Damage where a tolerant scan stopped (a strict scan returns it as an error).
    pub(in crate::store) damage: Option<Damage>,
    /// Where the journal holds the frames missing from sled's tail (kept only when asked;
    /// positions, not bytes, so that a long lag costs no memory).
    pub(in crate::store) sled_lag: Vec<LagFrame>,
    pub(in crate::store) sled_lag_frames: u64,
    /// The last segment and its verified length (where appends continue).
    pub(in crate::store) last_segment: Option<(PathBuf, u64)>,
}

/// A verified journal record whose frame sled lacks: where to read it again to restore it.
pub(in crate::store) struct LagFrame {
    pub(in crate::store) first_seq: u64,
    pub(in crate::store) segment: PathBuf,
    pub(in crate::store) offset: u64,
    pub(in crate::store) len: usize,
}

/// Per-entry observer of a scan (checkpoints, replay).
pub type OnEntry<'a> = &'a mut dyn FnMut(&SealedEntry) -> Result<(), OpenError>;
/// Where a verified record sits, shown to a scan's per-record observer.
pub(in crate::store) struct FramePos<'a> {
    pub segment: &'a Path,
    pub offset: u64,
    pub first_seq: u64,
    pub record: &'a [u8],
    /// The chain's head before this record (`None` for the genesis record).
    pub before: Option<Head>,
}

/// Per-record observer of a scan (recovery inserts into a fresh sled).
pub(in crate::store) type OnFrame<'a> = &'a mut dyn FnMut(&FramePos<'_>) -> Result<(), OpenError>;

/// Which sled copy a scan compares with the journal, and how.
#[derive(Clone, Copy)]
pub(in crate::store) enum SledCopy<'a> {
    /// The journal alone.
    Off,
    /// sled must hold the journal's records, lacking at most a suffix.
    Strict(&'a sled::Tree),
    /// As `Strict`, but sled may also hold records after the journal's end (a live
    /// writer appended them after the journal was read).
    MayLead(&'a sled::Tree),
    /// As `Strict`, reading sled through a [`SledCursor`] that starts with this handle
    /// (bounded memory; read-only audits), on its own thread ([`Prefetched`]). A `Mutex` only so that the scan may run on a
    /// helper thread ([`Threads::Two`]); the scan takes the handle once.
    Streamed(&'a Path, &'a std::sync::Mutex<Option<sled::Db>>),
}

/// How a scan treats damaged journal bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum OnDamage {
    /// Return it as a verification failure.
    Fail,
    /// Stop there and report it in [`Scan::damage`] (recovery).
    Stop,
}

/// A sled record that differs from the journal's, held until the scan knows whether the
/// journal's version is authenticated by a later `prev` link.
pub(super) struct Held {
    first_seq: u64,
    /// The entry whose `prev` must link to the journal's version.
    authenticated_by: u64,
    /// sled's record passes its own checks (else sled is simply damaged).
    sled_intact: bool,
    /// Where sled's version begins a history of its own, if it is intact and chains on from
    /// the prefix both copies hold.
    parting: Option<u64>,
    finding: OpenError,
}

/// Verifies every record of the journal, in order, and — when `sled` is given — that sled
/// holds the same records under the right keys, allowing sled to lag only by a suffix.
/// A tolerant scan (`OnDamage::Stop`) stops at the first record that does not verify, of
/// any kind, and reports where (`Scan::damage`) with the chain as it was before it.
pub(in crate::store) fn scan(
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
    scan_records(root, sled, keep_lag, on_damage, &mut each, on_frame, Opener::inline())
}

/// Per-record observer of a scan's entries: the verified entries of one record, in order,
/// handed over by value (so a pipelined scan can send them to another thread uncopied).
pub(super) type OnRecord<'a> = &'a mut dyn FnMut(Vec<SealedEntry>) -> Result<(), OpenError>;

/// [`scan`], showing each record's verified entries to `on_record` at the point where
/// [`scan`] shows them one by one to its `on_entry`, and opening entries with `opener`.
pub(super) fn scan_records(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    on_damage: OnDamage,
    on_record: OnRecord<'_>,
    on_frame: OnFrame<'_>,
    mut opener: Opener,
) -> Result<Scan, OpenError> {
    let journal_dir = root.join(JOURNAL_DIR);
    let segments = list_segments(&journal_dir)?;
    let mut chain = Chain::empty();
    let mut sled_iter: Option<Box<SledItems>> = match sled {
        SledCopy::Off => None,
        SledCopy::Strict(t) | SledCopy::MayLead(t) => Some(Box::new(SledFrames::new(t.iter()))),
        SledCopy::Streamed(path, db) => {
            match db.lock().map_or_else(|p| p.into_inner().take(), |mut d| d.take()) {
                Some(db) => Some(Box::new(Prefetched::spawn(SledFrames::new(SledCursor::new(path, db)?))?)),
                None => None,
            }
        }
    };
    let mut sled_lagging = false;
    let mut held: Option<Held> = None;
    // A sled read that failed: sled is read no further, and the failure is reported only
    // after the journal has verified (damage to the history comes first).
    let mut sled_failed: Option<sled::Error> = None;
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
    // Damage after two histories parted does not hide the part (outside review 94: verify
    // named only the later damage, recover the part).
    let stop = |damage: Damage, out: &mut Scan, held: Option<&Held>| -> Result<(), OpenError> {
        match on_damage {
            OnDamage::Fail => Err(match held.filter(|h| !h.sled_intact).and_then(|h| h.parting) {
                Some(seq) => corrupt(
                    seq,
                    Replica::Both,
                    Corruption::HistoriesPart { newest: damage.seq.saturating_sub(1) },
                ),
                None => damage.corruption(),
            }),
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
                segment: crate::store::path_text::shown(&path),
                len: size,
                max: MAX_SEGMENT_BYTES,
            };
            return Err(corrupt(chain.next_seq(), Replica::Journal, reason));
        }
        let mut reader = SegmentReader::open(&path)?;
        let segment = crate::store::path_text::shown(&path);
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
        // Where preallocated, never written space begins (v3): the segment's records end there.
        let mut unwritten_from = None;
        // Damage in the last v3 segment is read a second time before it is reported (once
        // per offset, a bounded number of times): a live writer may have been copying that
        // record while it was read (`SegmentReader::reread_from`).
        let mut rereads_left = MAX_TAIL_REREADS;
        let mut reread_at = None;
        loop {
            let (offset, header, record) = match reader.next_record(&path)? {
                Split::Record { offset, header, record } => (offset, header, record),
                Split::End => break,
                Split::Fault { offset, fault } => {
                    let next_seq = chain.next_seq();
                    let version = reader.version();
                    let rest = reader.rest(&path)?;
                    if offset == 0 && rest.first() == Some(&V1_FIRST_BYTE) {
                        return Err(corrupt(next_seq, Replica::Journal, Corruption::JournalV1 { segment }));
                    }
                    match classify_tail_as(version, rest, next_seq, is_last) {
                        Tail::Unwritten => {
                            unwritten_from = Some(offset);
                            break;
                        }
                        Tail::Torn => {
                            out.torn = Some(TornTail {
                                segment: path.clone(),
                                offset,
                                bytes: rest.len() as u64,
                                zeros: TornTail::trailing_zeros(rest),
                                moved_to: None,
                            });
                            break;
                        }
                        Tail::Damaged { .. }
                            if version == RecordVersion::V3
                                && is_last
                                && rereads_left > 0
                                && reread_at != Some(offset) =>
                        {
                            rereads_left -= 1;
                            reread_at = Some(offset);
                            reader.reread_from(offset, &path)?;
                            continue;
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
                            stop(damage, &mut out, held.as_ref())?;
                            break 'segments;
                        }
                    }
                }
            };
            let first_seq = chain.next_seq();
            let before = chain.head();
            // Every entry of the record is verified on a copy of the chain first, so a
            // record that fails leaves the chain where it was.
            let verified =
                verify_record(chain, header, record, &mut opener).and_then(|(next_chain, entries)| {
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
                    let reason = match reason {
                        Corruption::SeqGap { expected: 0, found } if segment_idx == 0 && offset == 0 => {
                            Corruption::JournalStartsLate { segment: segment.clone(), found }
                        }
                        other => other,
                    };
                    stop(invalid(offset, seq, reason), &mut out, held.as_ref())?;
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
                            out.sled_lag.push(LagFrame {
                                first_seq,
                                segment: path.clone(),
                                offset,
                                len: record.len(),
                            });
                        }
                    }
                    Some(Err(e)) => sled_failed = Some(e),
                    Some(Ok((k, v))) => {
                        if let Err(finding) = compare_sled(first_seq, record, &k, &v)
                            && held.is_none()
                        {
                            let parting = parting(before, record, &v);
                            held = Some(Held {
                                first_seq,
                                authenticated_by: chain.next_seq(),
                                sled_intact: open_record(&v).is_ok()
                                    && !matches!(
                                        &finding,
                                        OpenError::Corrupt { reason: Corruption::ForeignSled { .. }, .. }
                                    ),
                                parting,
                                finding,
                            });
                        }
                    }
                }
            }
            if sled_failed.is_some() {
                sled_iter = None;
            }
        }
        // A segment with no record (empty, or holding only a torn write) is legal only as
        // the last one, named for the seq its first record would carry.
        if records_here == 0 {
            let next = chain.next_seq();
            let reason = if !is_last {
                Some(Corruption::EmptySegment { segment: segment.clone() })
            } else if named_seq != next {
                Some(Corruption::EmptySegmentName { segment: segment.clone(), named: named_seq, next })
            } else {
                None
            };
            if let Some(reason) = reason {
                stop(invalid(0, next, reason), &mut out, held.as_ref())?;
                out.torn = None;
                break 'segments;
            }
        }
        if is_last {
            let end = out.torn.as_ref().map(|t| t.offset).or(unwritten_from);
            out.last_segment = Some((path, end.unwrap_or(valid_len.max(segment_len))));
        }
    }
    if let Some(h) = held {
        if h.sled_intact && out.damage.is_none() {
            // Both copies hold an intact record for the newest frame, and nothing later
            // says which is right: choose neither.
            let sled_later = sled_iter.as_mut().and_then(|it| it.next()).is_some_and(|r| r.is_ok());
            let reason =
                if sled_later { Corruption::CopiesDisagreeSledContinues } else { Corruption::CopiesDisagree };
            return Err(corrupt(h.first_seq, Replica::Both, reason));
        }
        // The journal's version is linked to by its next entry, and sled's is intact and
        // chains on — acknowledged, as no accident makes such a record: two histories, and
        // neither copy is blamed (outside reviews 89 F2, 92).
        if let Some(seq) = h.parting
            && out.damage.is_none()
        {
            let newest = chain.head().map_or(seq, |h| h.seq);
            return Err(corrupt(seq, Replica::Both, Corruption::HistoriesPart { newest }));
        }
        return Err(h.finding);
    }
    if let Some(e) = sled_failed {
        return Err(OpenError::Sled(e));
    }
    // Beside a live writer sled may hold records appended after the journal was read.
    let sled_may_lead = matches!(sled, SledCopy::MayLead(_));
    if let Some(iter) = sled_iter.as_mut().filter(|_| !sled_lagging && out.damage.is_none() && !sled_may_lead)
    {
        match iter.next() {
            None => {}
            Some(Err(e)) => return Err(OpenError::Sled(e)),
            Some(Ok((k, _))) => {
                // A chunk no record continues is sled's damage, wherever it sorts.
                if let Some((frame, chunk)) = chunk_of(&k) {
                    return Err(corrupt(frame, Replica::Sled, Corruption::StrayChunk { frame, chunk }));
                }
                let seq = key_seq(&k).unwrap_or(chain.next_seq());
                let mut journal_end = match &out.last_segment {
                    Some((path, end)) => format!(
                        "the journal ends at offset {end} of {}",
                        crate::store::path_text::shown(path)
                    ),
                    None => "the journal holds no record".to_owned(),
                };
                // What follows there is part of the story: a partial record is the journal's
                // copy of this frame cut short or damaged at its end, not a clean loss
                // (outside review 102: the two read the same).
                if out.torn.is_some() {
                    journal_end.push_str(
                        ", where a partial record follows (a write cut short, or damaged at its end)",
                    );
                }
                // The journal lost acknowledged bytes at its end (sled is written after its
                // fdatasync); what it held past sled's end is unknown, so the operator
                // decides (outside review 148 F4).
                if out.last_segment.is_some() || out.torn.is_some() {
                    journal_end.push_str(
                        ": acknowledged records the journal lost, and any it held past sled's end with them — \
                         `ledger recover` names the cut that restores sled's",
                    );
                }
                return Err(corrupt(seq, Replica::Journal, Corruption::MissingInJournal { journal_end }));
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
    /// Every check and the observer on the calling thread, entry after entry (the reference
    /// order). A read-only audit still reads sled's copy on a thread of its own, which
    /// yields exactly what reading it here would.
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
pub(super) const PIPELINE_BATCH_ENTRIES: usize = 256;
/// Batches queued between the two threads. At most four are alive at once: the one
/// being filled, one queued, the one being folded, and one folded batch on its way back
/// to be freed. Each holds [`PIPELINE_BATCH_ENTRIES`] entries, or one record's entries if
/// more (the sequential scan holds a whole record too: its entries are shown only once
/// all of them verified). Memory stays bounded whatever the ledger's length; one queued
/// batch is enough for the two threads to overlap.
pub(super) const PIPELINE_BATCHES: usize = 1;

/// A strict scan (`OnDamage::Fail`, no per-frame observer) with `on_entry` run on the
/// calling thread, and the rest where `threads` says.
pub(super) fn scan_strict(
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
pub(super) fn scan_pipelined(
    root: &Path,
    sled: SledCopy<'_>,
    keep_lag: bool,
    on_entry: OnEntry<'_>,
) -> Result<Scan, OpenError> {
    pipelined(
        move |send: OnRecord<'_>| {
            scan_records(root, sled, keep_lag, OnDamage::Fail, send, &mut |_| Ok(()), Opener::split())
        },
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
pub(super) fn pipelined<R: Send>(
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
pub(super) fn verify_record(
    chain: Chain,
    header: RecordHeader,
    record: &[u8],
    opener: &mut Opener,
) -> Result<(Chain, Vec<SealedEntry>), (u64, Corruption)> {
    let mut chain = chain;
    let first_seq = chain.next_seq();
    if header.first_seq != first_seq {
        return Err((first_seq, Corruption::SeqGap { expected: first_seq, found: header.first_seq }));
    }
    let payload = payload_of(record);
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
    for opened in opener.open_all(&entry_bytes) {
        let seq = chain.next_seq();
        match chain.verify_opened(opened) {
            Ok(sealed) => entries.push(sealed),
            // A link that does not match an altered earlier entry: name both.
            Err(Corruption::PrevMismatch { expected, found }) if seq > 0 => {
                return Err((seq - 1, Corruption::LinkBroken { next: seq, expected, found }));
            }
            Err(reason) => return Err((seq, reason)),
        }
    }
    Ok((chain, entries))
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
