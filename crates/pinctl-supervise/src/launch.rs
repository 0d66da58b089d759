//! The supervisor's only door to `pinctl-sys`, `pinctl-sysfs` and `pinctl-plan`: building
//! instance specs from a plan, spawning a child with its placement applied between fork and
//! exec, reading its placement back from `/proc`, and reading what `/proc` says about a process
//! for adoption. Kept in one file so the crates below can change shape with one place to follow.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use pinctl_config::{Config, Enforce, RestartPolicy, Service};
use pinctl_launch::{ExitStatus, Launch, LaunchError, Resolved};
use pinctl_plan::Plan;
use pinctl_sys::{
    ChildCredentials, ChildSetup, CommandCgroup, CommandCredentials, CommandPlacement,
    CommandSignals, LinuxKernel, Rlimit, SetupError, User,
};
use pinctl_sysfs::proc::pid as process;
use pinctl_sysfs::proc::uptime;
use pinctl_sysfs::{FsRoot, Host};
use pinctl_topology::Placement;
use rustix::io::Errno;
use rustix::process::Signal as S;

use crate::adopt::Observed;
use crate::lifecycle::{Pid, Policy, Restart, StartLimit};
use crate::output::FileOwner;
use crate::spec::{InstanceSpec, LimitsSpec};

/// An instance's failures before its program ran, as the lifecycle's `i32` codes.
const EXIT_CHDIR: i32 = ExitStatus::WorkingDir as i32;
const EXIT_EXEC: i32 = ExitStatus::Exec as i32;
pub const EXIT_STDOUT: i32 = ExitStatus::Output as i32;
const EXIT_USER: i32 = ExitStatus::User as i32;

/// The spec of every planned instance, in plan order.
pub fn specs(config: &Config, plan: &Plan) -> Vec<InstanceSpec> {
    let mut out = Vec::new();
    for (service, instance) in config.instances() {
        let Some(p) = plan.instance(&instance.name) else { continue };
        out.push(InstanceSpec {
            name: instance.name.clone(),
            service: service.name.clone(),
            command: instance.command.iter().map(|a| a.to_string()).collect(),
            env: instance.env.clone(),
            user: service.user.clone(),
            group: service.group.clone(),
            working_dir: instance.working_dir.clone(),
            limits: LimitsSpec {
                nofile: service.limits.nofile,
                nproc: service.limits.nproc,
                memlock: service.limits.memlock,
                core: service.limits.core,
                stack: service.limits.stack,
            },
            placement: p.placement.clone(),
            output: instance.output.clone(),
            enforce_cgroup: service.enforce == Some(Enforce::Cgroup),
            policy: policy(service),
        });
    }
    out
}

fn policy(service: &Service) -> Policy {
    Policy {
        restart: match service.restart {
            RestartPolicy::Always => Restart::Always,
            RestartPolicy::OnFailure => Restart::OnFailure,
            RestartPolicy::Never => Restart::Never,
        },
        restart_delay: service.restart_delay,
        restart_max_delay: service.restart_max_delay,
        start_limit: service
            .start_limit
            .map(|l| StartLimit { burst: l.burst, interval: l.interval }),
        stop_signal: signal_number(&service.stop_signal),
        stop_timeout: service.stop_timeout,
    }
}

/// This architecture's number of a signal as the config names it (`TERM`, `INT`, ...: the
/// names pinctl-config accepts, without `SIG`).
pub fn signal_number(name: &str) -> i32 {
    let signal = match name {
        "HUP" => S::HUP,
        "INT" => S::INT,
        "QUIT" => S::QUIT,
        "ILL" => S::ILL,
        "TRAP" => S::TRAP,
        "ABRT" => S::ABORT,
        "BUS" => S::BUS,
        "FPE" => S::FPE,
        "KILL" => S::KILL,
        "USR1" => S::USR1,
        "SEGV" => S::SEGV,
        "USR2" => S::USR2,
        "PIPE" => S::PIPE,
        "ALRM" => S::ALARM,
        "TERM" => S::TERM,
        "STKFLT" => S::STKFLT,
        "CHLD" => S::CHILD,
        "CONT" => S::CONT,
        "STOP" => S::STOP,
        "TSTP" => S::TSTP,
        "TTIN" => S::TTIN,
        "TTOU" => S::TTOU,
        "URG" => S::URG,
        "XCPU" => S::XCPU,
        "XFSZ" => S::XFSZ,
        "VTALRM" => S::VTALARM,
        "PROF" => S::PROF,
        "WINCH" => S::WINCH,
        "IO" => S::IO,
        "PWR" => S::POWER,
        "SYS" => S::SYS,
        _ => S::TERM,
    };
    signal.as_raw()
}

/// Why a spawn failed, with the exit status it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnFailure {
    pub reason: String,
    pub code: i32,
}

fn fail(code: i32, reason: String) -> SpawnFailure {
    SpawnFailure { reason, code }
}

/// Spawns the instance: stdin from /dev/null, stdout and stderr into `output` (the write end
/// of its FIFO), its own process group, limits and credentials, then its placement (affinity,
/// memory policy, read back and compared) between fork and exec. (An `output` file was opened
/// before, by its pump: see [`crate::output`].)
/// Checks what it can in the parent first so the failure names its cause. `pin = false`
/// leaves the placement out (testing only). `nofile` is the `RLIMIT_NOFILE` (soft, hard) the
/// supervisor started with, given back to an instance whose file sets no `nofile` (pinctl
/// raises its own soft limit; a service expects the usual one, often 1024 for `select`).
pub fn spawn(
    spec: &InstanceSpec,
    pin: bool,
    cgroup_procs: Option<fs::File>,
    nofile: Option<(u64, u64)>,
    output: OwnedFd,
) -> Result<tokio::process::Child, SpawnFailure> {
    let program = &spec.command[0];
    let path_var = spec.env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok());
    let resolved = resolve_program(program, path_var.as_deref())?;
    if let Some(dir) = &spec.working_dir {
        if !dir.is_dir() {
            return Err(fail(
                EXIT_CHDIR,
                format!("working-dir `{}` does not exist or is not a directory", dir.display()),
            ));
        }
    }
    let mut credentials = ChildCredentials::default();
    for (limit, value) in [
        (Rlimit::Nofile, spec.limits.nofile),
        (Rlimit::Nproc, spec.limits.nproc),
        (Rlimit::Memlock, spec.limits.memlock),
        (Rlimit::Core, spec.limits.core),
        (Rlimit::Stack, spec.limits.stack),
    ] {
        if let Some(v) = value {
            credentials.limits.push((limit, v, v));
        }
    }
    if let (None, Some((soft, hard))) = (spec.limits.nofile, nofile) {
        credentials.limits.push((Rlimit::Nofile, soft, hard));
    }
    let identity = identity(spec)?;
    credentials.uid = identity.uid;
    credentials.gid = identity.gid;
    credentials.groups = identity.groups;
    let user_env = identity.env;

    let mut cmd = std::process::Command::new(&resolved);
    cmd.arg0(program).args(&spec.command[1..]);
    for (k, v) in user_env {
        if !spec.env.contains_key(k) {
            cmd.env(k, v);
        }
    }
    // pinctl's own systemd conversation is not the instance's.
    for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
        cmd.env_remove(var);
    }
    cmd.envs(&spec.env);
    if let Some(dir) = &spec.working_dir {
        cmd.current_dir(dir);
    }
    cmd.stdin(Stdio::null());
    let second = output
        .try_clone()
        .map_err(|e| fail(1, format!("cannot start `{program}` for now: {e}")))?;
    cmd.stdout(Stdio::from(output)).stderr(Stdio::from(second));
    // Its own process group, so a stop reaches the helpers it forks.
    cmd.process_group(0);
    // As systemd: a write to a relay that is gone (after `detach`) must not kill it.
    cmd.ignore_sigpipe();
    // Into its cgroup first: before privileges are dropped, and before the placement, which
    // joining a cpuset cgroup would otherwise reset.
    if let Some(procs) = cgroup_procs {
        cmd.join_cgroup(procs);
    }
    cmd.credentials(credentials);
    if pin {
        cmd.placement(child_setup(&spec.placement)?);
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(false);
    cmd.spawn().map_err(|e| spawn_error(spec, &e))
}

/// Who an instance runs as, from its `user` and `group`: `None` fields are pinctl's own.
struct Identity {
    uid: Option<u32>,
    gid: Option<u32>,
    groups: Option<Vec<u32>>,
    /// `USER`, `LOGNAME` and `HOME` of its user.
    env: Vec<(&'static str, String)>,
}

fn identity(spec: &InstanceSpec) -> Result<Identity, SpawnFailure> {
    let mut id = Identity { uid: None, gid: None, groups: None, env: Vec::new() };
    if let Some(name) = &spec.user {
        let user = lookup_user(name)?;
        id.gid = Some(user.gid);
        let groups = pinctl_sys::group_list(&user.name, user.gid).map_err(|e| {
            fail(EXIT_USER, format!("cannot list the groups of user `{name}`: {e}"))
        })?;
        id.groups = Some(groups);
        id.uid = Some(user.uid);
        id.env = vec![
            ("USER", user.name.clone()),
            ("LOGNAME", user.name.clone()),
            ("HOME", user.home.display().to_string()),
        ];
    }
    if let Some(name) = &spec.group {
        id.gid = Some(lookup_group(name)?);
    }
    if id.groups.is_none() && id.gid.is_some() {
        id.groups = id.gid.map(|g| vec![g]);
    }
    Ok(id)
}

/// Who an instance's output file is written for: the user, group and groups it runs as, when
/// its file sets any (`None`: pinctl's own, root).
pub fn output_owner(spec: &InstanceSpec) -> Result<Option<FileOwner>, SpawnFailure> {
    let id = identity(spec)?;
    if id.uid.is_none() && id.gid.is_none() {
        return Ok(None);
    }
    let uid = id.uid.unwrap_or_else(|| rustix::process::geteuid().as_raw());
    Ok(Some(FileOwner {
        name: spec.user.clone().unwrap_or_else(|| uid.to_string()),
        uid,
        gid: id.gid.unwrap_or_else(|| rustix::process::getegid().as_raw()),
        groups: id.groups.unwrap_or_default(),
    }))
}

/// An exit status as the lifecycle's `i32` codes.
pub fn status(s: ExitStatus) -> i32 {
    i32::from(s.code())
}

fn spawn_error(spec: &InstanceSpec, e: &io::Error) -> SpawnFailure {
    let program = &spec.command[0];
    if let Some(setup) = SetupError::from_spawn_error(e) {
        return fail(status(ExitStatus::from(setup.stage)), setup.to_string());
    }
    match Errno::from_io_error(e) {
        Some(Errno::NOENT) => {
            fail(status(ExitStatus::NotFound), format!("`{program}` not found: {e}"))
        }
        Some(Errno::ACCESS | Errno::NOEXEC) => {
            fail(status(ExitStatus::NotExecutable), format!("`{program}` cannot be executed: {e}"))
        }
        // fork/clone, or the pipes and descriptors a spawn needs, ran out for now: worth
        // another try (a descriptor flood on the control socket must not fail an instance
        // for good).
        Some(Errno::AGAIN | Errno::NOMEM | Errno::MFILE | Errno::NFILE) => {
            fail(1, format!("cannot start `{program}` for now: {e}"))
        }
        _ => fail(
            EXIT_EXEC,
            format!("cannot start `{program}` (setting limits, user, group or exec): {e}"),
        ),
    }
}

/// [`pinctl_launch::resolve_program`], as the instance's failure.
fn resolve_program(program: &str, path_var: Option<&str>) -> Result<PathBuf, SpawnFailure> {
    pinctl_launch::resolve_program(program, path_var).map_err(|(s, why)| fail(status(s), why))
}

fn lookup_user(name: &str) -> Result<User, SpawnFailure> {
    pinctl_launch::lookup_user(name).map_err(|(s, why)| fail(status(s), why))
}

fn lookup_group(name: &str) -> Result<u32, SpawnFailure> {
    pinctl_launch::lookup_group(name).map_err(|(s, why)| fail(status(s), why))
}

/// The child setup `pinctl exec` would apply for this placement, built by the same launcher
/// code (pinctl-launch): policies the kernel lacks are refused, named, with 242 rather than
/// run unpinned, and the setup verifies what the kernel applied before exec.
fn child_setup(p: &Placement) -> Result<ChildSetup, SpawnFailure> {
    let resolved = Resolved::from(p);
    let failed = |e: LaunchError| fail(i32::from(e.exit_status().code()), e.to_string());
    let mut host = Host::live();
    let allowed = host.allowed().map_err(|e| failed(LaunchError::Allowed(e)))?;
    let launch = Launch { verify: true, ignore_unsupported: false };
    let prepared =
        pinctl_launch::setup(&LinuxKernel, &resolved, &allowed, launch, || host.kernel_release())
            .map_err(failed)?;
    Ok(prepared.setup)
}

/// Reads the running child's CPUs (`/proc/PID/status`) and memory policy (`numa_maps`) and
/// compares them with the plan. A process that is already gone cannot be checked (the setup
/// compared both before exec); `Err` carries the reason and the exit status it stands for.
pub fn verify(pid: Pid, p: &Placement) -> Result<(), (String, i32)> {
    let Ok(id) = u32::try_from(pid) else { return Ok(()) };
    let mut fs = live();
    if let Ok(Some(seen)) = process::status::read(&mut fs, id) {
        if let Some(cpus) = seen.cpus {
            if !p.cpus.is_empty() && cpus != p.cpus {
                return Err((
                    format!("runs on CPUs {cpus}, the plan says {}", p.cpus),
                    status(ExitStatus::CpuAffinity),
                ));
            }
        }
    }
    if let Ok(Some(maps)) = process::numa_maps::read(&mut fs, id) {
        let want = p.numa_maps_policy();
        if !maps.is_empty() && !maps.iter().any(|m| m.policy == want) {
            let seen: std::collections::BTreeSet<&str> =
                maps.iter().map(|m| m.policy.as_str()).collect();
            let seen: Vec<&str> = seen.into_iter().collect();
            return Err((
                format!("memory policy is `{}`, the plan says `{want}`", seen.join("`, `")),
                status(ExitStatus::MemoryPolicy),
            ));
        }
    }
    Ok(())
}

/// The live machine's `/proc`, read through pinctl-sysfs's reader of each file.
fn live() -> FsRoot<'static> {
    FsRoot::new(Path::new("/"))
}

/// What `/proc/PID` says about a process now; `None` when there is no such process.
pub fn observe(pid: Pid) -> Option<Observed> {
    let id = u32::try_from(pid).ok()?;
    let mut fs = live();
    let stat = process::stat::read(&mut fs, id).ok()??;
    let cmdline = process::cmdline::read(&mut fs, id).ok().flatten().unwrap_or_default();
    let cgroup = process::cgroup::read_v2(&mut fs, id).ok().flatten();
    Some(Observed { start_time: stat.start_time, cgroup, cmdline, state: stat.state })
}

/// Whether process `pid`, found in an instance's own cgroup without the state file saying so
/// (a supervisor died between the spawn and its write), proves to be that instance's main
/// process as `spec` would start it: it leads its own process group (as every instance does),
/// runs exactly the command, with the environment, user and working folder the spec gives,
/// and where it is `pinned`, on the placement the spec plans. `Err` says what differs. A
/// program that rewrites its `argv` (`redis-server *:6379`) does not prove itself this way.
pub fn proves_instance(pid: Pid, spec: &InstanceSpec, pinned: bool) -> Result<(), String> {
    let observed = observe(pid).ok_or("it is gone")?;
    if observed.state == 'Z' || observed.state == 'X' {
        return Err("it has exited".into());
    }
    if process_group(pid) != Some(pid) {
        return Err("it does not lead a process group".into());
    }
    if observed.cmdline != spec.command {
        return Err(format!("it runs `{}`", observed.cmdline.join(" ")));
    }
    let id = pid as u32;
    let mut fs = live();
    let environ = process::environ::read(&mut fs, id)
        .map_err(|e| format!("its environment cannot be read: {e}"))?
        .ok_or("it is gone")?;
    for (k, v) in &spec.env {
        if !process::environ::has(&environ, k, v) {
            return Err(format!("its environment lacks `{k}` as the file sets it"));
        }
    }
    if let Some(user) = &spec.user {
        let uid = lookup_user(user).map_err(|f| f.reason)?.uid;
        let seen = process::status::read(&mut fs, id).ok().flatten();
        let real = seen.and_then(|s| s.uids).map(|u| u.real);
        if real != Some(uid) {
            return Err(format!("it does not run as `{user}`"));
        }
    }
    if let Some(dir) = &spec.working_dir {
        let cwd = fs::read_link(format!("/proc/{pid}/cwd")).ok();
        if cwd.is_none() || cwd != fs::canonicalize(dir).ok() {
            return Err(format!("it does not run in `{}`", dir.display()));
        }
    }
    if pinned {
        verify(pid, &spec.placement).map_err(|(why, _)| format!("it {why}"))?;
    }
    Ok(())
}

/// A pidfd for a process that is not our child (an adopted instance): it becomes readable when
/// the process exits, so its end is seen without polling `/proc`. `ENOSYS` before Linux 5.3.
pub fn pidfd_open(pid: Pid) -> io::Result<std::os::fd::OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or(Errno::SRCH)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).map_err(io::Error::from)
}

/// Blocks until a pidfd turns readable: its process has exited.
pub fn wait_pidfd(pidfd: &std::os::fd::OwnedFd) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    loop {
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) if !fds[0].revents().is_empty() => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The process group of `pid`, when it is alive.
pub fn process_group(pid: Pid) -> Option<i32> {
    let stat = process::stat::read(&mut live(), u32::try_from(pid).ok()?).ok()??;
    i32::try_from(stat.pgrp).ok()
}

/// How long ago a process with this start time (field 22 of `/proc/PID/stat`) started.
pub fn process_age(start_time: u64) -> Option<std::time::Duration> {
    let uptime = uptime::read(&mut live()).ok()??;
    let started = std::time::Duration::from_secs_f64(start_time as f64 / clock_ticks());
    Some(uptime.saturating_sub(started))
}

/// Clock ticks per second, the unit of `/proc/PID/stat`'s times.
fn clock_ticks() -> f64 {
    rustix::param::clock_ticks_per_second().max(1) as f64
}

/// CPU seconds and resident bytes of a running process, for `status`; `None` once it is
/// gone (a status racing its exit shows no figures rather than failing).
pub fn usage(pid: Pid) -> Option<(f64, Option<u64>)> {
    let id = u32::try_from(pid).ok()?;
    let mut fs = live();
    let stat = process::stat::read(&mut fs, id).ok()??;
    let seen = process::status::read(&mut fs, id).ok()??;
    Some(((stat.cpu_ticks + stat.waited_ticks) as f64 / clock_ticks(), seen.rss_bytes))
}

/// The v2 cgroup of this process (`/system.slice/pinctl.service`).
pub fn own_cgroup() -> Option<String> {
    process::cgroup::read_v2(&mut live(), pinctl_sysfs::Pid::Current).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn this_process_as_proc_shows_it() {
        let me = std::process::id() as Pid;
        let seen = observe(me).unwrap();
        assert!("RS".contains(seen.state), "{}", seen.state);
        assert!(seen.cmdline[0].contains("pinctl_supervise"), "{:?}", seen.cmdline);
        assert_eq!(seen.cgroup, own_cgroup());
        let age = process_age(seen.start_time).unwrap();
        assert!(age < std::time::Duration::from_secs(3600), "{age:?}");
        let (cpu, rss) = usage(me).unwrap();
        assert!(cpu >= 0.0 && rss.unwrap() > 0);
        assert!(process_group(me).is_some());
        assert_eq!(observe(-1), None);
        assert_eq!(usage(i32::MAX), None);
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_number("TERM"), 15);
        assert_eq!(signal_number("INT"), 2);
        assert_eq!(signal_number("KILL"), 9);
        assert_eq!(signal_number("SYS"), S::SYS.as_raw());
        assert_eq!(signal_number("PWR"), S::POWER.as_raw());
    }

    #[test]
    fn programs_are_found_or_named() {
        assert!(resolve_program("sh", Some("/nonexistent:/bin:/usr/bin")).is_ok());
        assert_eq!(
            resolve_program("no-such-prog-x", Some("/bin")).unwrap_err().code,
            status(ExitStatus::NotFound)
        );
        assert_eq!(
            resolve_program("/nonexistent/x", None).unwrap_err().code,
            status(ExitStatus::NotFound)
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("data");
        fs::write(&plain, "x").unwrap();
        fs::set_permissions(&plain, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            resolve_program(plain.to_str().unwrap(), None).unwrap_err().code,
            status(ExitStatus::NotExecutable)
        );
    }
}
