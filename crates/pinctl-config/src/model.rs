//! The validated configuration: what the planner and the launcher consume. Every value here
//! has passed validation; `{instance}` is already substituted in every per-instance string.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use pinctl_topology::{CpuSet, MemoryPolicy, NodeId, NodeSet};

/// A whole service file after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    pub host: HostConfig,
    /// Services in file order.
    pub services: Vec<Service>,
}

/// The `[host]` table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostConfig {
    /// Nodes to keep free of services while everything fits elsewhere. `None` means the
    /// default: the NIC(s) of the default route, found at plan time.
    pub keep_free: Option<Vec<KeepFree>>,
    /// CPUs never given to services.
    pub reserve_cpus: CpuSet,
    /// Bytes per node kept for the kernel and page cache; `None` means 2% of each node.
    pub memory_reserve: Option<u64>,
}

/// One entry of `keep-free`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeepFree {
    /// The node(s) hosting this NIC (bonds and VLANs resolve to their members).
    Nic(String),
    /// This node.
    Node(NodeId),
}

/// How big one instance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceSize {
    /// Whole NUMA nodes, owned exclusively.
    Nodes(u32),
    /// This many CPUs, packed inside one node where possible; may share the node.
    Cpus(u32),
}

/// When the supervisor restarts an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    Always,
    #[default]
    OnFailure,
    Never,
}

/// Resource limits applied to an instance (setrlimit), `None` = inherit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Limits {
    pub nofile: Option<u64>,
    pub nproc: Option<u64>,
    pub memlock: Option<u64>,
    pub core: Option<u64>,
    pub stack: Option<u64>,
}

/// A `[service.NAME]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub name: String,
    pub size: InstanceSize,
    /// Expected resident memory per instance, bytes.
    pub memory: Option<u64>,
    pub memory_policy: MemoryPolicy,
    /// Candidate nodes; `None` means every node.
    pub only_nodes: Option<NodeSet>,
    /// The instances, `instances` of them, in order.
    pub instances: Vec<Instance>,
    pub user: Option<String>,
    pub group: Option<String>,
    pub restart: RestartPolicy,
    /// Signal name without `SIG` (`TERM`, `INT`, ...).
    pub stop_signal: String,
    pub stop_timeout: Duration,
    pub limits: Limits,
}

/// One instance of a service, with `{instance}` substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// `tikv-0`, `tikv-1`, or plain `tikv` when the service has one instance.
    pub name: String,
    /// 0-based index, the value of `{instance}`.
    pub index: u32,
    pub command: Vec<String>,
    /// Devices or paths this instance should sit next to, as written.
    pub near: Vec<String>,
    pub unit: Option<String>,
    pub working_dir: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
}
