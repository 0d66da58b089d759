//! The few facts of a machine that a launch needs, read on demand under a root (`/` for the
//! live machine, a captured tree in tests): this process's allowed CPUs and nodes, the CPUs of
//! a node, online and possible ids, which node(s) a device is on, a node's memory and
//! distances, the kernel release.
//!
//! [`read_topology`](crate::read_topology) reads everything; `pinctl exec` sits in every unit's
//! start-up and needs a handful of files, so this reader opens only what is asked, through the
//! same [`FsRoot`] discovery uses: the device-to-node walk is the one discovery does
//! ([`crate::devices::walk_up`]), so `exec --near`, numactl's `netdev:`/`block:`/`pci:`/`file:`
//! items and `pinctl topology` always agree.

use std::path::{Path, PathBuf};

use pinctl_topology::{CpuSet, IdKind, IdSet, MAX_NODE_ID, NodeId, NodeSet};

use crate::devices::{nodes_of_cpus, walk_up};
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse::{self, NodeMeminfo};

const NODE_DIR: &str = "sys/devices/system/node";
const CPU_DIR: &str = "sys/devices/system/cpu";

/// Why a fact of the host could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read or parsed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A file the kernel always provides is missing.
    #[error("`{path}` does not exist")]
    Missing { path: PathBuf },
    /// `/proc/self/status` lacks a line the kernel always writes.
    #[error("`{path}` has no `{field}` line")]
    MissingField { path: PathBuf, field: &'static str },
    /// A node id that the machine does not have.
    #[error("node `{node}` does not exist on this machine (nodes: {online})")]
    NoSuchNode { node: NodeId, online: String },
    /// A device whose node cannot be told.
    #[error("`{device}`: {reason}")]
    Device { device: String, reason: String },
}

/// A device as a launch request names it (numactl's `netdev:`, `block:`, `pci:`, `file:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceRef<'a> {
    /// A network interface (`eth0`).
    Net(&'a str),
    /// A block device by name (`nvme0n1`; a leading `/dev/` is dropped).
    Block(&'a str),
    /// A PCI function in sysfs form (`0000:3b:00.0`).
    Pci(&'a str),
    /// A block device by number.
    Number { major: u32, minor: u32 },
}

impl std::fmt::Display for DeviceRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceRef::Net(n) => write!(f, "netdev:{n}"),
            DeviceRef::Block(n) => write!(f, "block:{n}"),
            DeviceRef::Pci(a) => write!(f, "pci:{a}"),
            DeviceRef::Number { major, minor } => write!(f, "{major}:{minor}"),
        }
    }
}

/// What a process may use: its cpuset as `/proc/self/status` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// `Cpus_allowed_list`.
    pub cpus: CpuSet,
    /// `Mems_allowed_list`.
    pub nodes: NodeSet,
}

impl Allowed {
    /// Reads both sets from the text of `/proc/PID/status`; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Allowed, HostError> {
        let sets = parse::status_allowed(text)
            .map_err(|source| DiscoveryError::Parse { path: path.to_path_buf(), source })?;
        let missing = |field| HostError::MissingField { path: path.to_path_buf(), field };
        Ok(Allowed {
            cpus: sets.cpus.ok_or_else(|| missing("Cpus_allowed_list"))?,
            nodes: sets.nodes.ok_or_else(|| missing("Mems_allowed_list"))?,
        })
    }
}

/// The facts of one machine, read lazily under a root.
#[derive(Debug)]
pub struct Host {
    fs: FsRoot<'static>,
}

impl Host {
    /// The machine pinctl runs on.
    pub fn live() -> Host {
        Host::at(Path::new("/"))
    }

    /// The machine whose sysfs/procfs tree is at `root`.
    pub fn at(root: &Path) -> Host {
        Host { fs: FsRoot::new(root) }
    }

    /// The root every path is read under.
    pub fn root(&self) -> &Path {
        self.fs.root()
    }

    fn required<T>(
        &mut self,
        rel: &str,
        parse: impl FnOnce(&str) -> Result<T, parse::ParseError>,
    ) -> Result<T, HostError> {
        match self.fs.parsed(rel, parse)? {
            Some(v) => Ok(v),
            None => Err(HostError::Missing { path: self.fs.full(rel) }),
        }
    }

    /// What this process may use (`/proc/self/status`).
    pub fn allowed(&mut self) -> Result<Allowed, HostError> {
        let rel = "proc/self/status";
        let path = self.fs.full(rel);
        match self.fs.read(rel)? {
            Some(text) => Allowed::parse(&path, text),
            None => Err(HostError::Missing { path }),
        }
    }

    /// CPUs of a node (`nodeN/cpulist`).
    pub fn node_cpus(&mut self, node: NodeId) -> Result<CpuSet, HostError> {
        match self.fs.parsed(&format!("{NODE_DIR}/node{node}/cpulist"), parse::id_list)? {
            Some(cpus) => Ok(cpus),
            None => Err(HostError::NoSuchNode {
                node,
                online: self.online_nodes().map_or_else(|_| "unknown".into(), |s| s.to_string()),
            }),
        }
    }

    /// CPUs of a set of nodes.
    pub fn cpus_of_nodes(&mut self, nodes: &NodeSet) -> Result<CpuSet, HostError> {
        nodes.iter().try_fold(CpuSet::new(), |acc, n| Ok(acc.union(&self.node_cpus(n)?)))
    }

    /// Nodes the kernel has online.
    pub fn online_nodes(&mut self) -> Result<NodeSet, HostError> {
        self.required(&format!("{NODE_DIR}/online"), parse::node_list)
    }

    /// Node ids the kernel could ever have (`numactl --all`).
    pub fn possible_nodes(&mut self) -> Result<NodeSet, HostError> {
        self.required(&format!("{NODE_DIR}/possible"), parse::node_list)
    }

    /// CPU ids the kernel could ever have (`numactl --all`).
    pub fn possible_cpus(&mut self) -> Result<CpuSet, HostError> {
        self.required(&format!("{CPU_DIR}/possible"), parse::id_list)
    }

    /// Every `nodeN` folder, online or not (libnuma's `numa_nodes_ptr`, what
    /// `numactl --hardware` lists).
    pub fn node_folders(&mut self) -> Result<NodeSet, HostError> {
        let ids = crate::discover::numbered_folders(&mut self.fs, NODE_DIR, "node", MAX_NODE_ID)?;
        Ok(ids.into_iter().collect())
    }

    /// A node's `meminfo` (total and free bytes).
    pub fn node_meminfo(&mut self, node: NodeId) -> Result<NodeMeminfo, HostError> {
        self.required(&format!("{NODE_DIR}/node{node}/meminfo"), parse::meminfo)
    }

    /// A node's `distance` row: one value per online node, in id order.
    pub fn node_distances(&mut self, node: NodeId) -> Result<Vec<u32>, HostError> {
        self.required(&format!("{NODE_DIR}/node{node}/distance"), parse::distance_row)
    }

    /// `Linux <release>` from `/proc/sys/kernel/osrelease`, or plain `Linux`.
    pub fn kernel_release(&mut self) -> String {
        match self.fs.read("proc/sys/kernel/osrelease") {
            Ok(Some(r)) => format!("Linux {}", r.trim()),
            _ => "Linux".to_string(),
        }
    }

    /// The node(s) a device is on: the `numa_node` of the device or its first ancestor that
    /// has one; when that says -1, the nodes whose CPUs meet its PCI function's
    /// `local_cpulist` (unless that covers every node, which says nothing).
    pub fn device_nodes(&mut self, device: &DeviceRef<'_>) -> Result<NodeSet, HostError> {
        let name = device.to_string();
        let dev_err = |reason: String| HostError::Device { device: name.clone(), reason };
        let link = match device {
            DeviceRef::Net(n) => format!("sys/class/net/{n}"),
            DeviceRef::Block(n) => {
                format!("sys/class/block/{}", n.strip_prefix("/dev/").unwrap_or(n))
            }
            DeviceRef::Pci(a) => format!("sys/bus/pci/devices/{a}"),
            DeviceRef::Number { major, minor } => format!("sys/dev/block/{major}:{minor}"),
        };
        let Some(path) = self.fs.link(&link)? else {
            return Err(dev_err(format!("`{}` does not exist", self.fs.full(&link).display())));
        };
        let walk = walk_up(&mut self.fs, &path)?;
        match walk.numa_node {
            Some(Some(node)) => return Ok(NodeSet::from_iter([node])),
            None if walk.pci_dir.is_none() => {
                return Err(dev_err(format!(
                    "no `numa_node` above `{}` (not a PCI device?)",
                    self.fs.full(&path).display()
                )));
            }
            _ => {}
        }
        if let Some(cpus) = &walk.local_cpus {
            let mut with_cpus = Vec::new();
            for n in self.online_nodes()?.iter() {
                let node_cpus = self.node_cpus(n)?;
                if !node_cpus.is_empty() {
                    with_cpus.push((n, node_cpus));
                }
            }
            let nodes = nodes_of_cpus(with_cpus.iter().map(|(n, c)| (*n, c)), cpus);
            if !nodes.is_empty() {
                return Ok(nodes);
            }
        }
        let at = walk.pci_dir.as_deref().unwrap_or(&path);
        Err(dev_err(format!(
            "the firmware does not say which node it is on (`{}` is -1)",
            self.fs.full(&format!("{at}/numa_node")).display()
        )))
    }

    /// Reads a list of ids from a file under the root (for callers with their own files).
    pub fn id_list<K: IdKind>(&mut self, rel: &str) -> Result<IdSet<K>, HostError> {
        self.required(rel, parse::id_list)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A two-node tree: node 0 = CPUs 0-1, node 1 = CPUs 2-3; eth0 on node 1 by `numa_node`,
    /// nvme0n1 with `numa_node` -1 and a local_cpulist on node 0, a virtual `lo`.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let w = |rel: &str, text: &str| {
            let p = r.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        };
        let link = |rel: &str, target: &str| {
            let p = r.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, p).unwrap();
        };
        w("sys/devices/system/node/online", "0-1\n");
        w("sys/devices/system/node/possible", "0-3\n");
        w("sys/devices/system/cpu/possible", "0-7\n");
        w("sys/devices/system/node/node0/cpulist", "0-1\n");
        w("sys/devices/system/node/node1/cpulist", "2-3\n");
        w("sys/devices/system/node/node0/distance", "10 21\n");
        w(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:  1024 kB\nNode 0 MemFree:  512 kB\n",
        );
        w("proc/self/status", "Cpus_allowed_list:\t0-3\nMems_allowed_list:\t0-1\n");
        w("proc/sys/kernel/osrelease", "6.1.0-test\n");
        let nic = "sys/devices/pci0000:00/0000:00:03.0";
        w(&format!("{nic}/numa_node"), "1\n");
        fs::create_dir_all(r.join(format!("{nic}/net/eth0"))).unwrap();
        link("sys/class/net/eth0", &format!("../../../{nic}/net/eth0"));
        let ssd = "sys/devices/pci0000:00/0000:00:04.0";
        w(&format!("{ssd}/numa_node"), "-1\n");
        w(&format!("{ssd}/local_cpulist"), "0-1\n");
        fs::create_dir_all(r.join(format!("{ssd}/nvme/nvme0/nvme0n1"))).unwrap();
        link("sys/class/block/nvme0n1", &format!("../../../{ssd}/nvme/nvme0/nvme0n1"));
        link("sys/dev/block/259:0", &format!("../../../{ssd}/nvme/nvme0/nvme0n1"));
        link("sys/bus/pci/devices/0000:00:04.0", &format!("../../../../{ssd}"));
        fs::create_dir_all(r.join("sys/devices/virtual/net/lo")).unwrap();
        link("sys/class/net/lo", "../../devices/virtual/net/lo");
        dir
    }

    #[test]
    fn reads_nodes_cpus_and_the_allowed_sets_under_a_root() {
        let dir = tree();
        let mut host = Host::at(dir.path());
        let allowed = host.allowed().unwrap();
        assert_eq!(
            (allowed.cpus.to_string(), allowed.nodes.to_string()),
            ("0-3".into(), "0-1".into())
        );
        assert_eq!(host.cpus_of_nodes(&"0-1".parse().unwrap()).unwrap().to_string(), "0-3");
        assert_eq!(host.possible_nodes().unwrap().to_string(), "0-3");
        assert_eq!(host.possible_cpus().unwrap().to_string(), "0-7");
        assert_eq!(host.node_folders().unwrap().to_string(), "0-1");
        assert_eq!(host.node_distances(0).unwrap(), vec![10, 21]);
        assert_eq!(host.node_meminfo(0).unwrap().total_bytes, Some(1 << 20));
        assert_eq!(host.kernel_release(), "Linux 6.1.0-test");
        let e = host.node_cpus(7).unwrap_err();
        assert_eq!(e.to_string(), "node `7` does not exist on this machine (nodes: 0-1)");
    }

    #[test]
    fn finds_device_nodes_by_name_number_and_pci_address() {
        let dir = tree();
        let mut host = Host::at(dir.path());
        assert_eq!(host.device_nodes(&DeviceRef::Net("eth0")).unwrap().to_string(), "1");
        // numa_node -1: the PCI function's local_cpulist decides.
        assert_eq!(host.device_nodes(&DeviceRef::Block("/dev/nvme0n1")).unwrap().to_string(), "0");
        let by_number = DeviceRef::Number { major: 259, minor: 0 };
        assert_eq!(host.device_nodes(&by_number).unwrap().to_string(), "0");
        assert_eq!(host.device_nodes(&DeviceRef::Pci("0000:00:04.0")).unwrap().to_string(), "0");
        let e = host.device_nodes(&DeviceRef::Net("lo")).unwrap_err().to_string();
        assert!(e.starts_with("`netdev:lo`: no `numa_node` above"), "{e}");
        let e = host.device_nodes(&DeviceRef::Net("eth9")).unwrap_err().to_string();
        assert!(e.contains("sys/class/net/eth9` does not exist"), "{e}");
    }

    #[test]
    fn a_local_cpulist_covering_every_node_says_nothing() {
        let dir = tree();
        let ssd = dir.path().join("sys/devices/pci0000:00/0000:00:04.0");
        fs::write(ssd.join("local_cpulist"), "0-3\n").unwrap();
        let e = Host::at(dir.path()).device_nodes(&DeviceRef::Block("nvme0n1")).unwrap_err();
        assert!(e.to_string().contains("the firmware does not say which node it is on"), "{e}");
    }

    #[test]
    fn status_without_a_field_names_it() {
        let e = Allowed::parse(Path::new("status"), "Cpus_allowed_list:\t0\n").unwrap_err();
        assert!(matches!(e, HostError::MissingField { field: "Mems_allowed_list", .. }));
    }

    #[test]
    fn the_live_machine_has_an_allowed_node_with_cpus() {
        let mut host = Host::live();
        let allowed = host.allowed().unwrap();
        assert!(!allowed.cpus.is_empty() && !allowed.nodes.is_empty());
        let first = allowed.nodes.first().unwrap();
        assert!(!host.node_cpus(first).unwrap().is_empty());
    }
}
