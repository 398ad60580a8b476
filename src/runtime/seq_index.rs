//! `SeqIndex`: the id → seq index that grows with the ledger (one item per Worker event),
//! kept compact.
//!
//! A persistent `OrdMap` costs about 64 bytes per item under increasing ids (its nodes end
//! half full), which at a million Worker events is most of a replay's memory. Here the
//! items live in one sorted `Run` — blocks of `BLOCK` (32) items, each a full 20-byte head
//! (the id's two halves and a 32-bit seq; a seq that does not fit, past four billion
//! entries, is kept in a side map) and the rest as fixed-width deltas from the item before
//! (a ULID's 80 random bits make ~11 bytes of id delta; seqs differ by little), about 13
//! bytes an item — shared (`Arc`) so that a snapshot of the state stays an O(1) clone, plus
//! a small persistent map of the latest inserts, merged into the run once it holds a 64th
//! as many items. Ids mostly grow (ULIDs), so a merge usually appends to a run no snapshot
//! shares, in place.
//!
//! It reads, iterates and encodes exactly as the map it stands for: a lookup is one map
//! probe, one binary search over the blocks' heads and the decoding of at most one block;
//! iteration and the canonical encoding (a CBOR map) are in id order, so the state digest
//! does not depend on the representation.

use std::sync::Arc;

use ledger_schema::Id;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// Items below which the latest inserts are never merged (a small index stays a map).
const MIN_RECENT: usize = 1024;

/// The latest inserts are merged once they are this share of the run (`1/RECENT_SHARE`):
/// the map costs ~64 bytes an item, the run ~13.
const RECENT_SHARE: usize = 64;

/// Items per sealed block of the run: one head and `BLOCK - 1` deltas. A lookup decodes at
/// most one block; the head, its offset and the widths cost ~0.9 bytes an item at 32.
const BLOCK: usize = 32;

/// One id → seq item: 20 bytes, packed to 4-byte alignment (an `(Id, u64)` tuple would be
/// 32, `u128` being 16-aligned). Fields are only ever copied out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
struct Slot {
    hi: u64,
    lo: u64,
    /// The seq, or [`WIDE`]: the seq is in [`SeqIndex::wide`].
    seq: u32,
}

/// The slot seq of an item whose seq does not fit in 32 bits (kept in the side map).
const WIDE: u32 = u32::MAX;

impl Slot {
    fn new(id: Id, seq: u64) -> Slot {
        // Truncations are the split of the 128-bit id into its halves.
        #[allow(clippy::cast_possible_truncation)]
        Slot { hi: (id.0 >> 64) as u64, lo: id.0 as u64, seq: u32::try_from(seq).unwrap_or(WIDE) }
    }

    fn id(&self) -> Id {
        let (hi, lo) = (self.hi, self.lo);
        Id((u128::from(hi) << 64) | u128::from(lo))
    }

    /// The item after `self` by the delta `(id, seq)` (see [`Run::seal`]).
    fn after(&self, id_delta: u128, seq_delta: u64) -> Slot {
        // Zigzag: even deltas are up, odd ones down (a seq never leaves u32).
        let seq = if seq_delta & 1 == 0 {
            i64::from(self.seq) + (seq_delta >> 1) as i64
        } else {
            i64::from(self.seq) - (seq_delta >> 1) as i64 - 1
        };
        let id = self.id().0.wrapping_add(id_delta);
        #[allow(clippy::cast_possible_truncation)]
        Slot { hi: (id >> 64) as u64, lo: id as u64, seq: seq as u32 }
    }
}

/// Bytes needed to write `x` little-endian without its high zero bytes.
fn width(x: u128) -> usize {
    16 - (x.leading_zeros() / 8) as usize
}

/// The mask of a `width`-byte number (`width` at most 16).
fn mask(width: usize) -> u128 {
    u128::MAX.checked_shr(128 - 8 * width.min(16) as u32).unwrap_or(0)
}

/// The little-endian number in the first bytes of `bytes`, masked to its width by `mask`.
/// A lookup decodes up to a block of these: where 16 bytes are at hand it is one load and
/// a mask, not a byte-wise fold (most of a lookup's instructions) or a `memcpy` call.
#[inline]
fn read_le(bytes: &[u8], mask: u128) -> u128 {
    match bytes.first_chunk::<16>() {
        Some(word) => u128::from_le_bytes(*word) & mask,
        None => {
            let mut word = [0u8; 16];
            word.iter_mut().zip(bytes).for_each(|(w, b)| *w = *b);
            u128::from_le_bytes(word) & mask
        }
    }
}

/// The items of one coded block: `head`, then the deltas in `bytes` (see [`Run::deltas`]).
struct Decode<'a> {
    next: Option<Slot>,
    rest: &'a [u8],
    id_w: usize,
    id_mask: u128,
    seq_mask: u128,
    step: usize,
}

impl Iterator for Decode<'_> {
    type Item = Slot;

    #[inline]
    fn next(&mut self) -> Option<Slot> {
        let item = self.next?;
        self.next = match (self.rest.get(self.step..), self.rest.get(self.id_w..)) {
            (Some(after), Some(seq)) if self.step > 0 => {
                let id = read_le(self.rest, self.id_mask);
                let seq = read_le(seq, self.seq_mask);
                self.rest = after;
                Some(item.after(id, seq as u64))
            }
            _ => None,
        };
        Some(item)
    }
}

fn decode(head: Slot, bytes: &[u8]) -> Decode<'_> {
    let (widths, rest) = bytes.split_at_checked(2).unwrap_or((&[0, 0], &[]));
    let id_w = usize::from(widths.first().copied().unwrap_or(0));
    let seq_w = usize::from(widths.get(1).copied().unwrap_or(0));
    Decode { next: Some(head), rest, id_w, id_mask: mask(id_w), seq_mask: mask(seq_w), step: id_w + seq_w }
}

/// How many items the coded block `bytes` holds besides its head.
fn deltas_in(bytes: &[u8]) -> usize {
    match bytes {
        [id_w, seq_w, rest @ ..] if usize::from(*id_w) + usize::from(*seq_w) > 0 => {
            rest.len() / (usize::from(*id_w) + usize::from(*seq_w))
        }
        _ => 0,
    }
}

/// The sorted items of a [`SeqIndex`] outside its recent map, block-coded (module docs).
#[derive(Clone, Default)]
struct Run {
    /// The first item of every sealed block, in id order.
    heads: Vec<Slot>,
    /// Where each sealed block's deltas begin in `deltas`.
    starts: Vec<usize>,
    /// Per sealed block: the id-delta and seq-delta widths (one byte each), then its other
    /// items as (id − previous id, zigzag(seq − previous seq)), little-endian, each at its
    /// block's widths. A block holds `BLOCK` items when sealed from `open`, and between
    /// `BLOCK / 2` and `BLOCK` when a merge splits one that grew past `BLOCK`.
    deltas: Vec<u8>,
    /// How many items the sealed blocks hold.
    sealed: usize,
    /// The items after the last sealed block, sorted: between `BLOCK` and `2 * BLOCK - 1`
    /// of them once the run holds that many (so its last item is at hand), sealed `BLOCK`
    /// at a time.
    open: Vec<Slot>,
}

impl Run {
    fn len(&self) -> usize {
        self.sealed + self.open.len()
    }

    /// Sealed block `k`'s head and coded deltas.
    fn block(&self, k: usize) -> Option<(Slot, &[u8])> {
        let end = self.starts.get(k + 1).copied().unwrap_or(self.deltas.len());
        Some((*self.heads.get(k)?, self.deltas.get(*self.starts.get(k)?..end)?))
    }

    /// Every item, in id order.
    fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        (0..self.heads.len())
            .filter_map(|k| self.block(k))
            .flat_map(|(head, bytes)| decode(head, bytes))
            .chain(self.open.iter().copied())
    }

    fn last(&self) -> Option<Slot> {
        self.open.last().copied()
    }

    /// The item holding `id`.
    fn find(&self, id: Id) -> Option<Slot> {
        if self.open.first().is_some_and(|s| s.id() <= id) || self.heads.is_empty() {
            let at = self.open.binary_search_by(|s| s.id().cmp(&id)).ok()?;
            return self.open.get(at).copied();
        }
        let (head, bytes) = self.block(self.heads.partition_point(|h| h.id() <= id).checked_sub(1)?)?;
        decode(head, bytes).take_while(|s| s.id() <= id).find(|s| s.id() == id)
    }

    /// Appends `slot`, above every item held.
    fn push(&mut self, slot: Slot) {
        self.open.push(slot);
        if self.open.len() == 2 * BLOCK {
            let block: Vec<Slot> = self.open.drain(..BLOCK).collect();
            self.seal(&block);
        }
    }

    /// Appends `items` (sorted, above every sealed item) as one sealed block.
    fn seal(&mut self, items: &[Slot]) {
        let Some(head) = items.first().copied() else { return };
        let deltas: Vec<(u128, u128)> = items
            .windows(2)
            .filter_map(|w| match w {
                [a, b] => {
                    let seq = i64::from(b.seq) - i64::from(a.seq);
                    let zigzag = if seq >= 0 { (seq as u128) << 1 } else { ((-seq - 1) as u128) << 1 | 1 };
                    Some((b.id().0.wrapping_sub(a.id().0), zigzag))
                }
                _ => None,
            })
            .collect();
        let id_w = deltas.iter().map(|d| width(d.0)).max().unwrap_or(0);
        let seq_w = deltas.iter().map(|d| width(d.1)).max().unwrap_or(0);
        self.heads.push(head);
        self.starts.push(self.deltas.len());
        self.sealed += items.len();
        // Widths are at most 16 (u128) and 5 (a 33-bit zigzag).
        #[allow(clippy::cast_possible_truncation)]
        self.deltas.extend([id_w as u8, seq_w as u8]);
        for (id, seq) in deltas {
            self.deltas.extend(id.to_le_bytes().iter().take(id_w));
            self.deltas.extend(seq.to_le_bytes().iter().take(seq_w));
        }
    }

    /// Merges `items` (sorted, distinct) in; an item replaces one of the same id. The run
    /// is rewritten from the block that `items`' first id falls into (so with growing ids a
    /// merge appends): blocks no item falls into are copied as coded, the others decoded,
    /// merged and coded again, split evenly when they grow past `BLOCK`.
    fn merge(&mut self, items: &[Slot]) {
        let Some(first) = items.first().map(Slot::id) else { return };
        let mut items = items.iter().copied().peekable();
        let from = if self.open.first().is_some_and(|s| s.id() < first) || self.heads.is_empty() {
            self.heads.len()
        } else {
            self.heads.partition_point(|h| h.id() < first).saturating_sub(1)
        };
        let heads = self.heads.split_off(from);
        let starts = self.starts.split_off(from);
        let deltas = self.deltas.split_off(starts.first().copied().unwrap_or(self.deltas.len()));
        let open = std::mem::take(&mut self.open);
        let base = starts.first().copied().unwrap_or(0);
        for (k, head) in heads.iter().enumerate() {
            let start = starts.get(k).map_or(0, |s| s.saturating_sub(base));
            let end = starts.get(k + 1).map_or(deltas.len(), |s| s.saturating_sub(base));
            let bytes = deltas.get(start..end).unwrap_or(&[]);
            self.sealed = self.sealed.saturating_sub(1 + deltas_in(bytes));
            let upper = heads.get(k + 1).or(open.first()).map(Slot::id);
            if items.peek().is_none_or(|s| upper.is_some_and(|upper| s.id() >= upper)) {
                self.heads.push(*head);
                self.starts.push(self.deltas.len());
                self.sealed += 1 + deltas_in(bytes);
                self.deltas.extend_from_slice(bytes);
                continue;
            }
            let mut merged = Vec::with_capacity(2 * BLOCK);
            let mut old = decode(*head, bytes).peekable();
            while let Some(slot) = items.next_if(|s| upper.is_none_or(|upper| s.id() < upper)) {
                merged.extend(std::iter::from_fn(|| old.next_if(|s| s.id() < slot.id())));
                old.next_if(|s| s.id() == slot.id());
                merged.push(slot);
            }
            merged.extend(old);
            let chunks = merged.len().div_ceil(BLOCK);
            for c in 0..chunks {
                self.seal(
                    merged.get(c * merged.len() / chunks..(c + 1) * merged.len() / chunks).unwrap_or(&[]),
                );
            }
        }
        let mut old = open.into_iter().peekable();
        for slot in items {
            while let Some(kept) = old.next_if(|s| s.id() < slot.id()) {
                self.push(kept);
            }
            old.next_if(|s| s.id() == slot.id());
            self.push(slot);
        }
        for kept in old {
            self.push(kept);
        }
    }
}

/// A compact, persistent, ordered `Id → u64` map (see the module docs).
#[derive(Clone, Default)]
pub struct SeqIndex {
    /// Sorted by id, no id twice, none of them in `recent`.
    run: Arc<Run>,
    recent: imbl::OrdMap<Id, u64>,
    /// The seq of every item whose seq is [`WIDE`] or more (in the run or in `recent`):
    /// empty below four billion entries.
    wide: imbl::OrdMap<Id, u64>,
}

impl SeqIndex {
    pub fn new() -> SeqIndex {
        SeqIndex::default()
    }

    pub fn len(&self) -> usize {
        self.run.len() + self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, id: &Id) -> Option<u64> {
        if let Some(seq) = self.recent.get(id) {
            return Some(*seq);
        }
        self.in_run(*id).map(|s| self.seq_of(&s))
    }

    /// The run's item for `id` (none without a search when `id` is above the run).
    fn in_run(&self, id: Id) -> Option<Slot> {
        if self.run.last().is_none_or(|s| s.id() < id) {
            return None;
        }
        self.run.find(id)
    }

    fn seq_of(&self, slot: &Slot) -> u64 {
        match slot.seq {
            WIDE => self.wide.get(&slot.id()).copied().unwrap_or(u64::from(WIDE)),
            seq => u64::from(seq),
        }
    }

    pub fn contains_key(&self, id: &Id) -> bool {
        self.get(id).is_some()
    }

    /// Sets `id`'s seq; returns the previous one.
    pub fn insert(&mut self, id: Id, seq: u64) -> Option<u64> {
        let was_wide = if seq >= u64::from(WIDE) { self.wide.insert(id, seq) } else { self.wide.remove(&id) };
        if let Some(slot) = self.in_run(id) {
            // Copies the run only if a snapshot shares it.
            Arc::make_mut(&mut self.run).merge(&[Slot::new(id, seq)]);
            return Some(if slot.seq == WIDE {
                was_wide.unwrap_or(u64::from(WIDE))
            } else {
                u64::from(slot.seq)
            });
        }
        let previous = self.recent.insert(id, seq);
        if self.recent.len() >= MIN_RECENT.max(self.run.len() / RECENT_SHARE) {
            let recent: Vec<Slot> =
                std::mem::take(&mut self.recent).iter().map(|(id, seq)| Slot::new(*id, *seq)).collect();
            Arc::make_mut(&mut self.run).merge(&recent);
        }
        previous
    }

    /// Every item in id order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, u64)> + '_ {
        let mut run = self.run.iter().map(|s| (s.id(), self.seq_of(&s))).peekable();
        let mut recent = self.recent.iter().map(|(id, seq)| (*id, *seq)).peekable();
        std::iter::from_fn(move || match (run.peek(), recent.peek()) {
            (Some(a), Some(b)) if a.0 < b.0 => run.next(),
            (Some(_), Some(_)) | (None, Some(_)) => recent.next(),
            (Some(_), None) => run.next(),
            (None, None) => None,
        })
    }
}

impl PartialEq for SeqIndex {
    fn eq(&self, other: &SeqIndex) -> bool {
        // The same run and equal recent items hold the same items (imbl compares shared
        // nodes by pointer), without walking the run; otherwise compare item by item (the
        // same items can be split differently between the two).
        if Arc::ptr_eq(&self.run, &other.run) && self.recent == other.recent && self.wide == other.wide {
            return true;
        }
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for SeqIndex {}

impl std::fmt::Debug for SeqIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for SeqIndex {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (id, seq) in self.iter() {
            map.serialize_entry(&id, &seq)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use std::collections::BTreeMap;

    use super::*;

    /// A reproducible id sequence: mostly increasing, with runs of older (smaller) and
    /// repeated ids mixed in, so merges both append and interleave.
    fn ids(n: u64) -> Vec<Id> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let base = u128::from(i) << 40;
                match x % 10 {
                    0 => Id(u128::from(x % (i + 1)) << 40), // an older id, maybe a repeat
                    1 => Id(u128::MAX - u128::from(x % 5)), // near the top
                    _ => Id(base | u128::from(x & 0xff)),
                }
            })
            .collect()
    }

    /// Against a `BTreeMap` model, through every merge: the same lookups, the same
    /// previous values on insert, the same order, the same canonical bytes; and a snapshot
    /// taken before later inserts keeps what it saw.
    #[test]
    fn behaves_as_the_map_it_stands_for() {
        let mut index = SeqIndex::new();
        let mut model = BTreeMap::new();
        let mut snapshots = Vec::new();
        for (i, id) in ids(20_000).into_iter().enumerate() {
            // Some seqs do not fit in a slot (past four billion entries), one exactly.
            let i = i as u64;
            let seq = match i % 7 {
                3 => (1 << 32) + i,
                5 if i == 705 => u64::from(u32::MAX),
                _ => i,
            };
            assert_eq!(index.insert(id, seq), model.insert(id, seq), "insert {id}");
            if i.is_multiple_of(4999) {
                snapshots.push((index.clone(), model.clone()));
            }
        }
        assert_eq!(index.len(), model.len());
        assert!(index.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
        for (id, seq) in &model {
            assert_eq!(index.get(id), Some(*seq));
        }
        assert_eq!(index.get(&Id(u128::MAX - 77)), None);
        let model_map: imbl::OrdMap<Id, u64> = model.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(ledger_schema::codec::encode(&index), ledger_schema::codec::encode(&model_map));
        assert!(index.run.len() > index.recent.len(), "most items were merged into the run");
        assert!(index.run.iter().any(|s| s.seq == WIDE), "some merged items keep their seq aside");
        assert_eq!(std::mem::size_of::<Slot>(), 20);
        assert_blocks_in_shape(&index.run);
        for (snapshot, model) in snapshots {
            assert!(snapshot.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
        }
    }

    /// Every sealed block holds `BLOCK / 2 ..= BLOCK` items and the count adds up.
    fn assert_blocks_in_shape(run: &Run) {
        let sizes: Vec<usize> =
            (0..run.heads.len()).map(|k| 1 + deltas_in(run.block(k).unwrap().1)).collect();
        assert!(sizes.iter().all(|n| (BLOCK / 2..=BLOCK).contains(n)), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), run.sealed);
        assert_eq!(run.len(), run.iter().count());
        assert!(run.heads.is_empty() || run.open.len() >= BLOCK);
    }

    /// Submitters minting ids from 64 distant ranges, interleaved: every merge lands in
    /// most blocks, which split; the index still answers as the map does.
    #[test]
    fn interleaved_ranges_split_blocks() {
        let mut index = SeqIndex::new();
        let mut model = BTreeMap::new();
        for i in 0..40_000u64 {
            let id = Id(u128::from(i % 64) << 100 | u128::from(i / 64) << 20 | u128::from(i % 7));
            assert_eq!(index.insert(id, i), model.insert(id, i));
        }
        assert_blocks_in_shape(&index.run);
        assert!(index.run.heads.len() > index.run.sealed / BLOCK, "some blocks were split");
        assert!(index.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
        for (id, seq) in &model {
            assert_eq!(index.get(id), Some(*seq));
            // Ids between and around the held ones (inside blocks, past their last
            // delta, above the run) are absent.
            for near in [id.0 + 8, id.0 | 0xf_ffff, id.0 + (1 << 99)] {
                assert_eq!(index.get(&Id(near)), model.get(&Id(near)).copied(), "{near:x}");
            }
        }
    }

    /// ULID-shaped ids (a millisecond timestamp over 80 random bits), as a worker mints
    /// them: the run holds them in at most 14 bytes an item, and finds every one of them.
    #[test]
    fn ulids_take_about_thirteen_bytes() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut random = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let n = 100_000u64;
        let mut index = SeqIndex::new();
        let mut model = BTreeMap::new();
        for i in 0..n {
            let id = Id((u128::from(0x0193_0000_0000 + i) << 80)
                | (u128::from(random() & 0xffff) << 64)
                | u128::from(random()));
            let seq = 7 + 3 * i + random() % 3;
            assert_eq!(index.insert(id, seq), model.insert(id, seq));
        }
        let run = &index.run;
        assert_eq!(run.len(), run.iter().count());
        let bytes = run.heads.len() * 20 + run.starts.len() * 8 + run.deltas.len() + run.open.len() * 20;
        let per_item = bytes as f64 / run.len() as f64;
        assert!(run.len() > 95_000 && per_item <= 14.0, "{per_item} bytes an item over {} items", run.len());
        for (id, seq) in &model {
            assert_eq!(index.get(id), Some(*seq));
            assert_eq!(index.get(&Id(id.0 + 1)), None);
        }
        assert!(index.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
    }
}
