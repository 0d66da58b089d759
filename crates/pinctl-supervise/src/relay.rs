//! pinctl's own output: the instances' lines it relays to its stdout and its log lines on
//! stderr, written by one thread of their own.
//!
//! Under systemd both streams are pipes to journald; behind a pager, a full disk or a stuck
//! journald they stop being read. A write to such a pipe blocks, and a supervisor that wrote
//! from its event loop would stop restarting instances, answering its socket and even handling
//! SIGTERM. So nothing on the event loop writes: a writer thread does, from a queue.
//!
//! The two kinds of line are bounded differently. An instance's lines wait for room: at most
//! [`QUEUE_BYTES`] of them are queued, and the task relaying an instance's FIFO waits (on
//! tokio, never blocking the loop) until the writer has made room, so the instance waits in its
//! own `write`, as under journald's stream sockets: backpressure, never a dropped line. pinctl's
//! own log lines never wait (the loop writes them): beyond [`LOG_QUEUE_BYTES`] they are dropped,
//! counted, and said at most once a second. Lines are cut at [`LINE_MAX`] bytes (journald's
//! `LineMax=` default), so an instance that writes without newlines cannot grow pinctl either.

use std::collections::VecDeque;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tokio::sync::Semaphore;

pub use crate::output::lines::LINE_MAX;
use crate::output::lines::{LineSplitter, Notice};

/// The most bytes of instances' lines waiting for the writer; beyond, instances wait.
pub const QUEUE_BYTES: usize = 4 << 20;
/// The most bytes of pinctl's own log lines waiting for the writer; beyond, they are dropped.
pub const LOG_QUEUE_BYTES: usize = 1 << 20;

/// Which of pinctl's streams a line goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// The instances' output.
    Stdout,
    /// pinctl's log.
    Stderr,
}

#[derive(Debug)]
struct Entry {
    stream: Stream,
    bytes: Vec<u8>,
    /// Room it took from the instances' share, given back once written.
    room: usize,
}

#[derive(Debug, Default)]
struct Queue {
    entries: VecDeque<Entry>,
    /// Bytes of log lines queued.
    log_bytes: usize,
    /// Log lines dropped since the writer last said so, and in all.
    dropped: u64,
    dropped_total: u64,
    /// An entry is being written (taken from the queue, not yet out).
    writing: bool,
}

#[derive(Debug)]
struct Relay {
    queue: Mutex<Queue>,
    /// Signalled when a line is queued (for the writer) and when the queue empties (for
    /// [`flush`]).
    changed: Condvar,
    /// Room for instances' lines, in bytes.
    room: Semaphore,
}

fn relay() -> &'static Relay {
    static RELAY: OnceLock<Relay> = OnceLock::new();
    static WRITER: OnceLock<()> = OnceLock::new();
    let relay = RELAY.get_or_init(|| Relay {
        queue: Mutex::new(Queue::default()),
        changed: Condvar::new(),
        room: Semaphore::new(QUEUE_BYTES),
    });
    WRITER.get_or_init(|| {
        // Without a thread (none can be started) log lines stay queued up to their bound and
        // are dropped beyond it, and instances wait: never a blocking write on the caller's
        // thread.
        let _ = std::thread::Builder::new()
            .name("pinctl-relay".into())
            .stack_size(64 * 1024)
            .spawn(move || write_forever(relay));
    });
    relay
}

fn write_forever(relay: &'static Relay) {
    let mut notice = Notice::default();
    loop {
        let (entry, dropped) = {
            let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
            while q.entries.is_empty() {
                q.writing = false;
                relay.changed.notify_all();
                q = relay.changed.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            let entry = q.entries.pop_front().expect("not empty");
            if entry.stream == Stream::Stderr {
                q.log_bytes -= entry.bytes.len();
            }
            q.writing = true;
            (entry, std::mem::take(&mut q.dropped))
        };
        // A failed write (EPIPE: nobody reads any more) loses the line, as journald's would.
        let _ = write_to(entry.stream, &entry.bytes);
        relay.room.add_permits(entry.room);
        if let Some(times) = notice.due(Instant::now(), dropped) {
            let note = format!(
                "pinctl: log: {times} of pinctl's own log lines dropped: its stderr was not \
                 read fast enough\n"
            );
            let _ = write_to(Stream::Stderr, note.as_bytes());
        }
    }
}

fn write_to(stream: Stream, bytes: &[u8]) -> io::Result<()> {
    match stream {
        Stream::Stdout => {
            let mut out = io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()
        }
        Stream::Stderr => io::stderr().lock().write_all(bytes),
    }
}

fn push(entry: Entry) {
    let relay = relay();
    let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
    q.entries.push_back(entry);
    relay.changed.notify_all();
}

/// A line of pinctl's log (`pinctl: NAME: MESSAGE`) on stderr, never blocking the caller;
/// dropped and counted when [`LOG_QUEUE_BYTES`] are already waiting.
pub fn log_line(text: &str) {
    let mut line = Vec::with_capacity(text.len().min(LINE_MAX) + 1);
    line.extend_from_slice(&text.as_bytes()[..text.len().min(LINE_MAX)]);
    line.push(b'\n');
    let relay = relay();
    let mut q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
    if q.log_bytes + line.len() > LOG_QUEUE_BYTES {
        q.dropped += 1;
        q.dropped_total += 1;
        return;
    }
    q.log_bytes += line.len();
    q.entries.push_back(Entry { stream: Stream::Stderr, bytes: line, room: 0 });
    relay.changed.notify_all();
}

/// Log lines dropped so far because their queue was full.
pub fn log_lines_dropped() -> u64 {
    relay().queue.lock().map(|q| q.dropped_total).unwrap_or(0)
}

/// Queues instances' whole lines (each ending in `\n`) for stdout once there is room for
/// them: the caller waits while [`QUEUE_BYTES`] are queued.
async fn instance_lines(bytes: Vec<u8>) {
    let relay = relay();
    let room = bytes.len().min(QUEUE_BYTES);
    // The semaphore is never closed; `room` fits in a u32 (at most QUEUE_BYTES).
    if let Ok(permit) = relay.room.acquire_many(room as u32).await {
        permit.forget();
    }
    push(Entry { stream: Stream::Stdout, bytes, room });
}

/// Relays instance `name`'s FIFO `fifo` (not blocking) to stdout, each line prefixed with
/// the name (`tikv-0: ...`), until every writer of the FIFO has closed it. Waits for room
/// instead of dropping: the instance waits with it.
pub async fn relay_instance(name: String, fifo: OwnedFd) {
    let Ok(mut pipe) = tokio::net::unix::pipe::Receiver::from_owned_fd(fifo) else {
        return log_line(&format!("pinctl: {name}: cannot read its output FIFO: it is lost"));
    };
    let mut splitter = LineSplitter::default();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut cut = Notice::default();
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut lines = Vec::with_capacity(n + n / 8);
        splitter.feed(&chunk[..n], |line| prefixed(&mut lines, &name, line));
        if let Some(times) = cut.due(Instant::now(), splitter.take_cut()) {
            log_line(&format!(
                "pinctl: {name}: {times} output lines longer than {} KiB were cut into lines of \
                 that size",
                LINE_MAX / 1024
            ));
        }
        if !lines.is_empty() {
            instance_lines(lines).await;
        }
    }
    let mut last = Vec::new();
    splitter.finish(|line| prefixed(&mut last, &name, line));
    if !last.is_empty() {
        instance_lines(last).await;
    }
}

fn prefixed(out: &mut Vec<u8>, name: &str, line: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(line);
    out.push(b'\n');
}

/// Waits until every queued line is written, or `timeout` passed (a reader that never reads
/// again must not keep pinctl from exiting). `true` when everything went out.
pub fn flush(timeout: Duration) -> bool {
    let relay = relay();
    let q = relay.queue.lock().unwrap_or_else(|e| e.into_inner());
    let (q, _) = relay
        .changed
        .wait_timeout_while(q, timeout, |q| !q.entries.is_empty() || q.writing)
        .unwrap_or_else(|e| e.into_inner());
    q.entries.is_empty() && !q.writing
}
