//! `pinctl topology` run as a program: human output (insta snapshots), the JSON contract of
//! docs/topology.md, every `--topology` source kind, `--capture`, and its errors.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

use crate::support::{pinctl, root};

const SHARED: &str = "../shared/fixtures/topologies";

fn run(args: &[&str]) -> Output {
    pinctl().args(args).output().unwrap()
}

fn ok(args: &[&str]) -> String {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pinctl {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "pinctl {args:?} should fail with 1");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

/// The one tarball of a shared fixture, relative to the repository root.
fn shared_tarball(id: &str) -> String {
    let raw = root().join(SHARED).join(id).join("raw");
    let name = std::fs::read_dir(&raw)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.contains(".tar"))
        .unwrap();
    format!("{SHARED}/{id}/raw/{name}")
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).unwrap()
}

#[test]
fn human_output_of_a_two_node_xeon_with_devices() {
    let t = shared_tarball("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax");
    insta::assert_snapshot!("g01_xeon", ok(&["topology", "--topology", &t]));
}

#[test]
fn human_output_of_memory_only_and_cpu_only_nodes() {
    let t = shared_tarball("G05-hwloc-memory-only-and-cpu-only-nodes");
    insta::assert_snapshot!("g05_memory_only", ok(&["topology", "--topology", &t]));
}

#[test]
fn human_output_of_offline_cpus_and_node() {
    let t = shared_tarball("G06-hwloc-offline-cpu0-and-node0");
    insta::assert_snapshot!("g06_offline", ok(&["topology", "--topology", &t]));
}

#[test]
fn human_output_of_nvme_multipath() {
    let t = shared_tarball("G11-libnvme-power-nvme-multipath");
    insta::assert_snapshot!("g11_multipath", ok(&["topology", "--topology", &t]));
}

#[test]
fn human_output_of_stacked_devices_bonds_and_vlans() {
    let out = ok(&["topology", "--topology", "tests/fixtures/sysfs/stacked-2n"]);
    insta::assert_snapshot!("stacked_2n", out);
}

/// The keys and shapes docs/topology.md promises.
#[test]
fn json_contract() {
    let v = json(&["topology", "--topology", "tests/fixtures/sysfs/stacked-2n", "--json"]);
    let node0 = &v["nodes"][0];
    assert_eq!(node0["id"], 0);
    assert_eq!(node0["cpus"], "0-1");
    assert_eq!(node0["memory_bytes"], 8u64 << 30);
    assert_eq!(v["distances"], serde_json::json!([[10, 20], [20, 10]]));
    let devices = v["devices"].as_array().unwrap();
    let names: Vec<&str> = devices.iter().map(|d| d["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "devices are sorted by name");
    let nvme = devices.iter().find(|d| d["name"] == "nvme1n1").unwrap();
    assert_eq!(
        (&nvme["kind"], &nvme["node"], &nvme["pci"]),
        (&"nvme".into(), &1.into(), &"0000:80:02.0".into())
    );
    let md0 = devices.iter().find(|d| d["name"] == "md0").unwrap();
    assert_eq!(md0["node"], Value::Null, "several nodes: no single node");
    assert_eq!(md0["locality"], "members");
    let sdc = devices.iter().find(|d| d["name"] == "sdc").unwrap();
    assert_eq!((&sdc["node"], &sdc["locality"]), (&Value::Null, &"unknown".into()));
    assert!(v["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("sdc")));
    assert_eq!(v.get("caches"), None, "a tree without cache folders has no `caches`");

    // A dump without meminfo: memory_bytes is null; without distance files: no matrix.
    let t = shared_tarball("G08-utillinux-epyc7451-2s-8n");
    let v = json(&["topology", "--topology", &t, "--json"]);
    assert_eq!(v["nodes"][0]["memory_bytes"], Value::Null);
    assert_eq!(v["nodes"][0]["cpus"], "0-5,48-53");
    assert_eq!(v["distances"], serde_json::json!([]));
    // Its CCXs: three cores (six CPUs) sharing an 8 MiB L3, from `shared_cpu_map`.
    assert_eq!(
        v["caches"][0],
        serde_json::json!({"level": 3, "cpus": "0-2,48-50", "size_bytes": 8u64 << 20})
    );
    assert_eq!(v["caches"].as_array().unwrap().len(), 16);

    // Sparse ids: rows and columns follow the order of `nodes`.
    let t = shared_tarball("G03-hwloc-power7-8n-sparse");
    let v = json(&["topology", "--topology", &t, "--json"]);
    let ids: Vec<u64> =
        v["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(v["distances"][2][2], 10, "node 4 to itself");
}

#[test]
fn json_snapshots_round_trip_exactly() {
    let t = shared_tarball("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax");
    let first = ok(&["topology", "--topology", &t, "--json"]);
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("g01.json");
    std::fs::write(&snap, &first).unwrap();
    let again = ok(&["topology", "--topology", snap.to_str().unwrap(), "--json"]);
    assert_eq!(again, first);
    let human_from_snapshot = ok(&["topology", "--topology", snap.to_str().unwrap()]);
    assert!(human_from_snapshot.contains("ib0 (nic 0000:82:00.0)"), "{human_from_snapshot}");
}

fn without_memory_figures(mut v: Value) -> Value {
    for n in v["nodes"].as_array_mut().unwrap() {
        n["memory_bytes"] = Value::Null;
        n["memory_free_bytes"] = Value::Null;
    }
    // Interrupts keep firing between two reads, and the kernel may deliver one elsewhere.
    if let Some(irqs) = v["interrupts"]["irqs"].as_array_mut() {
        for irq in irqs {
            irq["fired"] = Value::Null;
            irq["effective_affinity"] = Value::Null;
        }
    }
    v
}

/// A capture of this machine, read back with `--topology`, describes this machine (memory
/// figures and interrupt counts aside: they move between two runs).
#[test]
fn capture_of_the_live_machine_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("here.tar.gz");
    let msg = ok(&["topology", "--capture", cap.to_str().unwrap()]);
    assert!(msg.starts_with("captured "), "{msg}");
    let mut live = json(&["topology", "--json"]);
    let back = json(&["topology", "--topology", cap.to_str().unwrap(), "--json"]);
    // The kernel's policies are probed on the machine pinctl runs on, never read from a capture.
    assert!(live["host"]["memory_policies"].is_object(), "{live}");
    assert_eq!(back["host"]["memory_policies"], Value::Null);
    live["host"]["memory_policies"] = Value::Null;
    assert_eq!(without_memory_figures(back), without_memory_figures(live));
}

/// The live topology says which newer memory policies the kernel accepts, and another
/// machine's topology says it was not probed.
#[test]
fn the_live_kernel_policies_are_probed() {
    let live = json(&["topology", "--json"]);
    let support = &live["host"]["memory_policies"];
    // Weighted interleave and its weights folder came with the same kernel series (6.9): the
    // folder says what the probe must find.
    let weighted = std::path::Path::new("/sys/kernel/mm/mempolicy/weighted_interleave").is_dir();
    assert_eq!(support["weighted_interleave"], Value::Bool(weighted), "{support}");
    let text = ok(&["topology"]);
    let line = text.lines().find(|l| l.starts_with("memory policies: ")).unwrap_or_default();
    let said = if weighted { "weighted-interleave yes" } else { "weighted-interleave no" };
    assert!(line.contains(said) && line.contains("preferred-many "), "{text}");
    let other =
        ok(&["topology", "--topology", &shared_tarball("G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax")]);
    assert!(other.contains("memory policies: not probed"), "{other}");
}

#[test]
fn live_output_names_every_online_node() {
    let out = ok(&["topology"]);
    assert!(out.starts_with("topology of the live machine\n"), "{out}");
    let online: pinctl_topology::NodeSet =
        std::fs::read_to_string("/sys/devices/system/node/online").unwrap().trim().parse().unwrap();
    for id in online.iter() {
        assert!(out.contains(&format!("node {id} cpus: ")), "{out}");
    }
}

#[test]
fn bad_sources_fail_with_a_reason() {
    let e = fails(&["topology", "--topology", "no/such/dir"]);
    assert!(e.contains("`no/such/dir` does not exist"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let bad: PathBuf = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"nodes\": [ }").unwrap();
    let e = fails(&["topology", "--topology", bad.to_str().unwrap()]);
    assert!(e.contains("is not a pinctl topology snapshot") && e.contains("line 1"), "{e}");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = fails(&["topology", "--topology", empty.to_str().unwrap()]);
    assert!(e.contains("not a sysfs/procfs root"), "{e}");

    let snap = dir.path().join("t.json");
    std::fs::write(
        &snap,
        ok(&["topology", "--json", "--topology", "tests/fixtures/sysfs/no-numa"]),
    )
    .unwrap();
    let cap = dir.path().join("c.tar.gz");
    let e = fails(&[
        "topology",
        "--topology",
        snap.to_str().unwrap(),
        "--capture",
        cap.to_str().unwrap(),
    ]);
    assert!(e.contains("only the live machine or a sysfs/procfs directory can be captured"), "{e}");
}

/// Every build reads hwloc XML (pinctl's own reader, no libhwloc): both XML-only fixtures load
/// through `--topology` and agree with their oracle on nodes, CPUs, memory and the node of
/// every device both list.
#[test]
fn hwloc_xml_loads_in_every_build() {
    for (id, file) in [
        ("G09-mpibind-epyc7401-corona-8n-nvme-ib", "epyc-corona.xml"),
        ("G10-flux-xeon8480-snc4-2s-8n-nics", "ipa20.xml"),
    ] {
        let v = json(&["topology", "--topology", &format!("{SHARED}/{id}/raw/{file}"), "--json"]);
        let oracle_path = root().join(SHARED).join(id).join("oracle/summary.json");
        let oracle: Value =
            serde_json::from_str(&std::fs::read_to_string(oracle_path).unwrap()).unwrap();
        let nodes = v["nodes"].as_array().unwrap();
        let want = oracle["numa_nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), want.len(), "{id}");
        for (n, w) in nodes.iter().zip(want) {
            assert_eq!(n["id"], w["os_index"], "{id}");
            assert_eq!(n["cpus"], w["local_cpus"], "{id}");
            assert_eq!(n["memory_bytes"], w["local_memory_bytes"], "{id}");
        }
        let mut compared = 0;
        for d in oracle["io_devices"].as_array().unwrap() {
            let Some(ours) =
                v["devices"].as_array().unwrap().iter().find(|x| x["name"] == d["name"])
            else {
                continue;
            };
            let want: Vec<u64> = d["local_numa_nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            let got: pinctl_topology::NodeSet = ours["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap() as u32)
                .collect();
            if got.is_empty() && want.len() == nodes.len() {
                // hwloc attaches a device it cannot place to the whole machine; pinctl says
                // "unknown" (and warns) rather than "local to every node".
                continue;
            }
            assert_eq!(got.iter().map(u64::from).collect::<Vec<_>>(), want, "{id}: {}", d["name"]);
            compared += 1;
        }
        assert!(compared > 0, "{id}: no device in common with the oracle");
    }
}

/// Issue 10 section 2: a 17-node capture whose `cpu0/online` is empty is read whole, and the
/// warning about that file reaches every command that loads the topology.
#[test]
fn a_broken_file_is_a_warning_in_topology_check_and_plan() {
    const TREE: &str = "tests/fixtures/sysfs/empty-cpu0-online-17n";
    const WARNING: &str = "`sys/devices/system/cpu/cpu0/online` is empty; assumed CPU 0 is online";
    let text = ok(&["topology", "--topology", TREE]);
    assert!(text.contains(&format!("  - {WARNING}")), "{text}");
    let v = json(&["topology", "--json", "--topology", TREE]);
    assert_eq!(v["nodes"].as_array().unwrap().len(), 17);
    assert_eq!(v["discovery_warnings"][0]["file"], "sys/devices/system/cpu/cpu0/online");
    assert_eq!(v["discovery_warnings"][0]["problem"], "is empty");
    assert!(v["warnings"][0].as_str().unwrap().starts_with(WARNING), "{v}");
    // A healthy source has no such key.
    let v = json(&["topology", "--json", "--topology", "tests/fixtures/sysfs/stacked-2n"]);
    assert!(v.get("discovery_warnings").is_none(), "{v}");

    let dir = tempfile::tempdir().unwrap();
    let config = crate::support::write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\nnodes = 1\n",
    );
    let config = config.to_str().unwrap();
    let check = ok(&["check", "--topology", TREE, "-c", config]);
    assert!(check.contains(&format!("warning: host: {WARNING}")), "{check}");
    // Each command prints it once: plan's text, its JSON, and its emitted forms on stderr.
    let text = ok(&["plan", "--topology", TREE, "-c", config]);
    assert_eq!(text.matches(WARNING).count(), 1, "{text}");
    assert!(text.contains(&format!("warning: host: {WARNING}")), "{text}");
    let out = run(&["plan", "--json", "--topology", TREE, "-c", config]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(WARNING));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(plan["host_warnings"][0].as_str().unwrap().starts_with(WARNING), "{plan}");
    assert_eq!(plan.to_string().matches("cpu0/online").count(), 1, "{plan}");
    // CPU 0, assumed online, is planned like any other.
    assert_eq!(plan["services"][0]["cpus"], "0-1", "{plan}");
    let out = run(&["plan", "--emit", "numactl", "--topology", TREE, "-c", config]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches(&format!("warning: host: {WARNING}")).count(), 1, "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(WARNING));
}

/// Validates `doc` against the committed `docs/schema/NAME.schema.json`, naming every broken
/// rule.
pub(crate) fn assert_conforms(name: &str, doc: &Value, what: &str) {
    let path = root().join("docs/schema").join(format!("{name}.schema.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> =
        validator.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{what} breaks {}:\n{}", path.display(), errors.join("\n"));
}

/// Every source kind's JSON, the live machine's included, is what the schema in docs/ says.
#[test]
fn json_output_conforms_to_the_schema() {
    let mut sources: Vec<String> = std::fs::read_dir(root().join("configs/topologies"))
        .unwrap()
        .map(|e| format!("configs/topologies/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    sources.sort();
    for id in [
        "G01-hwloc-xeon-e5-2680-2n-nvme-ib-dax",
        "G03-hwloc-power7-8n-sparse",
        "G05-hwloc-memory-only-and-cpu-only-nodes",
        "G06-hwloc-offline-cpu0-and-node0",
        "G08-utillinux-epyc7451-2s-8n",
        "G11-libnvme-power-nvme-multipath",
    ] {
        sources.push(shared_tarball(id));
    }
    sources.push("tests/fixtures/sysfs/stacked-2n".into());
    assert!(sources.len() >= 11, "{sources:?}");
    for src in &sources {
        let v = json(&["topology", "--topology", src, "--json"]);
        assert_eq!(v["schema_version"], pinctl_topology::TOPOLOGY_SCHEMA_VERSION, "{src}");
        assert_conforms("topology", &v, src);
    }
    let live = json(&["topology", "--json"]);
    assert!(live["host"]["memory_bytes"].as_u64().is_some_and(|m| m > 0), "{}", live["host"]);
    assert_conforms("topology", &live, "the live machine");

    // The check can fail: the list string of older pinctl is not the current form.
    let mut old = json(&["topology", "--topology", "tests/fixtures/sysfs/stacked-2n", "--json"]);
    old["devices"][0]["nodes"] = "0".into();
    let schema = std::fs::read_to_string(root().join("docs/schema/topology.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&serde_json::from_str(&schema).unwrap()).unwrap();
    assert!(!validator.is_valid(&old));
}

/// Snapshots written before `schema_version` (device nodes as list strings, no machine
/// memory) still load, and are written back in the current form; a newer version is refused
/// with the file and the version named.
#[test]
fn snapshots_of_older_pinctl_load_and_newer_ones_are_refused() {
    let current = json(&["topology", "--topology", "configs/topologies/epyc-nps4.json", "--json"]);
    let mut old = current.clone();
    old.as_object_mut().unwrap().remove("schema_version");
    old["host"].as_object_mut().unwrap().remove("memory_bytes");
    for d in old["devices"].as_array_mut().unwrap() {
        let ids: Vec<String> =
            d["nodes"].as_array().unwrap().iter().map(|n| n.to_string()).collect();
        d["nodes"] = ids.join(",").into();
    }
    assert!(old["devices"].as_array().unwrap().iter().any(|d| d["nodes"] == "5"), "{old}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.json");
    std::fs::write(&file, serde_json::to_string_pretty(&old).unwrap()).unwrap();
    assert_eq!(json(&["topology", "--topology", file.to_str().unwrap(), "--json"]), current);

    let mut newer = current.clone();
    newer["schema_version"] = 2.into();
    newer["accelerators"] = serde_json::json!([]);
    let file = dir.path().join("newer.json");
    std::fs::write(&file, serde_json::to_string_pretty(&newer).unwrap()).unwrap();
    let e = fails(&["topology", "--topology", file.to_str().unwrap()]);
    assert!(
        e.contains(&format!(
            "snapshot `{}` has schema_version 2, newer than 1, the newest this pinctl reads",
            file.display()
        )),
        "{e}"
    );
}

/// A snapshot of a machine whose firmware's figures disagree: the nodes hold a quarter of the
/// memory /proc/meminfo counts, and node 3 has CPUs but no memory on a machine without
/// memory-only nodes.
fn disagreeing_snapshot(dir: &std::path::Path) -> PathBuf {
    let mut v = json(&["topology", "--topology", "configs/topologies/epyc-nps4.json", "--json"]);
    let sum: u64 =
        v["nodes"].as_array().unwrap().iter().map(|n| n["memory_bytes"].as_u64().unwrap()).sum();
    v["host"]["memory_bytes"] = (sum * 4).into();
    v["nodes"][3]["has_memory"] = false.into();
    let file = dir.join("disagreeing.json");
    std::fs::write(&file, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    file
}

pub(crate) const MEMORY_WARNING: &str = "the nodes' memory adds up to 512.0 GiB (25 %) of the \
     machine's 2048.0 GiB (/proc/meminfo MemTotal): the firmware's NUMA tables describe less \
     memory than the machine has (common on virtual machines); plans use the per-node figures";
pub(crate) const MEMORYLESS_WARNING: &str = "node 3 has CPUs but no memory";

/// Each disagreement is said once, in the text and in the JSON of `topology`, by `check` and
/// by `plan` (text and JSON).
#[test]
fn firmware_disagreements_are_warned_once_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let snap = disagreeing_snapshot(dir.path());
    let snap = snap.to_str().unwrap();
    let config = crate::support::write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\n",
    );
    let config = config.to_str().unwrap();
    let once = |what: &str, text: &str| {
        for w in [MEMORY_WARNING, MEMORYLESS_WARNING] {
            assert_eq!(text.matches(w).count(), 1, "{what}: `{w}` in\n{text}");
        }
    };
    once("topology", &ok(&["topology", "--topology", snap]));
    let v = json(&["topology", "--topology", snap, "--json"]);
    assert_conforms("topology", &v, "the disagreeing snapshot");
    once("topology --json", &v["warnings"].to_string());
    let out = run(&["check", "--topology", snap, "-c", config]);
    assert!(out.status.success(), "{out:?}");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    once("check", &text);
    assert!(text.contains(&format!("warning: host: {MEMORY_WARNING}")), "{text}");
    let out = run(&["plan", "--topology", snap, "-c", config]);
    assert!(out.status.success(), "{out:?}");
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    once("plan", &text);
    assert!(text.contains(&format!("warning: host: {MEMORY_WARNING}")), "{text}");
    let v = json(&["plan", "--topology", snap, "-c", config, "--json"]);
    assert_conforms("plan", &v, "plan --json");
    once("plan --json", &v.to_string());
    assert_eq!(v["host_warnings"].as_array().unwrap().len(), 2, "{v}");
}
