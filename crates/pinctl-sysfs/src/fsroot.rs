//! File access relative to a root directory or an in-memory [`Tree`] (a capture read by
//! pinctl-capture), with one reusable buffer, and an optional record of everything read (what
//! `pinctl topology --capture` packs).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use pinctl_topology::DiscoveryWarning;
use pinctl_topology::text::{escaped, shown};

use pinctl_trust::{open_regular, read_all};

use crate::error::DiscoveryError;
use crate::parse::ParseError;

/// A file tree held elsewhere than in a directory (a tarball read into memory). Paths are
/// relative and normalized; lookups follow symbolic links the way the kernel does.
pub trait Tree: std::fmt::Debug {
    /// The bytes of a regular file, `None` when there is none.
    fn read(&self, path: &str) -> Option<&[u8]>;
    /// The names in a folder, `None` when there is none.
    fn list(&self, path: &str) -> Option<Vec<String>>;
    /// `Some(Some(target))` for a symbolic link, `Some(None)` for anything else that exists,
    /// `None` when nothing does.
    fn read_link(&self, path: &str) -> Option<Option<&str>>;
    /// Whether a folder exists there.
    fn is_dir(&self, path: &str) -> bool;
}

/// What discovery touched, in the order it did.
#[derive(Debug)]
pub enum Recorded {
    /// A regular file and the bytes read from it.
    File(String, Vec<u8>),
    /// A symbolic link and its target as stored.
    Link(String, PathBuf),
    /// A directory that was listed.
    Dir(String),
    /// A name seen in a listed directory but not read: an empty file or folder stands in for
    /// it so the listing is the same in the capture.
    Placeholder { rel: String, is_dir: bool },
}

/// Everything an [`FsRoot::recording`] read, for a capture to pack.
#[derive(Debug, Default)]
pub struct Recorder {
    seen: HashMap<String, usize>,
    /// What was read, in order.
    pub items: Vec<Recorded>,
}

impl Recorder {
    fn add(&mut self, rel: &str, item: impl FnOnce() -> Recorded) {
        match self.seen.get(rel) {
            // What discovery really read replaces a stand-in from a listing.
            Some(&i) if matches!(self.items[i], Recorded::Placeholder { .. }) => {
                self.items[i] = item();
            }
            Some(_) => {}
            None => {
                self.seen.insert(rel.to_string(), self.items.len());
                self.items.push(item());
            }
        }
    }
}

/// Largest file read under `sys/`: a sysfs attribute is at most a page (64 KiB on kernels with
/// 64 KiB pages); anything longer is not what the kernel writes there.
pub const MAX_SYSFS_FILE_BYTES: usize = 64 << 10;

/// Largest other file read (procfs: `mountinfo` of a host with thousands of mounts,
/// `net/ipv6_route` of a router, `numa_maps` of a process with `vm.max_map_count` = 262144
/// mappings): 64 MiB.
pub const MAX_PROC_FILE_BYTES: usize = 64 << 20;

/// Largest file read of the cgroup filesystem (mounted under `sys/`, but not sysfs): a
/// `cgroup.procs` lists every process of its cgroup, about 100,000 PIDs in 1 MiB.
pub const MAX_CGROUP_FILE_BYTES: usize = 1 << 20;

/// The most discovery reads of the file at `rel` (see [`MAX_SYSFS_FILE_BYTES`]). Drivers'
/// files under `proc/driver/` (NVIDIA's GPU `information`: a dozen short lines) are held to the
/// sysfs size too.
pub fn max_file_bytes(rel: &str) -> usize {
    let under = |d: &str| rel.strip_prefix(d).is_some_and(|r| r.is_empty() || r.starts_with('/'));
    if crate::cgroup::MOUNTS.iter().any(|m| under(m)) {
        MAX_CGROUP_FILE_BYTES
    } else if under("sys") || under("proc/driver") {
        MAX_SYSFS_FILE_BYTES
    } else {
        MAX_PROC_FILE_BYTES
    }
}

/// A sysfs/procfs tree rooted at a directory. Paths given to its methods are relative
/// (`sys/devices/system/node/online`), normalized, and never pass through a symbolic link
/// except where [`FsRoot::link`] resolved it. Under a root other than `/`, symbolic links are
/// resolved inside the root as a chroot would (absolute targets start at the root) and a link
/// that climbs out of it is refused, so nothing outside the tree is read or captured. Only
/// regular files are read (a FIFO or a device is an error, never a wait), and at most
/// [`max_file_bytes`] of each.
#[derive(Debug)]
pub struct FsRoot<'t> {
    /// The directory, or for an in-memory tree the archive's path (for messages).
    root: PathBuf,
    /// An archive read into memory and the folder of it that is the root.
    tree: Option<(&'t dyn Tree, String)>,
    path: PathBuf,
    bytes: Vec<u8>,
    recorder: Option<Recorder>,
    /// Whether a broken file read through [`FsRoot::fact`] is a warning instead of an error.
    degrading: bool,
    /// The warnings of a degrading read, one per file, in the order met.
    warnings: Vec<DiscoveryWarning>,
}

/// What [`FsRoot::fact`] found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact<T> {
    /// No such file.
    Absent,
    /// The file is there but could not be used; a warning says so and what was assumed.
    Broken,
    /// The parsed content.
    Value(T),
}

impl<T> Fact<T> {
    /// The value, `None` when absent or broken.
    pub fn value(self) -> Option<T> {
        match self {
            Fact::Value(v) => Some(v),
            Fact::Absent | Fact::Broken => None,
        }
    }
}

/// What is wrong with a file, for a warning, when `e` is a fault of that file alone that
/// discovery can work around; `None` for faults of the whole tree (a link out of the root, an
/// id beyond the ceilings), which stay errors.
fn file_problem(e: &DiscoveryError, text: Option<&str>) -> Option<String> {
    Some(match e {
        DiscoveryError::Parse { .. } if text.is_some_and(|t| t.trim().is_empty()) => {
            "is empty".to_string()
        }
        DiscoveryError::Parse { source, .. } => match &source.source {
            Some(why) => format!("does not parse ({source}: {why})"),
            None => format!("does not parse ({source})"),
        },
        DiscoveryError::NotText { .. } => "is not UTF-8 text".to_string(),
        DiscoveryError::NotRegular { .. } => {
            "is not a regular file (a FIFO, socket or device?) and was not read".to_string()
        }
        DiscoveryError::TooLarge { max, .. } => {
            format!(
                "is larger than {max} bytes, more than the kernel ever writes there, and was not read"
            )
        }
        DiscoveryError::Io { source, .. } => format!("cannot be read ({source})"),
        _ => return None,
    })
}

fn is_absent(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
        || matches!(Errno::from_io_error(e), Some(Errno::NXIO | Errno::NODEV))
}

impl<'t> FsRoot<'t> {
    /// Files under the directory `root`.
    pub fn new(root: &Path) -> Self {
        FsRoot {
            root: root.to_path_buf(),
            tree: None,
            path: PathBuf::with_capacity(256),
            bytes: Vec::with_capacity(4096),
            recorder: None,
            degrading: false,
            warnings: Vec::new(),
        }
    }

    /// Files under `root`, recording everything read (see [`FsRoot::take_recorder`]).
    pub fn recording(root: &Path) -> Self {
        FsRoot { recorder: Some(Recorder::default()), ..FsRoot::new(root) }
    }

    /// The folder `root` of an in-memory archive; `archive` names it in messages.
    pub fn in_memory(tree: &'t dyn Tree, root: &str, archive: &Path) -> Self {
        let shown = if root.is_empty() { archive.to_path_buf() } else { archive.join(root) };
        FsRoot { tree: Some((tree, root.to_string())), ..FsRoot::new(&shown) }
    }

    /// The directory (or the archive) files are read under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What a recording root read so far.
    pub fn take_recorder(&mut self) -> Option<Recorder> {
        self.recorder.take()
    }

    /// Whether [`FsRoot::fact`] turns a broken file into a warning (discovery of a whole
    /// topology) or an error (the launcher's single facts, where an assumption would silently
    /// change a placement). Returns the previous setting.
    pub fn set_degrading(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.degrading, on)
    }

    /// The warnings of degrading reads so far, emptied.
    pub fn take_warnings(&mut self) -> Vec<DiscoveryWarning> {
        std::mem::take(&mut self.warnings)
    }

    /// Records that `rel` could not be used and what was assumed, once per file.
    pub fn warn(&mut self, rel: &str, problem: String, assumed: impl FnOnce() -> String) {
        // Whole (a path is at most PATH_MAX): a shortened one would not name the file.
        let file = escaped(rel);
        if !self.warnings.iter().any(|w| w.file == file) {
            self.warnings.push(DiscoveryWarning { file, problem, assumed: assumed() });
        }
    }

    fn set_path(&mut self, rel: &str) {
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(rel);
    }

    /// The full path of `rel` (for error messages).
    pub fn full(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The text of a file, `None` when it does not exist.
    pub fn read(&mut self, rel: &str) -> Result<Option<&str>, DiscoveryError> {
        if self.load(rel)? { Ok(Some(self.loaded())) } else { Ok(None) }
    }

    /// The bytes of a file that need not be text (`cmdline`, `environ`), `None` when it does
    /// not exist.
    pub fn read_bytes(&mut self, rel: &str) -> Result<Option<&[u8]>, DiscoveryError> {
        if self.load_bytes(rel)? { Ok(Some(&self.bytes)) } else { Ok(None) }
    }

    /// The text [`FsRoot::load`] checked.
    fn loaded(&self) -> &str {
        std::str::from_utf8(&self.bytes).unwrap_or_default()
    }

    /// Reads a file into the buffer as checked UTF-8; `false` when it does not exist.
    fn load(&mut self, rel: &str) -> Result<bool, DiscoveryError> {
        if !self.load_bytes(rel)? {
            return Ok(false);
        }
        match std::str::from_utf8(&self.bytes) {
            Ok(_) => Ok(true),
            Err(_) => Err(DiscoveryError::NotText { path: self.path.clone() }),
        }
    }

    /// Reads a file into the buffer, trailing NUL bytes cut; `false` when it does not exist.
    fn load_bytes(&mut self, rel: &str) -> Result<bool, DiscoveryError> {
        self.set_path(rel);
        self.bytes.clear();
        if let Some((tree, top)) = &self.tree {
            match tree.read(&join(top, rel)) {
                Some(data) if data.len() > max_file_bytes(rel) => {
                    let max = max_file_bytes(rel);
                    return Err(DiscoveryError::TooLarge { path: self.path.clone(), max });
                }
                Some(data) => self.bytes.extend_from_slice(data),
                None => return Ok(false),
            }
        } else {
            if !self.resolve_inside(rel, true)? {
                return Ok(false);
            }
            let max = max_file_bytes(rel);
            let res = open_regular(&self.path, self.confined()).and_then(|f| match f {
                Some(f) => read_all(f, &mut self.bytes, max).map(Some),
                None => Ok(None),
            });
            match res {
                Ok(Some(true)) => {}
                Ok(Some(false)) => {
                    return Err(DiscoveryError::TooLarge { path: self.path.clone(), max });
                }
                Ok(None) => return Err(DiscoveryError::NotRegular { path: self.path.clone() }),
                Err(e) if is_absent(&e) => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::IsADirectory => return Ok(false),
                Err(source) => return Err(DiscoveryError::Io { path: self.path.clone(), source }),
            }
        }
        if let Some(rec) = &mut self.recorder {
            let bytes = &self.bytes;
            rec.add(rel, || Recorded::File(rel.to_string(), bytes.clone()));
        }
        // Some captures (hwloc's) end sysfs values with a NUL byte.
        while self.bytes.last() == Some(&0) {
            self.bytes.pop();
        }
        Ok(true)
    }

    /// Reads and parses a file discovery can do without. Degrading, a file that is there but
    /// cannot be used (unreadable, refused, not text, empty where the kernel writes a value,
    /// not parsing) becomes one warning naming it and `assumed`, and [`Fact::Broken`];
    /// otherwise it is the error [`parsed`] gives.
    pub fn fact<T>(
        &mut self,
        rel: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
        assumed: impl FnOnce() -> String,
    ) -> Result<Fact<T>, DiscoveryError> {
        let err = match self.load(rel) {
            Ok(false) => return Ok(Fact::Absent),
            Ok(true) => match parse(self.loaded()) {
                Ok(v) => return Ok(Fact::Value(v)),
                Err(source) => DiscoveryError::Parse { path: self.full(rel), source },
            },
            Err(e) => e,
        };
        let text = matches!(err, DiscoveryError::Parse { .. }).then(|| self.loaded());
        match file_problem(&err, text) {
            Some(problem) if self.degrading => {
                self.warn(rel, problem, assumed);
                Ok(Fact::Broken)
            }
            _ => Err(err),
        }
    }

    /// The text of a file discovery can do without, as [`FsRoot::fact`] treats it: `None`
    /// when absent or (degrading) broken.
    pub fn text_fact(
        &mut self,
        rel: &str,
        assumed: impl FnOnce() -> String,
    ) -> Result<Option<&str>, DiscoveryError> {
        match self.load(rel) {
            Ok(true) => Ok(Some(self.loaded())),
            Ok(false) => Ok(None),
            Err(err) => match file_problem(&err, None) {
                Some(problem) if self.degrading => {
                    self.warn(rel, problem, assumed);
                    Ok(None)
                }
                _ => Err(err),
            },
        }
    }

    /// Names in a directory (unsorted), `None` when it does not exist.
    pub fn list(&mut self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError> {
        if let Some((tree, top)) = &self.tree {
            return Ok(tree.list(&join(top, rel)));
        }
        if !self.resolve_inside(rel, true)? {
            return Ok(None);
        }
        let rd = match fs::read_dir(&self.path) {
            Ok(rd) => rd,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(source) => return Err(DiscoveryError::Io { path: self.path.clone(), source }),
        };
        let mut names = Vec::new();
        for entry in rd {
            let entry =
                entry.map_err(|source| DiscoveryError::Io { path: self.path.clone(), source })?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            if let Some(rec) = &mut self.recorder {
                let child = format!("{rel}/{name}");
                let kind = entry.file_type().ok();
                if kind.is_some_and(|k| k.is_symlink()) {
                    if let Ok(target) = fs::read_link(entry.path()) {
                        rec.add(&child, || Recorded::Link(child.clone(), target));
                    }
                } else {
                    let is_dir = kind.is_some_and(|k| k.is_dir());
                    rec.add(&child, || Recorded::Placeholder { rel: child.clone(), is_dir });
                }
            }
            names.push(name);
        }
        if let Some(rec) = &mut self.recorder {
            rec.add(rel, || Recorded::Dir(rel.to_string()));
        }
        Ok(Some(names))
    }

    /// Where `rel` leads: the normalized relative target of a symbolic link (absolute targets
    /// are taken relative to the root), `rel` itself when it is not a link, `None` when it does
    /// not exist.
    pub fn link(&mut self, rel: &str) -> Result<Option<String>, DiscoveryError> {
        if let Some((tree, top)) = &self.tree {
            return Ok(match tree.read_link(&join(top, rel)) {
                None => None,
                Some(None) => Some(rel.to_string()),
                Some(Some(t)) if t.starts_with('/') => Some(normalize(t)),
                Some(Some(t)) => Some(normalize(&format!("{}/{t}", parent(rel)))),
            });
        }
        if !self.resolve_inside(rel, false)? {
            return Ok(None);
        }
        match fs::read_link(&self.path) {
            Ok(target) => {
                let resolved = match target.to_str() {
                    Some(t) if t.starts_with('/') => normalize(t),
                    Some(t) => normalize(&format!("{}/{t}", parent(rel))),
                    None => return Ok(None),
                };
                if let Some(rec) = &mut self.recorder {
                    rec.add(rel, || Recorded::Link(rel.to_string(), target));
                }
                Ok(Some(resolved))
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                // Not a symlink: some dumps store class entries as real directories.
                Ok(fs::symlink_metadata(&self.path).is_ok().then(|| rel.to_string()))
            }
            Err(e) if is_absent(&e) => Ok(None),
            Err(source) => Err(DiscoveryError::Io { path: self.path.clone(), source }),
        }
    }

    /// Whether anything exists at `rel` (a broken link counts as nothing).
    pub fn exists(&mut self, rel: &str) -> bool {
        if let Some((tree, top)) = &self.tree {
            let path = join(top, rel);
            return tree.read(&path).is_some() || tree.is_dir(&path);
        }
        matches!(self.resolve_inside(rel, true), Ok(true)) && fs::metadata(&self.path).is_ok()
    }

    /// Whether `rel` exists as a directory.
    pub fn is_dir(&mut self, rel: &str) -> bool {
        if let Some((tree, top)) = &self.tree {
            return tree.is_dir(&join(top, rel));
        }
        matches!(self.resolve_inside(rel, true), Ok(true)) && self.path.is_dir()
    }

    /// Whether links are resolved inside the root (every root but the live machine's `/`).
    fn confined(&self) -> bool {
        self.root != Path::new("/")
    }

    /// Sets `self.path` to where `rel` leads under the root, following symbolic links in every
    /// component (and in the last one when `follow_last`) inside the root, as a chroot would.
    /// `Ok(false)` when a component does not exist; an error for a link that climbs out of
    /// the root or loops. Under `/` the kernel resolves, so this only joins.
    fn resolve_inside(&mut self, rel: &str, follow_last: bool) -> Result<bool, DiscoveryError> {
        if !self.confined() {
            self.set_path(rel);
            return Ok(true);
        }
        let mut pending: Vec<String> =
            rel.split('/').filter(|c| !c.is_empty()).rev().map(str::to_string).collect();
        let mut current: Vec<String> = Vec::new();
        let mut hops = 0;
        // The last link followed: a `..` that climbs out of the root came from its target, so
        // the error names it, not the root the walk had reached.
        let mut link: Option<PathBuf> = None;
        let refuse = |link: &Option<PathBuf>, at: &[String]| DiscoveryError::LinkOutsideRoot {
            path: link.clone().unwrap_or_else(|| self.root.join(at.join("/"))),
            root: self.root.clone(),
        };
        while let Some(comp) = pending.pop() {
            match comp.as_str() {
                "." => continue,
                ".." => {
                    if current.pop().is_none() {
                        return Err(refuse(&link, &current));
                    }
                    continue;
                }
                _ => {}
            }
            current.push(comp);
            let last = pending.is_empty();
            let here = self.root.join(current.join("/"));
            let meta = match fs::symlink_metadata(&here) {
                Ok(m) => m,
                Err(e) if is_absent(&e) => return Ok(false),
                Err(source) => return Err(DiscoveryError::Io { path: here, source }),
            };
            if !meta.file_type().is_symlink() || (last && !follow_last) {
                continue;
            }
            hops += 1;
            if hops > MAX_LINKS {
                return Err(refuse(&None, &current));
            }
            let target = fs::read_link(&here)
                .map_err(|source| DiscoveryError::Io { path: here.clone(), source })?;
            link = Some(here);
            let Some(target) = target.to_str() else { return Ok(false) };
            current.pop();
            if target.starts_with('/') {
                current.clear();
            }
            pending.extend(target.split('/').filter(|c| !c.is_empty()).rev().map(str::to_string));
        }
        self.path.clear();
        self.path.push(&self.root);
        self.path.push(current.join("/"));
        Ok(true)
    }
}

/// Where the per-file readers ([`crate::proc`], [`crate::cgroup`], [`crate::node`]) get the
/// kernel's files: an [`FsRoot`] (the live `/` or a captured tree), or the live machine's files
/// kept open between reads ([`crate::held::KeptOpen`]). Paths are relative to the root.
pub trait KernelFiles {
    /// The text of the file at `rel`, `None` when there is none.
    fn text(&mut self, rel: &str) -> Result<Option<&str>, DiscoveryError>;
    /// The names in the folder `rel` (unsorted), `None` when there is none.
    fn names(&mut self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError>;
    /// Whether `rel` is a folder.
    fn is_dir(&mut self, rel: &str) -> bool;
    /// Where `rel` is, for messages.
    fn full(&self, rel: &str) -> PathBuf;
}

impl KernelFiles for FsRoot<'_> {
    fn text(&mut self, rel: &str) -> Result<Option<&str>, DiscoveryError> {
        self.read(rel)
    }
    fn names(&mut self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError> {
        self.list(rel)
    }
    fn is_dir(&mut self, rel: &str) -> bool {
        FsRoot::is_dir(self, rel)
    }
    fn full(&self, rel: &str) -> PathBuf {
        FsRoot::full(self, rel)
    }
}

/// The file at `rel` read through `files` and parsed, `None` when there is none; a parse
/// failure names the file.
pub fn parsed<T>(
    files: &mut dyn KernelFiles,
    rel: &str,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<Option<T>, DiscoveryError> {
    let parsed = match files.text(rel)? {
        None => return Ok(None),
        Some(text) => parse(text),
    };
    parsed.map(Some).map_err(|source| DiscoveryError::Parse { path: files.full(rel), source })
}

/// The ids of the `{prefix}N` entries of `dir` (`cpu0`, `node1`), unsorted; other names are
/// skipped. An id beyond `max` is refused before anything is sized by it.
pub(crate) fn numbered_folders(
    fs: &mut FsRoot,
    dir: &str,
    prefix: &str,
    max: u32,
) -> Result<Vec<u32>, DiscoveryError> {
    let names = fs.list(dir)?.unwrap_or_default();
    let mut ids = Vec::new();
    for name in &names {
        let Some(digits) = crate::parse::folder_number(name, prefix) else { continue };
        match digits.parse::<u32>() {
            Ok(id) if id <= max => ids.push(id),
            _ => {
                return Err(DiscoveryError::IdTooLarge {
                    path: fs.full(&format!("{dir}/{}", shown(name))),
                    max,
                });
            }
        }
    }
    Ok(ids)
}

/// How many symbolic links one lookup may follow (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = pinctl_trust::MAX_LINKS as usize;

/// `a/b/../c/./d` -> `a/c/d`; never climbs above the root.
pub fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The parent of a relative path (`""` at the top).
pub fn parent(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

/// The last component of a relative path.
pub fn basename(rel: &str) -> &str {
    rel.rsplit_once('/').map_or(rel, |(_, b)| b)
}

/// Whether `name` can only mean one entry of a folder: not empty, no `/`, not `.` or `..`.
pub fn is_entry_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}

/// `dir/name`, or `name` at the top.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_by_filesystem() {
        assert_eq!(max_file_bytes("sys/devices/system/node/online"), MAX_SYSFS_FILE_BYTES);
        assert_eq!(max_file_bytes("sys/fs/cgroup/db/cgroup.procs"), MAX_CGROUP_FILE_BYTES);
        assert_eq!(max_file_bytes("sys/fs/cgroupx/a"), MAX_SYSFS_FILE_BYTES);
        assert_eq!(max_file_bytes("proc/driver/nvidia/gpus/x"), MAX_SYSFS_FILE_BYTES);
        assert_eq!(max_file_bytes("proc/1/numa_maps"), MAX_PROC_FILE_BYTES);
    }

    #[test]
    fn normalizes_paths() {
        assert_eq!(
            normalize("sys/class/net/../../devices/pci0000:00/x"),
            "sys/devices/pci0000:00/x"
        );
        assert_eq!(normalize("/sys/./a//b/"), "sys/a/b");
        assert_eq!(normalize("../../x"), "x");
        assert_eq!(parent("sys/class/net"), "sys/class");
        assert_eq!(parent("sys"), "");
        assert_eq!(basename("sys/class/net"), "net");
    }
}
