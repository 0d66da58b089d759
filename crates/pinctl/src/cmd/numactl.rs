//! numactl compatibility: pinctl invoked through a symlink named `numactl` takes numactl's
//! command line as is (getopt_long rules: options until the first non-option, `--opt=val`,
//! `--opt val`, `-m0`, unique prefixes of long names) and runs the command with the same
//! CPU affinity and memory policy numactl would give it. `--show` and `--hardware` print
//! numactl's output shape. Policies are applied through the same code as `pinctl exec`.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

use pinctl_launch::numactl::{self, Action, Hardware, NUMACTL_VERSION, Refusal, Shown, UsageError};
use pinctl_launch::{Dialect, ExitStatus, Launch, Resolved};
use pinctl_sys::{LinuxKernel, PolicyMode};
use pinctl_sysfs::{Allowed, Host};
use pinctl_topology::{IdKind, IdSet};

use crate::error::{CmdResult, Error};

/// numactl 2.0.19's usage text without the shared-memory forms this personality refuses.
const USAGE: &str = "usage: numactl [--all | -a] [--balancing | -b]
               [--interleave= | -i <nodes>] [--weighted-interleave= | -w <nodes>]
               [--preferred= | -p <node>] [--preferred-many= | -P <nodes>]
               [--physcpubind= | -C <cpus>] [--cpunodebind= | -N <nodes>]
               [--membind= | -m <nodes>] [--localalloc | -l] command args ...
       numactl [--show | -s]
       numactl [--hardware | -H] [--cpu-compress]
       numactl [--version]

memory policy is --preferred | -p, --membind | -m, --localalloc | -l,
                 --interleave | -i, --weighted-interleave | -w
<nodes> is a comma delimited list of node numbers or A-B ranges or all.
Instead of a number a node can also be:
  netdev:DEV the node connected to network device DEV
  file:PATH  the node the block device of path is connected to
  ip:HOST    the node of the network device host routes through
  block:PATH the node of block device path
  pci:[seg:]bus:dev[:func] The node of a PCI device
<cpus> is a comma delimited list of cpu numbers or A-B ranges or all
all ranges can be inverted with !
all numbers and ranges can be made cpuset-relative with +
the old --cpubind argument is deprecated.
use --cpunodebind or --physcpubind instead
use --balancing | -b to enable Linux kernel NUMA balancing
for the process if it is supported by kernel
(this is pinctl speaking numactl: shared memory options are not supported)
";

/// numactl's command line, run. Every failure exits 1, as numactl's do (scripts test
/// `$? == 1`): the statuses `pinctl exec` gives its steps (126, 127, 215, 242) are its own
/// contract, not numactl's.
pub(crate) fn run(args: &[OsString]) -> CmdResult {
    run_numactl(args).map_err(numactl_failure)
}

/// The same failure in numactl's terms: status 1, advice naming numactl's options.
fn numactl_failure(e: Error) -> Error {
    match e {
        Error::Launch(e) => {
            let mut text = e.message(Dialect::Numactl);
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(": ");
                text.push_str(&c.to_string());
                cause = c.source();
            }
            Error::failure(anyhow::anyhow!(text))
        }
        Error::Usage(m) => Error::failure(anyhow::anyhow!(m)),
        Error::Reported(_) => Error::Reported(ExitStatus::Failure),
        e @ Error::Failure(_) => e,
    }
}

fn run_numactl(args: &[OsString]) -> CmdResult {
    let mut warn = |w: &str| {
        let _ = writeln!(io::stderr(), "{w}");
    };
    let (action, cmd) = numactl::read(args, &mut warn).map_err(print_usage)?;
    let mut host = Host::live();
    match action {
        Action::Show(asked) => {
            let (resolved, allowed) = asked.resolve(&mut host).map_err(refused)?;
            let launch = Launch { verify: false, ignore_unsupported: true };
            apply(&mut host, &resolved, &allowed, launch)?;
            show(&mut host).map(|()| ExitCode::SUCCESS)
        }
        Action::Hardware { compress } => {
            let hardware = Hardware::read(&mut host).map_err(Error::failure)?;
            hardware_text(&hardware, &mut io::stdout().lock(), compress).map_err(io_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Version => {
            writeln!(io::stdout().lock(), "{NUMACTL_VERSION}").map_err(io_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Run(asked) => {
            let command = &args[cmd..];
            if command.is_empty() {
                return Err(print_usage(UsageError { message: String::new(), invalid: None }));
            }
            let (resolved, allowed) = asked.resolve_to_run(&mut host).map_err(refused)?;
            // numactl falls back to plain bind when the kernel lacks NUMA balancing for bind,
            // and accepts whatever the cpuset narrows a request to.
            let launch = Launch { verify: false, ignore_unsupported: resolved.numa_balancing };
            apply(&mut host, &resolved, &allowed, launch)?;
            Err(pinctl_launch::exec(command, None).into())
        }
    }
}

fn refused(r: Refusal) -> Error {
    match r {
        Refusal::Usage(e) => print_usage(e),
        Refusal::Launch(e) => Error::Launch(e),
    }
}

fn apply(
    host: &mut Host,
    resolved: &Resolved,
    allowed: &Allowed,
    launch: Launch,
) -> Result<(), Error> {
    let kernel = LinuxKernel;
    let prepared =
        pinctl_launch::setup(&kernel, resolved, allowed, launch, || host.kernel_release())?;
    let warnings = pinctl_launch::apply_to_self(&kernel, prepared, resolved, allowed, launch)?;
    crate::error::warn_all(&warnings);
    Ok(())
}

fn print_usage(e: UsageError) -> Error {
    let mut err = io::stderr().lock();
    if !e.message.is_empty() {
        let _ = writeln!(err, "numactl: {}", e.message);
    }
    let _ = err.write_all(USAGE.as_bytes());
    if let Some(spec) = e.invalid {
        let _ = writeln!(io::stdout().lock(), "<{spec}> is invalid");
    }
    Error::Reported(ExitStatus::Failure)
}

fn io_err(e: io::Error) -> Error {
    Error::failure(e)
}

/// numactl's `printmask`: `name: 0 1 ` then a newline.
fn write_mask<K: IdKind>(out: &mut impl Write, name: &str, set: &IdSet<K>) -> io::Result<()> {
    write!(out, "{name}: ")?;
    for id in set.iter() {
        write!(out, "{id} ")?;
    }
    writeln!(out)
}

/// `numactl --show`: this process's policy and affinity, in numactl's shape.
fn show(host: &mut Host) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    let current = pinctl_launch::current_placement(&LinuxKernel).map_err(io_err)?;
    let cpus = current.cpus.clone();
    let Some(shown) = Shown::of(current, host)? else {
        write_mask(&mut out, "physcpubind", &cpus).map_err(io_err)?;
        writeln!(out, "No NUMA support available on this system.").map_err(io_err)?;
        return Err(Error::Reported(ExitStatus::Failure));
    };
    show_text(&mut out, &shown).map_err(io_err)
}

fn show_text(w: &mut impl Write, shown: &Shown) -> io::Result<()> {
    let Shown { mode, nodes, next_node: cur, membind, cpubind, .. } = shown;
    let mode = *mode;
    // numactl 2.0.16's names; it prints the number for the others (docs/exec.md).
    let name = mode.and_then(|m| match m {
        PolicyMode::Default => Some("default"),
        PolicyMode::Preferred => Some("preferred"),
        PolicyMode::Bind => Some("bind"),
        PolicyMode::Interleave => Some("interleave"),
        PolicyMode::Local => Some("local"),
        PolicyMode::PreferredMany => Some("preferred-many"),
        PolicyMode::WeightedInterleave => None,
    });
    match name {
        Some(name) => writeln!(w, "policy: {name}")?,
        None => writeln!(w, "policy: [{}]", shown.number)?,
    }
    write!(w, "preferred node: ")?;
    match mode {
        Some(PolicyMode::Preferred) => writeln!(w, "{}", nodes.first().unwrap_or(0))?,
        Some(PolicyMode::Default) => writeln!(w, "current")?,
        Some(PolicyMode::Interleave) => writeln!(w, "{cur} (interleave next)")?,
        Some(PolicyMode::Bind) => writeln!(w, "{}", membind.first().unwrap_or(0))?,
        Some(PolicyMode::PreferredMany) => writeln!(w, "{cur} (preferred-many)")?,
        // numactl prints nothing here, not even the newline.
        _ => {}
    }
    if mode == Some(PolicyMode::Interleave) {
        write_mask(w, "interleavemask", nodes)?;
        writeln!(w, "interleavenode: {cur}")?;
    }
    write_mask(w, "physcpubind", &shown.cpus)?;
    write_mask(w, "cpubind", cpubind)?;
    write_mask(w, "nodebind", cpubind)?;
    write_mask(w, "membind", membind)?;
    write_mask(w, "preferred", nodes)
}

/// C's `printf("% Nd", v)`: a space where the sign would go, the whole padded to `width`.
fn c_space_padded(v: u32, width: usize) -> String {
    format!("{:>width$}", format!(" {v}"))
}

/// `numactl --hardware`: nodes, their CPUs, memory and distances, in numactl 2.0.19's shape
/// (its distance table is wider than 2.0.16's: `% 4d` columns after `node  `).
fn hardware_text(h: &Hardware, w: &mut impl Write, compress: bool) -> io::Result<()> {
    writeln!(w, "available: {} nodes ({})", h.nodes.len(), h.nodes)?;
    for node in &h.each {
        let n = node.id;
        write!(w, "node {n} cpus:")?;
        if compress {
            let ranges: Vec<String> = node
                .cpus
                .ranges()
                .into_iter()
                .map(|(a, b)| if a == b { format!(" {a}") } else { format!(" {a}-{b}") })
                .collect();
            writeln!(w, "{} ({})", ranges.join(","), node.cpus.len())?;
        } else {
            for c in node.cpus.iter() {
                write!(w, " {c}")?;
            }
            writeln!(w)?;
        }
        let mb =
            |v: Option<u64>| v.map_or("<not available>".to_string(), |v| format!("{} MB", v >> 20));
        writeln!(w, "node {n} size: {}", mb(node.total_bytes))?;
        writeln!(w, "node {n} free: {}", mb(node.free_bytes))?;
    }
    let Some(table) = &h.distances else {
        return writeln!(w, "No distance information available.");
    };
    writeln!(w, "node distances:")?;
    write!(w, "node  ")?;
    for n in h.nodes.iter() {
        write!(w, "{} ", c_space_padded(n, 4))?;
    }
    writeln!(w)?;
    for (n, row) in h.nodes.iter().zip(table) {
        write!(w, "{}: ", c_space_padded(n, 4))?;
        for d in row {
            write!(w, "{} ", c_space_padded(*d, 4))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use pinctl_launch::LaunchError;
    use pinctl_topology::MemoryPolicy;

    use super::*;

    /// Failures past the command line (the kernel refused, exec failed) exit 1 in numactl's
    /// terms; `pinctl exec` gives them 215, 242, 126, 127.
    #[test]
    fn every_failure_is_status_1_with_numactl_advice() {
        use pinctl_sys::{SetupError, Stage};
        let setup = |errno| {
            Error::Launch(LaunchError::Setup {
                error: SetupError { stage: Stage::SetMemoryPolicy, errno },
                cause: "the kernel lacks NUMA support or this policy".into(),
            })
        };
        let exec = setup(rustix::io::Errno::NOSYS.raw_os_error());
        assert_eq!(exec.status(), ExitStatus::MemoryPolicy);
        assert!(exec.message().unwrap().contains("--if-unsupported=ignore"));
        let numactl = numactl_failure(setup(rustix::io::Errno::NOSYS.raw_os_error()));
        assert_eq!(numactl.status(), ExitStatus::Failure);
        let m = numactl.message().unwrap();
        assert!(
            m.starts_with("error: setting the memory policy failed") && !m.contains("--"),
            "{m}"
        );

        let unsupported = LaunchError::Unsupported {
            what: "the weighted-interleave memory policy (Linux 6.9+)".into(),
            kernel: "Linux 6.1".into(),
            policy: Some(MemoryPolicy::WeightedInterleave),
        };
        let e = numactl_failure(Error::Launch(unsupported));
        assert_eq!(e.status(), ExitStatus::Failure);
        assert!(
            e.message()
                .unwrap()
                .ends_with("(--interleave, which spreads pages evenly, works on every kernel)")
        );
        assert_eq!(
            numactl_failure(Error::Reported(ExitStatus::Usage)).status(),
            ExitStatus::Failure
        );
    }

    #[test]
    fn hardware_has_numactl_2_0_19s_widths() {
        let dir = tempfile::tempdir().unwrap();
        let node = |n: u32, file: &str, text: &str| {
            let p = dir.path().join(format!("sys/devices/system/node/node{n}/{file}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        std::fs::create_dir_all(dir.path().join("sys/devices/system/node")).unwrap();
        std::fs::write(dir.path().join("sys/devices/system/node/online"), "0-1\n").unwrap();
        for (n, cpus, dist) in [(0, "0-1", "10 21"), (1, "", "21 10")] {
            node(n, "cpulist", &format!("{cpus}\n"));
            node(n, "distance", &format!("{dist}\n"));
            node(
                n,
                "meminfo",
                &format!("Node {n} MemTotal: 2097152 kB\nNode {n} MemFree: 1048576 kB\n"),
            );
        }
        let mut out = Vec::new();
        let hardware = Hardware::read(&mut Host::at(dir.path())).unwrap();
        hardware_text(&hardware, &mut out, false).unwrap();
        // numactl 2.0.19 on the same tree (`printf("% 4d ")` columns after `node  `).
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "available: 2 nodes (0-1)\n\
             node 0 cpus: 0 1\n\
             node 0 size: 2048 MB\n\
             node 0 free: 1024 MB\n\
             node 1 cpus:\n\
             node 1 size: 2048 MB\n\
             node 1 free: 1024 MB\n\
             node distances:\n\
             node     0    1 \n   \
             0:   10   21 \n   \
             1:   21   10 \n"
        );
        // C's space flag keeps a blank before a number as wide as the column.
        assert_eq!(c_space_padded(7, 4), "   7");
        assert_eq!(c_space_padded(1000, 4), " 1000");
    }
}
