//! Every hwloc XML among the shared fixtures, read through libhwloc and through pinctl's own
//! reader (`pinctl-hwloc-xml`, the one the installed pinctl uses), each compared with the
//! fixture's `oracle/summary*.json` (a digest of the same XML written by other tools), and the
//! two readers' topologies compared with each other field by field.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use pinctl_hwloc::read_hwloc_xml;
use pinctl_hwloc_xml::read_hwloc_xml as read_in_rust;
use pinctl_topology::{CpuSet, DeviceKind, Locality, NodeSet, Topology};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/topologies")
}

/// (fixture, XML, digest of that XML). G09 and G10 ship only the XML; G01-G08 are sysfs
/// captures whose hwloc 2.9.0 XML was generated next to the oracle.
const CASES: &[(&str, &str, &str)] = &[
    ("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G02-hwloc-kunpeng920-2s-4n", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G03-hwloc-power7-8n-sparse", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G04-hwloc-cascadelake-snc2-2lm", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G05-hwloc-memory-only-and-cpu-only-nodes", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G06-hwloc-offline-cpu0-and-node0", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G07-hwloc-opteron-8n-cgroup-v1-cpuset", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    (
        "G07-hwloc-opteron-8n-cgroup-v1-cpuset",
        "oracle/hwloc-2.9.0-allow-all.xml",
        "oracle/summary-allow-all.json",
    ),
    ("G08-utillinux-epyc7451-2s-8n", "oracle/hwloc-2.9.0.xml", "oracle/summary.json"),
    ("G09-mpibind-epyc7401-corona-8n-nvme-ib", "raw/epyc-corona.xml", "oracle/summary.json"),
    ("G10-flux-xeon8480-snc4-2s-8n-nics", "raw/ipa20.xml", "oracle/summary.json"),
];

/// hwloc 3's own exports (format 3.0, which libhwloc 2 refuses), read by pinctl's reader only,
/// against the digests of hwloc master's output.
const FORMAT_3_CASES: &[(&str, &str, &str)] = &[
    (
        "G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax",
        "oracle/32em64t-2n8c+dax+nvme+mic+dimms.xml",
        "oracle/summary-upstream.json",
    ),
    (
        "G07-hwloc-opteron-8n-cgroup-v1-cpuset",
        "oracle/16amd64-8n2c-cpusets-xml.xml",
        "oracle/summary-upstream.json",
    ),
];

/// Which implementation reads the XML.
#[derive(Debug, Clone, Copy)]
enum Reader {
    Libhwloc,
    Rust,
}

const READERS: [Reader; 2] = [Reader::Libhwloc, Reader::Rust];

fn read_with(reader: Reader, fixture: &str, xml: &str) -> Result<Topology> {
    let path = fixtures().join(fixture).join(xml);
    let read = match reader {
        Reader::Libhwloc => read_hwloc_xml(&path).map_err(anyhow::Error::from),
        Reader::Rust => read_in_rust(&path).map_err(anyhow::Error::from),
    };
    read.with_context(|| format!("{reader:?}: {fixture}/{xml}"))
}

/// Both readers' topology of one fixture, which must be the same.
fn read(fixture: &str, xml: &str) -> Result<Topology> {
    let by_libhwloc = read_with(Reader::Libhwloc, fixture, xml)?;
    let in_rust = read_with(Reader::Rust, fixture, xml)?;
    ensure!(by_libhwloc == in_rust, "{fixture}/{xml}: the readers disagree");
    Ok(in_rust)
}

fn oracle(fixture: &str, summary: &str) -> Result<Value> {
    let path = fixtures().join(fixture).join(summary);
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    Ok(serde_json::from_str(&text)?)
}

fn str_of<'v>(v: &'v Value, key: &str) -> Result<&'v str> {
    v[key].as_str().with_context(|| format!("oracle `{key}` is not a string: {v}"))
}

fn ids(v: &Value) -> Result<NodeSet> {
    let list = v.as_array().with_context(|| format!("not an id list: {v}"))?;
    list.iter()
        .map(|i| i.as_u64().and_then(|i| u32::try_from(i).ok()).with_context(|| format!("id {i}")))
        .collect()
}

/// The device kind the oracle's hwloc vocabulary implies.
fn expected_kind(dev: &Value) -> Result<DeviceKind> {
    let kinds: BTreeSet<&str> =
        dev["kinds"].as_array().context("kinds")?.iter().filter_map(Value::as_str).collect();
    let subtype = dev["subtype"].as_str().unwrap_or("");
    let name = str_of(dev, "name")?;
    Ok(if kinds.contains("openfabrics") {
        DeviceKind::Infiniband
    } else if kinds.contains("network") {
        DeviceKind::Nic
    } else if kinds.contains("storage") {
        if name.starts_with("nvme") { DeviceKind::Nvme } else { DeviceKind::Disk }
    } else if kinds.contains("gpu") || (kinds.contains("coproc") && !subtype.is_empty()) {
        ensure!(
            ["", "CUDA", "OpenCL", "NVML", "RSMI", "LevelZero"].contains(&subtype),
            "no expectation for subtype `{subtype}`"
        );
        DeviceKind::Gpu
    } else {
        DeviceKind::Other
    })
}

fn check(reader: Reader, fixture: &str, xml: &str, summary: &str) -> Result<()> {
    let t = read_with(reader, fixture, xml)?;
    let o = oracle(fixture, summary)?;

    // Nodes: ids ascending, locality CPU sets, MemTotal.
    let o_nodes = o["numa_nodes"].as_array().context("numa_nodes")?;
    let ids_read: Vec<u32> = t.nodes.iter().map(|n| n.id).collect();
    let ids_oracle: Vec<u32> = o_nodes
        .iter()
        .map(|n| n["os_index"].as_u64().map(|i| i as u32).context("os_index"))
        .collect::<Result<_>>()?;
    let mut sorted = ids_oracle.clone();
    sorted.sort_unstable();
    ensure!(ids_read == sorted, "node ids {ids_read:?}, oracle {ids_oracle:?}");
    for on in o_nodes {
        let id = on["os_index"].as_u64().context("os_index")? as u32;
        let node = t.node(id).context("node")?;
        let cpus: CpuSet = str_of(on, "local_cpus")?.parse()?;
        ensure!(node.cpus == cpus, "node {id}: cpus {} != oracle {cpus}", node.cpus);
        ensure!(
            node.memory_bytes == on["local_memory_bytes"].as_u64(),
            "node {id}: memory {:?} != oracle {}",
            node.memory_bytes,
            on["local_memory_bytes"]
        );
        ensure!(node.memory_free_bytes.is_none() && node.has_memory, "node {id} memory facts");
    }
    ensure!(
        t.node_ids() == ids(&o["allowed_nodes"])?.union(&t.node_ids()),
        "allowed nodes outside the model"
    );

    // CPUs: every CPU the XML knows of; online = hwloc's PUs; the cpuset goes to host facts.
    let pus: CpuSet = str_of(&o, "pus")?.parse()?;
    let complete: CpuSet = str_of(&o, "complete_cpus")?.parse()?;
    let allowed: CpuSet = str_of(&o, "allowed_cpus")?.parse()?;
    ensure!(t.online_cpus() == pus, "online {} != oracle PUs {pus}", t.online_cpus());
    let known: CpuSet = t.cpus.iter().map(|c| c.id).collect();
    ensure!(known == complete.union(&pus), "known CPUs {known} != oracle {complete}");
    ensure!(t.cpus.windows(2).all(|w| w[0].id < w[1].id), "cpus not ascending");
    ensure!(t.host.allowed_cpus.as_ref() == Some(&allowed), "allowed cpus");
    ensure!(t.host.allowed_nodes == Some(ids(&o["allowed_nodes"])?), "allowed nodes");
    for cpu in &t.cpus {
        // Every fixture's hwloc tree has a Core above each PU (POWER7's packages have no
        // index, so `package` may be unknown); CPUs outside the tree have neither.
        ensure!(cpu.online == cpu.core.is_some(), "cpu {} core", cpu.id);
        ensure!(cpu.online || cpu.package.is_none(), "cpu {} package", cpu.id);
        if let Some(n) = cpu.node {
            ensure!(t.node(n).is_some_and(|n| n.cpus.contains(cpu.id)), "cpu {} node", cpu.id);
        } else {
            // Only CPUs outside every node's locality may lack a node.
            ensure!(t.nodes.iter().all(|n| !n.cpus.contains(cpu.id)), "cpu {} has no node", cpu.id);
        }
    }
    // hwloc counts objects; the model keeps their OS indexes, which can repeat (G05's fake
    // core ids) or be absent (POWER7 packages), and a package may hold no allowed CPU (G07).
    let counts = &o["counts"];
    let count = |key: &str| counts[key].as_u64().with_context(|| format!("count {key}"));
    let packages: BTreeSet<u32> = t.cpus.iter().filter_map(|c| c.package).collect();
    let cores: BTreeSet<(Option<u32>, u32)> =
        t.cpus.iter().filter_map(|c| Some((c.package, c.core?))).collect();
    ensure!(packages.len() as u64 <= count("Package")?, "{} packages", packages.len());
    ensure!(!cores.is_empty() && cores.len() as u64 <= count("Core")?, "{} cores", cores.len());

    // Distances: the NUMALatency matrix, re-ordered to follow `nodes`.
    let matrices = o["numa_distances"].as_array().context("numa_distances")?;
    match matrices.iter().find(|m| m["name"] == "NUMALatency") {
        None => ensure!(t.distances.is_empty(), "distances without an oracle matrix"),
        Some(m) => {
            let order: Vec<u32> = m["node_os_indexes"]
                .as_array()
                .context("node_os_indexes")?
                .iter()
                .map(|i| i.as_u64().map(|i| i as u32).context("index"))
                .collect::<Result<_>>()?;
            ensure!(t.distances.len() == t.nodes.len(), "distance rows");
            for (i, a) in order.iter().enumerate() {
                for (j, b) in order.iter().enumerate() {
                    let want = m["matrix"][i][j].as_u64().context("distance")?;
                    ensure!(
                        t.distance(*a, *b).map(u64::from) == Some(want),
                        "distance {a}->{b}: {:?} != oracle {want}",
                        t.distance(*a, *b)
                    );
                }
            }
        }
    }

    // Devices: every OS device, with its PCI function, kind and local nodes.
    let o_devs = o["io_devices"].as_array().context("io_devices")?;
    ensure!(
        t.devices.len() == o_devs.len(),
        "{} devices, oracle {}",
        t.devices.len(),
        o_devs.len()
    );
    ensure!(t.devices.windows(2).all(|w| w[0].name <= w[1].name), "devices not by name");
    for od in o_devs {
        let name = str_of(od, "name")?;
        let d = t.device(name).with_context(|| format!("device `{name}` missing"))?;
        ensure!(d.pci.as_deref() == od["pci_busid"].as_str(), "{name}: pci {:?}", d.pci);
        ensure!(d.kind == expected_kind(od)?, "{name}: kind {:?}", d.kind);
        let local = ids(&od["local_numa_nodes"])?;
        // Hung on the root of a multi-node machine = hwloc did not know where it is.
        let on_root = str_of(od, "attached_to")?.starts_with("Machine");
        if on_root && t.nodes.len() > 1 {
            ensure!(d.nodes.is_empty() && d.node.is_none(), "{name}: nodes {}", d.nodes);
            ensure!(d.locality == Locality::Unknown, "{name}: locality {:?}", d.locality);
            ensure!(
                t.warnings.iter().any(|w| w.contains(&format!("`{name}` has unknown locality"))),
                "{name}: no warning"
            );
        } else {
            ensure!(d.nodes == local, "{name}: nodes {} != oracle {local}", d.nodes);
            ensure!(d.locality == Locality::Hwloc, "{name}: locality {:?}", d.locality);
            let single = if local.len() == 1 { local.first() } else { None };
            ensure!(d.node == single, "{name}: node {:?}", d.node);
        }
    }

    // Host facts: only what hwloc records.
    ensure!(t.host.kernel.as_deref() == o["info"]["OSRelease"].as_str(), "kernel");
    ensure!(t.host.numa_balancing.is_none() && t.host.zone_reclaim_mode.is_none(), "sysctls");
    ensure!(t.warnings == pinctl_topology::host_warnings(&t), "warnings not refreshed");

    // The model round-trips through the `--json` contract.
    let json = serde_json::to_string(&t)?;
    ensure!(serde_json::from_str::<Topology>(&json)? == t, "json round trip");
    Ok(())
}

#[test]
fn every_fixture_xml_matches_its_oracle() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for reader in READERS {
        for &(fixture, xml, summary) in CASES {
            match check(reader, fixture, xml, summary) {
                Ok(()) => checked += 1,
                Err(e) => failures.push(format!("{reader:?}: {fixture}/{xml}: {e:#}")),
            }
        }
    }
    for &(fixture, xml, summary) in FORMAT_3_CASES {
        match check(Reader::Rust, fixture, xml, summary) {
            Ok(()) => checked += 1,
            Err(e) => failures.push(format!("Rust: {fixture}/{xml}: {e:#}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(checked, 2 * CASES.len() + FORMAT_3_CASES.len());
}

/// The reader the installed pinctl uses gives exactly libhwloc's answer on every XML libhwloc
/// reads: nodes, CPUs, distances, devices, host facts and warnings, compared whole.
#[test]
fn the_rust_reader_equals_libhwloc_on_every_fixture() {
    let mut failures = Vec::new();
    for &(fixture, xml, _) in CASES {
        let (a, b) = match (
            read_with(Reader::Libhwloc, fixture, xml),
            read_with(Reader::Rust, fixture, xml),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                failures.push(format!("{fixture}/{xml}: {:?} / {:?}", a.err(), b.err()));
                continue;
            }
        };
        if a != b {
            let (a, b) = (
                serde_json::to_string_pretty(&a).unwrap_or_default(),
                serde_json::to_string_pretty(&b).unwrap_or_default(),
            );
            let first = a.lines().zip(b.lines()).position(|(x, y)| x != y).unwrap_or(0);
            failures.push(format!(
                "{fixture}/{xml}: differ from line {first}: libhwloc `{}`, Rust `{}`",
                a.lines().nth(first).unwrap_or(""),
                b.lines().nth(first).unwrap_or("")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_generated_fixture_xml_is_covered() -> Result<()> {
    for entry in std::fs::read_dir(fixtures())? {
        let dir = entry?.path();
        let fixture = dir.file_name().and_then(|n| n.to_str()).context("name")?.to_string();
        if dir.join("oracle/hwloc-2.9.0.xml").exists() {
            ensure!(
                CASES.iter().any(|c| c.0 == fixture && c.1 == "oracle/hwloc-2.9.0.xml"),
                "{fixture} has an hwloc 2.9.0 XML that no case reads"
            );
        }
    }
    Ok(())
}

#[test]
fn corona_places_storage_and_fabric_on_different_nodes() -> Result<()> {
    let t = read("G09-mpibind-epyc7401-corona-8n-nvme-ib", "raw/epyc-corona.xml")?;
    let nvme = t.device("nvme0n1").context("nvme0n1")?;
    assert_eq!(
        (nvme.kind, nvme.node, nvme.pci.as_deref()),
        (DeviceKind::Nvme, Some(0), Some("0000:01:00.0"))
    );
    let hsi = t.device("hsi0").context("hsi0")?;
    assert_eq!((hsi.kind, hsi.node), (DeviceKind::Nic, Some(3)));
    let hca = t.device("mlx5_0").context("mlx5_0")?;
    assert_eq!((hca.kind, hca.node), (DeviceKind::Infiniband, Some(3)));
    assert_eq!(t.device("opencl0d2").map(|d| (d.kind, d.node)), Some((DeviceKind::Gpu, Some(5))));
    assert_eq!(t.distance(3, 0), Some(16));
    assert_eq!(t.distance(3, 4), Some(32));
    assert_eq!(t.host.kernel.as_deref(), Some("3.10.0-1062.12.1.1chaos.ch6.x86_64"));
    assert_eq!(t.package_count(), 2);
    assert_eq!(t.cpu(48).map(|c| (c.package, c.node)), Some((Some(0), Some(0))));
    Ok(())
}

#[test]
fn ipa_keeps_the_multipath_name_and_leaves_sda_unplaced() -> Result<()> {
    let t = read("G10-flux-xeon8480-snc4-2s-8n-nics", "raw/ipa20.xml")?;
    let nvme = t.device("nvme0c0n1").context("nvme0c0n1")?;
    assert_eq!((nvme.kind, nvme.node), (DeviceKind::Nvme, Some(3)));
    assert_eq!(t.device("ibp94s0").map(|d| (d.kind, d.node)), Some((DeviceKind::Nic, Some(1))));
    assert_eq!(t.device("nvml0").map(|d| (d.kind, d.node)), Some((DeviceKind::Gpu, Some(3))));
    let sda = t.device("sda").context("sda")?;
    assert_eq!((sda.kind, sda.locality, sda.node), (DeviceKind::Disk, Locality::Unknown, None));
    assert!(sda.nodes.is_empty());
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    assert!(t.warnings[0].contains("`sda` has unknown locality"));
    Ok(())
}

#[test]
fn memory_nodes_attached_beside_cpus_keep_their_locality() -> Result<()> {
    // hwloc drops the kernel's CPU-only nodes 0-3 and shows the memory nodes with the CPUs
    // near them: a CPU's node is its die's DRAM node, never the package-wide NVDIMM node.
    let t = read("G05-hwloc-memory-only-and-cpu-only-nodes", "oracle/hwloc-2.9.0.xml")?;
    assert_eq!(t.node_ids().to_string(), "5-10");
    assert_eq!(t.cpu(0).and_then(|c| c.node), Some(5));
    assert_eq!(t.cpu(6).and_then(|c| c.node), Some(9));
    let nvdimm = t.node(7).context("node 7")?;
    assert_eq!(nvdimm.cpus.to_string(), "0-1,4-5");
    assert!(!nvdimm.has_cpu && nvdimm.has_memory);
    assert!(t.node(5).is_some_and(|n| n.has_cpu));
    Ok(())
}

#[test]
fn offline_cpus_stay_known_but_offline() -> Result<()> {
    let t = read("G06-hwloc-offline-cpu0-and-node0", "oracle/hwloc-2.9.0.xml")?;
    assert_eq!(t.node_ids().to_string(), "1");
    assert_eq!(t.online_cpus().to_string(), "4-20");
    assert_eq!(t.cpus.len(), 24);
    let cpu0 = t.cpu(0).context("cpu 0")?;
    assert!(!cpu0.online && cpu0.node.is_none() && cpu0.package.is_none());
    // Online, but in the socket whose node is offline: no node to call its own.
    assert_eq!(t.cpu(4).map(|c| (c.online, c.node)), Some((true, None)));
    assert_eq!(t.cpu(5).and_then(|c| c.node), Some(1));
    assert!(t.distances.is_empty());
    Ok(())
}

#[test]
fn cpuset_restriction_lands_in_host_facts() -> Result<()> {
    let all = read("G07-hwloc-opteron-8n-cgroup-v1-cpuset", "oracle/hwloc-2.9.0-allow-all.xml")?;
    assert_eq!(all.node_ids().to_string(), "0-7");
    assert_eq!(all.host.allowed_nodes.as_ref().map(ToString::to_string).as_deref(), Some("0-7"));
    assert_eq!(all.cpu(4).map(|c| c.online), Some(false));
    let cut = read("G07-hwloc-opteron-8n-cgroup-v1-cpuset", "oracle/hwloc-2.9.0.xml")?;
    assert_eq!(cut.node_ids().to_string(), "1-4");
    assert_eq!(
        cut.host.allowed_cpus.as_ref().map(ToString::to_string).as_deref(),
        Some("0-3,5-6,12-15")
    );
    assert!(cut.node(4).is_some_and(|n| n.cpus.is_empty() && !n.has_cpu));
    Ok(())
}

#[test]
fn a_dump_without_meminfo_or_distances_reads_as_unknown() -> Result<()> {
    let t = read("G08-utillinux-epyc7451-2s-8n", "oracle/hwloc-2.9.0.xml")?;
    assert_eq!(t.nodes.len(), 8);
    assert!(t.nodes.iter().all(|n| n.memory_bytes.is_none()));
    assert!(t.distances.is_empty());
    Ok(())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[test]
fn a_missing_file_is_named() {
    let path = fixtures().join("no-such-topology.xml");
    let err = read_hwloc_xml(&path).expect_err("missing file read");
    let msg = error_chain(&err);
    assert!(msg.contains(&format!("`{}`", path.display())), "{msg}");
    assert!(msg.contains("No such file"), "{msg}");
}

#[test]
fn malformed_xml_is_refused_naming_the_file() -> Result<()> {
    let good =
        std::fs::read(fixtures().join("G06-hwloc-offline-cpu0-and-node0/oracle/hwloc-2.9.0.xml"))?;
    let cases: [(&str, &[u8], &str); 5] = [
        ("truncated.xml", &good[..good.len() / 2], "libhwloc accepts"),
        ("empty.xml", b"", "libhwloc accepts"),
        ("html.xml", b"<?xml version=\"1.0\"?>\n<html><body/></html>\n", "libhwloc accepts"),
        ("latin1.xml", b"<?xml version=\"1.0\"?>\n<topology \xe9/>", "not UTF-8"),
        (
            "v3.xml",
            b"<?xml version=\"1.0\"?>\n<topology version=\"3.0\">\n<object type=\"Bogus\"/>\n</topology>\n",
            "format 3.x, written by hwloc 3",
        ),
    ];
    let dir = tempfile::tempdir()?;
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes)?;
        let Err(err) = read_hwloc_xml(&path) else { bail!("{name} was accepted") };
        let msg = error_chain(&err);
        assert!(msg.contains(&format!("`{}`", path.display())), "{name}: {msg}");
        assert!(msg.contains(expected), "{name}: {msg}");
    }
    // A directory is not a file either.
    let dir = fixtures();
    let msg = error_chain(&read_hwloc_xml(&dir).expect_err("directory read"));
    assert!(msg.contains(&format!("cannot read hwloc XML `{}`", dir.display())), "{msg}");
    Ok(())
}

/// hwloc's memory attributes are the kernel's `access1` figures: G05's sysfs capture read by
/// pinctl-sysfs and the XML hwloc 2.9 wrote from that same capture, read by libhwloc and by
/// pinctl's reader, give every memory node the same figures for the same initiator CPUs.
/// (hwloc drops the CPU-only nodes 0-3, so in the XML the CPUs of an initiator belong to the
/// memory node hwloc attached to them: the initiator is compared as CPUs, not node ids.)
#[test]
fn memory_attributes_equal_the_kernel_s_cpu_access_class() -> Result<()> {
    use pinctl_topology::AccessClass;
    let fixture = "G05-hwloc-memory-only-and-cpu-only-nodes";
    let xml = read(fixture, "oracle/hwloc-2.9.0.xml")?;
    let raw = fixtures().join(fixture).join("raw/fakememinitiators-1np2c+1npp+gi.tar.bz2");
    let sysfs = pinctl_capture::read_tarball(&raw)?;
    let strip = |t: &Topology, class: AccessClass| {
        t.memory_performance
            .hmat
            .iter()
            .filter(|a| a.class == class)
            .map(|a| {
                let cpus = t.cpus_of(&a.initiators).to_string();
                let figures = (
                    a.read_latency_ns,
                    a.write_latency_ns,
                    a.read_bandwidth_mb_s,
                    a.write_bandwidth_mb_s,
                );
                (a.node, cpus, figures)
            })
            .collect::<Vec<_>>()
    };
    let from_xml = strip(&xml, AccessClass::Hwloc);
    ensure!(from_xml.len() == 6, "{from_xml:#?}");
    ensure!(from_xml == strip(&sysfs, AccessClass::Access1), "{from_xml:#?}");
    Ok(())
}

#[test]
fn sapphire_rapids_rates_each_sub_numa_node_for_its_own_cpus() -> Result<()> {
    let t = read("G10-flux-xeon8480-snc4-2s-8n-nics", "raw/ipa20.xml")?;
    let hmat = &t.memory_performance.hmat;
    ensure!(hmat.len() == 8, "{hmat:#?}");
    for a in hmat {
        ensure!(a.initiators == std::iter::once(a.node).collect(), "{a:?}");
        ensure!(
            (a.read_latency_ns, a.write_latency_ns, a.read_bandwidth_mb_s, a.write_bandwidth_mb_s)
                == (Some(91), Some(91), Some(262_100), Some(176_100)),
            "{a:?}"
        );
    }
    Ok(())
}
