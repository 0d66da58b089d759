//! A tarball's file tree held in memory, so a capture is read without writing thousands of
//! small files to disk (a sysfs capture has 10-20 thousand entries).

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read};

use pinctl_sysfs::fsroot::{Tree, join, normalize, parent};

#[derive(Debug)]
enum Entry {
    File(Vec<u8>),
    /// A symbolic link and its target as stored.
    Link(String),
    /// A hard link to another entry of the archive.
    HardLink(String),
    Dir(BTreeSet<String>),
}

/// The files, folders and symbolic links of a tar archive, by normalized relative path.
#[derive(Debug, Default)]
pub(crate) struct MemTree {
    entries: HashMap<String, Entry>,
    /// The folder absolute link targets are relative to (the capture's root).
    root: String,
    /// What the tree holds so far, as [`MAX_TREE_BYTES`] counts it.
    held: u64,
}

/// How many symbolic links a lookup may follow (Linux's MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// Largest file a capture may hold: the most discovery reads of any file
/// ([`MAX_PROC_FILE_BYTES`](pinctl_sysfs::fsroot::MAX_PROC_FILE_BYTES)). A header claiming more
/// is refused before anything is allocated for it.
pub const MAX_ENTRY_BYTES: u64 = pinctl_sysfs::fsroot::MAX_PROC_FILE_BYTES as u64;

/// Longest path in a capture: Linux's `PATH_MAX`. Bounds the depth (at most 2048 components)
/// and so the implicit parent folders one entry can create.
pub const MAX_PATH_BYTES: usize = 4096;

/// Most memory a capture's tree may hold, counted as the bytes of every stored path, folder
/// entry name, file and link target plus `ENTRY_OVERHEAD` an entry: the same 256 MiB a
/// capture may decompress to. Bounding each path is not enough: every parent folder is stored
/// under its full path, so 300 entries of 4,096-byte paths of one-letter folders (a 7 KiB
/// gzip) would make 1.46 GiB of folder names.
pub const MAX_TREE_BYTES: u64 = crate::MAX_CAPTURE_BYTES;

/// What an entry costs besides its bytes: its slot in the index and its folder's name set.
const ENTRY_OVERHEAD: u64 = 64;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl MemTree {
    /// Reads every regular file, folder and link of a tar stream; device nodes and fifos are
    /// left out.
    pub(crate) fn from_tar(reader: impl Read) -> io::Result<MemTree> {
        use tar::EntryType;
        let mut tree = MemTree::default();
        tree.entries.insert(String::new(), Entry::Dir(BTreeSet::new()));
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries()? {
            let mut entry = entry?;
            let raw = entry.path_bytes();
            if raw.len() > MAX_PATH_BYTES {
                let shown = pinctl_topology::text::shown(&String::from_utf8_lossy(&raw));
                return Err(invalid(format!(
                    "entry `{shown}`: path longer than {MAX_PATH_BYTES} bytes (PATH_MAX)"
                )));
            }
            let path = normalize(&entry.path()?.to_string_lossy());
            if path.is_empty() {
                continue;
            }
            let size = entry.size();
            let kind = entry.header().entry_type();
            let link = || -> io::Result<String> {
                Ok(entry.link_name()?.map(|l| l.to_string_lossy().into_owned()).unwrap_or_default())
            };
            let item = match kind {
                EntryType::Regular | EntryType::Continuous => {
                    if size > MAX_ENTRY_BYTES {
                        return Err(invalid(format!(
                            "entry `{}` holds {size} bytes, more than {MAX_ENTRY_BYTES} (no file \
                             discovery reads is that large)",
                            pinctl_topology::text::shown(&path)
                        )));
                    }
                    // The header's size is a claim, not a fact: grow as bytes arrive.
                    let mut data = Vec::with_capacity(size.min(64 << 10) as usize);
                    (&mut entry).take(MAX_ENTRY_BYTES).read_to_end(&mut data)?;
                    Entry::File(data)
                }
                EntryType::Symlink => Entry::Link(link()?),
                EntryType::Link => Entry::HardLink(normalize(&link()?)),
                EntryType::Directory => Entry::Dir(BTreeSet::new()),
                _ => continue,
            };
            tree.insert(path, item)?;
        }
        // Read the stream to its end so a compressed capture's checksum and length are
        // checked, and data after the archive (trailing garbage) is refused.
        io::copy(&mut archive.into_inner(), &mut io::sink())?;
        Ok(tree)
    }

    fn insert(&mut self, path: String, item: Entry) -> io::Result<()> {
        // Register the name in every ancestor, creating folders the archive left implicit.
        let mut child = path.clone();
        loop {
            let dir = parent(&child).to_string();
            let name = child[if dir.is_empty() { 0 } else { dir.len() + 1 }..].to_string();
            let new_dir = !self.entries.contains_key(&dir);
            let cost = name.len() as u64
                + ENTRY_OVERHEAD
                + if new_dir { dir.len() as u64 + ENTRY_OVERHEAD } else { 0 };
            match self.entries.entry(dir.clone()).or_insert_with(|| Entry::Dir(BTreeSet::new())) {
                Entry::Dir(names) => {
                    if !names.insert(name) {
                        break;
                    }
                }
                // A file where a folder should be: the archive is inconsistent; keep the file.
                _ => break,
            }
            self.charge(cost, &path)?;
            if dir.is_empty() {
                break;
            }
            child = dir;
        }
        let bytes = match &item {
            Entry::File(data) => data.len(),
            Entry::Link(target) | Entry::HardLink(target) => target.len(),
            Entry::Dir(_) => 0,
        };
        match (self.entries.get_mut(&path), item) {
            // A folder entry after its contents keeps the names already registered.
            (Some(Entry::Dir(_)), Entry::Dir(_)) => {}
            (_, item) => {
                self.charge((path.len() + bytes) as u64 + ENTRY_OVERHEAD, &path)?;
                self.entries.insert(path, item);
            }
        }
        Ok(())
    }

    /// Counts `bytes` more against [`MAX_TREE_BYTES`], refusing the capture past it.
    fn charge(&mut self, bytes: u64, path: &str) -> io::Result<()> {
        self.held = self.held.saturating_add(bytes);
        if self.held > MAX_TREE_BYTES {
            return Err(invalid(format!(
                "entry `{}`: the capture's tree would hold more than {MAX_TREE_BYTES} bytes of \
                 paths, names and files in memory (deep folders repeat their parents' paths)",
                pinctl_topology::text::shown(path)
            )));
        }
        Ok(())
    }

    /// Follows symbolic links in every component of `rel` (and in the last one when
    /// `follow_last`), returning the path of the entry reached.
    fn resolve(&self, rel: &str, follow_last: bool) -> Option<String> {
        let mut pending: Vec<String> =
            rel.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect();
        pending.reverse();
        let mut current = String::new();
        let mut hops = 0;
        while let Some(comp) = pending.pop() {
            let next = match comp.as_str() {
                "." => continue,
                ".." => {
                    current = parent(&current).to_string();
                    continue;
                }
                c if current.is_empty() => c.to_string(),
                c => format!("{current}/{c}"),
            };
            let last = pending.is_empty();
            match self.entries.get(&next)? {
                Entry::Link(target) if !last || follow_last => {
                    hops += 1;
                    if hops > MAX_LINKS {
                        return None;
                    }
                    if target.starts_with('/') {
                        current = self.root.clone();
                    }
                    pending.extend(
                        target.split('/').filter(|c| !c.is_empty()).rev().map(str::to_string),
                    );
                }
                Entry::HardLink(target) if !last => {
                    hops += 1;
                    if hops > MAX_LINKS {
                        return None;
                    }
                    current = String::new();
                    pending.extend(target.split('/').rev().map(str::to_string));
                }
                _ => current = next,
            }
        }
        Some(current)
    }

    fn get(&self, rel: &str, follow_last: bool) -> Option<&Entry> {
        let path = self.resolve(rel, follow_last)?;
        let mut entry = self.entries.get(&path)?;
        let mut hops = 0;
        while let Entry::HardLink(target) = entry {
            hops += 1;
            if hops > MAX_LINKS {
                return None;
            }
            entry = self.entries.get(target)?;
        }
        Some(entry)
    }

    /// The bytes of a regular file.
    pub(crate) fn read(&self, rel: &str) -> Option<&[u8]> {
        match self.get(rel, true)? {
            Entry::File(data) => Some(data),
            _ => None,
        }
    }

    /// The names in a folder.
    pub(crate) fn list(&self, rel: &str) -> Option<Vec<String>> {
        match self.get(rel, true)? {
            Entry::Dir(names) => Some(names.iter().cloned().collect()),
            _ => None,
        }
    }

    /// `Some(Some(target))` for a symbolic link, `Some(None)` for anything else that exists.
    pub(crate) fn read_link(&self, rel: &str) -> Option<Option<&str>> {
        match self.get(rel, false)? {
            Entry::Link(target) => Some(Some(target)),
            _ => Some(None),
        }
    }

    pub(crate) fn is_dir(&self, rel: &str) -> bool {
        matches!(self.get(rel, true), Some(Entry::Dir(_)))
    }

    /// Makes absolute link targets point below `root`.
    pub(crate) fn set_root(&mut self, root: &str) {
        self.root = root.to_string();
    }

    /// The folder holding `sys/` or `proc/`: the top, or the single folder (or the single
    /// folder in the single folder) below it.
    pub(crate) fn find_root(&self) -> Option<String> {
        let is_root = |p: &String| ["sys", "proc"].iter().any(|d| self.is_dir(&join(p, d)));
        let subdirs = |dir: &String| {
            let names = self.list(dir)?;
            Some(names.into_iter().map(|n| join(dir, &n)).filter(|p| self.is_dir(p)).collect())
        };
        walk_to_root(String::new(), is_root, subdirs)
    }
}

impl Tree for MemTree {
    fn read(&self, path: &str) -> Option<&[u8]> {
        MemTree::read(self, path)
    }
    fn list(&self, path: &str) -> Option<Vec<String>> {
        MemTree::list(self, path)
    }
    fn read_link(&self, path: &str) -> Option<Option<&str>> {
        MemTree::read_link(self, path)
    }
    fn is_dir(&self, path: &str) -> bool {
        MemTree::is_dir(self, path)
    }
}

/// Where a capture's sysfs/procfs tree starts, for an unpacked tarball and an in-memory one
/// alike: `top` or a folder at most two single-folder levels down (`hwloc-gather-topology` and
/// `tar -C` wrap the tree once or twice); among several folders, the first by name that holds
/// `sys/` or `proc/`.
pub(crate) fn walk_to_root<P: Ord>(
    top: P,
    is_root: impl Fn(&P) -> bool,
    subdirs: impl Fn(&P) -> Option<Vec<P>>,
) -> Option<P> {
    let mut dir = top;
    for _ in 0..3 {
        if is_root(&dir) {
            return Some(dir);
        }
        let mut below = subdirs(&dir)?;
        below.sort();
        if below.len() == 1 {
            dir = below.pop()?;
        } else {
            return below.into_iter().find(|d| is_root(d));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, link, data) in entries {
            let mut h = tar::Header::new_gnu();
            match link {
                Some(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    b.append_link(&mut h, path, target).unwrap();
                }
                None => {
                    h.set_size(data.len() as u64);
                    h.set_mode(0o644);
                    b.append_data(&mut h, path, *data).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn follows_links_like_a_file_system() {
        let bytes = tar_of(&[
            ("cap/sys/devices/pci0000:00/0000:00:02.0/numa_node", None, b"1\n"),
            ("cap/sys/class/net/eth0", Some("../../devices/pci0000:00/0000:00:02.0"), b""),
            ("cap/proc/self", Some("/proc/42"), b""),
            ("cap/proc/42/status", None, b"x"),
        ]);
        let mut t = MemTree::from_tar(bytes.as_slice()).unwrap();
        assert_eq!(t.find_root().as_deref(), Some("cap"));
        assert_eq!(t.read("cap/proc/self/status"), None, "absolute links start at the root");
        t.set_root("cap");
        assert_eq!(t.read("cap/proc/self/status"), Some(&b"x"[..]));
        assert_eq!(t.read("cap/sys/class/net/eth0/numa_node"), Some(&b"1\n"[..]));
        assert_eq!(
            t.read_link("cap/sys/class/net/eth0"),
            Some(Some("../../devices/pci0000:00/0000:00:02.0"))
        );
        assert_eq!(t.read_link("cap/sys/devices"), Some(None));
        assert_eq!(t.read_link("cap/sys/nothing"), None);
        assert_eq!(t.list("cap/sys/class/net"), Some(vec!["eth0".to_string()]));
        assert!(t.is_dir("cap/sys/class/net/eth0"));
    }
}
