//! From a resolved placement to the kernel: check the running kernel has the policy, build the
//! child setup (generic over [`Kernel`], so the call sequence is testable with the recording
//! fake), apply it to this process or hand it to a child, and explain any failure by step,
//! errno and likely cause.

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;

use pinctl_sys::{
    Applied, ChildSetup, Kernel, KernelSupport, MemoryPolicyRequest, PolicyFlags, SetupError,
    Stage, probe_support,
};
use pinctl_sysfs::Allowed;
use pinctl_topology::{IdKind, IdSet, MemoryPolicy};
use rustix::io::Errno;

use crate::error::{LaunchError, errno_of};
use crate::request::Resolved;

/// How strictly to launch.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    /// Fail when the kernel applies less than asked (pinctl); numactl accepts it.
    pub verify: bool,
    /// Run without a policy the kernel does not support instead of failing.
    pub ignore_unsupported: bool,
}

/// Something the launch let pass that the operator should hear about; the caller decides
/// where it goes (stderr for `pinctl exec`, the log for the supervisor).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Warning {
    /// The kernel lacks a newer policy or flag and `ignore_unsupported` let the launch go on.
    #[error("this kernel does not support {what}; running without it")]
    Unsupported { what: String },
    /// `set_mempolicy` said the kernel has no NUMA support (systemd's rule: run without).
    #[error("the kernel has no NUMA memory policy support ({error}); running without a policy")]
    NoNumaSupport { error: SetupError },
}

/// A placement ready to be applied: the setup with every mask allocated, and what was let
/// pass on the way.
#[derive(Debug)]
pub struct LaunchSetup {
    /// What to apply between fork and exec, or to this process.
    pub setup: ChildSetup,
    /// Warnings so far.
    pub warnings: Vec<Warning>,
}

fn policy_request(resolved: &Resolved) -> Option<MemoryPolicyRequest> {
    let policy = resolved.memory_policy?;
    let flags = if resolved.numa_balancing && policy == MemoryPolicy::Bind {
        PolicyFlags::NUMA_BALANCING
    } else {
        PolicyFlags::NONE
    };
    let nodes = if policy.takes_nodes() { resolved.memory_nodes.clone() } else { None };
    Some(MemoryPolicyRequest { mode: policy.into(), flags, nodes })
}

fn since(p: Option<MemoryPolicy>) -> &'static str {
    match p {
        Some(MemoryPolicy::PreferredMany) => "Linux 5.15+",
        Some(MemoryPolicy::WeightedInterleave) => "Linux 6.9+",
        _ => "a newer kernel",
    }
}

/// What of `req` the kernel lacks, in words, and the policy when the policy itself (not only a
/// flag) is missing; `None` when it has all of it.
fn missing(
    support: &KernelSupport,
    req: &MemoryPolicyRequest,
    resolved: &Resolved,
) -> Option<(String, Option<MemoryPolicy>)> {
    if support.supports(req.mode, req.flags) {
        return None;
    }
    let only_the_flag = req.flags.contains(PolicyFlags::NUMA_BALANCING)
        && support.supports(req.mode, req.flags.without(PolicyFlags::NUMA_BALANCING));
    Some(if only_the_flag {
        ("MPOL_F_NUMA_BALANCING (Linux 5.12+)".to_string(), None)
    } else {
        let what = format!(
            "the {} memory policy ({})",
            resolved.memory_policy.map_or("", |p| p.name()),
            since(resolved.memory_policy)
        );
        (what, resolved.memory_policy)
    })
}

/// Builds the setup for `resolved` on `kernel`. Newer policies (preferred-many, weighted
/// interleave, the NUMA balancing flag) are probed first: a kernel without them refuses the
/// launch, named, unless `launch.ignore_unsupported` lets it run without them.
/// `kernel_release` is only called to word that refusal.
pub fn setup<K: Kernel + ?Sized>(
    kernel: &K,
    resolved: &Resolved,
    allowed: &Allowed,
    launch: Launch,
    kernel_release: impl FnOnce() -> String,
) -> Result<LaunchSetup, LaunchError> {
    let sys = |stage: Stage, e: io::Error| {
        let error = SetupError { stage, errno: e.raw_os_error().unwrap_or(0) };
        explain(error, resolved, allowed, None)
    };
    let cpu_bits = kernel.cpu_mask_bits().map_err(|e| sys(Stage::ReadAffinity, e))?;
    let node_bits = kernel.node_mask_bits().map_err(|e| sys(Stage::ReadMemoryPolicy, e))?;
    let mut warnings = Vec::new();
    let mut policy = policy_request(resolved);
    if let Some(req) = &mut policy {
        let newer = matches!(
            resolved.memory_policy,
            Some(MemoryPolicy::PreferredMany | MemoryPolicy::WeightedInterleave)
        ) || req.flags.contains(PolicyFlags::NUMA_BALANCING);
        if newer {
            let support =
                probe_support(kernel, node_bits).map_err(|e| sys(Stage::SetMemoryPolicy, e))?;
            if let Some((what, lacking)) = missing(&support, req, resolved) {
                if !launch.ignore_unsupported {
                    return Err(LaunchError::Unsupported {
                        what,
                        kernel: kernel_release(),
                        policy: lacking,
                    });
                }
                warnings.push(Warning::Unsupported { what });
                let without_balancing = req.flags.without(PolicyFlags::NUMA_BALANCING);
                if support.supports(req.mode, without_balancing) {
                    req.flags = without_balancing;
                } else {
                    policy = None;
                }
            }
        }
    }
    let setup = ChildSetup::new(
        resolved.cpus.as_ref(),
        policy.as_ref(),
        cpu_bits,
        node_bits,
        launch.verify,
    );
    Ok(LaunchSetup { setup, warnings })
}

/// Applies a prepared placement to this process (the caller then execs). Returns the
/// warnings of the whole launch.
pub fn apply_to_self<K: Kernel + ?Sized>(
    kernel: &K,
    mut prepared: LaunchSetup,
    resolved: &Resolved,
    allowed: &Allowed,
    launch: Launch,
) -> Result<Vec<Warning>, LaunchError> {
    match prepared.setup.apply(kernel) {
        Ok(()) => Ok(prepared.warnings),
        Err(error)
            if launch.ignore_unsupported
                && error.stage == Stage::SetMemoryPolicy
                && matches!(errno_of(&error), Some(Errno::NOSYS | Errno::OPNOTSUPP)) =>
        {
            // systemd's rule: no NUMA support in the kernel means run without a policy. The
            // affinity was already applied.
            prepared.warnings.push(Warning::NoNumaSupport { error });
            Ok(prepared.warnings)
        }
        Err(error) => Err(explain(error, resolved, allowed, Some(&prepared.setup.applied()))),
    }
}

/// Turns a failed stage into an error that names the step, the errno and the likely cause.
/// `got` is what the kernel applied, for mismatches.
pub fn explain(
    error: SetupError,
    resolved: &Resolved,
    allowed: &Allowed,
    got: Option<&Applied>,
) -> LaunchError {
    fn list<K: IdKind>(s: Option<&IdSet<K>>) -> String {
        s.map_or_else(|| "none".to_string(), |s| s.to_string())
    }
    let cause = match (error.stage, errno_of(&error)) {
        (Stage::SetAffinity, Some(Errno::INVAL)) => format!(
            "CPUs {} are outside this process's allowed CPUs {} (Cpus_allowed_list) or offline",
            list(resolved.cpus.as_ref()),
            allowed.cpus
        ),
        (Stage::SetMemoryPolicy, Some(Errno::INVAL)) => format!(
            "nodes {} are outside this process's allowed nodes {} (Mems_allowed_list), or have \
             no memory",
            list(resolved.memory_nodes.as_ref()),
            allowed.nodes
        ),
        (_, Some(Errno::PERM)) => {
            "the call was denied: a seccomp filter (containers block NUMA calls unless \
             CAP_SYS_NICE is granted) or a missing CAP_SYS_NICE"
                .to_string()
        }
        (_, Some(Errno::NOSYS | Errno::OPNOTSUPP)) => {
            // LaunchError::Setup adds the advice, worded for the caller's command line.
            "the kernel lacks NUMA support or this policy".to_string()
        }
        (Stage::AffinityMismatch, _) => format!(
            "asked for CPUs {}, the kernel applied {}: the cpuset allows only {}",
            list(resolved.cpus.as_ref()),
            got.map_or_else(String::new, |g| g.cpus.to_string()),
            allowed.cpus
        ),
        (Stage::MemoryPolicyMismatch, _) => format!(
            "asked for {} on nodes {}, the kernel applied {} on nodes {}: the cpuset allows only \
             nodes {}",
            resolved.memory_policy.map_or("no policy", |p| p.name()),
            list(resolved.memory_nodes.as_ref()),
            got.map_or_else(|| "nothing".to_string(), |g| g.policy.to_string()),
            got.map_or_else(String::new, |g| g.nodes.to_string()),
            allowed.nodes
        ),
        _ => String::new(),
    };
    LaunchError::Setup { error, cause }
}

/// The environment variable `pinctl exec -c FILE --service NAME` sets to the instance's name
/// in what it runs: a process pinned where the host's plan puts an instance is known as that
/// instance's, not as one pinned by someone else (`pinctl status --host`, docs/planning.md).
pub const INSTANCE_ENV: &str = "PINCTL_INSTANCE";

/// Replaces this process with `command` (PATH search as execvp), with [`INSTANCE_ENV`] set to
/// `instance` when given; returns only on failure.
pub fn exec(command: &[OsString], instance: Option<&str>) -> LaunchError {
    let Some((program, args)) = command.split_first() else {
        return LaunchError::NoCommand;
    };
    let mut cmd = std::process::Command::new(program);
    if let Some(name) = instance {
        cmd.env(INSTANCE_ENV, name);
    }
    let source = cmd.args(args).exec();
    let name = pinctl_topology::text::shown(&program.to_string_lossy());
    match source.kind() {
        io::ErrorKind::NotFound => {
            LaunchError::NotFound { name, missing: what_is_missing(program), error: source }
        }
        _ => LaunchError::NotExecutable { name, source },
    }
}

/// Why `execvp` said ENOENT: the program is not in `PATH`, the path does not exist, or the
/// file exists and the interpreter of its `#!` line does not.
fn what_is_missing(program: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    use std::path::{Path, PathBuf};
    let found: Option<PathBuf> = if program.as_bytes().contains(&b'/') {
        Some(PathBuf::from(program)).filter(|p| p.exists())
    } else {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
    };
    let Some(file) = found else {
        return if program.as_bytes().contains(&b'/') {
            "does not exist".to_string()
        } else {
            "not found in PATH".to_string()
        };
    };
    let mut head = [0u8; 256];
    let n = std::fs::File::open(&file).and_then(|mut f| io::Read::read(&mut f, &mut head));
    let head = &head[..n.unwrap_or(0)];
    match head.strip_prefix(b"#!") {
        Some(rest) => {
            let line = rest.split(|&b| b == b'\n').next().unwrap_or(rest);
            let text = String::from_utf8_lossy(line);
            let interpreter = text.split_whitespace().next().unwrap_or("");
            let at = if file.as_path() == Path::new(program) {
                String::new()
            } else {
                format!(" (`{}`)", file.display())
            };
            format!(
                "was found{at} but needs interpreter `{}` (its `#!` line), which does not exist",
                pinctl_topology::text::shown(interpreter)
            )
        }
        None => format!(
            "was found (`{}`) but cannot be run: a library or loader it needs is missing",
            file.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use pinctl_sys::{Call, PolicyMode, RecordingKernel};

    use super::*;

    fn allowed() -> Allowed {
        Allowed { cpus: "0-7".parse().unwrap(), nodes: "0-1".parse().unwrap() }
    }

    fn resolved() -> Resolved {
        crate::request::sample_resolved()
    }

    fn message(stage: Stage, errno: i32) -> (u8, String) {
        let e = explain(SetupError { stage, errno }, &resolved(), &allowed(), None);
        (e.exit_status().code(), e.to_string())
    }

    #[test]
    fn failures_name_the_step_the_errno_and_the_cause() {
        let (code, m) = message(Stage::SetMemoryPolicy, Errno::INVAL.raw_os_error());
        assert_eq!(code, 242);
        assert!(m.contains("set_mempolicy") && m.contains("os error 22"), "{m}");
        assert!(m.contains("nodes 3 are outside this process's allowed nodes 0-1"), "{m}");

        let (code, m) = message(Stage::SetAffinity, Errno::INVAL.raw_os_error());
        assert_eq!(code, 215);
        assert!(m.contains("CPUs 8-15 are outside this process's allowed CPUs 0-7"), "{m}");

        let (_, m) = message(Stage::SetAffinity, Errno::PERM.raw_os_error());
        assert!(m.contains("seccomp") && m.contains("CAP_SYS_NICE"), "{m}");

        let (code, m) = message(Stage::SetMemoryPolicy, Errno::NOSYS.raw_os_error());
        assert_eq!(code, 242);
        assert!(m.contains("--if-unsupported=ignore"), "{m}");
        // numactl mode rejects --if-unsupported: its message states the fact only.
        let e = explain(
            SetupError { stage: Stage::SetMemoryPolicy, errno: Errno::NOSYS.raw_os_error() },
            &resolved(),
            &allowed(),
            None,
        );
        let numactl = e.message(crate::Dialect::Numactl);
        assert_eq!(m, e.message(crate::Dialect::Pinctl));
        assert!(numactl.contains("lacks NUMA support") && !numactl.contains("--"), "{numactl}");

        let (code, m) = message(Stage::AffinityMismatch, 0);
        assert_eq!(code, 215);
        assert!(m.contains("the cpuset allows only 0-7"), "{m}");
    }

    #[test]
    fn balancing_is_a_flag_of_bind_only() {
        let mut r = resolved();
        r.numa_balancing = true;
        let req = policy_request(&r).unwrap();
        assert_eq!((req.mode, req.flags), (PolicyMode::Bind, PolicyFlags::NUMA_BALANCING));
        r.memory_policy = Some(MemoryPolicy::Interleave);
        let req = policy_request(&r).unwrap();
        assert_eq!((req.mode, req.flags), (PolicyMode::Interleave, PolicyFlags::NONE));
        r.memory_policy = Some(MemoryPolicy::Local);
        assert_eq!(policy_request(&r).unwrap().nodes, None);
    }

    /// A kernel from before 5.15: preferred-many is refused, named, unless ignored, in which
    /// case the launch runs with the affinity only and says so.
    #[test]
    fn a_policy_the_kernel_lacks_is_refused_or_dropped_with_a_warning() {
        let mut kernel = RecordingKernel::new(8, 2);
        kernel.max_mode = PolicyMode::Local;
        let mut r = resolved();
        r.cpus = Some("0-1".parse().unwrap());
        r.memory_policy = Some(MemoryPolicy::PreferredMany);
        r.memory_nodes = Some("0-1".parse().unwrap());
        let strict = Launch { verify: true, ignore_unsupported: false };
        let e = setup(&kernel, &r, &allowed(), strict, || "Linux 5.10".into()).unwrap_err();
        assert_eq!(e.exit_status().code(), 242);
        assert!(e.to_string().contains("Linux 5.10") && e.to_string().contains("preferred-many"));
        assert!(e.to_string().contains("--if-unsupported=ignore"));
        // numactl mode points at the numactl option every kernel has.
        let numactl = e.message(crate::Dialect::Numactl);
        assert!(
            numactl.ends_with("(--preferred, with one node, works on every kernel)"),
            "{numactl}"
        );

        let lenient = Launch { verify: true, ignore_unsupported: true };
        let prepared = setup(&kernel, &r, &allowed(), lenient, || unreachable!()).unwrap();
        assert!(matches!(prepared.warnings[..], [Warning::Unsupported { .. }]));
        let calls_before = kernel.calls().len();
        apply_to_self(&kernel, prepared, &r, &allowed(), lenient).unwrap();
        let applied = &kernel.calls()[calls_before..];
        assert!(matches!(applied[0], Call::SetAffinity { .. }), "{applied:?}");
        assert!(
            !applied.iter().any(|c| matches!(c, Call::SetMempolicy { .. })),
            "no policy is set when it was dropped: {applied:?}"
        );
    }
}
