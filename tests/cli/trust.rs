//! `pinctl run` as root in front of hostile input (issue 17, "Safe as root"): one test per
//! class of what another user, a dead supervisor or a flood could make it do, each built here,
//! and a chaos test that SIGKILLs pinctl at random points and counts duplicates, orphans and
//! unpinned instances (it prints its seed and counts; `PINCTL_TEST_SEED` replays a run,
//! `PINCTL_CHAOS_ROUNDS` sets its length).
//!
//! Every process a test starts is recorded by PID and start time and killed at the end, also
//! when the test fails; every wait is bounded. Nothing asserts a duration: the flood test
//! bounds the CPU time pinctl burns while flooded (a spinning loop burns all of it).

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::Value;

use crate::supervisor::{
    Rng, Run, WAIT, allowed_cpus, bounded_output, cgroup_of, processes, running, signal, stat,
    unpinned, wait_for,
};
use crate::support::PINCTL as BIN;

const NOBODY: u32 = 65534;

/// A process the test starts itself (a bystander), killed when dropped.
struct Bystander {
    child: std::process::Child,
}

impl Bystander {
    fn start(args: &[&str]) -> Bystander {
        let child = Command::new(args[0]).args(&args[1..]).spawn().unwrap();
        Bystander { child }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/proc/PID/status` field `key` (`VmHWM`, in kB).
fn status_kb(pid: i32, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// User plus system CPU time of `pid` so far, in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    stat(pid).map_or(0, |s| s.cpu_ticks)
}

/// Every live process whose command line holds the argument `marker`.
fn processes_with(marker: &str) -> Vec<i32> {
    processes(|args| args.iter().any(|a| a == marker))
}

/// The state file a detached supervisor of `run` left, as JSON.
fn detached_state(run: &mut Run) -> Value {
    run.start(&[]);
    let out = run.ctl(&["detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut child = run.child.take().unwrap();
    wait_for("the detached supervisor to exit", || child.try_wait().unwrap());
    serde_json::from_str(&std::fs::read_to_string(run.path("state.json")).unwrap()).unwrap()
}

/// Writes a forged state file at the path from the genuine state.
type Forge = dyn Fn(&Path, &Value);

#[test]
fn state_files_others_could_write_adopt_nothing_and_signal_nothing() {
    // Each way another user (or a stale disk) could hand pinctl a state file naming a root
    // process of its choosing, with the instance's own command line so that it would pass
    // the PID/start-time/command check if the file were believed.
    let cases: [(&str, &Forge); 5] = [
        ("writable by group or others (mode 0666)", &|path, state| {
            std::fs::write(path, state.to_string()).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).unwrap();
        }),
        ("owned by uid 65534, not root", &|path, state| {
            std::fs::write(path, state.to_string()).unwrap();
            std::os::unix::fs::chown(path, Some(NOBODY), None).unwrap();
        }),
        ("`../victim` is not an instance name", &|path, state| {
            let mut state = state.clone();
            state["instances"][0]["name"] = "../victim".into();
            std::fs::write(path, state.to_string()).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }),
        ("is not a regular file (a FIFO)", &|path, _| {
            std::fs::remove_file(path).unwrap();
            let status = Command::new("mkfifo").arg(path).status().unwrap();
            assert!(status.success());
        }),
        ("holds more than 16777216 bytes", &|path, _| {
            // 300 MiB, sparse: read no further than the bound, then refused.
            let f = std::fs::File::create(path).unwrap();
            f.set_len(300 << 20).unwrap();
        }),
    ];
    for (why, forge) in cases {
        let mut run = Run::new(
            "[host]\nkeep-free = []\n[service.victim]\ncommand = [\"sleep\", \"100100\"]\ncpus = 1\n",
        );
        let mut state = detached_state(&mut run);
        // The genuine instance goes; a bystander of root's with the same command line takes
        // its place in the forged file.
        let genuine = state["instances"][0]["pid"].as_i64().unwrap() as i32;
        let _ = signal(genuine, Signal::KILL);
        wait_for("the genuine instance to go", || (!running(genuine)).then_some(()));
        let mut victim = Bystander::start(&["sleep", "100100"]);
        let start = stat(victim.pid()).unwrap().start_time;
        state["instances"][0]["pid"] = victim.pid().into();
        state["instances"][0]["start_time"] = start.into();
        state["instances"][0]["cgroup"] = cgroup_of(victim.pid()).unwrap().into();
        forge(&run.path("state.json"), &state);
        run.start(&[]);
        let pid = run.status()["victim"]["pid"].as_i64().unwrap() as i32;
        assert_ne!(pid, victim.pid(), "{why}: the bystander was adopted");
        let err = run.said("nothing adopted");
        assert!(err.contains(why), "{why}: {err}");
        // Refused, but never lost: set aside whole, under a name that says why.
        let kept: Vec<_> = std::fs::read_dir(run.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("state.json.refused-"))
            .collect();
        assert_eq!(kept.len(), 1, "{why}: {kept:?}");
        assert!(err.contains(&format!("kept as `{}`", run.path(&kept[0]).display())), "{err}");
        assert!(run.terminate().success(), "{why}: {}", run.stderr());
        assert!(victim.alive(), "{why}: the bystander was signalled");
    }
    // A state folder another user owns: pinctl neither reads nor writes state there; it does
    // not start at all, and says where to keep it instead.
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.victim]\ncommand = [\"sleep\", \"100100\"]\ncpus = 1\n",
    );
    let state = detached_state(&mut run);
    let genuine = state["instances"][0]["pid"].as_i64().unwrap() as i32;
    let _ = signal(genuine, Signal::KILL);
    std::os::unix::fs::chown(run.dir.path(), Some(NOBODY), None).unwrap();
    let out = bounded_output(&mut run.command(&[]));
    std::os::unix::fs::chown(run.dir.path(), Some(0), None).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("owned by uid 65534, not root"), "{err}");
    assert!(err.contains("only where nobody but root can write"), "{err}");
    assert!(processes_with("100100").is_empty(), "nothing started");
}

#[test]
fn an_instance_its_supervisor_died_before_recording_is_adopted_from_its_cgroup() {
    // SIGKILL between a child joining its cgroup and the state file recording it: the next
    // supervisor finds the process in the instance's cgroup and adopts it instead of starting
    // a second copy on the same data.
    let config =
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"sleep\", \"100101\"]\ncpus = 1\n";
    let mut run = Run::new(config);
    run.start(&[]);
    let first = run.status()["db"]["pid"].as_i64().unwrap() as i32;
    let mut old = run.child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    std::fs::remove_file(run.path("state.json")).unwrap();
    run.start(&[]);
    let s = run.status();
    assert_eq!(s["db"]["pid"].as_i64(), Some(i64::from(first)), "{}", run.stderr());
    assert_eq!(s["db"]["adopted"], true);
    assert_eq!(processes_with("100101"), vec![first], "one copy, the first");
    run.said("does not record it");
    // Killed again, and its command changed meanwhile: what runs in the cgroup does not prove
    // to be the instance any more, so it is killed (said) before the new one starts.
    let mut old = run.child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    std::fs::remove_file(run.path("state.json")).unwrap();
    std::fs::write(run.config(), config.replace("100101", "100102")).unwrap();
    run.start(&[]);
    let second = run.status()["db"]["pid"].as_i64().unwrap() as i32;
    assert_ne!(second, first);
    assert!(!running(first), "the unproven process was killed");
    run.said(&format!("killing processes {first}"));
    assert!(run.terminate().success());
    assert!(processes_with("100102").is_empty());
}

#[test]
fn output_files_are_opened_as_the_service_user_without_following_links() {
    // A service account owns its log folder and plants a link to a file only root may write.
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let logs = top.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    std::os::unix::fs::chown(&logs, Some(NOBODY), Some(NOBODY)).unwrap();
    let secret = top.path().join("secret");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = logs.join("linked.log");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let plain = logs.join("plain.log");
    let config = format!(
        "[host]\nkeep-free = []\n\
         [service.linked]\ncommand = [\"sh\", \"-c\", \"echo injected; sleep 100103\"]\n\
         user = \"nobody\"\noutput = \"{}\"\nrestart = \"never\"\n\
         [service.plain]\ncommand = [\"sh\", \"-c\", \"echo written; sleep 100103\"]\n\
         user = \"nobody\"\noutput = \"{}\"\n\
         [service.rootly]\ncommand = [\"sh\", \"-c\", \"echo as-root; sleep 100103\"]\n\
         output = \"{}\"\n",
        link.display(),
        plain.display(),
        logs.join("root.log").display(),
    );
    let mut run = Run::new(&config);
    run.start(&["--topology", crate::supervisor::EPYC, "--unpinned"]);
    let s = run.status();
    assert_eq!(s["linked"]["state"], "failed", "{s:?}");
    let reason = s["linked"]["reason"].as_str().unwrap();
    assert!(reason.contains("as user `nobody`") && reason.contains("symbolic links"), "{reason}");
    assert!(reason.contains("at step STDOUT, exit status 209"), "{reason}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    // A folder the service account owns is fine for the service account itself.
    assert_eq!(s["plain"]["state"], "active");
    wait_for("the plain output", || {
        std::fs::read_to_string(&plain).ok().filter(|t| t == "written\n")
    });
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&plain).unwrap());
    assert_eq!(owner, NOBODY, "created by the service's user");
    // An instance running as root writes only where nobody else can.
    assert_eq!(s["rootly"]["state"], "failed");
    let reason = s["rootly"]["reason"].as_str().unwrap();
    assert!(reason.contains("owned by uid 65534"), "{reason}");
    assert!(!logs.join("root.log").exists());
    assert!(run.terminate().success());
}

#[test]
fn a_socket_path_that_is_not_a_socket_is_never_removed() {
    let run = Run::new("[host]\nkeep-free = []\n[service.s]\ncommand = [\"sleep\", \"100104\"]\n");
    std::fs::write(run.socket(), "precious").unwrap();
    let mut cmd = run.command(&[]);
    let out = bounded_output(&mut cmd);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a regular file, not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(run.socket()).unwrap(), "precious");
    assert!(processes_with("100104").is_empty(), "nothing started");
}

#[test]
fn output_without_newlines_and_a_stalled_reader_neither_grow_nor_stall_pinctl() {
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("written");
    let config = format!(
        "[host]\nkeep-free = []\n\
         [service.flood]\ncommand = [\"sh\", \"-c\", \
         \"head -c 300000000 /dev/zero | tr '\\\\0' x; echo; touch {}; \
         while :; do echo line-after-line-after-line; done\"]\n\
         [service.quiet]\ncommand = [\"sleep\", \"100105\"]\n",
        written.display()
    );
    let mut run = Run::new(&config);
    // pinctl's stdout is a pipe this test does not read: a stuck journald.
    let (reader, writer) = std::io::pipe().unwrap();
    let mut cmd = run.command(&["--topology", crate::supervisor::EPYC, "--unpinned"]);
    cmd.stdout(writer);
    run.child = Some(cmd.spawn().unwrap());
    drop(cmd);
    // Still answering, with the pipe full and the flood waiting on its own output.
    let s = run.settle();
    assert_eq!(s["quiet"]["state"], "active");
    let quiet = s["quiet"]["pid"].as_i64().unwrap() as i32;
    let out = run.ctl(&["restart", "quiet"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = run.status()["quiet"]["pid"].as_i64().unwrap() as i32;
    assert_ne!(after, quiet, "restarted while its output could not be written");
    assert!(!written.exists(), "the flood waited for its reader instead of being dropped");
    let peak = status_kb(run.pid(), "VmHWM").unwrap();
    assert!(peak < 64 * 1024, "pinctl grew to {peak} kB on a 300 MB line");
    // Once the reader reads again, the flood goes on to its end: nothing was dropped.
    let drain = std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = vec![0u8; 1 << 16];
        while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
    });
    wait_for("300 MB without a newline to be written", || written.exists().then_some(()));
    let said = run.said("were cut into lines");
    assert!(!said.contains("dropped"), "{said}");
    assert!(run.terminate().success(), "{}", run.stderr());
    drain.join().unwrap();
}

#[test]
fn oversized_requests_and_connection_floods_leave_the_supervisor_working() {
    let config = "[host]\nkeep-free = []\n[service.kept]\ncommand = [\"sleep\", \"100106\"]\n\
                  output = \"/dev/null\"\nstart-limit = \"off\"\n";
    let mut run = Run::new(config);
    // Few descriptors, as under a unit with a low LimitNOFILE: the flood exhausts them.
    let mut cmd = Command::new("prlimit");
    cmd.arg("--nofile=48:48").arg("--").arg(BIN);
    let inner = run.command(&[]);
    cmd.args(inner.get_args());
    cmd.stdin(Stdio::null());
    cmd.stdout(std::fs::File::create(run.path("stdout")).unwrap());
    cmd.stderr(std::fs::File::create(run.path("stderr")).unwrap());
    run.child = Some(cmd.spawn().unwrap());
    let before = run.settle()["kept"]["pid"].as_i64().unwrap() as i32;
    // A 100 MiB request line: answered with an error after 64 KiB, not buffered.
    let mut big = UnixStream::connect(run.socket()).unwrap();
    big.set_read_timeout(Some(WAIT)).unwrap();
    let mut sender = big.try_clone().unwrap();
    let send = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..100 {
            if sender.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut answer = String::new();
    let _ = big.read_to_string(&mut answer);
    send.join().unwrap();
    assert!(answer.contains("request longer than 65536 bytes"), "{answer:?}");
    let peak = status_kb(run.pid(), "VmHWM").unwrap();
    assert!(peak < 64 * 1024, "pinctl grew to {peak} kB on a 100 MiB request");
    // 300 idle connections: far past its descriptors.
    let flood: Vec<UnixStream> =
        (0..300).filter_map(|_| UnixStream::connect(run.socket()).ok()).collect();
    assert!(flood.len() > 48, "the flood reached past the descriptor limit");
    let _ = signal(before, Signal::KILL);
    let (ticks, started) = (cpu_ticks(run.pid()), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let burnt = cpu_ticks(run.pid()) - ticks;
    let wall_ticks = started.elapsed().as_millis() as u64 / 10;
    assert!(burnt * 2 < wall_ticks, "pinctl burnt {burnt} of {wall_ticks} ticks while flooded");
    drop(flood);
    // Once the flood is gone the instance runs again (a spawn that found no descriptor was
    // tried again, not failed for good), and the socket answers.
    let after = wait_for("the killed instance to run again", || {
        let s = run.status();
        let pid = s["kept"]["pid"].as_i64()? as i32;
        (s["kept"]["state"] == "active" && pid != before).then_some(pid)
    });
    assert_ne!(after, before);
    assert!(run.terminate().success(), "{}", run.stderr());
}

#[test]
fn every_failure_is_said_in_the_log() {
    let config = "[host]\nkeep-free = []\n\
        [service.missing]\ncommand = [\"/nonexistent/program\"]\n\
        [service.stranger]\ncommand = [\"sleep\", \"100107\"]\nuser = \"no-such-user-x\"\n\
        [service.nowhere]\ncommand = [\"sleep\", \"100107\"]\nworking-dir = \"/nonexistent/dir\"\n\
        [service.hasty]\ncommand = [\"false\"]\nrestart = \"always\"\nstart-limit = \"3/10s\"\n\
        [service.once]\ncommand = [\"sh\", \"-c\", \"exit 3\"]\nrestart = \"never\"\n";
    let mut run = Run::new(config);
    run.start(&["--topology", crate::supervisor::EPYC, "--unpinned"]);
    let names = ["missing", "stranger", "nowhere", "hasty", "once"];
    wait_for("every instance to fail", || {
        let s = run.status();
        names.iter().all(|n| s[*n]["state"] == "failed").then_some(())
    });
    for line in [
        "pinctl: missing: failed: `/nonexistent/program` does not exist (at step EXEC, exit status 127)",
        "pinctl: stranger: failed: unknown user `no-such-user-x` (at step USER, exit status 217)",
        "pinctl: nowhere: failed: working-dir `/nonexistent/dir` does not exist or is not a directory (at step CHDIR, exit status 200)",
        "pinctl: hasty: failed: start request repeated too quickly (3 starts within 10s",
        "pinctl: once: failed: exit status 3 (restart = \"never\")",
    ] {
        run.said(line);
    }
    assert!(run.terminate().success());
}

/// What a chaos round found once the supervisor settled.
#[derive(Debug, Default)]
struct Found {
    duplicates: usize,
    orphans: usize,
    unpinned: usize,
}

#[test]
fn chaos_sigkill_of_pinctl_at_random_points_leaves_no_duplicates_orphans_or_unpinned() {
    let seed =
        std::env::var("PINCTL_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
                | 1
        });
    let rounds: usize =
        std::env::var("PINCTL_CHAOS_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut rng = Rng(seed);
    let marker = |name: &str| format!("chaos-{}-{name}", std::process::id());
    let config = |generation: u64| {
        format!(
            "[host]\nkeep-free = []\n\
             [service.c]\ncommand = [\"sh\", \"-c\", \"sleep 3600; :\", \"chaos-{pid}-c-{{instance}}\"]\n\
             instances = 2\ncpus = 1\nrestart = \"always\"\n\
             start-limit = \"off\"\noutput = \"/dev/null\"\nenv = {{ GENERATION = \"{generation}\" }}\n",
            pid = std::process::id()
        )
    };
    let names = ["c-0", "c-1"];
    let mut run = Run::new(&config(0));
    run.start(&[]);
    let mut totals = Found::default();
    let (mut kills, mut generation) = (0usize, 0u64);
    // How often a kill landed in a window the state file alone would have missed.
    let (mut from_cgroup, mut killed_unproven, mut killed_forking) = (0usize, 0usize, 0usize);
    for round in 0..rounds {
        // Where to strike: while it starts (spawns and state writes of every instance), right
        // after an instance died (its respawn), or while a reload restarts one.
        let pause = Duration::from_micros(rng.next() % 40_000);
        match rng.next() % 3 {
            0 => {}
            1 => {
                let s = run.settle();
                let name = names[(rng.next() % 2) as usize];
                if let Some(pid) = s[name]["pid"].as_i64() {
                    let _ = signal(pid as i32, Signal::KILL);
                }
            }
            _ => {
                run.settle();
                generation += 1;
                std::fs::write(run.config(), config(generation)).unwrap();
                let _ = signal(run.pid(), Signal::HUP);
            }
        }
        std::thread::sleep(pause);
        let mut old = run.child.take().unwrap();
        let _ = old.kill();
        old.wait().unwrap();
        kills += 1;
        // A new supervisor settles; then nothing may run twice, nothing unaccounted for, and
        // nothing off its planned CPUs.
        run.start(&[]);
        let s = run.settle();
        let said = run.stderr();
        from_cgroup += said.matches("does not record it").count();
        killed_unproven += said.matches("killing processes").count();
        killed_forking += said.matches("an earlier supervisor was starting").count();
        let mut found = Found::default();
        for name in names {
            // An instance's main process leads its process group; a child it forks has its
            // command line until it execs, and is not a copy of the instance.
            let running: Vec<i32> = processes_with(&marker(name))
                .into_iter()
                .filter(|&p| stat(p).is_some_and(|s| s.pgrp == p as u32))
                .collect();
            let pid = s[name]["pid"].as_i64().map(|p| p as i32);
            found.duplicates += running.len().saturating_sub(1);
            found.orphans += running.iter().filter(|&&p| Some(p) != pid).count();
            if let Some(pid) = pid {
                if allowed_cpus(pid) != s[name]["cpus"].as_str().unwrap_or("?") {
                    found.unpinned += 1;
                }
                if let Some(st) = stat(pid) {
                    run.seen.insert((pid, st.start_time));
                }
            }
        }
        if found.duplicates + found.orphans + found.unpinned > 0 {
            eprintln!("chaos round {round}: {found:?}\n{}", run.stderr());
        }
        totals.duplicates += found.duplicates;
        totals.orphans += found.orphans;
        totals.unpinned += found.unpinned;
    }
    println!(
        "chaos: seed {seed}, {rounds} rounds, {kills} SIGKILLs of pinctl: {} duplicates, {} \
         orphans, {} unpinned; {from_cgroup} unrecorded instances adopted from their cgroup, \
         {killed_unproven} unproven ones killed, {killed_forking} times children caught between \
         fork and their cgroup killed",
        totals.duplicates, totals.orphans, totals.unpinned
    );
    assert_eq!(
        (totals.duplicates, totals.orphans, totals.unpinned),
        (0, 0, 0),
        "seed {seed} (PINCTL_TEST_SEED={seed} replays it)"
    );
    assert!(run.terminate().success(), "{}", run.stderr());
    for name in names {
        assert_eq!(processes_with(&marker(name)), Vec::<i32>::new(), "{name} left behind");
    }
}

/// The v2 hierarchy pinctl makes its subtrees in (unified, or hybrid's `unified`).
fn cgroup_hierarchy() -> &'static Path {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cgroup.controllers").exists())
        .expect("this test needs a cgroup v2 hierarchy (unified or hybrid), as CI's machines have")
}

/// The cgroup subtree a supervisor said it uses (`/pinctl/NAME`), as a folder.
fn subtree_of(run: &Run) -> std::path::PathBuf {
    let err = run.said("one cgroup per instance under `");
    let path = err
        .split("one cgroup per instance under `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no cgroup subtree in the log: {err}"));
    cgroup_hierarchy().join(path.trim_start_matches('/'))
}

/// `flock(1)` holding an exclusive lock on `path` as uid `nobody` (`--no-fork`: the holder is
/// the `sleep` itself), killed by PID when dropped.
struct UserLock {
    _holder: Bystander,
}

impl UserLock {
    fn take(path: &Path) -> UserLock {
        use std::os::unix::process::CommandExt as _;
        let child = Command::new("flock")
            .args(["-x", "--no-fork"])
            .arg(path)
            .args(["sleep", "60"])
            .uid(NOBODY)
            .gid(NOBODY)
            .spawn()
            .expect("flock (util-linux) is installed");
        // Held once root's own try fails (bounded).
        wait_for("the user's lock to be held", || {
            let free = Command::new("flock").arg("-n").arg(path).arg("true").status().unwrap();
            (!free.success()).then_some(())
        });
        UserLock { _holder: Bystander { child } }
    }
}

/// Whether uid `nobody` can open `path` to lock it.
fn nobody_can_lock(path: &Path) -> bool {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new("flock");
    cmd.args(["-n"]).arg(path).arg("true").uid(NOBODY).gid(NOBODY);
    bounded_output(&mut cmd).status.success()
}

#[test]
fn no_user_can_take_a_lock_that_keeps_pinctl_run_from_starting() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.locked]\ncommand = [\"sleep\", \"100120\"]\ncpus = 1\n",
    );
    // Others may enter the state folder (as /run/pinctl, mode 0755).
    std::fs::set_permissions(run.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    run.start(&[]);
    let subtree = subtree_of(&run);
    assert!(run.terminate().success(), "{}", run.stderr());
    // What pinctl locked before, any user could open: the subtree's folder (mode 0755, as
    // every stop of an older pinctl left it) and `<state file>.lock` (here mode 0644). A
    // user holds both; the next `pinctl run` of the file starts regardless.
    let made = !subtree.exists();
    if made {
        std::fs::create_dir_all(&subtree).unwrap();
    }
    let old_lock = run.path("state.json.lock");
    std::fs::write(&old_lock, "").unwrap();
    std::fs::set_permissions(&old_lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let held = [UserLock::take(&subtree), UserLock::take(&old_lock)];
    run.start(&[]);
    assert_eq!(run.status()["locked"]["state"], "active", "{}", run.stderr());
    // What it locks now, the user cannot even open: the state file's lock, and the
    // subtree's, in folders of root's with mode 0700.
    let cgroup_lock = format!(
        "/run/pinctl/locks/cgroup-{}.lock",
        subtree.strip_prefix(cgroup_hierarchy()).unwrap().to_str().unwrap().replace('/', "%2F")
    );
    for lock in [run.path("locks/state.json.lock"), cgroup_lock.into()] {
        assert!(lock.exists(), "{}", lock.display());
        assert!(!nobody_can_lock(&lock), "{}: a user could lock it", lock.display());
    }
    assert!(run.terminate().success(), "{}", run.stderr());
    drop(held);
    if made {
        let _ = std::fs::remove_dir(&subtree);
    }
}

#[test]
fn a_clean_stop_and_a_reload_leave_no_cgroup_of_theirs_behind() {
    // 300 instances whose program does not exist: each fails before anything runs in the
    // cgroup made for it. A reload removes them; their cgroups go with them.
    let v1 = "[host]\nkeep-free = []\n[service.kept]\ncommand = [\"sleep\", \"100121\"]\n\
              cpus = 1\n[service.broken]\ncommand = [\"/nonexistent/pinctl-test-program\"]\n\
              instances = 300\nrestart = \"never\"\n";
    let mut run = Run::new(v1);
    run.start(&unpinned());
    let subtree = subtree_of(&run);
    let broken = || {
        std::fs::read_dir(&subtree)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("broken-"))
            .count()
    };
    assert_eq!(run.status()["broken-0"]["state"], "failed");
    assert_eq!(broken(), 300, "kept while their instances are there");
    let v2 = v1.split("[service.broken]").next().unwrap();
    std::fs::write(run.config(), v2).unwrap();
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(broken(), 0, "the removed instances' cgroups are gone");
    assert!(subtree.join("kept").exists());
    // A clean stop leaves nothing: no instance's cgroup, no supervisor's leaf, no subtree.
    assert!(run.terminate().success(), "{}", run.stderr());
    assert!(!subtree.join("_supervisor").exists(), "the supervisor's leaf is left");
    assert!(!subtree.exists(), "the subtree `{}` is left", subtree.display());
}

#[test]
fn a_second_run_of_a_running_file_is_refused_by_its_lock_before_its_metrics_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut run = Run::new(&format!(
        "[host]\nkeep-free = []\nmetrics-listen = \"127.0.0.1:{port}\"\n\
         [service.metered]\ncommand = [\"sleep\", \"100122\"]\ncpus = 1\n"
    ));
    run.start(&[]);
    let mut second = Command::new(BIN);
    second.arg("run").arg("-c").arg(run.config());
    second.arg("--socket").arg(run.path("second.sock"));
    second.arg("--state-file").arg(run.path("state.json"));
    let out = bounded_output(&mut second);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("another `pinctl run` (PID {})", run.pid())), "{err}");
    assert!(!err.contains("metrics"), "the lock answers first: {err}");
    assert!(run.terminate().success(), "{}", run.stderr());
}
