//! Planner time on two synthetic hosts: 64 instances on 16 nodes (target under 5 ms) and 1,000
//! instances on 256 nodes (target under 1 s), the latter also with half of its instances
//! sharing nodes (`share-nodes`) on a host with two L3s per node, and 8,192 instances (the
//! instance limit) all sharing 16 nodes (target under 2 s and 256 MiB of peak memory). Prints
//! the median, fastest and slowest of several runs, whether the search proved the plan optimal
//! within its step budget, and the process's peak resident memory so far.
//!
//! Also 4,096 nodes planned with and without a measurement of 16,384 pairs (about as fast).
//!
//! Run: `cargo bench --bench plan` (or `cargo bench --bench plan -- sharing` for the 8,192
//! sharing instances alone, in a fresh process, so its peak memory is its own; `-- measured`
//! for the measured nodes alone).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use pinctl_config::Config;
use pinctl_plan::PlanInputs;
use pinctl_testkit::{GIB, SyntheticTopology};
use pinctl_topology::{CpuSet, DeviceKind, Topology};

/// `sockets` x `per_socket` nodes of `cores` cores with 2 SMT threads each; distances
/// 10 / 12 within a socket / 32 across; `nvme{i}n1` on every `stride`-th node, `eth0` on the
/// last node.
fn host(sockets: u32, per_socket: u32, cores: u32, drives: u32) -> Topology {
    let n = sockets * per_socket;
    let threads = n * cores;
    let mut host = SyntheticTopology::new();
    for node in 0..n {
        let first = node * cores;
        let set: CpuSet =
            (first..first + cores).chain(threads + first..threads + first + cores).collect();
        host = host.node(set, node / per_socket, Some(64 * GIB));
    }
    host = host.cores(move |c| c % threads).distances_by_package(12, 32);
    let stride = n / drives;
    for d in 0..drives {
        host = host.device(&format!("nvme{d}n1"), DeviceKind::Nvme, [d * stride + 1]);
    }
    host.device("eth0", DeviceKind::Nic, [n - 1]).build()
}

fn service(name: &str, instances: u32, size: &str, memory: &str, near: bool) -> String {
    let near = if near { "near = [\"nvme{instance}n1\"]\n" } else { "" };
    format!(
        "[service.{name}]\ncommand = [\"/usr/bin/{name}\"]\ninstances = {instances}\n{size}\n\
         memory = \"{memory}\"\nmemory-policy = \"bind\"\n{near}\n"
    )
}

fn config(text: &str) -> Config {
    pinctl_config::parse(Path::new("bench.toml"), text)
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn inputs(topology: &Topology, config: &Config) -> PlanInputs {
    let mut near = BTreeMap::new();
    for (_, instance) in config.instances() {
        for spec in &instance.near {
            let found = topology.device(spec).map(|d| vec![d.name.clone()]).unwrap_or_default();
            near.insert(spec.clone(), found);
        }
    }
    PlanInputs { near, strict: false, ..PlanInputs::default() }
}

fn bench(label: &str, topology: &Topology, config: &Config, runs: usize, target: Duration) {
    let inputs = inputs(topology, config);
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let plan = pinctl_plan::plan(topology, config, &inputs);
        times.push(start.elapsed());
        last = Some(plan);
    }
    let plan = match last {
        Some(Ok(plan)) => plan,
        Some(Err(e)) => panic!("{label}: {e}"),
        None => return,
    };
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "{label}: median {:.3} ms (min {:.3}, max {:.3}, {runs} runs; target < {} ms) {} instances, \
         {} warnings, optimal: {}",
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        target.as_millis(),
        plan.placements.len(),
        plan.warnings.len(),
        plan.optimal,
    );
    for w in plan.warnings.iter().take(3) {
        println!("  warning: {w}");
    }
}

/// The peak resident memory of this process so far (`VmHWM` of /proc/self/status), for the
/// memory targets; `None` where procfs does not say.
fn peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 =
        line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024)
}

/// 8,192 instances (the instance limit) of `share-nodes = "always"` on 16 nodes: 512 to a
/// node, every one sharing its node's CPUs with 511 others (issue 26: a list of sharers per
/// instance took 3.8 GiB and 25 s here).
fn sharing_at_the_instance_limit() {
    let host = host(2, 8, 8, 4);
    let text = format!(
        "[host]\nkeep-free = [\"eth0\"]\n\n{}",
        service("tidb", pinctl_config::MAX_INSTANCES, "share-nodes = \"always\"", "64MiB", false),
    );
    let config = config(&text);
    bench("8192 sharing instances / 16 nodes", &host, &config, 3, Duration::from_secs(2));
    match peak_rss_mib() {
        Some(mib) => println!("  peak resident memory of the process: {mib} MiB (target <= 256)"),
        None => println!("  peak resident memory: unknown (no /proc/self/status)"),
    }
}

/// 4,096 nodes (the node-id ceiling), 4 of them with CPUs and the rest memory-only (CXL-like),
/// planned with and without a measurement of every CPU node to every memory node (16,384
/// pairs): the planner looks each pair up once when it builds its distance table, so both
/// should take about as long (issue 26: a search of the pairs per lookup took 80 s).
fn measured_nodes() {
    const NODES: u32 = 4096;
    let mut host = SyntheticTopology::new();
    for node in 0..NODES {
        let cpus: CpuSet =
            if node < 4 { (node * 8..node * 8 + 8).collect() } else { CpuSet::new() };
        host = host.node(cpus, node / 2048, Some(GIB));
    }
    let plain = host.distances_by_package(12, 32).build();
    let mut measured = plain.clone();
    let pairs = (0..4).flat_map(|c| {
        (0..NODES).map(move |m| (c, m, if c == m { 90.0 } else { 140.0 + f64::from(m % 7) }))
    });
    measured.memory_performance.measured = Some(pinctl_testkit::measurement(pairs));
    let text =
        format!("[host]\nkeep-free = []\n\n{}", service("db", 4, "nodes = 1", "256MiB", false));
    let config = config(&text);
    bench("4096 nodes, not measured", &plain, &config, 3, Duration::from_secs(2));
    bench("4096 nodes, 16384 pairs measured", &measured, &config, 3, Duration::from_secs(2));
}

fn main() {
    if std::env::args().skip(1).any(|a| a == "sharing") {
        sharing_at_the_instance_limit();
        return;
    }
    if std::env::args().skip(1).any(|a| a == "measured") {
        measured_nodes();
        return;
    }
    // 16 nodes (2 sockets x 8) of 8 cores / 16 CPUs: 4 storage instances next to their
    // drives, 2 two-node analytics instances, 16 API servers of 4 CPUs, 42 workers of 1 CPU.
    let small = host(2, 8, 8, 4);
    let text = format!(
        "[host]\nkeep-free = [\"eth0\"]\n\n{}{}{}{}",
        service("store", 4, "nodes = 1", "32GiB", true),
        service("analytics", 2, "nodes = 2", "64GiB", false),
        service("api", 16, "cpus = 4", "4GiB", false),
        service("worker", 42, "cpus = 1", "1GiB", false),
    );
    let small_config = config(&text);
    assert_eq!(small_config.instances().count(), 64);
    bench("64 instances / 16 nodes", &small, &small_config, 51, Duration::from_millis(5));

    // 256 nodes (8 sockets x 32) of 4 cores / 8 CPUs: 32 storage instances next to their
    // drives, 16 four-node instances, 100 of 4 CPUs, 852 of 1 CPU.
    let large = host(8, 32, 4, 32);
    let text = format!(
        "[host]\nkeep-free = [\"eth0\"]\n\n{}{}{}{}",
        service("store", 32, "nodes = 1", "32GiB", true),
        service("olap", 16, "nodes = 4", "128GiB", false),
        service("api", 100, "cpus = 4", "4GiB", false),
        service("worker", 852, "cpus = 1", "1GiB", false),
    );
    let large_config = config(&text);
    assert_eq!(large_config.instances().count(), 1000);
    bench("1000 instances / 256 nodes", &large, &large_config, 7, Duration::from_secs(1));

    // The same host with two L3s per node (of two cores each), and half of its instances
    // sharing nodes: 100 that want a node each where there is room (no size), 400 that share on
    // purpose, beside the owners and `cpus = N` instances.
    let cached = {
        let mut t = large.clone();
        let threads = t.cpus.len() as u32 / 2;
        let mut caches: BTreeMap<u32, CpuSet> = BTreeMap::new();
        for c in &t.cpus {
            caches.entry(c.id % threads / 2).or_default().insert(c.id);
        }
        t.caches = caches
            .into_values()
            .map(|cpus| pinctl_topology::Cache { level: 3, cpus, size_bytes: None })
            .collect();
        t
    };
    let text = format!(
        "[host]\nkeep-free = [\"eth0\"]\n\n{}{}{}{}{}{}",
        service("store", 32, "nodes = 1", "32GiB", true),
        service("olap", 16, "nodes = 4", "128GiB", false),
        service("api", 100, "cpus = 4", "4GiB", false),
        service("worker", 352, "cpus = 1", "1GiB", false),
        service("db", 100, "", "8GiB", false),
        service("tidb", 400, "share-nodes = \"always\"", "2GiB", false),
    );
    let sharing_config = config(&text);
    assert_eq!(sharing_config.instances().count(), 1000);
    bench(
        "1000 instances / 256 nodes, 500 sharing, 2 L3s a node",
        &cached,
        &sharing_config,
        7,
        Duration::from_secs(1),
    );

    // The same host with 13 more CPUs of demand than it has: how long the planner takes to
    // say no (it has to search before giving up).
    let text = format!(
        "[host]\nkeep-free = [\"eth0\"]\n\n{}{}{}{}",
        service("store", 32, "nodes = 1", "32GiB", true),
        service("olap", 16, "nodes = 4", "128GiB", false),
        service("api", 110, "cpus = 4", "4GiB", false),
        service("worker", 853, "cpus = 1", "1GiB", false),
    );
    let too_big = config(&text);
    let inputs = inputs(&large, &too_big);
    let start = Instant::now();
    let result = pinctl_plan::plan(&large, &too_big, &inputs);
    println!(
        "infeasible 1011 instances / 256 nodes: {:.3} ms to fail: {}",
        start.elapsed().as_secs_f64() * 1e3,
        result.err().map_or_else(|| "no error?".to_string(), |e| e.to_string())
    );

    measured_nodes();
    sharing_at_the_instance_limit();
}
