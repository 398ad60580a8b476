//! The projection's map: a persistent ordered map (structural sharing) whose values sit
//! behind [`Arc`].
//!
//! A snapshot of the state is an O(1) clone, and the first update after one copies the
//! path to the value it changes. `imbl` copies a whole node on that path — up to 64
//! entries — and a node of plain values is deep-cloned: 64 Attempt states with their
//! vectors and strings, for one Worker event after the engine published a snapshot. With
//! the values behind `Arc` a node copy is 64 reference counts, and only the value changed
//! is cloned ([`Arc::make_mut`]). Reads hand out `&V`, so the rest of the runtime does
//! not see the `Arc`.
//!
//! Iteration, and so the canonical encoding, is in key order, like a `BTreeMap`; equality
//! skips shared nodes and shared values.

use std::borrow::Borrow;
use std::fmt;
use std::ops::RangeBounds;
use std::sync::Arc;

use serde::Serialize;

/// See the module docs.
pub struct Map<K, V>(imbl::OrdMap<K, Arc<V>>);

impl<K: Ord + Clone, V> Map<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Map(imbl::OrdMap::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.get(key).map(|v| &**v)
    }

    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.contains_key(key)
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, &**v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> {
        self.0.keys()
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> {
        self.0.values().map(|v| &**v)
    }

    /// Entries with keys in `range`, in key order.
    pub fn range<R, Q>(&self, range: R) -> impl DoubleEndedIterator<Item = (&K, &V)>
    where
        R: RangeBounds<Q>,
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.range(range).map(|(k, v)| (k, &**v))
    }

    /// The entry with the greatest key.
    pub fn get_max(&self) -> Option<(&K, &V)> {
        self.0.get_max().map(|(k, v)| (k, &**v))
    }
}

impl<K: Ord + Clone, V: Clone> Map<K, V> {
    /// The value for `key`, to change in place: clones it only if a snapshot shares it.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.get_mut(key).map(Arc::make_mut)
    }

    /// Inserts `value` at `key`, returning the value it replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.0.insert(key, Arc::new(value)).map(Arc::unwrap_or_clone)
    }

    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.remove(key).map(Arc::unwrap_or_clone)
    }
}

impl<K, V> Clone for Map<K, V> {
    fn clone(&self) -> Self {
        Map(self.0.clone())
    }
}

impl<K: Ord + Clone, V> Default for Map<K, V> {
    fn default() -> Self {
        Map::new()
    }
}

impl<K: Ord + Clone + PartialEq, V: PartialEq> PartialEq for Map<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K: Ord + Clone + Eq, V: Eq> Eq for Map<K, V> {}

impl<K: Ord + Clone + fmt::Debug, V: fmt::Debug> fmt::Debug for Map<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Ord + Clone + Serialize, V: Serialize> Serialize for Map<K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// `map[&key]`, for tests and tools: panics where the key is absent, as `BTreeMap`'s does.
/// The runtime uses [`Map::get`].
impl<K, V, Q> std::ops::Index<&Q> for Map<K, V>
where
    K: Ord + Clone + Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    #[allow(clippy::indexing_slicing)] // the caller asked for the panic (see above)
    fn index(&self, key: &Q) -> &V {
        &self.0[key]
    }
}

impl<K: Ord + Clone, V> FromIterator<(K, V)> for Map<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        Map(items.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    /// A change after a snapshot leaves the snapshot as it was; the two encode as the
    /// `BTreeMap`s they stand for, in key order.
    #[test]
    fn a_snapshot_is_unchanged_by_later_updates() {
        let mut live: Map<u32, Vec<u8>> = (0..200u32).map(|i| (i, vec![i as u8])).collect();
        let snapshot = live.clone();
        live.get_mut(&7).unwrap().push(9);
        assert_eq!(live.insert(300, vec![1]), None);
        assert_eq!(live.remove(&0), Some(vec![0]));
        assert_eq!(snapshot.get(&7), Some(&vec![7]));
        assert_eq!(live.get(&7), Some(&vec![7, 9]));
        assert!(snapshot != live);
        let model: std::collections::BTreeMap<u32, Vec<u8>> =
            snapshot.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(model.len(), 200);
        assert_eq!(ledger_schema::codec::encode(&snapshot), ledger_schema::codec::encode(&model));
        let model: std::collections::BTreeMap<u32, Vec<u8>> =
            live.iter().map(|(k, v)| (*k, v.clone())).collect();
        assert_eq!(ledger_schema::codec::encode(&live), ledger_schema::codec::encode(&model));
        assert_eq!(live.range(5..8).map(|(k, _)| *k).collect::<Vec<_>>(), vec![5, 6, 7]);
        live.get_mut(&7).unwrap().pop();
        assert!(live.get(&300).is_some() && live.remove(&300).is_some());
        live.insert(0, vec![0]);
        assert!(snapshot == live, "equal again, value by value");
    }
}
