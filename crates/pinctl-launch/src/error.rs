//! What can stop a launch, each with the exit status it maps to (docs/exit-codes.md).

use std::path::PathBuf;

use pinctl_sys::SetupError;

use pinctl_topology::MemoryPolicy;
use rustix::io::Errno;

use crate::ExitStatus;
use crate::request::ResolveError;

/// Whose command line a message's advice names. The facts of a failure are the same in both;
/// only the options suggested differ, because pinctl invoked as `numactl` rejects pinctl's own
/// options (`--if-unsupported`, `--cpus`) and a hint naming them would send the user in a
/// circle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `pinctl exec` and everything else pinctl does.
    Pinctl,
    /// pinctl invoked as `numactl`.
    Numactl,
}

/// Why a launch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The request names something this host does not allow or have.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A step of the child setup failed; `cause` says what probably happened.
    #[error("{error}{}{}", setup_cause(cause), setup_advice(error, Dialect::Pinctl))]
    Setup { error: SetupError, cause: String },
    /// The kernel lacks the requested policy or flag; `policy` is the policy when the policy
    /// itself is missing (not only a flag of it).
    #[error(
        "this kernel ({kernel}) does not support {what}; refusing to run unpinned{}",
        unsupported_advice(*policy, Dialect::Pinctl)
    )]
    Unsupported { what: String, kernel: String, policy: Option<MemoryPolicy> },
    /// The command, or the interpreter its `#!` line names, does not exist; `missing` says
    /// which (`not found in PATH`, `does not exist`, `needs interpreter `/x`, which does not
    /// exist`).
    #[error("command `{name}` {missing} ({error})")]
    NotFound { name: String, missing: String, error: std::io::Error },
    /// The command exists but cannot be executed.
    #[error("cannot execute `{name}`")]
    NotExecutable {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// Nothing to run.
    #[error("no command to run")]
    NoCommand,
    /// This process's allowed CPUs and nodes could not be read.
    #[error("cannot read this process's allowed CPUs and nodes")]
    Allowed(#[source] pinctl_sysfs::HostError),
    /// The service file is invalid; its diagnostics say where.
    #[error("{}", .0.render(false).trim_end())]
    Config(Box<pinctl_config::ConfigError>),
    /// The service file does not fit the topology; the report says where and why.
    #[error("{}", report.trim_end())]
    Rejected { report: String },
    /// The live topology could not be read.
    #[error("cannot read this machine's topology")]
    Topology(#[source] Box<pinctl_sysfs::DiscoveryError>),
    /// The default route's interfaces could not be read.
    #[error("cannot read the default route")]
    DefaultRoute(#[source] Box<pinctl_sysfs::DiscoveryError>),
    /// The plan failed.
    #[error("cannot place the services of `{}`", path.display())]
    Plan {
        path: PathBuf,
        #[source]
        source: Box<pinctl_plan::PlanError>,
    },
    /// The plan of a host of several files failed; `held` names the nodes other files'
    /// running instances hold (`; nodes held by ...`), when they do.
    #[error("cannot place the services of the host's files {files}{held}")]
    HostPlan {
        files: String,
        held: String,
        #[source]
        source: Box<pinctl_plan::PlanError>,
    },
    /// `--service` names no instance of the file.
    #[error("`{}` has no instance `{service}` (instances: {instances})", path.display())]
    NoInstance { path: PathBuf, service: String, instances: String },
    /// `--near` names no device.
    #[error("--near `{spec}`")]
    NearOption {
        spec: String,
        #[source]
        source: Box<pinctl_sysfs::NearError>,
    },
    /// `--near` names devices whose firmware does not give a node.
    #[error(
        "--near `{spec}`: the firmware does not say which node {devices} is on (numa_node -1); \
         name the nodes with --nodes"
    )]
    NearWithoutNode { spec: String, devices: String },
}

fn setup_cause(cause: &str) -> String {
    if cause.is_empty() { String::new() } else { format!(": {cause}") }
}

/// The errno a stage failed with, typed; `None` for a stage that failed without one (a
/// mismatch read back).
pub(crate) fn errno_of(error: &SetupError) -> Option<Errno> {
    Errno::from_io_error(&std::io::Error::from_raw_os_error(error.errno))
}

/// A kernel without NUMA support or without the policy: pinctl can run without it when told;
/// numactl has no such option, so numactl mode only states the fact.
fn setup_advice(error: &SetupError, dialect: Dialect) -> &'static str {
    let missing = matches!(errno_of(error), Some(Errno::NOSYS | Errno::OPNOTSUPP));
    match dialect {
        Dialect::Pinctl if missing => " (pass --if-unsupported=ignore to run without it)",
        _ => "",
    }
}

/// What to do about a policy this kernel lacks: pinctl can run without it; in numactl's
/// terms the older policy that every kernel has is the way out.
fn unsupported_advice(policy: Option<MemoryPolicy>, dialect: Dialect) -> &'static str {
    match (dialect, policy) {
        (Dialect::Pinctl, _) => " (pass --if-unsupported=ignore to run without it)",
        (Dialect::Numactl, Some(MemoryPolicy::PreferredMany)) => {
            " (--preferred, with one node, works on every kernel)"
        }
        (Dialect::Numactl, Some(MemoryPolicy::WeightedInterleave)) => {
            " (--interleave, which spreads pages evenly, works on every kernel)"
        }
        (Dialect::Numactl, _) => "",
    }
}

impl LaunchError {
    /// The message with advice in `dialect`'s options (`to_string` is pinctl's).
    pub fn message(&self, dialect: Dialect) -> String {
        match self {
            LaunchError::Resolve(e) => e.message(dialect),
            LaunchError::Setup { error, cause } => {
                format!("{error}{}{}", setup_cause(cause), setup_advice(error, dialect))
            }
            LaunchError::Unsupported { what, kernel, policy } => format!(
                "this kernel ({kernel}) does not support {what}; refusing to run unpinned{}",
                unsupported_advice(*policy, dialect)
            ),
            _ => self.to_string(),
        }
    }

    /// The status a launcher that stopped here exits with.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            LaunchError::Resolve(e) => e.exit_status(),
            LaunchError::Setup { error, .. } => ExitStatus::from(error.stage),
            LaunchError::Unsupported { .. } => ExitStatus::MemoryPolicy,
            LaunchError::NotFound { .. } => ExitStatus::NotFound,
            LaunchError::NotExecutable { .. } => ExitStatus::NotExecutable,
            LaunchError::NoCommand | LaunchError::NearOption { .. } => ExitStatus::Usage,
            LaunchError::Allowed(_)
            | LaunchError::Config(_)
            | LaunchError::Rejected { .. }
            | LaunchError::Topology(_)
            | LaunchError::DefaultRoute(_)
            | LaunchError::Plan { .. }
            | LaunchError::HostPlan { .. }
            | LaunchError::NoInstance { .. }
            | LaunchError::NearWithoutNode { .. } => ExitStatus::Failure,
        }
    }
}

/// `message: cause: cause`, as anyhow's `{:#}` shows a chain.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
