//! numactl's command line, as pinctl invoked through a symlink named `numactl` reads it
//! (getopt_long rules: options until the first non-option, `--opt=val`, `--opt val`, `-m0`,
//! unique prefixes of long names), turned into the [`Request`] `pinctl exec` resolves, with
//! numactl's own refusals (conflicting policies, `-a` after a list, `same` without a previous
//! list, the shared-memory options this personality does not take) and numactl's view of a
//! process (`--show`) and of the machine (`--hardware`). The binary prints; this module decides.

use std::ffi::OsString;

use pinctl_sysfs::{Allowed, Host, HostError};
use pinctl_topology::{CpuSet, MemoryPolicy, NodeId, NodeSet};

use crate::spec::{CpuSpec, NodeSpec};
use crate::{CpuTarget, CurrentPlacement, Dialect, LaunchError, Nodes, Request, Resolved};

/// The numactl release whose command line and output this personality follows: `--version`
/// prints it, `--hardware` has its widths, the usage text is its own (docs/exec.md).
pub const NUMACTL_VERSION: &str = "2.0.19";

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
#[derive(Debug)]
pub struct UsageError {
    /// What numactl says on stderr before its usage text; empty for the text alone.
    pub message: String,
    /// numactl prints `<spec> is invalid` on stdout after the usage text.
    pub invalid: Option<String>,
}

fn usage_error(message: impl Into<String>) -> UsageError {
    UsageError { message: message.into(), invalid: None }
}

/// One parsed option occurrence.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Opt {
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
pub(crate) fn getopt(args: &[OsString]) -> Result<(Vec<Opt>, usize), UsageError> {
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
pub enum Action {
    /// `--show`, after applying the options before it (numactl applies each as it reads it).
    Show(Asked),
    /// `--hardware`; `--cpu-compress` lists CPUs as ranges.
    Hardware { compress: bool },
    /// `--version`: numactl's release number.
    Version,
    /// Run a command with the placement asked for.
    Run(Asked),
}

/// A request and its lists in command-line order: numactl checks each list as it reads its
/// option and names the first bad one (`<LIST> is invalid` on stdout).
#[derive(Debug)]
pub struct Asked {
    request: Request,
    lists: Vec<List>,
}

#[derive(Debug)]
enum List {
    Nodes(NodeSpec),
    Cpus(CpuSpec),
}

/// numactl's command line read: what to do and the index of the command in `args` (what
/// follows the options). `warn` hears numactl's warnings as it would print them, in order
/// (before a usage error that a later option brings).
pub fn read(args: &[OsString], warn: &mut dyn FnMut(&str)) -> Result<(Action, usize), UsageError> {
    let (opts, command) = getopt(args)?;
    Ok((parse(opts, warn)?, command))
}

/// The state numactl's option loop keeps while it reads the options in order.
#[derive(Default)]
struct Reading {
    request: Request,
    lists: Vec<List>,
    policy_set: bool,
    did_spec: bool,
    /// numactl's `same`: the previous node specification. Only node lists take part.
    last_spec: Option<String>,
    compress: bool,
    hardware: bool,
}

impl Reading {
    /// numactl's nopolicy(): `--hardware`, `--balancing` and `--version` after a policy are
    /// refused.
    fn no_policy_yet(&self) -> Result<(), UsageError> {
        if self.policy_set {
            return Err(usage_error("specify policy after --shm/--file"));
        }
        Ok(())
    }

    fn set_policy(&mut self, p: MemoryPolicy, nodes: Option<Nodes>) -> Result<(), UsageError> {
        if self.policy_set {
            return Err(usage_error("Conflicting policies"));
        }
        self.policy_set = true;
        self.request.memory = Some((p, nodes));
        Ok(())
    }

    /// A node list, `same` standing for the previous one; kept in command-line order.
    fn node_spec(&mut self, text: String) -> Result<NodeSpec, UsageError> {
        self.did_spec = true;
        let text = if text == "same" {
            self.last_spec
                .clone()
                .ok_or_else(|| usage_error("same needs previous node specification"))?
        } else {
            self.last_spec = Some(text.clone());
            text
        };
        let spec = NodeSpec::parse_numactl(&text)
            .map_err(|e| UsageError { message: e.to_string(), invalid: Some(text) })?;
        self.lists.push(List::Nodes(spec.clone()));
        Ok(spec)
    }

    fn cpu_spec(&mut self, text: String) -> Result<CpuSpec, UsageError> {
        self.did_spec = true;
        let spec = CpuSpec::parse_numactl(&text)
            .map_err(|e| UsageError { message: e.to_string(), invalid: Some(text.clone()) })?;
        self.lists.push(List::Cpus(spec.clone()));
        Ok(spec)
    }

    fn asked(self) -> Asked {
        Asked { request: self.request, lists: self.lists }
    }

    /// One option; `Some` when it ends the loop (`--show`, `--version`).
    fn option(
        &mut self,
        opt: Opt,
        warn: &mut dyn FnMut(&str),
    ) -> Result<Option<Action>, UsageError> {
        match opt {
            Opt::Flag('s') => return Ok(Some(Action::Show(std::mem::take(self).asked()))),
            Opt::Flag(VERSION) => {
                self.no_policy_yet()?;
                return Ok(Some(Action::Version));
            }
            Opt::Flag('H') => {
                self.no_policy_yet()?;
                self.hardware = true;
            }
            Opt::Flag(CPU_COMPRESS) => self.compress = true,
            Opt::Flag('a') => {
                if self.did_spec {
                    return Err(usage_error(
                        "--all/-a option must be before all cpu/node specifications",
                    ));
                }
                self.request.all = true;
            }
            Opt::Flag('b') => {
                self.no_policy_yet()?;
                self.request.balancing = true;
            }
            Opt::Flag('l') => self.set_policy(MemoryPolicy::Local, None)?,
            Opt::Flag('t') => warn("numactl: warning. Strict flag for process ignored."),
            Opt::Value(c @ ('m' | 'p' | 'P' | 'i' | 'w'), v) => {
                let s = self.node_spec(v)?;
                self.set_policy(policy_of(c), Some(Nodes::Spec(s)))?;
            }
            Opt::Value('N' | 'c', v) => {
                let s = self.node_spec(v)?;
                self.request.cpus = Some(CpuTarget::Nodes(Nodes::Spec(s)));
            }
            Opt::Value('C', v) => {
                let s = self.cpu_spec(v)?;
                self.request.cpus = Some(CpuTarget::Cpus(s));
            }
            Opt::Value(c, _) | Opt::Flag(c) => {
                let name = OPTIONS.iter().find(|o| o.1 == c).map_or("?", |o| o.0);
                return Err(usage_error(format!(
                    "--{name} (shared memory policy) is not supported by pinctl's numactl; use \
                     numactl itself for shared memory segments and files"
                )));
            }
        }
        Ok(None)
    }
}

/// The memory policy of numactl's policy option `c` (`-m`, `-p`, `-P`, `-i`, `-w`).
fn policy_of(c: char) -> MemoryPolicy {
    match c {
        'm' => MemoryPolicy::Bind,
        'p' => MemoryPolicy::Preferred,
        'P' => MemoryPolicy::PreferredMany,
        'i' => MemoryPolicy::Interleave,
        _ => MemoryPolicy::WeightedInterleave,
    }
}

fn parse(opts: Vec<Opt>, warn: &mut dyn FnMut(&str)) -> Result<Action, UsageError> {
    let mut reading = Reading::default();
    for opt in opts {
        if let Some(action) = reading.option(opt, warn)? {
            return Ok(action);
        }
    }
    if reading.hardware {
        return Ok(Action::Hardware { compress: reading.compress });
    }
    Ok(Action::Run(reading.asked()))
}

/// Why a request numactl read cannot be placed.
#[derive(Debug)]
pub enum Refusal {
    /// numactl's usage error (status 1, the usage text, `<LIST> is invalid`).
    Usage(UsageError),
    /// This host could not be read.
    Launch(LaunchError),
}

impl Asked {
    /// The request on this host, and the host's allowed CPUs and nodes; numactl refuses a list
    /// it cannot resolve as a usage error.
    pub fn resolve(&self, host: &mut Host) -> Result<(Resolved, Allowed), Refusal> {
        let allowed = host.allowed().map_err(|e| Refusal::Launch(LaunchError::Allowed(e)))?;
        match self.request.resolve(host, &allowed) {
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
                let invalid = first_invalid_list(host, self, &allowed);
                Err(Refusal::Usage(UsageError { message: e.message(Dialect::Numactl), invalid }))
            }
        }
    }

    /// [`Asked::resolve`] for a command to run: numactl's `--preferred` takes one node.
    pub fn resolve_to_run(&self, host: &mut Host) -> Result<(Resolved, Allowed), Refusal> {
        let (resolved, allowed) = self.resolve(host)?;
        if resolved.memory_policy == Some(MemoryPolicy::Preferred)
            && resolved.memory_nodes.as_ref().is_some_and(|n| n.len() != 1)
        {
            return Err(Refusal::Usage(usage_error("--preferred takes exactly one node")));
        }
        Ok((resolved, allowed))
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
                spec.resolve(&base, |d| crate::device_nodes(host, d)).is_err()
            }
            List::Cpus(spec) => {
                let base = if all { host.possible_cpus().ok()? } else { allowed.cpus.clone() };
                spec.resolve(&base, |_| -> Result<_, crate::ResolveError> {
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

/// `numactl --show`'s facts of this process: its policy as get_mempolicy reported it and
/// what numactl derives from it and the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The mode when it has a name numactl prints: names go by the whole number
    /// get_mempolicy returned, flags included, so a mode with a flag (bind=balancing, 8194)
    /// has none and is printed as [`Shown::number`].
    pub mode: Option<pinctl_sys::PolicyMode>,
    /// The whole number get_mempolicy returned.
    pub number: i32,
    /// The policy's nodes.
    pub nodes: NodeSet,
    /// The node the next interleaved allocation goes to.
    pub next_node: NodeId,
    /// The affinity (`physcpubind`).
    pub cpus: CpuSet,
    /// The allowed nodes with a CPU of the affinity (`cpubind`, `nodebind`).
    pub cpubind: NodeSet,
    /// The policy's nodes under bind, else every allowed node (`membind`).
    pub membind: NodeSet,
}

impl Shown {
    /// What `--show` says of `current`; `None` when the kernel has no NUMA support.
    pub fn of(current: CurrentPlacement, host: &mut Host) -> Result<Option<Shown>, LaunchError> {
        use pinctl_sys::{PolicyFlags, PolicyMode};
        let Some(policy) = current.policy else { return Ok(None) };
        let mode = if policy.flags == PolicyFlags::NONE { policy.mode.ok() } else { None };
        let allowed = host.allowed().map_err(LaunchError::Allowed)?;
        let membind = if mode == Some(PolicyMode::Bind) {
            current.nodes.clone()
        } else {
            allowed.nodes.clone()
        };
        let mut cpubind = NodeSet::new();
        for n in allowed.nodes.iter() {
            if host.node_cpus(n).is_ok_and(|c| !c.is_disjoint(&current.cpus)) {
                cpubind.insert(n);
            }
        }
        Ok(Some(Shown {
            mode,
            number: policy.number(),
            nodes: current.nodes,
            next_node: current.next_node,
            cpus: current.cpus,
            cpubind,
            membind,
        }))
    }
}

/// One node of `numactl --hardware`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardwareNode {
    pub id: NodeId,
    pub cpus: CpuSet,
    /// `None`: numactl says `<not available>`.
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
}

/// `numactl --hardware`'s facts, read as libnuma reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hardware {
    /// Every nodeN folder (libnuma's numa_nodes_ptr).
    pub nodes: NodeSet,
    pub each: Vec<HardwareNode>,
    /// A row per node, a column per node (0 where its file says nothing); `None` when no
    /// node has a distance file.
    pub distances: Option<Vec<Vec<u32>>>,
}

impl Hardware {
    /// The nodes of `host`, their CPUs, memory and distances.
    pub fn read(host: &mut Host) -> Result<Hardware, HostError> {
        let nodes = host.node_folders()?;
        let online = host.online_nodes().unwrap_or_else(|_| nodes.clone());
        let each = nodes
            .iter()
            .map(|id| {
                let meminfo = host.node_meminfo(id).unwrap_or_default();
                HardwareNode {
                    id,
                    cpus: host.node_cpus(id).unwrap_or_default(),
                    total_bytes: meminfo.total_bytes,
                    free_bytes: meminfo.free_bytes,
                }
            })
            .collect();
        // Each node's `distance` lists one value per online node, in id order.
        let rows: Vec<Vec<(NodeId, u32)>> = nodes
            .iter()
            .map(|n| {
                host.node_distances(n).map(|d| online.iter().zip(d).collect()).unwrap_or_default()
            })
            .collect();
        let distances = (!rows.iter().all(Vec::is_empty)).then(|| {
            let column = |row: &[(NodeId, u32)], k| {
                row.iter().find(|(id, _)| *id == k).map_or(0, |(_, d)| *d)
            };
            rows.iter().map(|row| nodes.iter().map(|k| column(row, k)).collect()).collect()
        });
        Ok(Hardware { nodes, each, distances })
    }
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
        read(&os(args), &mut |_| {}).map(|(a, _)| a).map_err(|e| e.message)
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

    /// `-t` is warned about where numactl reads it: before the usage error of a later option.
    #[test]
    fn the_strict_warning_comes_in_reading_order() {
        let mut heard = Vec::new();
        let read = read(&os(&["-t", "-i", "0", "-m", "0"]), &mut |w| heard.push(w.to_string()));
        assert_eq!(read.unwrap_err().message, "Conflicting policies");
        assert_eq!(heard, ["numactl: warning. Strict flag for process ignored."]);
    }

    #[test]
    fn hardware_reads_distances_by_online_node() {
        let dir = tempfile::tempdir().unwrap();
        let node_dir = dir.path().join("sys/devices/system/node");
        let node = |n: u32, file: &str, text: &str| {
            let p = node_dir.join(format!("node{n}/{file}"));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        std::fs::create_dir_all(&node_dir).unwrap();
        // Node 1 is offline: each row lists the online nodes 0 and 2 only.
        std::fs::write(node_dir.join("online"), "0,2\n").unwrap();
        for (n, dist) in [(0, "10 20"), (1, ""), (2, "20 10")] {
            node(n, "cpulist", "\n");
            node(n, "distance", &format!("{dist}\n"));
        }
        let hardware = Hardware::read(&mut Host::at(dir.path())).unwrap();
        assert_eq!(hardware.nodes.to_string(), "0-2");
        assert_eq!(hardware.each[0].total_bytes, None, "no meminfo: not available");
        assert_eq!(hardware.distances, Some(vec![vec![10, 0, 20], vec![0, 0, 0], vec![20, 0, 10]]));
    }
}
