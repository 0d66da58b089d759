//! The kernel files a watch cycle reads for every instance (`memory.numa_stat`,
//! `cgroup.procs`, `/proc/PID/cgroup`, the nodes' counters) and each process's thread list,
//! kept open between cycles on the live machine and read again from offset 0.
//!
//! Opening a file costs a path walk and three system calls (open, fstat, close) on top of the
//! two reads; over 64 instances of four or five files each, that was most of a cycle. The
//! kernel generates these files afresh at every read from offset 0 (`seq_file` restarts its
//! iterator there, Linux 3.11 and later), so a file kept open reads exactly what a new open
//! would. A file whose object went away answers with an error or, for a thread list, with no
//! entries at all (`ENOENT` for a process that exited, even when its PID was reused since,
//! `ENODEV` for a removed cgroup): it is closed and opened again by its path, which says
//! whether there is a new object by that name.
//!
//! Only pseudo-files are held (everything under `/proc` and `/sys`): a regular file such as a
//! PID file can be replaced by a rename, and a descriptor kept open would go on reading the
//! old one. Files and lists not read during a cycle are closed at its end, and at most
//! [`MAX_HELD`] descriptors are kept (and never more than a quarter of `RLIMIT_NOFILE`);
//! beyond that, files are opened for each read as before.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use pinctl_sysfs::fsroot::{max_file_bytes, open_regular, read_all};

/// At most this many descriptors are kept open.
pub const MAX_HELD: usize = 1024;

/// Held files and thread lists of the live machine.
#[derive(Debug)]
pub struct Held {
    files: HashMap<String, Entry<File>>,
    tasks: HashMap<u32, Entry<rustix::fs::Dir>>,
    /// Each process's thread list as listed this cycle (listing it proves the process is
    /// there, and its threads are sampled right after).
    listed: HashMap<u32, Vec<u32>>,
    /// The last listing of each cgroup's folder, for the `hugetlb.*.numa_stat` files it has.
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
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ESRCH | libc::ENODEV | libc::ENXIO | libc::ESTALE)
    )
}

impl Default for Held {
    fn default() -> Self {
        Held::new()
    }
}

impl Held {
    /// An empty set, bounded by [`MAX_HELD`] and by a quarter of this process's soft
    /// `RLIMIT_NOFILE` (the rest is the supervisor's and its instances').
    pub fn new() -> Held {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        let limit = soft.map_or(MAX_HELD, |s| (s / 4).min(MAX_HELD as u64) as usize);
        Held {
            files: HashMap::new(),
            tasks: HashMap::new(),
            listed: HashMap::new(),
            folders: HashMap::new(),
            buf: Vec::with_capacity(4096),
            cycle: 1,
            limit,
        }
    }

    /// Descriptors held now.
    pub fn len(&self) -> usize {
        self.files.len() + self.tasks.len()
    }

    /// Whether no descriptor is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text of the kernel file `/rel`, `None` when it does not exist.
    pub fn read(&mut self, rel: &str) -> io::Result<Option<&str>> {
        let max = max_file_bytes(rel);
        if let Some(e) = self.files.get_mut(rel) {
            match read_from_start(&e.value, &mut self.buf, max) {
                Ok(()) => {
                    e.used = self.cycle;
                    return text(&self.buf).map(Some);
                }
                Err(err) if is_gone(&err) => {
                    self.files.remove(rel);
                }
                Err(err) => return Err(err),
            }
        }
        let file = match open_regular(&Path::new("/").join(rel), false) {
            Ok(Some(f)) => f,
            Ok(None) => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
            }
            Err(e) if is_gone(&e) || e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(None),
            Err(e) => return Err(e),
        };
        match read_from_start(&file, &mut self.buf, max) {
            Ok(()) => {}
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
        if self.len() < self.limit {
            self.files.insert(rel.to_string(), Entry { value: file, used: self.cycle });
        }
        text(&self.buf).map(Some)
    }

    /// The thread ids of process `pid` (sorted), `None` when it is not running.
    pub fn threads(&mut self, pid: u32) -> io::Result<Option<Vec<u32>>> {
        if let Some(tids) = self.listed.get(&pid) {
            return Ok(Some(tids.clone()));
        }
        if let Some(e) = self.tasks.get_mut(&pid) {
            e.value.rewind();
            match list(&mut e.value) {
                // Even a process whose threads all exited but the leader lists `.` and `..`:
                // nothing at all is a process that is gone (rustix ends the list at ENOENT).
                Ok(Some(tids)) => {
                    e.used = self.cycle;
                    self.listed.insert(pid, tids.clone());
                    return Ok(Some(tids));
                }
                Ok(None) => {
                    self.tasks.remove(&pid);
                }
                Err(err) if is_gone(&err) => {
                    self.tasks.remove(&pid);
                }
                Err(err) => return Err(err),
            }
        }
        let dir = match File::open(format!("/proc/{pid}/task")) {
            Ok(d) => d,
            Err(e) if is_gone(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut dir = rustix::fs::Dir::new(dir).map_err(io::Error::from)?;
        let Some(tids) = list(&mut dir)? else { return Ok(None) };
        if self.len() < self.limit {
            self.tasks.insert(pid, Entry { value: dir, used: self.cycle });
        }
        self.listed.insert(pid, tids.clone());
        Ok(Some(tids))
    }

    /// The names in the cgroup folder `/rel`, listed once while the folder is read every
    /// cycle (which `hugetlb.*.numa_stat` files a cgroup has changes only with its parent's
    /// `cgroup.subtree_control`; the list is taken again after a cycle that did not read it).
    pub fn folder(&mut self, rel: &str) -> io::Result<Option<Vec<String>>> {
        if let Some(e) = self.folders.get_mut(rel) {
            e.used = self.cycle;
            return Ok(Some(e.value.clone()));
        }
        let rd = match std::fs::read_dir(Path::new("/").join(rel)) {
            Ok(rd) => rd,
            Err(e) if is_gone(&e) || e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(None),
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

    /// Ends a cycle: closes what it did not read, forgets its thread lists.
    pub fn end_cycle(&mut self) {
        let cycle = self.cycle;
        self.files.retain(|_, e| e.used == cycle);
        self.tasks.retain(|_, e| e.used == cycle);
        self.folders.retain(|_, e| e.used == cycle);
        self.listed.clear();
        self.cycle += 1;
    }
}

/// Reads the whole file from offset 0 into `buf` (at most `max` bytes; more is an error), with
/// `pread` so the descriptor's offset never needs a seek.
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
        Err(io::Error::new(io::ErrorKind::InvalidData, format!("larger than {max} bytes")))
    }
}

/// The text of a kernel file (some end their value with a NUL byte).
fn text(buf: &[u8]) -> io::Result<&str> {
    let end = buf.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    std::str::from_utf8(&buf[..end])
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not text"))
}

/// The numeric names of a task folder, sorted; `None` when it lists nothing at all.
fn list(dir: &mut rustix::fs::Dir) -> io::Result<Option<Vec<u32>>> {
    let mut any = false;
    let mut tids = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io::Error::from)?;
        any = true;
        if let Some(tid) = entry.file_name().to_str().ok().and_then(|n| n.parse().ok()) {
            tids.push(tid);
        }
    }
    tids.sort_unstable();
    Ok(any.then_some(tids))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own files, read through held descriptors, agree with a fresh open, and a
    /// process that exits is seen gone through its held thread list.
    #[test]
    fn held_files_read_what_a_fresh_open_reads() {
        let mut held = Held::new();
        let rel = format!("proc/{}/status", std::process::id());
        let hwm = |t: &str| -> u64 {
            let line = t.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap();
            line.trim().trim_end_matches(" kB").parse().unwrap()
        };
        let before = hwm(held.read(&rel).unwrap().unwrap());
        held.end_cycle();
        // The process's peak resident set grows by 64 MiB; the held file says so, as a fresh
        // open does.
        let grow = vec![1u8; 64 << 20];
        std::hint::black_box(&grow);
        let after = hwm(held.read(&rel).unwrap().unwrap());
        assert!(after >= before + 60 * 1024, "{before} kB then {after} kB");
        // A fresh open a moment later says the same, give or take what reading allocated.
        let fresh = hwm(&std::fs::read_to_string(format!("/{rel}")).unwrap());
        assert!((after..=after + 1024).contains(&fresh), "held {after} kB, fresh {fresh} kB");
        assert_eq!(held.files.len(), 1, "one descriptor, read again");
        assert!(held.read("proc/self/no-such-file").unwrap().is_none());

        let mut child = std::process::Command::new("sleep").arg("100").spawn().unwrap();
        let pid = child.id();
        let tids = held.threads(pid).unwrap().unwrap();
        assert_eq!(tids, [pid]);
        held.end_cycle();
        assert_eq!(held.threads(pid).unwrap().unwrap(), [pid], "the held list, again");
        held.end_cycle();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(held.threads(pid).unwrap(), None, "an exited process lists nothing");
        assert!(!held.tasks.contains_key(&pid));
    }

    /// What a cycle does not read is closed at its end.
    #[test]
    fn a_cycle_closes_what_it_did_not_read() {
        let mut held = Held::new();
        held.read("proc/self/stat").unwrap().unwrap();
        held.read("proc/self/statm").unwrap().unwrap();
        held.end_cycle();
        held.read("proc/self/stat").unwrap().unwrap();
        held.end_cycle();
        assert_eq!(held.files.keys().collect::<Vec<_>>(), ["proc/self/stat"]);
        held.end_cycle();
        assert!(held.is_empty());
    }
}
