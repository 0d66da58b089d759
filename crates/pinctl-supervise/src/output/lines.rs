//! Lines as pinctl passes them on: whole, and never longer than [`LINE_MAX`].

use std::time::{Duration, Instant};

/// The longest line passed on; longer ones are cut into lines of this size (journald's
/// `LineMax=` default, 48K). The only thing pinctl ever cuts out of an instance's output.
pub const LINE_MAX: usize = 48 * 1024;

/// Splits what a child writes into lines of at most [`LINE_MAX`] bytes: whole lines as they
/// end, and a line that grows past the bound in pieces of the bound (as journald splits them).
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
    /// Lines cut since this was last asked ([`LineSplitter::take_cut`]).
    cut: u64,
}

impl LineSplitter {
    /// Feeds `bytes`; calls `line` with each complete line (without its newline).
    pub fn feed(&mut self, mut bytes: &[u8], mut line: impl FnMut(&[u8])) {
        while let Some(end) = memchr::memchr(b'\n', bytes) {
            if self.pending.is_empty() {
                self.emit(&bytes[..end], &mut line);
            } else {
                self.pending.extend_from_slice(&bytes[..end]);
                let whole = std::mem::take(&mut self.pending);
                self.emit(&whole, &mut line);
            }
            bytes = &bytes[end + 1..];
        }
        self.pending.extend_from_slice(bytes);
        while self.pending.len() >= LINE_MAX {
            let rest = self.pending.split_off(LINE_MAX);
            self.cut += 1;
            line(&self.pending);
            self.pending = rest;
        }
    }

    fn emit(&mut self, whole: &[u8], line: &mut impl FnMut(&[u8])) {
        if whole.len() > LINE_MAX {
            self.cut += 1;
        }
        if whole.is_empty() {
            return line(b"");
        }
        for piece in whole.chunks(LINE_MAX) {
            line(piece);
        }
    }

    /// What is left when the stream ends: the last line, when it had no newline.
    pub fn finish(&mut self, line: impl FnOnce(&[u8])) {
        if !self.pending.is_empty() {
            line(&std::mem::take(&mut self.pending));
        }
    }

    /// The unfinished line held (shorter than [`LINE_MAX`]).
    pub fn into_pending(self) -> Vec<u8> {
        self.pending
    }

    /// Lines cut at [`LINE_MAX`] since the last call.
    pub fn take_cut(&mut self) -> u64 {
        std::mem::take(&mut self.cut)
    }
}

/// Where the whole lines of `buf` end, and whether one of them (or the unfinished rest) is
/// longer than [`LINE_MAX`]: when none is, `buf[..end]` can be written as it is, in one write.
pub fn whole_lines(buf: &[u8]) -> (usize, bool) {
    let mut start = 0;
    let mut too_long = false;
    for nl in memchr::memchr_iter(b'\n', buf) {
        too_long |= nl - start > LINE_MAX;
        start = nl + 1;
    }
    (start, too_long || buf.len() - start >= LINE_MAX)
}

/// A notice about an instance's output, said at most once a second: what happened meanwhile
/// is counted and said with the next one.
#[derive(Debug, Default)]
pub struct Notice {
    last: Option<Instant>,
    unsaid: u64,
    /// At most once in this long ([`NOTICE_EVERY`] when zero).
    every: Duration,
}

/// How often a notice about one instance's output may be said.
pub const NOTICE_EVERY: Duration = Duration::from_secs(1);

impl Notice {
    /// A notice said at most once every `every` (longer than [`NOTICE_EVERY`]: a state that
    /// lasts, such as a full disk, is said when it starts and then now and then).
    pub fn every(every: Duration) -> Notice {
        Notice { every: every.max(NOTICE_EVERY), ..Notice::default() }
    }

    /// `Some(times)`: say it now, it happened `times` times since last said; `None`: counted.
    pub fn due(&mut self, now: Instant, times: u64) -> Option<u64> {
        self.unsaid += times;
        let every = self.every.max(NOTICE_EVERY);
        if self.unsaid == 0 || self.last.is_some_and(|at| now < at + every) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unsaid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> (Vec<usize>, u64) {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |l| out.push(l.len()));
        }
        s.finish(|l| out.push(l.len()));
        (out, s.take_cut())
    }

    #[test]
    fn lines_are_whole_and_never_longer_than_line_max() {
        assert_eq!(split(&[b"ab\ncd", b"e\n\nf"]), (vec![2, 3, 0, 1], 0));
        let long = vec![b'x'; LINE_MAX * 2 + 10];
        assert_eq!(split(&[&long]).0, vec![LINE_MAX, LINE_MAX, 10]);
        let mut with_end = long.clone();
        with_end.push(b'\n');
        let (lines, cut) = split(&[&with_end[..100], &with_end[100..]]);
        assert_eq!(lines, vec![LINE_MAX, LINE_MAX, 10]);
        assert!(cut >= 1);
        // The buffer never holds more than one line's worth.
        let mut s = LineSplitter::default();
        for _ in 0..1000 {
            s.feed(&[b'y'; 4096], |_| {});
            assert!(s.pending.len() < LINE_MAX);
        }
    }

    #[test]
    fn whole_lines_end_at_the_last_newline_and_see_long_ones() {
        assert_eq!(whole_lines(b"ab\ncd\nef"), (6, false));
        assert_eq!(whole_lines(b"no newline"), (0, false));
        let mut long = vec![b'x'; LINE_MAX + 1];
        long.push(b'\n');
        assert_eq!(whole_lines(&long), (LINE_MAX + 2, true));
        assert_eq!(whole_lines(&vec![b'x'; LINE_MAX]), (0, true));
        let mut exact = vec![b'x'; LINE_MAX];
        exact.push(b'\n');
        assert_eq!(whole_lines(&exact), (LINE_MAX + 1, false));
    }

    #[test]
    fn a_notice_is_said_at_most_once_a_second_with_what_it_counted() {
        let t0 = Instant::now();
        let mut n = Notice::default();
        assert_eq!(n.due(t0, 0), None, "nothing happened");
        assert_eq!(n.due(t0, 1), Some(1));
        assert_eq!(n.due(t0 + Duration::from_millis(10), 5), None);
        assert_eq!(n.due(t0 + Duration::from_millis(500), 1), None);
        assert_eq!(n.due(t0 + NOTICE_EVERY, 1), Some(7));
        assert_eq!(n.due(t0 + NOTICE_EVERY * 3, 0), None, "nothing new");
    }
}
