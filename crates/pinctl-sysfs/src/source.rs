//! Where a topology comes from (`--topology SRC` or the live machine). Reading a directory
//! (or the live machine) is this crate's; tarballs, snapshots and hwloc XML are pinctl-capture's
//! (`load_topology`), so the launcher needs no archive or compression code.

use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use pinctl_topology::Topology;

use crate::devices::DeviceScope;
use crate::discover::read_topology_with;
use crate::error::DiscoveryError;

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
        if !meta.is_file() {
            // A FIFO would block the sniffing read below forever; a device never ends.
            return Err(DiscoveryError::NotRegular { path: p });
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
        if is_compressed(&head) || head.get(257..262) == Some(b"ustar") {
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
#[derive(Debug, Clone)]
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

impl LoadedTopology {
    /// The machine pinctl runs on.
    pub fn live() -> Result<LoadedTopology, DiscoveryError> {
        LoadedTopology::live_with(&DeviceScope::All)
    }

    /// The machine pinctl runs on, with only the devices of `scope`.
    pub fn live_with(scope: &DeviceScope) -> Result<LoadedTopology, DiscoveryError> {
        let root = PathBuf::from("/");
        let topology = read_topology_with(&root, scope)?;
        Ok(LoadedTopology {
            topology,
            fs_root: Some(root),
            is_live: true,
            source: TopologySource::Live,
        })
    }

    /// A sysfs/procfs tree in a directory.
    pub fn directory(dir: &Path) -> Result<LoadedTopology, DiscoveryError> {
        LoadedTopology::directory_with(dir, &DeviceScope::All)
    }

    /// A sysfs/procfs tree in a directory, with only the devices of `scope`.
    pub fn directory_with(
        dir: &Path,
        scope: &DeviceScope,
    ) -> Result<LoadedTopology, DiscoveryError> {
        let topology = read_topology_with(dir, scope)?;
        Ok(LoadedTopology {
            topology,
            fs_root: Some(dir.to_path_buf()),
            is_live: false,
            source: TopologySource::Root(dir.to_path_buf()),
        })
    }
}

/// Whether a file starts with gzip, bzip2 or xz magic bytes.
pub fn is_compressed(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b])
        || head.starts_with(b"BZh")
        || head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0])
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
}
