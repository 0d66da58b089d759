//! `pinctl probe` on this machine (one node here: it measures the one pair; the QEMU guest's
//! scenario 18 measures 16), its JSON against docs/schema/probe.schema.json, what `--save`
//! writes and what `--topology` then reads, and its refusals.

use serde_json::Value;

use crate::support::{XEON, pinctl, write_config};
use crate::topology::assert_conforms;

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// How many CPU nodes and memory nodes this machine offers the probe.
fn sides() -> (usize, usize) {
    let topo = json(&pinctl().args(["topology", "--json"]).output().unwrap());
    let nodes = topo["nodes"].as_array().unwrap();
    let cpu = nodes.iter().filter(|n| n["cpus"] != "").count();
    let memory = nodes.iter().filter(|n| n["has_memory"] == true).count();
    (cpu, memory)
}

#[test]
fn quick_json_measures_every_pair_of_this_machine() {
    let out = pinctl().args(["probe", "--quick", "--json"]).output().unwrap();
    let doc = json(&out);
    assert_conforms("probe", &doc, "pinctl probe --quick --json");
    let (cpu, memory) = sides();
    let pairs = doc["measured"]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), cpu * memory, "{doc}");
    assert_eq!(doc["pairs"].as_array().unwrap().len(), pairs.len());
    for p in pairs {
        assert!(p["latency_ns"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["read_bandwidth_gb_s"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["latency_passes"].as_u64().unwrap() >= 1, "{p}");
    }
    for p in doc["pairs"].as_array().unwrap() {
        if p["cpu_node"] == p["memory_node"] {
            assert_eq!(p["remote_ratio"], 1.0, "{p}");
            assert_eq!(p["slit"], 10, "{p}");
        }
    }
    assert_eq!(doc["measured"]["quick"], true);
    assert_eq!(doc["measured"]["buffer_bytes"], 16 << 20);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("probing "), "{stderr}");
    assert!(stderr.contains(", --quick: a 16 MiB buffer on each memory node"), "{stderr}");
}

#[test]
fn the_report_shows_matrices_and_the_pairs_beside_slit() {
    let out = pinctl().args(["probe", "--quick"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "latency (ns), idle, one thread; rows: CPU node, columns: memory node",
        "read bandwidth (GB/s), one thread per core of the CPU node",
        "latency over the CPU node's local latency",
        "CPU -> MEMORY  LATENCY",
        "rankings that disagree with SLIT: none",
        "note: --quick: small buffers and short passes",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("0 -> 0 ") && l.contains(" ns ") && l.contains(" GB/s")),
        "{text}"
    );
}

#[test]
fn a_saved_probe_comes_back_with_the_topology_from_a_snapshot_and_a_capture() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["probed.json", "probed.tar.gz"] {
        let file = dir.path().join(name);
        let out =
            pinctl().args(["probe", "--quick", "--json", "--save"]).arg(&file).output().unwrap();
        let doc = json(&out);
        let topo =
            json(&pinctl().args(["topology", "--json", "--topology"]).arg(&file).output().unwrap());
        assert_conforms("topology", &topo, name);
        assert_eq!(topo["memory_performance"]["measured"], doc["measured"], "{name}");
        // `pinctl topology` shows it; a plan on it says why a --quick measurement is not used.
        let text = pinctl().args(["topology", "--topology"]).arg(&file).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("measured by `pinctl probe`:"), "{text}");
        let config =
            write_config(dir.path(), "[service.web]\ncommand = [\"/bin/true\"]\ncpus = 1\n");
        let plan = json(
            &pinctl()
                .args(["plan", "--json", "-c"])
                .arg(&config)
                .arg("--topology")
                .arg(&file)
                .output()
                .unwrap(),
        );
        assert_eq!(plan["distances"]["measure"], "slit", "{name}: {plan}");
        assert_eq!(
            plan["distances"]["note"], "the saved measurement is a --quick one, not for planning",
            "{name}"
        );
    }
}

#[test]
fn a_plan_on_a_measured_snapshot_says_so_and_explains_what_changed() {
    let out = pinctl()
        .args(["plan", "-c", "configs/scenarios/tikv-pairs-epyc.toml", "--topology"])
        .arg("configs/topologies/epyc-nps4-measured.json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("distances: measured idle latency (`pinctl probe`,"), "{text}");
    assert!(
        text.contains("nodes 0,3 instead of nodes 0-1 (where SLIT alone puts it): measured 118.5 ns vs 142.3 ns between its nodes"),
        "{text}"
    );
    // Without a measurement, the same plan prints no distances line (SLIT, as always).
    let out = pinctl()
        .args(["plan", "-c", "configs/mysql-xeon.toml", "--topology", XEON])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("distances:"));
}

#[test]
fn bad_arguments_are_refused_before_anything_is_measured() {
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--budget", "0"], 2, "a budget is more than 0 and at most 86400 seconds"),
        (&["--budget", "soon"], 2, "`soon` is not a number of seconds"),
        (
            &["--save", "probe.txt"],
            2,
            "`--save probe.txt`: name a snapshot (.json) or a capture (.tar.gz, .tgz)",
        ),
        (&["--save", "/nonexistent/dir/p.json"], 2, "folder `/nonexistent/dir` does not exist"),
        (&["--quick", "--budget", "0.001"], 1, "cannot measure"),
    ];
    for (args, code, want) in cases {
        let out = pinctl().arg("probe").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
