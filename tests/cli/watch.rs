//! `pinctl watch` on this host (one NUMA node): instances are processes started here (the
//! allocation probe, launched through `pinctl exec` so they sit where the plan puts them),
//! found through a PID file. Every wait is bounded; every process started is killed by PID
//! in a guard. No timing is asserted.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// Kills and reaps a child when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The allocation probe, built next to pinctl (a workspace binary); built here when a
/// narrower `cargo test` did not build it.
fn probe() -> PathBuf {
    let path = Path::new(crate::support::PINCTL).with_file_name("pinctl-alloc-probe");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "pinctl-alloc-probe"])
            .status()
            .expect("running cargo to build the probe");
        assert!(status.success(), "building pinctl-alloc-probe failed");
    }
    assert!(path.exists(), "no probe at {}", path.display());
    path
}

/// Lines of a child's stdout, read on a thread.
fn lines_of(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing every word of `words`; returns it. Panics after [`WAIT`].
fn wait_for(rx: &Receiver<String>, words: &[&str], seen: &mut Vec<String>) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if words.iter().all(|w| line.contains(w)) {
                    return line;
                }
            }
            Err(_) => panic!("no line with {words:?} within {WAIT:?}; saw:\n{}", seen.join("\n")),
        }
    }
}

struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    probe: Guard,
    pid: u32,
}

/// A service file for one probe instance with `extra` keys, and the probe started through
/// `pinctl exec` where the plan puts it, its PID in the PID file.
fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("probe.pid");
    let config = dir.path().join("pinctl.toml");
    let text = format!(
        // The node watermark low: on a host whose page cache fills its one node (a CI machine
        // after the build), the node's free memory says nothing about these tests' drift.
        "[host]\nkeep-free = []\nwatch-interval = \"200ms\"\nnode-free-watermark = \"1MiB\"\n\n\
         [service.probe]\ncommand = [\"{}\"]\n\
         cpus = 1\nmemory-policy = \"bind\"\npid-file = \"{}\"\nmin-memory = \"1MiB\"\n{extra}\n",
        probe().display(),
        pid_file.display()
    );
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(crate::support::PINCTL)
        .arg("exec")
        .arg("-c")
        .arg(&config)
        .args(["--service", "probe", "--"])
        .arg(probe())
        .args(["--mib", "16", "--hold"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = child.id();
    let rx = lines_of(&mut child);
    let guard = Guard(child);
    wait_for(&rx, &["ready"], &mut Vec::new());
    std::fs::write(&pid_file, pid.to_string()).unwrap();
    Setup { dir, config, probe: guard, pid }
}

fn allowed_cpus(pid: u32) -> String {
    crate::supervisor::allowed_cpus(pid as i32)
}

/// The CPUs a drift line says the watch holds the instance to (`outside CPUs 0-3:`). They
/// can differ from those `exec` gave: each plans the whole host when it starts, and other
/// tests' supervisors come and go in between.
fn watched_cpus(drift_line: &str) -> String {
    let (_, after) = drift_line.split_once("outside CPUs ").expect(drift_line);
    after.split(':').next().unwrap().to_string()
}

fn taskset(cpus: &str, pid: u32) {
    let out = Command::new("taskset").args(["-p", "-c", cpus, &pid.to_string()]).output().unwrap();
    assert!(out.status.success(), "taskset: {}", String::from_utf8_lossy(&out.stderr));
}

fn every_cpu() -> String {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    online.trim().to_string()
}

fn watch(s: &Setup) -> (Guard, Receiver<String>) {
    let mut child = Command::new(crate::support::PINCTL)
        .arg("watch")
        .arg("-c")
        .arg(&s.config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    (Guard(child), rx)
}

fn needs_two_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "these tests move a thread between CPUs: this host has {cpus}");
}

#[test]
fn once_samples_the_probe_and_says_where_its_memory_comes_from() {
    let s = setup("");
    let out = Command::new(crate::support::PINCTL)
        .arg("watch")
        .arg("-c")
        .arg(&s.config)
        .args(["--once", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let i = &v["instances"][0];
    assert_eq!(i["instance"], "probe");
    let sample = &i["sample"];
    assert_eq!(sample["pids"][0], s.pid);
    let anon: u64 =
        sample["memory"].as_object().unwrap().values().map(|n| n["anon"].as_u64().unwrap()).sum();
    assert!(anon >= 16 << 20, "the probe touched 16 MiB, sampled {anon} bytes of anon memory");
    // Placed by pinctl exec: bound where the plan says, threads in place, memory local.
    assert_eq!(i["local_fraction"], 1.0);
    assert_eq!(i["threads_out_of_place"], 0);
    assert!(i["findings"].as_array().unwrap().is_empty(), "{i}");
    // Whether the cgroup path or numa_maps was used depends on this host; either way it is said.
    let cgroup_v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
    if cgroup_v2 {
        // The probe shares its cgroup with this test, so numa_maps is walked.
        assert_eq!(sample["source"], "numa_maps");
    } else {
        assert_eq!(sample["source"], "numa_maps");
        let notes = v["notices"].as_array().unwrap();
        assert!(
            notes.iter().any(|n| n.as_str().unwrap().contains("not a cgroup v2 hierarchy")),
            "{notes:?}"
        );
    }
    let text = Command::new(crate::support::PINCTL)
        .arg("watch")
        .arg("-c")
        .arg(&s.config)
        .arg("--once")
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains(&format!("pids {}", s.pid)), "{text}");
    assert!(text.contains("local 100.0%; 0 of 1 threads out of place"), "{text}");
    drop(s.probe);
    drop(s.dir);
}

/// `watch --once` exits as a monitoring plugin does: 0 in place (the test above), 1 drift,
/// 2 an instance not sampled, 3 a file it cannot use, each with its report.
#[test]
fn once_exits_with_a_check_s_statuses() {
    needs_two_cpus();
    let s = setup("");
    let once = |config: &std::path::Path| {
        Command::new(crate::support::PINCTL)
            .arg("watch")
            .arg("-c")
            .arg(config)
            .args(["--once", "--json"])
            .output()
            .unwrap()
    };
    taskset(&every_cpu(), s.pid);
    let out = once(&s.config);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = v["instances"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[0].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["cpu"], "{v}");

    let missing = s.dir.path().join("missing.toml");
    std::fs::write(
        &missing,
        format!(
            "[host]\nkeep-free = []\n\n[service.gone]\ncommand = [\"sleep\"]\ncpus = 1\n\
             pid-file = \"{}\"\n",
            s.dir.path().join("gone.pid").display()
        ),
    )
    .unwrap();
    let out = once(&missing);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["instances"][0]["sample"].is_null(), "{v}");

    let out = once(&s.dir.path().join("no-such-file.toml"));
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: ") && err.contains("no-such-file.toml"), "{err}");
    drop(s.probe);
    drop(s.dir);
}

/// The loop's `--json` lines carry figures as numbers and PIDs as an array of numbers.
#[test]
fn loop_json_lines_carry_numbers_as_numbers() {
    let s = setup("");
    let mut child = Command::new(crate::support::PINCTL)
        .arg("watch")
        .arg("-c")
        .arg(&s.config)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    let _watch = Guard(child);
    let mut seen = Vec::new();
    let watch: serde_json::Value =
        serde_json::from_str(&wait_for(&rx, &["\"event\":\"watch\""], &mut seen)).unwrap();
    assert_eq!(watch["instances"], 1, "{watch}");
    assert!(watch["interval_seconds"].is_number(), "{watch}");
    let found: serde_json::Value =
        serde_json::from_str(&wait_for(&rx, &["\"status\":\"found\""], &mut seen)).unwrap();
    assert_eq!(found["pids"], serde_json::json!([s.pid]), "{found}");
    assert_eq!(found["instance"], "probe");
    drop(s.probe);
}

#[test]
fn a_thread_moved_with_taskset_is_cpu_drift_and_rebalance_repins_it() {
    needs_two_cpus();
    let s = setup("on-drift = \"rebalance\"\ndrift-hold = \"0s\"\nrebalance-cooldown = \"0s\"\n");
    let planned = allowed_cpus(s.pid);
    let all = every_cpu();
    assert_ne!(planned, all, "the plan gave the probe every CPU");
    let (_watch, rx) = watch(&s);
    let mut seen = Vec::new();
    wait_for(&rx, &["instance", "status=found"], &mut seen);
    taskset(&all, s.pid);
    let start = wait_for(&rx, &["drift", "edge=start", "kind=cpu"], &mut seen);
    let line = wait_for(&rx, &["rebalance", "instance=probe", "threads_repinned=1"], &mut seen);
    assert!(line.contains("threads_complete=true"), "{line}");
    assert_eq!(allowed_cpus(s.pid), watched_cpus(&start));
    wait_for(&rx, &["drift", "edge=end", "kind=cpu"], &mut seen);
}

#[test]
fn an_alert_service_alerts_once_per_episode_and_is_not_touched() {
    needs_two_cpus();
    let marker = tempfile::tempdir().unwrap();
    let alerts = marker.path().join("alerts");
    let s = setup(&format!(
        "drift-hold = \"0s\"\nalert-cooldown = \"0s\"\n\
         alert-command = [\"sh\", \"-c\", \"echo $PINCTL_INSTANCE $PINCTL_DRIFT_KIND $PINCTL_EPISODE >> {}\"]\n",
        alerts.display()
    ));
    let all = every_cpu();
    let (_watch, rx) = watch(&s);
    let mut seen = Vec::new();
    wait_for(&rx, &["instance", "status=found"], &mut seen);
    taskset(&all, s.pid);
    let start =
        wait_for(&rx, &["drift", "edge=start", "kind=cpu", "episode=1", "alert=yes"], &mut seen);
    let planned = watched_cpus(&start);
    // The drift goes on for more cycles: no new start, no new alert, nothing changed.
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&alerts).is_ok_and(|t| !t.is_empty()) {
        assert!(Instant::now() < deadline, "the alert command never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(allowed_cpus(s.pid), all, "an alert instance was re-pinned");
    // End the episode by hand and start a second one: exactly one more alert.
    taskset(&planned, s.pid);
    wait_for(&rx, &["drift", "edge=end", "kind=cpu", "episode=1"], &mut seen);
    taskset(&all, s.pid);
    wait_for(&rx, &["drift", "edge=start", "kind=cpu", "episode=2"], &mut seen);
    let deadline = Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(&alerts).unwrap_or_default();
        if text.lines().count() >= 2 {
            assert_eq!(text, "probe cpu 1\nprobe cpu 2\n");
            break;
        }
        assert!(Instant::now() < deadline, "no second alert: {text:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !seen.iter().any(|l| l.starts_with("rebalance")),
        "an alert instance was rebalanced:\n{}",
        seen.join("\n")
    );
}

/// A `pinctl run` whose drift lines (stderr) are read on a thread; dropped, it stops the
/// supervisor (SIGTERM, then KILL after a bounded wait) and kills every probe it started, by
/// PID, after checking the PID is still a probe.
struct Supervisor {
    child: Option<Child>,
    probes: Vec<u32>,
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        use crate::supervisor::signal;
        use rustix::process::Signal;
        if let Some(mut child) = self.child.take() {
            let _ = signal(child.id() as i32, Signal::TERM);
            let deadline = Instant::now() + WAIT;
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let probes = crate::supervisor::processes(|a| a.join(" ").contains("pinctl-alloc-probe"));
        for &pid in &self.probes {
            if probes.contains(&(pid as i32)) {
                let _ = signal(pid as i32, Signal::KILL);
            }
        }
    }
}

/// The PID of a `pinctl: probe: started as PID on ...` line.
fn started_pid(line: &str) -> u32 {
    let rest = line.split("started as ").nth(1).unwrap();
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// One `GET /metrics` over a plain socket (classic text format).
fn scrape(url_line: &str) -> String {
    use std::io::{Read, Write};
    let addr = url_line.split("http://").nth(1).unwrap().trim_end_matches("/metrics");
    let mut s = std::net::TcpStream::connect(addr.trim()).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn pinctl_run_watches_its_instances_repins_a_moved_thread_and_follows_restarts() {
    needs_two_cpus();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("pinctl.toml");
    let text = format!(
        "[host]\nkeep-free = []\nwatch-interval = \"200ms\"\nmetrics-listen = \"127.0.0.1:0\"\n\
         node-free-watermark = \"1MiB\"\n\n[service.probe]\ncommand = [\"{}\", \"--mib\", \"4\", \"--hold\"]\ncpus = 1\n\
         memory-policy = \"bind\"\nmin-memory = \"1MiB\"\non-drift = \"rebalance\"\n\
         drift-hold = \"0s\"\nrebalance-cooldown = \"0s\"\n",
        probe().display()
    );
    std::fs::write(&config, text).unwrap();
    let mut child = Command::new(crate::support::PINCTL)
        .arg("run")
        .arg("-c")
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("pinctl.sock"))
        .arg("--state-file")
        .arg(dir.path().join("state.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut sup = Supervisor { child: Some(child), probes: Vec::new() };
    let mut seen = Vec::new();
    let listen = wait_for(&rx, &["pinctl: watch: metrics", "listen=http://"], &mut seen);
    let pid = started_pid(&wait_for(&rx, &["pinctl: probe: started as"], &mut seen));
    sup.probes.push(pid);
    wait_for(&rx, &["pinctl: watch: instance", &format!("pids={pid} ")], &mut seen);
    let planned = allowed_cpus(pid);
    let all = every_cpu();
    assert_ne!(planned, all, "the plan gave the probe every CPU");
    // An operator (or a tool) moves the supervised instance's thread.
    taskset(&all, pid);
    wait_for(&rx, &["pinctl: watch: drift", "edge=start", "instance=probe", "kind=cpu"], &mut seen);
    let line = wait_for(
        &rx,
        &["pinctl: watch: rebalance", "instance=probe", "threads_repinned=1"],
        &mut seen,
    );
    assert!(line.contains("threads_complete=true"), "{line}");
    assert_eq!(allowed_cpus(pid), planned, "the supervised instance was not re-pinned");
    wait_for(&rx, &["pinctl: watch: drift", "edge=end", "kind=cpu"], &mut seen);
    // Killed, restarted by the supervisor: the watcher follows the new process.
    crate::supervisor::signal(pid as i32, rustix::process::Signal::KILL).unwrap();
    let again = started_pid(&wait_for(&rx, &["pinctl: probe: started as"], &mut seen));
    sup.probes.push(again);
    assert_ne!(again, pid);
    wait_for(&rx, &["pinctl: watch: instance", &format!("pids={again} ")], &mut seen);
    let deadline = Instant::now() + WAIT;
    loop {
        let text = scrape(&listen);
        if text.contains("pinctl_instance_restarts_total{service_instance=\"probe\"} 1") {
            assert!(text.contains("pinctl_instance_up{service_instance=\"probe\"} 1"), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "no restart counted in the metrics:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(sup);
}

/// CPU time (user + system, in clock ticks) a process has used so far.
fn cpu_ticks(pid: u32) -> u64 {
    crate::supervisor::stat(pid as i32).unwrap().cpu_ticks
}

/// `GET /metrics` over a socket that gives up after `wait`; `None` when no whole response came.
fn try_scrape(addr: std::net::SocketAddr, wait: Duration) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, wait).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    s.set_write_timeout(Some(wait)).ok()?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.starts_with("HTTP/1.1 200").then_some(text)
}

/// The value of an unlabelled sample in a scrape.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{name}` in\n{text}"))
}

/// `pinctl watch` serving metrics (no instance needs to run for that), under `ulimit -n
/// nofile` when given; returns it and the metrics address.
fn metrics_watch(dir: &Path, nofile: Option<u32>) -> (Guard, std::net::SocketAddr) {
    let config = dir.join("pinctl.toml");
    let text = format!(
        "[host]\nkeep-free = []\nmetrics-listen = \"127.0.0.1:0\"\n\n[service.idle]\n\
         command = [\"sleep\"]\ncpus = 1\npid-file = \"{}\"\n",
        dir.join("idle.pid").display()
    );
    std::fs::write(&config, text).unwrap();
    let limit = nofile.map_or(String::new(), |n| format!("ulimit -n {n} && "));
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{limit}exec \"$0\" watch -c \"$1\""))
        .arg(crate::support::PINCTL)
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    let guard = Guard(child);
    let line = wait_for(&rx, &["metrics", "listen="], &mut Vec::new());
    let addr = line.split("http://").nth(1).unwrap().trim_end_matches("/metrics").parse().unwrap();
    (guard, addr)
}

/// Idle connections flood the real metrics server, each run in a `pinctl watch` of its own:
/// 1,100 under `ulimit -n 1024` (systemd's soft limit: the flood is past it), then 120 under
/// `ulimit -n 48`, where accepts fail for want of descriptors. While the connections are held
/// the server neither spins (it uses under half a CPU) nor holds more descriptors than its
/// connection cap; once they are gone it serves again, and its own counters saw the flood.
/// Every socket is closed and each watcher killed by PID.
#[test]
fn a_flood_of_idle_connections_neither_ends_nor_spins_the_metrics_server() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    // The flood's sockets are this test's own: its soft limit goes up to the hard one.
    let hard = getrlimit(Resource::Nofile).maximum.unwrap_or(u64::MAX);
    setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: Some(hard) }).unwrap();
    assert!(hard >= 1200, "this test needs 1200 descriptors; the hard limit is {hard}");
    for (nofile, size, counter) in [
        (1024, 1100, "pinctl_metrics_connections_dropped_total"),
        (48, 120, "pinctl_metrics_accept_errors_total"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (watch, addr) = metrics_watch(dir.path(), Some(nofile));
        let pid = watch.0.id();
        assert!(try_scrape(addr, WAIT).is_some(), "no scrape before the flood ({nofile})");
        let descriptors = || std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
        let before = descriptors();
        let flood: Vec<std::net::TcpStream> = (0..size)
            .map_while(|_| std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok())
            .collect();
        assert_eq!(flood.len(), size, "connections made under ulimit -n {nofile}");
        let (ticks, at) = (cpu_ticks(pid), Instant::now());
        let mut most = 0;
        while at.elapsed() < Duration::from_secs(3) {
            most = most.max(descriptors());
            std::thread::sleep(Duration::from_millis(50));
        }
        let used = cpu_ticks(pid) - ticks;
        // /proc counts CPU time in USER_HZ, 100 a second on every architecture Linux exports.
        let window = at.elapsed().as_secs_f64() * 100.0;
        assert!(
            (used as f64) < window / 2.0,
            "the server spun under ulimit -n {nofile}: {used} of {window:.0} ticks"
        );
        // The cap, and a few connections between their accept and their close.
        assert!(
            most <= before + pinctl_drift::metrics::MAX_CONNECTIONS + 8,
            "{most} descriptors under the flood, {before} before (ulimit -n {nofile})"
        );
        drop(flood);
        let deadline = Instant::now() + WAIT;
        let after = loop {
            if let Some(text) = try_scrape(addr, Duration::from_secs(5)) {
                break text;
            }
            assert!(Instant::now() < deadline, "metrics never served again ({nofile})");
            std::thread::sleep(Duration::from_millis(200));
        };
        let seen = sample(&after, counter);
        assert!(seen > 0.0, "`{counter}` is 0 after the flood under ulimit -n {nofile}");
        eprintln!("ulimit -n {nofile}, {size} idle connections: {counter} {seen}");
        drop(watch);
    }
}

/// `pinctl watch --once` with two PID files naming this test's `sleep`: one in a
/// folder anyone may write (and no `unit` to check the process against), one for a service
/// whose `user` is `nobody`. Neither process is taken for the instance; each says why.
#[test]
fn watch_refuses_a_pid_others_could_have_written_or_of_another_user() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sleeper = Guard(Command::new("sleep").arg("300").spawn().unwrap());
    let pid = sleeper.0.id();
    let (open_file, user_file) = (shared.join("a.pid"), dir.path().join("b.pid"));
    std::fs::write(&open_file, format!("{pid}\n")).unwrap();
    std::fs::write(&user_file, format!("{pid}\n")).unwrap();
    let config = dir.path().join("pinctl.toml");
    let text = format!(
        "[host]\nkeep-free = []\n\n[service.a]\ncommand = [\"sleep\"]\ncpus = 1\npid-file = \"{}\"\n\n\
         [service.b]\ncommand = [\"sleep\"]\ncpus = 1\nuser = \"nobody\"\npid-file = \"{}\"\n",
        open_file.display(),
        user_file.display()
    );
    std::fs::write(&config, text).unwrap();
    let once = |json: bool| {
        let mut cmd = Command::new(crate::support::PINCTL);
        cmd.arg("watch").arg("-c").arg(&config).arg("--once");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        // Instances that could not be sampled: the check's status 2.
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = once(false);
    let expected_a = format!(
        "  not sampled: refused: PID `{pid}` of `{}` is not believed: the file is in `{}`, a \
         folder group or others may write (mode 0777), and no `unit` gives a cgroup to check \
         the process against",
        open_file.display(),
        shared.display()
    );
    assert!(text.contains(&expected_a), "{text}");
    let nobody = pinctl_sys::user_by_name("nobody").unwrap().expect("a `nobody` user");
    let me = rustix::process::geteuid().as_raw();
    let expected_b = format!(
        "  not sampled: refused: PID `{pid}` of `{}` runs as uid {me} (effective {me}), not as \
         user `nobody` (uid {})",
        user_file.display(),
        nobody.uid
    );
    assert!(text.contains(&expected_b), "{text}");
    let json: serde_json::Value = serde_json::from_str(&once(true)).unwrap();
    for i in json["instances"].as_array().unwrap() {
        assert_eq!(i["refused"], true, "{i}");
        assert!(i["sample"].is_null(), "{i}");
    }
    drop(sleeper);
}
