//! Devices and their locality: block devices (NVMe, disks, multipath namespaces, dm/md
//! volumes), network interfaces (NICs, bonds, VLANs, bridges), InfiniBand HCAs, GPUs and
//! accelerators (DRM cards, and PCI functions by class: [`crate::pci`]) and DAX devices, each placed on the node(s) sysfs says it is local to.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use pinctl_topology::{CpuSet, Device, DeviceKind, Locality, NodeId, NodeSet, Topology};

use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot, basename, is_entry_name, parent};
use crate::parse;

/// How a candidate's locality is found.
#[derive(Debug)]
enum How {
    /// Walk up from its sysfs folder to the first `numa_node`.
    Physical,
    /// An NVMe native-multipath namespace: its controllers' nodes.
    Multipath,
    /// A stacked device: its members' nodes.
    Members(Vec<String>),
}

#[derive(Debug)]
struct Candidate {
    name: String,
    kind: DeviceKind,
    /// The device's folder under `sys/devices`.
    path: String,
    how: How,
}

/// What walking up from a device folder found.
#[derive(Debug)]
struct Located {
    nodes: NodeSet,
    locality: Locality,
    pci: Option<String>,
}

/// Which devices discovery reads. A plan needs devices only for `near` entries and
/// `keep-free`: `pinctl exec -c` reads no more of them than its file names, since every device
/// costs a link, a folder or a file or two, and a server has hundreds of PCI functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceScope {
    /// Every kind: block devices, NICs, InfiniBand, GPUs and accelerators, DAX.
    All,
    /// Network devices only (`sys/class/net`, `sys/class/infiniband`).
    Network,
    /// These network and block devices, by name (the default route's NICs, which the
    /// planner keeps free when the file sets no `keep-free`; the NICs `keep-free` names; the
    /// NICs and disks `near` names) and, for bonds, VLANs, bridges, dm and md volumes, their
    /// members. A name that is neither is left out.
    Named(Vec<String>),
    /// None.
    None,
}

pub(crate) fn read_devices(
    fs: &mut FsRoot,
    topo: &Topology,
    scope: &DeviceScope,
) -> Result<Vec<Device>, DiscoveryError> {
    let mut cands = Vec::new();
    let all = *scope == DeviceScope::All;
    match scope {
        DeviceScope::None => return Ok(Vec::new()),
        DeviceScope::Named(names) => named_devices(fs, names, &mut cands)?,
        DeviceScope::All | DeviceScope::Network => {
            if all {
                block_devices(fs, &mut cands)?;
            }
            net_devices(fs, &mut cands)?;
            class_devices(
                fs,
                "sys/class/infiniband",
                DeviceKind::Infiniband,
                |_| true,
                &mut cands,
            )?;
        }
    }
    let mut accelerators = Vec::new();
    if all {
        class_devices(fs, "sys/class/drm", DeviceKind::Gpu, is_drm_card, &mut cands)?;
        class_devices(fs, "sys/bus/dax/devices", DeviceKind::Other, |_| true, &mut cands)?;
        accelerators = crate::pci::accelerators(fs)?;
    }
    // A GPU with a DRM node is also found by its PCI class: that entry names it once.
    cands.retain(|c| {
        c.kind != DeviceKind::Gpu
            || !accelerators
                .iter()
                .any(|a| c.path.strip_prefix(&a.path).is_some_and(|r| r.starts_with('/')))
    });

    let mut seen = HashSet::new();
    cands.retain(|c| seen.insert(c.name.clone()));

    let mut done: BTreeMap<String, Device> = BTreeMap::new();
    let mut stacked = Vec::new();
    for c in cands {
        match c.how {
            How::Physical => {
                if let Some(loc) = locate(fs, &c.path, topo)? {
                    done.insert(c.name.clone(), device(c.name, c.kind, loc, Vec::new()));
                }
            }
            How::Multipath => {
                let d = multipath(fs, &c.path, topo, c.name.clone(), c.kind)?;
                done.insert(c.name, d);
            }
            How::Members(ref m) => stacked.push((c.name.clone(), c.kind, m.clone())),
        }
    }
    for a in accelerators {
        if let Some(loc) = locate(fs, &a.path, topo)? {
            let mut d = device(a.name.clone(), a.kind, loc, Vec::new());
            d.aliases = a.aliases;
            done.insert(a.name, d);
        }
    }
    resolve_stacked(stacked, &mut done);
    Ok(done.into_values().collect())
}

fn device(name: String, kind: DeviceKind, loc: Located, members: Vec<String>) -> Device {
    let mut d = Device {
        name,
        kind,
        pci: loc.pci,
        node: None,
        nodes: NodeSet::new(),
        locality: loc.locality,
        members,
        aliases: Vec::new(),
    };
    d.set_nodes(loc.nodes);
    d
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort_unstable();
    v
}

fn is_drm_card(name: &str) -> bool {
    name.strip_prefix("card")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `<prefix><digits>`, as `loop7`.
fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `nvme<ctrl>n<ns>` (a namespace block device).
fn is_nvme_namespace(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("nvme") else { return false };
    let Some((ctrl, ns)) = rest.split_once('n') else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(ctrl) && digits(ns)
}

/// `nvme<subsys>c<ctrl>n<ns>`: the hidden per-path device of a multipath namespace; users
/// name the namespace head instead.
fn is_nvme_path_device(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("nvme") else { return false };
    let Some((sub, rest)) = rest.split_once('c') else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(sub) && rest.split_once('n').is_some_and(|(c, n)| digits(c) && digits(n))
}

fn block_devices(fs: &mut FsRoot, out: &mut Vec<Candidate>) -> Result<(), DiscoveryError> {
    let (dir, names) = match fs.list("sys/class/block")? {
        Some(n) => ("sys/class/block", n),
        None => match fs.list("sys/block")? {
            Some(n) => ("sys/block", n),
            // Dumps of only the NVMe classes (libnvme's): find namespaces from controllers.
            None => return nvme_class_namespaces(fs, out),
        },
    };
    let names = sorted(names);
    let known: HashSet<&str> = names.iter().map(String::as_str).collect();
    for name in &names {
        if let Some(c) = block_device(fs, dir, name, &mut |_, n| known.contains(n))? {
            out.push(c);
        }
    }
    Ok(())
}

/// One entry of the block class folder `dir`: a disk, an NVMe namespace, a multipath
/// namespace, or a dm/md volume with members; `None` for a partition, a path device of a
/// multipath namespace, or a device without members (loop, ram, zram). `known` says whether
/// a name is an entry of `dir` (a partition's folder sits inside its disk's).
fn block_device(
    fs: &mut FsRoot,
    dir: &str,
    name: &str,
    known: &mut dyn FnMut(&mut FsRoot, &str) -> bool,
) -> Result<Option<Candidate>, DiscoveryError> {
    // Path devices of multipath namespaces, and RAM-backed devices that never have
    // members (skipped by name to save two syscalls each on every run).
    if is_nvme_path_device(name) || ["loop", "ram", "zram"].iter().any(|p| is_numbered(name, p)) {
        return Ok(None);
    }
    let Some(path) = fs.link(&format!("{dir}/{name}"))? else { return Ok(None) };
    // A partition's folder sits inside its disk's folder.
    if known(fs, basename(parent(&path))) {
        return Ok(None);
    }
    let kind = if name.starts_with("nvme") { DeviceKind::Nvme } else { DeviceKind::Disk };
    let how = if path.starts_with("sys/devices/virtual/nvme-subsystem/") {
        How::Multipath
    } else if path.starts_with("sys/devices/virtual/") {
        // dm, md, LVM: members in `slaves/`. Loop, ram, zram have none: not placeable.
        let slaves = sorted(fs.list(&format!("{path}/slaves"))?.unwrap_or_default());
        if slaves.is_empty() {
            return Ok(None);
        }
        let mut members = Vec::with_capacity(slaves.len());
        for s in slaves {
            // A member partition counts as its whole disk.
            let whole = match fs.link(&format!("{dir}/{s}"))? {
                Some(p) if known(fs, basename(parent(&p))) => basename(parent(&p)).to_string(),
                _ => s,
            };
            if !members.contains(&whole) {
                members.push(whole);
            }
        }
        How::Members(members)
    } else {
        How::Physical
    };
    Ok(Some(Candidate { name: name.to_string(), kind, path, how }))
}

fn nvme_class_namespaces(fs: &mut FsRoot, out: &mut Vec<Candidate>) -> Result<(), DiscoveryError> {
    for (class, how) in [("sys/class/nvme", false), ("sys/class/nvme-subsystem", true)] {
        for entry in sorted(fs.list(class)?.unwrap_or_default()) {
            let Some(dir) = fs.link(&format!("{class}/{entry}"))? else { continue };
            for ns in sorted(fs.list(&dir)?.unwrap_or_default()) {
                if is_nvme_namespace(&ns) {
                    out.push(Candidate {
                        path: format!("{dir}/{ns}"),
                        name: ns,
                        kind: DeviceKind::Nvme,
                        how: if how { How::Multipath } else { How::Physical },
                    });
                }
            }
        }
    }
    Ok(())
}

fn net_devices(fs: &mut FsRoot, out: &mut Vec<Candidate>) -> Result<(), DiscoveryError> {
    for name in sorted(fs.list("sys/class/net")?.unwrap_or_default()) {
        out.extend(net_device(fs, name)?);
    }
    Ok(())
}

/// The devices `names` name, each looked up in `sys/class/net` and then `sys/class/block`,
/// and, through their members, every device below them (a VLAN on a bond on two NICs, an LVM
/// volume on two disks), as the full listing has them: what locating `names` needs, and no
/// more.
fn named_devices(
    fs: &mut FsRoot,
    names: &[String],
    out: &mut Vec<Candidate>,
) -> Result<(), DiscoveryError> {
    let mut wanted: Vec<String> = names.to_vec();
    let mut seen = BTreeSet::new();
    let mut found: BTreeMap<String, Candidate> = BTreeMap::new();
    while let Some(name) = wanted.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        // A name neither class folder has, or one without members, is left out as the full
        // listing leaves it out.
        let mut c = net_device(fs, name.clone())?;
        if c.is_none() && is_entry_name(&name) {
            // An entry of the block class folder is what the full listing's names are.
            let mut entry = |fs: &mut FsRoot, n: &str| {
                fs.link(&format!("sys/class/block/{n}")).ok().flatten().is_some()
            };
            c = block_device(fs, "sys/class/block", &name, &mut entry)?;
        }
        if let Some(c) = c {
            if let How::Members(members) = &c.how {
                wanted.extend(members.iter().cloned());
            }
            found.insert(name, c);
        }
    }
    out.extend(found.into_values());
    Ok(())
}

/// One entry of `sys/class/net`: a NIC, or a virtual device with members (bond, VLAN, bridge,
/// macvlan); `None` for one without members (lo, tun, dummy, veth) or a name not there.
fn net_device(fs: &mut FsRoot, name: String) -> Result<Option<Candidate>, DiscoveryError> {
    let dir = "sys/class/net";
    if !is_entry_name(&name) {
        return Ok(None);
    }
    let Some(path) = fs.link(&format!("{dir}/{name}"))? else { return Ok(None) };
    if !path.starts_with("sys/devices/virtual/") {
        return Ok(Some(Candidate { name, kind: DeviceKind::Nic, path, how: How::Physical }));
    }
    // Bonds list members in bonding/slaves; VLANs, macvlans and bonds link `lower_<dev>`;
    // bridges list ports in brif/. Without members (lo, tun, dummy, veth) it is not
    // placeable. One listing of the device's folder says which of these to read, so a
    // container host's hundreds of veths cost one folder read each.
    let entries = fs.list(&path)?.unwrap_or_default();
    let has = |name: &str| entries.iter().any(|e| e == name);
    let mut members: Vec<String> = Vec::new();
    if has("bonding") {
        let from_links = || format!("`{name}`'s members are its `lower_` links");
        if let Some(t) = fs.text_fact(&format!("{path}/bonding/slaves"), from_links)? {
            members = t.split_whitespace().map(str::to_string).collect();
        }
    }
    if members.is_empty() {
        members =
            entries.iter().filter_map(|e| e.strip_prefix("lower_").map(str::to_string)).collect();
    }
    if members.is_empty() && has("brif") {
        members = fs.list(&format!("{path}/brif"))?.unwrap_or_default();
    }
    if members.is_empty() {
        return Ok(None);
    }
    let members = sorted(members);
    Ok(Some(Candidate { name, kind: DeviceKind::Nic, path, how: How::Members(members) }))
}

fn class_devices(
    fs: &mut FsRoot,
    dir: &str,
    kind: DeviceKind,
    wanted: fn(&str) -> bool,
    out: &mut Vec<Candidate>,
) -> Result<(), DiscoveryError> {
    for name in sorted(fs.list(dir)?.unwrap_or_default()) {
        if !wanted(&name) {
            continue;
        }
        let Some(path) = fs.link(&format!("{dir}/{name}"))? else { continue };
        out.push(Candidate { name, kind, path, how: How::Physical });
    }
    Ok(())
}

/// What walking up from a device folder to its PCI function finds, before the nodes' CPUs
/// give `local_cpulist` a meaning. Shared by discovery and the launcher's host reader
/// ([`crate::Host`]) so both answer "which node is this device on" the same way.
#[derive(Debug)]
pub(crate) struct Walk {
    /// The first `numa_node` found on the way up: `Some(None)` when it says -1, `None` when
    /// there is no such file.
    pub(crate) numa_node: Option<Option<NodeId>>,
    /// The folder of the PCI function above the device, if any.
    pub(crate) pci_dir: Option<String>,
    /// The PCI function's `local_cpulist` (or `local_cpus` mask), read only when `numa_node`
    /// did not give a node.
    pub(crate) local_cpus: Option<CpuSet>,
}

/// Walks up from a device folder to the first ancestor with `numa_node` (virtio devices,
/// NVMe namespaces and SCSI disks sit below their PCI function). `-1` there, or no `numa_node`
/// at all below a PCI function, falls back to the function's `local_cpulist`.
pub(crate) fn walk_up(fs: &mut FsRoot, path: &str) -> Result<Walk, DiscoveryError> {
    let mut found: Option<Option<NodeId>> = None;
    let mut pci: Option<&str> = None;
    let mut dir = path;
    while dir.starts_with("sys/devices/") {
        if pci.is_none() && parse::is_pci_address(basename(dir)) {
            pci = Some(dir);
        }
        if found.is_none() {
            // A broken `numa_node` says as little as -1: the node comes from `local_cpulist`
            // as the kernel's own default does, never from a folder further up.
            found = match fs.fact(&format!("{dir}/numa_node"), parse::numa_node, || {
                "the devices below it are placed by their PCI function's `local_cpulist` \
                 as for -1, or have unknown locality"
                    .into()
            })? {
                Fact::Value(node) => Some(node),
                Fact::Broken => Some(None),
                Fact::Absent => None,
            };
        }
        if found.is_some() && pci.is_some() {
            break;
        }
        dir = parent(dir);
    }
    let mut local_cpus = None;
    if let (Some(pci_dir), false) = (pci, matches!(found, Some(Some(_)))) {
        let from_mask = || "the CPUs near the function are those of its `local_cpus`".into();
        let unknown = || "the CPUs near the function are unknown".into();
        local_cpus =
            match fs.fact(&format!("{pci_dir}/local_cpulist"), parse::id_list, from_mask)? {
                Fact::Value(set) => Some(set),
                _ => fs.fact(&format!("{pci_dir}/local_cpus"), parse::id_mask, unknown)?.value(),
            };
    }
    Ok(Walk { numa_node: found, pci_dir: pci.map(str::to_string), local_cpus })
}

/// Where a device folder is on `topo`. `None`: neither a `numa_node` nor a PCI function above
/// it (a software device, not a placement target).
fn locate(fs: &mut FsRoot, path: &str, topo: &Topology) -> Result<Option<Located>, DiscoveryError> {
    let walk = walk_up(fs, path)?;
    let pci_name = walk.pci_dir.as_deref().map(|p| basename(p).to_string());
    if let Some(Some(node)) = walk.numa_node {
        let nodes = std::iter::once(node).collect();
        return Ok(Some(Located { nodes, locality: Locality::NumaNode, pci: pci_name }));
    }
    if walk.pci_dir.is_none() {
        return Ok(walk.numa_node.map(|_| Located {
            nodes: NodeSet::new(),
            locality: Locality::Unknown,
            pci: None,
        }));
    }
    let with_cpus = topo.nodes.iter().filter(|n| !n.cpus.is_empty()).map(|n| (n.id, &n.cpus));
    let nodes = walk.local_cpus.map(|cpus| nodes_of_cpus(with_cpus, &cpus)).unwrap_or_default();
    let locality = if nodes.is_empty() { Locality::Unknown } else { Locality::LocalCpulist };
    Ok(Some(Located { nodes, locality, pci: pci_name }))
}

/// Nodes (given with their CPUs, only those that have CPUs) whose CPUs meet `cpus`. When
/// `cpus` meets every node with CPUs on a multi-node machine, the kernel was only repeating
/// its default for `numa_node = -1` (all online CPUs): that says nothing, so the answer is
/// "unknown".
pub(crate) fn nodes_of_cpus<'a>(
    nodes_with_cpus: impl Iterator<Item = (NodeId, &'a CpuSet)>,
    cpus: &CpuSet,
) -> NodeSet {
    let mut count = 0;
    let mut hit = NodeSet::new();
    for (id, node_cpus) in nodes_with_cpus {
        count += 1;
        if !node_cpus.is_disjoint(cpus) {
            hit.insert(id);
        }
    }
    if count > 1 && hit.len() == count { NodeSet::new() } else { hit }
}

fn multipath(
    fs: &mut FsRoot,
    path: &str,
    topo: &Topology,
    name: String,
    kind: DeviceKind,
) -> Result<Device, DiscoveryError> {
    let mut controllers: Vec<String> = Vec::new();
    for p in sorted(fs.list(&format!("{path}/multipath"))?.unwrap_or_default()) {
        if let Some(target) = fs.link(&format!("{path}/multipath/{p}"))? {
            controllers.push(parent(&target).to_string());
        }
    }
    if controllers.is_empty() {
        // No `multipath/` folder: every controller of the subsystem reaches the namespace.
        let subsys = parent(path).to_string();
        for e in sorted(fs.list(&subsys)?.unwrap_or_default()) {
            let is_ctrl = e
                .strip_prefix("nvme")
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty());
            if !is_ctrl {
                continue;
            }
            if let Some(target) = fs.link(&format!("{subsys}/{e}"))? {
                controllers.push(target);
            }
        }
    }
    controllers.sort_unstable_by(|a, b| basename(a).cmp(basename(b)));
    controllers.dedup();
    let mut nodes = NodeSet::new();
    let mut pcis = Vec::new();
    for c in &controllers {
        if let Some(loc) = locate(fs, c, topo)? {
            nodes = nodes.union(&loc.nodes);
            pcis.push(loc.pci);
        }
    }
    let locality =
        if nodes.is_empty() { Locality::Unknown } else { Locality::MultipathControllers };
    let pci = if pcis.len() == 1 { pcis.pop().flatten() } else { None };
    let members = controllers.iter().map(|c| basename(c).to_string()).collect();
    Ok(device(name, kind, Located { nodes, locality, pci }, members))
}

/// Resolves stacked devices in dependency order (a VLAN on a bond on NICs): each takes the
/// union of its known members' nodes. A stacked device none of whose members is a device
/// (a dm volume on loop devices) is left out; a cycle resolves with what is known.
fn resolve_stacked(
    mut pending: Vec<(String, DeviceKind, Vec<String>)>,
    done: &mut BTreeMap<String, Device>,
) {
    loop {
        let names: HashSet<String> = pending.iter().map(|p| p.0.clone()).collect();
        let ready = pending.iter().position(|(_, _, m)| m.iter().all(|x| !names.contains(x)));
        let idx = match ready {
            Some(i) => i,
            None if pending.is_empty() => return,
            None => 0,
        };
        let (name, kind, members) = pending.remove(idx);
        let known: Vec<&Device> = members.iter().filter_map(|m| done.get(m)).collect();
        if known.is_empty() {
            continue;
        }
        let nodes = known.iter().fold(NodeSet::new(), |acc, d| acc.union(&d.nodes));
        let locality = if nodes.is_empty() { Locality::Unknown } else { Locality::Members };
        let d = device(name.clone(), kind, Located { nodes, locality, pci: None }, members);
        done.insert(name, d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_names() {
        assert!(is_nvme_namespace("nvme0n1"));
        assert!(is_nvme_namespace("nvme12n3"));
        assert!(!is_nvme_namespace("nvme0n1p1"));
        assert!(!is_nvme_namespace("nvme1c1n1"));
        assert!(!is_nvme_namespace("nvme0"));
        assert!(is_nvme_path_device("nvme1c2n1"));
        assert!(!is_nvme_path_device("nvme1n1"));
        assert!(is_drm_card("card0"));
        assert!(!is_drm_card("card0-HDMI-A-1"));
        assert!(!is_drm_card("renderD128"));
    }
}
