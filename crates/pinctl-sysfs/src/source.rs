//! Where a topology comes from (`--topology SRC` or the live machine) and how each kind of
//! source is loaded.

use std::fmt;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use pinctl_topology::Topology;

use crate::discover::{read_topology, read_with};
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::memtree::MemTree;

/// Where a topology comes from: `--topology SRC` or the live machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySource {
    /// The machine pinctl runs on (`/`).
    Live,
    /// A directory holding a sysfs/procfs tree (`sys/`, `proc/`).
    Root(PathBuf),
    /// A tarball of such a tree (`.tar`, `.tar.gz`, `.tgz`, `.tar.bz2`, `.tar.xz`).
    Tarball(PathBuf),
    /// The JSON `pinctl topology --json` prints.
    Snapshot(PathBuf),
    /// An hwloc XML topology (`lstopo --of xml`, `hwloc-gather-topology`).
    HwlocXml(PathBuf),
}

const TAR_SUFFIXES: [&str; 7] = [".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz"];

impl TopologySource {
    /// Tells the kind of `arg` (None: the live machine): a directory is a root; a name ending
    /// in a tarball suffix is a tarball, `.json` a snapshot, `.xml` hwloc XML; other files are
    /// sniffed (compression magic or a ustar header, `{`, `<`).
    pub fn from_arg(arg: Option<&Path>) -> Result<TopologySource, DiscoveryError> {
        let Some(path) = arg else { return Ok(TopologySource::Live) };
        let meta = fs::metadata(path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => DiscoveryError::MissingSource { path: path.to_path_buf() },
            _ => DiscoveryError::Io { path: path.to_path_buf(), source },
        })?;
        let p = path.to_path_buf();
        if meta.is_dir() {
            return Ok(TopologySource::Root(p));
        }
        let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
        if TAR_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            return Ok(TopologySource::Tarball(p));
        }
        if name.ends_with(".json") {
            return Ok(TopologySource::Snapshot(p));
        }
        if name.ends_with(".xml") {
            return Ok(TopologySource::HwlocXml(p));
        }
        let mut head = Vec::with_capacity(512);
        fs::File::open(path)
            .and_then(|f| f.take(512).read_to_end(&mut head))
            .map_err(|source| DiscoveryError::Io { path: p.clone(), source })?;
        if compression(&head) != Compression::None || head.get(257..262) == Some(b"ustar") {
            return Ok(TopologySource::Tarball(p));
        }
        match head.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{') => Ok(TopologySource::Snapshot(p)),
            Some(b'<') => Ok(TopologySource::HwlocXml(p)),
            _ => Err(DiscoveryError::UnknownSource { path: p }),
        }
    }

    /// The path behind the source (`/` for the live machine).
    pub fn path(&self) -> &Path {
        match self {
            TopologySource::Live => Path::new("/"),
            TopologySource::Root(p)
            | TopologySource::Tarball(p)
            | TopologySource::Snapshot(p)
            | TopologySource::HwlocXml(p) => p,
        }
    }
}

impl fmt::Display for TopologySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologySource::Live => f.write_str("the live machine"),
            TopologySource::Root(p) => write!(f, "sysfs tree `{}`", p.display()),
            TopologySource::Tarball(p) => write!(f, "tarball `{}`", p.display()),
            TopologySource::Snapshot(p) => write!(f, "snapshot `{}`", p.display()),
            TopologySource::HwlocXml(p) => write!(f, "hwloc XML `{}`", p.display()),
        }
    }
}

/// A topology and what else its source offers.
#[derive(Debug)]
pub struct LoadedTopology {
    pub topology: Topology,
    /// A file system root usable for path lookups: `Some("/")` for the live machine,
    /// `Some(dir)` for a directory source, `None` for tarballs, snapshots and XML.
    pub fs_root: Option<PathBuf>,
    /// Whether this is the machine pinctl runs on (filesystem paths can be resolved, the
    /// process's own cpuset applies).
    pub is_live: bool,
    /// Where it came from.
    pub source: TopologySource,
}

/// Loads a topology from any source.
pub fn load_topology(src: &TopologySource) -> Result<LoadedTopology, DiscoveryError> {
    let (topology, fs_root, is_live) = match src {
        TopologySource::Live => (read_topology(Path::new("/"))?, Some(PathBuf::from("/")), true),
        TopologySource::Root(dir) => (read_topology(dir)?, Some(dir.clone()), false),
        TopologySource::Tarball(path) => (read_tarball(path)?, None, false),
        TopologySource::Snapshot(path) => (read_snapshot(path)?, None, false),
        TopologySource::HwlocXml(path) => (read_hwloc(path)?, None, false),
    };
    Ok(LoadedTopology { topology, fs_root, is_live, source: src.clone() })
}

fn read_snapshot(path: &Path) -> Result<Topology, DiscoveryError> {
    let text = fs::read_to_string(path)
        .map_err(|source| DiscoveryError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text)
        .map_err(|source| DiscoveryError::Snapshot { path: path.to_path_buf(), source })
}

#[cfg(feature = "hwloc")]
fn read_hwloc(path: &Path) -> Result<Topology, DiscoveryError> {
    pinctl_hwloc::read_hwloc_xml(path)
        .map_err(|source| DiscoveryError::Hwloc { path: path.to_path_buf(), source })
}

#[cfg(not(feature = "hwloc"))]
fn read_hwloc(path: &Path) -> Result<Topology, DiscoveryError> {
    Err(DiscoveryError::HwlocDisabled { path: path.to_path_buf() })
}

/// A tarball unpacked to a temporary directory, removed when this is dropped.
#[derive(Debug)]
pub struct UnpackedTree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl UnpackedTree {
    /// The sysfs/procfs root inside the unpacked tree (the folder holding `sys/`, `proc/`).
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Bzip2,
    Xz,
}

fn compression(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Compression::Xz
    } else {
        Compression::None
    }
}

/// A tarball's contents, decompressed by its magic bytes (gzip, bzip2, xz or none).
fn decompressed(path: &Path) -> Result<Box<dyn Read>, DiscoveryError> {
    let err = |source| DiscoveryError::Tarball { path: path.to_path_buf(), source };
    let file = fs::File::open(path)
        .map_err(|source| DiscoveryError::Io { path: path.to_path_buf(), source })?;
    let mut reader = BufReader::new(file);
    Ok(match compression(reader.fill_buf().map_err(err)?) {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(reader)),
        Compression::Xz => {
            // lzma-rs decodes whole streams only; captures are a few MiB at most.
            let mut raw = Vec::new();
            lzma_rs::xz_decompress(&mut reader, &mut raw)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                .map_err(err)?;
            Box::new(io::Cursor::new(raw))
        }
    })
}

/// Reads the topology of a (possibly gzip, bzip2 or xz compressed) tarball of a sysfs/procfs
/// tree in memory, without unpacking it. Its root is the top folder, or the single folder
/// below it, that holds `sys/` or `proc/`; absolute link targets are taken below that root.
pub fn read_tarball(path: &Path) -> Result<Topology, DiscoveryError> {
    let reader = decompressed(path)?;
    let mut tree = MemTree::from_tar(reader)
        .map_err(|source| DiscoveryError::Tarball { path: path.to_path_buf(), source })?;
    let root = tree
        .find_root()
        .ok_or_else(|| DiscoveryError::NoRootInTarball { path: path.to_path_buf() })?;
    tree.set_root(&root);
    read_with(&mut FsRoot::in_memory(&tree, &root, path))
}

/// Unpacks a (possibly compressed) tarball of a sysfs/procfs tree into a temporary directory
/// and finds its root, for tools that need a real directory (`read_tarball` reads the same
/// without touching the disk). Only regular files, folders and links are unpacked (device
/// nodes and fifos in a capture are skipped), and nothing is written outside the temporary
/// folder.
pub fn unpack_tarball(path: &Path) -> Result<UnpackedTree, DiscoveryError> {
    let err = |source| DiscoveryError::Tarball { path: path.to_path_buf(), source };
    let reader = decompressed(path)?;
    let dir = tempfile::Builder::new().prefix("pinctl-topology-").tempdir().map_err(err)?;
    unpack(reader, dir.path()).map_err(err)?;
    let root = find_root(dir.path())
        .ok_or_else(|| DiscoveryError::NoRootInTarball { path: path.to_path_buf() })?;
    Ok(UnpackedTree { _dir: dir, root })
}

fn unpack(reader: impl Read, dst: &Path) -> io::Result<()> {
    use tar::EntryType;
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(false);
    archive.set_preserve_mtime(false);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    let dst = dst.canonicalize()?;
    let mut dirs = Vec::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        match entry.header().entry_type() {
            // Folders last, deepest first, so restrictive modes do not block their contents.
            EntryType::Directory => {
                let p = entry.path()?.into_owned();
                dirs.push(p);
            }
            EntryType::Regular | EntryType::Continuous | EntryType::Symlink | EntryType::Link => {
                entry.unpack_in(&dst)?;
            }
            _ => {}
        }
    }
    dirs.sort_by(|a, b| b.cmp(a));
    for d in dirs {
        let target = dst.join(&d);
        if target.starts_with(&dst) && !d.components().any(|c| c == std::path::Component::ParentDir)
        {
            fs::create_dir_all(&target)?;
        }
    }
    Ok(())
}

fn is_root(dir: &Path) -> bool {
    dir.join("sys").is_dir() || dir.join("proc").is_dir()
}

/// The sysfs/procfs root inside an unpacked capture (`walk_to_root`).
fn find_root(top: &Path) -> Option<PathBuf> {
    let subdirs = |dir: &PathBuf| {
        let entries = fs::read_dir(dir).ok()?;
        Some(
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect(),
        )
    };
    crate::memtree::walk_to_root(top.to_path_buf(), |d| is_root(d), subdirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_sources() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(TopologySource::from_arg(None).unwrap(), TopologySource::Live);
        assert_eq!(
            TopologySource::from_arg(Some(dir.path())).unwrap(),
            TopologySource::Root(dir.path().to_path_buf())
        );
        let json = dir.path().join("snap");
        fs::write(&json, " \n{\"nodes\": []}").unwrap();
        assert!(matches!(TopologySource::from_arg(Some(&json)), Ok(TopologySource::Snapshot(_))));
        let xml = dir.path().join("lstopo.out");
        fs::write(&xml, "<?xml version=\"1.0\"?>").unwrap();
        assert!(matches!(TopologySource::from_arg(Some(&xml)), Ok(TopologySource::HwlocXml(_))));
        let gz = dir.path().join("capture.bin");
        fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
        assert!(matches!(TopologySource::from_arg(Some(&gz)), Ok(TopologySource::Tarball(_))));
        let junk = dir.path().join("junk");
        fs::write(&junk, "hello").unwrap();
        assert!(matches!(
            TopologySource::from_arg(Some(&junk)),
            Err(DiscoveryError::UnknownSource { .. })
        ));
        let missing = dir.path().join("nope");
        assert!(matches!(
            TopologySource::from_arg(Some(&missing)),
            Err(DiscoveryError::MissingSource { .. })
        ));
    }

    #[cfg(not(feature = "hwloc"))]
    #[test]
    fn xml_without_feature_says_how_to_enable_it() {
        let e = load_topology(&TopologySource::HwlocXml("x.xml".into())).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cargo install --features hwloc"), "{msg}");
        assert!(msg.contains("libhwloc-dev"), "{msg}");
    }
}
