//! Where an instance's output goes, how it outlives a `detach`, and how its file follows
//! logrotate.
//!
//! Every instance writes its stdout and stderr into a FIFO of its own,
//! `<state file>.output/<instance>` (a folder only pinctl may write, beside the state file),
//! which the supervisor reads. A FIFO and not a pipe: a pipe is gone with the process that read
//! it, so an instance adopted after a `detach` had no output any more; the FIFO stays at its
//! path, and the supervisor that adopts the instance opens it again and relays what it writes
//! from then on. What it wrote while no supervisor read fails with `EPIPE` (instances start with
//! SIGPIPE ignored) and is lost.
//!
//! An `output` file is written by a thread of the supervisor that runs as the instance's user:
//! Linux keeps credentials per thread (the C library's `setuid` changes every thread; the
//! system call, which rustix makes, only the caller), so the thread opens the file with exactly
//! the rights the instance has, never following a link at the path, and opens it again at the
//! same path when asked (`pinctl reopen-logs`, SIGUSR1): what logrotate's `create` mode needs
//! after it renamed the file. The thread writes from a bounded queue, so a slow or stuck disk
//! drops lines (counted, and said) instead of stalling the supervisor or the instance.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rustix::fs::{CWD, FileType, Mode, OFlags};
use tokio::net::unix::pipe;

// The bounds of pinctl's own output relay: the same 48 KiB lines and 4 MiB queue per file.
use crate::relay::{self, LINE_MAX, QUEUE_BYTES};

/// The FIFOs of a supervisor's instances: one folder beside its state file.
#[derive(Debug, Clone)]
pub struct Fifos {
    dir: PathBuf,
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what)
}

impl Fifos {
    /// The folder for the supervisor whose state file is `state_file`
    /// (`/run/pinctl/db.state.json` -> `/run/pinctl/db.state.output`).
    pub fn beside(state_file: &Path) -> Fifos {
        let name = state_file.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let stem = name.strip_suffix(".json").unwrap_or(&name);
        Fifos { dir: state_file.with_file_name(format!("{stem}.output")) }
    }

    /// The FIFO of `instance` (a name checked to be one path component).
    pub fn path(&self, instance: &str) -> PathBuf {
        self.dir.join(instance)
    }

    /// The folder, made (mode 0700) when missing; one that is there must be a folder of this
    /// user's that nobody else may write, not a link.
    fn ensure(&self) -> io::Result<()> {
        match fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let m = fs::symlink_metadata(&self.dir)?;
        if !m.is_dir() || m.uid() != euid() || m.mode() & 0o022 != 0 {
            return Err(refused(format!(
                "`{}` is not a folder of pinctl's that only it may write (a link, another \
                 user's, or writable by others)",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// A new FIFO for `instance`: the end the supervisor reads, and the end the instance gets
    /// as its stdout and stderr (blocking, as a pipe's). An earlier FIFO of the instance is
    /// replaced; anything else at its path is refused.
    pub fn create(&self, instance: &str) -> io::Result<(pipe::Receiver, OwnedFd)> {
        self.ensure()?;
        let path = self.path(instance);
        remove_fifo(&path)?;
        rustix::fs::mkfifoat(CWD, &path, Mode::from_raw_mode(0o600))?;
        // The reader first, so that opening the writer does not wait for one.
        let reader = pipe::OpenOptions::new().open_receiver(&path)?;
        let writer = rustix::fs::open(
            &path,
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if rustix::fs::fstat(&writer).map(|st| FileType::from_raw_mode(st.st_mode))?
            != FileType::Fifo
        {
            return Err(refused(format!("`{}` is not the FIFO pinctl made", path.display())));
        }
        rustix::fs::fcntl_setfl(&writer, OFlags::empty())?;
        Ok((reader, writer))
    }

    /// The FIFO of an instance an earlier supervisor started, opened for reading; `None` when
    /// it has none (started by a pinctl that relayed through a pipe).
    pub fn reopen(&self, instance: &str) -> Option<io::Result<pipe::Receiver>> {
        let path = self.path(instance);
        let m = fs::symlink_metadata(&path).ok()?;
        Some(self.ensure().and_then(|()| {
            if !m.file_type().is_fifo() || m.uid() != euid() || m.mode() & 0o077 != 0 {
                return Err(refused(format!(
                    "`{}` is not a FIFO of pinctl's: its output is not read",
                    path.display()
                )));
            }
            pipe::OpenOptions::new().open_receiver(&path)
        }))
    }

    /// Removes the FIFO of `instance` (it is gone from the file).
    pub fn remove(&self, instance: &str) {
        let _ = remove_fifo(&self.path(instance));
    }

    /// Gives the FIFO of `from` the name `to` (a reload renamed the instance; its process
    /// keeps writing into it).
    pub fn rename(&self, from: &str, to: &str) {
        let (from, to) = (self.path(from), self.path(to));
        if fs::symlink_metadata(&from).is_ok_and(|m| m.file_type().is_fifo() && m.uid() == euid())
            && remove_fifo(&to).is_ok()
        {
            let _ = fs::rename(from, to);
        }
    }

    /// Removes every FIFO and the folder (the supervisor stopped its instances).
    pub fn remove_all(&self) {
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let _ = remove_fifo(&e.path());
            }
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Removes a FIFO of this user's at `path`; nothing there is fine; anything else is refused.
fn remove_fifo(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.file_type().is_fifo() && m.uid() == euid() => fs::remove_file(path),
        Ok(_) => Err(refused(format!(
            "`{}` is not a FIFO of pinctl's: left alone, and the instance not started",
            path.display()
        ))),
    }
}

/// Who an output file is written as: the instance's user, group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// An instance's output file and the thread that writes it.
#[derive(Debug)]
pub struct OutputFile {
    path: PathBuf,
    owner: Option<FileOwner>,
    state: Mutex<Writer>,
    changed: Condvar,
}

/// What the writer does next, in the order asked.
#[derive(Debug)]
enum Queued {
    Line(Vec<u8>),
    /// Open the file again (the reopen asked for with this number; `said`: say in the log
    /// that it was): lines queued before it go to the file it had.
    Reopen {
        asked: u64,
        said: bool,
    },
}

#[derive(Debug, Default)]
struct Writer {
    queue: VecDeque<Queued>,
    /// Bytes of the lines in `queue`.
    bytes: usize,
    /// Lines dropped since the writer last said so.
    dropped: u64,
    /// Reopens asked for, and the last one made, with its outcome.
    reopen_asked: u64,
    reopened: u64,
    outcome: Option<Result<(), String>>,
    /// No more lines will come: write what is queued and end.
    closing: bool,
    ended: bool,
}

impl OutputFile {
    /// Starts the writer of `path` for `instance`, as `owner` (`None`: as pinctl itself).
    pub fn start(instance: &str, path: &Path, owner: Option<FileOwner>) -> Arc<OutputFile> {
        let file = Arc::new(OutputFile {
            path: path.to_path_buf(),
            owner,
            state: Mutex::new(Writer::default()),
            changed: Condvar::new(),
        });
        let writer = file.clone();
        let name = instance.to_string();
        let started = std::thread::Builder::new()
            .name("pinctl-output".into())
            .stack_size(128 * 1024)
            .spawn(move || write_forever(&writer, &name));
        if let Err(e) = started {
            relay::log_line(&format!(
                "pinctl: {instance}: cannot start the writer of `{}`: {e}: its output is lost",
                path.display()
            ));
            file.lock().ended = true;
        }
        file
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this writer writes `path` as `owner`.
    pub fn writes(&self, path: &Path, owner: Option<&FileOwner>) -> bool {
        self.path == path && self.owner.as_ref() == owner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Writer> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues one line (without its newline, at most [`LINE_MAX`] bytes); drops it, counted,
    /// when the queue is full or the writer has ended.
    pub fn line(&self, bytes: &[u8]) {
        let bytes = &bytes[..bytes.len().min(LINE_MAX)];
        let mut w = self.lock();
        if w.ended || w.bytes + bytes.len() + 1 > QUEUE_BYTES {
            w.dropped += 1;
            return;
        }
        let mut line = Vec::with_capacity(bytes.len() + 1);
        line.extend_from_slice(bytes);
        line.push(b'\n');
        w.bytes += line.len();
        w.queue.push_back(Queued::Line(line));
        self.changed.notify_all();
    }

    /// Asks the writer to open the file again at its path (logrotate moved it); returns what
    /// to wait for with [`OutputFile::wait_reopened`].
    pub fn ask_reopen(&self) -> u64 {
        self.reopen(true)
    }

    /// The instance starts again: its file is opened again at its path, as the instance
    /// opened it at each start when it wrote the file itself (the file may have been removed
    /// or replaced meanwhile). Only a failure is said.
    pub fn reopen_for_start(&self) {
        self.reopen(false);
    }

    fn reopen(&self, said: bool) -> u64 {
        let mut w = self.lock();
        w.reopen_asked += 1;
        let asked = w.reopen_asked;
        w.queue.push_back(Queued::Reopen { asked, said });
        self.changed.notify_all();
        asked
    }

    /// The outcome of reopen `asked`, once made; `None` when it was not made within `timeout`
    /// (a file system that does not answer) or the writer has ended.
    pub fn wait_reopened(&self, asked: u64, timeout: Duration) -> Option<Result<(), String>> {
        let w = self.lock();
        let (w, _) = self
            .changed
            .wait_timeout_while(w, timeout, |w| w.reopened < asked && !w.ended)
            .unwrap_or_else(|e| e.into_inner());
        if w.reopened < asked { None } else { w.outcome.clone() }
    }

    /// No more lines: the writer writes what is queued and ends. Waits at most `timeout` for
    /// that; `true` when it ended.
    pub fn close(&self, timeout: Duration) -> bool {
        let mut w = self.lock();
        w.closing = true;
        self.changed.notify_all();
        let (w, _) = self
            .changed
            .wait_timeout_while(w, timeout, |w| !w.ended)
            .unwrap_or_else(|e| e.into_inner());
        w.ended
    }
}

/// The writer thread: becomes the owner, opens the file, and writes lines as they come,
/// reopening when asked.
fn write_forever(file: &OutputFile, instance: &str) {
    let say = |what: &str| relay::log_line(&format!("pinctl: {instance}: {what}"));
    let mut out = match file.owner.as_ref().map_or(Ok(()), become_owner) {
        Ok(()) => open_output(&file.path),
        Err(e) => Err(format!("cannot take the credentials of its user: {e}")),
    };
    if let Err(e) = &out {
        say(&format!("cannot open output `{}`: {e}: its output is lost", file.path.display()));
    }
    let mut failing = false;
    loop {
        let mut w = file.lock();
        while w.queue.is_empty() && !w.closing {
            w = file.changed.wait(w).unwrap_or_else(|e| e.into_inner());
        }
        let Some(next) = w.queue.pop_front() else {
            // Closing, and nothing left.
            w.ended = true;
            file.changed.notify_all();
            return;
        };
        let line = match next {
            Queued::Line(line) => line,
            Queued::Reopen { asked, said } => {
                drop(w);
                if let Ok(f) = &mut out {
                    let _ = f.flush();
                }
                let opened = open_output(&file.path);
                let outcome = opened.as_ref().map(|_| ()).map_err(Clone::clone);
                match &outcome {
                    Ok(()) if said => say(&format!("output reopened: `{}`", file.path.display())),
                    Ok(()) => {}
                    Err(e) => {
                        say(&format!("cannot reopen output `{}`: {e}", file.path.display()));
                    }
                }
                // A failed reopen keeps the file it had: better the renamed file than nothing.
                if opened.is_ok() || out.is_err() {
                    out = opened;
                }
                let mut w = file.lock();
                w.reopened = asked;
                w.outcome = Some(outcome);
                file.changed.notify_all();
                continue;
            }
        };
        w.bytes -= line.len();
        let dropped = std::mem::take(&mut w.dropped);
        // Lines go out in one write while more are queued, and at once when none is.
        let more = !w.queue.is_empty();
        drop(w);
        if dropped > 0 {
            say(&format!(
                "{dropped} output lines dropped: `{}` was not written fast enough",
                file.path.display()
            ));
        }
        if let Ok(f) = &mut out {
            let written = f.write_all(&line).and_then(|()| if more { Ok(()) } else { f.flush() });
            match written {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    say(&format!(
                        "cannot write output `{}`: {e}: lines are lost until a write succeeds",
                        file.path.display()
                    ));
                }
                Err(_) => {}
            }
        }
    }
}

/// This thread (only) takes the owner's groups, group and user, for good.
fn become_owner(owner: &FileOwner) -> io::Result<()> {
    use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
    let groups: Vec<rustix::fs::Gid> =
        owner.groups.iter().map(|&g| rustix::fs::Gid::from_raw(g)).collect();
    set_thread_groups(&groups)?;
    let gid = rustix::fs::Gid::from_raw(owner.gid);
    set_thread_res_gid(gid, gid, gid)?;
    let uid = rustix::fs::Uid::from_raw(owner.uid);
    set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}

/// Opens `path` for appending as this thread's user, as an instance would open it itself:
/// created with mode 0640, the last component never followed, never blocking on a FIFO, and
/// only a regular file of this user's (or a character device of root's, such as `/dev/null`).
fn open_output(path: &Path) -> Result<io::BufWriter<fs::File>, String> {
    let fd = rustix::fs::open(
        path,
        OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o640),
    )
    .map_err(|e| io::Error::from(e).to_string())?;
    let st = rustix::fs::fstat(&fd).map_err(|e| io::Error::from(e).to_string())?;
    let me = euid();
    let owned = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => st.st_uid == me,
        FileType::CharacterDevice => st.st_uid == 0,
        _ => false,
    };
    if !owned {
        return Err(format!(
            "it is not a regular file of user {me} (someone else's file, a FIFO or a socket?)"
        ));
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::APPEND).map_err(|e| io::Error::from(e).to_string())?;
    Ok(io::BufWriter::with_capacity(64 * 1024, fs::File::from(fd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn an_output_file_is_written_and_reopened_at_its_path() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("db.log");
        let f = OutputFile::start("db-0", &log, None);
        f.line(b"one");
        f.line(b"two");
        // logrotate's `create`: the file is renamed, and pinctl asked to open it again.
        let wait = |what: &str, cond: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !cond() {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait("two lines written", &|| read(&log) == "one\ntwo\n");
        let rotated = d.path().join("db.log.1");
        fs::rename(&log, &rotated).unwrap();
        f.line(b"three");
        let asked = f.ask_reopen();
        assert_eq!(f.wait_reopened(asked, Duration::from_secs(10)), Some(Ok(())));
        f.line(b"four");
        assert!(f.close(Duration::from_secs(10)));
        assert_eq!(read(&rotated), "one\ntwo\nthree\n");
        assert_eq!(read(&log), "four\n");
        // After the end, lines are dropped, and a reopen is not waited for.
        f.line(b"five");
        assert_eq!(read(&log), "four\n");
        assert_eq!(f.wait_reopened(f.ask_reopen(), Duration::from_millis(10)), None);
    }

    #[test]
    fn a_link_or_a_fifo_at_the_path_is_never_written() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(open_output(&link).is_err());
        let f = OutputFile::start("db-0", &link, None);
        f.line(b"never");
        assert!(f.close(Duration::from_secs(10)));
        assert_eq!(read(&victim), "keep");
        let fifo = d.path().join("fifo");
        rustix::fs::mkfifoat(CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        // Without a reader: ENXIO at once, never a wait.
        assert!(open_output(&fifo).is_err());
        // With one: opened, then refused as not a regular file.
        let reader = rustix::fs::open(&fifo, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty());
        assert!(reader.is_ok());
        let e = open_output(&fifo).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }

    #[test]
    fn a_writer_as_another_user_opens_with_that_users_rights() {
        // The thread becomes `nobody` and cannot create a file in a folder only root may
        // write; the test process keeps its own credentials.
        assert_eq!(euid(), 0, "taking another user's credentials needs root (CI runs as root)");
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("nobody.log");
        let nobody = FileOwner { uid: 65534, gid: 65534, groups: vec![65534] };
        let f = OutputFile::start("db-0", &log, Some(nobody.clone()));
        f.line(b"x");
        assert!(f.close(Duration::from_secs(10)));
        assert!(!log.exists(), "nobody created a file in root's 0700 folder");
        assert_eq!(euid(), 0, "the test thread kept root");
        // In a folder of nobody's, the file is created as nobody.
        let dir = d.path().join("nobody");
        fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(d.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let log = dir.join("db.log");
        let f = OutputFile::start("db-0", &log, Some(nobody));
        f.line(b"y");
        assert!(f.close(Duration::from_secs(10)));
        assert_eq!(read(&log), "y\n");
        assert_eq!(fs::metadata(&log).unwrap().uid(), 65534);
    }

    #[test]
    fn fifos_are_made_replaced_and_refused_where_something_else_is() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        let _guard = rt.enter();
        let d = tempfile::tempdir().unwrap();
        let fifos = Fifos::beside(&d.path().join("db.state.json"));
        assert_eq!(fifos.dir, d.path().join("db.state.output"));
        let (_reader, _writer) = fifos.create("db-0").unwrap();
        let m = fs::symlink_metadata(fifos.path("db-0")).unwrap();
        assert!(m.file_type().is_fifo());
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(&fifos.dir).unwrap().mode() & 0o777, 0o700);
        // Made again for the next start; reopened for an adoption.
        let (_r, _w) = fifos.create("db-0").unwrap();
        assert!(fifos.reopen("db-0").unwrap().is_ok());
        assert!(fifos.reopen("db-1").is_none());
        // A file someone put at an instance's path is neither removed nor read.
        fs::write(fifos.path("db-2"), "not a fifo").unwrap();
        assert!(fifos.create("db-2").is_err());
        assert!(fifos.reopen("db-2").unwrap().is_err());
        assert_eq!(read(&fifos.path("db-2")), "not a fifo");
        fs::remove_file(fifos.path("db-2")).unwrap();
        // A folder others may write is refused.
        fs::set_permissions(&fifos.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        assert!(fifos.create("db-0").is_err());
        fs::set_permissions(&fifos.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        fifos.remove_all();
        assert!(!fifos.dir.exists());
    }
}
