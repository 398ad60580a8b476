//! A bounded per-thread memo of digests, keyed by the kind and the **whole** input bytes,
//! for inputs that are hashed again and again (a compile renders mostly what the previous
//! compile rendered). A lookup compares every byte of the input with the key it found, so
//! the memo's answer is always the digest of exactly these bytes: it never changes a
//! result, it only skips recomputing one. Nothing here reads a clock, randomness or the
//! environment, and no map order reaches any output (the maps are only looked up, inserted
//! into and cleared; never iterated).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::{Digest, DigestKind};

/// Inputs longer than this are hashed directly, never kept.
pub(super) const MAX_INPUT: usize = 64 * 1024;
/// What a thread keeps at most (input bytes, and entries); past either bound the memo is
/// emptied and refills with what is hashed next.
const MAX_KEPT_BYTES: usize = 4 * 1024 * 1024;
const MAX_KEPT_ENTRIES: usize = 4096;

/// Hashes every byte of a key, a word at a time (FxHash's multiply-rotate, then a
/// murmur3 finaliser so the low bits hashbrown indexes by are mixed): about a tenth of
/// what BLAKE3 costs per byte. Inputs that differ in one byte anywhere hash apart (an
/// earlier version sampled the first, middle and last 16 bytes, and every Attempt's
/// identity item — which differ only in the Attempt id — fell into one bucket).
#[derive(Default)]
struct WordHash(u64);

impl WordHash {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for WordHash {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in words.by_ref() {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.mix(u64::from_le_bytes(w));
        }
        let mut last = [0u8; 8];
        last.iter_mut().zip(words.remainder()).for_each(|(l, b)| *l = *b);
        self.mix(u64::from_le_bytes(last) ^ ((bytes.len() as u64) << 56));
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

type Kept = HashMap<Box<[u8]>, Digest, BuildHasherDefault<WordHash>>;

#[derive(Default)]
struct Memo {
    /// One map per kind, indexed by the kind's position in [`DigestKind::ALL`].
    by_kind: Vec<Kept>,
    kept_bytes: usize,
    kept_entries: usize,
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// `Digest::of(kind, bytes)`, from this thread's memo when it holds `bytes`.
pub(super) fn of(kind: DigestKind, bytes: &[u8]) -> Digest {
    let remembered = MEMO.try_with(|cell| {
        let mut memo = cell.try_borrow_mut().ok()?;
        if memo.by_kind.is_empty() {
            memo.by_kind.resize_with(DigestKind::ALL.len(), Kept::default);
        }
        if let Some(digest) = memo.by_kind.get(kind as usize)?.get(bytes) {
            return Some(*digest);
        }
        let digest = Digest::of(kind, bytes);
        if memo.kept_bytes + bytes.len() > MAX_KEPT_BYTES || memo.kept_entries >= MAX_KEPT_ENTRIES {
            memo.by_kind.iter_mut().for_each(Kept::clear);
            memo.kept_bytes = 0;
            memo.kept_entries = 0;
        }
        memo.by_kind.get_mut(kind as usize)?.insert(bytes.into(), digest);
        memo.kept_bytes += bytes.len();
        memo.kept_entries += 1;
        Some(digest)
    });
    match remembered {
        Ok(Some(digest)) => digest,
        // Thread-local storage torn down, re-entered, or a kind without a map.
        _ => Digest::of(kind, bytes),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use super::*;

    /// Every answer, first or remembered, equals a fresh `derive_key`: for inputs one byte
    /// apart at several places, across kinds with equal bytes, and across the memo
    /// emptying itself.
    #[test]
    fn answers_equal_fresh_digests() {
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for len in [0usize, 1, 15, 16, 17, 31, 32, 33, 48, 64, 100, 1000, 5000] {
            inputs.push(vec![7u8; len]);
            for at in [0, len / 4, len / 2, len.saturating_sub(1)] {
                let mut v = vec![7u8; len];
                if let Some(b) = v.get_mut(at) {
                    *b = 8;
                }
                inputs.push(v);
            }
        }
        // Past the entry bound, so the memo empties at least once mid-way.
        for i in 0..(MAX_KEPT_ENTRIES + 100) as u32 {
            inputs.push(i.to_be_bytes().repeat(10));
        }
        for round in 0..2 {
            for kind in [DigestKind::Rendered, DigestKind::Source] {
                for input in &inputs {
                    let expected = Digest(blake3::derive_key(kind.context(), input));
                    assert_eq!(
                        of(kind, input),
                        expected,
                        "round {round}, kind {kind:?}, {} bytes",
                        input.len()
                    );
                }
            }
        }
        let kept = MEMO.with(|m| (m.borrow().kept_entries, m.borrow().kept_bytes));
        assert!(kept.0 <= MAX_KEPT_ENTRIES && kept.1 <= MAX_KEPT_BYTES, "kept {kept:?}");
    }

    /// Inputs that differ in one byte anywhere (here: only in the middle of a long run,
    /// as two Attempts' identity items do) hash apart, and are told apart.
    #[test]
    fn one_byte_apart_hashes_apart() {
        let hash = |bytes: &[u8]| {
            let mut h = WordHash::default();
            h.write(bytes);
            h.finish()
        };
        let a = vec![3u8; 200];
        let mut seen = std::collections::BTreeSet::new();
        for at in 0..a.len() {
            let mut b = a.clone();
            b[at] = 4;
            assert!(seen.insert(hash(&b)), "byte {at}");
            assert_eq!(
                of(DigestKind::Rendered, &b),
                Digest(blake3::derive_key(DigestKind::Rendered.context(), &b))
            );
        }
        assert!(seen.insert(hash(&a)));
        // Length is part of the hash: a zero byte appended changes it.
        assert_ne!(hash(&[0u8; 7]), hash(&[0u8; 8]));
    }
}
