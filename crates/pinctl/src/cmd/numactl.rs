//! numactl compatibility: pinctl invoked through a symlink named `numactl` takes numactl's
//! command line as is (getopt_long rules: options until the first non-option, `--opt=val`,
//! `--opt val`, `-m0`, unique prefixes of long names) and runs the command with the same
//! CPU affinity and memory policy numactl would give it. `--show` and `--hardware` print
//! numactl's output shape. Policies are applied through the same code as `pinctl exec`.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

use pinctl_launch::spec::{CpuSpec, NodeSpec};
use pinctl_launch::{
    CpuTarget, Dialect, ExitStatus, Launch, LaunchError, Nodes, Request, Resolved,
};
use pinctl_sys::{LinuxKernel, PolicyFlags, PolicyMode};
use pinctl_sysfs::{Allowed, Host};
use pinctl_topology::{IdKind, IdSet, MemoryPolicy, NodeSet};

use crate::error::{CmdResult, Error};

/// The numactl release whose command line and output this personality follows: `--version`
/// prints it, `--hardware` has its widths, the usage text is its own (docs/exec.md).
const NUMACTL_VERSION: &str = "2.0.19";

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

/// numactl's option numbers above the ASCII range (`CPU_COMPRESS`, `OPT_VERSION`), as chars
/// that no short option uses.
const CPU_COMPRESS: char = '\u{1}';
const VERSION: char = '\u{2}';

/// (long name, short letter, takes an argument). numactl's table, in its order.
const OPTIONS: &[(&str, char, bool)] = &[
    ("all", 'a', false),
    ("interleave", 'i', true),
    ("weighted-interleave", 'w', true),
    ("preferred", 'p', true),
    ("preferred-many", 'P', true),
    ("cpubind", 'c', true),
    ("cpunodebind", 'N', true),
    ("physcpubind", 'C', true),
    ("membind", 'm', true),
    ("show", 's', false),
    ("localalloc", 'l', false),
    ("balancing", 'b', false),
    ("hardware", 'H', false),
    ("shm", 'S', true),
    ("file", 'f', true),
    ("offset", 'o', true),
    ("length", 'L', true),
    ("strict", 't', false),
    ("shmmode", 'M', true),
    ("dump", 'd', false),
    ("dump-nodes", 'D', false),
    ("shmid", 'I', true),
    ("huge", 'u', false),
    ("touch", 'T', false),
    ("cpu-compress", CPU_COMPRESS, false),
    ("verify", 'V', false),
    ("version", VERSION, false),
];

/// A numactl usage error: message (may be empty), then the usage text, exit 1.
struct UsageError {
    message: String,
    /// numactl prints `<spec> is invalid` on stdout after the usage text.
    invalid: Option<String>,
}

fn usage_error(message: impl Into<String>) -> UsageError {
    UsageError { message: message.into(), invalid: None }
}

/// One parsed option occurrence.
#[derive(Debug, PartialEq, Eq)]
enum Opt {
    Flag(char),
    Value(char, String),
}

/// `--show` and `--version` act (and exit) when numactl's getopt loop reaches them, so what
/// follows them is never read, not even a bad option.
fn acts_at_once(short: char) -> bool {
    short == 's' || short == VERSION
}

/// getopt_long with numactl's short-option string (leading `+`: stop at the first
/// non-option). Returns the options in order and the index of the command.
fn getopt(args: &[OsString]) -> Result<(Vec<Opt>, usize), UsageError> {
    let mut opts = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].to_str() else { break };
        if arg == "--" {
            i += 1;
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let exact = OPTIONS.iter().find(|(n, ..)| *n == name);
            let candidates: Vec<_> = OPTIONS.iter().filter(|(n, ..)| n.starts_with(name)).collect();
            let &(lname, short, takes) = match (exact, candidates.as_slice()) {
                (Some(o), _) => o,
                (None, [o]) => *o,
                (None, []) => return Err(usage_error(format!("unrecognized option '--{name}'"))),
                (None, _) => {
                    return Err(usage_error(format!("option '--{name}' is ambiguous")));
                }
            };
            if takes {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i).map(|v| v.to_string_lossy().into_owned()).ok_or_else(|| {
                            usage_error(format!("option '--{lname}' requires an argument"))
                        })?
                    }
                };
                opts.push(Opt::Value(short, value));
            } else if inline.is_some() {
                return Err(usage_error(format!("option '--{lname}' doesn't allow an argument")));
            } else {
                opts.push(Opt::Flag(short));
                if acts_at_once(short) {
                    return Ok((opts, i + 1));
                }
            }
            i += 1;
            continue;
        }
        let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) else { break };
        for (pos, c) in shorts.char_indices() {
            let Some(&(_, short, takes)) = OPTIONS.iter().find(|(_, s, _)| *s == c) else {
                return Err(usage_error(format!("invalid option -- '{c}'")));
            };
            if takes {
                let rest = &shorts[pos + c.len_utf8()..];
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i).map(|v| v.to_string_lossy().into_owned()).ok_or_else(|| {
                        usage_error(format!("option requires an argument -- '{c}'"))
                    })?
                } else {
                    rest.to_string()
                };
                opts.push(Opt::Value(short, value));
                break;
            }
            opts.push(Opt::Flag(short));
            if acts_at_once(short) {
                return Ok((opts, i + 1));
            }
        }
        i += 1;
    }
    Ok((opts, i))
}

/// What numactl was asked to do.
#[derive(Debug)]
enum Action {
    /// `--show`, after applying the options before it (numactl applies each as it reads it).
    Show(Asked),
    Hardware {
        compress: bool,
    },
    /// `--version`: numactl's release number.
    Version,
    Run(Asked),
}

/// A request and its lists in command-line order: numactl checks each list as it reads its
/// option and names the first bad one (`<LIST> is invalid` on stdout).
#[derive(Debug)]
struct Asked {
    request: Request,
    lists: Vec<List>,
}

#[derive(Debug)]
enum List {
    Nodes(NodeSpec),
    Cpus(CpuSpec),
}

fn parse(opts: Vec<Opt>) -> Result<Action, UsageError> {
    let mut req = Request::default();
    let mut lists = Vec::new();
    let mut policy_set = false;
    let mut did_spec = false;
    let mut last_spec: Option<String> = None;
    let mut compress = false;
    let mut hardware = false;
    // Only node lists take part in `same` (CPU lists are parsed below on their own).
    let mut node_spec = |text: String| -> Result<NodeSpec, UsageError> {
        // numactl's `same`: the previous node specification.
        let text = if text == "same" {
            last_spec
                .clone()
                .ok_or_else(|| usage_error("same needs previous node specification"))?
        } else {
            last_spec = Some(text.clone());
            text
        };
        NodeSpec::parse_numactl(&text)
            .map_err(|e| UsageError { message: e.to_string(), invalid: Some(text) })
    };
    fn set_policy(
        policy_set: &mut bool,
        req: &mut Request,
        p: MemoryPolicy,
        nodes: Option<Nodes>,
    ) -> Result<(), UsageError> {
        if *policy_set {
            return Err(usage_error("Conflicting policies"));
        }
        *policy_set = true;
        req.memory = Some((p, nodes));
        Ok(())
    }
    for opt in opts {
        match opt {
            Opt::Flag('s') => return Ok(Action::Show(Asked { request: req, lists })),
            Opt::Flag(VERSION) => {
                if policy_set {
                    return Err(usage_error("specify policy after --shm/--file"));
                }
                return Ok(Action::Version);
            }
            Opt::Flag('H') => {
                // numactl's nopolicy(): --hardware after a policy is refused.
                if policy_set {
                    return Err(usage_error("specify policy after --shm/--file"));
                }
                hardware = true;
            }
            Opt::Flag(CPU_COMPRESS) => compress = true,
            Opt::Flag('a') => {
                if did_spec {
                    return Err(usage_error(
                        "--all/-a option must be before all cpu/node specifications",
                    ));
                }
                req.all = true;
            }
            Opt::Flag('b') => {
                if policy_set {
                    return Err(usage_error("specify policy after --shm/--file"));
                }
                req.balancing = true;
            }
            Opt::Flag('l') => set_policy(&mut policy_set, &mut req, MemoryPolicy::Local, None)?,
            Opt::Flag('t') => {
                let _ =
                    writeln!(io::stderr(), "numactl: warning. Strict flag for process ignored.");
            }
            Opt::Value(c @ ('m' | 'p' | 'P' | 'i' | 'w'), v) => {
                did_spec = true;
                let s = node_spec(v)?;
                lists.push(List::Nodes(s.clone()));
                let p = match c {
                    'm' => MemoryPolicy::Bind,
                    'p' => MemoryPolicy::Preferred,
                    'P' => MemoryPolicy::PreferredMany,
                    'i' => MemoryPolicy::Interleave,
                    _ => MemoryPolicy::WeightedInterleave,
                };
                set_policy(&mut policy_set, &mut req, p, Some(Nodes::Spec(s)))?;
            }
            Opt::Value('N' | 'c', v) => {
                did_spec = true;
                let s = node_spec(v)?;
                lists.push(List::Nodes(s.clone()));
                req.cpus = Some(CpuTarget::Nodes(Nodes::Spec(s)));
            }
            Opt::Value('C', v) => {
                did_spec = true;
                let s = CpuSpec::parse_numactl(&v)
                    .map_err(|e| UsageError { message: e.to_string(), invalid: Some(v.clone()) })?;
                lists.push(List::Cpus(s.clone()));
                req.cpus = Some(CpuTarget::Cpus(s));
            }
            Opt::Value(c, _) | Opt::Flag(c) => {
                let name = OPTIONS.iter().find(|o| o.1 == c).map_or("?", |o| o.0);
                return Err(usage_error(format!(
                    "--{name} (shared memory policy) is not supported by pinctl's numactl; use \
                     numactl itself for shared memory segments and files"
                )));
            }
        }
    }
    if hardware {
        return Ok(Action::Hardware { compress });
    }
    Ok(Action::Run(Asked { request: req, lists }))
}

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
    let parsed = getopt(args).and_then(|(opts, cmd)| Ok((parse(opts)?, cmd)));
    let (action, cmd) = match parsed {
        Ok(p) => p,
        Err(e) => return Err(print_usage(e)),
    };
    let mut host = Host::live();
    match action {
        Action::Show(asked) => {
            let (resolved, allowed) = resolve(&mut host, &asked)?;
            apply(
                &mut host,
                &resolved,
                &allowed,
                Launch { verify: false, ignore_unsupported: true },
            )?;
            show(&mut host).map(|()| ExitCode::SUCCESS)
        }
        Action::Hardware { compress } => {
            hardware(&mut host, &mut io::stdout().lock(), compress).map_err(io_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Version => {
            writeln!(io::stdout().lock(), "{NUMACTL_VERSION}").map_err(io_err)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Run(asked) => {
            let command = &args[cmd..];
            if command.is_empty() {
                return Err(print_usage(usage_error("")));
            }
            let (resolved, allowed) = resolve(&mut host, &asked)?;
            if resolved.memory_policy == Some(MemoryPolicy::Preferred)
                && resolved.memory_nodes.as_ref().is_some_and(|n| n.len() != 1)
            {
                return Err(print_usage(usage_error("--preferred takes exactly one node")));
            }
            // numactl falls back to plain bind when the kernel lacks NUMA balancing for bind,
            // and accepts whatever the cpuset narrows a request to.
            let launch = Launch { verify: false, ignore_unsupported: resolved.numa_balancing };
            apply(&mut host, &resolved, &allowed, launch)?;
            Err(pinctl_launch::exec(command, None).into())
        }
    }
}

/// The request on this host; numactl refuses a list it cannot resolve as a usage error
/// (status 1).
fn resolve(host: &mut Host, asked: &Asked) -> Result<(Resolved, Allowed), Error> {
    let allowed = host.allowed().map_err(LaunchError::Allowed)?;
    match asked.request.resolve(host, &allowed) {
        Ok(mut r) => {
            // libnuma's numa_set_interleave_mask: an empty mask means the default policy
            // (`-i ''`), for `--show` as for a command.
            if r.memory_policy == Some(MemoryPolicy::Interleave)
                && r.memory_nodes.as_ref().is_some_and(NodeSet::is_empty)
            {
                r.memory_policy = Some(MemoryPolicy::Default);
                r.memory_nodes = None;
            }
            Ok((r, allowed))
        }
        Err(e) => {
            let invalid = first_invalid_list(host, asked, &allowed);
            Err(print_usage(UsageError { message: e.message(Dialect::Numactl), invalid }))
        }
    }
}

/// The text of the first list, in command-line order, that does not resolve on its own (an
/// id outside the cpuset, a device without a node): the one numactl names. `None` when each
/// list is fine and only their combination failed (nodes without CPUs), which numactl finds
/// at the system call and reports without naming a list.
fn first_invalid_list(host: &mut Host, asked: &Asked, allowed: &Allowed) -> Option<String> {
    let all = asked.request.all;
    for list in &asked.lists {
        let bad = match list {
            List::Nodes(spec) => {
                let base = if all { host.possible_nodes().ok()? } else { allowed.nodes.clone() };
                spec.resolve(&base, |d| pinctl_launch::device_nodes(host, d)).is_err()
            }
            List::Cpus(spec) => {
                let base = if all { host.possible_cpus().ok()? } else { allowed.cpus.clone() };
                spec.resolve(&base, |_| -> Result<_, pinctl_launch::ResolveError> {
                    unreachable!("CPU lists hold no devices")
                })
                .is_err()
            }
        };
        if bad {
            return Some(match list {
                List::Nodes(s) => s.text.clone(),
                List::Cpus(s) => s.text.clone(),
            });
        }
    }
    None
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
    let cpus = &current.cpus;
    let Some(policy) = current.policy else {
        write_mask(&mut out, "physcpubind", cpus).map_err(io_err)?;
        writeln!(out, "No NUMA support available on this system.").map_err(io_err)?;
        return Err(Error::Reported(ExitStatus::Failure));
    };
    // Names go by the whole number get_mempolicy returned, flags included, so a mode with a
    // flag (bind=balancing, 8194) has no name below and is printed as its number.
    let mode = if policy.flags == PolicyFlags::NONE { policy.mode.ok() } else { None };
    let nodes = &current.nodes;
    let cur = current.next_node;
    let allowed = host.allowed().map_err(LaunchError::Allowed)?;
    let membind =
        if mode == Some(PolicyMode::Bind) { nodes.clone() } else { allowed.nodes.clone() };
    let mut cpubind = NodeSet::new();
    for n in allowed.nodes.iter() {
        if host.node_cpus(n).is_ok_and(|c| !c.is_disjoint(cpus)) {
            cpubind.insert(n);
        }
    }
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
    let w = &mut out;
    (|| -> io::Result<()> {
        match name {
            Some(name) => writeln!(w, "policy: {name}")?,
            None => writeln!(w, "policy: [{}]", policy.number())?,
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
        write_mask(w, "physcpubind", cpus)?;
        write_mask(w, "cpubind", &cpubind)?;
        write_mask(w, "nodebind", &cpubind)?;
        write_mask(w, "membind", &membind)?;
        write_mask(w, "preferred", nodes)
    })()
    .map_err(io_err)
}

/// C's `printf("% Nd", v)`: a space where the sign would go, the whole padded to `width`.
fn c_space_padded(v: u32, width: usize) -> String {
    format!("{:>width$}", format!(" {v}"))
}

/// `numactl --hardware`: nodes, their CPUs, memory and distances, in numactl 2.0.19's shape
/// (its distance table is wider than 2.0.16's: `% 4d` columns after `node  `).
fn hardware(host: &mut Host, w: &mut impl Write, compress: bool) -> io::Result<()> {
    // libnuma's numa_nodes_ptr: every nodeN directory.
    let nodes = host.node_folders().map_err(io::Error::other)?;
    let online = host.online_nodes().unwrap_or_else(|_| nodes.clone());
    writeln!(w, "available: {} nodes ({})", nodes.len(), nodes)?;
    for n in nodes.iter() {
        let cpus = host.node_cpus(n).unwrap_or_default();
        write!(w, "node {n} cpus:")?;
        if compress {
            let ranges: Vec<String> = cpus
                .ranges()
                .into_iter()
                .map(|(a, b)| if a == b { format!(" {a}") } else { format!(" {a}-{b}") })
                .collect();
            writeln!(w, "{} ({})", ranges.join(","), cpus.len())?;
        } else {
            for c in cpus.iter() {
                write!(w, " {c}")?;
            }
            writeln!(w)?;
        }
        let meminfo = host.node_meminfo(n).unwrap_or_default();
        let mb =
            |v: Option<u64>| v.map_or("<not available>".to_string(), |v| format!("{} MB", v >> 20));
        writeln!(w, "node {n} size: {}", mb(meminfo.total_bytes))?;
        writeln!(w, "node {n} free: {}", mb(meminfo.free_bytes))?;
    }
    // Distances: each node's `distance` lists one value per online node, in id order.
    let mut table: Vec<(u32, Vec<(u32, u32)>)> = Vec::new();
    for n in nodes.iter() {
        let row = host
            .node_distances(n)
            .map(|d| online.iter().zip(d).collect::<Vec<_>>())
            .unwrap_or_default();
        table.push((n, row));
    }
    if table.iter().all(|(_, r)| r.is_empty()) {
        return writeln!(w, "No distance information available.");
    }
    writeln!(w, "node distances:")?;
    write!(w, "node  ")?;
    for n in nodes.iter() {
        write!(w, "{} ", c_space_padded(n, 4))?;
    }
    writeln!(w)?;
    for (n, row) in &table {
        write!(w, "{}: ", c_space_padded(*n, 4))?;
        for k in nodes.iter() {
            let d = row.iter().find(|(id, _)| *id == k).map_or(0, |(_, d)| *d);
            write!(w, "{} ", c_space_padded(d, 4))?;
        }
        writeln!(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn opts(args: &[&str]) -> (Vec<Opt>, usize) {
        getopt(&os(args)).unwrap_or_else(|e| panic!("{}", e.message))
    }

    #[test]
    fn getopt_follows_numactl_rules() {
        assert_eq!(
            opts(&["-m0", "--cpun=1", "-C", "2", "--interleave", "all", "cmd", "-l"]),
            (
                vec![
                    Opt::Value('m', "0".into()),
                    Opt::Value('N', "1".into()),
                    Opt::Value('C', "2".into()),
                    Opt::Value('i', "all".into()),
                ],
                6
            )
        );
        // `--` ends options; grouped flags; the first non-option ends options.
        assert_eq!(opts(&["-lb", "--", "-m"]), (vec![Opt::Flag('l'), Opt::Flag('b')], 2));
        assert_eq!(opts(&["true", "-m", "0"]).1, 0);
        assert!(getopt(&os(&["--pre=0"])).is_err(), "ambiguous: preferred, preferred-many");
        assert!(getopt(&os(&["--bogus"])).is_err());
        assert!(getopt(&os(&["-x"])).is_err());
        assert!(getopt(&os(&["-m"])).is_err());
    }

    fn action(args: &[&str]) -> Result<Action, String> {
        let (o, _) = getopt(&os(args)).map_err(|e| e.message)?;
        parse(o).map_err(|e| e.message)
    }

    #[test]
    fn numactl_semantics() {
        assert!(matches!(action(&["-s"]), Ok(Action::Show(_))));
        let Ok(Action::Show(Asked { request: r, .. })) = action(&["-m", "0", "-s", "-i", "0"])
        else {
            panic!()
        };
        assert!(matches!(r.memory, Some((MemoryPolicy::Bind, _))), "options after -s are ignored");
        assert!(matches!(action(&["--hardware"]), Ok(Action::Hardware { compress: false })));
        assert_eq!(action(&["-i", "0", "-m", "0"]).unwrap_err(), "Conflicting policies");
        assert!(action(&["-m", "0", "-a"]).unwrap_err().contains("--all/-a option must be before"));
        assert!(action(&["-m", "same"]).unwrap_err().contains("same needs previous"));
        // -b must come before the policy, as numactl requires.
        assert!(action(&["-m", "0", "-b"]).is_err());
        let Ok(Action::Run(Asked { request: r, lists })) = action(&["-b", "-N", "0", "-m", "same"])
        else {
            panic!()
        };
        assert_eq!(lists.len(), 2, "both lists, in order");
        assert!(r.balancing && matches!(r.memory, Some((MemoryPolicy::Bind, Some(_)))));
        assert!(action(&["--shm", "/tmp/k", "-m", "0"]).unwrap_err().contains("not supported"));
        let Ok(Action::Run(Asked { request: r, .. })) = action(&["-l"]) else { panic!() };
        assert!(matches!(r.memory, Some((MemoryPolicy::Local, None))));
    }

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
        hardware(&mut Host::at(dir.path()), &mut out, false).unwrap();
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
