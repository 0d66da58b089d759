//! The few facts of the live machine a launch needs, read lazily from procfs and sysfs (this
//! is the fast path of every unit start: no full topology discovery).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use pinctl_topology::{CpuSet, IdSet, NodeId, NodeSet};

const NODE_DIR: &str = "/sys/devices/system/node";
const CPU_DIR: &str = "/sys/devices/system/cpu";

#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
    #[error("cannot read `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot parse `{path}`: unexpected `{text}`")]
    Parse { path: PathBuf, text: String },
    #[error("`{path}` has no `{field}` line")]
    MissingField { path: PathBuf, field: &'static str },
    #[error("node `{node}` does not exist on this machine (nodes: {online})")]
    NoSuchNode { node: NodeId, online: String },
    #[error("`{device}`: {reason}")]
    Device { device: String, reason: String },
}

/// Reads a procfs/sysfs file. These report size 0, so `fs::read_to_string` would grow its
/// buffer from 32 bytes in eight reads for `/proc/self/status`; one page takes one.
pub(crate) fn read(path: &Path) -> Result<String, HostError> {
    use std::io::Read;
    let err = |source| HostError::Read { path: path.to_path_buf(), source };
    let mut f = fs::File::open(path).map_err(err)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err(e)),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf)
        .map_err(|e| err(io::Error::new(io::ErrorKind::InvalidData, e.utf8_error())))
}

fn parse_list(path: &Path, text: &str) -> Result<IdSet, HostError> {
    IdSet::parse_list(text)
        .map_err(|_| HostError::Parse { path: path.to_path_buf(), text: text.trim().to_string() })
}

pub(crate) fn read_list(path: &Path) -> Result<IdSet, HostError> {
    parse_list(path, &read(path)?)
}

/// What this process may use, from `/proc/self/status` (its cpuset).
#[derive(Debug, Clone)]
pub(crate) struct Allowed {
    pub(crate) cpus: CpuSet,
    pub(crate) nodes: NodeSet,
}

impl Allowed {
    pub(crate) fn read() -> Result<Allowed, HostError> {
        let path = Path::new("/proc/self/status");
        let text = read(path)?;
        Allowed::parse(path, &text)
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<Allowed, HostError> {
        let field = |name: &'static str| -> Result<IdSet, HostError> {
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .ok_or(HostError::MissingField { path: path.to_path_buf(), field: name })?;
            parse_list(path, line)
        };
        Ok(Allowed { cpus: field("Cpus_allowed_list")?, nodes: field("Mems_allowed_list")? })
    }
}

/// CPUs of a node (`nodeN/cpulist`).
pub(crate) fn node_cpus(node: NodeId) -> Result<CpuSet, HostError> {
    let path = PathBuf::from(format!("{NODE_DIR}/node{node}/cpulist"));
    match read(&path) {
        Ok(text) => parse_list(&path, &text),
        Err(HostError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Err(HostError::NoSuchNode {
                node,
                online: online_nodes().map(|s| s.to_string()).unwrap_or_else(|_| "unknown".into()),
            })
        }
        Err(e) => Err(e),
    }
}

/// CPUs of a set of nodes.
pub(crate) fn cpus_of_nodes(nodes: &NodeSet) -> Result<CpuSet, HostError> {
    nodes.iter().try_fold(CpuSet::new(), |acc, n| Ok(acc.union(&node_cpus(n)?)))
}

pub(crate) fn online_nodes() -> Result<NodeSet, HostError> {
    read_list(&Path::new(NODE_DIR).join("online"))
}

/// Node ids the kernel could ever have (`numactl --all`).
pub(crate) fn possible_nodes() -> Result<NodeSet, HostError> {
    read_list(&Path::new(NODE_DIR).join("possible"))
}

/// CPU ids the kernel could ever have (`numactl --all`).
pub(crate) fn possible_cpus() -> Result<CpuSet, HostError> {
    read_list(&Path::new(CPU_DIR).join("possible"))
}

/// The node(s) of a device, found the way the kernel exposes them: the `numa_node` of the
/// device or its first ancestor that has one; when that is -1, the nodes whose CPUs meet the
/// device's `local_cpulist`.
pub(crate) fn device_nodes_from_sysfs(name: &str, sysfs: &Path) -> Result<NodeSet, HostError> {
    let dev_err = |reason: String| HostError::Device { device: name.to_string(), reason };
    let real = fs::canonicalize(sysfs)
        .map_err(|e| dev_err(format!("cannot resolve `{}`: {e}", sysfs.display())))?;
    for dir in real.ancestors().take_while(|d| d.starts_with("/sys/devices")) {
        let numa_node = dir.join("numa_node");
        let Ok(text) = fs::read_to_string(&numa_node) else { continue };
        let node: i64 = text
            .trim()
            .parse()
            .map_err(|_| HostError::Parse { path: numa_node.clone(), text: text.trim().into() })?;
        if node >= 0 {
            return Ok(NodeSet::from_iter([node as u32]));
        }
        let local = dir.join("local_cpulist");
        if let Ok(cpus) = read_list(&local) {
            let online = online_nodes()?;
            let mut nodes = NodeSet::new();
            for n in online.iter() {
                if !node_cpus(n)?.is_disjoint(&cpus) {
                    nodes.insert(n);
                }
            }
            // A local_cpulist covering every node says nothing either.
            if !nodes.is_empty() && nodes != online {
                return Ok(nodes);
            }
        }
        return Err(dev_err(format!(
            "the firmware does not say which node it is on (`{}` is -1)",
            numa_node.display()
        )));
    }
    Err(dev_err(format!("no `numa_node` above `{}` (not a PCI device?)", real.display())))
}

/// The sysfs directory of a block device holding `path`.
pub(crate) fn block_device_of_path(path: &str) -> Result<PathBuf, HostError> {
    let meta = fs::metadata(path)
        .map_err(|source| HostError::Read { path: PathBuf::from(path), source })?;
    let dev = meta.dev();
    let (major, minor) = (
        ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff),
        ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff),
    );
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(HostError::Device {
            device: path.to_string(),
            reason: format!(
                "it is on device {major}:{minor}, which is not a block device (tmpfs, overlay, a \
                 network filesystem?): name the device instead"
            ),
        });
    }
    Ok(sys)
}

/// numactl's `pci:[seg:]bus:dev[:func]` (or `.func`) as a sysfs PCI address.
pub(crate) fn pci_address(spec: &str) -> Option<String> {
    let hex = |s: &str, max: u32| u32::from_str_radix(s, 16).ok().filter(|&v| v <= max);
    let (rest, func) = match spec.rsplit_once('.') {
        Some((r, f)) => (r, Some(hex(f, 7)?)),
        None => (spec, None),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (seg, bus, dev, func) = match (parts.as_slice(), func) {
        ([b, d], f) => (0, hex(b, 0xff)?, hex(d, 0x1f)?, f.unwrap_or(0)),
        ([s, b, d], Some(f)) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, f),
        // numactl's bus:dev:func form, or seg:bus:dev without a function.
        ([a, b, c], None) if c.len() == 1 => (0, hex(a, 0xff)?, hex(b, 0x1f)?, hex(c, 7)?),
        ([s, b, d], None) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, 0),
        ([s, b, d, f], None) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, hex(f, 7)?),
        _ => return None,
    };
    Some(format!("{seg:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_sets_come_from_status() {
        let text = "Name:\tx\nCpus_allowed:\tff\nCpus_allowed_list:\t0-7\nMems_allowed:\t3\nMems_allowed_list:\t0-1\n";
        let a = Allowed::parse(Path::new("status"), text).unwrap();
        assert_eq!(a.cpus.to_string(), "0-7");
        assert_eq!(a.nodes.to_string(), "0-1");
        assert!(matches!(
            Allowed::parse(Path::new("status"), "Cpus_allowed_list:\t0\n"),
            Err(HostError::MissingField { field: "Mems_allowed_list", .. })
        ));
    }

    #[test]
    fn pci_addresses_in_numactl_forms() {
        assert_eq!(pci_address("3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(pci_address("0000:3b:00.1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(pci_address("3b:00:1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(pci_address("1:3b:00").as_deref(), Some("0001:3b:00.0"));
        assert_eq!(pci_address("3b"), None);
        assert_eq!(pci_address("zz:00.0"), None);
    }

    #[test]
    fn this_machine_has_node_0_with_cpus() {
        let a = Allowed::read().unwrap();
        assert!(!a.cpus.is_empty() && !a.nodes.is_empty());
        let first = a.nodes.first().unwrap();
        assert!(!node_cpus(first).unwrap().is_empty());
        assert!(matches!(node_cpus(4000), Err(HostError::NoSuchNode { node: 4000, .. })));
    }
}
