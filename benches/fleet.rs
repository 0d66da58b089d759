//! A fleet planned in one run: `pinctl fleet -c FILE --captures DIR --json` over 1,000 host
//! captures of mixed shapes (every bundled snapshot in configs/topologies and, where the shared
//! fixtures are beside the checkout, their sysfs tarballs and hwloc XML files, dealt out in
//! turn), timed end to end (reading each capture, checking, planning, writing JSON), with its
//! peak resident set as `/usr/bin/time -v` reports it. The same over 100 hosts shows whether
//! memory grows with the fleet (it should not: hosts are planned a batch at a time).
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

fn measure(hosts: usize, shapes: &[(PathBuf, String)]) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let captures = dir.path().join("captures");
    fs::create_dir(&captures).unwrap();
    fleet(&captures, hosts, shapes);
    let config = dir.path().join("fleet.toml");
    fs::write(&config, SERVICE_FILE).unwrap();
    let mut runs: Vec<(Duration, Option<u64>, usize)> =
        (0..ROUNDS).map(|_| run(&config, &captures)).collect();
    runs.sort();
    let (wall, _, bytes) = runs[ROUNDS / 2];
    let rss = runs.iter().filter_map(|r| r.1).max();
    println!(
        "{hosts:>5} hosts: median {:.2} s (fastest {:.2} s, slowest {:.2} s), {:.1} ms a host, \
         peak RSS {}, {} KiB of JSON",
        wall.as_secs_f64(),
        runs[0].0.as_secs_f64(),
        runs[ROUNDS - 1].0.as_secs_f64(),
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
    measure(hosts / 10, &shapes);
    measure(hosts, &shapes);
}
