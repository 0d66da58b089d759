//! File access relative to a root directory or an in-memory [`Tree`] (a capture read by
//! pinctl-capture), with one reusable buffer, and an optional record of everything read (what
//! `pinctl topology --capture` packs).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

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

/// A sysfs/procfs tree rooted at a directory. Paths given to its methods are relative
/// (`sys/devices/system/node/online`), normalized, and never pass through a symbolic link
/// except where [`FsRoot::link`] resolved it.
#[derive(Debug)]
pub struct FsRoot<'t> {
    /// The directory, or for an in-memory tree the archive's path (for messages).
    root: PathBuf,
    /// An archive read into memory and the folder of it that is the root.
    tree: Option<(&'t dyn Tree, String)>,
    path: PathBuf,
    bytes: Vec<u8>,
    recorder: Option<Recorder>,
}

fn is_absent(e: &io::Error) -> bool {
    const ENXIO: i32 = 6;
    const ENODEV: i32 = 19;
    matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
        || matches!(e.raw_os_error(), Some(ENXIO | ENODEV))
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
        self.set_path(rel);
        self.bytes.clear();
        if let Some((tree, top)) = &self.tree {
            match tree.read(&join(top, rel)) {
                Some(data) => self.bytes.extend_from_slice(data),
                None => return Ok(None),
            }
        } else {
            let res = fs::File::open(&self.path).and_then(|f| read_all(f, &mut self.bytes));
            match res {
                Ok(_) => {}
                Err(e) if is_absent(&e) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::IsADirectory => return Ok(None),
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
        match std::str::from_utf8(&self.bytes) {
            Ok(s) => Ok(Some(s)),
            Err(_) => Err(DiscoveryError::NotText { path: self.path.clone() }),
        }
    }

    /// Reads and parses a file; a parse failure names the file.
    pub fn parsed<T>(
        &mut self,
        rel: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, DiscoveryError> {
        match self.read(rel)? {
            None => Ok(None),
            Some(text) => match parse(text) {
                Ok(v) => Ok(Some(v)),
                Err(source) => Err(DiscoveryError::Parse { path: self.full(rel), source }),
            },
        }
    }

    /// Names in a directory (unsorted), `None` when it does not exist.
    pub fn list(&mut self, rel: &str) -> Result<Option<Vec<String>>, DiscoveryError> {
        if let Some((tree, top)) = &self.tree {
            return Ok(tree.list(&join(top, rel)));
        }
        self.set_path(rel);
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
        self.set_path(rel);
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

    /// Whether `rel` exists as a directory.
    pub fn is_dir(&mut self, rel: &str) -> bool {
        if let Some((tree, top)) = &self.tree {
            return tree.is_dir(&join(top, rel));
        }
        self.set_path(rel);
        self.path.is_dir()
    }
}

/// Reads a whole file into `buf` without `read_to_end`'s size probe (a `statx` per file:
/// sysfs reports 4096 for every attribute, procfs 0, so the probe never helps here).
fn read_all(mut f: fs::File, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 4096];
    let start = buf.len();
    loop {
        match f.read(&mut chunk) {
            Ok(0) => return Ok(buf.len() - start),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

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

/// `dir/name`, or `name` at the top.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

#[cfg(test)]
mod tests {
    use super::*;

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
