//! An instance's `output` file, and the threads that copy its FIFO into it.
//!
//! One thread per running instance (its *pump*) reads the instance's FIFO and writes whole lines
//! into the file with plain blocking writes: when the disk is slower than the instance, the
//! pump waits in `write`, the FIFO fills, and the instance waits in its own `write` until the
//! disk catches up, as under s6-log, runit's svlogd and journald's stream sockets. Nothing is
//! dropped, and nothing else waits: the supervisor's loop, its socket, the watcher and every
//! other instance go on. The only lines cut are those longer than [`LINE_MAX`].
//!
//! The pump opens the file itself, at each start and each reopen, as [`access`](super::access)
//! decides: as pinctl for a path that is root's all the way, else with the instance's user's
//! file-system ids, which signal and `prlimit` checks ignore: the user can open what the thread
//! opens but cannot signal, limit or trace it (docs/supervisor.md#trust).

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::io::Errno;

use super::access::{self, FileOwner, Opener};
use super::lines::{LINE_MAX, LineSplitter, Notice, whole_lines};
use crate::relay;

/// What one read of a FIFO may take at most: a FIFO's worth, written out in one write.
const READ_BYTES: usize = 256 * 1024;
/// How long a pump waits before it tries a failed write again.
const WRITE_RETRY: Duration = Duration::from_secs(1);
/// How often a write that keeps failing is said again (its end is said at once).
const FAILING_SAID_EVERY: Duration = Duration::from_secs(60);

/// What an output file's pump tells whoever started it, once it has opened the file (or not).
pub type Opened = Box<dyn FnOnce(Result<(), String>) + Send>;

/// An instance's output file: its path, who it is written for, and the pumps writing it.
#[derive(Debug)]
pub struct OutputFile {
    instance: String,
    path: PathBuf,
    owner: Option<FileOwner>,
    state: Mutex<Pumps>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Pumps {
    running: Vec<PumpEntry>,
    next_id: u64,
    /// Reopens asked for so far.
    reopen_asked: u64,
    /// Every pump is to end (the supervisor stops or detaches).
    closing: bool,
}

#[derive(Debug)]
struct PumpEntry {
    id: u64,
    /// Wakes the pump from its wait on the FIFO (an eventfd).
    wake: Arc<OwnedFd>,
    /// The last reopen it made, and how it went.
    reopened: u64,
    outcome: Option<Result<(), String>>,
}

impl OutputFile {
    /// The output file at `path` of `instance`, written for `owner` (`None`: root).
    pub fn new(instance: &str, path: &Path, owner: Option<FileOwner>) -> Arc<OutputFile> {
        Arc::new(OutputFile {
            instance: instance.to_string(),
            path: path.to_path_buf(),
            owner,
            state: Mutex::new(Pumps::default()),
            changed: Condvar::new(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is the file at `path` written for `owner`.
    pub fn writes(&self, path: &Path, owner: Option<&FileOwner>) -> bool {
        self.path == path && self.owner.as_ref() == owner
    }

    fn lock(&self) -> MutexGuard<'_, Pumps> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a pump from `fifo` (the read end of an instance's FIFO, not blocking) into the
    /// file: it opens the file at its path, tells `opened` how that went, and copies until
    /// every writer of the FIFO has closed it (the instance and whatever it forked exited).
    pub fn pump(self: &Arc<Self>, fifo: OwnedFd, opened: Opened) {
        let wake = match rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK) {
            Ok(fd) => Arc::new(fd),
            Err(e) => return opened(Err(format!("cannot start its output's writer: {e}"))),
        };
        let id = {
            let mut p = self.lock();
            p.next_id += 1;
            let entry = PumpEntry {
                id: p.next_id,
                wake: wake.clone(),
                reopened: p.reopen_asked,
                outcome: None,
            };
            p.running.push(entry);
            p.next_id
        };
        let file = self.clone();
        // The thread owns `opened` once it starts; a failed start hands it back here.
        let opened = Arc::new(Mutex::new(Some(opened)));
        let theirs = opened.clone();
        let started = std::thread::Builder::new()
            .name("pinctl-output".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let opened = theirs.lock().ok().and_then(|mut o| o.take());
                pump(&file, id, &fifo, &wake, opened);
                file.ended(id);
            });
        if let Err(e) = started {
            self.ended(id);
            if let Some(opened) = opened.lock().ok().and_then(|mut o| o.take()) {
                opened(Err(format!("cannot start its output's writer: {e}")));
            }
        }
    }

    fn ended(&self, id: u64) {
        self.lock().running.retain(|p| p.id != id);
        self.changed.notify_all();
    }

    /// Asks every pump to open the file again at its path (logrotate moved it); returns what
    /// to wait for with [`OutputFile::wait_reopened`].
    pub fn ask_reopen(&self) -> u64 {
        let mut p = self.lock();
        p.reopen_asked += 1;
        p.running.iter().for_each(|e| wake(&e.wake));
        p.reopen_asked
    }

    /// The outcome of reopen `asked` once every pump made it (the first failure, if any);
    /// `Ok` at once when no pump runs (the next start opens the file at its path); `None`
    /// when it was not made within `timeout` (a file system that does not answer).
    pub fn wait_reopened(&self, asked: u64, timeout: Duration) -> Option<Result<(), String>> {
        let p = self.lock();
        let (p, _) = self
            .changed
            .wait_timeout_while(p, timeout, |p| p.running.iter().any(|e| e.reopened < asked))
            .unwrap_or_else(|e| e.into_inner());
        if p.running.iter().any(|e| e.reopened < asked) {
            return None;
        }
        let failed = p.running.iter().filter_map(|e| e.outcome.clone()?.err()).next();
        Some(failed.map_or(Ok(()), Err))
    }

    /// Waits at most `timeout` until every pump has read its FIFO to the end (the instances
    /// exited); `true` when they did.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let p = self.lock();
        let (p, _) = self
            .changed
            .wait_timeout_while(p, timeout, |p| !p.running.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        p.running.is_empty()
    }

    /// Every pump stops reading (what stays in the FIFO is the next supervisor's) after it
    /// wrote what it read. Waits at most `timeout` for that; `true` when they ended.
    pub fn close(&self, timeout: Duration) -> bool {
        {
            let mut p = self.lock();
            p.closing = true;
            p.running.iter().for_each(|e| wake(&e.wake));
        }
        self.wait_drained(timeout)
    }

    /// What pump `id` is asked to do next.
    fn asked(&self, id: u64) -> Asked {
        let p = self.lock();
        if p.closing {
            return Asked::Close;
        }
        match p.running.iter().find(|e| e.id == id) {
            Some(e) if e.reopened < p.reopen_asked => Asked::Reopen(p.reopen_asked),
            _ => Asked::Copy,
        }
    }

    fn reopened(&self, id: u64, asked: u64, outcome: Result<(), String>) {
        let mut p = self.lock();
        if let Some(e) = p.running.iter_mut().find(|e| e.id == id) {
            e.reopened = asked;
            e.outcome = Some(outcome);
        }
        drop(p);
        self.changed.notify_all();
    }

    fn say(&self, what: &str) {
        relay::log_line(&format!("pinctl: {}: {what}", self.instance));
    }

    /// Opens the file at its path as [`access::opener`] says, taking on this thread the
    /// file-system ids of whoever opens it.
    fn open_here(&self, root_groups: &[u32]) -> Result<fs::File, String> {
        let opener = access::opener(&self.path, self.owner.as_ref())?;
        let (uid, gid, groups) = match &opener {
            Opener::Supervisor { .. } => (0, 0, root_groups),
            Opener::User(o) => (o.uid, o.gid, &o.groups[..]),
        };
        pinctl_sys::set_thread_file_identity(uid, gid, groups)
            .map_err(|e| format!("cannot take the file rights of {}: {e}", opener.who()))?;
        access::open(&self.path, &opener).map_err(|e| {
            format!("cannot open output `{}` as {}: {e}", self.path.display(), opener.who())
        })
    }
}

enum Asked {
    Copy,
    Reopen(u64),
    Close,
}

fn wake(fd: &OwnedFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// A pump's own state: the open file and what it read that is not written yet.
struct Pump<'a> {
    file: &'a OutputFile,
    out: fs::File,
    buf: Vec<u8>,
    /// Bytes of `buf` read and not yet written (a line not finished yet).
    held: usize,
    cut: Notice,
    failing: Notice,
    root_groups: Vec<u32>,
}

/// Copies `fifo` into the file until the FIFO's writers are gone or the pump is asked to end.
fn pump(file: &OutputFile, id: u64, fifo: &OwnedFd, wake: &OwnedFd, opened: Option<Opened>) {
    // pinctl's own groups, for opening as pinctl after the thread took a user's.
    let root_groups: Vec<u32> = rustix::process::getgroups()
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    let out = file.open_here(&root_groups);
    let ok = out.as_ref().map(drop).map_err(Clone::clone);
    if let Some(opened) = opened {
        opened(ok);
    }
    let Ok(out) = out else { return };
    let mut p = Pump {
        file,
        out,
        buf: vec![0; READ_BYTES],
        held: 0,
        cut: Notice::default(),
        failing: Notice::every(FAILING_SAID_EVERY),
        root_groups,
    };
    loop {
        match file.asked(id) {
            Asked::Copy => {}
            Asked::Reopen(asked) => p.reopen(id, asked),
            // What is left of an unfinished line goes out as it is: the next supervisor
            // appends the rest of it.
            Asked::Close => return p.write_held(wake),
        }
        match rustix::io::read(fifo, &mut p.buf[p.held..]) {
            Ok(0) => return p.finish(wake),
            Ok(n) => p.copy(n, wake),
            Err(Errno::AGAIN) => wait_for(fifo.as_fd(), wake, None),
            Err(Errno::INTR) => {}
            Err(e) => {
                return file.say(&format!("cannot read its output FIFO: {e}: its output is lost"));
            }
        }
    }
}

/// Waits until `what` can be read (or was closed) or the pump is woken, at most `timeout`
/// (`None`: as long as it takes); a wake-up is consumed.
fn wait_for(what: std::os::fd::BorrowedFd<'_>, wake: &OwnedFd, timeout: Option<Duration>) {
    let timeout = timeout.map(|t| rustix::time::Timespec {
        tv_sec: t.as_secs() as i64,
        tv_nsec: i64::from(t.subsec_nanos()),
    });
    let mut fds = [PollFd::new(&what, PollFlags::IN), PollFd::new(wake, PollFlags::IN)];
    let _ = rustix::event::poll(&mut fds, timeout.as_ref());
    if !fds[1].revents().is_empty() {
        let mut count = [0u8; 8];
        let _ = rustix::io::read(wake, &mut count);
    }
}

impl Pump<'_> {
    /// Writes out the whole lines among the `held` bytes and the `n` just read; keeps the
    /// unfinished rest. Lines longer than [`LINE_MAX`] are cut (said at most once a second).
    fn copy(&mut self, n: usize, wake: &OwnedFd) {
        let filled = self.held + n;
        let (end, too_long) = whole_lines(&self.buf[..filled]);
        if !too_long {
            let buf = std::mem::take(&mut self.buf);
            self.write(&buf[..end], wake);
            self.buf = buf;
            self.buf.copy_within(end..filled, 0);
            self.held = filled - end;
            return;
        }
        let mut splitter = LineSplitter::default();
        let mut lines = Vec::with_capacity(filled + filled / LINE_MAX + 1);
        splitter.feed(&self.buf[..filled], |line| {
            lines.extend_from_slice(line);
            lines.push(b'\n');
        });
        let cut = splitter.take_cut();
        let rest = splitter.into_pending();
        self.buf[..rest.len()].copy_from_slice(&rest);
        self.held = rest.len();
        self.write(&lines, wake);
        if let Some(times) = self.cut.due(Instant::now(), cut) {
            self.file.say(&format!(
                "{times} output lines longer than {} KiB were cut into lines of that size",
                LINE_MAX / 1024
            ));
        }
    }

    /// The FIFO ended: its last line goes out, with a newline when it had none.
    fn finish(&mut self, wake: &OwnedFd) {
        if self.held > 0 {
            self.buf[self.held] = b'\n';
            self.held += 1;
        }
        self.write_held(wake);
    }

    fn write_held(&mut self, wake: &OwnedFd) {
        let buf = std::mem::take(&mut self.buf);
        self.write(&buf[..self.held], wake);
        self.held = 0;
        self.buf = buf;
    }

    /// Writes all of `bytes`. A write that fails (a full disk) is tried again every
    /// [`WRITE_RETRY`] until it succeeds, so the instance waits rather than loses lines; said
    /// at most once a second. Gives up only when the pump is asked to end.
    fn write(&mut self, mut bytes: &[u8], wake: &OwnedFd) {
        let mut failed_since = None;
        while !bytes.is_empty() {
            match self.out.write(bytes) {
                Ok(0) => bytes = &[],
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed_since.get_or_insert_with(Instant::now);
                    if let Some(times) = self.failing.due(Instant::now(), 1) {
                        self.file.say(&format!(
                            "cannot write output `{}`: {e} ({times} tries): its instance waits \
                             until a write succeeds",
                            self.file.path.display()
                        ));
                    }
                    if self.file.lock().closing {
                        let lost = memchr::memchr_iter(b'\n', bytes).count();
                        self.file.say(&format!(
                            "{lost} output lines not written to `{}` at its end: {e}",
                            self.file.path.display()
                        ));
                        return;
                    }
                    wait_for(wake.as_fd(), wake, Some(WRITE_RETRY));
                }
            }
        }
        if let Some(since) = failed_since {
            self.file.say(&format!(
                "writing output `{}` again after {:.1} s",
                self.file.path.display(),
                since.elapsed().as_secs_f64()
            ));
        }
    }

    /// Opens the file again at its path (reopen `asked`); a failure keeps the file it had:
    /// better the renamed file than nothing.
    fn reopen(&mut self, id: u64, asked: u64) {
        let _ = self.out.flush();
        let outcome = match self.file.open_here(&self.root_groups) {
            Ok(new) => {
                self.out = new;
                self.file.say(&format!("output reopened: `{}`", self.file.path.display()));
                Ok(())
            }
            Err(e) => {
                self.file.say(&format!("cannot reopen output `{}`: {e}", self.file.path.display()));
                Err(e)
            }
        };
        self.file.reopened(id, asked, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;
    use std::sync::mpsc;

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }

    /// A pipe standing for an instance's FIFO: the pump's end (not blocking) and the
    /// instance's (blocking).
    fn fifo() -> (OwnedFd, fs::File) {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        rustix::fs::fcntl_setfl(&r, rustix::fs::OFlags::NONBLOCK).unwrap();
        (r, fs::File::from(w))
    }

    /// Starts a pump of `file` from a new FIFO; the instance's end and how the open went.
    fn pumped(file: &Arc<OutputFile>) -> (fs::File, Result<(), String>) {
        let (r, w) = fifo();
        let (tx, rx) = mpsc::channel();
        file.pump(r, Box::new(move |opened| tx.send(opened).unwrap()));
        (w, rx.recv_timeout(Duration::from_secs(10)).expect("the pump says how the open went"))
    }

    #[test]
    fn an_output_file_is_written_and_reopened_at_its_path() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("db.log");
        let f = OutputFile::new("db-0", &log, None);
        let (mut w, opened) = pumped(&f);
        assert_eq!(opened, Ok(()));
        w.write_all(b"one\ntwo\n").unwrap();
        // logrotate's `create`: the file is renamed, and pinctl asked to open it again.
        let deadline = Instant::now() + Duration::from_secs(10);
        while read(&log) != "one\ntwo\n" {
            assert!(Instant::now() < deadline, "two lines written");
            std::thread::sleep(Duration::from_millis(5));
        }
        let rotated = d.path().join("db.log.1");
        fs::rename(&log, &rotated).unwrap();
        let asked = f.ask_reopen();
        assert_eq!(f.wait_reopened(asked, Duration::from_secs(10)), Some(Ok(())));
        // The last line has no newline: it gets one when the instance's end closes.
        w.write_all(b"three\nfour").unwrap();
        drop(w);
        assert!(f.wait_drained(Duration::from_secs(10)));
        assert_eq!(read(&rotated), "one\ntwo\n");
        assert_eq!(read(&log), "three\nfour\n");
        // No pump runs: a reopen has nothing to wait for.
        assert_eq!(f.wait_reopened(f.ask_reopen(), Duration::from_millis(10)), Some(Ok(())));
    }

    #[test]
    fn lines_longer_than_the_bound_are_cut_and_nothing_else_is_touched() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("long.log");
        let f = OutputFile::new("db-0", &log, None);
        let (mut w, opened) = pumped(&f);
        assert_eq!(opened, Ok(()));
        let long = vec![b'x'; LINE_MAX + 10];
        let writer = std::thread::spawn(move || {
            w.write_all(b"before\n").unwrap();
            w.write_all(&long).unwrap();
            w.write_all(b"\nafter\n").unwrap();
        });
        writer.join().unwrap();
        assert!(f.wait_drained(Duration::from_secs(10)));
        let text = read(&log);
        let lens: Vec<usize> = text.lines().map(str::len).collect();
        assert_eq!(lens, vec![6, LINE_MAX, 10, 5]);
    }

    #[test]
    fn a_closed_pump_leaves_an_unfinished_line_for_the_next_supervisor() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("detach.log");
        let f = OutputFile::new("db-0", &log, None);
        let (mut w, _) = pumped(&f);
        w.write_all(b"whole\nhalf").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while read(&log) != "whole\n" {
            assert!(Instant::now() < deadline, "the whole line written");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(f.close(Duration::from_secs(10)), "a detach ends the pump at once");
        // The instance still runs (its end is open): its half line went out as it was.
        assert_eq!(read(&log), "whole\nhalf");
        drop(w);
    }

    #[test]
    fn a_link_or_a_fifo_at_the_path_is_never_written() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let f = OutputFile::new("db-0", &link, None);
        let (_w, opened) = pumped(&f);
        assert!(opened.is_err());
        assert_eq!(read(&victim), "keep");
        let fifo = d.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap();
        // Without a reader: ENXIO at once, never a wait; with one: refused as no regular file.
        let opener = Opener::Supervisor { owner: None };
        assert!(access::open(&fifo, &opener).is_err());
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK;
        let _reader = rustix::fs::open(&fifo, flags, rustix::fs::Mode::empty()).unwrap();
        let e = access::open(&fifo, &opener).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_user_s_file_in_a_folder_others_may_write_is_opened_with_the_user_s_rights() {
        assert_eq!(rustix::process::geteuid().as_raw(), 0, "needs root (CI runs as root)");
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let nobody =
            FileOwner { name: "nobody".into(), uid: 65534, gid: 65534, groups: vec![65534] };
        // A folder of nobody's: not root's all the way, so opened as nobody.
        let dir = d.path().join("nobody");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        let log = dir.join("db.log");
        assert_eq!(access::opener(&log, Some(&nobody)), Ok(Opener::User(nobody.clone())));
        let f = OutputFile::new("db-0", &log, Some(nobody.clone()));
        let (mut w, opened) = pumped(&f);
        assert_eq!(opened, Ok(()));
        w.write_all(b"y\n").unwrap();
        drop(w);
        assert!(f.wait_drained(Duration::from_secs(10)));
        assert_eq!(read(&log), "y\n");
        assert_eq!(fs::metadata(&log).unwrap().uid(), 65534);
        // Through a link nobody placed in its folder, into root's 0700 folder: not as nobody.
        let private = d.path().join("private");
        fs::create_dir(&private).unwrap();
        fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&private, dir.join("sub")).unwrap();
        let sneaky = dir.join("sub").join("x.log");
        let f = OutputFile::new("db-0", &sneaky, Some(nobody));
        let (_w, opened) = pumped(&f);
        assert!(opened.is_err(), "nobody cannot reach root's folder");
        assert!(!private.join("x.log").exists());
        assert_eq!(rustix::process::geteuid().as_raw(), 0, "the test thread kept root");
    }

    #[test]
    fn a_root_owned_folder_is_opened_by_pinctl_for_any_user_and_the_file_given_to_it() {
        assert_eq!(rustix::process::geteuid().as_raw(), 0, "needs root (CI runs as root)");
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("mysql.log");
        let mysql =
            FileOwner { name: "nobody".into(), uid: 65534, gid: 65534, groups: vec![65534] };
        let opener = access::opener(&log, Some(&mysql)).unwrap();
        assert_eq!(opener, Opener::Supervisor { owner: Some(mysql.clone()) });
        let f = OutputFile::new("db-0", &log, Some(mysql));
        let (mut w, opened) = pumped(&f);
        assert_eq!(opened, Ok(()));
        w.write_all(b"started\n").unwrap();
        drop(w);
        assert!(f.wait_drained(Duration::from_secs(10)));
        assert_eq!(read(&log), "started\n");
        let m = fs::metadata(&log).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (65534, 65534, 0o640));
    }

    #[test]
    fn a_root_instance_writes_only_where_every_folder_is_root_s() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("someones");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        for owner in [None, Some(FileOwner { name: "root".into(), uid: 0, gid: 0, groups: vec![] })]
        {
            let e = access::opener(&dir.join("root.log"), owner.as_ref()).unwrap_err();
            assert!(e.contains("runs as root"), "{e}");
        }
    }
}
