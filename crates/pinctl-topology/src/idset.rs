//! Sets of small integer ids (CPUs, NUMA nodes) in the kernel's two text forms.
//!
//! A set knows what its ids number ([`CpuSet`] or [`NodeSet`], the same bitmap with a
//! different marker), so the compiler refuses a node list where CPUs are meant; code that is
//! the same for both (parsers, masks, rendering) is generic over [`IdKind`].
//!
//! Written by hand rather than taken from a bitset crate because the value of this type is
//! its exact agreement with the kernel's `bitmap_parselist`/`bitmap_print_to_pagebuf`
//! formats (`0-3,8-11`, `0-15:2/4`, `ffffffff,00000001`) and none of the general bitset crates
//! speak them. Masks grow on demand: no 1024-CPU or 64-node ceiling.

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Highest CPU id pinctl accepts from any input. Linux's `NR_CPUS` is at most 8192 (x86
/// `MAXSMP`; arm64 and powerpc stop at 4096 and 8192), so 65535 leaves 8x headroom for kernels
/// to come while a set of every possible CPU stays an 8 KiB bitmap.
pub const MAX_CPU_ID: u32 = 65_535;

/// Highest NUMA node id pinctl accepts from any input. Linux's `NODES_SHIFT` is at most 10
/// (1024 nodes, x86 `MAXSMP` and arm64), so 4095 leaves 4x headroom while the planner's
/// node-by-node tables stay bounded (4096 x 4096).
pub const MAX_NODE_ID: u32 = 4_095;

/// Largest id accepted from text (a list may hold CPUs or nodes, so the larger ceiling):
/// a typo such as `0-4294967295` is refused before anything is allocated.
pub const MAX_ID: u32 = MAX_CPU_ID;

/// Why a CPU or node list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseIdSetError {
    /// An element is not a number, a range or a strided range.
    #[error("invalid list element `{0}`: expected N, N-M or N-M:used/group")]
    BadElement(String),
    /// A range runs backwards.
    #[error("invalid range `{0}`: start is greater than end")]
    Backwards(String),
    /// An id is beyond [`MAX_ID`].
    #[error("id `{0}` is too large (at most {MAX_ID})")]
    TooLarge(String),
    /// A node id is beyond [`MAX_NODE_ID`].
    #[error("node id `{0}` is too large (at most {MAX_NODE_ID}: Linux has at most 1024 nodes)")]
    NodeTooLarge(u32),
    /// A hexadecimal mask word is malformed.
    #[error("invalid mask word `{0}`: expected up to 8 hexadecimal digits")]
    BadMaskWord(String),
}

/// What the ids of a set number. Implemented by [`CpuKind`] and [`NodeKind`] only.
pub trait IdKind:
    Copy + Default + fmt::Debug + PartialEq + Eq + Hash + PartialOrd + Ord + 'static
{
    /// What one id is called in messages (`CPU`, `node`).
    const NAME: &'static str;
}

/// Marker of [`CpuSet`]: logical CPUs as the kernel numbers them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuKind;

/// Marker of [`NodeSet`]: NUMA nodes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeKind;

impl IdKind for CpuKind {
    const NAME: &'static str = "CPU";
}

impl IdKind for NodeKind {
    const NAME: &'static str = "node";
}

/// A set of ids stored as a growable bitmap of 64-bit words. The kind is part of the type, so
/// node ids cannot reach a parameter that means CPUs:
///
/// ```compile_fail
/// use pinctl_topology::{CpuSet, NodeSet};
/// fn run_on(_cpus: &CpuSet) {}
/// let nodes: NodeSet = "0-1".parse().unwrap();
/// run_on(&nodes); // error: expected `IdSet<CpuKind>`, found `IdSet<NodeKind>`
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdSet<K: IdKind> {
    // Invariant: no trailing zero words, so equal sets compare equal.
    words: Vec<u64>,
    kind: PhantomData<K>,
}

/// A set of CPU ids (logical CPUs as the kernel numbers them).
pub type CpuSet = IdSet<CpuKind>;
/// A set of NUMA node ids.
pub type NodeSet = IdSet<NodeKind>;

impl<K: IdKind> IdSet<K> {
    /// The empty set.
    pub const fn new() -> Self {
        IdSet { words: Vec::new(), kind: PhantomData }
    }

    /// The set `0..n`.
    pub fn first_n(n: u32) -> Self {
        (0..n).collect()
    }

    /// Adds `id`; returns whether it was absent.
    pub fn insert(&mut self, id: u32) -> bool {
        let (w, b) = ((id / 64) as usize, id % 64);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] |= 1 << b;
        !was
    }

    /// Adds every id of `lo..=hi`, a word at a time (a list repeating `0-65535` a million
    /// times costs a million word loops, not 65 billion inserts).
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        if lo > hi {
            return;
        }
        let (first, last) = ((lo / 64) as usize, (hi / 64) as usize);
        if self.words.len() <= last {
            self.words.resize(last + 1, 0);
        }
        for w in first..=last {
            let from = if w == first { lo % 64 } else { 0 };
            let to = if w == last { hi % 64 } else { 63 };
            let mask = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.words[w] |= mask;
        }
    }

    /// Removes `id`; returns whether it was present.
    pub fn remove(&mut self, id: u32) -> bool {
        let (w, b) = ((id / 64) as usize, id % 64);
        let Some(word) = self.words.get_mut(w) else { return false };
        let was = *word & (1 << b) != 0;
        *word &= !(1 << b);
        self.trim();
        was
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        let (w, b) = ((id / 64) as usize, id % 64);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// Largest id, if any.
    pub fn last(&self) -> Option<u32> {
        let w = self.words.len().checked_sub(1)?;
        Some(w as u32 * 64 + 63 - self.words[w].leading_zeros())
    }

    /// Ids in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            (0..64u32).filter(move |b| word & (1 << b) != 0).map(move |b| w as u32 * 64 + b)
        })
    }

    /// Ids in `self` or `other`.
    pub fn union(&self, other: &IdSet<K>) -> IdSet<K> {
        let n = self.words.len().max(other.words.len());
        let words = (0..n).map(|i| self.word(i) | other.word(i)).collect();
        IdSet::from_words(words)
    }

    /// Ids in both `self` and `other`.
    pub fn intersection(&self, other: &IdSet<K>) -> IdSet<K> {
        let words = self.words.iter().zip(&other.words).map(|(a, b)| a & b).collect();
        IdSet::from_words(words)
    }

    /// Ids in `self` but not in `other`.
    pub fn difference(&self, other: &IdSet<K>) -> IdSet<K> {
        let words = self.words.iter().enumerate().map(|(i, a)| a & !other.word(i)).collect();
        IdSet::from_words(words)
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &IdSet<K>) -> bool {
        self.words.iter().enumerate().all(|(i, a)| a & !other.word(i) == 0)
    }

    /// Whether `self` and `other` share no id.
    pub fn is_disjoint(&self, other: &IdSet<K>) -> bool {
        self.words.iter().zip(&other.words).all(|(a, b)| a & b == 0)
    }

    /// The bitmap as 64-bit words, least significant first (bit `i` of word `w` is id `64w+i`).
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// Builds a set from 64-bit words, least significant first.
    pub fn from_words(mut words: Vec<u64>) -> IdSet<K> {
        while words.last() == Some(&0) {
            words.pop();
        }
        IdSet { words, kind: PhantomData }
    }

    fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    /// Parses the kernel's list format: `0-3,8-11`, `5`, `0-15:2/4` (first 2 of every 4),
    /// empty string or a lone newline for the empty set. Whitespace around the list is ignored.
    pub fn parse_list(s: &str) -> Result<IdSet<K>, ParseIdSetError> {
        let mut set = IdSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Ok(set);
        }
        for elem in s.split(',') {
            let elem = elem.trim();
            let (range, stride) = match elem.split_once(':') {
                Some((r, st)) => (r, Some(st)),
                None => (elem, None),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_id(a, elem)?, parse_id(b, elem)?),
                None => {
                    let v = parse_id(range, elem)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(ParseIdSetError::Backwards(crate::text::shown(elem)));
            }
            let (used, group) = match stride {
                None => (1, 1),
                Some(st) => {
                    let (u, g) = st
                        .split_once('/')
                        .ok_or_else(|| ParseIdSetError::BadElement(crate::text::shown(elem)))?;
                    let u = parse_id(u, elem)?;
                    let g = parse_id(g, elem)?;
                    if u == 0 || g == 0 || u > g {
                        return Err(ParseIdSetError::BadElement(crate::text::shown(elem)));
                    }
                    (u, g)
                }
            };
            if used == group {
                set.insert_range(lo, hi);
                continue;
            }
            let mut id = lo;
            while id <= hi {
                if (id - lo) % group < used {
                    set.insert(id);
                }
                id += 1;
            }
        }
        Ok(set)
    }

    /// Parses the kernel's mask format (`cpumap`, `Cpus_allowed`): comma-separated 32-bit
    /// hexadecimal words, most significant first, e.g. `00000000,0000ffff`.
    pub fn parse_mask(s: &str) -> Result<IdSet<K>, ParseIdSetError> {
        let s = s.trim();
        let mut set = IdSet::new();
        if s.is_empty() {
            return Ok(set);
        }
        let words: Vec<&str> = s.split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            let word = word.trim();
            let bad = || ParseIdSetError::BadMaskWord(crate::text::shown(word));
            if word.is_empty() || word.len() > 8 {
                return Err(bad());
            }
            let v = u32::from_str_radix(word, 16).map_err(|_| bad())?;
            for b in 0..32 {
                if v & (1 << b) != 0 {
                    let id = i as u64 * 32 + b;
                    if id > u64::from(MAX_ID) {
                        return Err(ParseIdSetError::TooLarge(id.to_string()));
                    }
                    set.insert(id as u32);
                }
            }
        }
        Ok(set)
    }

    /// The kernel's mask format: 32-bit hex words, most significant first, at least one word.
    pub fn to_mask_string(&self) -> String {
        let nwords32 = (self.last().map_or(0, |l| l / 32) + 1) as usize;
        (0..nwords32)
            .rev()
            .map(|i| {
                let w = self.word(i / 2);
                format!("{:08x}", (w >> ((i % 2) * 32)) as u32)
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Maximal runs of consecutive ids as inclusive `(first, last)` pairs.
    pub fn ranges(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for id in self.iter() {
            match out.last_mut() {
                Some((_, hi)) if *hi + 1 == id => *hi = id,
                _ => out.push((id, id)),
            }
        }
        out
    }
}

impl IdSet<NodeKind> {
    /// Parses a node list: [`IdSet::parse_list`] with ids up to [`MAX_NODE_ID`].
    pub fn parse_node_list(s: &str) -> Result<NodeSet, ParseIdSetError> {
        let set = NodeSet::parse_list(s)?;
        set.check_node_ids()?;
        Ok(set)
    }

    /// Refuses a set holding an id beyond [`MAX_NODE_ID`] (for node sets read from input).
    pub fn check_node_ids(&self) -> Result<(), ParseIdSetError> {
        match self.last() {
            Some(id) if id > MAX_NODE_ID => Err(ParseIdSetError::NodeTooLarge(id)),
            _ => Ok(()),
        }
    }
}

fn parse_id(s: &str, elem: &str) -> Result<u32, ParseIdSetError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseIdSetError::BadElement(crate::text::shown(elem)));
    }
    match s.parse::<u32>() {
        Ok(v) if v <= MAX_ID => Ok(v),
        _ => Err(ParseIdSetError::TooLarge(crate::text::shown(s))),
    }
}

/// Kernel list format, ascending, ranges merged: `0-7,16-23`; empty set prints as nothing.
impl<K: IdKind> fmt::Display for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.ranges().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi { write!(f, "{lo}")? } else { write!(f, "{lo}-{hi}")? }
        }
        Ok(())
    }
}

impl<K: IdKind> fmt::Debug for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{self}}}")
    }
}

impl<K: IdKind> FromStr for IdSet<K> {
    type Err = ParseIdSetError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IdSet::parse_list(s)
    }
}

impl<K: IdKind> FromIterator<u32> for IdSet<K> {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        let mut set = IdSet::new();
        for id in iter {
            set.insert(id);
        }
        set
    }
}

impl<K: IdKind> Extend<u32> for IdSet<K> {
    fn extend<T: IntoIterator<Item = u32>>(&mut self, iter: T) {
        for id in iter {
            self.insert(id);
        }
    }
}

impl<K: IdKind> Serialize for IdSet<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de, K: IdKind> Deserialize<'de> for IdSet<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IdSet::parse_list(&s).map_err(serde::de::Error::custom)
    }
}

/// In JSON an id set is the kernel's list format (`0-3,8`, `""` for none), as in `cpulist`.
#[cfg(feature = "schema")]
impl<K: IdKind> schemars::JsonSchema for IdSet<K> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IdList".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "Ids in the kernel's list format (`0-3,8`); empty for none.",
            "pattern": "^([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_lists() {
        assert_eq!(CpuSet::parse_list("0-3,8-11\n").unwrap().to_string(), "0-3,8-11");
        assert_eq!(CpuSet::parse_list("").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::parse_list("\n").unwrap(), CpuSet::new());
        assert_eq!(CpuSet::parse_list("5,3,4").unwrap().to_string(), "3-5");
        assert_eq!(CpuSet::parse_list("0-15:2/4").unwrap().to_string(), "0-1,4-5,8-9,12-13");
        assert_eq!(CpuSet::parse_list("1023").unwrap().last(), Some(1023));
        assert_eq!(CpuSet::parse_list("3-130,60-64").unwrap().to_string(), "3-130");
        assert_eq!(CpuSet::parse_list("63-64").unwrap().to_string(), "63-64");
        assert_eq!(CpuSet::parse_list("0-63").unwrap().as_words(), &[u64::MAX]);
    }

    #[test]
    fn rejects_bad_lists() {
        assert!(matches!(CpuSet::parse_list("3-1"), Err(ParseIdSetError::Backwards(_))));
        assert!(matches!(CpuSet::parse_list("a"), Err(ParseIdSetError::BadElement(_))));
        assert!(matches!(CpuSet::parse_list("1,,2"), Err(ParseIdSetError::BadElement(_))));
        assert!(matches!(CpuSet::parse_list("-1"), Err(ParseIdSetError::BadElement(_))));
        assert!(matches!(CpuSet::parse_list("0-99999999"), Err(ParseIdSetError::TooLarge(_))));
        assert!(matches!(CpuSet::parse_list("65536"), Err(ParseIdSetError::TooLarge(_))));
        assert_eq!(CpuSet::parse_list("65535").unwrap().last(), Some(MAX_CPU_ID));
        assert!(matches!(
            NodeSet::parse_node_list("0-4096"),
            Err(ParseIdSetError::NodeTooLarge(4096))
        ));
        assert_eq!(NodeSet::parse_node_list("4095").unwrap().last(), Some(MAX_NODE_ID));
        assert!(matches!(CpuSet::parse_list("0-7:3/2"), Err(ParseIdSetError::BadElement(_))));
    }

    #[test]
    fn parses_kernel_masks() {
        assert_eq!(CpuSet::parse_mask("0000ffff\n").unwrap().to_string(), "0-15");
        assert_eq!(CpuSet::parse_mask("00000001,00000000").unwrap().to_string(), "32");
        assert_eq!(CpuSet::parse_mask("ffffffff,ffffffff,ffffffff").unwrap().len(), 96);
        assert_eq!(CpuSet::parse_list("0-15").unwrap().to_mask_string(), "0000ffff");
        assert_eq!(CpuSet::parse_list("32").unwrap().to_mask_string(), "00000001,00000000");
        assert_eq!(CpuSet::new().to_mask_string(), "00000000");
        assert!(CpuSet::parse_mask("xyz").is_err());
    }

    #[test]
    fn set_algebra() {
        let a: CpuSet = "0-7".parse().unwrap();
        let b: CpuSet = "4-11".parse().unwrap();
        assert_eq!(a.union(&b).to_string(), "0-11");
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert!(a.intersection(&b).is_subset(&a));
        assert!(!a.is_disjoint(&b));
        let mut c = CpuSet::parse_list("200").unwrap();
        assert!(c.remove(200));
        assert_eq!(c, CpuSet::new(), "trailing words are trimmed so sets compare equal");
    }

    proptest! {
        #[test]
        fn list_round_trips(ids in proptest::collection::btree_set(0u32..2048, 0..200)) {
            let set: CpuSet = ids.iter().copied().collect();
            let text = set.to_string();
            let back = CpuSet::parse_list(&text).unwrap();
            prop_assert_eq!(&back, &set);
            prop_assert_eq!(back.iter().collect::<Vec<_>>(), ids.into_iter().collect::<Vec<_>>());
            prop_assert_eq!(CpuSet::parse_mask(&set.to_mask_string()).unwrap(), set);
        }

        #[test]
        fn any_list_text_parses_to_canonical_form(text in "[0-9]{1,3}(-[0-9]{1,3})?(,[0-9]{1,3}(-[0-9]{1,3})?){0,6}") {
            if let Ok(set) = CpuSet::parse_list(&text) {
                let canon = set.to_string();
                prop_assert_eq!(CpuSet::parse_list(&canon).unwrap(), set);
            }
        }
    }
}
