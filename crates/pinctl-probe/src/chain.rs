//! The two loops that measure: a dependent pointer chase (each load's address is the value
//! the previous load returned, so loads cannot overlap and each costs a full trip to memory
//! when it misses the caches) and a plain read of every word (which the compiler vectorises
//! and the prefetchers stream: bandwidth, not latency). Pure computation on a slice; the
//! caller decides where the slice's pages are and which CPU runs the loop.

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

/// Bytes of a cache line on every CPU pinctl runs on (x86-64, arm64 server parts).
pub const LINE_BYTES: usize = 64;
/// `u64` words per cache line: the chase uses the first word of each line.
pub const LINE_WORDS: usize = LINE_BYTES / size_of::<u64>();

/// Links the first word of every cache line of `words` into one cycle that visits every line
/// once, in an order drawn from `seed`: `words[a] = b` means "after line a, line b" (both as
/// word indexes). A random order defeats the hardware prefetchers, which follow strides; a
/// single cycle means no line is left out and no shorter loop stays in cache. Returns the
/// word where the cycle starts; `None` for a slice shorter than one line.
pub fn link_random_cycle(words: &mut [u64], seed: u64) -> Option<usize> {
    let lines = words.len() / LINE_WORDS;
    if lines == 0 {
        return None;
    }
    // u32 indexes: half the memory of usize ones, and 2^32 lines are 256 GiB of buffer.
    let lines = u32::try_from(lines).unwrap_or(u32::MAX);
    let mut order: Vec<u32> = (0..lines).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    let word = |line: u32| line as usize * LINE_WORDS;
    for pair in order.windows(2) {
        words[word(pair[0])] = word(pair[1]) as u64;
    }
    let (first, last) = (order[0], order[order.len() - 1]);
    words[word(last)] = word(first) as u64;
    Some(word(first))
}

/// Follows `loads` links of a cycle made by [`link_random_cycle`] from word `start`; returns
/// the word it stopped at, which the caller must use (pass to `black_box`) so the loads
/// cannot be dropped. Not inlined: its loop is what is timed.
#[inline(never)]
pub fn chase(words: &[u64], start: usize, loads: u64) -> usize {
    let mut at = start;
    for _ in 0..loads {
        // The bounds check compares with a constant length and is predicted; it adds no
        // latency to the chain of loads.
        at = words[at] as usize;
    }
    at
}

/// Reads every word of `words` `reps` times and returns their wrapping sum, which the caller
/// must use. `black_box` hides that each repetition reads the same memory, so the compiler
/// cannot compute the sum once.
#[inline(never)]
pub fn read_all(words: &[u64], reps: u32) -> u64 {
    let mut total = 0u64;
    for _ in 0..reps {
        let words = std::hint::black_box(words);
        total = total.wrapping_add(words.iter().fold(0u64, |acc, &w| acc.wrapping_add(w)));
    }
    total
}

/// Writes the first word of every 4 KiB page in order, so the kernel faults the pages in one
/// after the other (where the range's policy says) before the chase's random writes.
pub fn touch_pages(words: &mut [u64]) {
    for w in words.iter_mut().step_by(4096 / size_of::<u64>()) {
        *w = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_visits_every_line_once_and_comes_back() {
        let lines = 1000;
        let mut words = vec![u64::MAX; lines * LINE_WORDS + 3];
        let start = link_random_cycle(&mut words, 7).unwrap();
        let mut seen = vec![false; lines];
        let mut at = start;
        for _ in 0..lines {
            assert_eq!(at % LINE_WORDS, 0);
            assert!(!seen[at / LINE_WORDS], "line {} visited twice", at / LINE_WORDS);
            seen[at / LINE_WORDS] = true;
            at = words[at] as usize;
        }
        assert_eq!(at, start, "back at the start after every line");
        assert!(seen.iter().all(|&s| s));
        assert_eq!(chase(&words, start, lines as u64), start);
        assert_eq!(chase(&words, start, 1), words[start] as usize);
        // Not a stride: consecutive lines are rarely neighbours.
        let neighbours =
            (0..lines).filter(|&l| words[l * LINE_WORDS] as usize == (l + 1) * LINE_WORDS).count();
        assert!(neighbours < lines / 20, "{neighbours} of {lines} links go to the next line");
        // The same seed gives the same order.
        let mut again = vec![0u64; lines * LINE_WORDS];
        assert_eq!(link_random_cycle(&mut again, 7), Some(start));
        assert_eq!(link_random_cycle(&mut [0u64; 7], 7), None);
    }

    #[test]
    fn reading_sums_every_word_each_time() {
        let words: Vec<u64> = (1..=100).collect();
        assert_eq!(read_all(&words, 1), 5050);
        assert_eq!(read_all(&words, 3), 3 * 5050);
        assert_eq!(read_all(&[u64::MAX, 2], 1), 1, "wraps");
        let mut pages = vec![7u64; 3 * 512 + 1];
        touch_pages(&mut pages);
        assert_eq!((pages[0], pages[512], pages[1024], pages[1]), (0, 0, 0, 7));
    }
}
