//! Snapshot tests of rendered diagnostics: every `tests/<dir>/NAME.toml` has an insta snapshot
//! `NAME.snap` next to it holding the exact expected output. To accept new output, run
//! `INSTA_UPDATE=always cargo test -p pinctl-config --test snapshots` (or `cargo insta review`
//! where cargo-insta is installed) and review the diff before committing; a missing or stale
//! snapshot fails the test (CI sets `INSTA_UPDATE=no`).
//!
//! - `bad/`: files that must be refused; the snapshot is the whole error report.
//! - `warn/`: files that must load, with warnings; the snapshot is the warnings.
//! - `machine/`: files that load but fail `check_against` on an 8-node, 64-CPU host.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use pinctl_config::{Diagnostic, check_against, parse, render_all};
use pinctl_testkit::{GIB, SyntheticTopology};
use pinctl_topology::{DeviceKind, Topology};

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

/// Compares every case's output with its insta snapshot, `<dir>/NAME.snap` next to
/// `<dir>/NAME.toml`, and reports all mismatches at once rather than stopping at the first.
fn check_snapshots(dir: &str, render: impl Fn(&Path, &str) -> Result<String, String>) {
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
        // insta compares text with trailing blank lines trimmed: the report's own ending
        // (exactly one newline) is checked here so the output stays byte for byte the same.
        if !actual.ends_with('\n') || actual.ends_with("\n\n") {
            let _ = writeln!(failures, "{}: output does not end in one newline", file.display());
        }
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(dir);
        settings.set_prepend_module_to_snapshot(false);
        settings.set_input_file(&file);
        settings.set_omit_expression(true);
        // insta panics on a mismatch (after printing the diff); catching it lets every other
        // case be compared too.
        let compared = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            settings.bind(|| insta::assert_snapshot!(name, actual));
        }));
        if compared.is_err() {
            let _ = writeln!(failures, "{} differs from its snapshot (diff above)", file.display());
        }
    }
    assert!(failures.is_empty(), "{failures}");
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
    let host = (0..8u32).fold(SyntheticTopology::new(), |t, n| {
        t.node((8 * n..8 * n + 8).collect(), n / 4, Some(16 * GIB))
    });
    host.cores(|c| c % 32)
        .distances_by_package(12, 32)
        .device("eth0", DeviceKind::Nic, [5])
        .device("nvme0n1", DeviceKind::Nvme, [2])
        .build()
}
