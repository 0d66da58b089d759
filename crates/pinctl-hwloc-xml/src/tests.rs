use super::*;
use std::path::Path;

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
    assert_eq!((nvme.kind, nvme.node, nvme.locality), (DeviceKind::Nvme, Some(1), Locality::Hwloc));
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
fn hostile_shapes_are_refused_before_any_parser_sees_them() {
    assert_eq!(check_shape(&two_nodes(LATENCY)), Ok(()));
    let deep = format!(
        "<topology version=\"2.0\">{}{}</topology>",
        "<object type=\"Group\">".repeat(20_000),
        "</object>".repeat(20_000)
    );
    let e = check_shape(&deep).unwrap_err();
    assert!(e.contains("deeper than 256"), "{e}");
    let flat = format!("<topology>{}</topology>", "<info name=\"a\" value=\"b\"/>".repeat(20_000));
    assert_eq!(check_shape(&flat), Ok(()), "self-closing elements do not nest");
    let huge = two_nodes(LATENCY).replacen("os_index=\"3\"", "os_index=\"4294967000\"", 1);
    let e = check_shape(&huge).unwrap_err();
    assert!(e.contains("`os_index` `4294967000`"), "{e}");
    let long = two_nodes(LATENCY).replacen(
        "cpuset=\"0x0000000f\"",
        &format!("cpuset=\"0x{}\"", "f".repeat(40_000)),
        1,
    );
    assert!(check_shape(&long).unwrap_err().contains("longer than 32768 bytes"));
    // Through the file reader, as `--topology` uses it.
    let dir = std::env::temp_dir().join(format!("pinctl-hwloc-xml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("deep.xml");
    std::fs::write(&file, &deep).unwrap();
    let e = read_hwloc_xml(&file).unwrap_err();
    assert!(matches!(e, HwlocXmlError::Refused { .. }), "{e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn latency_is_preferred_and_bandwidth_never_used() {
    let both = format!("{BANDWIDTH}\n  {LATENCY}");
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
    assert_eq!((eth0.kind, eth0.node, eth0.locality), (DeviceKind::Nic, Some(0), Locality::Hwloc));
    // No local_memory attribute: unknown, not zero.
    assert_eq!(t.nodes[0].memory_bytes, None);
    assert!(t.nodes[0].has_cpu && t.nodes[0].has_memory);
    assert!(t.cpu(0).is_some_and(|c| c.online && c.package.is_none() && c.core.is_none()));
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[test]
fn format_version_is_read_from_the_root_element() {
    let v2 = "<?xml version=\"1.0\"?>\n<!DOCTYPE topology>\n<topology version=\"2.0\">";
    assert_eq!(xml_format_major(v2), Some(2));
    assert_eq!(xml_format_major("<topology version='3.0'>"), Some(3));
    assert_eq!(xml_format_major("<topology>"), None);
    assert_eq!(xml_format_major("<html version=\"3.0\">"), None);
}

#[test]
fn storage_is_nvme_only_by_name() {
    assert_eq!(device_kind(Format::V2, 0, "nvme0n1", Some("Disk")), DeviceKind::Nvme);
    assert_eq!(device_kind(Format::V2, 0, "nvme0c0n1", None), DeviceKind::Nvme);
    assert_eq!(device_kind(Format::V2, 0, "sda", Some("Disk")), DeviceKind::Disk);
    assert_eq!(device_kind(Format::V2, 0, "pmem0.1", Some("NVM")), DeviceKind::Disk);
}

#[test]
fn network_fabrics_gpus_and_the_rest() {
    assert_eq!(device_kind(Format::V2, 2, "eth0", None), DeviceKind::Nic);
    assert_eq!(device_kind(Format::V2, 2, "ib0", None), DeviceKind::Nic);
    assert_eq!(device_kind(Format::V2, 3, "mlx5_0", None), DeviceKind::Infiniband);
    assert_eq!(device_kind(Format::V2, 1, "card0", None), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V2, 1, "nvml0", Some("NVML")), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V2, 5, "cuda0", Some("CUDA")), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V2, 5, "opencl0d1", Some("OpenCL")), DeviceKind::Gpu);
    let vector_engine = device_kind(Format::V2, 5, "ve0", Some("VectorEngine"));
    assert_eq!(vector_engine, DeviceKind::Other);
    assert_eq!(device_kind(Format::V2, 5, "mic0", Some("MIC")), DeviceKind::Other);
    assert_eq!(device_kind(Format::V2, 4, "dma0chan0", None), DeviceKind::Other);
}

#[test]
fn hwloc_3_numbers_device_types_as_bits() {
    assert_eq!(device_kind(Format::V3, 1, "nvme0n1", Some("Disk")), DeviceKind::Nvme);
    assert_eq!(device_kind(Format::V3, 1, "sda", None), DeviceKind::Disk);
    assert_eq!(device_kind(Format::V3, 4, "card0", None), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V3, 8, "cuda0", Some("CUDA")), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V3, 16, "eth0", None), DeviceKind::Nic);
    // An InfiniBand port that is also a network interface is the fabric first.
    assert_eq!(device_kind(Format::V3, 48, "ib0", None), DeviceKind::Infiniband);
    assert_eq!(device_kind(Format::V3, 64, "dma0chan0", None), DeviceKind::Other);
    // The same number means something else in each format.
    assert_eq!(device_kind(Format::V2, 1, "card0", None), DeviceKind::Gpu);
    assert_eq!(device_kind(Format::V3, 2, "dax0.0", None), DeviceKind::Other);
}

#[test]
fn bitmaps_read_as_hwloc_prints_them() {
    let set = |s| id_set::<pinctl_topology::CpuKind>(Some(s), "a set").map(|s| s.to_string());
    assert_eq!(set("0x0").unwrap(), "");
    assert_eq!(set("0x000000ff").unwrap(), "0-7");
    assert_eq!(set("0x00000001,0x80000000").unwrap(), "31-32");
    // hwloc writes a word of zeroes as nothing.
    assert_eq!(set("0x000000fc,,0x00fc0000").unwrap(), "18-23,66-71");
    assert!(set("").is_err());
    assert!(set("0x1,0xg").is_err());
    assert!(set("0xf...f").unwrap_err().contains("infinite"));
    assert!(set("0xf...f,0x00000001").unwrap_err().contains("infinite"));
    assert!(set("0xzz").unwrap_err().contains("not an hwloc bitmap"));
    // Bit 65536 is above every id pinctl accepts: refused, not allocated.
    let far = format!("0x1{}", ",0x0".repeat(2048));
    assert!(set(&far).unwrap_err().contains("above 65535"), "{far:.20}");
    assert_eq!(id_set::<pinctl_topology::NodeKind>(None, "none").unwrap().len(), 0);
}

#[test]
fn hwloc_1_and_foreign_documents_are_refused_by_name() {
    let v1 = "<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc.dtd\">\n<topology>\n  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\"/>\n</topology>\n";
    let e = topology_from_xml(v1, Path::new("old.xml")).unwrap_err().to_string();
    assert!(e.contains("`old.xml`") && e.contains("hwloc 1.x"), "{e}");
    let e = topology_from_xml("<html version=\"2.0\"/>", Path::new("page.xml")).unwrap_err();
    assert!(e.to_string().contains("`<html>`"), "{e}");
    let e = topology_from_xml("<topology version=\"9.0\"/>", Path::new("new.xml")).unwrap_err();
    assert!(e.to_string().contains("format `9`"), "{e}");
    let e = topology_from_xml("<topology version=\"2.0\">", Path::new("cut.xml")).unwrap_err();
    assert!(matches!(e, HwlocXmlError::Malformed { .. }), "{e:?}");
    let e = topology_from_xml("<topology version=\"2.0\"/>", Path::new("empty.xml")).unwrap_err();
    assert!(e.to_string().contains("holds no object"), "{e}");
}

#[test]
fn a_matrix_indexed_by_gp_index_is_read_through_the_nodes() {
    let gp = LATENCY.replace("indexing=\"os\"", "indexing=\"gp\"").replace(">0 1 <", ">6 3 <");
    let t = load(&two_nodes(&gp));
    // gp 6 is node 1 and gp 3 node 0: the matrix is read in that order.
    assert_eq!(t.distances, vec![vec![10, 21], vec![21, 10]]);
    let skew = r#"<distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="gp">
    <indexes length="4">6 3 </indexes>
    <u64values length="12">10 30 20 10 </u64values>
  </distances2>"#;
    assert_eq!(load(&two_nodes(skew)).distances, vec![vec![10, 20], vec![30, 10]]);
    let short = LATENCY.replace("10 21 21 10", "10 21 21");
    let e = topology_from_xml(&two_nodes(&short), Path::new("short.xml")).unwrap_err();
    assert!(e.to_string().contains("3 values, not 2x2"), "{e}");
}

proptest::proptest! {
    /// Whatever a file holds, the reader answers with a topology or an error naming the file;
    /// it never panics.
    #[test]
    fn mangled_exports_never_panic(cut in 0usize..4000, byte in 0u8..128, at in 0usize..4000) {
        let mut xml = two_nodes(LATENCY).into_bytes();
        let at = at % xml.len();
        xml[at] = byte;
        xml.truncate(xml.len() - cut % xml.len());
        if let Ok(xml) = std::str::from_utf8(&xml) {
            if let Err(e) = topology_from_xml(xml, Path::new("mangled.xml")) {
                proptest::prop_assert!(e.to_string().contains("mangled.xml"));
            }
        }
    }
}
