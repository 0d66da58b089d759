//! Nodes, CPUs, distances and host facts from `sys/devices/system/{node,cpu}` and `proc/`.

use std::path::Path;

use pinctl_topology::{
    Cpu, CpuSet, HostFacts, IdKind, IdSet, MAX_CPU_ID, MAX_NODE_ID, Node, NodeId, NodeSet,
    SchemaVersion, Topology,
};

use crate::devices::{DeviceScope, read_devices};
use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot, numbered_folders};
use crate::parse;

use crate::node::DIR as NODE_DIR;
const CPU_DIR: &str = "sys/devices/system/cpu";

/// Reads the topology of the sysfs/procfs tree under `root` (`/` for the live machine).
///
/// Missing files fall back as docs/topology.md describes (e.g. no `distance` files: empty
/// matrix; no `meminfo`: unknown memory). A file that is empty, unreadable or holds something
/// the kernel never writes is a warning in [`Topology::discovery_warnings`] saying what was
/// assumed instead; only a tree left without any usable node is an error.
pub fn read_topology(root: &Path) -> Result<Topology, DiscoveryError> {
    read_topology_with(root, &DeviceScope::All)
}

/// [`read_topology`] with only the devices of `scope`.
pub fn read_topology_with(root: &Path, scope: &DeviceScope) -> Result<Topology, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    read_tree_with(&mut fs, scope)
}

/// Reads the topology of any tree: a directory, or an archive in memory (pinctl-capture),
/// every device and the host's interrupts ([`crate::attach_interrupts`]) included.
pub fn read_tree(fs: &mut FsRoot) -> Result<Topology, DiscoveryError> {
    read_tree_parts(fs, &DeviceScope::All, true)
}

/// [`read_tree`] with only the devices of `scope`, and no interrupts (the launcher's read).
pub fn read_tree_with(fs: &mut FsRoot, scope: &DeviceScope) -> Result<Topology, DiscoveryError> {
    read_tree_parts(fs, scope, false)
}

fn read_tree_parts(
    fs: &mut FsRoot,
    scope: &DeviceScope,
    interrupts: bool,
) -> Result<Topology, DiscoveryError> {
    // A root must hold something discovery reads (nodes, CPUs, or devices for the NVMe-only
    // dumps of libnvme): any folder with a `proc/` (or `/proc` itself) would otherwise read as
    // a machine with no nodes and no CPUs.
    if ![NODE_DIR, CPU_DIR, "sys/class"].iter().any(|d| fs.is_dir(d)) {
        return Err(DiscoveryError::NotARoot { root: fs.root().to_path_buf() });
    }
    // A real machine's capture can hold one odd file (an empty `cpu0/online` on a 17-node
    // host) that the kernel's own tools shrug off: one such file costs the facts that depend
    // on it, with a warning, never the whole topology.
    let was_degrading = fs.set_degrading(true);
    let result = discover(fs, scope).and_then(|mut t| {
        if interrupts {
            t.interrupts = crate::interrupts::read_interrupts(fs, &t)?;
        }
        Ok(t)
    });
    fs.set_degrading(was_degrading);
    let warnings = fs.take_warnings();
    let mut topology = result?;
    let usable = topology.nodes.iter().any(|n| n.has_cpu || n.has_memory || !n.cpus.is_empty());
    if !usable && !warnings.is_empty() && (fs.is_dir(NODE_DIR) || fs.is_dir(CPU_DIR)) {
        return Err(DiscoveryError::NoUsableNode {
            root: fs.root().to_path_buf(),
            warnings: warnings.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
        });
    }
    topology.discovery_warnings = warnings;
    topology.refresh_warnings();
    Ok(topology)
}

fn discover(fs: &mut FsRoot, scope: &DeviceScope) -> Result<Topology, DiscoveryError> {
    let cpus_online = read_online_cpus(fs)?;
    let nodes = read_nodes(fs, &cpus_online)?;
    let cpus = read_cpus(fs, &cpus_online, &nodes)?;
    let host = read_host(fs, &cpus_online, &nodes)?;
    let caches = crate::caches::read_caches(fs, &cpus_online.online)?;
    let mut topology = Topology {
        schema_version: SchemaVersion,
        nodes: nodes.nodes,
        distances: nodes.distances,
        cpus,
        devices: Vec::new(),
        host,
        warnings: Vec::new(),
        discovery_warnings: Vec::new(),
        memory_performance: Default::default(),
        caches,
        interrupts: Default::default(),
    };
    topology.devices = read_devices(fs, &topology, scope)?;
    topology.memory_performance.hmat = crate::hmat::read_hmat(fs, &topology.node_ids())?;
    topology.memory_performance.memory_tiers = crate::memory_tiers::read_memory_tiers(fs)?;
    Ok(topology)
}

/// Present CPUs and the online ones among them.
#[derive(Debug)]
struct CpuPresence {
    /// Every CPU with a `cpuN` directory, ascending.
    present: Vec<u32>,
    online: CpuSet,
}

fn read_online_cpus(fs: &mut FsRoot) -> Result<CpuPresence, DiscoveryError> {
    let online_rel = format!("{CPU_DIR}/online");
    let from_folders =
        || "the online CPUs are the `cpuN` folders whose own `online` is not 0".into();
    let online_file = match fs.fact(&online_rel, parse::id_list, from_folders)? {
        // No CPU online is no machine: an empty list is as broken as garbage.
        Fact::Value(set) if set.is_empty() => {
            fs.warn(&online_rel, "is empty".into(), from_folders);
            None
        }
        fact => fact.value(),
    };
    let mut present: Vec<u32> = numbered_folders(fs, CPU_DIR, "cpu", MAX_CPU_ID)?;
    present.sort_unstable();
    let online = match online_file {
        Some(set) => set,
        None => {
            // Old dumps have no `online` list: a CPU is online unless its own `online` says 0
            // (CPU 0 usually has no such file because it cannot be unplugged; some kernels
            // leave it empty). A broken one is taken as online, as a missing one is.
            let mut set = CpuSet::new();
            for &id in &present {
                let v = fs.fact(&format!("{CPU_DIR}/cpu{id}/online"), parse::uint, || {
                    if id == 0 {
                        "CPU 0 is online (it usually cannot be offlined)".into()
                    } else {
                        format!("CPU {id} is online")
                    }
                })?;
                if v != Fact::Value(0) {
                    set.insert(id);
                }
            }
            set
        }
    };
    for id in online.iter() {
        if present.binary_search(&id).is_err() {
            present.push(id);
        }
    }
    present.sort_unstable();
    Ok(CpuPresence { present, online })
}

#[derive(Debug)]
struct NodesRead {
    nodes: Vec<Node>,
    distances: Vec<Vec<u32>>,
    /// CPUs each node lists, offline ones included (for `Cpu::node`).
    listed_cpus: Vec<(NodeId, CpuSet)>,
    possible: Option<NodeSet>,
    online: NodeSet,
}

fn read_nodes(fs: &mut FsRoot, cpus: &CpuPresence) -> Result<NodesRead, DiscoveryError> {
    let list = |fs: &mut FsRoot, name: &str, assumed: &str| {
        let assumed = assumed.to_string();
        fs.fact(&format!("{NODE_DIR}/{name}"), parse::node_list, || assumed).map(Fact::value)
    };
    let online_rel = format!("{NODE_DIR}/online");
    let from_folders = || "the online nodes are the `nodeN` folders".to_string();
    let online_file = match fs.fact(&online_rel, parse::node_list, from_folders)? {
        // Every machine has a node online (node 0 without NUMA): an empty list is broken.
        Fact::Value(set) if set.is_empty() => {
            fs.warn(&online_rel, "is empty".into(), from_folders);
            None
        }
        fact => fact.value(),
    };
    let possible = list(fs, "possible", "no offline nodes are known")?;
    let has_cpu = list(fs, "has_cpu", "a node has CPUs when its CPU list names an online one")?;
    let has_memory =
        list(fs, "has_memory", "a node has memory as its `meminfo` (or `has_normal_memory`) says")?;
    let online: NodeSet = match online_file {
        Some(set) => set,
        // Dumps without `online` (util-linux, old hwloc captures): every `nodeN` folder.
        None => numbered_folders(fs, NODE_DIR, "node", MAX_NODE_ID)?.into_iter().collect(),
    };

    if online.is_empty() {
        return without_numa(fs, cpus);
    }

    let has_normal_memory = if has_memory.is_none() {
        list(fs, "has_normal_memory", "a node has memory unless its `meminfo` says 0")?
    } else {
        None
    };
    // A file other nodes have is broken where it is missing; a dump that has none of them
    // (cpumap-only dumps) is a format, described in docs/topology.md, not a fault. Asked only
    // once a file is missing, so a healthy machine pays nothing for it.
    let mut others = OthersHave::new(&online);
    let mut nodes = Vec::with_capacity(online.len());
    let mut listed_cpus = Vec::with_capacity(online.len());
    let mut rows: Vec<Option<Vec<u32>>> = Vec::with_capacity(online.len());
    for id in online.iter() {
        let listed = listed_cpus_of(fs, id, &mut others)?;
        let node_cpus = listed.intersection(&cpus.online);
        let mem = meminfo_of(fs, id, &mut others)?;
        rows.push(distance_row_of(fs, id, &mut others)?);
        // `has_cpu` can lag behind hotplug (it lists nothing in the offline-node fixture while
        // the node holds online CPUs): online CPUs in the node's list are the stronger fact.
        let node_has_cpu =
            has_cpu.as_ref().is_some_and(|s| s.contains(id)) || !node_cpus.is_empty();
        let node_has_memory = match (&has_memory, mem.total_bytes, &has_normal_memory) {
            (Some(s), _, _) => s.contains(id),
            (None, Some(total), _) => total > 0,
            (None, None, Some(s)) => s.contains(id),
            // Nothing says: a node the kernel lists is assumed to have memory.
            (None, None, None) => true,
        };
        nodes.push(Node {
            id,
            cpus: node_cpus,
            memory_bytes: mem.total_bytes,
            memory_free_bytes: mem.free_bytes,
            has_cpu: node_has_cpu,
            has_memory: node_has_memory,
        });
        listed_cpus.push((id, listed));
    }
    let distances = distance_matrix(&online, possible.as_ref(), &rows);
    Ok(NodesRead { nodes, distances, listed_cpus, possible, online })
}

/// The CPUs node `id` lists (`cpulist`, else `cpumap`), online or not; none when it lists
/// none, said when other nodes have the file.
fn listed_cpus_of(
    fs: &mut FsRoot,
    id: u32,
    others: &mut OthersHave<'_>,
) -> Result<CpuSet, DiscoveryError> {
    let dir = format!("{NODE_DIR}/node{id}");
    let no_cpus = || format!("node {id} has no CPUs");
    let listed = match fs.fact(&format!("{dir}/cpulist"), parse::id_list, || {
        format!("node {id}'s CPUs are those its `cpumap` lists (none without one)")
    })? {
        Fact::Value(set) => set,
        _ => match fs.fact(&format!("{dir}/cpumap"), parse::id_mask, no_cpus)? {
            Fact::Value(set) => set,
            Fact::Absent => {
                if let Some(file) = others.cpus_file(fs) {
                    fs.warn(&format!("{dir}/{file}"), "is missing".into(), no_cpus);
                }
                CpuSet::new()
            }
            _ => CpuSet::new(),
        },
    };
    Ok(listed)
}

/// Node `id`'s memory (`meminfo`); unknown when it has none, said when other nodes have it.
fn meminfo_of(
    fs: &mut FsRoot,
    id: u32,
    others: &mut OthersHave<'_>,
) -> Result<crate::node::meminfo::NodeMeminfo, DiscoveryError> {
    let dir = format!("{NODE_DIR}/node{id}");
    let meminfo_rel = format!("{dir}/meminfo");
    let unknown_memory = || format!("node {id}'s memory is unknown");
    let mem = match fs.fact(&meminfo_rel, crate::node::meminfo::parse, unknown_memory)? {
        Fact::Value(mem) => mem,
        Fact::Absent if others.have(fs, 1, "meminfo") => {
            fs.warn(&meminfo_rel, "is missing".into(), unknown_memory);
            crate::node::meminfo::NodeMeminfo::default()
        }
        _ => crate::node::meminfo::NodeMeminfo::default(),
    };
    Ok(mem)
}

/// Node `id`'s row of distances; `None` when it has none, said when other nodes have one.
fn distance_row_of(
    fs: &mut FsRoot,
    id: u32,
    others: &mut OthersHave<'_>,
) -> Result<Option<Vec<u32>>, DiscoveryError> {
    let dir = format!("{NODE_DIR}/node{id}");
    let distance_rel = format!("{dir}/distance");
    let unknown_distances =
        || format!("the distances are unknown (no row for node {id}, so no matrix)");
    Ok(match fs.fact(&distance_rel, parse::distance_row, unknown_distances)? {
        Fact::Value(row) => Some(row),
        Fact::Absent if others.have(fs, 2, "distance") => {
            fs.warn(&distance_rel, "is missing".into(), unknown_distances);
            None
        }
        _ => None,
    })
}

/// Whether any online node has a per-node file, each asked at most once.
struct OthersHave<'a> {
    online: &'a NodeSet,
    /// `cpulist` or `cpumap`, `meminfo`, `distance`.
    answers: [Option<Option<&'static str>>; 3],
}

impl<'a> OthersHave<'a> {
    fn new(online: &'a NodeSet) -> Self {
        OthersHave { online, answers: [None; 3] }
    }

    fn any_has(&self, fs: &mut FsRoot, file: &str) -> bool {
        self.online.iter().any(|id| fs.exists(&format!("{NODE_DIR}/node{id}/{file}")))
    }

    /// The file other nodes list their CPUs in, if any does.
    fn cpus_file(&mut self, fs: &mut FsRoot) -> Option<&'static str> {
        if self.answers[0].is_none() {
            let found = ["cpulist", "cpumap"].into_iter().find(|f| self.any_has(fs, f));
            self.answers[0] = Some(found);
        }
        self.answers[0].flatten()
    }

    fn have(&mut self, fs: &mut FsRoot, slot: usize, file: &'static str) -> bool {
        if self.answers[slot].is_none() {
            self.answers[slot] = Some(self.any_has(fs, file).then_some(file));
        }
        self.answers[slot].flatten().is_some()
    }
}

/// A kernel without NUMA (no `sys/devices/system/node`): one node 0 with every online CPU and
/// the memory of `/proc/meminfo`, as numactl presents such machines.
fn without_numa(fs: &mut FsRoot, cpus: &CpuPresence) -> Result<NodesRead, DiscoveryError> {
    if cpus.online.is_empty() {
        return Ok(NodesRead {
            nodes: Vec::new(),
            distances: Vec::new(),
            listed_cpus: Vec::new(),
            possible: None,
            online: NodeSet::new(),
        });
    }
    let mem = fs
        .fact("proc/meminfo", crate::node::meminfo::parse, || {
            "the memory of node 0 is unknown".into()
        })?
        .value()
        .unwrap_or_default();
    let node = Node {
        id: 0,
        cpus: cpus.online.clone(),
        memory_bytes: mem.total_bytes,
        memory_free_bytes: mem.free_bytes,
        has_cpu: true,
        has_memory: true,
    };
    Ok(NodesRead {
        nodes: vec![node],
        distances: vec![vec![10]],
        listed_cpus: vec![(0, cpus.online.clone())],
        possible: None,
        online: std::iter::once(0).collect(),
    })
}

/// Builds the matrix in node order. The kernel prints one column per online node; a dump
/// edited after capture may print one per possible node. Any other shape, or a missing row,
/// leaves the matrix empty (unknown) rather than guessing columns.
fn distance_matrix(
    online: &NodeSet,
    possible: Option<&NodeSet>,
    rows: &[Option<Vec<u32>>],
) -> Vec<Vec<u32>> {
    let Some(rows): Option<Vec<&Vec<u32>>> = rows.iter().map(Option::as_ref).collect() else {
        return Vec::new();
    };
    let Some(len) = rows.first().map(|r| r.len()) else { return Vec::new() };
    if rows.iter().any(|r| r.len() != len) {
        return Vec::new();
    }
    let columns: Vec<u32> = if len == online.len() {
        online.iter().collect()
    } else if let Some(p) = possible.filter(|p| p.len() == len && online.is_subset(p)) {
        p.iter().collect()
    } else {
        return Vec::new();
    };
    let wanted: Vec<usize> =
        online.iter().map(|id| columns.iter().position(|&c| c == id).unwrap_or(0)).collect();
    rows.iter().map(|row| wanted.iter().map(|&j| row[j]).collect()).collect()
}

/// Package and core of every present CPU. Reading two files per CPU dominates discovery on
/// big machines, so one read of a CPU's `thread_siblings_list` (`package_cpus_list`, or the
/// older `core_siblings_list`) answers for all its siblings, which share its core (package) by
/// definition: two reads per core and per package instead of per CPU (online CPUs only).
/// What `physical_package_id` and `core_id` tell, for warnings.
const CPU_FACTS: [&str; 2] = ["package", "core"];

fn read_cpus(
    fs: &mut FsRoot,
    cpus: &CpuPresence,
    nodes: &NodesRead,
) -> Result<Vec<Cpu>, DiscoveryError> {
    let n = cpus.present.len();
    let index = |id: u32| cpus.present.binary_search(&id).ok();
    let mut package: Vec<Option<Option<u32>>> = vec![None; n];
    let mut core: Vec<Option<Option<u32>>> = vec![None; n];
    let id_of = |v: i64| u32::try_from(v).ok();
    // Online CPUs without the file, and whether any CPU has it: missing beside CPUs that have
    // it, the file is broken (offline CPUs have no `topology/` at all).
    let mut missing: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    let mut some_have = [false; 2];
    for (i, &id) in cpus.present.iter().enumerate() {
        let dir = format!("{CPU_DIR}/cpu{id}/topology");
        for (k, slot, value_file, sibling_files) in [
            (
                0,
                &mut package,
                "physical_package_id",
                &["package_cpus_list", "core_siblings_list"][..],
            ),
            (1, &mut core, "core_id", &["thread_siblings_list"][..]),
        ] {
            if slot[i].is_some() {
                continue;
            }
            let what = CPU_FACTS[k];
            let value = match fs.fact(&format!("{dir}/{value_file}"), parse::int, || {
                format!("CPU {id}'s {what} is unknown")
            })? {
                Fact::Value(v) => {
                    some_have[k] = true;
                    id_of(v)
                }
                // Its siblings read their own rather than share an unknown.
                Fact::Absent | Fact::Broken => {
                    if cpus.online.contains(id) {
                        missing[k].push(id);
                    }
                    slot[i] = Some(None);
                    continue;
                }
            };
            slot[i] = Some(value);
            for file in sibling_files {
                let siblings = fs.fact(&format!("{dir}/{file}"), parse::id_list, || {
                    format!("CPU {id}'s siblings read their own `{value_file}`")
                })?;
                if let Fact::Value(siblings) = siblings {
                    // Offline CPUs answer for themselves (edited dumps list them as siblings).
                    for s in siblings.intersection(&cpus.online).iter().filter_map(index) {
                        slot[s].get_or_insert(value);
                    }
                    break;
                }
            }
        }
    }
    warn_missing(fs, &missing, some_have);
    let out = cpus
        .present
        .iter()
        .enumerate()
        .map(|(i, &id)| Cpu {
            id,
            online: cpus.online.contains(id),
            package: package[i].flatten(),
            core: core[i].flatten(),
            node: nodes.listed_cpus.iter().find(|(_, set)| set.contains(id)).map(|&(n, _)| n),
        })
        .collect();
    Ok(out)
}

/// Says each online CPU's missing package or core file (`missing`, by fact), when some CPU
/// has that file (`some_have`): then it is broken, not a dump's format.
fn warn_missing(fs: &mut FsRoot, missing: &[Vec<u32>; 2], some_have: [bool; 2]) {
    for (k, value_file) in ["physical_package_id", "core_id"].into_iter().enumerate() {
        for &id in missing[k].iter().filter(|_| some_have[k]) {
            let what = CPU_FACTS[k];
            let rel = format!("{CPU_DIR}/cpu{id}/topology/{value_file}");
            // A broken file was warned about already; `warn` keeps the first word per file.
            fs.warn(&rel, "is missing".into(), || format!("CPU {id}'s {what} is unknown"));
        }
    }
}

fn read_host(
    fs: &mut FsRoot,
    cpus: &CpuPresence,
    nodes: &NodesRead,
) -> Result<HostFacts, DiscoveryError> {
    let from_version = || "the kernel release is the one `proc/version` names".to_string();
    let kernel =
        match fs.text_fact("proc/sys/kernel/osrelease", from_version)? {
            Some(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            _ => fs.text_fact("proc/version", || "the kernel release is unknown".into())?.and_then(
                |t| t.strip_prefix("Linux version ")?.split_whitespace().next().map(str::to_string),
            ),
        };
    let numa_balancing = fs
        .fact("proc/sys/kernel/numa_balancing", parse::uint, || {
            "automatic NUMA balancing is unknown (not warned about)".into()
        })?
        .value();
    let zone_reclaim_mode = fs
        .fact("proc/sys/vm/zone_reclaim_mode", parse::uint, || {
            "vm.zone_reclaim_mode is unknown (not warned about)".into()
        })?
        .value();
    let status = fs
        .fact("proc/self/status", crate::proc::pid::status::parse, || {
            "the allowed CPUs and nodes come from the cgroup files, or are unknown".into()
        })?
        .value()
        .unwrap_or_default();
    // Cpus_allowed_list lies inside the cpuset, inside the online CPUs: when it names every
    // online CPU (no affinity, no cpuset: the usual case) the cgroup files have nothing to add.
    let complete = status.cpus.as_ref() == Some(&cpus.online) && status.nodes.is_some();
    let (cpuset_cpus, cpuset_nodes) = if complete { (None, None) } else { cgroup_cpuset(fs)? };
    // The cpuset may name offline CPUs; the kernel never lets a task run there.
    let cpuset_cpus = cpuset_cpus.map(|c| c.intersection(&cpus.online));
    let allowed_cpus = allowed_cpus(status.cpus, cpuset_cpus);
    // Mems_allowed_list is the cpuset's alone: memory policies do not narrow it.
    let allowed_nodes = status.nodes.or(cpuset_nodes);
    let offline_nodes =
        nodes.possible.as_ref().map(|p| p.difference(&nodes.online)).unwrap_or_default();
    // What the nodes' MemTotal should add up to; host_warnings says when it does not.
    let memory_bytes = fs
        .fact("proc/meminfo", crate::node::meminfo::parse, || {
            "the machine's memory is unknown (not compared with the nodes')".into()
        })?
        .value()
        .and_then(|m| m.total_bytes);
    Ok(HostFacts {
        kernel,
        numa_balancing,
        zone_reclaim_mode,
        allowed_cpus,
        allowed_nodes,
        offline_nodes,
        memory_bytes,
        memory_policies: None,
    })
}

/// The CPUs services may be given. `Cpus_allowed_list` is the reading process's affinity
/// inside its cpuset: a shell under `taskset`, or a unit with `CPUAffinity=`, sees fewer CPUs
/// than the host offers, and a plan must not depend on who computes it (every unit running
/// `pinctl exec -c FILE --service NAME` computes the whole plan, and they must agree). So the
/// cgroup's cpuset decides, as it does for hwloc. `Cpus_allowed_list` stays the answer when
/// no cpuset file can be read, or when it names a CPU the cpuset lacks: the files then
/// describe some other cgroup than this process's, and the kernel's own view is the safer one.
fn allowed_cpus(status: Option<CpuSet>, cpuset: Option<CpuSet>) -> Option<CpuSet> {
    match (status, cpuset) {
        (Some(status), Some(cpuset)) if status.is_subset(&cpuset) => Some(cpuset),
        (Some(status), _) => Some(status),
        (None, cpuset) => cpuset,
    }
}

/// The cpuset of the reading process from cgroup files (what `allowed_cpus` prefers, and all
/// there is in trees without `/proc/self/status`, such as hwloc's captures): cgroup v1 (`/proc/self/cpuset` or the `cpuset` line of
/// `/proc/self/cgroup`, under the `cpuset` mount of `/proc/mounts`; old cpuset filesystems name
/// the files `cpus`/`mems`), else cgroup v2 (`cpuset.cpus.effective` of the `0::` cgroup).
/// The first of `names` under `dir` that exists, read as an id list.
fn first_of<K: IdKind>(
    fs: &mut FsRoot,
    dir: &str,
    names: &[&str],
) -> Result<Option<IdSet<K>>, DiscoveryError> {
    for name in names {
        let set = fs.fact(&format!("{dir}/{name}"), parse::id_list, || {
            format!("the cpuset says nothing in `{dir}/{name}`")
        })?;
        if let Fact::Value(set) = set {
            return Ok(Some(set));
        }
    }
    Ok(None)
}

fn cgroup_cpuset(fs: &mut FsRoot) -> Result<(Option<CpuSet>, Option<NodeSet>), DiscoveryError> {
    let no_cpuset = || "the cgroup cpuset is unknown".to_string();
    let Some(mounts_text) = fs.text_fact("proc/mounts", no_cpuset)?.map(str::to_string) else {
        return Ok((None, None));
    };
    let mounts = match parse::mounts(&mounts_text) {
        Ok(m) => m,
        Err(source) => {
            fs.warn("proc/mounts", format!("does not parse ({source})"), no_cpuset);
            return Ok((None, None));
        }
    };
    let v1_mount = mounts.iter().find(|m| {
        m.fstype == "cpuset"
            || (m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset"))
    });
    let v2_mount = mounts.iter().find(|m| m.fstype == "cgroup2");
    let cgroup_text =
        fs.text_fact("proc/self/cgroup", no_cpuset)?.map(str::to_string).unwrap_or_default();

    let mut candidates: Vec<(String, &[&str], &[&str])> = Vec::new();
    if let Some(m) = v1_mount {
        let path = match fs.text_fact("proc/self/cpuset", || {
            "the cpuset's folder comes from `proc/self/cgroup`".into()
        })? {
            Some(p) if !p.trim().is_empty() => Some(p.trim().to_string()),
            _ => crate::proc::pid::cgroup::path(&cgroup_text, Some("cpuset")).map(str::to_string),
        };
        if let Some(p) = path {
            candidates.push((
                format!("{}/{}", m.target.trim_start_matches('/'), p.trim_start_matches('/')),
                &["cpuset.effective_cpus", "cpuset.cpus", "cpus"],
                &["cpuset.effective_mems", "cpuset.mems", "mems"],
            ));
        }
    }
    if let (Some(m), Some(p)) = (v2_mount, crate::proc::pid::cgroup::path(&cgroup_text, None)) {
        // A cgroup whose parent does not enable the cpuset controller has no cpuset files: its
        // tasks get the nearest ancestor's set (the root's, on a host where no unit sets
        // AllowedCPUs=), so look there too.
        let mut path = p.trim_matches('/');
        loop {
            candidates.push((
                format!("{}/{path}", m.target.trim_start_matches('/')),
                &["cpuset.cpus.effective"],
                &["cpuset.mems.effective"],
            ));
            if path.is_empty() {
                break;
            }
            path = path.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
    }
    for (dir, cpu_files, mem_files) in candidates {
        let dir = crate::fsroot::normalize(&dir);
        let c: Option<CpuSet> = first_of(fs, &dir, cpu_files)?;
        let n: Option<NodeSet> = first_of(fs, &dir, mem_files)?;
        if c.is_some() || n.is_some() {
            return Ok((c, n));
        }
    }
    Ok((None, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_columns_follow_online_or_possible_nodes() {
        let online: NodeSet = "1".parse().unwrap();
        let possible: NodeSet = "0-1".parse().unwrap();
        let m = distance_matrix(&online, Some(&possible), &[Some(vec![21, 10])]);
        assert_eq!(m, vec![vec![10]]);
        let online: NodeSet = "0,1,4".parse().unwrap();
        let rows = [Some(vec![10, 20, 40]), Some(vec![20, 10, 40]), Some(vec![40, 40, 10])];
        let m = distance_matrix(&online, None, &rows);
        assert_eq!(m[2], vec![40, 40, 10]);
        assert!(distance_matrix(&online, None, &[Some(vec![10]), None, None]).is_empty());
        assert!(
            distance_matrix(
                &online,
                None,
                &[Some(vec![10, 20]), Some(vec![10, 20]), Some(vec![10, 20])]
            )
            .is_empty()
        );
    }
}
