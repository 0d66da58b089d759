//! Nodes, CPUs, distances and host facts from `sys/devices/system/{node,cpu}` and `proc/`.

use std::path::Path;

use pinctl_topology::text::shown;
use pinctl_topology::{
    Cpu, CpuSet, HostFacts, IdKind, IdSet, MAX_CPU_ID, MAX_NODE_ID, Node, NodeId, NodeSet, Topology,
};

use crate::devices::read_devices;
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse;

const NODE_DIR: &str = "sys/devices/system/node";
const CPU_DIR: &str = "sys/devices/system/cpu";

/// Reads the topology of the sysfs/procfs tree under `root` (`/` for the live machine).
///
/// Missing files fall back as docs/topology.md describes (e.g. no `distance` files: empty
/// matrix; no `meminfo`: unknown memory); files with content the kernel never writes are errors.
pub fn read_topology(root: &Path) -> Result<Topology, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    read_tree(&mut fs)
}

/// Reads the topology of any tree: a directory, or an archive in memory (pinctl-capture).
pub fn read_tree(fs: &mut FsRoot) -> Result<Topology, DiscoveryError> {
    // A root must hold something discovery reads (nodes, CPUs, or devices for the NVMe-only
    // dumps of libnvme): any folder with a `proc/` (or `/proc` itself) would otherwise read as
    // a machine with no nodes and no CPUs.
    if ![NODE_DIR, CPU_DIR, "sys/class"].iter().any(|d| fs.is_dir(d)) {
        return Err(DiscoveryError::NotARoot { root: fs.root().to_path_buf() });
    }
    let cpus_online = read_online_cpus(fs)?;
    let nodes = read_nodes(fs, &cpus_online)?;
    let cpus = read_cpus(fs, &cpus_online, &nodes)?;
    let host = read_host(fs, &cpus_online, &nodes)?;
    let mut topology = Topology {
        nodes: nodes.nodes,
        distances: nodes.distances,
        cpus,
        devices: Vec::new(),
        host,
        warnings: Vec::new(),
    };
    let mut device_warnings = Vec::new();
    topology.devices = read_devices(fs, &topology, &mut device_warnings)?;
    topology.refresh_warnings();
    topology.warnings.extend(device_warnings);
    Ok(topology)
}

/// The ids of the `{prefix}N` entries of `dir` (`cpu0`, `node1`), unsorted; other names are
/// skipped. An id beyond `max` is refused before anything is sized by it.
pub(crate) fn numbered_folders(
    fs: &mut FsRoot,
    dir: &str,
    prefix: &str,
    max: u32,
) -> Result<Vec<u32>, DiscoveryError> {
    let names = fs.list(dir)?.unwrap_or_default();
    let mut ids = Vec::new();
    for name in &names {
        let Some(digits) = name.strip_prefix(prefix) else { continue };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        match digits.parse::<u32>() {
            Ok(id) if id <= max => ids.push(id),
            _ => {
                return Err(DiscoveryError::IdTooLarge {
                    path: fs.full(&format!("{dir}/{}", shown(name))),
                    max,
                });
            }
        }
    }
    Ok(ids)
}

/// Present CPUs and the online ones among them.
#[derive(Debug)]
struct CpuPresence {
    /// Every CPU with a `cpuN` directory, ascending.
    present: Vec<u32>,
    online: CpuSet,
}

fn read_online_cpus(fs: &mut FsRoot) -> Result<CpuPresence, DiscoveryError> {
    let online_file = fs.parsed(&format!("{CPU_DIR}/online"), parse::id_list)?;
    let mut present: Vec<u32> = numbered_folders(fs, CPU_DIR, "cpu", MAX_CPU_ID)?;
    present.sort_unstable();
    let online = match online_file {
        Some(set) => set,
        None => {
            // Old dumps have no `online` list: a CPU is online unless its own `online` says 0
            // (CPU 0 usually has no such file because it cannot be unplugged).
            let mut set = CpuSet::new();
            for &id in &present {
                let v = fs.parsed(&format!("{CPU_DIR}/cpu{id}/online"), parse::uint)?;
                if v != Some(0) {
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
    let list =
        |fs: &mut FsRoot, name: &str| fs.parsed(&format!("{NODE_DIR}/{name}"), parse::node_list);
    let online_file = list(fs, "online")?;
    let possible = list(fs, "possible")?;
    let has_cpu = list(fs, "has_cpu")?;
    let has_memory = list(fs, "has_memory")?;
    let online: NodeSet = match online_file {
        Some(set) => set,
        // Dumps without `online` (util-linux, old hwloc captures): every `nodeN` folder.
        None => numbered_folders(fs, NODE_DIR, "node", MAX_NODE_ID)?.into_iter().collect(),
    };

    if online.is_empty() {
        return without_numa(fs, cpus);
    }

    let has_normal_memory =
        if has_memory.is_none() { list(fs, "has_normal_memory")? } else { None };
    let mut nodes = Vec::with_capacity(online.len());
    let mut listed_cpus = Vec::with_capacity(online.len());
    let mut rows: Vec<Option<Vec<u32>>> = Vec::with_capacity(online.len());
    for id in online.iter() {
        let dir = format!("{NODE_DIR}/node{id}");
        let listed = match fs.parsed(&format!("{dir}/cpulist"), parse::id_list)? {
            Some(set) => set,
            None => fs.parsed(&format!("{dir}/cpumap"), parse::id_mask)?.unwrap_or_default(),
        };
        let node_cpus = listed.intersection(&cpus.online);
        let mem = fs.parsed(&format!("{dir}/meminfo"), parse::meminfo)?.unwrap_or_default();
        rows.push(fs.parsed(&format!("{dir}/distance"), parse::distance_row)?);
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
    let mem = fs.parsed("proc/meminfo", parse::meminfo)?.unwrap_or_default();
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
    for (i, &id) in cpus.present.iter().enumerate() {
        let dir = format!("{CPU_DIR}/cpu{id}/topology");
        for (slot, value_file, sibling_files) in [
            (&mut package, "physical_package_id", &["package_cpus_list", "core_siblings_list"][..]),
            (&mut core, "core_id", &["thread_siblings_list"][..]),
        ] {
            if slot[i].is_some() {
                continue;
            }
            let value = fs.parsed(&format!("{dir}/{value_file}"), parse::int)?.and_then(id_of);
            slot[i] = Some(value);
            for file in sibling_files {
                if let Some(siblings) = fs.parsed(&format!("{dir}/{file}"), parse::id_list)? {
                    // Offline CPUs answer for themselves (edited dumps list them as siblings).
                    for s in siblings.intersection(&cpus.online).iter().filter_map(index) {
                        slot[s].get_or_insert(value);
                    }
                    break;
                }
            }
        }
    }
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

fn read_host(
    fs: &mut FsRoot,
    cpus: &CpuPresence,
    nodes: &NodesRead,
) -> Result<HostFacts, DiscoveryError> {
    let kernel = match fs.read("proc/sys/kernel/osrelease")? {
        Some(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
        _ => fs.read("proc/version")?.and_then(|t| {
            t.strip_prefix("Linux version ")?.split_whitespace().next().map(str::to_string)
        }),
    };
    let numa_balancing = fs.parsed("proc/sys/kernel/numa_balancing", parse::uint)?;
    let zone_reclaim_mode = fs.parsed("proc/sys/vm/zone_reclaim_mode", parse::uint)?;
    let status = fs.parsed("proc/self/status", parse::status_allowed)?.unwrap_or_default();
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
    Ok(HostFacts {
        kernel,
        numa_balancing,
        zone_reclaim_mode,
        allowed_cpus,
        allowed_nodes,
        offline_nodes,
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
        if let Some(set) = fs.parsed(&format!("{dir}/{name}"), parse::id_list)? {
            return Ok(Some(set));
        }
    }
    Ok(None)
}

fn cgroup_cpuset(fs: &mut FsRoot) -> Result<(Option<CpuSet>, Option<NodeSet>), DiscoveryError> {
    let Some(mounts_text) = fs.read("proc/mounts")?.map(str::to_string) else {
        return Ok((None, None));
    };
    let mounts = parse::mounts(&mounts_text)
        .map_err(|source| DiscoveryError::Parse { path: fs.full("proc/mounts"), source })?;
    let v1_mount = mounts.iter().find(|m| {
        m.fstype == "cpuset"
            || (m.fstype == "cgroup" && m.options.split(',').any(|o| o == "cpuset"))
    });
    let v2_mount = mounts.iter().find(|m| m.fstype == "cgroup2");
    let cgroup_text = fs.read("proc/self/cgroup")?.map(str::to_string).unwrap_or_default();

    let mut candidates: Vec<(String, &[&str], &[&str])> = Vec::new();
    if let Some(m) = v1_mount {
        let path = match fs.read("proc/self/cpuset")? {
            Some(p) if !p.trim().is_empty() => Some(p.trim().to_string()),
            _ => parse::cgroup_path(&cgroup_text, Some("cpuset")).map(str::to_string),
        };
        if let Some(p) = path {
            candidates.push((
                format!("{}/{}", m.target.trim_start_matches('/'), p.trim_start_matches('/')),
                &["cpuset.effective_cpus", "cpuset.cpus", "cpus"],
                &["cpuset.effective_mems", "cpuset.mems", "mems"],
            ));
        }
    }
    if let (Some(m), Some(p)) = (v2_mount, parse::cgroup_path(&cgroup_text, None)) {
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
