//! What can stop a launch, each with the exit status it maps to (docs/exit-codes.md).

use std::path::PathBuf;

use pinctl_sys::SetupError;

use crate::ExitStatus;
use crate::request::ResolveError;

/// Why a launch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The request names something this host does not allow or have.
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// A step of the child setup failed; `cause` says what probably happened.
    #[error("{error}{}", if cause.is_empty() { String::new() } else { format!(": {cause}") })]
    Setup { error: SetupError, cause: String },
    /// The kernel lacks the requested policy or flag.
    #[error(
        "this kernel ({kernel}) does not support {what}; refusing to run unpinned (pass \
         --if-unsupported=ignore to run without it)"
    )]
    Unsupported { what: String, kernel: String },
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

impl LaunchError {
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
            | LaunchError::NoInstance { .. }
            | LaunchError::NearWithoutNode { .. } => ExitStatus::Failure,
        }
    }
}
