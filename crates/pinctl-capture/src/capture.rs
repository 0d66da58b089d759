//! `pinctl topology --capture`: every file discovery reads on a host, packed into a tarball
//! that `--topology` accepts on any other machine (as `hwloc-gather-topology` does for hwloc).

use std::io::{self, Write};
use std::path::Path;

use pinctl_topology::{Measurement, Topology};

use pinctl_sysfs::fsroot::Recorded;
use pinctl_sysfs::parse::is_pci_address;
use pinctl_sysfs::{FsRoot, read_tree};

use crate::error::SourceError;
use pinctl_trust::atomic::StagedFile;

/// Name of the single top-level folder of a capture.
const TOP: &str = "pinctl-capture";

/// What a capture wrote.
#[derive(Debug)]
pub struct CaptureSummary {
    /// The topology read while capturing; reading the tarball back yields exactly this.
    pub topology: Topology,
    pub files: usize,
    pub links: usize,
    pub dirs: usize,
}

/// Reads the topology under `root` while recording every file, link and folder discovery
/// touched (plus the routing tables `default_route_interfaces` reads, and the identity and
/// locality of every PCI function, `record_pci_functions`), and writes them to a
/// gzip-compressed tarball at `out` under one top-level folder. `out` is written whole or not
/// at all (a temporary file beside it, fsynced, renamed over it).
pub fn capture_topology(root: &Path, out: &Path) -> Result<CaptureSummary, SourceError> {
    capture_topology_with(root, out, None)
}

/// [`capture_topology`], with `measured` (what `pinctl probe` just measured on this machine)
/// written into the capture as [`PROBE_FILE`](crate::PROBE_FILE), so that `--topology`
/// reads it back with the tree. Without one, a probe result already in the tree under `root`
/// (a capture unpacked into a directory) is carried along; the live machine has none.
pub fn capture_topology_with(
    root: &Path,
    out: &Path,
    measured: Option<&Measurement>,
) -> Result<CaptureSummary, SourceError> {
    let mut fs = FsRoot::recording(root);
    let mut topology = read_tree(&mut fs)?;
    if measured.is_none() && root != Path::new("/") {
        crate::measured::attach_probe_file(&mut fs, &mut topology)?;
    }
    for extra in ["proc/net/route", "proc/net/ipv6_route"] {
        fs.read(extra)?;
    }
    record_pci_functions(&mut fs)?;
    let items = fs.take_recorder().map(|r| r.items).unwrap_or_default();
    let werr = |source| SourceError::CaptureWrite { path: out.to_path_buf(), source };
    let mut staged = StagedFile::new(out).map_err(werr)?;
    let gz = flate2::write::GzEncoder::new(
        io::BufWriter::new(staged.file()),
        flate2::Compression::default(),
    );
    let mut tar = tar::Builder::new(gz);
    let (mut files, mut links, mut dirs) = (0, 0, 0);
    append_dir(&mut tar, TOP).map_err(werr)?;
    if let Some(m) = measured {
        let json = serde_json::to_vec_pretty(m).map_err(|e| werr(e.into()))?;
        let file = format!("{TOP}/{}", crate::measured::PROBE_FILE);
        append_dir(&mut tar, pinctl_sysfs::fsroot::parent(&file)).map_err(werr)?;
        let mut h = header(tar::EntryType::Regular, 0o444);
        h.set_size(json.len() as u64);
        tar.append_data(&mut h, file, json.as_slice()).map_err(werr)?;
        topology.memory_performance.measured = Some(m.clone());
    }
    for item in &items {
        match item {
            Recorded::Dir(rel) => {
                append_dir(&mut tar, &format!("{TOP}/{rel}")).map_err(werr)?;
                dirs += 1;
            }
            Recorded::File(rel, bytes) => {
                let mut h = header(tar::EntryType::Regular, 0o444);
                h.set_size(bytes.len() as u64);
                tar.append_data(&mut h, format!("{TOP}/{rel}"), bytes.as_slice()).map_err(werr)?;
                files += 1;
            }
            Recorded::Placeholder { rel, is_dir: true } => {
                append_dir(&mut tar, &format!("{TOP}/{rel}")).map_err(werr)?;
            }
            Recorded::Placeholder { rel, is_dir: false } => {
                let mut h = header(tar::EntryType::Regular, 0o444);
                tar.append_data(&mut h, format!("{TOP}/{rel}"), io::empty()).map_err(werr)?;
            }
            Recorded::Link(rel, target) => {
                let mut h = header(tar::EntryType::Symlink, 0o777);
                tar.append_link(&mut h, format!("{TOP}/{rel}"), target).map_err(werr)?;
                links += 1;
            }
        }
    }
    let gz = tar.into_inner().map_err(werr)?;
    let mut buf = gz.finish().map_err(werr)?;
    buf.flush().map_err(werr)?;
    drop(buf);
    staged.commit().map_err(werr)?;
    Ok(CaptureSummary { topology, files, links, dirs })
}

/// Files of each PCI function a capture carries whether or not discovery needed them: what
/// the function is and where it is, so a capture shows the same devices to any later reader
/// (and to a person looking into it), not only what this version of discovery looked at.
const PCI_FUNCTION_FILES: [&str; 6] =
    ["class", "vendor", "device", "numa_node", "local_cpulist", "local_cpus"];

/// Where NVIDIA's proprietary driver describes each GPU (`<address>/information`).
const NVIDIA_GPUS: &str = "proc/driver/nvidia/gpus";

/// Reads (so the recorder keeps) [`PCI_FUNCTION_FILES`] of every function under
/// `sys/bus/pci/devices`, through the function's own folder as discovery reads it, and NVIDIA's
/// GPU `information` files. Every read is bounded as discovery's are.
fn record_pci_functions(fs: &mut FsRoot) -> Result<(), SourceError> {
    let mut addresses = fs.list("sys/bus/pci/devices")?.unwrap_or_default();
    addresses.retain(|a| is_pci_address(a));
    addresses.sort_unstable();
    for address in addresses {
        let Some(dir) = fs.link(&format!("sys/bus/pci/devices/{address}"))? else { continue };
        for file in PCI_FUNCTION_FILES {
            fs.read(&format!("{dir}/{file}"))?;
        }
    }
    let mut gpus = fs.list(NVIDIA_GPUS)?.unwrap_or_default();
    gpus.retain(|a| is_pci_address(a));
    gpus.sort_unstable();
    for address in gpus {
        // Discovery read these already and turned a broken one into a topology warning; one
        // it could not read is left out of the capture rather than failing it.
        let _ = fs.read(&format!("{NVIDIA_GPUS}/{address}/information"));
    }
    Ok(())
}

fn header(kind: tar::EntryType, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(0);
    h.set_mtime(0);
    h
}

fn append_dir<W: Write>(tar: &mut tar::Builder<W>, path: &str) -> io::Result<()> {
    let mut h = header(tar::EntryType::Directory, 0o755);
    tar.append_data(&mut h, format!("{path}/"), io::empty())
}
