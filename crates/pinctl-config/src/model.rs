//! The validated configuration: what the planner and the launcher consume. Every value here
//! has passed validation; `{instance}` is already substituted in every per-instance string.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pinctl_topology::{CpuSet, MemoryPolicy, NodeId, NodeSet};

use crate::diagnostic::{Diagnostic, Severity, SourceFile, Span};

/// A whole service file after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it was read from (for messages).
    pub path: PathBuf,
    pub host: HostConfig,
    /// Services in file order.
    pub services: Vec<Service>,
    /// Warnings found while parsing (the file is usable, but probably not as meant).
    pub warnings: Vec<Diagnostic>,
    /// Where each value came from, so later checks against a machine can point into the
    /// file. Empty for a config built in code.
    pub spans: ConfigSpans,
    /// `pinctl watch` and drift settings.
    pub watch: crate::watch::WatchConfig,
    /// `[host] steer-interrupts` and each service's `interrupts` (docs/irq.md).
    pub interrupts: crate::interrupts::InterruptsConfig,
}

impl Config {
    /// A config built in code (tests, generated plans): no file text, no spans, no warnings.
    pub fn new(path: impl Into<PathBuf>, host: HostConfig, services: Vec<Service>) -> Config {
        Config {
            path: path.into(),
            host,
            services,
            warnings: Vec::new(),
            spans: ConfigSpans::default(),
            watch: crate::watch::WatchConfig::default(),
            interrupts: crate::interrupts::InterruptsConfig::default(),
        }
    }

    /// The instance named `name` (`tikv-1`, or `mysql` for a single-instance service) and its
    /// service.
    pub fn instance(&self, name: &str) -> Option<(&Service, &Instance)> {
        self.instances().find(|(_, i)| i.name == name)
    }

    /// Every instance of every service, in file order.
    pub fn instances(&self) -> impl Iterator<Item = (&Service, &Instance)> + '_ {
        self.services.iter().flat_map(|s| s.instances.iter().map(move |i| (s, i)))
    }

    /// The service named `name`.
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name == name)
    }

    /// The spans of the service named `name`, when the config was parsed from a file.
    pub fn service_spans(&self, name: &str) -> Option<&ServiceSpans> {
        let index = self.services.iter().position(|s| s.name == name)?;
        self.spans.services.get(index)
    }

    /// A diagnostic pointing at `span` of this config's file; without a file (a config built
    /// in code) it names the file only, or nothing.
    pub fn diagnostic_at(
        &self,
        span: Option<&Span>,
        severity: Severity,
        message: impl Into<String>,
    ) -> Diagnostic {
        match (&self.spans.file, span) {
            (Some(file), Some(span)) => Diagnostic::at(file, span, severity, message),
            _ if self.path.as_os_str().is_empty() => Diagnostic::unlocated(severity, message),
            _ => Diagnostic::for_file(&self.path, severity, message),
        }
    }
}

/// Byte ranges in the service file of the values that machine-dependent checks look at
/// (`check_against`, and the CLI's check that `near` paths exist). A value taken from
/// `[defaults]` points into `[defaults]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigSpans {
    /// The parsed file; `None` for a config built in code.
    pub file: Option<std::sync::Arc<SourceFile>>,
    pub host: HostSpans,
    /// One per service, in the order of `Config::services`.
    pub services: Vec<ServiceSpans>,
}

/// Spans of the `[host]` values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostSpans {
    /// One per `keep-free` entry, in order.
    pub keep_free: Vec<Span>,
    pub reserve_cpus: Option<Span>,
    pub memory_reserve: Option<Span>,
    /// Every key written in `[host]`, from the key to the end of its value: whether the file
    /// sets a host-wide setting at all, and where.
    pub keys: BTreeMap<String, Span>,
}

/// Spans of one service's values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceSpans {
    /// The name in `[service.NAME]`.
    pub name: Span,
    /// The `nodes = N` or `cpus = N` value, when written.
    pub size: Option<Span>,
    pub instances: Option<Span>,
    pub memory: Option<Span>,
    pub memory_policy: Option<Span>,
    /// Each listed node with the span of its entry, in file order.
    pub only_nodes: Vec<(NodeId, Span)>,
    /// One per `near` entry, in the order of `Instance::near`.
    pub near: Vec<Span>,
    pub command: Option<Span>,
    pub unit: Option<Span>,
    pub user: Option<Span>,
    pub group: Option<Span>,
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
    /// What the supervisor of this file is called; `None`: the file's name without `.toml`.
    pub name: Option<String>,
    /// The supervisor's control socket; `None`: `/run/pinctl/<name>.sock`.
    pub socket: Option<PathBuf>,
    /// The supervisor's state file; `None`: `/run/pinctl/<name>.state.json`.
    pub state_file: Option<PathBuf>,
    /// `cpu-overcommit`: how many CPUs of `cpus = N` instances one usable CPU may carry;
    /// `None` means 1: every such instance has CPUs of its own.
    pub cpu_overcommit: Option<Overcommit>,
}

/// `cpu-overcommit = R`: a node's usable CPUs may be given to `cpus = N` instances up to R
/// times over (each instance still gets N different CPUs). Kept in hundredths, exactly: `1.5`
/// is 150.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Overcommit(u32);

impl Overcommit {
    /// No overcommit: 1.
    pub const NONE: Overcommit = Overcommit(100);
    /// The largest ratio accepted: 64 (a CPU time-shared by more instances than that is not
    /// pinning any more).
    pub const MAX: Overcommit = Overcommit(6400);

    /// The ratio in hundredths (`150` for 1.5); `None` when below 1 or above [`Self::MAX`].
    pub fn from_hundredths(hundredths: u32) -> Option<Overcommit> {
        (Self::NONE.0..=Self::MAX.0).contains(&hundredths).then_some(Overcommit(hundredths))
    }

    /// The ratio in hundredths.
    pub fn hundredths(self) -> u32 {
        self.0
    }

    /// How many CPUs of `cpus = N` instances a node of `cpus` usable CPUs may carry (rounded
    /// down).
    pub fn slots(self, cpus: u32) -> u32 {
        (u64::from(cpus) * u64::from(self.0) / 100) as u32
    }
}

impl std::fmt::Display for Overcommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0 / 100, self.0 % 100) {
            (whole, 0) => write!(f, "{whole}"),
            (whole, part) if part % 10 == 0 => write!(f, "{whole}.{}", part / 10),
            (whole, part) => write!(f, "{whole}.{part:02}"),
        }
    }
}

/// The folder of every supervisor's socket, state file and lock when `[host]` names none.
pub const RUNTIME_DIR: &str = "/run/pinctl";
/// The control socket of the supervisor named `pinctl` (that of `/etc/pinctl/pinctl.toml`),
/// which clients reach when nothing tells them another.
pub const DEFAULT_SOCKET: &str = "/run/pinctl/pinctl.sock";
/// The one state file every supervisor shared before supervisors were named: read once by
/// the first supervisor to start after an upgrade, for the instances its file names.
pub const LEGACY_STATE_FILE: &str = "/run/pinctl/state.json";

/// Where the supervisor of a service file lives: one per file, apart by construction. Two
/// files get two names (from their file names, or `[host] name`), so two sockets, two state
/// files, two locks and two cgroup subtrees; two files of one name in different folders meet
/// on the lock, and the second is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorPaths {
    /// `[host] name`, else the file's name without `.toml`.
    pub name: String,
    pub socket: PathBuf,
    pub state_file: PathBuf,
    /// The shared state file of a pinctl from before supervisors were named, read once after
    /// an upgrade; `None` when `state-file` is given.
    pub legacy_state_file: Option<PathBuf>,
}

impl Config {
    /// Where this file's supervisor lives (see [`SupervisorPaths`]). `Err`: the file's name
    /// cannot name a supervisor and `[host] name` does not either.
    pub fn supervisor(&self) -> Result<SupervisorPaths, String> {
        let name = match &self.host.name {
            Some(name) => name.clone(),
            None => {
                let stem = self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                if !crate::values::is_service_name(stem) {
                    return Err(format!(
                        "the service file's name `{}` cannot name its supervisor (lowercase \
                         letters, digits, `-` and `_`): set `[host] name`",
                        stem.escape_debug()
                    ));
                }
                stem.to_string()
            }
        };
        let dir = std::path::Path::new(RUNTIME_DIR);
        Ok(SupervisorPaths {
            socket: self.host.socket.clone().unwrap_or_else(|| dir.join(format!("{name}.sock"))),
            state_file: self
                .host
                .state_file
                .clone()
                .unwrap_or_else(|| dir.join(format!("{name}.state.json"))),
            legacy_state_file: self.host.state_file.is_none().then(|| LEGACY_STATE_FILE.into()),
            name,
        })
    }
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

/// `share-nodes`: whether the instances of a one-node service may share a node (each then
/// gets every CPU of its node that no `cpus = N` instance holds there, and its memory policy,
/// not exclusively).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareNodes {
    /// Each instance owns its node: a config with more instances than free nodes is refused.
    /// The default of `nodes = N` (and of `cpus = N`, whose instances have CPUs of their own).
    Never,
    /// A node of its own where the host has room, sharing one where it has not. The default of
    /// a service that writes no size.
    WhenNeeded,
    /// The instances share nodes on purpose, spread evenly over the nodes they may use.
    Always,
}

impl ShareNodes {
    /// The value as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            ShareNodes::Never => "never",
            ShareNodes::WhenNeeded => "when-needed",
            ShareNodes::Always => "always",
        }
    }

    /// Whether instances may share a node at all.
    pub fn shares(self) -> bool {
        self != ShareNodes::Never
    }
}

/// When the supervisor restarts an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    Always,
    #[default]
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// Its name in the file.
    pub fn name(self) -> &'static str {
        match self {
            RestartPolicy::Always => "always",
            RestartPolicy::OnFailure => "on-failure",
            RestartPolicy::Never => "never",
        }
    }
}

/// `start-limit = "5/10s"`: at most `burst` starts within `interval`; one more makes the
/// instance `failed` until started by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartLimit {
    pub burst: u32,
    pub interval: Duration,
}

/// `enforce`: what the supervisor holds an instance to beyond the placement set at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforce {
    /// The instance's own cgroup gets `cpuset.cpus` and `cpuset.mems` equal to the plan.
    Cgroup,
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
    /// The first restart delay, at least [`crate::MIN_RESTART_DELAY`]; doubles with each
    /// quick failure.
    pub restart_delay: Duration,
    /// The longest restart delay, at least `restart_delay`.
    pub restart_max_delay: Duration,
    /// `None`: no limit (`start-limit = "off"`); [`crate::DEFAULT_START_LIMIT`] when the file
    /// gives none.
    pub start_limit: Option<StartLimit>,
    /// `None`: nothing beyond the placement set at start.
    pub enforce: Option<Enforce>,
    /// Whether its instances may share nodes (one-node services only).
    pub share_nodes: ShareNodes,
    /// How much of a node one sharing instance counts for when sharing instances are spread
    /// over nodes (`share-weight`, 1 by default).
    pub share_weight: u32,
}

/// One instance of a service, with `{instance}` substituted.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// `tikv-0`, `tikv-1`, or plain `tikv` when the service has one instance.
    pub name: String,
    /// 0-based index, the value of `{instance}`.
    pub index: u32,
    /// The command; arguments without `{instance}` are shared by every instance of the
    /// service (one allocation, not one per instance: 8192 instances of a service with a long
    /// argument must not take gigabytes).
    pub command: Vec<Arc<str>>,
    /// Devices or paths this instance should sit next to, as written.
    pub near: Vec<String>,
    pub unit: Option<String>,
    pub working_dir: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// A file the instance's output goes to; `None`: pinctl's stdout, prefixed.
    pub output: Option<PathBuf>,
}
