//! A fleet planned in one run: `pinctl fleet -c FILE --captures DIR --json` over 1,000 host
//! captures of mixed shapes (every bundled snapshot in configs/topologies and, where the shared
//! fixtures are beside the checkout, their sysfs trees and hwloc XML files, dealt out in turn),
//! timed end to end (reading each capture, checking, planning, writing JSON), with its peak
//! resident set as `/usr/bin/time -v` reports it. The sysfs trees are what a fleet collects:
//! each fixture tarball unpacked (`tar`) and captured with `pinctl topology --capture`. The
//! same over 100 hosts shows whether memory grows with the fleet (it should not: hosts are
//! planned a batch at a time), and one run over the fixture files as they are (upstream's whole
//! sysfs dumps in bzip2) shows what reading those costs.
//!
//! Run: `cargo bench --bench fleet` (`PINCTL_BENCH_HOSTS` changes the 1,000). Numbers are
//! reported, never asserted; docs/fleet.md quotes them. Target: 1,000 hosts in 10 s.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 3;

/// The service file every host runs: two one-node instances that share nodes when a host
/// has fewer, beside a one-CPU instance.
const SERVICE_FILE: &str = "\
[service.db]
command = [\"/usr/bin/db\", \"--port\", \"330{instance}\"]
instances = 2
memory-policy = \"preferred\"

[service.cache]
command = [\"/usr/bin/cache\"]
cpus = 1
";

/// Every capture shape at hand, with the suffix that tells its kind.
fn shapes() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    let mut add = |dir: PathBuf| {
        let Ok(entries) = fs::read_dir(&dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let suffix =
                [".tar.bz2", ".tar.gz", ".json", ".xml"].into_iter().find(|s| name.ends_with(s));
            if let Some(s) = suffix {
                found.push((e.path(), s.to_string()));
            }
        }
    };
    add(root.join("configs/topologies"));
    let shared = root.join("../shared/fixtures/topologies");
    if let Ok(fixtures) = fs::read_dir(&shared) {
        for f in fixtures.flatten() {
            add(f.path().join("raw"));
        }
    } else {
        eprintln!("note: {} is absent: bundled snapshots only", shared.display());
    }
    found.sort();
    found
}

/// What a fleet would have collected of each shape: `pinctl topology --capture` of a sysfs
/// tree (a tarball fixture unpacked, then captured: only the files discovery reads, gzip),
/// snapshots and hwloc XML as they are.
fn pinctl_captures(shapes: &[(PathBuf, String)], dir: &Path) -> Vec<(PathBuf, String)> {
    let pinctl = env!("CARGO_BIN_EXE_pinctl");
    let mut out = Vec::new();
    for (k, (path, suffix)) in shapes.iter().enumerate() {
        if !suffix.starts_with(".tar") {
            out.push((path.clone(), suffix.clone()));
            continue;
        }
        let tree = dir.join(format!("tree-{k}"));
        fs::create_dir_all(&tree).unwrap();
        let unpacked = Command::new("tar").arg("-xf").arg(path).arg("-C").arg(&tree).status();
        assert!(unpacked.is_ok_and(|s| s.success()), "tar -xf {}", path.display());
        let root = sysfs_root(&tree).unwrap_or_else(|| panic!("no sys/ in {}", path.display()));
        let capture = dir.join(format!("shape-{k}.tar.gz"));
        let captured = Command::new(pinctl)
            .args(["topology", "--topology"])
            .arg(&root)
            .arg("--capture")
            .arg(&capture)
            .stdout(Stdio::null())
            .status();
        assert!(captured.is_ok_and(|s| s.success()), "capturing {}", root.display());
        out.push((capture, ".tar.gz".to_string()));
    }
    out
}

/// The folder under `dir` that holds `sys/`.
fn sysfs_root(dir: &Path) -> Option<PathBuf> {
    if dir.join("sys").is_dir() {
        return Some(dir.to_path_buf());
    }
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().is_dir())
        .find_map(|e| sysfs_root(&e.path()))
}

/// `hosts` captures in a fresh folder, `host-0000.json` and on, shapes dealt out in turn.
fn fleet(dir: &Path, hosts: usize, shapes: &[(PathBuf, String)]) {
    for i in 0..hosts {
        let (from, suffix) = &shapes[i % shapes.len()];
        fs::copy(from, dir.join(format!("host-{i:04}{suffix}"))).expect("copying a capture");
    }
}

/// One run: its wall time, its peak RSS in KiB (when /usr/bin/time is there) and its output's
/// size.
fn run(config: &Path, captures: &Path) -> (Duration, Option<u64>, usize) {
    let pinctl = env!("CARGO_BIN_EXE_pinctl");
    let timed = Path::new("/usr/bin/time").exists();
    let mut cmd = if timed {
        let mut c = Command::new("/usr/bin/time");
        c.args(["-v", pinctl]);
        c
    } else {
        Command::new(pinctl)
    };
    cmd.arg("fleet").arg("-c").arg(config).arg("--captures").arg(captures).arg("--json");
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).output().expect("running pinctl");
    let wall = start.elapsed();
    // Exit 1 only says some host has no plan (a memory-only-node fixture); JSON was written.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rss = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes): "))
        .and_then(|v| v.trim().parse().ok());
    (wall, rss, out.stdout.len())
}

fn measure(what: &str, hosts: usize, shapes: &[(PathBuf, String)], rounds: usize) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let captures = dir.path().join("captures");
    fs::create_dir(&captures).unwrap();
    fleet(&captures, hosts, shapes);
    let config = dir.path().join("fleet.toml");
    fs::write(&config, SERVICE_FILE).unwrap();
    let mut runs: Vec<(Duration, Option<u64>, usize)> =
        (0..rounds).map(|_| run(&config, &captures)).collect();
    runs.sort();
    let (wall, _, bytes) = runs[rounds / 2];
    let rss = runs.iter().filter_map(|r| r.1).max();
    println!(
        "{what}, {hosts:>5} hosts: median {:.2} s (fastest {:.2} s, slowest {:.2} s of {rounds}), \
         {:.1} ms a host, peak RSS {}, {} KiB of JSON",
        wall.as_secs_f64(),
        runs[0].0.as_secs_f64(),
        runs[rounds - 1].0.as_secs_f64(),
        wall.as_secs_f64() * 1000.0 / hosts as f64,
        rss.map_or("unknown (no /usr/bin/time)".to_string(), |k| format!(
            "{:.1} MiB",
            k as f64 / 1024.0
        )),
        bytes / 1024
    );
}

fn main() {
    let hosts: usize =
        std::env::var("PINCTL_BENCH_HOSTS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let shapes = shapes();
    let kinds = |s: &str| shapes.iter().filter(|(_, k)| k == s).count();
    println!(
        "pinctl fleet --json, {} shapes ({} snapshots, {} sysfs tarballs, {} hwloc XML), \
         {} CPUs here",
        shapes.len(),
        kinds(".json"),
        kinds(".tar.bz2") + kinds(".tar.gz"),
        kinds(".xml"),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let work = tempfile::tempdir().expect("a temporary folder");
    let captured = pinctl_captures(&shapes, work.path());
    let what = "pinctl captures of the shapes";
    measure(what, hosts / 10, &captured, ROUNDS);
    measure(what, hosts, &captured, ROUNDS);
    // The fixtures as they are: upstream's whole sysfs dumps, most in bzip2, many times the
    // files a capture holds (decompressing them is most of the time).
    measure("the fixture files as they are", hosts, &shapes, 1);
}
