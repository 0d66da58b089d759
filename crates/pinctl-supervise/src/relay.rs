//! pinctl's own output: the instances' lines it relays to its stdout and its log lines on
//! stderr, written by one thread of their own from a bounded queue.
//!
//! Under systemd both streams are pipes to journald; behind a pager, a full disk or a stuck
//! journald they stop being read. A write to such a pipe blocks, and a supervisor that wrote
//! from its event loop would stop restarting instances, answering its socket and even handling
//! SIGTERM. So nothing on the event loop writes: lines go into a queue of at most
//! [`QUEUE_BYTES`], a writer thread empties it, and what does not fit is dropped and counted;
//! once the writer gets through again it says how many lines were lost. Lines are cut at
//! [`LINE_MAX`] bytes (journald's `LineMax=` default), so an instance that writes without
//! newlines cannot grow pinctl either.

use std::collections::VecDeque;
use std::io::{self, Write as _};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The longest line relayed; longer ones are cut into lines of this size (journald's
/// `LineMax=` default, 48K).
pub const LINE_MAX: usize = 48 * 1024;
/// The most bytes waiting for the writer; lines beyond are dropped and counted.
pub const QUEUE_BYTES: usize = 4 << 20;

/// Which of pinctl's streams a line goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The instances' output.
    Stdout,
    /// pinctl's log.
    Stderr,
}

#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<(Stream, Vec<u8>)>,
    bytes: usize,
    /// Lines dropped since the writer last said so.
    dropped: u64,
    /// Every line dropped so far.
    dropped_total: u64,
    /// A line is being written (taken from the queue, not yet out).
    writing: bool,
}

#[derive(Debug, Default)]
struct Relay {
    queue: Mutex<Queue>,
    /// Signalled when a line is queued (for the writer) and when the queue empties (for
    /// [`flush`]).
    changed: Condvar,
}

fn relay() -> &'static Relay {
    static RELAY: OnceLock<Relay> = OnceLock::new();
    static WRITER: OnceLock<()> = OnceLock::new();
    let relay = RELAY.get_or_init(Relay::default);
    WRITER.get_or_init(|| {
        // Without a thread (none can be started) lines stay queued up to the bound and are
        // dropped beyond it: never a blocking write on the caller's thread.
        let _ = std::thread::Builder::new()
            .name("pinctl-output".into())
            .stack_size(64 * 1024)
            .spawn(move || write_forever(relay));
    });
    relay
}

fn write_forever(relay: &'static Relay) {
    loop {
        let (stream, line, dropped) = {
            let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
            while q.lines.is_empty() {
                q.writing = false;
                relay.changed.notify_all();
                q = relay.changed.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            let (stream, line) = q.lines.pop_front().expect("not empty");
            q.bytes -= line.len();
            q.writing = true;
            (stream, line, std::mem::take(&mut q.dropped))
        };
        // A failed write (EPIPE: nobody reads any more) loses the line, as journald's would.
        let _ = write_line(stream, &line);
        if dropped > 0 {
            let note = format!(
                "pinctl: output: {dropped} lines dropped: pinctl's output was not read fast \
                 enough\n"
            );
            let _ = write_line(Stream::Stderr, note.as_bytes());
        }
    }
}

fn write_line(stream: Stream, line: &[u8]) -> io::Result<()> {
    match stream {
        Stream::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(line)?;
            out.flush()
        }
        Stream::Stderr => io::stderr().lock().write_all(line),
    }
}

/// Queues one whole line (ending in `\n`); drops it, counted, when the queue is full.
fn push(stream: Stream, line: Vec<u8>) {
    let relay = relay();
    let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
    if q.bytes + line.len() > QUEUE_BYTES {
        q.dropped += 1;
        q.dropped_total += 1;
        return;
    }
    q.bytes += line.len();
    q.lines.push_back((stream, line));
    relay.changed.notify_all();
}

/// A line of pinctl's log (`pinctl: NAME: MESSAGE`) on stderr, never blocking the caller.
pub fn log_line(text: &str) {
    let mut line = Vec::with_capacity(text.len().min(LINE_MAX) + 1);
    line.extend_from_slice(&text.as_bytes()[..text.len().min(LINE_MAX)]);
    line.push(b'\n');
    push(Stream::Stderr, line);
}

/// An instance's output line on stdout, prefixed with its name (`tikv-0: ...`).
pub fn instance_line(name: &str, bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(LINE_MAX)];
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut line = Vec::with_capacity(name.len() + 2 + bytes.len() + 1);
    line.extend_from_slice(name.as_bytes());
    line.extend_from_slice(b": ");
    line.extend_from_slice(bytes);
    line.push(b'\n');
    push(Stream::Stdout, line);
}

/// Lines dropped so far because the queue was full.
pub fn dropped() -> u64 {
    relay().queue.lock().map(|q| q.dropped_total).unwrap_or(0)
}

/// Waits until every queued line is written, or `timeout` passed (a reader that never reads
/// again must not keep pinctl from exiting). `true` when everything went out.
pub fn flush(timeout: Duration) -> bool {
    let relay = relay();
    let deadline = Instant::now() + timeout;
    let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
    while !q.lines.is_empty() || q.writing {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        q = relay.changed.wait_timeout(q, left).unwrap_or_else(|e| e.into_inner()).0;
    }
    true
}

/// Splits what a child writes into lines of at most [`LINE_MAX`] bytes: whole lines as they
/// end, and a line that grows past the bound in pieces of the bound (as journald splits them).
#[derive(Debug, Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Feeds `bytes`; calls `line` with each complete line (without its newline).
    pub fn feed(&mut self, mut bytes: &[u8], mut line: impl FnMut(&[u8])) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            if self.pending.is_empty() {
                for piece in bytes[..end].chunks(LINE_MAX) {
                    line(piece);
                }
                if end == 0 {
                    line(b"");
                }
            } else {
                self.pending.extend_from_slice(&bytes[..end]);
                for piece in self.pending.chunks(LINE_MAX) {
                    line(piece);
                }
                self.pending.clear();
            }
            bytes = &bytes[end + 1..];
        }
        self.pending.extend_from_slice(bytes);
        while self.pending.len() >= LINE_MAX {
            let rest = self.pending.split_off(LINE_MAX);
            line(&self.pending);
            self.pending = rest;
        }
    }

    /// What is left when the stream ends: the last line, when it had no newline.
    pub fn finish(&mut self, line: impl FnOnce(&[u8])) {
        if !self.pending.is_empty() {
            line(&std::mem::take(&mut self.pending));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<usize> {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, |l| out.push(l.len()));
        }
        s.finish(|l| out.push(l.len()));
        out
    }

    #[test]
    fn lines_are_whole_and_never_longer_than_line_max() {
        assert_eq!(split(&[b"ab\ncd", b"e\n\nf"]), vec![2, 3, 0, 1]);
        let long = vec![b'x'; LINE_MAX * 2 + 10];
        assert_eq!(split(&[&long]), vec![LINE_MAX, LINE_MAX, 10]);
        let mut with_end = long.clone();
        with_end.push(b'\n');
        assert_eq!(split(&[&with_end[..100], &with_end[100..]]), vec![LINE_MAX, LINE_MAX, 10]);
        // The buffer never holds more than one line's worth.
        let mut s = LineSplitter::default();
        for _ in 0..1000 {
            s.feed(&[b'y'; 4096], |_| {});
            assert!(s.pending.len() < LINE_MAX);
        }
    }
}
