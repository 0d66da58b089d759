//! The live machine's kernel files that a watch cycle reads for every instance
//! (`memory.numa_stat`, `cgroup.procs`, `/proc/PID/cgroup`, the nodes' counters) and each
//! process's thread list, kept open between cycles and read again from offset 0: a
//! [`KernelFiles`] the per-file readers read through as they read an [`FsRoot`](crate::FsRoot).
//!
//! Opening a file costs a path walk and three system calls (open, fstat, close) on top of the
//! two reads; over 64 instances of four or five files each, that was most of a cycle. The
//! kernel generates these files afresh at every read from offset 0 (`seq_file` restarts its
//! iterator there, Linux 3.11 and later), so a file kept open reads exactly what a new open
//! would. A file whose object went away answers with an error or, for a folder of `/proc`,
//! with no entries at all (`ENOENT` for a process that exited, even when its PID was reused
//! since, `ENODEV` for a removed cgroup): it is closed and opened again by its path, which
//! says whether there is a new object by that name.
//!
//! Only pseudo-files are held (everything under `/proc` and `/sys`): a regular file such as a
//! PID file can be replaced by a rename, and a descriptor kept open would go on reading the
//! old one. A folder of `/proc` (a process's `task`) is listed again at the first read of each
//! cycle, the later ones of the cycle answered from that listing (listing it proves the process
//! is there, and its threads are read right after); a folder of `/sys` (a cgroup's, for its
//! `hugetlb.*.numa_stat` files, which change only with its parent's `cgroup.subtree_control`)
//! is listed once while it is read every cycle. Files and folders not read during a cycle are
//! closed at its end, and at most [`MAX_HELD`] descriptors are kept (and never more than a
//! quarter of `RLIMIT_NOFILE`); beyond that, files are opened for each read.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

use pinctl_trust::{open_regular, read_all};

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, max_file_bytes};

/// At most this many descriptors are kept open.
pub const MAX_HELD: usize = 1024;

/// The live machine's kernel files and folders a watcher reads every cycle, kept open between
/// reads (re-read from offset 0).
#[derive(Debug)]
pub struct KeptOpen {
    files: HashMap<String, Entry<File>>,
    dirs: HashMap<String, Entry<rustix::fs::Dir>>,
    /// Each `/proc` folder as listed this cycle.
    listed: HashMap<String, Vec<String>>,
    /// The last listing of each `/sys` folder.
    folders: HashMap<String, Entry<Vec<String>>>,
    buf: Vec<u8>,
    cycle: u64,
    limit: usize,
}

#[derive(Debug)]
struct Entry<T> {
    value: T,
    used: u64,
}

/// Whether an error means the object behind a held descriptor is gone (or was never there).
fn is_gone(e: &io::Error) -> bool {
    matches!(
        Errno::from_io_error(e),
        Some(Errno::NOENT | Errno::SRCH | Errno::NODEV | Errno::NXIO | Errno::STALE)
    )
}

/// Whether an open failed because there is nothing by that path.
fn is_absent(e: &io::Error) -> bool {
    is_gone(e) || Errno::from_io_error(e) == Some(Errno::NOTDIR)
}

impl Default for KeptOpen {
    fn default() -> Self {
        KeptOpen::new()
    }
}

impl KeptOpen {
    /// An empty set, bounded by [`MAX_HELD`] and by a quarter of this process's soft
    /// `RLIMIT_NOFILE` (the rest is the supervisor's and its instances').
    pub fn new() -> KeptOpen {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let limit = soft.map_or(MAX_HELD, |s| (s / 4).min(MAX_HELD as u64) as usize);
        KeptOpen {
            files: HashMap::new(),
            dirs: HashMap::new(),
            listed: HashMap::new(),
            folders: HashMap::new(),
            buf: Vec::with_capacity(4096),
            cycle: 1,
            limit,
        }
    }

    /// Descriptors held now.
    pub fn len(&self) -> usize {
        self.files.len() + self.dirs.len()
    }

    /// Whether no descriptor is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends a cycle: closes what it did not read, forgets its listings of `/proc`.
    pub fn end_cycle(&mut self) {
        let cycle = self.cycle;
        self.files.retain(|_, e| e.used == cycle);
        self.dirs.retain(|_, e| e.used == cycle);
        self.folders.retain(|_, e| e.used == cycle);
        self.listed.clear();
        self.cycle += 1;
    }

    /// The bytes of the kernel file `/rel` in the buffer; `false` when it does not exist.
    fn load(&mut self, rel: &str) -> io::Result<bool> {
        let max = max_file_bytes(rel);
        if let Some(e) = self.files.get_mut(rel) {
            match read_from_start(&e.value, &mut self.buf, max) {
                Ok(()) => {
                    e.used = self.cycle;
                    return Ok(true);
                }
                Err(err) if is_gone(&err) => {
                    self.files.remove(rel);
                }
                Err(err) => return Err(err),
            }
        }
        let file = match open_regular(&Path::new("/").join(rel), false) {
            Ok(Some(f)) => f,
            Ok(None) => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
            Err(e) if is_absent(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        match read_from_start(&file, &mut self.buf, max) {
            Ok(()) => {}
            Err(e) if is_gone(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
        if self.len() < self.limit {
            self.files.insert(rel.to_string(), Entry { value: file, used: self.cycle });
        }
        Ok(true)
    }

    /// A `/proc` folder listed this cycle.
    fn proc_names(&mut self, rel: &str) -> io::Result<Option<Vec<String>>> {
        if let Some(names) = self.listed.get(rel) {
            return Ok(Some(names.clone()));
        }
        if let Some(e) = self.dirs.get_mut(rel) {
            e.value.rewind();
            match list(&mut e.value) {
                // Even a process whose threads all exited but the leader lists `.` and `..`:
                // nothing at all is a process that is gone (rustix ends the list at ENOENT).
                Ok(Some(names)) => {
                    e.used = self.cycle;
                    self.listed.insert(rel.to_string(), names.clone());
                    return Ok(Some(names));
                }
                Ok(None) => {
                    self.dirs.remove(rel);
                }
                Err(err) if is_gone(&err) => {
                    self.dirs.remove(rel);
                }
                Err(err) => return Err(err),
            }
        }
        let dir = match File::open(Path::new("/").join(rel)) {
            Ok(d) => d,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut dir = rustix::fs::Dir::new(dir).map_err(io::Error::from)?;
        let Some(names) = list(&mut dir)? else { return Ok(None) };
        if self.len() < self.limit {
            self.dirs.insert(rel.to_string(), Entry { value: dir, used: self.cycle });
        }
        self.listed.insert(rel.to_string(), names.clone());
        Ok(Some(names))
    }

    /// A `/sys` folder, listed once while it is read every cycle.
    fn sys_names(&mut self, rel: &str) -> io::Result<Option<Vec<String>>> {
        if let Some(e) = self.folders.get_mut(rel) {
            e.used = self.cycle;
            return Ok(Some(e.value.clone()));
        }
        let rd = match std::fs::read_dir(Path::new("/").join(rel)) {
            Ok(rd) => rd,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut names = Vec::new();
        for entry in rd {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        self.folders.insert(rel.to_string(), Entry { value: names.clone(), used: self.cycle });
        Ok(Some(names))
    }
}

impl KernelFiles for KeptOpen {
    fn text(&mut self, rel: &str) -> Result<Option<&str>, DiscoveryError> {
        match self.load(rel) {
            Ok(false) => Ok(None),
            Ok(true) => {
                // Some sysfs values end with a NUL byte.
                let end = self.buf.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                match std::str::from_utf8(&self.buf[..end]) {
                    Ok(text) => Ok(Some(text)),
                    Err(_) => Err(DiscoveryError::NotText { path: self.full(rel) }),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                Err(DiscoveryError::NotRegular { path: self.full(rel) })
            }
            Err(e) if e.kind() == io::ErrorKind::FileTooLarge => {
                Err(DiscoveryError::TooLarge { path: self.full(rel), max: max_file_bytes(rel) })
            }
            Err(source) => Err(DiscoveryError::Io { path: self.full(rel), source }),
        }
    }

    fn names(&mut self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError> {
        let names = match rel == "proc" || rel.starts_with("proc/") {
            true => self.proc_names(rel),
            false => self.sys_names(rel),
        };
        names.map_err(|source| DiscoveryError::Io { path: self.full(rel), source })
    }

    /// A process's folder exists while its `task` folder lists anything (the listing is the
    /// one the cycle then reads its threads from).
    fn is_dir(&mut self, rel: &str) -> bool {
        let process =
            rel.strip_prefix("proc/").is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
        match process {
            true => matches!(self.names(&format!("{rel}/task")), Ok(Some(_))),
            false => Path::new("/").join(rel).is_dir(),
        }
    }

    fn full(&self, rel: &str) -> PathBuf {
        Path::new("/").join(rel)
    }
}

/// Reads the whole file from offset 0 into `buf` (at most `max` bytes; more is a
/// `FileTooLarge` error), with `pread` so the descriptor's offset never needs a seek.
fn read_from_start(file: &File, buf: &mut Vec<u8>, max: usize) -> io::Result<()> {
    /// `Read` over positioned reads from offset 0, for [`read_all`]'s bounded loop.
    struct FromStart<'f>(&'f File, u64);
    impl io::Read for FromStart<'_> {
        fn read(&mut self, chunk: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read_at(chunk, self.1)?;
            self.1 += n as u64;
            Ok(n)
        }
    }
    buf.clear();
    if read_all(FromStart(file, 0), buf, max)? {
        Ok(())
    } else {
        Err(io::Error::from(io::ErrorKind::FileTooLarge))
    }
}

/// The names in a folder but `.` and `..`; `None` when it lists nothing at all.
fn list(dir: &mut rustix::fs::Dir) -> io::Result<Option<Vec<String>>> {
    let mut any = false;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io::Error::from)?;
        any = true;
        match entry.file_name().to_str() {
            Ok("." | "..") | Err(_) => {}
            Ok(name) => names.push(name.to_string()),
        }
    }
    Ok(any.then_some(names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::pid::{Pid, status, task};

    /// This process's own files, read through held descriptors, agree with a fresh open, and a
    /// process that exits is seen gone through its held thread list.
    #[test]
    fn held_files_read_what_a_fresh_open_reads() {
        let mut held = KeptOpen::new();
        let me = std::process::id();
        let rss = |held: &mut KeptOpen| status::read(held, me).unwrap().unwrap().rss_bytes.unwrap();
        let before = rss(&mut held);
        held.end_cycle();
        // The process's resident set grows by 64 MiB; the held file says so, as a fresh open
        // does.
        let grow = vec![1u8; 64 << 20];
        std::hint::black_box(&grow);
        let after = rss(&mut held);
        assert!(after >= before + (60 << 20), "{before} then {after}");
        let fresh = status::read(&mut crate::FsRoot::new("/".as_ref()), Pid::Current);
        let fresh = fresh.unwrap().unwrap().rss_bytes.unwrap();
        assert!(fresh.abs_diff(after) < 4 << 20, "held {after}, fresh {fresh}");
        assert_eq!(held.files.len(), 1, "one descriptor, read again");
        drop(grow);
        assert!(held.text("proc/self/no-such-file").unwrap().is_none());

        let mut child = std::process::Command::new("sleep").arg("100").spawn().unwrap();
        let pid = child.id();
        assert_eq!(task::read(&mut held, pid).unwrap().unwrap(), [pid]);
        held.end_cycle();
        assert!(task::exists(&mut held, pid));
        assert_eq!(task::read(&mut held, pid).unwrap().unwrap(), [pid], "the held list, again");
        held.end_cycle();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(task::read(&mut held, pid).unwrap(), None, "an exited process lists nothing");
        assert!(!task::exists(&mut held, pid));
        assert!(!held.dirs.contains_key(&format!("proc/{pid}/task")));
    }

    /// What a cycle does not read is closed at its end.
    #[test]
    fn a_cycle_closes_what_it_did_not_read() {
        let mut held = KeptOpen::new();
        held.text("proc/self/stat").unwrap().unwrap();
        held.text("proc/self/statm").unwrap().unwrap();
        held.end_cycle();
        held.text("proc/self/stat").unwrap().unwrap();
        held.end_cycle();
        assert_eq!(held.files.keys().collect::<Vec<_>>(), ["proc/self/stat"]);
        held.end_cycle();
        assert!(held.is_empty());
    }
}
