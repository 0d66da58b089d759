//! The few facts of a machine that a launch needs, read on demand under a root (`/` for the
//! live machine, a captured tree in tests): this process's allowed CPUs and nodes, the CPUs of
//! a node, online and possible ids, which node(s) a device is on, which interface the route to
//! an address uses, a node's memory and distances, the kernel release.
//!
//! [`read_topology`](crate::read_topology) reads everything; `pinctl exec` sits in every unit's
//! start-up and needs a handful of files, so this reader opens only what is asked, through the
//! same [`FsRoot`] discovery uses: the device-to-node walk is the one discovery does
//! ([`crate::devices::walk_up`]), so `exec --near`, numactl's `netdev:`/`block:`/`pci:`/`file:`
//! items and `pinctl topology` always agree.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use pinctl_topology::{CpuSet, IdKind, IdSet, MAX_NODE_ID, NodeId, NodeSet, NodeWeight};

use crate::devices::{nodes_of_cpus, walk_up};
use crate::error::DiscoveryError;
use crate::fsroot::{FsRoot, parsed};
use crate::node::meminfo::{self, NodeMeminfo};
use crate::parse;

use crate::node::DIR as NODE_DIR;
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

/// A device as a launch request names it (numactl's `netdev:`, `block:`, `pci:`, `file:`; a
/// `file:` is the device its file system is on, or the device a device node names).
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
    /// A character device by number (`/dev/nvme0`, the controller of `nvme0n1`).
    CharNumber { major: u32, minor: u32 },
}

impl std::fmt::Display for DeviceRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceRef::Net(n) => write!(f, "netdev:{n}"),
            DeviceRef::Block(n) => write!(f, "block:{n}"),
            DeviceRef::Pci(a) => write!(f, "pci:{a}"),
            DeviceRef::Number { major, minor } => write!(f, "{major}:{minor}"),
            DeviceRef::CharNumber { major, minor } => write!(f, "char {major}:{minor}"),
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
        let sets = crate::proc::pid::status::parse(text)
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
        match parsed(&mut self.fs, rel, parse)? {
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
        match parsed(&mut self.fs, &format!("{NODE_DIR}/node{node}/cpulist"), parse::id_list)? {
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
        let ids = crate::fsroot::numbered_folders(&mut self.fs, NODE_DIR, "node", MAX_NODE_ID)?;
        Ok(ids.into_iter().collect())
    }

    /// A node's `meminfo` (total and free bytes).
    pub fn node_meminfo(&mut self, node: NodeId) -> Result<NodeMeminfo, HostError> {
        self.required(&crate::node::file(node, "meminfo"), meminfo::parse)
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
            DeviceRef::CharNumber { major, minor } => format!("sys/dev/char/{major}:{minor}"),
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

    /// The interface the kernel's main routing table sends traffic for `dest` out of
    /// (numactl's `ip:HOST`): the longest matching prefix of `/proc/net/route` (IPv4) or
    /// `/proc/net/ipv6_route` (IPv6) that is up and not a reject route, the lowest metric
    /// among equals. Loopback addresses go out of `lo`. Policy routing rules are not
    /// consulted: they live only behind netlink, which a reader of files cannot ask.
    pub fn route_interface(&mut self, dest: IpAddr) -> Result<String, HostError> {
        if dest.is_loopback() {
            return Ok("lo".to_string());
        }
        let (rel, best) = match dest {
            IpAddr::V4(a) => {
                ("proc/net/route", self.required("proc/net/route", |t| route_v4(t, a))?)
            }
            IpAddr::V6(a) => {
                ("proc/net/ipv6_route", self.required("proc/net/ipv6_route", |t| route_v6(t, a))?)
            }
        };
        best.ok_or_else(|| HostError::Device {
            device: format!("ip:{dest}"),
            reason: format!("no route to {dest} in `{}`", self.fs.full(rel).display()),
        })
    }

    /// Each node's weight for weighted interleave
    /// (`/sys/kernel/mm/mempolicy/weighted_interleave/nodeN`, Linux 6.9), in node order; empty
    /// where the kernel has no such folder.
    pub fn interleave_weights(&mut self) -> Result<Vec<NodeWeight>, HostError> {
        const DIR: &str = "sys/kernel/mm/mempolicy/weighted_interleave";
        let mut nodes = crate::fsroot::numbered_folders(&mut self.fs, DIR, "node", MAX_NODE_ID)?;
        nodes.sort_unstable();
        nodes
            .into_iter()
            .map(|node| {
                let weight =
                    self.required(&format!("{DIR}/node{node}"), parse::interleave_weight)?;
                Ok(NodeWeight { node, weight })
            })
            .collect()
    }

    /// Reads a list of ids from a file under the root (for callers with their own files).
    pub fn id_list<K: IdKind>(&mut self, rel: &str) -> Result<IdSet<K>, HostError> {
        self.required(rel, parse::id_list)
    }
}

// The route parsers sit here rather than in `parse` because only `ip:HOST` needs them; they
// take `&str` like the others and are tested on synthetic tables. std has no routing-table
// reader, and the crates that ask netlink (rtnetlink, netlink-packet-route) would bring an
// async runtime or a socket into the launch path for one lookup.

const RTF_UP: u32 = 0x1;
const RTF_REJECT: u32 = 0x200;

fn route_error(line: usize, value: &str, expected: &'static str) -> parse::ParseError {
    parse::ParseError { line, value: pinctl_topology::text::shown(value), expected, source: None }
}

/// The interface of the best route to `dest` in `/proc/net/route`: `Iface Destination Gateway
/// Flags RefCnt Use Metric Mask ...`, addresses as the kernel's `%08X` of a network-order
/// word (so in this machine's byte order).
fn route_v4(text: &str, dest: Ipv4Addr) -> Result<Option<String>, parse::ParseError> {
    let hex = |line: usize, v: &str, what| {
        u32::from_str_radix(v, 16).map_err(|_| route_error(line, v, what))
    };
    let addr = |line: usize, v: &str| -> Result<Ipv4Addr, parse::ParseError> {
        Ok(Ipv4Addr::from(hex(line, v, "an address as 8 hexadecimal digits")?.to_ne_bytes()))
    };
    let mut best: Option<(u32, u32, &str)> = None;
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 8 {
            return Err(route_error(i + 1, line, "`Iface Destination Gateway Flags ...`"));
        }
        let flags = hex(i + 1, f[3], "hexadecimal route flags")?;
        let metric = f[6].parse::<u32>().map_err(|_| route_error(i + 1, f[6], "a metric"))?;
        let (net, mask) = (u32::from(addr(i + 1, f[1])?), u32::from(addr(i + 1, f[7])?));
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 || u32::from(dest) & mask != net {
            continue;
        }
        let len = mask.count_ones();
        if best.is_none_or(|(l, m, _)| len > l || (len == l && metric < m)) {
            best = Some((len, metric, f[0]));
        }
    }
    Ok(best.map(|(.., iface)| iface.to_string()))
}

/// The interface of the best route to `dest` in `/proc/net/ipv6_route`: `dest prefixlen src
/// prefixlen next-hop metric refcnt use flags iface`, addresses as 32 hexadecimal digits in
/// network order, prefix lengths, metric and flags in hexadecimal.
fn route_v6(text: &str, dest: Ipv6Addr) -> Result<Option<String>, parse::ParseError> {
    let mut best: Option<(u32, u32, &str)> = None;
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 10 {
            return Err(route_error(i + 1, line, "10 fields of an ipv6_route line"));
        }
        let net = (f[0].len() == 32)
            .then(|| u128::from_str_radix(f[0], 16).ok())
            .flatten()
            .ok_or_else(|| route_error(i + 1, f[0], "an address as 32 hexadecimal digits"))?;
        let len = u32::from_str_radix(f[1], 16).ok().filter(|&l| l <= 128).ok_or_else(|| {
            route_error(i + 1, f[1], "a prefix length of 0 to 128 in hexadecimal")
        })?;
        let metric = u32::from_str_radix(f[5], 16)
            .map_err(|_| route_error(i + 1, f[5], "a hexadecimal metric"))?;
        let flags = u32::from_str_radix(f[8], 16)
            .map_err(|_| route_error(i + 1, f[8], "hexadecimal route flags"))?;
        let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
        if flags & RTF_UP == 0 || flags & RTF_REJECT != 0 || u128::from(dest) & mask != net & mask {
            continue;
        }
        if best.is_none_or(|(l, m, _)| len > l || (len == l && metric < m)) {
            best = Some((len, metric, f[9]));
        }
    }
    Ok(best.map(|(.., iface)| iface.to_string()))
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
        link("sys/dev/char/241:0", &format!("../../../{ssd}/nvme/nvme0"));
        fs::create_dir_all(r.join("sys/devices/virtual/mem/null")).unwrap();
        link("sys/dev/char/1:3", "../../devices/virtual/mem/null");
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
        // The controller's character device (`/dev/nvme0`) walks up to the same function.
        let controller = DeviceRef::CharNumber { major: 241, minor: 0 };
        assert_eq!(host.device_nodes(&controller).unwrap().to_string(), "0");
        let null = DeviceRef::CharNumber { major: 1, minor: 3 };
        let e = host.device_nodes(&null).unwrap_err().to_string();
        assert!(e.starts_with("`char 1:3`: no `numa_node` above"), "{e}");
        let e = host.device_nodes(&DeviceRef::CharNumber { major: 9, minor: 9 }).unwrap_err();
        assert!(e.to_string().contains("sys/dev/char/9:9` does not exist"), "{e}");
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

    /// `/proc/net/route` of a host with a default route through eth0, a LAN on eth1, a /25
    /// inside it on eth2 (longer prefix), two equal routes with different metrics (eth3,
    /// eth4), a reject route (eth5) and a route that is down (eth6). The kernel writes each
    /// address as `%08X` of a network-order word, so the text depends on the byte order.
    fn routes_v4() -> String {
        let word = |a: &str| {
            format!("{:08X}", u32::from_ne_bytes(a.parse::<Ipv4Addr>().unwrap().octets()))
        };
        let mut text =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
                .to_string();
        for (iface, dest, flags, metric, mask) in [
            ("eth0", "0.0.0.0", "0003", 100, "0.0.0.0"),
            ("eth1", "192.168.0.0", "0001", 100, "255.255.255.0"),
            ("eth2", "192.168.0.0", "0001", 100, "255.255.255.128"),
            ("eth3", "192.168.16.0", "0001", 200, "255.255.255.0"),
            ("eth4", "192.168.16.0", "0001", 50, "255.255.255.0"),
            ("eth5", "192.168.32.0", "0201", 0, "255.255.255.0"),
            ("eth6", "192.168.48.0", "0000", 0, "255.255.255.0"),
        ] {
            let (dest, gateway, mask) = (word(dest), word("10.0.0.1"), word(mask));
            text +=
                &format!("{iface}\t{dest}\t{gateway}\t{flags}\t0\t0\t{metric}\t{mask}\t0\t0\t0\n");
        }
        text
    }

    #[test]
    fn ipv4_routes_take_the_longest_prefix_then_the_lowest_metric() {
        let table = routes_v4();
        let route = |a: &str| route_v4(&table, a.parse().unwrap()).unwrap();
        assert_eq!(route("192.168.0.5").as_deref(), Some("eth2"));
        assert_eq!(route("192.168.0.200").as_deref(), Some("eth1"));
        assert_eq!(route("192.168.16.9").as_deref(), Some("eth4"));
        assert_eq!(route("8.8.8.8").as_deref(), Some("eth0"));
        // A reject route and a route that is down route nothing: the default takes them.
        assert_eq!(route("192.168.32.1").as_deref(), Some("eth0"));
        assert_eq!(route("192.168.48.1").as_deref(), Some("eth0"));
        let no_default: String =
            table.lines().filter(|l| !l.starts_with("eth0")).collect::<Vec<_>>().join("\n");
        assert_eq!(route_v4(&no_default, "8.8.8.8".parse().unwrap()).unwrap(), None);
        // A line as a little-endian kernel (x86, arm64) writes it: 192.168.0.0/24.
        #[cfg(target_endian = "little")]
        assert_eq!(
            route_v4(
                "h\neth9 0000A8C0 00000000 0001 0 0 0 00FFFFFF 0 0 0\n",
                "192.168.0.7".parse().unwrap()
            )
            .unwrap()
            .as_deref(),
            Some("eth9")
        );
        let e = route_v4("header\neth0 zz\n", "1.2.3.4".parse().unwrap()).unwrap_err();
        assert_eq!(e.line, 2);
        let e = route_v4("header\neth0 0000000G 0 1 0 0 0 00000000\n", Ipv4Addr::LOCALHOST);
        assert!(e.is_err());
    }

    const ROUTES_V6: &str = "\
        20010db8000000000000000000000000 20 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth1\n\
        20010db8000100000000000000000000 30 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth2\n\
        00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n\
        20010db8000200000000000000000000 30 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000001 00000000 00200200 lo\n\
        00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000001 00000000 80200001 lo\n";

    #[test]
    fn ipv6_routes_take_the_longest_prefix() {
        let route = |a: &str| route_v6(ROUTES_V6, a.parse().unwrap()).unwrap();
        assert_eq!(route("2001:db8:1::7").as_deref(), Some("eth2"));
        assert_eq!(route("2001:db8:5::7").as_deref(), Some("eth1"));
        assert_eq!(route("2606:4700::1").as_deref(), Some("eth0"));
        // Unreachable (reject) routes are skipped: the default route takes the address.
        assert_eq!(route("2001:db8:2::1").as_deref(), Some("eth1"));
        assert!(route_v6("2001 80 x\n", Ipv6Addr::LOCALHOST).is_err());
        let bad_len = ROUTES_V6.replacen(" 20 ", " 81 ", 1);
        assert!(route_v6(&bad_len, Ipv6Addr::LOCALHOST).is_err());
    }

    #[test]
    fn the_route_to_an_address_is_read_under_the_root() {
        let dir = tree();
        let mut host = Host::at(dir.path());
        fs::create_dir_all(dir.path().join("proc/net")).unwrap();
        fs::write(dir.path().join("proc/net/ipv6_route"), ROUTES_V6).unwrap();
        assert_eq!(host.route_interface("2001:db8::1".parse().unwrap()).unwrap(), "eth1");
        assert_eq!(host.route_interface("::1".parse().unwrap()).unwrap(), "lo");
        assert_eq!(host.route_interface("127.0.0.9".parse().unwrap()).unwrap(), "lo");
        let e = host.route_interface("10.1.1.1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("proc/net/route` does not exist"), "{e}");
        fs::write(dir.path().join("proc/net/route"), "Iface\tDestination\n").unwrap();
        let e = host.route_interface("10.1.1.1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().starts_with("`ip:10.1.1.1`: no route to 10.1.1.1 in `"), "{e}");
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
