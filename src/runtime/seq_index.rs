//! `SeqIndex`: the id → seq index that grows with the ledger (one item per Worker event),
//! kept compact.
//!
//! A persistent `OrdMap` costs about 64 bytes per item under increasing ids (its nodes end
//! half full), which at a million Worker events is most of a replay's memory. Here the
//! items live in one sorted run of 20-byte slots (the id's two halves and a 32-bit seq; a
//! seq that does not fit, past four billion entries, is kept in a side map), shared (`Arc`)
//! so that a snapshot of the state stays an O(1) clone, plus a small persistent map of the
//! latest inserts, merged into the run once it holds a 64th as many items. Ids mostly
//! grow (ULIDs), so a merge usually appends to a run no snapshot shares, in place.
//!
//! It reads, iterates and encodes exactly as the map it stands for: a lookup is one map
//! probe and one binary search; iteration and the canonical encoding (a CBOR map) are in id
//! order, so the state digest does not depend on the representation.

use std::sync::Arc;

use ledger_schema::Id;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// Items below which the latest inserts are never merged (a small index stays a map).
const MIN_RECENT: usize = 1024;

/// The latest inserts are merged once they are this share of the run (`1/RECENT_SHARE`):
/// the map costs ~64 bytes an item, the run 20.
const RECENT_SHARE: usize = 64;

/// One id → seq item of the run: 20 bytes, packed to 4-byte alignment (an `(Id, u64)`
/// tuple would be 32, `u128` being 16-aligned). Fields are only ever copied out.
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
}

/// A compact, persistent, ordered `Id → u64` map (see the module docs).
#[derive(Clone, Default)]
pub struct SeqIndex {
    /// Sorted by id, no id twice, none of them in `recent`.
    run: Arc<Vec<Slot>>,
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
        let at = self.run.binary_search_by(|s| s.id().cmp(id)).ok()?;
        self.run.get(at).map(|s| self.seq_of(s))
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
        if let Ok(at) = self.run.binary_search_by(|s| s.id().cmp(&id)) {
            let run = Arc::make_mut(&mut self.run);
            let slot = run.get_mut(at)?;
            let previous = slot.seq;
            *slot = Slot::new(id, seq);
            return Some(if previous == WIDE {
                was_wide.unwrap_or(u64::from(WIDE))
            } else {
                u64::from(previous)
            });
        }
        let previous = self.recent.insert(id, seq);
        if self.recent.len() >= MIN_RECENT.max(self.run.len() / RECENT_SHARE) {
            self.merge();
        }
        previous
    }

    /// Moves the latest inserts into the run: only the run's tail from the smallest of them
    /// on is rewritten, so with growing ids (the common case) a merge appends in place.
    fn merge(&mut self) {
        let recent = std::mem::take(&mut self.recent);
        let Some((first, _)) = recent.get_min() else { return };
        // Copies the run only if a snapshot shares it.
        let run = Arc::make_mut(&mut self.run);
        let from = run.partition_point(|s| s.id() < *first);
        let tail = run.split_off(from);
        run.reserve(tail.len() + recent.len());
        let mut old = tail.into_iter().peekable();
        for (id, seq) in recent.iter() {
            while let Some(slot) = old.next_if(|s| s.id() < *id) {
                run.push(slot);
            }
            run.push(Slot::new(*id, *seq));
        }
        run.extend(old);
    }

    /// Every item in id order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, u64)> + '_ {
        let mut run = self.run.iter().map(|s| (s.id(), self.seq_of(s))).peekable();
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
        for (snapshot, model) in snapshots {
            assert!(snapshot.iter().eq(model.iter().map(|(k, v)| (*k, *v))));
        }
    }
}
