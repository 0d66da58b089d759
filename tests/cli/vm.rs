//! The QEMU multi-node test bed (tests/vm) from cargo.
//!
//! `full_suite_in_qemu_guests` boots real kernels with 4 and 8 NUMA nodes and runs every
//! scenario; it takes minutes and installs packages, so it is `#[ignore]`d and cargo lists it
//! as ignored, never as passed. Run it with `cargo test --test cli vm:: -- --ignored`, or run
//! `tests/vm/run` directly (what scripts/test does). The other tests here are fast static checks
//! that the layouts, scenarios and numactl lines are consistent, so a broken edit to the test
//! bed shows up in plain `cargo test` instead of as a confusing guest failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{PINCTL, root};

fn vm_dir() -> PathBuf {
    root().join("tests/vm")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

/// Ids in a kernel list string (`0-1,8-9`).
fn expand(list: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (u64, u64) = (lo.parse().unwrap(), hi.parse().unwrap());
        ids.extend(lo..=hi);
    }
    ids
}

fn layouts() -> Vec<(String, Value)> {
    files_with_extension(&vm_dir().join("layouts"), "json")
        .into_iter()
        .map(|p| {
            let v: Value = serde_json::from_str(&read(&p))
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()));
            (p.file_stem().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

#[test]
fn layouts_describe_a_buildable_machine() {
    let layouts = layouts();
    assert!(layouts.len() >= 2, "expected the 4- and 8-node layouts");
    for (name, l) in &layouts {
        // A link is the same machine under another name, booted for scenarios of its own
        // (4node-run: the supervisor's); its `name` is the machine's.
        let file = vm_dir().join("layouts").join(format!("{name}.json"));
        let machine = match std::fs::read_link(&file) {
            Ok(target) => {
                assert_eq!(
                    target.parent(),
                    Some(std::path::Path::new("")),
                    "{name}: links a sibling"
                );
                target.file_stem().unwrap().to_string_lossy().into_owned()
            }
            Err(_) => name.clone(),
        };
        assert_eq!(l["name"], machine.as_str(), "{name}: `name` must match the file name");
        let cpus = l["sockets"].as_u64().unwrap() * l["cores"].as_u64().unwrap();
        let nodes = l["nodes"].as_array().unwrap();
        let mut seen = BTreeSet::new();
        for node in nodes {
            for cpu in expand(node["cpus"].as_str().unwrap()) {
                assert!(cpu < cpus, "{name}: cpu {cpu} beyond sockets x cores = {cpus}");
                assert!(seen.insert(cpu), "{name}: cpu {cpu} is on two nodes");
            }
        }
        assert_eq!(seen.len() as u64, cpus, "{name}: every CPU must belong to a node");
        // `memory_mib: 0` is a memoryless node; the guest needs memory somewhere.
        let mib =
            |n: &Value| n.get("memory_mib").map_or(l["node_memory_mib"].as_u64(), Value::as_u64);
        assert!(nodes.iter().all(|n| mib(n).is_some()), "{name}: memory_mib must be a number");
        assert!(nodes.iter().any(|n| mib(n) > Some(0)), "{name}: no node has memory");
        let d = l["distances"].as_array().unwrap();
        assert_eq!(d.len(), nodes.len(), "{name}: one distance row per node");
        for (i, row) in d.iter().enumerate() {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), nodes.len(), "{name}: row {i} length");
            assert_eq!(row[i], 10, "{name}: a node's distance to itself is 10");
            for (j, v) in row.iter().enumerate() {
                assert_eq!(v, &d[j][i], "{name}: distances must be symmetric ({i},{j})");
            }
        }
        if let Some(hmat) = l.get("hmat") {
            check_hmat(name, hmat, nodes, mib);
        }
        let ids: BTreeSet<u64> = nodes.iter().map(|n| n["id"].as_u64().unwrap()).collect();
        for dev in l["devices"].as_array().unwrap() {
            assert!(ids.contains(&dev["node"].as_u64().unwrap()), "{name}: {dev} on no node");
            match dev["kind"].as_str().unwrap() {
                "nvme" => assert!(dev["serial"].as_str().unwrap().starts_with("pinctl-nvme-")),
                "nic" => assert_eq!(dev["mac"].as_str().unwrap().len(), 17),
                other => panic!("{name}: the harness cannot build a `{other}` device"),
            }
        }
    }
}

/// A layout's `hmat` (tests/vm/run turns it into `-machine hmat=on` and `-numa hmat-lb`):
/// only the four figure matrices the harness builds (a misspelt one would be dropped without a
/// word), each one row per initiator and one column per memory node, a figure exactly where
/// the row's node has CPUs and the column's node has memory. Every node must have both: QEMU
/// wants an `initiator` for a node without CPUs, which the harness does not build, and Linux
/// rejects QEMU's table when a node has no memory (`acpi/hmat: Ignoring: Invalid table`).
fn check_hmat(name: &str, hmat: &Value, nodes: &[Value], mib: impl Fn(&Value) -> Option<u64>) {
    const FIGURES: [&str; 4] =
        ["read_latency_ns", "write_latency_ns", "read_bandwidth_mb_s", "write_bandwidth_mb_s"];
    for node in nodes {
        assert!(
            node["cpus"].as_str() != Some("") && mib(node) > Some(0),
            "{name}: `hmat` needs CPUs and memory on every node, not {node}"
        );
    }
    let figures = hmat.as_object().unwrap();
    assert!(figures.keys().any(|k| FIGURES.contains(&k.as_str())), "{name}: `hmat` has no figure");
    for (key, matrix) in figures {
        if key == "about" {
            continue;
        }
        assert!(FIGURES.contains(&key.as_str()), "{name}: `hmat.{key}` is not one of {FIGURES:?}");
        let rows = matrix.as_array().unwrap();
        assert_eq!(rows.len(), nodes.len(), "{name}: `hmat.{key}`: one row per node");
        for (i, row) in rows.iter().enumerate() {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), nodes.len(), "{name}: `hmat.{key}` row {i} length");
            for (j, v) in row.iter().enumerate() {
                assert!(v.as_u64().is_some_and(|v| v > 0), "{name}: `hmat.{key}[{i}][{j}]` = {v}");
            }
        }
    }
}

#[test]
fn every_scenario_names_existing_layouts_and_configs() {
    let layouts: BTreeSet<String> = layouts().into_iter().map(|(n, _)| n).collect();
    let scenarios = files_with_extension(&vm_dir().join("scenarios"), "sh");
    assert!(scenarios.len() >= 6, "scenarios 1-6 are expected");
    for s in scenarios {
        let text = read(&s);
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("# layouts: "))
            .unwrap_or_else(|| panic!("{} has no `# layouts:` line", s.display()));
        // The guest's init knows only these roles; another word would leave the scenario
        // out on every kernel of a run of several.
        if let Some(kernels) = text.lines().find_map(|l| l.strip_prefix("# kernels: ")) {
            for k in kernels.split_whitespace() {
                assert!(
                    ["oldest", "newest"].contains(&k),
                    "{}: `# kernels:` takes `oldest` and `newest`, not `{k}`",
                    s.display()
                );
            }
        }
        for layout in line.split_whitespace() {
            assert!(layouts.contains(layout), "{}: unknown layout `{layout}`", s.display());
            if text.contains("/vm/configs/$LAYOUT.toml") {
                let config = vm_dir().join(format!("configs/{layout}.toml"));
                assert!(config.exists(), "{} needs {}", s.display(), config.display());
            }
        }
    }
}

#[test]
fn numactl_lines_are_well_formed_and_enough() {
    let text = read(&vm_dir().join("scenarios/numactl-lines.txt"));
    let lines: Vec<&str> =
        text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).collect();
    assert!(lines.len() >= 20, "the issue asks for at least 20 numactl command lines");
    for l in &lines {
        let cols: Vec<&str> = l.split_whitespace().collect();
        assert!(cols.len() >= 3, "`{l}`: expected EXPECT WHERE OPTIONS");
        assert!(["ok", "err"].contains(&cols[0]), "`{l}`: EXPECT is ok or err");
        assert!(["root", "narrow"].contains(&cols[1]), "`{l}`: WHERE is root or narrow");
    }
    let unique: BTreeSet<&str> = lines.iter().copied().collect();
    assert_eq!(unique.len(), lines.len(), "a numactl line is listed twice");
}

/// Entries of a list file: non-comment lines as whitespace-separated columns.
fn list_entries(name: &str) -> Vec<Vec<String>> {
    read(&vm_dir().join(name))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn known_failure_lists_are_well_formed() {
    let layouts: BTreeSet<String> = layouts().into_iter().map(|(n, _)| n).collect();
    for cols in list_entries("known-failures.txt") {
        assert!(
            cols.len() >= 3,
            "known-failures.txt: `{}`: expected KERNELS CHECK REASON",
            cols.join(" ")
        );
        let layout = cols[1].split('/').next().unwrap();
        assert!(layouts.contains(layout), "known-failures.txt: `{}`: unknown layout", cols[1]);
    }
    let scripts = ["checktopology", "checkaffinity", "bind_range", "regress2", "regress"];
    for cols in list_entries("numactl-known-differences.txt") {
        assert!(
            cols.len() >= 2,
            "numactl-known-differences.txt: `{}`: expected NAME REASON",
            cols.join(" ")
        );
        let (script, rest) = cols[0].split_once('/').unwrap_or((&cols[0], ""));
        assert!(
            scripts.contains(&script),
            "numactl-known-differences.txt: unknown script `{script}`"
        );
        assert!(
            ["", "exit-statuses"].contains(&rest),
            "numactl-known-differences.txt: `{}`",
            cols[0]
        );
    }
}

#[test]
#[ignore = "boots QEMU guests for minutes: run `cargo test --test cli vm:: -- --ignored` or tests/vm/run"]
fn full_suite_in_qemu_guests() {
    let status = Command::new(vm_dir().join("run"))
        .env("PINCTL_VM_PINCTL", PINCTL)
        .status()
        .expect("cannot start tests/vm/run");
    assert!(status.success(), "tests/vm/run failed ({status}): see the FAIL lines above");
}
