//! What watching costs, side by side in one run:
//!
//! 1. One instance with a large resident set (the allocation probe, `PINCTL_BENCH_MIB`, 2048
//!    by default): `numastat -p PID` (what operators run today: a process that walks
//!    numa_maps), pinctl's own numa_maps walk (the fallback), and the cgroup counters
//!    (`memory.numa_stat` of the probe's own cgroup v2; where this host has no cgroup v2
//!    memory controller, the v1 memory cgroup's `memory.numa_stat`, which the kernel fills from
//!    the same per-node counters). Median of ROUNDS, interleaved, and the ratios.
//! 2. A watch cycle over 64 instances (64 `sleep` processes found through PID files): the
//!    first cycle (every numa_maps walked) and steady cycles 10 s apart (wall and CPU time),
//!    and the share of one CPU that steady cycles take at that interval.
//!
//! 3. The same cycle on the cgroup path, composed from live parts, because this host may have
//!    no cgroup v2 memory controller (and a fake tree is read through the confined root's
//!    link resolution, which the live `/` never pays): the cycle over the same 64 processes
//!    when no numa_maps walk is due (threads, processes, host counters: what a cgroup-path
//!    cycle reads besides the counters), plus 64 times a live `memory.numa_stat` read (v2, or
//!    v1's, which the kernel fills from the same per-node counters) and the parse of a v2
//!    `memory.numa_stat` with every key for every node.
//!
//! Run with `cargo bench --bench drift` (scripts/bench drift). Numbers are reported, never
//! asserted; docs/drift.md quotes them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pinctl_config::DriftSettings;
use pinctl_drift::read::{Locator, Reader, Supervised};
use pinctl_drift::sample::NodeMemory;
use pinctl_drift::watch::{Target, Watcher, Watermark};
use pinctl_topology::MemoryPolicy;
use pinctl_topology::Placement;

const ROUNDS: usize = 15;

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn probe() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_pinctl")).with_file_name("pinctl-alloc-probe");
    if !bin.exists() {
        let release = bin.parent().is_some_and(|d| d.ends_with("release"));
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "pinctl-alloc-probe"]);
        if release {
            cmd.arg("--release");
        }
        assert!(cmd.status().expect("cargo").success(), "building the probe failed");
    }
    bin
}

fn time(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// The cgroup file whose counters stand for the cgroup path, and what it is.
fn cgroup_numa_stat(pid: u32) -> Option<(PathBuf, &'static str)> {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
    if v2 {
        let path = pinctl_sysfs::proc::pid::cgroup::path(&cg, None)?;
        let file =
            Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')).join("memory.numa_stat");
        return file.exists().then_some((file, "cgroup v2 memory.numa_stat"));
    }
    let path = pinctl_sysfs::proc::pid::cgroup::path(&cg, Some("memory"))?;
    let file = Path::new("/sys/fs/cgroup/memory")
        .join(path.trim_start_matches('/'))
        .join("memory.numa_stat");
    file.exists().then_some((file, "cgroup v1 memory.numa_stat (no cgroup v2 memory here)"))
}

fn large_instance() {
    let mib: u64 =
        std::env::var("PINCTL_BENCH_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(2048);
    let mut child = Command::new(probe())
        .args(["--mib", &mib.to_string(), "--hold"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the probe");
    let out = child.stdout.take().unwrap();
    let pid = child.id();
    let _guard = Guard(child);
    for line in BufReader::new(out).lines() {
        if line.expect("probe output") == "ready" {
            break;
        }
    }
    let numastat = Command::new("numastat").arg("-V").output().is_ok();
    let cgroup = cgroup_numa_stat(pid);
    let mut reader = Reader::new(Path::new("/"), Duration::from_secs(10));
    let (mut t_numastat, mut t_walk, mut t_cgroup) = (Vec::new(), Vec::new(), Vec::new());
    let mut resident = 0;
    for _ in 0..ROUNDS {
        if numastat {
            t_numastat.push(time(|| {
                let s = Command::new("numastat")
                    .args(["-p", &pid.to_string()])
                    .stdout(Stdio::null())
                    .status();
                assert!(s.is_ok_and(|s| s.success()), "numastat -p failed");
            }));
        }
        t_walk.push(time(|| {
            let maps = reader.numa_maps(pid).expect("numa_maps");
            resident = NodeMemory::from_numa_maps(&maps).total();
        }));
        if let Some((file, _)) = &cgroup {
            t_cgroup.push(time(|| {
                let text = std::fs::read_to_string(file).expect("memory.numa_stat");
                pinctl_sysfs::cgroup::numa_stat::parse(&text).expect("parses");
            }));
        }
    }
    println!(
        "one instance, {:.0} MiB resident (pid {pid}), median of {ROUNDS}:",
        resident as f64 / 1048576.0
    );
    let walk = median(t_walk);
    let rows = [
        ("numastat -p PID (process)", (!t_numastat.is_empty()).then(|| median(t_numastat.clone()))),
        ("pinctl numa_maps walk (in process)", Some(walk)),
        (
            cgroup.as_ref().map_or("cgroup counters: none here", |c| c.1),
            (!t_cgroup.is_empty()).then(|| median(t_cgroup.clone())),
        ),
    ];
    for (name, t) in &rows {
        match t {
            Some(t) => println!("  {name:<60} {:>10.1} us", t.as_secs_f64() * 1e6),
            None => println!("  {name:<60} {:>10}", "n/a"),
        }
    }
    if let Some(c) = rows[2].1 {
        if let Some(n) = rows[0].1 {
            println!(
                "  ratio numastat -p / cgroup counters: {:.0}x",
                n.as_secs_f64() / c.as_secs_f64()
            );
        }
        println!(
            "  ratio numa_maps walk / cgroup counters: {:.0}x",
            walk.as_secs_f64() / c.as_secs_f64()
        );
    }
}

/// 64 `sleep` processes found through PID files in `dir`, planned on every CPU and node.
fn sleepers(dir: &Path) -> (Vec<Target>, Vec<Guard>) {
    sleepers_on(dir, None, false)
}

/// The same, planned on `cpus` instead (every online CPU when `None`), and known by their PID
/// as a supervisor knows its instances (`supervised`) instead of through PID files.
fn sleepers_on(
    dir: &Path,
    cpus: Option<pinctl_topology::CpuSet>,
    supervised: bool,
) -> (Vec<Target>, Vec<Guard>) {
    let mut guards = Vec::new();
    let mut targets = Vec::new();
    let cpus: pinctl_topology::CpuSet = cpus.unwrap_or_else(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap().trim().parse().unwrap()
    });
    let nodes: pinctl_topology::NodeSet =
        std::fs::read_to_string("/sys/devices/system/node/online").unwrap().trim().parse().unwrap();
    for i in 0..64 {
        let child = Command::new("sleep").arg("600").spawn().expect("sleep");
        let pid_file = dir.join(format!("{i}.pid"));
        std::fs::write(&pid_file, child.id().to_string()).unwrap();
        targets.push(Target {
            instance: format!("i-{i}"),
            service: "i".into(),
            planned: Placement {
                cpus: cpus.clone(),
                nodes: nodes.clone(),
                memory_policy: MemoryPolicy::Default,
                memory_nodes: Default::default(),
            },
            settings: DriftSettings::default(),
            locator: match supervised {
                true => Locator {
                    supervised: Some(Supervised { pid: Some(child.id()), cgroup: None }),
                    ..Locator::default()
                },
                false => Locator { pid_file: Some(pid_file), ..Locator::default() },
            },
        });
        guards.push(Guard(child));
    }
    (targets, guards)
}

fn cycle_of_64() {
    let dir = tempfile::tempdir().unwrap();
    let (targets, _guards) = sleepers(dir.path());
    let interval = Duration::from_secs(10);
    let mut w = Watcher::new(Path::new("/"), targets, interval, Watermark::default());
    let first = time(|| {
        let r = w.cycle(Duration::ZERO, None);
        assert!(r.instances.iter().all(|i| i.sample.is_some()), "an instance was not sampled");
    });
    // Steady cycles as the loop makes them, 10 s apart: each walks the numa_maps that are due,
    // within the cycle's budget.
    const STEADY: u32 = 100;
    let cpu_before = cpu_time();
    let steady: Vec<Duration> =
        (1..=STEADY).map(|k| time(|| drop(w.cycle(interval * k, None)))).collect();
    let cpu_per_cycle = (cpu_time() - cpu_before) / STEADY;
    let steady = median(steady);
    println!("a watch cycle over 64 instances (numa_maps path):");
    println!(
        "  first cycle (64 numa_maps walks, host counters)      {:>10.1} us",
        first.as_secs_f64() * 1e6
    );
    println!(
        "  steady cycle (threads and host counters)             {:>10.1} us",
        steady.as_secs_f64() * 1e6
    );
    println!(
        "  steady cycle, CPU time (user + system over {STEADY})     {:>10.1} us",
        cpu_per_cycle.as_secs_f64() * 1e6
    );
    println!(
        "  share of one CPU at a 10 s interval                  {:>10.4} %",
        cpu_per_cycle.as_secs_f64() / interval.as_secs_f64() * 100.0
    );
}

/// The keys of a cgroup v2 `memory.numa_stat` (Linux 6.x), each with a value per node.
const NUMA_STAT_KEYS: [&str; 27] = [
    "anon",
    "file",
    "kernel_stack",
    "pagetables",
    "sec_pagetables",
    "shmem",
    "file_mapped",
    "file_dirty",
    "file_writeback",
    "swapcached",
    "anon_thp",
    "file_thp",
    "shmem_thp",
    "inactive_anon",
    "active_anon",
    "inactive_file",
    "active_file",
    "unevictable",
    "slab_reclaimable",
    "slab_unreclaimable",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "workingset_nodereclaim",
];

/// Everything a cgroup-path cycle reads but the counters, on the live /proc: 64 processes,
/// cycles 10 ms apart against a 10 s interval, so no numa_maps walk is due and the figures are
/// the last walk's. CPU and wall time per cycle, with kernel files kept open between cycles
/// (`hold`) or opened at every read (as before).
fn rest_of_cycle(
    planned_cpus: Option<pinctl_topology::CpuSet>,
    hold: bool,
    supervised: bool,
) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let (targets, guards) = sleepers_on(dir.path(), planned_cpus, supervised);
    // A running daemon's PID file was written long ago: the watcher reads a file changed
    // within the last second at every cycle (its stamp could still change unseen).
    std::thread::sleep(Duration::from_millis(2100));
    let interval = Duration::from_secs(10);
    let mut w = Watcher::new(Path::new("/"), targets, interval, Watermark::default());
    w.hold_files(hold);
    drop(w.cycle(Duration::ZERO, None));
    const CYCLES: u32 = 200;
    let cpu_before = cpu_time();
    let walls: Vec<Duration> = (1..=CYCLES)
        .map(|k| {
            time(|| {
                let r = w.cycle(Duration::from_millis(10) * k, None);
                let walked = r.instances.iter().find(|i| {
                    i.sample.as_ref().is_none_or(|s| {
                        s.source != pinctl_drift::sample::MemorySource::NumaMapsCached
                    })
                });
                assert!(walked.is_none(), "sampled afresh or not at all: {walked:?}");
            })
        })
        .collect();
    let rest_cpu = (cpu_time() - cpu_before) / CYCLES;
    drop(guards);
    (rest_cpu, median(walls))
}

fn basename(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

/// The median time of `f` over `n` calls.
fn median_of(n: usize, mut f: impl FnMut()) -> Duration {
    median((0..n).map(|_| time(&mut f)).collect())
}

fn cycle_of_64_cgroup() {
    // Interleaved, twice each, so both see the same machine.
    let mut held = Vec::new();
    let mut opened = Vec::new();
    for _ in 0..2 {
        held.push(rest_of_cycle(None, true, false));
        opened.push(rest_of_cycle(None, false, false));
    }
    let (sup_cpu, sup_wall) = rest_of_cycle(None, true, true);
    let best = |v: &[(Duration, Duration)]| v.iter().copied().min().unwrap();
    let ((held_cpu, held_wall), (open_cpu, open_wall)) = (best(&held), best(&opened));
    // The same, planned on the first online CPU only: every thread may run outside the plan,
    // so each one's stat (where it last ran) is read, as every thread's was before threads
    // confined to the plan were spared it.
    let online: pinctl_topology::CpuSet =
        std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap().trim().parse().unwrap();
    let first: pinctl_topology::CpuSet = online.iter().take(1).collect();
    let (stat_cpu, stat_wall) = rest_of_cycle((first != online).then_some(first), true, false);
    // The counters: the kernel's side is read on the live memory cgroup file this host has
    // (v2, or v1's, filled from the same per-node counters); the parse is of the v2 format,
    // every key for every node of this host.
    let nodes: pinctl_topology::NodeSet =
        std::fs::read_to_string("/sys/devices/system/node/online").unwrap().trim().parse().unwrap();
    let v2_text: String = NUMA_STAT_KEYS
        .iter()
        .enumerate()
        .map(|(k, key)| {
            let per_node: Vec<String> =
                nodes.iter().map(|n| format!("N{n}={}", (k as u64 + 1) * 40_960_000)).collect();
            format!("{key} {}\n", per_node.join(" "))
        })
        .collect();
    use pinctl_drift::sample::NodeMemory;
    use pinctl_sysfs::cgroup::numa_stat;
    let parse_all = median_of(2000, || {
        assert_eq!(numa_stat::parse(&v2_text).unwrap().len(), NUMA_STAT_KEYS.len());
    });
    let parse_used = median_of(2000, || {
        assert_eq!(numa_stat::parse_of(&v2_text, NodeMemory::NUMA_STAT_KEYS).unwrap().len(), 3);
    });
    println!("a watch cycle over 64 instances (cgroup path, composed on this host):");
    println!(
        "  everything but the counters (threads, processes, host), files held:  wall {:>8.1} us, CPU {:>8.1} us",
        held_wall.as_secs_f64() * 1e6,
        held_cpu.as_secs_f64() * 1e6
    );
    println!(
        "  the same, every file opened at each read (before):                  wall {:>8.1} us, CPU {:>8.1} us",
        open_wall.as_secs_f64() * 1e6,
        open_cpu.as_secs_f64() * 1e6
    );
    println!(
        "  the same, known by PID as under pinctl run (no PID file):         wall {:>8.1} us, CPU {:>8.1} us",
        sup_wall.as_secs_f64() * 1e6,
        sup_cpu.as_secs_f64() * 1e6
    );
    println!(
        "  files held, every thread's stat read (threads not confined to the plan): wall {:>8.1} us, CPU {:>8.1} us",
        stat_wall.as_secs_f64() * 1e6,
        stat_cpu.as_secs_f64() * 1e6
    );
    println!(
        "  parsing one v2 memory.numa_stat ({} keys x {} nodes): every key {:>6.2} us, the 3 used {:>6.2} us",
        NUMA_STAT_KEYS.len(),
        nodes.len(),
        parse_all.as_secs_f64() * 1e6,
        parse_used.as_secs_f64() * 1e6
    );
    // What a cgroup-path sample reads of the instance's cgroup each cycle: memory.numa_stat,
    // cgroup.procs (is the instance still alone in it) and the process's /proc/PID/cgroup.
    let own = std::process::id();
    let Some((numa_stat, what)) = cgroup_numa_stat(own) else {
        println!("  no memory cgroup file here: the counters' read is not measured");
        return;
    };
    let files = [
        numa_stat.clone(),
        numa_stat.with_file_name("cgroup.procs"),
        PathBuf::from(format!("/proc/{own}/cgroup")),
    ];
    let rels: Vec<String> =
        files.iter().map(|f| f.to_string_lossy().trim_start_matches('/').to_string()).collect();
    use pinctl_sysfs::KernelFiles as _;
    let mut holder = pinctl_sysfs::held::KeptOpen::new();
    let (mut by_path, mut by_held) = (Vec::new(), Vec::new());
    for _ in 0..500 {
        by_path.push(time(|| {
            for f in &files {
                drop(std::fs::read_to_string(f).unwrap());
            }
        }));
        by_held.push(time(|| {
            for r in &rels {
                assert!(holder.text(r).unwrap().is_some());
            }
            holder.end_cycle();
        }));
    }
    let (by_path, by_held) = (median(by_path), median(by_held));
    let by_held_each: Vec<Duration> = rels
        .iter()
        .map(|r| {
            median_of(500, || {
                assert!(holder.text(r).unwrap().is_some());
                holder.end_cycle();
            })
        })
        .collect();
    let each: Vec<String> = rels
        .iter()
        .zip(&by_held_each)
        .map(|(r, t)| format!("{} {:.2} us", basename(r), t.as_secs_f64() * 1e6))
        .collect();
    println!(
        "  reading a live {what}, cgroup.procs and /proc/PID/cgroup: opened {:>6.2} us, held {:>6.2} us",
        by_path.as_secs_f64() * 1e6,
        by_held.as_secs_f64() * 1e6
    );
    println!("    held, one at a time: {}", each.join(", "));
    // Now a PID-file instance's own cgroup is looked up in /proc/PID/cgroup once and
    // trusted while its cgroup.procs lists it: two held files a cycle, where three were
    // opened. A supervised one reads the same two, without a PID file.
    let counters = by_held_each[0] + by_held_each[1] + parse_used;
    let before = open_cpu + (by_path + parse_all) * 64;
    let after = held_cpu + counters * 64;
    let supervised = sup_cpu + counters * 64;
    println!(
        "  cycle over 64 = the rest + 64 x (cgroup files + parse): before {:>8.1} us, now {:>8.1} us, under pinctl run {:>8.1} us",
        before.as_secs_f64() * 1e6,
        after.as_secs_f64() * 1e6,
        supervised.as_secs_f64() * 1e6
    );
    println!(
        "  (every {} cycles, a numa_maps walk per instance for its policies comes on top)",
        pinctl_drift::read::POLICY_WALK_INTERVALS
    );
}

/// User and system time of this process so far (`CLOCK_PROCESS_CPUTIME_ID`).
fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn main() {
    // `cargo bench` passes --bench; a plain run takes no arguments either.
    // PINCTL_BENCH_ONLY=cgroup-cycle runs the last part alone (for a profiler).
    if std::env::var("PINCTL_BENCH_ONLY").as_deref() != Ok("cgroup-cycle") {
        large_instance();
        cycle_of_64();
    }
    cycle_of_64_cgroup();
}
