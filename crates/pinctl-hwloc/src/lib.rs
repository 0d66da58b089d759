//! Reads an hwloc XML topology (what `lstopo --of xml` or `hwloc-gather-topology` writes on a
//! fleet host) into pinctl's model, through libhwloc and the `hwlocality` bindings, so that a
//! machine can be planned from a desk without a sysfs capture of it.
//!
//! This crate only translates hwloc's view: it must not read sysfs or procfs, probe the live
//! machine (the XML is the only source) or guess facts hwloc does not record, such as free
//! memory, `numa_balancing` or which nodes are offline. It is the only crate that links
//! libhwloc, and no other crate depends on it: pinctl reads hwloc XML with its own reader
//! (pinctl-hwloc-xml), and this crate is the libhwloc oracle its tests compare that reader with
//! (`tests/fixtures.rs`, `examples/read-hwloc-xml.rs`).
#![forbid(unsafe_code)]

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use hwlocality::bitmap::Bitmap;
use hwlocality::object::TopologyObject;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::{OSDeviceType, ObjectType};
use hwlocality::topology::builder::{BuildFlags, TypeFilter};
use pinctl_topology::{
    AccessClass, Cache, Cpu, CpuSet, Device, DeviceKind, HmatAccess, HostFacts, IdKind, IdSet,
    Locality, MAX_CPU_ID, MAX_ID, MAX_NODE_ID, Node, NodeId, NodeSet, SchemaVersion, Topology,
    last_level_caches,
};

pub use pinctl_hwloc_xml::{
    MAX_XML_ATTRIBUTE_BYTES, MAX_XML_BYTES, MAX_XML_DEPTH, check_shape, xml_format_major,
};

/// Boxed cause from libhwloc or its bindings; boxed so that hwlocality's pre-release types do
/// not become part of this crate's API.
type HwlocCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why an hwloc XML topology could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum HwlocError {
    /// The file could not be read at all.
    #[error("cannot read hwloc XML `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file is not UTF-8 text, so it cannot be an hwloc XML export.
    #[error("hwloc XML `{}` is not UTF-8 text", path.display())]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::str::Utf8Error,
    },
    /// libhwloc refused the document (not XML, not an hwloc topology, or inconsistent).
    #[error("`{}` is not an hwloc XML topology that libhwloc accepts", path.display())]
    Rejected {
        path: PathBuf,
        #[source]
        source: HwlocCause,
    },
    /// The document is shaped so that libhwloc could crash or allocate without bound on it
    /// (nesting, an attribute or an OS index beyond pinctl's limits); refused before libhwloc
    /// sees it.
    #[error("hwloc XML `{}`: {what}", path.display())]
    Refused { path: PathBuf, what: String },
    /// libhwloc accepted the document but describes something pinctl's model cannot hold.
    #[error("hwloc XML `{}`: {what}", path.display())]
    Unusable { path: PathBuf, what: String },
}

/// Reads the hwloc XML file at `path` into a [`Topology`].
///
/// Nodes are hwloc's NUMA nodes, with their locality as CPU set; CPUs are every CPU the file
/// knows of (those absent from hwloc's tree come out offline); devices are hwloc's OS devices
/// with the NUMA nodes of their nearest non-I/O ancestor; distances are the `NUMALatency`
/// matrix. Host facts hwloc does not record stay `None`; the kernel release comes from the
/// `OSRelease` info when the file has one.
pub fn read_hwloc_xml(path: &Path) -> Result<Topology, HwlocError> {
    let bytes = pinctl_trust::read_regular(path, MAX_XML_BYTES)
        .map_err(|source| HwlocError::Read { path: path.to_path_buf(), source })?;
    let xml = std::str::from_utf8(&bytes)
        .map_err(|source| HwlocError::NotUtf8 { path: path.to_path_buf(), source })?;
    check_shape(xml).map_err(|what| HwlocError::Refused { path: path.to_path_buf(), what })?;
    topology_from_xml(xml, path)
}

/// Parses an XML document already in memory; `path` only names it in errors.
fn topology_from_xml(xml: &str, path: &Path) -> Result<Topology, HwlocError> {
    let load = || -> Result<hwlocality::Topology, HwlocCause> {
        let hw = hwlocality::Topology::builder()
            .from_xml(xml)?
            // Disallowed PUs and nodes (outside the exporting process's cpuset) stay in the
            // model: they exist and are online; the allowed sets go to the host facts, as
            // the sysfs reader does with the cgroup cpuset.
            .with_flags(BuildFlags::INCLUDE_DISALLOWED)?
            // Without an I/O filter libhwloc drops every PCI and OS device while importing.
            .with_io_type_filter(TypeFilter::KeepAll)?
            .build()
            .map_err(|e| -> HwlocCause {
                match e.errno {
                    Some(errno) => format!("libhwloc failed to load it: {errno}").into(),
                    None => e.into(),
                }
            })?;
        Ok(hw)
    };
    let hw = load().map_err(|cause| {
        // libhwloc says only EINVAL for a format it does not know; name the format instead.
        let source = match xml_format_major(xml) {
            Some(major) if major > LIBHWLOC_XML_MAJOR => format!(
                "it is hwloc XML format {major}.x, written by hwloc {major}; the linked libhwloc \
                 (API {}) reads formats 1.x and 2.x only",
                libhwloc_api_version()
            )
            .into(),
            _ => cause,
        };
        HwlocError::Rejected { path: path.to_path_buf(), source }
    })?;
    convert(&hw).map_err(|what| HwlocError::Unusable { path: path.to_path_buf(), what })
}

/// The newest XML format the linked libhwloc 2.x reads (hwloc 3 writes format 3.0).
const LIBHWLOC_XML_MAJOR: u32 = 2;

/// `2.8.0` for the API level of the libhwloc this process runs with.
fn libhwloc_api_version() -> String {
    let v = hwlocality::hwloc_api_version();
    format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

/// hwloc's NUMA nodes by id (their CPUs not yet known to be online), and the ids of those
/// hwloc gave a subtype (an NVDIMM, a CXL node: not a CPU's own node when a DRAM one also
/// holds it).
fn numa_nodes(hw: &hwlocality::Topology) -> Result<(Vec<Node>, Vec<NodeId>), String> {
    let mut nodes = Vec::new();
    let mut subtyped = Vec::new();
    for obj in hw.objects_with_type(ObjectType::NUMANode) {
        let id = os_id(obj, "a NUMA node", MAX_NODE_ID)?;
        let cpus = id_set(obj.cpuset().as_deref(), "the CPU set of a NUMA node")?;
        let memory_bytes = match obj.attributes() {
            Some(ObjectAttributes::NUMANode(attr)) => attr.local_memory().map(|m| m.get()),
            _ => None,
        };
        nodes.push(Node {
            id,
            cpus,
            memory_bytes,
            memory_free_bytes: None,
            has_cpu: false,
            // libhwloc keeps a NUMA node only as a memory target (it drops the kernel's
            // memoryless nodes), even when the dump it came from lacked meminfo.
            has_memory: true,
        });
        if obj.subtype().is_some() {
            subtyped.push(id);
        }
    }
    nodes.sort_by_key(|n| n.id);
    if let Some(w) = nodes.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(format!("NUMA node `{}` appears twice", w[0].id));
    }
    Ok((nodes, subtyped))
}

/// Every CPU the file knows of, `online` or not, with the package, core and node of those in
/// hwloc's tree.
fn cpus_of(
    hw: &hwlocality::Topology,
    online: &CpuSet,
    nodes: &[Node],
    subtyped: &[NodeId],
) -> Result<Vec<Cpu>, String> {
    let known = id_set(Some(&*hw.complete_cpuset()), "the topology's complete CPU set")?;
    let mut cpus: Vec<Cpu> = known
        .union(online)
        .iter()
        .map(|id| Cpu { id, online: false, package: None, core: None, node: None })
        .collect();
    for pu in hw.objects_with_type(ObjectType::PU) {
        let id = os_id(pu, "a PU", MAX_CPU_ID)?;
        let Ok(i) = cpus.binary_search_by_key(&id, |c| c.id) else {
            return Err(format!("PU `{id}` lies outside the topology's complete CPU set"));
        };
        let ancestor_index = |ty| pu.first_ancestor_with_type(ty).and_then(os_index_u32);
        cpus[i] = Cpu {
            id,
            online: online.contains(id),
            package: ancestor_index(ObjectType::Package),
            core: ancestor_index(ObjectType::Core),
            // A CPU's own node is the closest one holding it: a DRAM node attached to its
            // die rather than an NVDIMM or CXL node spanning the whole package.
            node: nodes
                .iter()
                .filter(|n| n.cpus.contains(id))
                .min_by_key(|n| (n.cpus.len(), subtyped.contains(&n.id), n.id))
                .map(|n| n.id),
        };
    }
    Ok(cpus)
}

/// hwloc's OS devices, by name, each with the nodes of its nearest non-I/O ancestor.
fn os_devices(hw: &hwlocality::Topology, many_nodes: bool) -> Result<Vec<Device>, String> {
    let mut devices = Vec::new();
    for obj in hw.objects_with_type(ObjectType::OSDevice) {
        let name = obj.name().ok_or("an OS device has no name")?.to_string_lossy().into_owned();
        let Some(ObjectAttributes::OSDevice(attr)) = obj.attributes() else {
            return Err(format!("OS device `{name}` has no device type"));
        };
        let subtype = obj.subtype().map(|s| s.to_string_lossy());
        let mut device = Device {
            kind: device_kind(attr.device_type(), &name, subtype.as_deref()),
            name,
            pci: obj.ancestors().find_map(pci_address),
            node: None,
            nodes: NodeSet::new(),
            locality: Locality::Unknown,
            members: Vec::new(),
            aliases: Vec::new(),
        };
        // libhwloc hangs a device whose locality it could not learn (numa_node -1 and no
        // local_cpus) on the root; on a single-node machine that still means that node.
        let anchor = obj.first_non_io_ancestor().filter(|a| !many_nodes || a.parent().is_some());
        if let Some(anchor) = anchor {
            let local = id_set(anchor.nodeset().as_deref(), "the node set of a device's parent")?;
            if !local.is_empty() {
                device.set_nodes(local);
                device.locality = Locality::Hwloc;
            }
        }
        devices.push(device);
    }
    devices.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.pci.cmp(&b.pci)));
    Ok(devices)
}

/// What hwloc records of the host: the kernel release and the allowed CPUs and nodes; the
/// rest it does not record.
fn host_facts(hw: &hwlocality::Topology) -> Result<HostFacts, String> {
    Ok(HostFacts {
        kernel: hw.root_object().info("OSRelease").map(|s| s.to_string_lossy().into_owned()),
        numa_balancing: None,
        zone_reclaim_mode: None,
        allowed_cpus: Some(id_set(Some(&*hw.allowed_cpuset()), "the allowed CPU set")?),
        allowed_nodes: Some(id_set(Some(&*hw.allowed_nodeset()), "the allowed node set")?),
        offline_nodes: NodeSet::new(),
        // hwloc's total is the sum of its nodes: nothing to check them against.
        memory_bytes: None,
        memory_policies: None,
    })
}

/// The CPU data caches over `online` CPUs, of any level.
fn data_caches(hw: &hwlocality::Topology, online: &CpuSet) -> Result<Vec<Cache>, String> {
    let mut found = Vec::new();
    for obj in hw.objects().filter(|o| o.object_type().is_cpu_data_cache()) {
        let Some(ObjectAttributes::Cache(attr)) = obj.attributes() else { continue };
        let cpus: CpuSet =
            id_set(obj.cpuset().as_deref(), "the CPU set of a cache")?.intersection(online);
        let level = u8::try_from(attr.depth()).map_err(|_| {
            format!("a cache of CPUs {cpus} has level `{}`, above 255", attr.depth())
        })?;
        if !cpus.is_empty() && level > 0 {
            found.push(Cache { level, cpus, size_bytes: attr.size().map(|s| s.get()) });
        }
    }
    Ok(found)
}

/// Translates a loaded hwloc topology; errors are messages that [`HwlocError::Unusable`] wraps.
fn convert(hw: &hwlocality::Topology) -> Result<Topology, String> {
    let (mut nodes, subtyped) = numa_nodes(hw)?;
    let online: CpuSet = id_set(Some(&*hw.cpuset()), "the topology's CPU set")?;
    let cpus = cpus_of(hw, &online, &nodes, &subtyped)?;
    for node in &mut nodes {
        node.has_cpu = cpus.iter().any(|c| c.online && c.node == Some(node.id));
    }
    let distances = numa_distances(hw, &nodes)?;
    let hmat = memory_attributes(hw, &nodes)?;
    let devices = os_devices(hw, nodes.len() > 1)?;
    let host = host_facts(hw)?;
    let found = data_caches(hw, &online)?;
    let mut topology = Topology {
        schema_version: SchemaVersion,
        nodes,
        distances,
        cpus,
        devices,
        host,
        warnings: Vec::new(),
        discovery_warnings: Vec::new(),
        memory_performance: pinctl_topology::MemoryPerformance { hmat, ..Default::default() },
        caches: last_level_caches(found),
        interrupts: Default::default(),
    };
    topology.refresh_warnings();
    Ok(topology)
}

/// Per figure slot (read/write latency, read/write bandwidth): the value, and whether it came
/// from a generic attribute (which a specific one replaces).
type Figures = [(Option<u32>, bool); 4];

/// libhwloc's memory attributes of NUMA nodes as HMAT entries of class `hwloc`: for each
/// target node and initiator (a CPU set standing for the nodes whose CPUs lie inside it, or a
/// NUMA node object), the latency and bandwidth figures; generic `Latency`/`Bandwidth` fill
/// the read and write figures only where the specific ones are absent. By target, then
/// initiator nodes.
fn memory_attributes(hw: &hwlocality::Topology, nodes: &[Node]) -> Result<Vec<HmatAccess>, String> {
    use hwlocality::memory::attribute::Initiator;
    // (name, figure slots 0-3: read/write latency, read/write bandwidth, generic?)
    const ATTRIBUTES: [(&str, &[usize], bool); 6] = [
        ("Latency", &[0, 1], true),
        ("ReadLatency", &[0], false),
        ("WriteLatency", &[1], false),
        ("Bandwidth", &[2, 3], true),
        ("ReadBandwidth", &[2], false),
        ("WriteBandwidth", &[3], false),
    ];
    let mut groups: BTreeMap<(NodeId, Vec<NodeId>), Figures> = BTreeMap::new();
    for (name, slots, generic) in ATTRIBUTES {
        let Ok(Some(attribute)) = hw.memory_attribute_named(name) else { continue };
        for target in hw.objects_with_type(ObjectType::NUMANode) {
            let target_id = os_id(target, "a NUMA node", MAX_NODE_ID)?;
            let Ok((initiators, values)) = attribute.initiators(target) else { continue };
            for (initiator, value) in initiators.iter().zip(values) {
                let initiator_nodes: Vec<NodeId> = match initiator {
                    Initiator::CpuSet(set) => {
                        let cpus: CpuSet = id_set(Some(set.as_ref()), "an initiator")?;
                        nodes
                            .iter()
                            .filter(|n| !n.cpus.is_empty() && n.cpus.is_subset(&cpus))
                            .map(|n| n.id)
                            .collect()
                    }
                    Initiator::Object(obj) if obj.object_type() == ObjectType::NUMANode => {
                        vec![os_id(obj, "a NUMA node", MAX_NODE_ID)?]
                    }
                    Initiator::Object(_) => Vec::new(),
                };
                if initiator_nodes.is_empty() {
                    continue;
                }
                let number = u32::try_from(value).map_err(|_| {
                    format!("memory attribute `{name}` has value `{value}`, not a number")
                })?;
                let entry = groups.entry((target_id, initiator_nodes)).or_default();
                for &k in slots {
                    if entry[k].0.is_none() || (entry[k].1 && !generic) {
                        entry[k] = (Some(number).filter(|&v| v > 0), generic);
                    }
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|((node, initiators), f)| HmatAccess {
            node,
            class: AccessClass::Hwloc,
            initiators: initiators.into_iter().collect(),
            read_latency_ns: f[0].0,
            write_latency_ns: f[1].0,
            read_bandwidth_mb_s: f[2].0,
            write_bandwidth_mb_s: f[3].0,
        })
        .collect())
}

/// The NUMA latency matrix in the order of `nodes` (sorted by id); empty when the file has
/// none. A matrix that leaves out some node is refused rather than padded with guesses.
fn numa_distances(hw: &hwlocality::Topology, nodes: &[Node]) -> Result<Vec<Vec<u32>>, String> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let matrices = hw
        .distances_with_type(None, ObjectType::NUMANode)
        .map_err(|e| format!("cannot list its distance matrices ({e})"))?;
    // `NUMALatency` is the kernel's SLIT as hwloc names it; a user-added latency matrix is
    // the fallback, a bandwidth matrix never (its numbers grow where SLIT's shrink).
    let chosen = matrices
        .iter()
        .find(|d| d.name().is_some_and(|n| n.to_bytes() == b"NUMALatency"))
        .or_else(|| matrices.iter().find(|d| d.kind().contains(DistancesKind::MEANS_LATENCY)));
    let Some(matrix) = chosen else {
        return Ok(Vec::new());
    };
    let mut column = Vec::with_capacity(matrix.num_objects());
    for obj in matrix.objects() {
        let id =
            obj.map(|o| os_id(o, "a NUMA node in a distance matrix", MAX_NODE_ID)).transpose()?;
        column.push(id.and_then(|id| nodes.binary_search_by_key(&id, |n| n.id).ok()));
    }
    if let Some(missing) =
        nodes.iter().enumerate().find(|&(i, _)| !column.contains(&Some(i))).map(|(_, n)| n.id)
    {
        return Err(format!("its NUMA distance matrix leaves out node `{missing}`"));
    }
    let mut out = vec![vec![0u32; nodes.len()]; nodes.len()];
    let n = matrix.num_objects();
    for (k, &value) in matrix.distances().iter().enumerate() {
        let (Some(row), Some(col)) = (column[k / n], column[k % n]) else { continue };
        out[row][col] =
            u32::try_from(value).map_err(|_| format!("NUMA distance `{value}` is too large"))?;
    }
    Ok(out)
}

/// What placement cares about in an hwloc OS device: its type, refined by name and subtype
/// where hwloc 2.x lumps things together (NVMe and SATA are both "storage"; CUDA and OpenCL
/// devices are GPUs that hwloc calls co-processors).
fn device_kind(ty: OSDeviceType, name: &str, subtype: Option<&str>) -> DeviceKind {
    match ty {
        OSDeviceType::Network => DeviceKind::Nic,
        OSDeviceType::OpenFabrics => DeviceKind::Infiniband,
        OSDeviceType::Storage if name.starts_with("nvme") => DeviceKind::Nvme,
        OSDeviceType::Storage => DeviceKind::Disk,
        OSDeviceType::GPU => DeviceKind::Gpu,
        OSDeviceType::CoProcessor
            if subtype.is_some_and(|s| {
                ["CUDA", "OpenCL", "LevelZero"].iter().any(|g| s.eq_ignore_ascii_case(g))
            }) =>
        {
            DeviceKind::Gpu
        }
        _ => DeviceKind::Other,
    }
}

/// `0000:00:02.0` for a PCI device object, `None` for anything else.
fn pci_address(obj: &TopologyObject) -> Option<String> {
    match obj.attributes()? {
        ObjectAttributes::PCIDevice(pci) => Some(format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            pci.domain(),
            pci.bus_id(),
            pci.bus_device(),
            pci.function()
        )),
        _ => None,
    }
}

fn os_index_u32(obj: &TopologyObject) -> Option<u32> {
    obj.os_index().and_then(|i| u32::try_from(i).ok())
}

/// The OS index of an object that must have one that fits pinctl's ids.
fn os_id(obj: &TopologyObject, what: &str, max: u32) -> Result<u32, String> {
    let index = obj.os_index().ok_or_else(|| format!("{what} has no OS index"))?;
    u32::try_from(index)
        .ok()
        .filter(|&i| i <= max)
        .ok_or_else(|| format!("{what} has OS index `{index}`, above {max}"))
}

/// Copies an hwloc bitmap into an [`IdSet`]; a missing bitmap is the empty set.
fn id_set<K: IdKind, B: Borrow<Bitmap>>(set: Option<&B>, what: &str) -> Result<IdSet<K>, String> {
    let Some(set) = set else {
        return Ok(IdSet::new());
    };
    let set: &Bitmap = set.borrow();
    // An infinite bitmap (all bits set from some index on) cannot be a real set of CPUs.
    if set.weight().is_none() {
        return Err(format!("{what} is infinite"));
    }
    set.iter_set()
        .map(|i| {
            let i = usize::from(i);
            u32::try_from(i)
                .ok()
                .filter(|&i| i <= MAX_ID)
                .ok_or_else(|| format!("{what} holds id `{i}`, above {MAX_ID}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LATENCY: &str = r#"<distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>"#;
    const BANDWIDTH: &str = r#"<distances2 type="NUMANode" nbobjs="2" kind="10" name="Bandwidth" indexing="os">
    <indexes length="4">1 0 </indexes>
    <u64values length="20">9000 4000 4000 8000 </u64values>
  </distances2>"#;

    /// Two packages, one node and two PUs each, PUs 4-5 offline; an NVMe drive behind a PCI
    /// bridge on package 1 and a disk hwloc could not place, hung on the root.
    fn two_nodes(distances: &str) -> String {
        let pu = |i: u32| {
            format!(
                r#"<object type="PU" os_index="{i}" cpuset="{m:#x}" complete_cpuset="{m:#x}" gp_index="{g}"/>"#,
                m = 1u32 << i,
                g = 100 + i
            )
        };
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000003f" allowed_cpuset="0x00000007" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003" gp_index="1">
    <info name="OSRelease" value="6.1.0-test"/>
    <object type="Package" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" gp_index="3" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" gp_index="4">{pu0}{pu1}</object>
    </object>
    <object type="Package" os_index="1" cpuset="0xc" complete_cpuset="0xc" nodeset="0x2" complete_nodeset="0x2" gp_index="5">
      <object type="NUMANode" os_index="1" cpuset="0xc" complete_cpuset="0xc" nodeset="0x2" complete_nodeset="0x2" gp_index="6" local_memory="2147483648"/>
      <object type="Core" os_index="7" cpuset="0xc" complete_cpuset="0xc" nodeset="0x2" complete_nodeset="0x2" gp_index="7">{pu2}{pu3}</object>
      <object type="Bridge" gp_index="8" bridge_type="0-1" depth="0" bridge_pci="0000:[80-81]">
        <object type="PCIDev" gp_index="9" pci_busid="0000:81:00.0" pci_type="0108 [144d:a808] [144d:a801] 00" pci_link_speed="0.0">
          <object type="OSDev" gp_index="10" name="nvme1n1" subtype="Disk" osdev_type="0"/>
        </object>
      </object>
    </object>
    <object type="OSDev" gp_index="11" name="sda" subtype="Disk" osdev_type="0"/>
  </object>
  {distances}
</topology>
"#,
            pu0 = pu(0),
            pu1 = pu(1),
            pu2 = pu(2),
            pu3 = pu(3),
        )
    }

    fn load(xml: &str) -> Topology {
        topology_from_xml(xml, Path::new("test.xml")).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn maps_nodes_cpus_devices_and_host_facts() {
        let t = load(&two_nodes(LATENCY));
        assert_eq!(t.node_ids().to_string(), "0-1");
        let node1 = t.node(1).unwrap();
        assert_eq!((node1.cpus.to_string(), node1.memory_bytes), ("2-3".into(), Some(2 << 30)));
        assert_eq!(t.distances, vec![vec![10, 21], vec![21, 10]]);
        assert_eq!(t.cpus.iter().map(|c| c.id).collect::<CpuSet>().to_string(), "0-5");
        assert_eq!(t.online_cpus().to_string(), "0-3");
        let cpu3 = t.cpu(3).unwrap();
        assert_eq!((cpu3.package, cpu3.core, cpu3.node), (Some(1), Some(7), Some(1)));
        assert!(t.cpu(4).is_some_and(|c| !c.online && c.node.is_none()));
        // The cpuset the XML was exported under is a host fact, not a reason to drop CPU 3.
        assert_eq!(t.host.allowed_cpus.as_ref().map(ToString::to_string).as_deref(), Some("0-2"));
        assert_eq!(t.host.kernel.as_deref(), Some("6.1.0-test"));

        let names: Vec<&str> = t.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nvme1n1", "sda"]);
        let nvme = &t.devices[0];
        assert_eq!(nvme.pci.as_deref(), Some("0000:81:00.0"));
        assert_eq!(
            (nvme.kind, nvme.node, nvme.locality),
            (DeviceKind::Nvme, Some(1), Locality::Hwloc)
        );
        let sda = &t.devices[1];
        assert_eq!(
            (sda.kind, sda.pci.as_deref(), sda.locality),
            (DeviceKind::Disk, None, Locality::Unknown)
        );
        assert!(sda.nodes.is_empty() && sda.node.is_none());
        assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
        assert!(t.warnings[0].contains("`sda`"));
    }

    #[test]
    fn latency_is_preferred_and_bandwidth_never_used() {
        let both = format!("{BANDWIDTH}\n  {LATENCY}");
        // Both matrices really reach libhwloc, so the choice below is ours.
        let hw = hwlocality::Topology::builder().from_xml(&two_nodes(&both)).unwrap();
        let hw = hw.build().unwrap();
        assert_eq!(hw.distances_with_type(None, ObjectType::NUMANode).unwrap().len(), 2);
        assert_eq!(load(&two_nodes(&both)).distances, vec![vec![10, 21], vec![21, 10]]);
        assert!(load(&two_nodes(BANDWIDTH)).distances.is_empty());
        assert!(load(&two_nodes("")).distances.is_empty());
    }

    #[test]
    fn a_matrix_that_leaves_out_a_node_is_refused() {
        let package = |i: u32| {
            format!(
                r#"<object type="Package" os_index="{i}" cpuset="{m:#x}" complete_cpuset="{m:#x}" nodeset="{m:#x}" complete_nodeset="{m:#x}" gp_index="{g}">
      <object type="NUMANode" os_index="{i}" cpuset="{m:#x}" complete_cpuset="{m:#x}" nodeset="{m:#x}" complete_nodeset="{m:#x}" gp_index="{g1}" local_memory="4096"/>
      <object type="PU" os_index="{i}" cpuset="{m:#x}" complete_cpuset="{m:#x}" nodeset="{m:#x}" complete_nodeset="{m:#x}" gp_index="{g2}"/>
    </object>"#,
                m = 1u32 << i,
                g = 10 * i + 10,
                g1 = 10 * i + 11,
                g2 = 10 * i + 12
            )
        };
        let xml = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x7" complete_cpuset="0x7" allowed_cpuset="0x7" nodeset="0x7" complete_nodeset="0x7" allowed_nodeset="0x7" gp_index="1">
    {}
    {}
    {}
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 2 </indexes>
    <u64values length="12">10 20 20 10 </u64values>
  </distances2>
</topology>
"#,
            package(0),
            package(1),
            package(2)
        );
        let err = topology_from_xml(&xml, Path::new("partial.xml")).expect_err("accepted");
        assert_eq!(
            err.to_string(),
            "hwloc XML `partial.xml`: its NUMA distance matrix leaves out node `1`"
        );
    }

    #[test]
    fn a_device_on_the_root_of_a_one_node_machine_is_on_that_node() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x1" complete_cpuset="0x1" allowed_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" allowed_nodeset="0x1" gp_index="1">
    <object type="NUMANode" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" gp_index="2"/>
    <object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1" nodeset="0x1" complete_nodeset="0x1" gp_index="3"/>
    <object type="OSDev" gp_index="4" name="eth0" osdev_type="2"/>
  </object>
</topology>
"#;
        let t = load(xml);
        let eth0 = t.device("eth0").unwrap();
        assert_eq!(
            (eth0.kind, eth0.node, eth0.locality),
            (DeviceKind::Nic, Some(0), Locality::Hwloc)
        );
        // No local_memory attribute: unknown, not zero.
        assert_eq!(t.nodes[0].memory_bytes, None);
        assert!(t.nodes[0].has_cpu && t.nodes[0].has_memory);
        assert!(t.cpu(0).is_some_and(|c| c.online && c.package.is_none() && c.core.is_none()));
        assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    }

    #[test]
    fn the_linked_libhwloc_is_2_x() {
        assert!(libhwloc_api_version().starts_with("2."), "{}", libhwloc_api_version());
    }

    #[test]
    fn storage_is_nvme_only_by_name() {
        assert_eq!(device_kind(OSDeviceType::Storage, "nvme0n1", Some("Disk")), DeviceKind::Nvme);
        assert_eq!(device_kind(OSDeviceType::Storage, "nvme0c0n1", None), DeviceKind::Nvme);
        assert_eq!(device_kind(OSDeviceType::Storage, "sda", Some("Disk")), DeviceKind::Disk);
        assert_eq!(device_kind(OSDeviceType::Storage, "pmem0.1", Some("NVM")), DeviceKind::Disk);
    }

    #[test]
    fn network_fabrics_gpus_and_the_rest() {
        assert_eq!(device_kind(OSDeviceType::Network, "eth0", None), DeviceKind::Nic);
        assert_eq!(device_kind(OSDeviceType::Network, "ib0", None), DeviceKind::Nic);
        assert_eq!(device_kind(OSDeviceType::OpenFabrics, "mlx5_0", None), DeviceKind::Infiniband);
        assert_eq!(device_kind(OSDeviceType::GPU, "card0", None), DeviceKind::Gpu);
        assert_eq!(device_kind(OSDeviceType::GPU, "nvml0", Some("NVML")), DeviceKind::Gpu);
        assert_eq!(device_kind(OSDeviceType::CoProcessor, "cuda0", Some("CUDA")), DeviceKind::Gpu);
        assert_eq!(
            device_kind(OSDeviceType::CoProcessor, "opencl0d1", Some("OpenCL")),
            DeviceKind::Gpu
        );
        let vector_engine = device_kind(OSDeviceType::CoProcessor, "ve0", Some("VectorEngine"));
        assert_eq!(vector_engine, DeviceKind::Other);
        assert_eq!(device_kind(OSDeviceType::CoProcessor, "mic0", Some("MIC")), DeviceKind::Other);
        assert_eq!(device_kind(OSDeviceType::DMA, "dma0chan0", None), DeviceKind::Other);
    }
}
