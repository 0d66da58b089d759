//! Kernel bitmaps of CPUs and nodes, sized at run time.

use std::ffi::{c_ulong, c_ulong as Word};

use pinctl_topology::{IdKind, IdSet};

const WORD_BITS: usize = Word::BITS as usize;

/// The `maxnode` argument for a node mask of `bits` bits.
///
/// `set_mempolicy`, `mbind`, `get_mempolicy` and `migrate_pages` take a bit count, but the
/// kernel's `get_nodes` reads only `maxnode - 1` bits (it decrements before use). Passing the
/// plain bit count therefore silently drops the highest node; systemd passes bits + 1, and so
/// does every call in this crate, through this one function.
pub const fn maxnode_for_bits(bits: usize) -> c_ulong {
    bits as c_ulong + 1
}

/// A CPU or node bitmap in the kernel's layout: `unsigned long` words, least significant
/// first. Its capacity is fixed at construction so it can be filled by the kernel (or compared)
/// without allocating.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Mask {
    words: Vec<Word>,
}

impl Mask {
    /// An empty mask able to hold ids `0..bits` (rounded up to whole words, at least one).
    pub fn with_bits(bits: usize) -> Mask {
        Mask { words: vec![0; bits.div_ceil(WORD_BITS).max(1)] }
    }

    /// A mask holding `set`, with room for at least `min_bits` ids.
    pub fn from_set<K: IdKind>(set: &IdSet<K>, min_bits: usize) -> Mask {
        let need = set.last().map_or(0, |l| l as usize + 1);
        let mut m = Mask::with_bits(need.max(min_bits));
        for id in set.iter() {
            m.set(id as usize);
        }
        m
    }

    /// The ids set in the mask.
    pub fn to_set<K: IdKind>(&self) -> IdSet<K> {
        self.iter().map(|i| i as u32).collect()
    }

    /// How many ids the mask can hold.
    pub fn bits(&self) -> usize {
        self.words.len() * WORD_BITS
    }

    /// Size in bytes, what `sched_*affinity` take.
    pub fn byte_len(&self) -> usize {
        std::mem::size_of_val(self.words.as_slice())
    }

    /// The `maxnode` argument describing this mask (see [`maxnode_for_bits`]).
    pub fn maxnode(&self) -> c_ulong {
        maxnode_for_bits(self.bits())
    }

    /// Sets bit `id`. Panics when `id` is beyond the capacity: masks are sized by their
    /// builders, and a silent truncation would pin to the wrong place.
    pub fn set(&mut self, id: usize) {
        assert!(id < self.bits(), "id {id} beyond a {}-bit mask", self.bits());
        self.words[id / WORD_BITS] |= 1 << (id % WORD_BITS);
    }

    /// Whether bit `id` is set (false beyond the capacity).
    pub fn is_set(&self, id: usize) -> bool {
        self.words.get(id / WORD_BITS).is_some_and(|w| w & (1 << (id % WORD_BITS)) != 0)
    }

    /// Clears every bit, keeping the capacity.
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// Whether no bit is set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Number of bits set.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The set ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            (0..WORD_BITS).filter(move |b| w & (1 << b) != 0).map(move |b| wi * WORD_BITS + b)
        })
    }

    /// Same ids set, whatever the two capacities (no allocation: usable after `fork`).
    pub fn same_ids(&self, other: &Mask) -> bool {
        let n = self.words.len().max(other.words.len());
        (0..n).all(|i| {
            self.words.get(i).copied().unwrap_or(0) == other.words.get(i).copied().unwrap_or(0)
        })
    }

    /// Whether every id of `self` is in `other` (no allocation).
    pub fn is_subset_of(&self, other: &Mask) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, &w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Copies the ids of `other` into `self` without reallocating; false (and `self`
    /// unchanged) when `other` has ids beyond `self`'s capacity.
    pub fn copy_from(&mut self, other: &Mask) -> bool {
        if other.words.iter().skip(self.words.len()).any(|&w| w != 0) {
            return false;
        }
        for (i, w) in self.words.iter_mut().enumerate() {
            *w = other.words.get(i).copied().unwrap_or(0);
        }
        true
    }

    /// The words, for the syscall wrappers.
    pub fn as_ptr(&self) -> *const Word {
        self.words.as_ptr()
    }

    /// The words, for the kernel to fill.
    pub fn as_mut_ptr(&mut self) -> *mut Word {
        self.words.as_mut_ptr()
    }
}

impl std::fmt::Debug for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mask({}/{} bits)", self.to_set::<pinctl_topology::CpuKind>(), self.bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxnode_is_one_more_than_the_bit_count() {
        // The kernel reads maxnode - 1 bits: a 64-bit mask must be passed as 65 so that
        // node 63 is seen, and a 1024-bit mask as 1025 so node 1023 is.
        assert_eq!(maxnode_for_bits(64), 65);
        assert_eq!(maxnode_for_bits(1024), 1025);
        let mut m = Mask::with_bits(1024);
        m.set(1023);
        assert_eq!(m.maxnode(), 1025);
        assert_eq!(m.bits(), 1024);
    }

    #[test]
    fn masks_round_trip_large_sparse_sets() {
        let s: pinctl_topology::CpuSet = "0,63-64,1023,4095".parse().unwrap();
        let m = Mask::from_set(&s, 64);
        assert_eq!(m.bits(), 4096);
        assert_eq!(m.byte_len(), 512);
        assert_eq!(m.to_set(), s);
        assert_eq!(m.count(), 5);
        assert!(m.is_set(4095) && !m.is_set(4096) && !m.is_set(1 << 30));
    }

    #[test]
    fn comparisons_ignore_capacity() {
        let a = Mask::from_set(&"1,2".parse::<pinctl_topology::CpuSet>().unwrap(), 64);
        let b = Mask::from_set(&"1,2".parse::<pinctl_topology::CpuSet>().unwrap(), 2048);
        assert!(a.same_ids(&b) && b.same_ids(&a));
        assert!(
            a.is_subset_of(&Mask::from_set(&"0-3".parse::<pinctl_topology::CpuSet>().unwrap(), 8))
        );
        assert!(
            !Mask::from_set(&"100".parse::<pinctl_topology::CpuSet>().unwrap(), 8).is_subset_of(&a)
        );
        let mut small = Mask::with_bits(64);
        assert!(
            !small
                .copy_from(&Mask::from_set(&"100".parse::<pinctl_topology::CpuSet>().unwrap(), 8))
        );
        assert!(small.copy_from(&b));
        assert!(small.same_ids(&a));
    }
}
