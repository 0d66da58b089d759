//! From a placement request to a running command: resolve it against this process's allowed
//! CPUs and nodes, apply it with pinctl-sys (affinity, memory policy, read-back), explain any
//! failure, and exec. Shared by `pinctl exec` and the numactl personality.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;

use pinctl_sys::{
    ChildSetup, Kernel, LinuxKernel, MemoryPolicyRequest, PolicyFlags, SetupError, Stage,
    probe_support,
};
use pinctl_topology::{CpuSet, MemoryPolicy, NodeSet};
use serde::Serialize;

use super::host::{self, Allowed, HostError};
use super::spec::{Device, Kind, Spec, SpecError};
use crate::exit::{Failed, Status};

/// Exit status when the command cannot be found (as in POSIX shells).
pub(crate) const EXIT_NOT_FOUND: u8 = 127;
/// Exit status when the command exists but cannot be executed.
pub(crate) const EXIT_NOT_EXECUTABLE: u8 = 126;

/// Where a set of nodes comes from.
#[derive(Debug, Clone)]
pub(crate) enum Nodes {
    Spec(Spec),
    Set(NodeSet),
}

/// What the CPU affinity should be.
#[derive(Debug, Clone)]
pub(crate) enum CpuTarget {
    Cpus(Spec),
    Nodes(Nodes),
}

/// A placement as a command line states it, before this host gives it meaning.
#[derive(Debug, Clone, Default)]
pub(crate) struct Request {
    /// numactl `--all`: lists are read against every possible id, not the cpuset.
    pub(crate) all: bool,
    pub(crate) cpus: Option<CpuTarget>,
    pub(crate) memory: Option<(MemoryPolicy, Option<Nodes>)>,
    pub(crate) balancing: bool,
    /// The CPUs of the cpuset a plan was computed against (`-c FILE --service NAME`). They
    /// replace this process's `Cpus_allowed_list` as the allowed CPUs: that list is the
    /// affinity pinctl inherited (a unit's `CPUAffinity=`, a shell's `taskset`), which
    /// `sched_setaffinity` may widen within the cpuset, and the plan deliberately ignores it.
    pub(crate) planned_cpuset: Option<CpuSet>,
}

/// A placement in ids, what `--dry-run` prints and what gets applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Resolved {
    /// `None`: the affinity is left as inherited.
    pub(crate) cpus: Option<CpuSet>,
    /// `None`: the memory policy is left as inherited.
    pub(crate) memory_policy: Option<MemoryPolicy>,
    pub(crate) memory_nodes: Option<NodeSet>,
    pub(crate) numa_balancing: bool,
}

/// Why a request could not be resolved.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("`ip:{0}` is not supported: name the interface the route uses with `netdev:IF`")]
    IpUnsupported(String),
    #[error("`pci:{0}` is not a PCI address (expected [segment:]bus:device[.function])")]
    BadPci(String),
    #[error("the memory policy {policy} needs at least one node, and the node list is empty")]
    EmptyNodes { policy: MemoryPolicy },
    #[error("the CPU list is empty")]
    EmptyCpus,
    #[error("nodes {0} have no CPUs to run on (memory-only nodes): choose CPUs with --cpus")]
    NodesWithoutCpus(NodeSet),
    #[error("--preferred takes exactly one node, `{0}` names {1}")]
    PreferredNeedsOne(String, usize),
}

/// Resolves numactl's device items to nodes from sysfs.
pub(crate) fn device_nodes(device: &Device) -> Result<NodeSet, ResolveError> {
    Ok(match device {
        Device::Netdev(name) => host::device_nodes_from_sysfs(
            &format!("netdev:{name}"),
            &std::path::Path::new("/sys/class/net").join(name).join("device"),
        )?,
        Device::Block(name) => {
            let name = name.strip_prefix("/dev/").unwrap_or(name);
            host::device_nodes_from_sysfs(
                &format!("block:{name}"),
                &std::path::Path::new("/sys/class/block").join(name),
            )?
        }
        Device::File(path) => host::device_nodes_from_sysfs(
            &format!("file:{path}"),
            &host::block_device_of_path(path)?,
        )?,
        Device::Pci(spec) => {
            let addr = host::pci_address(spec).ok_or_else(|| ResolveError::BadPci(spec.clone()))?;
            host::device_nodes_from_sysfs(
                &format!("pci:{spec}"),
                &std::path::Path::new("/sys/bus/pci/devices").join(addr),
            )?
        }
        Device::Ip(h) => return Err(ResolveError::IpUnsupported(h.clone())),
    })
}

impl Request {
    /// What this request may use: this process's allowed sets, with the CPUs of the cpuset
    /// its plan was computed against when it comes from a plan.
    pub(crate) fn allowed(&self, process: Allowed) -> Allowed {
        match &self.planned_cpuset {
            Some(cpus) => Allowed { cpus: cpus.clone(), ..process },
            None => process,
        }
    }

    /// The ids this request names on this host.
    pub(crate) fn resolve(&self, allowed: &Allowed) -> Result<Resolved, ResolveError> {
        let (cpu_base, node_base) = if self.all {
            (host::possible_cpus()?, host::possible_nodes()?)
        } else {
            (allowed.cpus.clone(), allowed.nodes.clone())
        };
        let nodes = |n: &Nodes| -> Result<NodeSet, ResolveError> {
            match n {
                Nodes::Set(s) => Ok(s.clone()),
                Nodes::Spec(spec) => spec.resolve(Kind::Node, &node_base, device_nodes),
            }
        };
        let cpus = match &self.cpus {
            None => None,
            Some(CpuTarget::Cpus(spec)) => {
                Some(spec.resolve(Kind::Cpu, &cpu_base, |_| -> Result<CpuSet, ResolveError> {
                    unreachable!("CPU lists hold no devices")
                })?)
            }
            Some(CpuTarget::Nodes(n)) => {
                let nodes = nodes(n)?;
                let cpus = host::cpus_of_nodes(&nodes)?;
                if cpus.is_empty() && !nodes.is_empty() {
                    return Err(ResolveError::NodesWithoutCpus(nodes));
                }
                Some(cpus)
            }
        };
        let (memory_policy, memory_nodes) = match &self.memory {
            None => (None, None),
            Some((p, None)) => (Some(*p), None),
            Some((p, Some(n))) => (Some(*p), Some(nodes(n)?)),
        };
        Ok(Resolved { cpus, memory_policy, memory_nodes, numa_balancing: self.balancing })
    }
}

impl Resolved {
    /// Refuses what would only fail in the kernel with a vaguer message (pinctl's own
    /// options; the numactl personality passes these to the kernel as numactl does).
    pub(crate) fn check(&self) -> Result<(), ResolveError> {
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

    fn policy_request(&self) -> Option<MemoryPolicyRequest> {
        let policy = self.memory_policy?;
        let flags = if self.numa_balancing && policy == MemoryPolicy::Bind {
            PolicyFlags::NUMA_BALANCING
        } else {
            PolicyFlags::NONE
        };
        let nodes = if policy.takes_nodes() { self.memory_nodes.clone() } else { None };
        Some(MemoryPolicyRequest { mode: policy.into(), flags, nodes })
    }
}

/// How strictly to launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch {
    /// Fail when the kernel applies less than asked (pinctl); numactl accepts it.
    pub(crate) verify: bool,
    /// Run without a policy the kernel does not support instead of failing.
    pub(crate) ignore_unsupported: bool,
}

/// Applies `resolved` to this process. On success the process has the placement and the
/// caller execs.
pub(crate) fn apply(resolved: &Resolved, allowed: &Allowed, launch: Launch) -> Result<(), Failed> {
    let kernel = LinuxKernel;
    let sys = |stage: Stage, e: io::Error| {
        Failed::with_code(stage.exit_code(), anyhow::anyhow!("{stage} failed: {e}"))
    };
    let cpu_bits = kernel.cpu_mask_bits().map_err(|e| sys(Stage::ReadAffinity, e))?;
    let node_bits = kernel.node_mask_bits().map_err(|e| sys(Stage::ReadMemoryPolicy, e))?;
    let mut policy = resolved.policy_request();
    if let Some(req) = &mut policy {
        let newer = matches!(
            resolved.memory_policy,
            Some(MemoryPolicy::PreferredMany | MemoryPolicy::WeightedInterleave)
        ) || req.flags.contains(PolicyFlags::NUMA_BALANCING);
        if newer {
            let support = probe_support(&kernel, node_bits)
                .map_err(|e| explain(setup_error(Stage::SetMemoryPolicy, &e), resolved, allowed))?;
            let without_balancing = req.flags.without(PolicyFlags::NUMA_BALANCING);
            if !support.supports(req.mode, req.flags) {
                let what = if req.flags.contains(PolicyFlags::NUMA_BALANCING)
                    && support.supports(req.mode, without_balancing)
                {
                    "MPOL_F_NUMA_BALANCING (Linux 5.12+)".to_string()
                } else {
                    format!(
                        "the {} memory policy ({})",
                        resolved.memory_policy.map_or("", |p| p.name()),
                        since(resolved.memory_policy)
                    )
                };
                if !launch.ignore_unsupported {
                    return Err(Failed::with_code(
                        Stage::SetMemoryPolicy.exit_code(),
                        anyhow::anyhow!(
                            "this kernel ({}) does not support {what}; refusing to run unpinned \
                             (pass --if-unsupported=ignore to run without it)",
                            kernel_release()
                        ),
                    ));
                }
                warn(format_args!("this kernel does not support {what}; running without it"));
                if support.supports(req.mode, without_balancing) {
                    req.flags = without_balancing;
                } else {
                    policy = None;
                }
            }
        }
    }
    let mut setup = ChildSetup::new(
        resolved.cpus.as_ref(),
        policy.as_ref(),
        cpu_bits,
        node_bits,
        launch.verify,
    );
    match setup.apply(&kernel) {
        Ok(()) => Ok(()),
        Err(e)
            if launch.ignore_unsupported
                && e.stage == Stage::SetMemoryPolicy
                && matches!(e.errno, pinctl_sys::errno::ENOSYS | pinctl_sys::errno::EOPNOTSUPP) =>
        {
            // systemd's rule: no NUMA support in the kernel means run without a policy. The
            // affinity was already applied.
            warn(format_args!(
                "the kernel has no NUMA memory policy support ({e}); running without a policy"
            ));
            Ok(())
        }
        Err(e) => {
            let got = setup.applied();
            Err(explain_with(e, resolved, allowed, Some(&got)))
        }
    }
}

fn since(p: Option<MemoryPolicy>) -> &'static str {
    match p {
        Some(MemoryPolicy::PreferredMany) => "Linux 5.15+",
        Some(MemoryPolicy::WeightedInterleave) => "Linux 6.9+",
        _ => "a newer kernel",
    }
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| format!("Linux {}", s.trim()))
        .unwrap_or_else(|_| "Linux".to_string())
}

/// A warning on stderr, in the shape `exit::report` gives errors. A failed write is ignored:
/// the warning must not stop the service from starting.
fn warn(message: std::fmt::Arguments<'_>) {
    let _ = writeln!(io::stderr().lock(), "warning: {message}");
}

fn setup_error(stage: Stage, e: &io::Error) -> SetupError {
    SetupError { stage, errno: e.raw_os_error().unwrap_or(0) }
}

fn explain(e: SetupError, resolved: &Resolved, allowed: &Allowed) -> Failed {
    explain_with(e, resolved, allowed, None)
}

/// Turns a failed stage into a message that names the step, the errno and the likely cause.
fn explain_with(
    e: SetupError,
    resolved: &Resolved,
    allowed: &Allowed,
    got: Option<&pinctl_sys::Applied>,
) -> Failed {
    let list = |s: Option<&NodeSet>| s.map_or_else(|| "none".to_string(), |s| s.to_string());
    let cause = match (e.stage, e.errno) {
        (Stage::SetAffinity, pinctl_sys::errno::EINVAL) => format!(
            "CPUs {} are outside this process's allowed CPUs {} (Cpus_allowed_list) or offline",
            list(resolved.cpus.as_ref()),
            allowed.cpus
        ),
        (Stage::SetMemoryPolicy, pinctl_sys::errno::EINVAL) => format!(
            "nodes {} are outside this process's allowed nodes {} (Mems_allowed_list), or have \
             no memory",
            list(resolved.memory_nodes.as_ref()),
            allowed.nodes
        ),
        (_, pinctl_sys::errno::EPERM) => {
            "the call was denied: a seccomp filter (containers block NUMA calls \
                             unless CAP_SYS_NICE is granted) or a missing CAP_SYS_NICE"
                .to_string()
        }
        (_, pinctl_sys::errno::ENOSYS | pinctl_sys::errno::EOPNOTSUPP) => {
            "the kernel lacks NUMA support or this policy (pass --if-unsupported=ignore to run \
             without it)"
                .to_string()
        }
        (Stage::AffinityMismatch, _) => format!(
            "asked for CPUs {}, the kernel applied {}: the cpuset allows only {}",
            list(resolved.cpus.as_ref()),
            got.map_or_else(String::new, |g| g.cpus.to_string()),
            allowed.cpus
        ),
        (Stage::MemoryPolicyMismatch, _) => format!(
            "asked for {} on nodes {}, the kernel applied {} on nodes {}: the cpuset allows \
             only nodes {}",
            resolved.memory_policy.map_or("no policy", |p| p.name()),
            list(resolved.memory_nodes.as_ref()),
            got.map_or_else(|| "an unknown policy".to_string(), |g| g.policy.to_string()),
            got.map_or_else(String::new, |g| g.nodes.to_string()),
            allowed.nodes
        ),
        _ => String::new(),
    };
    let msg = if cause.is_empty() { e.to_string() } else { format!("{e}: {cause}") };
    Failed::with_code(e.stage.exit_code(), anyhow::anyhow!(msg))
}

/// Replaces this process with `command` (PATH search as execvp); returns only on failure.
pub(crate) fn exec(command: &[OsString]) -> Failed {
    let Some((program, args)) = command.split_first() else {
        return Failed::new(Status::Usage, anyhow::anyhow!("no command to run"));
    };
    let e = std::process::Command::new(program).args(args).exec();
    let name = program.to_string_lossy();
    match e.kind() {
        io::ErrorKind::NotFound => Failed::with_code(
            EXIT_NOT_FOUND,
            anyhow::anyhow!("command `{name}` not found in PATH ({e})"),
        ),
        _ => Failed::with_code(
            EXIT_NOT_EXECUTABLE,
            anyhow::Error::new(e).context(format!("cannot execute `{name}`")),
        ),
    }
}

impl From<ResolveError> for Failed {
    fn from(e: ResolveError) -> Failed {
        let code = match &e {
            ResolveError::Spec(SpecError::NotAllowed { kind: "CPU", .. }) => {
                Stage::SetAffinity.exit_code()
            }
            ResolveError::Spec(SpecError::NotAllowed { .. }) => Stage::SetMemoryPolicy.exit_code(),
            _ => Status::Usage as u8,
        };
        Failed::with_code(code, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pinctl_sys::PolicyMode;

    fn allowed() -> Allowed {
        Allowed { cpus: "0-7".parse().unwrap(), nodes: "0-1".parse().unwrap() }
    }

    fn resolved() -> Resolved {
        Resolved {
            cpus: Some("8-15".parse().unwrap()),
            memory_policy: Some(MemoryPolicy::Bind),
            memory_nodes: Some("3".parse().unwrap()),
            numa_balancing: false,
        }
    }

    fn message(stage: Stage, errno: i32) -> (u8, String) {
        let f = explain(SetupError { stage, errno }, &resolved(), &allowed());
        (f.code, format!("{:#}", f.error))
    }

    #[test]
    fn failures_name_the_step_the_errno_and_the_cause() {
        let (code, m) = message(Stage::SetMemoryPolicy, pinctl_sys::errno::EINVAL);
        assert_eq!(code, 242);
        assert!(m.contains("set_mempolicy") && m.contains("os error 22"), "{m}");
        assert!(m.contains("nodes 3 are outside this process's allowed nodes 0-1"), "{m}");

        let (code, m) = message(Stage::SetAffinity, pinctl_sys::errno::EINVAL);
        assert_eq!(code, 215);
        assert!(m.contains("CPUs 8-15 are outside this process's allowed CPUs 0-7"), "{m}");

        let (_, m) = message(Stage::SetAffinity, pinctl_sys::errno::EPERM);
        assert!(m.contains("seccomp") && m.contains("CAP_SYS_NICE"), "{m}");

        let (code, m) = message(Stage::SetMemoryPolicy, pinctl_sys::errno::ENOSYS);
        assert_eq!(code, 242);
        assert!(m.contains("--if-unsupported=ignore"), "{m}");

        let (code, m) = message(Stage::AffinityMismatch, 0);
        assert_eq!(code, 215);
        assert!(m.contains("the cpuset allows only 0-7"), "{m}");
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
        assert_eq!(r.policy_request().unwrap().nodes, None);
        r.cpus = Some(CpuSet::new());
        assert!(matches!(r.check(), Err(ResolveError::EmptyCpus)));
    }

    #[test]
    fn balancing_is_a_flag_of_bind_only() {
        let mut r = resolved();
        r.numa_balancing = true;
        let req = r.policy_request().unwrap();
        assert_eq!((req.mode, req.flags), (PolicyMode::Bind, PolicyFlags::NUMA_BALANCING));
        r.memory_policy = Some(MemoryPolicy::Interleave);
        let req = r.policy_request().unwrap();
        assert_eq!((req.mode, req.flags), (PolicyMode::Interleave, PolicyFlags::NONE));
    }
}
