//! `pinctl run` beside what it replaces, in one run (issue 8, section 7):
//!
//! - **start**: from spawning `pinctl run` to its `READY=1` on `$NOTIFY_SOCKET` (a datagram
//!   socket this bench listens on) with 64 instances of `sleep`, against 64 sequential
//!   `numactl --cpunodebind=0 --membind=0 sleep` launches (each counted until numactl has
//!   exec'd `sleep`) and 64 plain spawns of `sleep`, interleaved round by round;
//! - **idle**: the supervisor's context switches (voluntary and not, every thread) over a few
//!   seconds with its 64 instances running and nothing happening, and its VmRSS / VmHWM;
//! - **restart**: SIGKILL to an instance until its replacement has exec'd, with
//!   `restart-delay` = `restart-max-delay` = 100ms (the floor a file may ask for; the delay is
//!   drawn in [d/2, d]) and 250ms, with `start-limit = "off"` (40 kills on 2 instances are
//!   far past the default 5 starts in 10 s).
//!   The instance is this bench's own binary (`--instance FILE`), which appends the wall-clock
//!   time to FILE as its first act after exec, so the figure includes its dynamic loading;
//!   the first rows time a plain spawn of that program, unpinned and born pinned to one CPU
//!   (as each instance is), the floors under the others.
//!
//! A 2-CPU machine cannot hold 64 pinned instances: the start and idle rows plan against the
//! bundled EPYC topology and start instances unpinned (`--unpinned`, the test-only flag), so
//! they time the supervisor and not the kernel's affinity calls (numactl's row does make
//! those). The restart rows are pinned for real on the live topology.
//!
//! Run with `cargo bench --bench supervise` (or `scripts/bench supervise`). Numbers are
//! reported, never asserted. Every process started is killed by PID at the end of its row.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::process::Signal;
use serde_json::Value;

mod common;
use common::{signal, which};

const INSTANCES: usize = 64;
const ROUNDS: usize = 5;
const IDLE: Duration = Duration::from_secs(5);
const KILLS: usize = 40;
const WAIT: Duration = Duration::from_secs(60);
const EPYC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/topologies/epyc-nps4.json");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--instance") {
        instance(Path::new(&args[2]));
    }
    let sleep = which("sleep").expect("sleep is installed");
    let numactl = which("numactl");
    let dir = tempfile::tempdir().expect("tempdir");

    let mut pinctl_ready = Vec::new();
    let mut numactl_times = Vec::new();
    let mut plain_times = Vec::new();
    for round in 0..ROUNDS {
        let run = Supervisor::start(dir.path(), &sixty_four(&sleep), &["--unpinned"], true);
        let ready = run.ready;
        run.stop();
        let numa = numactl.as_ref().map(|numactl| {
            let argv = [numactl.as_path(), "--cpunodebind=0".as_ref(), "--membind=0".as_ref()];
            sequential(&argv, &sleep)
        });
        let plain = sequential(&[], &sleep);
        // The first round warms the page cache for every row alike and is not counted.
        if round > 0 {
            pinctl_ready.push(ready);
            numactl_times.extend(numa);
            plain_times.push(plain);
        }
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort();
        t.get(t.len() / 2).copied()
    };
    let ready = median(&mut pinctl_ready).expect("rounds ran");
    let plain = median(&mut plain_times).expect("rounds ran");
    println!(
        "start to READY, {INSTANCES} instances of sleep, median of {} interleaved rounds",
        ROUNDS - 1
    );
    println!("{:<58} {:>10} {:>10}", "what", "median", "x numactl");
    let numactl_median = median(&mut numactl_times);
    let ratio = |d: Duration| {
        numactl_median.map_or("-".into(), |n| format!("{:.2}", d.as_secs_f64() / n.as_secs_f64()))
    };
    let ms = |d: Duration| format!("{:.1}ms", d.as_secs_f64() * 1e3);
    println!(
        "{:<58} {:>10} {:>10}",
        "pinctl run (EPYC topology, --unpinned) to READY=1",
        ms(ready),
        ratio(ready)
    );
    match numactl_median {
        Some(n) => println!(
            "{:<58} {:>10} {:>10}",
            "64 x numactl --cpunodebind=0 --membind=0 sleep (to exec)",
            ms(n),
            ratio(n)
        ),
        None => println!("note: numactl row left out: numactl is not installed"),
    }
    println!("{:<58} {:>10} {:>10}", "64 x spawn sleep (to exec)", ms(plain), ratio(plain));
    println!("target: pinctl run to READY no slower than 64 numactl launches (<= 1.00x)");
    println!();

    idle(dir.path(), &sleep);
    println!();
    // The shortest delay a file may ask for (MIN_RESTART_DELAY), and one above it.
    restarts(dir.path(), &[pinctl_config::MIN_RESTART_DELAY, Duration::from_millis(250)]);
}

/// `--instance FILE`: append the wall-clock time (ns since the epoch) and this PID to FILE,
/// then wait to be killed.
fn instance(file: &Path) -> ! {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
    let line = format!("{} {}\n", now.as_nanos(), std::process::id());
    let mut f = std::fs::OpenOptions::new().append(true).create(true).open(file).expect("open");
    f.write_all(line.as_bytes()).expect("write");
    drop(f);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn sixty_four(sleep: &Path) -> String {
    format!(
        "[host]\nkeep-free = []\n\n[service.s]\ncommand = [\"{}\", \"100000\"]\ninstances = \
         {INSTANCES}\ncpus = 1\nstop-timeout = \"5s\"\n",
        sleep.display()
    )
}

/// `prefix... sleep 100000`, INSTANCES times in a row, each until the process runs `sleep`
/// (numactl has applied its policy and exec'd it); then every one is killed.
fn sequential(prefix: &[&Path], sleep: &Path) -> Duration {
    let mut children = Vec::new();
    let start = Instant::now();
    for _ in 0..INSTANCES {
        let (program, rest) = match prefix.split_first() {
            Some((p, rest)) => (*p, rest.iter().map(|a| a.as_os_str()).collect::<Vec<_>>()),
            None => (sleep, Vec::new()),
        };
        let mut cmd = Command::new(program);
        cmd.args(rest);
        if !prefix.is_empty() {
            cmd.arg(sleep);
        }
        let child = cmd
            .arg("100000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let comm = format!("/proc/{}/comm", child.id());
        let deadline = Instant::now() + WAIT;
        while std::fs::read_to_string(&comm).ok().as_deref() != Some("sleep\n") {
            assert!(Instant::now() < deadline, "{program:?} never exec'd sleep");
            std::thread::yield_now();
        }
        children.push(child);
    }
    let elapsed = start.elapsed();
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
    elapsed
}

/// A `pinctl run` of this bench, its control socket and how long it took to be ready.
struct Supervisor {
    child: Child,
    socket: PathBuf,
    ready: Duration,
    /// Instance PIDs seen, killed on drop if the supervisor did not stop them.
    seen: Vec<i32>,
}

impl Supervisor {
    /// Writes `config`, starts `pinctl run` on it (against the EPYC topology when `epyc`),
    /// and waits for READY=1 on a notify socket of its own.
    fn start(dir: &Path, config: &str, extra: &[&str], epyc: bool) -> Supervisor {
        let path = dir.join("pinctl.toml");
        std::fs::write(&path, config).expect("write config");
        let notify = dir.join("notify.sock");
        let _ = std::fs::remove_file(&notify);
        let listener = UnixDatagram::bind(&notify).expect("bind notify socket");
        listener.set_read_timeout(Some(WAIT)).expect("timeout");
        let socket = dir.join("pinctl.sock");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pinctl"));
        cmd.arg("run").arg("-c").arg(&path).arg("--socket").arg(&socket);
        cmd.arg("--state-file").arg(dir.join("state.json")).args(extra);
        if epyc {
            cmd.args(["--topology", EPYC]);
        }
        cmd.env("NOTIFY_SOCKET", &notify).stdin(Stdio::null()).stdout(Stdio::null());
        cmd.stderr(std::fs::File::create(dir.join("stderr")).expect("stderr file"));
        let start = Instant::now();
        let child = cmd.spawn().expect("spawn pinctl run");
        let mut buf = [0u8; 4096];
        loop {
            let n = listener.recv(&mut buf).unwrap_or_else(|e| {
                let log = std::fs::read_to_string(dir.join("stderr")).unwrap_or_default();
                panic!("no READY=1 from pinctl run ({e}): {log}")
            });
            if String::from_utf8_lossy(&buf[..n]).lines().any(|l| l == "READY=1") {
                break;
            }
        }
        let ready = start.elapsed();
        let mut run = Supervisor { child, socket, ready, seen: Vec::new() };
        let pids: Vec<i32> = run.instances().iter().filter_map(|i| i.1).collect();
        run.seen = pids;
        run
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// (name, PID, state) of every instance.
    fn instances(&mut self) -> Vec<(String, Option<i32>, String)> {
        let mut s = UnixStream::connect(&self.socket).expect("connect");
        s.set_read_timeout(Some(WAIT)).expect("timeout");
        writeln!(s, "{}", serde_json::json!({"cmd": "status", "names": []})).expect("ask");
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).expect("answer");
        let v: Value = serde_json::from_str(&line).expect("json");
        let out: Vec<(String, Option<i32>, String)> = v["instances"]
            .as_array()
            .expect("instances")
            .iter()
            .map(|i| {
                let pid = i["pid"].as_i64().map(|p| p as i32);
                (
                    i["name"].as_str().unwrap_or("").into(),
                    pid,
                    i["state"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        self.seen.extend(out.iter().filter_map(|i| i.1));
        out
    }

    /// SIGTERM, and the wait for every instance to be stopped.
    fn stop(mut self) {
        let _ = signal(self.pid(), Signal::TERM);
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for &pid in &self.seen {
            // Only what is still ours: a PID whose parent is gone and runs our program.
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm == "sleep\n" || comm.starts_with("supervise") {
                let _ = signal(pid, Signal::KILL);
            }
        }
    }
}

/// Context switches of every thread of `pid`, voluntary and not: each one is a wake-up.
fn switches(pid: i32) -> (u64, usize) {
    let mut total = 0;
    let mut threads = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks").flatten() {
        threads += 1;
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    (total, threads)
}

fn status_kib(pid: i32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn idle(dir: &Path, sleep: &Path) {
    let mut run = Supervisor::start(dir, &sixty_four(sleep), &["--unpinned"], true);
    let running = run.instances().iter().filter(|i| i.2 == "active").count();
    // Let the start-up settle (the state file, output readers) before counting.
    std::thread::sleep(Duration::from_secs(1));
    let (before, threads) = switches(run.pid());
    std::thread::sleep(IDLE);
    let (after, _) = switches(run.pid());
    let (rss, hwm) = (status_kib(run.pid(), "VmRSS:"), status_kib(run.pid(), "VmHWM:"));
    println!("idle supervisor, {running} instances active, {} s without work", IDLE.as_secs());
    println!(
        "context switches: {} in {} s ({} thread{}); target: none without work",
        after - before,
        IDLE.as_secs(),
        threads,
        if threads == 1 { "" } else { "s" }
    );
    println!(
        "VmRSS {:.1} MiB, VmHWM {:.1} MiB; target: RSS under 16 MiB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    run.stop();
}

/// The lines `--instance` wrote: (ns since the epoch, PID).
fn starts(file: &Path) -> Vec<(u128, i32)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (t, p) = l.split_once(' ')?;
            Some((t.parse().ok()?, p.parse().ok()?))
        })
        .collect()
}

/// The floor under the restart figures: from a plain spawn of the instance program to its
/// first act, with nobody in between. `pinned`: the child is born pinned to one CPU, taking
/// the allowed CPUs in turn as the supervisor's two `cpus = 1` instances do, so it waits for
/// that CPU as they do (on a busy host most of a pinned restart's time is that wait).
fn spawn_floor(dir: &Path, me: &Path, pinned: bool) -> Vec<Duration> {
    use pinctl_sys::{Kernel as _, LinuxKernel, Mask};
    let file = dir.join(if pinned { "floor-pinned" } else { "floor" });
    let mut allowed = Mask::with_bits(4096);
    LinuxKernel.get_affinity(&mut allowed).expect("sched_getaffinity");
    let cpus: Vec<usize> = (0..allowed.bits()).filter(|&c| allowed.is_set(c)).collect();
    let mut out = Vec::new();
    for k in 0..KILLS {
        let (me, to) = (me.to_path_buf(), file.clone());
        let cpu = pinned.then(|| cpus[k % cpus.len()]);
        // A thread of its own: affinity is per thread, and a fork inherits the caller's.
        let (at, mut child) = std::thread::spawn(move || {
            if let Some(cpu) = cpu {
                let mut one = Mask::with_bits(4096);
                one.set(cpu);
                LinuxKernel.set_affinity(&one).expect("sched_setaffinity");
            }
            let at = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
            let child = Command::new(&me)
                .arg("--instance")
                .arg(&to)
                .stdin(Stdio::null())
                .spawn()
                .expect("spawn the instance program");
            (at, child)
        })
        .join()
        .expect("spawning thread");
        let deadline = Instant::now() + WAIT;
        let started = loop {
            if let Some(&(t, _)) = starts(&file).get(k) {
                break t;
            }
            assert!(Instant::now() < deadline, "the instance program never started");
            std::thread::sleep(Duration::from_micros(100));
        };
        let _ = child.kill();
        let _ = child.wait();
        out.push(Duration::from_nanos((started - at) as u64));
    }
    out
}

fn restarts(dir: &Path, delays: &[Duration]) {
    let me = std::env::current_exe().expect("current exe");
    println!("child exit to its replacement's exec, {KILLS} SIGKILLs, 2 pinned instances");
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>16}",
        "restart-delay", "median", "p90", "max", "max - delay"
    );
    let row = |what: String, mut t: Vec<Duration>, delay: Duration| {
        t.sort();
        let at = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
        let ms = |d: Duration| format!("{:.2}ms", d.as_secs_f64() * 1e3);
        let max = *t.last().expect("runs");
        println!(
            "{what:<34} {:>10} {:>10} {:>10} {:>16}",
            ms(at(0.5)),
            ms(at(0.9)),
            ms(max),
            ms(max.saturating_sub(delay))
        );
    };
    row("(spawn alone, no supervisor)".into(), spawn_floor(dir, &me, false), Duration::ZERO);
    row("(spawn alone, pinned to 1 CPU)".into(), spawn_floor(dir, &me, true), Duration::ZERO);
    for &delay in delays {
        let file = dir.join("starts");
        let _ = std::fs::remove_file(&file);
        let d = format!("{}ms", delay.as_millis());
        let config = format!(
            "[host]\nkeep-free = []\n\n[service.r]\ncommand = [\"{}\", \"--instance\", \"{}\"]\n\
             instances = 2\ncpus = 1\nrestart = \"always\"\nrestart-delay = \"{d}\"\n\
             restart-max-delay = \"{d}\"\nstart-limit = \"off\"\nstop-timeout = \"5s\"\n",
            me.display(),
            file.display()
        );
        let mut run = Supervisor::start(dir, &config, &[], false);
        let mut latencies = Vec::new();
        for k in 0..KILLS {
            let name = format!("r-{}", k % 2);
            let pid = run.instances().into_iter().find(|i| i.0 == name).and_then(|i| i.1);
            let pid = pid.expect("instance running");
            let seen = starts(&file).len();
            let at = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos();
            signal(pid, Signal::KILL).expect("kill instance");
            let deadline = Instant::now() + WAIT;
            let (started, _) = loop {
                if let Some(&s) = starts(&file).get(seen) {
                    break s;
                }
                assert!(Instant::now() < deadline, "no replacement for {name}");
                std::thread::sleep(Duration::from_micros(100));
            };
            latencies.push(Duration::from_nanos((started - at) as u64));
            // The replacement is registered before the next kill.
            while run
                .instances()
                .iter()
                .any(|i| i.0 == name && (i.1 == Some(pid) || i.2 != "active"))
            {
                assert!(Instant::now() < deadline, "{name} never became active again");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let what = format!("{d} (waits {:.1}ms-{d})", delay.as_secs_f64() * 500.0);
        row(what, latencies, delay);
        run.stop();
    }
    println!("target: under 5ms plus the configured delay");
}
