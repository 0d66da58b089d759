//! Snapshot tests of rendered diagnostics: every `tests/<dir>/NAME.toml` has a `NAME.stderr`
//! next to it holding the exact expected output. Set `PINCTL_BLESS=1` to rewrite the
//! `.stderr` files from the current output (then review the diff before committing).
//!
//! - `bad/`: files that must be refused; the snapshot is the whole error report.
//! - `warn/`: files that must load, with warnings; the snapshot is the warnings.
//! - `machine/`: files that load but fail `check_against` on an 8-node, 64-CPU host.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use pinctl_config::{Diagnostic, check_against, parse, render_all};
use pinctl_topology::{Cpu, Device, DeviceKind, HostFacts, IdSet, Locality, Node, Topology};

fn cases(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(dir);
    let mut files: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", root.display());
    files
}

/// The path diagnostics name: relative, so snapshots do not depend on the checkout.
fn display_path(dir: &str, file: &Path) -> PathBuf {
    Path::new(dir).join(file.file_name().unwrap())
}

/// Compares every case's output with its snapshot and reports all mismatches at once.
fn check_snapshots(dir: &str, render: impl Fn(&Path, &str) -> Result<String, String>) {
    let bless = std::env::var_os("PINCTL_BLESS").is_some_and(|v| v != "0");
    let mut failures = String::new();
    for file in cases(dir) {
        let text = fs::read_to_string(&file).unwrap();
        let shown = display_path(dir, &file);
        let actual = match render(&shown, &text) {
            Ok(a) => a,
            Err(e) => {
                let _ = writeln!(failures, "{}: {e}", file.display());
                continue;
            }
        };
        let snapshot = file.with_extension("stderr");
        if bless {
            fs::write(&snapshot, &actual).unwrap();
            continue;
        }
        match fs::read_to_string(&snapshot) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => {
                let _ = writeln!(
                    failures,
                    "{} differs from its snapshot\n--- expected\n{expected}--- actual\n{actual}",
                    file.display()
                );
            }
            Err(_) => {
                let _ = writeln!(
                    failures,
                    "{} has no snapshot {}; actual output:\n{actual}",
                    file.display(),
                    snapshot.display()
                );
            }
        }
    }
    assert!(failures.is_empty(), "{failures}\n(run with PINCTL_BLESS=1 to accept the new output)");
}

#[test]
fn bad_configs_are_refused_with_these_reports() {
    check_snapshots("bad", |path, text| match parse(path, text) {
        Ok(_) => Err("was accepted".into()),
        Err(e) => {
            assert!(e.error_count() > 0);
            assert!(e.diagnostics.iter().all(|d| d.location.is_some() || d.path.is_some()));
            Ok(format!("{e}\n"))
        }
    });
}

#[test]
fn doubtful_configs_load_with_these_warnings() {
    check_snapshots("warn", |path, text| match parse(path, text) {
        Err(e) => Err(format!("was refused:\n{e}")),
        Ok(c) if c.warnings.is_empty() => Err("loaded without warnings".into()),
        Ok(c) => Ok(render_all(&c.warnings, Some(path), false)),
    });
}

#[test]
fn configs_that_do_not_fit_the_host_are_reported_against_it() {
    let topology = eight_node_host();
    check_snapshots("machine", |path, text| match parse(path, text) {
        Err(e) => Err(format!("was refused:\n{e}")),
        Ok(c) => {
            let found: Vec<Diagnostic> = check_against(&c, &topology);
            if found.is_empty() {
                return Err("check_against found nothing".into());
            }
            Ok(render_all(&found, Some(path), false))
        }
    });
}

/// 8 nodes of 8 CPUs (node n = CPUs 8n..8n+7), 2 sockets, 16 GiB per node; eth0 on node 5,
/// nvme0n1 on node 2.
fn eight_node_host() -> Topology {
    let nodes = (0..8u32)
        .map(|n| Node {
            id: n,
            cpus: (8 * n..8 * n + 8).collect(),
            memory_bytes: Some(16 << 30),
            memory_free_bytes: Some(15 << 30),
            has_cpu: true,
            has_memory: true,
        })
        .collect();
    let distances = (0..8u32)
        .map(|a| {
            (0..8u32)
                .map(|b| {
                    if a == b {
                        10
                    } else if a / 4 == b / 4 {
                        12
                    } else {
                        32
                    }
                })
                .collect()
        })
        .collect();
    let cpus = (0..64u32)
        .map(|c| Cpu {
            id: c,
            online: true,
            package: Some(c / 32),
            core: Some(c % 32),
            node: Some(c / 8),
        })
        .collect();
    let device = |name: &str, kind, node: u32| Device {
        name: name.into(),
        kind,
        pci: None,
        node: Some(node),
        nodes: IdSet::from_iter([node]),
        locality: Locality::NumaNode,
        members: Vec::new(),
    };
    Topology {
        nodes,
        distances,
        cpus,
        devices: vec![device("eth0", DeviceKind::Nic, 5), device("nvme0n1", DeviceKind::Nvme, 2)],
        host: HostFacts::default(),
        warnings: Vec::new(),
    }
}
