//! A placement as a command line states it ([`Request`]) and the same placement in ids on one
//! host ([`Resolved`]). Shared by `pinctl exec`, the numactl personality and the supervisor.

use pinctl_sysfs::{Allowed, DeviceRef, Host, HostError};
use pinctl_topology::{CpuSet, MemoryPolicy, NodeSet, Placement};
use serde::Serialize;

use crate::spec::{CpuSpec, Device, NodeSpec, SpecError, pci_address};

/// Where a set of nodes comes from.
#[derive(Debug, Clone)]
pub enum Nodes {
    /// A list in numactl's grammar, read against the allowed nodes.
    Spec(NodeSpec),
    /// Nodes already known (a plan, `--near`).
    Set(NodeSet),
}

/// What the CPU affinity should be.
#[derive(Debug, Clone)]
pub enum CpuTarget {
    /// A CPU list.
    Cpus(CpuSpec),
    /// The CPUs of these nodes.
    Nodes(Nodes),
    /// CPUs already known (a plan).
    Set(CpuSet),
}

/// A placement as a command line states it, before this host gives it meaning.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// numactl `--all`: lists are read against every possible id, not the cpuset.
    pub all: bool,
    /// The CPU affinity; `None` leaves it as inherited.
    pub cpus: Option<CpuTarget>,
    /// The memory policy and its nodes; `None` leaves it as inherited.
    pub memory: Option<(MemoryPolicy, Option<Nodes>)>,
    /// Let automatic NUMA balancing move pages within a bind set (`MPOL_F_NUMA_BALANCING`).
    pub balancing: bool,
    /// The CPUs of the cpuset a plan was computed against (`-c FILE --service NAME`). They
    /// replace this process's `Cpus_allowed_list` as the allowed CPUs: that list is the
    /// affinity pinctl inherited (a unit's `CPUAffinity=`, a shell's `taskset`), which
    /// `sched_setaffinity` may widen within the cpuset, and the plan deliberately ignores it.
    pub planned_cpuset: Option<CpuSet>,
    /// The plan's word on processes pinned outside pinctl that its CPUs were chosen around
    /// (`-c FILE --service NAME`): the placement depends on them, so the launch says it.
    pub pinned_note: Option<String>,
}

/// A placement in ids: what `--dry-run` prints and what gets applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// `None`: the affinity is left as inherited.
    pub cpus: Option<CpuSet>,
    /// `None`: the memory policy is left as inherited.
    pub memory_policy: Option<MemoryPolicy>,
    /// The policy's nodes (`None` for policies without nodes, or when inherited).
    pub memory_nodes: Option<NodeSet>,
    /// `MPOL_F_NUMA_BALANCING` on a bind policy.
    pub numa_balancing: bool,
}

impl From<&Placement> for Resolved {
    /// A planned placement as the launcher applies it: its CPUs, its policy and the policy's
    /// nodes (no NUMA-balancing flag: the plan never asks for it).
    fn from(p: &Placement) -> Resolved {
        Resolved {
            cpus: (!p.cpus.is_empty()).then(|| p.cpus.clone()),
            memory_policy: Some(p.memory_policy),
            memory_nodes: p.memory_policy.takes_nodes().then(|| p.memory_nodes.clone()),
            numa_balancing: false,
        }
    }
}

/// Why a request could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// A list names something that is not allowed or does not parse.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A fact of the host could not be read, or a device has no node.
    #[error(transparent)]
    Host(#[from] HostError),
    /// numactl's `ip:HOST` names a host that does not resolve.
    #[error(
        "`ip:{host}`: cannot resolve `{host}` (a name needs a working resolver; an address does not)"
    )]
    Unresolved {
        host: String,
        #[source]
        source: std::io::Error,
    },
    /// A `pci:` item that is not a PCI address.
    #[error("`pci:{0}` is not a PCI address (expected [segment:]bus:device[.function])")]
    BadPci(String),
    /// A `file:` item whose path cannot be examined.
    #[error("cannot examine `{path}`")]
    Path {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A `file:` item on a filesystem without a block device.
    #[error(
        "`{path}`: it is on device {major}:{minor}, which is not a block device (tmpfs, \
         overlay, a network filesystem?): name the device instead"
    )]
    NotOnBlockDevice { path: String, major: u32, minor: u32 },
    /// A policy that needs nodes got none.
    #[error("the memory policy {policy} needs at least one node, and the node list is empty")]
    EmptyNodes { policy: MemoryPolicy },
    /// The CPU list names nothing.
    #[error("the CPU list is empty")]
    EmptyCpus,
    /// Nodes chosen for their CPUs have none.
    #[error("nodes {0} have no CPUs to run on (memory-only nodes): choose CPUs with --cpus")]
    NodesWithoutCpus(NodeSet),
    /// `preferred` with more than one node.
    #[error("--preferred takes exactly one node, `{0}` names {1}")]
    PreferredNeedsOne(String, usize),
}

impl ResolveError {
    /// The message with advice in `dialect`'s options (`to_string` is pinctl's).
    pub fn message(&self, dialect: crate::Dialect) -> String {
        match (self, dialect) {
            (ResolveError::NodesWithoutCpus(nodes), crate::Dialect::Numactl) => format!(
                "nodes {nodes} have no CPUs to run on (memory-only nodes): choose CPUs with \
                 --physcpubind"
            ),
            _ => self.to_string(),
        }
    }

    /// The exit status of a launch that stopped here: a CPU outside the cpuset is the CPU
    /// affinity step's failure (215), a node outside it the memory policy's (242), as the
    /// kernel would have refused them; everything else is a bad command line (2).
    pub fn exit_status(&self) -> crate::ExitStatus {
        match self {
            ResolveError::Spec(SpecError::NotAllowed { kind: "CPU", .. }) => {
                crate::ExitStatus::CpuAffinity
            }
            ResolveError::Spec(SpecError::NotAllowed { .. }) => crate::ExitStatus::MemoryPolicy,
            _ => crate::ExitStatus::Usage,
        }
    }
}

/// The node(s) of one of numactl's device items, read from the host.
pub fn device_nodes(host: &mut Host, device: &Device) -> Result<NodeSet, ResolveError> {
    Ok(match device {
        Device::Netdev(name) => host.device_nodes(&DeviceRef::Net(name))?,
        Device::Block(name) => {
            host.device_nodes(&DeviceRef::Block(name.strip_prefix("/dev/").unwrap_or(name)))?
        }
        Device::File(path) => {
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            // stat(2), as numactl: a device node names its own device (st_rdev), any other
            // file the device its file system is on (st_dev).
            let meta = std::fs::metadata(path)
                .map_err(|source| ResolveError::Path { path: path.clone(), source })?;
            let kind = meta.file_type();
            let device = if kind.is_block_device() || kind.is_char_device() {
                let (major, minor) = pinctl_sysfs::parse::dev_major_minor(meta.rdev());
                if kind.is_block_device() {
                    DeviceRef::Number { major, minor }
                } else {
                    DeviceRef::CharNumber { major, minor }
                }
            } else {
                let (major, minor) = pinctl_sysfs::parse::dev_major_minor(meta.dev());
                if !host.root().join(format!("sys/dev/block/{major}:{minor}")).exists() {
                    return Err(ResolveError::NotOnBlockDevice {
                        path: path.clone(),
                        major,
                        minor,
                    });
                }
                DeviceRef::Number { major, minor }
            };
            host.device_nodes(&device).map_err(|e| match e {
                HostError::Device { reason, .. } => {
                    HostError::Device { device: format!("file:{path}"), reason }
                }
                e => e,
            })?
        }
        Device::Pci(spec) => {
            let addr = pci_address(spec).ok_or_else(|| ResolveError::BadPci(spec.clone()))?;
            host.device_nodes(&DeviceRef::Pci(&addr))?
        }
        Device::Ip(name) => {
            let addr = ip_address(name)?;
            let iface = host.route_interface(addr)?;
            host.device_nodes(&DeviceRef::Net(&iface)).map_err(|e| match e {
                HostError::Device { reason, .. } => HostError::Device {
                    device: format!("ip:{name}"),
                    reason: format!("routed through `{iface}`: {reason}"),
                },
                e => e,
            })?
        }
    })
}

/// numactl's `ip:HOST` as an address: a literal address as is, a name through the system's
/// resolver (getaddrinfo, as numactl; the first answer, as numactl takes).
fn ip_address(name: &str) -> Result<std::net::IpAddr, ResolveError> {
    use std::net::ToSocketAddrs;
    // `[::1]` as in URLs; numactl's getaddrinfo would refuse the brackets, a person would not.
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    if let Ok(addr) = bare.parse() {
        return Ok(addr);
    }
    let unresolved = |source| ResolveError::Unresolved { host: name.to_string(), source };
    (bare, 0)
        .to_socket_addrs()
        .map_err(unresolved)?
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| unresolved(std::io::Error::other("no address")))
}

impl Request {
    /// What this request may use: this process's allowed sets, with the CPUs of the cpuset
    /// its plan was computed against when it comes from a plan.
    pub fn allowed(&self, process: Allowed) -> Allowed {
        match &self.planned_cpuset {
            Some(cpus) => Allowed { cpus: cpus.clone(), ..process },
            None => process,
        }
    }

    /// The ids this request names on `host`, within `allowed`.
    pub fn resolve(&self, host: &mut Host, allowed: &Allowed) -> Result<Resolved, ResolveError> {
        let (cpu_base, node_base) = if self.all {
            (host.possible_cpus()?, host.possible_nodes()?)
        } else {
            (allowed.cpus.clone(), allowed.nodes.clone())
        };
        let nodes = |host: &mut Host, n: &Nodes| -> Result<NodeSet, ResolveError> {
            match n {
                Nodes::Set(s) => Ok(s.clone()),
                Nodes::Spec(spec) => spec.resolve(&node_base, |d| device_nodes(host, d)),
            }
        };
        let cpus = match &self.cpus {
            None => None,
            Some(CpuTarget::Set(cpus)) => {
                // A plan's CPUs were chosen within the cpuset it saw; one outside this
                // process's is refused as the same CPU in a list would be.
                if let Some(id) = cpus.iter().find(|&c| !cpu_base.contains(c)) {
                    return Err(ResolveError::Spec(SpecError::NotAllowed {
                        kind: "CPU",
                        id: u64::from(id),
                        allowed: if cpu_base.is_empty() {
                            "none".into()
                        } else {
                            cpu_base.to_string()
                        },
                    }));
                }
                Some(cpus.clone())
            }
            Some(CpuTarget::Cpus(spec)) => {
                Some(spec.resolve(&cpu_base, |_| -> Result<CpuSet, ResolveError> {
                    unreachable!("CPU lists hold no devices")
                })?)
            }
            Some(CpuTarget::Nodes(n)) => {
                let nodes = nodes(host, n)?;
                let cpus = host.cpus_of_nodes(&nodes)?;
                if cpus.is_empty() && !nodes.is_empty() {
                    return Err(ResolveError::NodesWithoutCpus(nodes));
                }
                Some(cpus)
            }
        };
        let (memory_policy, memory_nodes) = match &self.memory {
            None => (None, None),
            Some((p, None)) => (Some(*p), None),
            Some((p, Some(n))) => (Some(*p), Some(nodes(host, n)?)),
        };
        Ok(Resolved { cpus, memory_policy, memory_nodes, numa_balancing: self.balancing })
    }
}

impl Resolved {
    /// Refuses what would only fail in the kernel with a vaguer message (pinctl's own
    /// options; the numactl personality passes these to the kernel as numactl does).
    pub fn check(&self) -> Result<(), ResolveError> {
        if self.cpus.as_ref().is_some_and(CpuSet::is_empty) {
            return Err(ResolveError::EmptyCpus);
        }
        if let (Some(policy), Some(nodes)) = (self.memory_policy, &self.memory_nodes) {
            if policy.takes_nodes() && nodes.is_empty() {
                return Err(ResolveError::EmptyNodes { policy });
            }
            if policy == MemoryPolicy::Preferred && nodes.len() != 1 {
                return Err(ResolveError::PreferredNeedsOne(nodes.to_string(), nodes.len()));
            }
        }
        Ok(())
    }
}

/// CPUs 8-15 bound to node 3: the placement the unit tests of this crate start from.
#[cfg(test)]
pub(crate) fn sample_resolved() -> Resolved {
    Resolved {
        cpus: Some("8-15".parse().unwrap()),
        memory_policy: Some(MemoryPolicy::Bind),
        memory_nodes: Some("3".parse().unwrap()),
        numa_balancing: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved() -> Resolved {
        sample_resolved()
    }

    #[test]
    fn checks_refuse_what_the_kernel_would_refuse_vaguely() {
        let mut r = resolved();
        r.memory_nodes = Some(NodeSet::new());
        assert!(matches!(r.check(), Err(ResolveError::EmptyNodes { .. })));
        r.memory_policy = Some(MemoryPolicy::Preferred);
        r.memory_nodes = Some("0-1".parse().unwrap());
        assert!(matches!(r.check(), Err(ResolveError::PreferredNeedsOne(..))));
        r.memory_policy = Some(MemoryPolicy::Local);
        r.memory_nodes = None;
        assert!(r.check().is_ok());
        r.cpus = Some(CpuSet::new());
        assert!(matches!(r.check(), Err(ResolveError::EmptyCpus)));
    }

    #[test]
    fn ids_outside_the_cpuset_fail_as_the_kernel_step_would() {
        let allowed = Allowed { cpus: "0-1".parse().unwrap(), nodes: "0".parse().unwrap() };
        let mut host = Host::live();
        let cpus = Request {
            cpus: Some(CpuTarget::Cpus(CpuSpec::parse("5").unwrap())),
            ..Default::default()
        };
        let e = cpus.resolve(&mut host, &allowed).unwrap_err();
        assert_eq!(e.exit_status().code(), 215, "{e}");
        let nodes = Request {
            memory: Some((MemoryPolicy::Bind, Some(Nodes::Spec(NodeSpec::parse("1").unwrap())))),
            ..Default::default()
        };
        let e = nodes.resolve(&mut host, &allowed).unwrap_err();
        assert_eq!(e.exit_status().code(), 242, "{e}");
        assert_eq!(e.to_string(), "node `1` is not allowed here: this process may use nodes 0");
    }

    /// A sysfs tree whose character device 1:3 (`/dev/null` on every Linux) sits under a PCI
    /// function on node 1, with `numa_node` as the firmware writes it.
    fn tree_with_char_device() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        let pci = r.join("sys/devices/pci0000:00/0000:00:05.0");
        std::fs::create_dir_all(pci.join("misc/null")).unwrap();
        std::fs::write(pci.join("numa_node"), "1\n").unwrap();
        std::fs::create_dir_all(r.join("sys/dev/char")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/0000:00:05.0/misc/null",
            r.join("sys/dev/char/1:3"),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_device_node_path_names_its_own_device() {
        let dir = tree_with_char_device();
        let mut host = Host::at(dir.path());
        // numactl's `file:/dev/X`: the device the node names (st_rdev), not the devtmpfs
        // the node lives on (st_dev).
        let nodes = device_nodes(&mut host, &Device::File("/dev/null".into())).unwrap();
        assert_eq!(nodes.to_string(), "1");
        let e = device_nodes(&mut host, &Device::File("/dev/pinctl-no-such-node".into()));
        assert!(matches!(e, Err(ResolveError::Path { .. })), "{e:?}");
        std::fs::remove_file(dir.path().join("sys/dev/char/1:3")).unwrap();
        let e = device_nodes(&mut host, &Device::File("/dev/null".into())).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("`file:/dev/null`: ") && text.contains("sys/dev/char/1:3"),
            "{text}"
        );
    }

    #[test]
    fn ip_items_take_the_node_of_the_interface_the_route_uses() {
        let dir = tree_with_char_device();
        let r = dir.path();
        let nic = r.join("sys/devices/pci0000:00/0000:00:05.0/net/eth0");
        std::fs::create_dir_all(&nic).unwrap();
        std::fs::create_dir_all(r.join("sys/class/net")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0000:00/0000:00:05.0/net/eth0",
            r.join("sys/class/net/eth0"),
        )
        .unwrap();
        std::fs::create_dir_all(r.join("proc/net")).unwrap();
        // A default route through eth0 (destination and mask 0 read the same in either byte
        // order).
        std::fs::write(
            r.join("proc/net/route"),
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
             eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
        )
        .unwrap();
        let mut host = Host::at(r);
        let ip = |host: &mut Host, h: &str| device_nodes(host, &Device::Ip(h.into()));
        assert_eq!(ip(&mut host, "192.0.2.7").unwrap().to_string(), "1");
        // No IPv6 table in this tree: named.
        let e = ip(&mut host, "[2001:db8::1]").unwrap_err().to_string();
        assert!(e.contains("ipv6_route` does not exist"), "{e}");
        // `localhost` resolves (from /etc/hosts) to a loopback address, routed through `lo`,
        // which is on no node: refused, naming the host and the interface.
        let e = ip(&mut host, "localhost").unwrap_err().to_string();
        assert!(e.starts_with("`ip:localhost`: routed through `lo`: "), "{e}");
    }
}
