//! Loading any topology source: directories and the live machine through pinctl-sysfs,
//! tarballs of a sysfs/procfs tree read in memory (or unpacked), `pinctl topology --json`
//! snapshots, and hwloc XML (pinctl-hwloc-xml).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use pinctl_sysfs::{FsRoot, LoadedTopology, TopologySource, read_tree};
use pinctl_topology::Topology;

use crate::error::SourceError;
use crate::memtree::{MemTree, walk_to_root};

/// Loads a topology from any source.
pub fn load_topology(src: &TopologySource) -> Result<LoadedTopology, SourceError> {
    let (topology, fs_root, is_live) = match src {
        TopologySource::Live => {
            let mut loaded = LoadedTopology::live()?;
            pinctl_sysfs::attach_interrupts(
                &mut FsRoot::new(Path::new("/")),
                &mut loaded.topology,
            )?;
            return Ok(loaded);
        }
        TopologySource::Root(dir) => {
            let mut loaded = LoadedTopology::directory(dir)?;
            let mut fs = FsRoot::new(dir);
            pinctl_sysfs::attach_interrupts(&mut fs, &mut loaded.topology)?;
            crate::measured::attach_probe_file(&mut fs, &mut loaded.topology)?;
            return Ok(loaded);
        }
        TopologySource::Tarball(path) => (read_tarball(path)?, None, false),
        TopologySource::Snapshot(path) => (read_snapshot(path)?, None, false),
        TopologySource::HwlocXml(path) => (read_hwloc(path)?, None, false),
    };
    Ok(LoadedTopology { topology, fs_root, is_live, source: src.clone() })
}

/// Largest snapshot read: 16 MiB (a machine with 8192 CPUs and thousands of devices prints
/// about 1 MiB).
pub const MAX_SNAPSHOT_BYTES: usize = 16 << 20;

fn read_snapshot(path: &Path) -> Result<Topology, SourceError> {
    let bytes = pinctl_trust::read_regular(path, MAX_SNAPSHOT_BYTES).map_err(|source| {
        SourceError::Discovery(pinctl_sysfs::DiscoveryError::Io {
            path: path.to_path_buf(),
            source,
        })
    })?;
    crate::snapshot::parse_snapshot(&bytes, path)
}

/// hwloc XML through pinctl's own reader: the installed static pinctl has no libhwloc, and
/// `pinctl-hwloc`'s tests hold the reader equal to libhwloc on every fixture.
fn read_hwloc(path: &Path) -> Result<Topology, SourceError> {
    Ok(pinctl_hwloc_xml::read_hwloc_xml(path)?)
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

/// Most bytes a capture may decompress to, all entries and tar headers together: a live
/// capture is a few MiB (G03, 256 CPUs: 2 MiB), so 256 MiB leaves room for the largest
/// machines while a gzip bomb stops long before it takes the host's memory.
pub const MAX_CAPTURE_BYTES: u64 = 256 << 20;

/// A reader that fails once more than `left` bytes came through it.
struct Capped<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(too_big)?;
        Ok(n)
    }
}

impl<R> Write for Capped<R> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.left = self.left.checked_sub(buf.len() as u64).ok_or_else(too_big)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn too_big() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("decompresses to more than {MAX_CAPTURE_BYTES} bytes (a compression bomb?)"),
    )
}

/// A tarball's contents, decompressed by its magic bytes (gzip, bzip2, xz or none), failing
/// past [`MAX_CAPTURE_BYTES`].
fn decompressed(path: &Path) -> Result<Box<dyn Read>, SourceError> {
    let inner = decompressed_uncapped(path)?;
    Ok(Box::new(Capped { inner, left: MAX_CAPTURE_BYTES }))
}

fn decompressed_uncapped(path: &Path) -> Result<Box<dyn Read>, SourceError> {
    let err = |source| SourceError::Tarball { path: path.to_path_buf(), source };
    let file = fs::File::open(path).map_err(|source| {
        SourceError::Discovery(pinctl_sysfs::DiscoveryError::Io {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let mut reader = BufReader::new(file);
    Ok(match compression(reader.fill_buf().map_err(err)?) {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(reader)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(reader)),
        Compression::Xz => {
            // lzma-rs decodes whole streams only; captures are a few MiB at most, and the
            // output is capped as it is written.
            let mut raw = Vec::new();
            let mut out = io::BufWriter::new(TeeCapped {
                out: &mut raw,
                cap: Capped { inner: (), left: MAX_CAPTURE_BYTES },
            });
            lzma_rs::xz_decompress(&mut reader, &mut out)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
                .map_err(err)?;
            out.into_inner().map_err(|e| err(e.into_error()))?;
            Box::new(io::Cursor::new(raw))
        }
    })
}

/// Writes into `out` while `cap` allows.
struct TeeCapped<'a> {
    out: &'a mut Vec<u8>,
    cap: Capped<()>,
}

impl Write for TeeCapped<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.cap.write(buf)?;
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads the topology of a (possibly gzip, bzip2 or xz compressed) tarball of a sysfs/procfs
/// tree in memory, without unpacking it. Its root is the top folder, or the single folder
/// below it, that holds `sys/` or `proc/`; absolute link targets are taken below that root.
/// A probe result the capture carries ([`PROBE_FILE`](crate::PROBE_FILE)) comes with it.
pub fn read_tarball(path: &Path) -> Result<Topology, SourceError> {
    let reader = decompressed(path)?;
    let mut tree = MemTree::from_tar(reader)
        .map_err(|source| SourceError::Tarball { path: path.to_path_buf(), source })?;
    let root = tree
        .find_root()
        .ok_or_else(|| SourceError::NoRootInTarball { path: path.to_path_buf() })?;
    tree.set_root(&root);
    let mut fs = FsRoot::in_memory(&tree, &root, path);
    let mut topology = read_tree(&mut fs)?;
    crate::measured::attach_probe_file(&mut fs, &mut topology)?;
    Ok(topology)
}

/// Unpacks a (possibly compressed) tarball of a sysfs/procfs tree into a temporary directory
/// and finds its root, for tools that need a real directory (`read_tarball` reads the same
/// without touching the disk). Only regular files, folders and links are unpacked (device
/// nodes and fifos in a capture are skipped), and nothing is written outside the temporary
/// folder.
pub fn unpack_tarball(path: &Path) -> Result<UnpackedTree, SourceError> {
    let err = |source| SourceError::Tarball { path: path.to_path_buf(), source };
    let reader = decompressed(path)?;
    let dir = tempfile::Builder::new().prefix("pinctl-topology-").tempdir().map_err(err)?;
    unpack(reader, dir.path()).map_err(err)?;
    let root = find_root(dir.path())
        .ok_or_else(|| SourceError::NoRootInTarball { path: path.to_path_buf() })?;
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
    walk_to_root(top.to_path_buf(), |d| is_root(d), subdirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every build reads hwloc XML: `--topology x.xml` reaches pinctl's own reader, and its
    /// errors name the file.
    #[test]
    fn xml_is_read_without_libhwloc() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("one-node.xml");
        std::fs::write(
            &path,
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x3" complete_cpuset="0x3" allowed_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1">
    <object type="NUMANode" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" local_memory="1073741824"/>
    <object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1"/>
    <object type="PU" os_index="1" cpuset="0x2" complete_cpuset="0x2"/>
  </object>
</topology>
"#,
        )
        .unwrap();
        let t = load_topology(&TopologySource::HwlocXml(path.clone())).unwrap().topology;
        assert_eq!(
            (t.node_ids().to_string(), t.online_cpus().to_string()),
            ("0".into(), "0-1".into())
        );
        std::fs::write(&path, "<topology>").unwrap();
        let e = load_topology(&TopologySource::HwlocXml(path.clone())).unwrap_err();
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
}
