//! `pinctl fleet --tiup` (issue 29, docs/fleet.md "TiUP"): TiUP's topology filled in with the
//! plan, only `numa_node`/`numa_cores` lines changed, each host placed as `pinctl plan`
//! places it alone.

use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::support::{EPYC, XEON, pinctl, root};

/// TiUP's own example (pingcap/tiup `embed/examples/cluster/topology.example.yaml`, as
/// shipped; tests/fixtures/tiup/README.md).
const EXAMPLE: &str = "tests/fixtures/tiup/topology.example.yaml";

const MAPPING: &str = "[host]\nkeep-free = [\"eth0\"]\n\n[data-dirs]\n\"/data1\" = \"nvme0n1\"\n\"/data2\" = \"nvme1n1\"\n";

/// Every capture shape at hand: the bundled snapshots and, where the shared fixtures are
/// beside the checkout, their hwloc XML and sysfs tarballs.
fn all_shapes() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root().join("configs/topologies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    if let Ok(fixtures) = std::fs::read_dir(root().join("../shared/fixtures/topologies")) {
        for f in fixtures.flatten() {
            if let Ok(raw) = std::fs::read_dir(f.path().join("raw")) {
                found.extend(raw.flatten().map(|e| e.path()).filter(|p| {
                    let n = p.to_string_lossy();
                    n.ends_with(".xml") || n.contains(".tar.")
                }));
            }
        }
    }
    found.sort();
    found
}

/// The lines a unified diff removes and adds (not its headers).
fn changed_lines(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|l| {
            (l.starts_with('+') && !l.starts_with("+++"))
                || (l.starts_with('-') && !l.starts_with("---"))
        })
        .collect()
}

/// `pinctl plan -c FILE --topology CAPTURE --json`'s services, as (name, nodes, cpus).
fn plan_alone(file: &Path, capture: &Path) -> Vec<(String, String, String)> {
    let out = pinctl()
        .arg("plan")
        .arg("-c")
        .arg(file)
        .arg("--topology")
        .arg(capture)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let nodes: Vec<String> =
                s["nodes"].as_array().unwrap().iter().map(|n| n.to_string()).collect();
            (
                s["name"].as_str().unwrap().to_string(),
                nodes.join(","),
                s["cpus"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The CPUs of `nodes` on `capture`, from `pinctl topology --json`.
fn node_cpus(capture: &Path) -> std::collections::BTreeMap<String, String> {
    let out =
        pinctl().arg("topology").arg("--topology").arg(capture).arg("--json").output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].to_string(), n["cpus"].as_str().unwrap().to_string()))
        .collect()
}

/// Each instance of `yaml` whose host is in `hosts`: (host, name as pinctl names it, numa_node,
/// numa_cores), read with the same YAML parser TiUP's struct tags were checked against.
fn numa_of(yaml: &str) -> Vec<(String, String, Option<String>, Option<String>)> {
    let t = pinctl_fleet::tiup::read::read(Path::new("t.yaml"), yaml).unwrap();
    t.instances
        .iter()
        .filter_map(|i| {
            let p = pinctl_fleet::tiup::services::planned(&t, i)?;
            Some((
                i.host.value.clone(),
                p.name,
                i.get("numa_node").map(|f| f.value.clone()),
                i.get("numa_cores").map(|f| f.value.clone()),
            ))
        })
        .collect()
}

/// Runs `--tiup` on `topology` with `captures` (and, `with_diff`, checks its diff first),
/// writing the result and the service files;
/// checks that only NUMA lines changed and that every captured host's instances sit where
/// `pinctl plan` puts them alone. Returns how many instances were filled in.
fn round_trip(
    dir: &Path,
    topology: &Path,
    captures: &[(String, PathBuf)],
    mapping: &str,
    with_diff: bool,
) -> usize {
    std::fs::write(dir.join("map.toml"), mapping).unwrap();
    let mut fleet = pinctl();
    fleet.arg("fleet").arg("--tiup").arg(topology).arg("-c").arg(dir.join("map.toml"));
    for (host, capture) in captures {
        fleet.arg("--topology").arg(format!("{host}={}", capture.display()));
    }
    if with_diff {
        let diff = fleet.output().unwrap();
        assert!(diff.status.success(), "{}", String::from_utf8_lossy(&diff.stderr));
        let diff = String::from_utf8(diff.stdout).unwrap();
        let changed = changed_lines(&diff);
        assert!(!changed.is_empty());
        for line in &changed {
            assert!(
                line.starts_with("+    numa_node: \"") || line.starts_with("+    numa_cores: \""),
                "{line}"
            );
        }
    }
    let written = dir.join("filled.yaml");
    let files = dir.join("services");
    let out =
        fleet.arg("--write").arg(&written).arg("--service-files").arg(&files).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "--write prints no diff");
    let before = std::fs::read_to_string(root().join(topology)).unwrap();
    let after = std::fs::read_to_string(&written).unwrap();
    // Removing the added lines gives back the original byte for byte.
    let without: String = after
        .split_inclusive('\n')
        .filter(|l| {
            !(l.starts_with("    numa_node: \"") || l.starts_with("    numa_cores: \""))
                || before.contains(*l)
        })
        .collect();
    assert_eq!(without, before);
    let filled = numa_of(&after);
    let mut placed = 0;
    // Hosts of one shape with the same instances get the same file but for its first line
    // (the host's name): planned alone once, the plan being a function of its inputs.
    let mut alone_of = std::collections::HashMap::new();
    let mut cpus_of = std::collections::HashMap::new();
    for (host, capture) in captures {
        let file = files.join(format!("{host}.toml"));
        let text = std::fs::read_to_string(&file).unwrap();
        let body = text.split_once('\n').unwrap().1.to_string();
        let alone = alone_of
            .entry((capture.clone(), body))
            .or_insert_with(|| plan_alone(&file, capture))
            .clone();
        let cpus = cpus_of.entry(capture.clone()).or_insert_with(|| node_cpus(capture));
        for (name, nodes, instance_cpus) in alone {
            let (_, _, node, cores) =
                filled.iter().find(|(h, n, ..)| h == host && *n == name).unwrap();
            assert_eq!(node.as_deref(), Some(nodes.as_str()), "{host} {name}");
            let whole: Vec<&str> = nodes.split(',').map(|n| cpus[n].as_str()).collect();
            if whole.len() == 1 && whole[0] == instance_cpus {
                assert_eq!(cores, &None, "{host} {name}: a whole node needs no numa_cores");
            } else if whole.len() == 1 {
                assert_eq!(cores.as_deref(), Some(instance_cpus.as_str()), "{host} {name}");
            }
            placed += 1;
        }
    }
    placed
}

#[test]
fn tiups_example_round_trips_with_only_numa_lines_added() {
    let dir = tempfile::tempdir().unwrap();
    let (e, x) = (root().join(EPYC), root().join(XEON));
    let captures: Vec<(String, PathBuf)> = [
        ("10.0.1.11", &x),
        ("10.0.1.14", &e),
        ("10.0.1.16", &e),
        ("10.0.1.19", &e),
        ("10.0.1.21", &x),
    ]
    .into_iter()
    .map(|(h, c)| (h.to_string(), c.clone()))
    .collect();
    let placed = round_trip(dir.path(), Path::new(EXAMPLE), &captures, MAPPING, true);
    assert_eq!(placed, 10, "pd 1, tidb 2, tikv 2, tiflash 2, kvcdc + prometheus + alertmanager 3");
    // TiKV beside its drive: /data1 on nvme0n1 (node 2), /data2 on nvme1n1 (node 6).
    let after = std::fs::read_to_string(dir.path().join("filled.yaml")).unwrap();
    let numa = numa_of(&after);
    let node = |host: &str, name: &str| {
        numa.iter().find(|(h, n, ..)| h == host && n == name).unwrap().2.clone()
    };
    assert_eq!(node("10.0.1.16", "tikv-20160").as_deref(), Some("2"));
    assert_eq!(node("10.0.1.16", "tikv-20161").as_deref(), Some("6"));
    assert_eq!(node("10.0.1.17", "tikv-20160"), None, "no capture: left as it is");
}

#[test]
fn a_generated_100_host_topology_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    // The shapes on which a host of two TiKV and a TiDB can be planned (on G05, whose CPU
    // nodes have no memory, it cannot: tested on its own below).
    let shapes: Vec<PathBuf> = all_shapes()
        .into_iter()
        .filter(|s| {
            let mut fleet = pinctl();
            fleet
                .args(["fleet", "--tiup", EXAMPLE])
                .arg("--topology")
                .arg(format!("10.0.1.16={}", s.display()));
            fleet.output().unwrap().status.success()
        })
        .collect();
    assert!(shapes.len() >= 8, "{shapes:?}");
    let mut yaml = String::from(
        "# 100 hosts, generated by the test\nglobal:\n  user: \"tidb\"\n  deploy_dir: \"/tidb-deploy\"\n  data_dir: \"/tidb-data\"\n\ntikv_servers:\n",
    );
    let host = |i: usize| format!("10.1.{}.{}", i / 100, i % 100 + 1);
    for i in 0..100 {
        for (k, port) in [(1, 20160), (2, 20161)] {
            yaml.push_str(&format!(
                "  - host: {}   # rack {}\n    port: {port}\n    data_dir: \"/data{k}/tikv-{port}\"\n",
                host(i),
                i % 7
            ));
        }
    }
    yaml.push_str("tidb_servers:\n");
    for i in 0..100 {
        yaml.push_str(&format!("  - host: {}\n    port: 4000\n", host(i)));
    }
    let topology = dir.path().join("topology.yaml");
    std::fs::write(&topology, &yaml).unwrap();
    let captures: Vec<(String, PathBuf)> =
        (0..100).map(|i| (host(i), shapes[i % shapes.len()].clone())).collect();
    // Shapes name their NICs differently: the default route's NIC where the capture has one.
    let mapping = MAPPING.replace("keep-free = [\"eth0\"]", "");
    assert_eq!(round_trip(dir.path(), &topology, &captures, &mapping, false), 300);
}

#[test]
fn an_instance_that_cannot_be_placed_writes_nothing() {
    let Some(g05) = std::fs::read_dir(root().join("../shared/fixtures/topologies"))
        .ok()
        .and_then(|mut d| {
            d.find(|f| f.as_ref().is_ok_and(|f| f.file_name().to_string_lossy().starts_with("G05")))
        })
        .map(|f| f.unwrap().path().join("raw/fakememinitiators-1np2c+1npp+gi.tar.bz2"))
    else {
        panic!("the shared fixtures are needed beside the checkout (../shared/fixtures)");
    };
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("filled.yaml");
    pinctl()
        .args(["fleet", "--tiup", EXAMPLE])
        .arg("--topology")
        .arg(format!("10.0.1.14={}", g05.display()))
        .arg("--topology")
        .arg(format!("10.0.1.16={EPYC}"))
        .arg("--write")
        .arg(&written)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("error: nothing written"))
        .stderr(predicate::str::contains("10.0.1.14: "));
    assert!(!written.exists());
}

#[test]
fn the_mapping_file_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    for (text, said) in [
        ("[component.tikv]\nmemory-policy = \"preferred\"\n", "TiUP decides it"),
        ("[component.tikvv]\n", "unknown component `tikvv`"),
        ("[data-dirs]\n\"data1\" = \"nvme0n1\"\n", "not an absolute folder"),
        ("[component.tikv]\nmemory = \"lots\"\n", "is not valid"),
    ] {
        let map = dir.path().join("map.toml");
        std::fs::write(&map, text).unwrap();
        pinctl()
            .args(["fleet", "--tiup", EXAMPLE, "-c"])
            .arg(&map)
            .args(["--topology", &format!("10.0.1.16={EPYC}")])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(said));
    }
}

#[test]
fn part_of_a_node_is_numa_cores_where_tiup_has_it_and_refused_where_not() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("map.toml");
    std::fs::write(&map, "[component.tidb]\ncpus = 4\n").unwrap();
    let out = pinctl()
        .args(["fleet", "--tiup", EXAMPLE, "-c"])
        .arg(&map)
        .args(["--topology", &format!("10.0.1.14={EPYC}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let diff = String::from_utf8(out.stdout).unwrap();
    let cores: Vec<&str> =
        changed_lines(&diff).into_iter().filter(|l| l.contains("numa_cores")).collect();
    assert_eq!(cores.len(), 2, "{diff}");
    std::fs::write(&map, "[component.pd]\ncpus = 2\n").unwrap();
    pinctl()
        .args(["fleet", "--tiup", EXAMPLE, "-c"])
        .arg(&map)
        .args(["--topology", &format!("10.0.1.11={XEON}")])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("TiUP's pd has no `numa_cores`: give it whole nodes"));
}
