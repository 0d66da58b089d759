//! Reads an hwloc XML topology (what `lstopo --of xml` or `hwloc-gather-topology` writes on a
//! fleet host) into pinctl's model, in Rust, so that the installed static pinctl reads the files
//! operators have without linking libhwloc (which cannot be linked statically: libudev ships no
//! static library) and without slowing `pinctl exec`, which never reads XML.
//!
//! hwloc's XML is a plain export of its object tree: every object carries its OS index and its
//! CPU and node sets as attributes, so nothing needs to be recomputed the way libhwloc's import
//! does. The reader follows what the libhwloc-based reader in `pinctl-hwloc` produces, and the
//! tests there hold the two equal on every hwloc XML among the shared fixtures. It reads format
//! 2.x (hwloc 2) and 3.x (hwloc 3, which libhwloc 2 refuses), not 1.x (hwloc 1 laid NUMA nodes
//! out in the CPU tree and wrote distances as relative floats): such a file is refused, named.
//!
//! Like `pinctl-hwloc`, it translates hwloc's view only: no sysfs, no probing of this machine,
//! no facts hwloc does not record (free memory, `numa_balancing`, offline nodes).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use pinctl_topology::{
    Cache, Cpu, CpuSet, Device, DeviceKind, HostFacts, IdKind, IdSet, Locality, MAX_CPU_ID, MAX_ID,
    MAX_NODE_ID, Node, NodeId, NodeSet, SchemaVersion, Topology, last_level_caches,
};
use roxmltree::{Document, Node as XmlNode, ParsingOptions};

mod memattrs;

/// Largest hwloc XML file read: 64 MiB (`lstopo --of xml` of a machine with 8192 CPUs and
/// every PCI device is a few MiB).
pub const MAX_XML_BYTES: usize = 64 << 20;

/// Deepest element nesting accepted. A real export nests Machine, Package, Die, caches, Core,
/// PU and PCI bridges some 20 deep; libhwloc recurses per level and overflows its stack on
/// documents nested tens of thousands deep, so deeper documents are refused by [`check_shape`]
/// before any parser sees them.
pub const MAX_XML_DEPTH: usize = 256;

/// Longest attribute value accepted: a bitmap of [`MAX_CPU_ID`] + 1 bits prints in about
/// 23 KiB (`0xffffffff,` per 32 bits); libhwloc sizes bitmaps by what they say.
pub const MAX_XML_ATTRIBUTE_BYTES: usize = 32 << 10;

/// Most XML nodes (elements, attributes' owners, text) one document may hold: a 64 MiB export
/// holds well under a million; the cap bounds the parser's memory on a crafted file.
const MAX_XML_NODES: u32 = 4_000_000;

/// Why an hwloc XML topology could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum HwlocXmlError {
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
    /// The file is not well-formed XML.
    #[error("`{}` is not well-formed XML", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: roxmltree::Error,
    },
    /// Shaped beyond pinctl's limits (nesting, an attribute, an OS index): refused before it
    /// is parsed into a tree.
    #[error("hwloc XML `{}`: {what}", path.display())]
    Refused { path: PathBuf, what: String },
    /// Well-formed XML that is not an hwloc topology pinctl reads, or one that describes
    /// something pinctl's model cannot hold.
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
pub fn read_hwloc_xml(path: &Path) -> Result<Topology, HwlocXmlError> {
    let bytes = pinctl_trust::read_regular(path, MAX_XML_BYTES)
        .map_err(|source| HwlocXmlError::Read { path: path.to_path_buf(), source })?;
    let xml = std::str::from_utf8(&bytes)
        .map_err(|source| HwlocXmlError::NotUtf8 { path: path.to_path_buf(), source })?;
    topology_from_xml(xml, path)
}

/// Parses an XML document already in memory; `path` only names it in errors.
pub fn topology_from_xml(xml: &str, path: &Path) -> Result<Topology, HwlocXmlError> {
    check_shape(xml).map_err(|what| HwlocXmlError::Refused { path: path.to_path_buf(), what })?;
    let options =
        ParsingOptions { allow_dtd: true, nodes_limit: MAX_XML_NODES, ..Default::default() };
    let doc = Document::parse_with_options(xml, options)
        .map_err(|source| HwlocXmlError::Malformed { path: path.to_path_buf(), source })?;
    convert(&doc).map_err(|what| HwlocXmlError::Unusable { path: path.to_path_buf(), what })
}

/// Refuses what no parser must be handed: nesting deeper than [`MAX_XML_DEPTH`], an attribute
/// value longer than [`MAX_XML_ATTRIBUTE_BYTES`], an `os_index` above [`MAX_CPU_ID`]. A
/// lexical scan, no tree: it allocates nothing. libhwloc gets the same check in `pinctl-hwloc`.
pub fn check_shape(xml: &str) -> Result<(), String> {
    let b = xml.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'<') {
        let start = i + off + 1;
        match b.get(start) {
            Some(b'/') => depth = depth.saturating_sub(1),
            Some(b'?' | b'!') => {}
            _ => depth += 1,
        }
        if depth > MAX_XML_DEPTH {
            return Err(format!("elements nest deeper than {MAX_XML_DEPTH} levels"));
        }
        // The rest of the tag: attributes up to the closing `>` outside quotes.
        let mut j = start;
        let mut quote: Option<(u8, usize)> = None;
        while let Some(&c) = b.get(j) {
            match quote {
                Some((q, from)) if c == q => {
                    let value = &xml[from..j];
                    if value.len() > MAX_XML_ATTRIBUTE_BYTES {
                        return Err(format!(
                            "an attribute value is longer than {MAX_XML_ATTRIBUTE_BYTES} bytes"
                        ));
                    }
                    let name = xml[..from - 1].trim_end_matches([' ', '=']);
                    if name.ends_with("os_index") {
                        let index = value.trim();
                        if index.parse::<u64>().map_or(true, |v| v > u64::from(MAX_CPU_ID)) {
                            return Err(format!(
                                "`os_index` `{}` is not an id up to {MAX_CPU_ID}",
                                pinctl_topology::text::shown(index)
                            ));
                        }
                    }
                    quote = None;
                }
                Some(_) => {}
                None if c == b'"' || c == b'\'' => quote = Some((c, j + 1)),
                None if c == b'>' => break,
                None => {}
            }
            j += 1;
        }
        if j >= 1 && b.get(j) == Some(&b'>') && b[j - 1] == b'/' && depth > 0 {
            depth -= 1; // `<x/>` opens and closes
        }
        i = j.min(b.len());
        if i >= b.len() {
            break;
        }
    }
    Ok(())
}

/// Major number of `<topology version="N.M">` (the root element, right after the prologue).
pub fn xml_format_major(xml: &str) -> Option<u32> {
    let rest = &xml[xml.find("<topology")?..];
    let rest = &rest[rest.find("version=")? + "version=".len()..];
    let rest = rest.strip_prefix(['"', '\''])?;
    rest[..rest.find(|c: char| !c.is_ascii_digit())?].parse().ok()
}

/// The XML format versions this reader knows: hwloc 2's and hwloc 3's. They differ, for
/// pinctl, only in how an OS device's type is numbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    V2,
    V3,
}

/// One `<object>` as pinctl needs it. hwloc's I/O objects (bridges, PCI functions, OS devices)
/// never carry CPU or node sets; every other object does.
struct Object<'a, 'input> {
    element: XmlNode<'a, 'input>,
}

impl<'a, 'input> Object<'a, 'input> {
    fn kind(&self) -> &'a str {
        self.element.attribute("type").unwrap_or("")
    }

    fn is_io(&self) -> bool {
        matches!(self.kind(), "Bridge" | "PCIDev" | "OSDev")
    }

    fn attr(&self, name: &str) -> Option<&'a str> {
        self.element.attribute(name)
    }

    fn parent(&self) -> Option<Object<'a, 'input>> {
        self.element.parent_element().filter(is_object).map(|element| Object { element })
    }

    /// The objects above this one, nearest first.
    fn ancestors(&self) -> impl Iterator<Item = Object<'a, 'input>> {
        self.element.ancestors().skip(1).filter(is_object).map(|element| Object { element })
    }

    /// The OS index of an object that must have one that fits pinctl's ids.
    fn os_id(&self, what: &str, max: u32) -> Result<u32, String> {
        let index = self.attr("os_index").ok_or_else(|| format!("{what} has no OS index"))?;
        index
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&i| i <= max)
            .ok_or_else(|| format!("{what} has OS index `{}`, above {max}", shown(index)))
    }

    /// The OS index when it has one that fits a `u32`.
    fn os_index(&self) -> Option<u32> {
        self.attr("os_index")?.trim().parse().ok()
    }

    fn info(&self, name: &str) -> Option<&'a str> {
        self.element
            .children()
            .find(|c| c.has_tag_name("info") && c.attribute("name") == Some(name))
            .and_then(|c| c.attribute("value"))
    }
}

fn is_object(n: &XmlNode<'_, '_>) -> bool {
    n.has_tag_name("object")
}

fn shown(s: &str) -> String {
    pinctl_topology::text::shown(s).to_string()
}

/// Translates a parsed hwloc export; errors are messages that [`HwlocXmlError::Unusable`]
/// wraps.
fn convert(doc: &Document<'_>) -> Result<Topology, String> {
    let top = doc.root_element();
    if !top.has_tag_name("topology") {
        return Err(format!(
            "its root element is `<{}>`, not hwloc's `<topology>`",
            shown(top.tag_name().name())
        ));
    }
    let format = format_of(top)?;
    let root = top
        .children()
        .find(is_object)
        .map(|element| Object { element })
        .ok_or("it holds no object (an hwloc export starts with the Machine)")?;
    let objects: Vec<Object<'_, '_>> =
        top.descendants().filter(is_object).map(|element| Object { element }).collect();
    let Nodes { mut nodes, subtyped, gp_to_node } = numa_nodes(&objects)?;
    let online: CpuSet = id_set(root.attr("cpuset"), "the topology's CPU set")?;
    let cpus = pus(&root, &objects, &online, &nodes, &subtyped)?;
    for node in &mut nodes {
        node.has_cpu = cpus.iter().any(|c| c.online && c.node == Some(node.id));
    }
    let distances = numa_distances(top, &nodes, &gp_to_node)?;
    let hmat = memattrs::memory_attributes(top, &nodes, &gp_to_node)?;
    let devices = os_devices(&objects, format, nodes.len() > 1)?;
    let host = host_facts(top, &root, &online)?;
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
        caches: caches(&objects, &online)?,
        interrupts: Default::default(),
    };
    topology.refresh_warnings();
    Ok(topology)
}

/// The XML format of the document whose root element is `top`: 2.x or 3.x, else why not.
fn format_of(top: XmlNode<'_, '_>) -> Result<Format, String> {
    match top.attribute("version").map(|v| v.split('.').next().unwrap_or("")) {
        Some("2") => Ok(Format::V2),
        Some("3") => Ok(Format::V3),
        None => Err("it is hwloc 1.x's XML format (no `version`), which pinctl does not read; \
                     export it again with hwloc 2 or later (`lstopo --of xml`) or capture the \
                     machine with `pinctl topology --capture`"
            .into()),
        Some(v) => Err(format!("it is hwloc XML format `{}`; pinctl reads 2.x and 3.x", shown(v))),
    }
}

/// hwloc's NUMA nodes, by id, and what else the file says of them.
struct Nodes<'a> {
    nodes: Vec<Node>,
    /// The nodes hwloc gave a subtype (an NVDIMM, CXL or HBM node: not a CPU's own).
    subtyped: Vec<NodeId>,
    /// Each node by hwloc's global index, which distances and memory attributes use.
    gp_to_node: HashMap<&'a str, NodeId>,
}

fn numa_nodes<'a>(objects: &[Object<'a, '_>]) -> Result<Nodes<'a>, String> {
    let mut nodes = Vec::new();
    let mut subtyped = Vec::new();
    let mut gp_to_node = HashMap::new();
    for obj in objects.iter().filter(|o| o.kind() == "NUMANode") {
        let id = obj.os_id("a NUMA node", MAX_NODE_ID)?;
        let cpus = id_set(obj.attr("cpuset"), "the CPU set of a NUMA node")?;
        // libhwloc reads the attribute as a byte count and reports 0 as "unknown".
        let memory_bytes = obj
            .attr("local_memory")
            .map(|m| {
                m.trim().parse::<u64>().map_err(|_| {
                    format!("NUMA node `{id}` has local memory `{}`, not a byte count", shown(m))
                })
            })
            .transpose()?
            .filter(|&m| m > 0);
        nodes.push(Node {
            id,
            cpus,
            memory_bytes,
            memory_free_bytes: None,
            has_cpu: false,
            // hwloc keeps a NUMA node only as a memory target (it drops the kernel's
            // memoryless nodes), even when the dump it came from lacked meminfo.
            has_memory: true,
        });
        if obj.attr("subtype").is_some() {
            subtyped.push(id);
        }
        if let Some(gp) = obj.attr("gp_index") {
            gp_to_node.insert(gp.trim(), id);
        }
    }
    nodes.sort_by_key(|n| n.id);
    if let Some(w) = nodes.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(format!("NUMA node `{}` appears twice", w[0].id));
    }
    Ok(Nodes { nodes, subtyped, gp_to_node })
}

/// Every CPU the file knows of (`complete_cpuset`), each PU with its package, core and node;
/// those absent from hwloc's tree come out offline.
fn pus(
    root: &Object<'_, '_>,
    objects: &[Object<'_, '_>],
    online: &CpuSet,
    nodes: &[Node],
    subtyped: &[NodeId],
) -> Result<Vec<Cpu>, String> {
    let known: CpuSet = match root.attr("complete_cpuset") {
        Some(set) => id_set(Some(set), "the topology's complete CPU set")?,
        None => online.clone(),
    };
    let mut cpus: Vec<Cpu> = known
        .union(online)
        .iter()
        .map(|id| Cpu { id, online: false, package: None, core: None, node: None })
        .collect();
    for pu in objects.iter().filter(|o| o.kind() == "PU") {
        let id = pu.os_id("a PU", MAX_CPU_ID)?;
        let Ok(i) = cpus.binary_search_by_key(&id, |c| c.id) else {
            return Err(format!("PU `{id}` lies outside the topology's complete CPU set"));
        };
        let ancestor_index =
            |ty: &str| pu.ancestors().find(|a| a.kind() == ty).and_then(|a| a.os_index());
        cpus[i] = Cpu {
            id,
            online: online.contains(id),
            package: ancestor_index("Package"),
            core: ancestor_index("Core"),
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

/// hwloc's OS devices, each on the nodes of its nearest non-I/O ancestor.
fn os_devices(
    objects: &[Object<'_, '_>],
    format: Format,
    many_nodes: bool,
) -> Result<Vec<Device>, String> {
    let mut devices = Vec::new();
    for obj in objects.iter().filter(|o| o.kind() == "OSDev") {
        let name = obj.attr("name").ok_or("an OS device has no name")?.to_string();
        let ty = obj
            .attr("osdev_type")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("OS device `{}` has no device type", shown(&name)))?;
        let mut device = Device {
            kind: device_kind(format, ty, &name, obj.attr("subtype")),
            pci: obj.ancestors().find(|a| a.kind() == "PCIDev").and_then(|a| pci_address(&a)),
            name,
            node: None,
            nodes: NodeSet::new(),
            locality: Locality::Unknown,
            members: Vec::new(),
            aliases: Vec::new(),
        };
        // hwloc hangs a device whose locality it could not learn (numa_node -1 and no
        // local_cpus) on the root; on a single-node machine that still means that node.
        let anchor =
            obj.ancestors().find(|a| !a.is_io()).filter(|a| !many_nodes || a.parent().is_some());
        if let Some(anchor) = anchor {
            let local: NodeSet =
                id_set(anchor.attr("nodeset"), "the node set of a device's parent")?;
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

/// What the file says of the host: its kernel and what this process was allowed.
fn host_facts(
    top: XmlNode<'_, '_>,
    root: &Object<'_, '_>,
    online: &CpuSet,
) -> Result<HostFacts, String> {
    let allowed_cpus = match root.attr("allowed_cpuset") {
        Some(set) => id_set(Some(set), "the allowed CPU set")?,
        None => online.clone(),
    };
    let allowed_nodes = match root.attr("allowed_nodeset") {
        Some(set) => id_set(Some(set), "the allowed node set")?,
        None => id_set(root.attr("nodeset"), "the topology's node set")?,
    };
    let host = HostFacts {
        // hwloc 2 writes the root's infos inside the Machine object; hwloc 3 may write some
        // at the end of `<topology>`.
        kernel: root
            .info("OSRelease")
            .or_else(|| {
                top.children()
                    .find(|c| c.has_tag_name("info") && c.attribute("name") == Some("OSRelease"))
                    .and_then(|c| c.attribute("value"))
            })
            .map(str::to_string),
        numa_balancing: None,
        zone_reclaim_mode: None,
        allowed_cpus: Some(allowed_cpus),
        allowed_nodes: Some(allowed_nodes),
        offline_nodes: NodeSet::new(),
        // hwloc records no MemTotal of the machine, nor what its kernel's policies are.
        memory_bytes: None,
        memory_policies: None,
    };
    Ok(host)
}

/// The last-level caches: hwloc's data and unified cache objects (`L3Cache`, ...; not the
/// instruction caches `L1iCache`, ..., nor the memory-side `MemCache`), each CPU in the
/// highest-level one holding it. The level is the object's `depth` attribute, as libhwloc reads
/// it, or the digit of its type.
fn caches(objects: &[Object<'_, '_>], online: &CpuSet) -> Result<Vec<Cache>, String> {
    let mut found = Vec::new();
    for obj in objects {
        let kind = obj.kind();
        let Some(digit) = kind.strip_prefix('L').and_then(|k| k.strip_suffix("Cache")) else {
            continue;
        };
        let Ok(named_level) = digit.parse::<u8>() else { continue };
        let level = match obj.attr("depth") {
            Some(depth) => depth.trim().parse::<u8>().map_err(|_| {
                format!("a `{}` has depth `{}`, not a cache level", shown(kind), shown(depth))
            })?,
            None => named_level,
        };
        // libhwloc reads `cache_type` 2 as an instruction cache whatever the object's type.
        if obj.attr("cache_type").map(str::trim) == Some("2") {
            continue;
        }
        let cpus =
            id_set::<pinctl_topology::CpuKind>(obj.attr("cpuset"), "the CPU set of a cache")?
                .intersection(online);
        let size_bytes =
            obj.attr("cache_size").and_then(|s| s.trim().parse::<u64>().ok()).filter(|&s| s > 0);
        if !cpus.is_empty() && level > 0 {
            found.push(Cache { level, cpus, size_bytes });
        }
    }
    Ok(last_level_caches(found))
}

/// The NUMA latency matrix in the order of `nodes` (sorted by id); empty when the file has
/// none. A matrix that leaves out some node is refused rather than padded with guesses.
fn numa_distances(
    top: XmlNode<'_, '_>,
    nodes: &[Node],
    gp_to_node: &HashMap<&str, NodeId>,
) -> Result<Vec<Vec<u32>>, String> {
    if nodes.is_empty() {
        return Ok(Vec::new());
    }
    let matrices: Vec<XmlNode<'_, '_>> = top
        .children()
        .filter(|c| c.has_tag_name("distances2") && c.attribute("type") == Some("NUMANode"))
        .collect();
    // `NUMALatency` is the kernel's SLIT as hwloc names it; a user-added latency matrix is
    // the fallback, a bandwidth matrix never (its numbers grow where SLIT's shrink).
    const MEANS_LATENCY: u64 = 1 << 2;
    let kind = |m: &XmlNode<'_, '_>| {
        m.attribute("kind").and_then(|k| k.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    let chosen = matrices
        .iter()
        .find(|m| m.attribute("name") == Some("NUMALatency"))
        .or_else(|| matrices.iter().find(|m| kind(m) & MEANS_LATENCY != 0));
    let Some(matrix) = chosen else {
        return Ok(Vec::new());
    };
    let n: usize = matrix
        .attribute("nbobjs")
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n <= nodes.len())
        .ok_or("its NUMA distance matrix has no object count that fits its nodes")?;
    let by_gp = matrix.attribute("indexing") == Some("gp");
    let words = |tag: &'static str| matrix_words(*matrix, tag);
    let mut column = Vec::with_capacity(n);
    for index in words("indexes") {
        let id = if by_gp {
            *gp_to_node.get(index).ok_or_else(|| {
                format!("its NUMA distance matrix names object `{}`, not a NUMA node", shown(index))
            })?
        } else {
            index
                .parse::<u32>()
                .ok()
                .filter(|&i| i <= MAX_NODE_ID)
                .ok_or_else(|| format!("its NUMA distance matrix names node `{}`", shown(index)))?
        };
        if column.len() == n {
            return Err(format!("its NUMA distance matrix lists more than its {n} objects"));
        }
        column.push(nodes.binary_search_by_key(&id, |node| node.id).ok());
    }
    if column.len() != n {
        return Err(format!("its NUMA distance matrix lists {} of its {n} objects", column.len()));
    }
    if let Some(missing) =
        nodes.iter().enumerate().find(|&(i, _)| !column.contains(&Some(i))).map(|(_, n)| n.id)
    {
        return Err(format!("its NUMA distance matrix leaves out node `{missing}`"));
    }
    let values = words("u64values").count();
    if values != n * n {
        return Err(format!("its NUMA distance matrix holds {values} values, not {n}x{n}"));
    }
    let mut out = vec![vec![0u32; nodes.len()]; nodes.len()];
    for (k, value) in words("u64values").enumerate() {
        let value: u64 = value
            .parse()
            .map_err(|_| format!("NUMA distance `{}` is not a number", shown(value)))?;
        let (Some(row), Some(col)) = (column[k / n], column[k % n]) else { continue };
        out[row][col] =
            u32::try_from(value).map_err(|_| format!("NUMA distance `{value}` is too large"))?;
    }
    Ok(out)
}

/// The whitespace-separated words of every `<tag>` child of a distance matrix, in order: hwloc
/// splits long value lists over several elements.
fn matrix_words<'a>(matrix: XmlNode<'a, '_>, tag: &'static str) -> impl Iterator<Item = &'a str> {
    matrix
        .children()
        .filter(move |c| c.has_tag_name(tag))
        .flat_map(|c| c.text().unwrap_or("").split_ascii_whitespace())
}

/// What placement cares about in an hwloc OS device: its type, refined by name and subtype
/// where hwloc lumps things together (NVMe and SATA are both "storage"; CUDA and OpenCL devices
/// are GPUs that hwloc calls co-processors). hwloc 2 numbers the types 0-5; hwloc 3 makes them
/// bits, so that one device may be two things (an InfiniBand port that is also a network
/// interface is 48).
fn device_kind(format: Format, ty: u64, name: &str, subtype: Option<&str>) -> DeviceKind {
    #[derive(PartialEq)]
    enum Ty {
        Storage,
        Gpu,
        Network,
        OpenFabrics,
        CoProcessor,
        Other,
    }
    let ty = match (format, ty) {
        (Format::V2, 0) => Ty::Storage,
        (Format::V2, 1) => Ty::Gpu,
        (Format::V2, 2) => Ty::Network,
        (Format::V2, 3) => Ty::OpenFabrics,
        (Format::V2, 5) => Ty::CoProcessor,
        (Format::V2, _) => Ty::Other,
        // hwloc 3: STORAGE 1, MEMORY 2, GPU 4, COPROC 8, NETWORK 16, OPENFABRICS 32, DMA 64.
        (Format::V3, t) if t & 32 != 0 => Ty::OpenFabrics,
        (Format::V3, t) if t & 16 != 0 => Ty::Network,
        (Format::V3, t) if t & 1 != 0 => Ty::Storage,
        (Format::V3, t) if t & 4 != 0 => Ty::Gpu,
        (Format::V3, t) if t & 8 != 0 => Ty::CoProcessor,
        (Format::V3, _) => Ty::Other,
    };
    match ty {
        Ty::Network => DeviceKind::Nic,
        Ty::OpenFabrics => DeviceKind::Infiniband,
        Ty::Storage if name.starts_with("nvme") => DeviceKind::Nvme,
        Ty::Storage => DeviceKind::Disk,
        Ty::Gpu => DeviceKind::Gpu,
        Ty::CoProcessor
            if subtype.is_some_and(|s| {
                ["CUDA", "OpenCL", "LevelZero"].iter().any(|g| s.eq_ignore_ascii_case(g))
            }) =>
        {
            DeviceKind::Gpu
        }
        Ty::CoProcessor | Ty::Other => DeviceKind::Other,
    }
}

/// `0000:00:02.0` for a PCI function's `pci_busid`, normalised as libhwloc prints it.
fn pci_address(obj: &Object<'_, '_>) -> Option<String> {
    let busid = obj.attr("pci_busid")?.trim();
    let (domain, rest) = busid.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |s: &str, max: u32| u32::from_str_radix(s, 16).ok().filter(|&v| v <= max);
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain, 0xffff)?,
        hex(bus, 0xff)?,
        hex(device, 0x1f)?,
        hex(function, 0x7)?
    ))
}

/// An hwloc bitmap attribute (`0x000000ff,0xffffffff`: 32-bit words, most significant first,
/// a word of zeroes possibly written as nothing (`0x000000fc,,0x00fc0000`); `0xf...f` in front
/// for a set that goes on forever) as an [`IdSet`]; a missing attribute is
/// the empty set. Ids above [`MAX_ID`] are refused before anything is allocated for them.
fn id_set<K: IdKind>(text: Option<&str>, what: &str) -> Result<IdSet<K>, String> {
    let Some(text) = text else {
        return Ok(IdSet::new());
    };
    let text = text.trim();
    if text.starts_with("0xf...f") {
        return Err(format!("{what} is infinite"));
    }
    let words: Vec<&str> = text.split(',').collect();
    let mut ids = Vec::new();
    for (k, word) in words.iter().rev().enumerate() {
        let digits = word.trim().strip_prefix("0x").unwrap_or(word.trim());
        if digits.is_empty() && words.len() > 1 {
            continue;
        }
        let value = u32::from_str_radix(digits, 16)
            .map_err(|_| format!("{what} `{}` is not an hwloc bitmap", shown(text)))?;
        for bit in 0..32u64 {
            if value & (1 << bit) != 0 {
                let id = k as u64 * 32 + bit;
                let id = u32::try_from(id)
                    .ok()
                    .filter(|&i| i <= MAX_ID)
                    .ok_or_else(|| format!("{what} holds id `{id}`, above {MAX_ID}"))?;
                ids.push(id);
            }
        }
    }
    Ok(ids.into_iter().collect())
}

#[cfg(test)]
mod tests;
