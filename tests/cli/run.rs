//! `pinctl run` with real processes: restarts after random SIGKILLs with exact counts and no
//! zombies, stop-timeout then KILL, adoption after pinctl itself is SIGKILLed, reload by
//! difference, instances that fail alone, the socket refusing a second supervisor, and the
//! shipped systemd unit checked by `systemd-analyze verify`.
//!
//! Every wait is bounded; every process a test sees is recorded (PID and start time) and
//! killed by the guard's Drop, so a failing test leaves nothing behind. Nothing asserts a
//! duration. Tests with more instances than this machine has CPUs plan against the bundled
//! EPYC topology and start instances without their placement (`--unpinned`, test-only);
//! the others are pinned for real on the live topology.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use serde_json::Value;

use crate::supervisor::{
    Rng, Run, WAIT, alive, allowed_cpus, bounded_output, cgroup_of, proc, processes, running,
    signal, stat, status, unpinned, wait_for,
};
use crate::support::PINCTL as BIN;

#[test]
fn random_sigkills_restart_every_instance_exactly_and_leave_nothing() {
    let mut run = Run::new(
        r#"
[host]
keep-free = []

[service.worker]
command = ["sleep", "100001", "{instance}"]
instances = 8
cpus = 1
restart = "always"
restart-delay = "100ms"
restart-max-delay = "100ms"
start-limit = "off"
stop-timeout = "5s"
"#,
    );
    run.start(&unpinned());
    let seed = std::env::var("PINCTL_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| (std::process::id() as u64 * 0x9e37_79b9) | 1);
    let mut rng = Rng(seed);
    // The issue asks for 1,000: that takes ~40 s alone on a 2-CPU machine but minutes beside
    // the rest of the suite, so the default is 400; PINCTL_TEST_KILLS=1000 runs the full count.
    let kills: u32 =
        std::env::var("PINCTL_TEST_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    let mut killed: BTreeMap<String, u64> = BTreeMap::new();
    let names: Vec<String> = run.status().keys().cloned().collect();
    assert_eq!(names.len(), 8);
    for k in 0..kills {
        let name = &names[(rng.next() % names.len() as u64) as usize];
        let before = run.status()[name]["pid"].as_i64().expect("running") as i32;
        signal(before, Signal::KILL).unwrap();
        *killed.entry(name.clone()).or_default() += 1;
        wait_for("the replacement", || {
            let s = run.status();
            let i = &s[name];
            (i["state"] == "active" && i["pid"].as_i64() != Some(before.into())).then_some(())
        });
        if k % 100 == 0 {
            let zombies: Vec<_> =
                run.children_of_pinctl().into_iter().filter(|c| c.1 == 'Z').collect();
            assert!(zombies.is_empty(), "zombies after {k} kills: {zombies:?}");
        }
    }
    let status = run.settle();
    for name in &names {
        let restarts = status[name]["restarts"].as_u64().unwrap();
        assert_eq!(restarts, killed.get(name).copied().unwrap_or(0), "{name} (seed {seed})");
        assert_eq!(status[name]["last_exit"], "killed by signal 9");
    }
    let zombies: Vec<_> = run.children_of_pinctl().into_iter().filter(|c| c.1 == 'Z').collect();
    assert!(zombies.is_empty(), "zombies: {zombies:?}");
    assert_eq!(run.children_of_pinctl().len(), 8, "one child per instance");
    eprintln!(
        "seed {seed}: {kills} kills, per instance {killed:?}, {} processes seen",
        run.seen.len()
    );
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
    assert!(!run.path("state.json").exists(), "a clean stop removes the state file");
}

#[test]
fn an_instance_ignoring_sigterm_is_killed_after_its_timeout_with_its_helpers() {
    let mut run = Run::new(
        r#"
[host]
keep-free = []

[service.stubborn]
command = ["sh", "-c", "trap '' TERM; sleep 100002 & while :; do sleep 0.05; done"]
cpus = 1
stop-timeout = "300ms"
"#,
    );
    run.start(&[]);
    let s = run.status();
    let pid = s["stubborn"]["pid"].as_i64().unwrap() as i32;
    // Pinned for real: the kernel's view of the child is the plan's.
    assert_eq!(allowed_cpus(pid), s["stubborn"]["cpus"].as_str().unwrap());
    // The helper in its process group.
    let helper = wait_for("the helper", || {
        let helpers = processes(|a| a.join(" ").starts_with("sleep 100002"));
        helpers.into_iter().find(|&p| stat(p).is_some_and(|s| s.pgrp == pid as u32))
    });
    run.seen.insert((helper, stat(helper).unwrap().start_time));
    // Where a cgroup v2 hierarchy is writable the instance has its own cgroup; elsewhere the
    // supervisor said once that it falls back to process groups.
    let said = wait_for("the supervisor to say how it holds instances", || {
        let e = run.stderr();
        (e.contains("one cgroup per instance") || e.contains("through their process groups"))
            .then_some(e)
    });
    if said.contains("one cgroup per instance") {
        let cgroup = cgroup_of(pid).unwrap();
        assert!(cgroup.ends_with("/stubborn"), "{cgroup}");
    }
    let out = run.ctl(&["stop", "stubborn"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = run.status();
    assert_eq!(s["stubborn"]["state"], "inactive");
    assert_eq!(s["stubborn"]["last_exit"], "killed by signal 9", "TERM was ignored, KILL was not");
    run.said("sending KILL to the whole instance");
    assert_eq!(run.leftovers(), Vec::<i32>::new(), "the helper died with it");
    assert!(run.terminate().success());
}

#[test]
fn pinctl_sigkilled_and_started_again_adopts_everything_without_duplicates() {
    let config = r#"
[host]
keep-free = []

[service.db]
command = ["sleep", "100003", "{instance}"]
instances = 3
cpus = 1
output = "/dev/null"
"#;
    let mut run = Run::new(config);
    run.start(&unpinned());
    let before: BTreeMap<String, i64> =
        run.status().into_iter().map(|(n, i)| (n, i["pid"].as_i64().unwrap())).collect();
    // SIGKILL: no chance to clean up; the socket file stays behind (stale).
    let mut old = run.child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    assert!(run.socket().exists());
    run.start(&unpinned());
    let after = run.status();
    for (name, pid) in &before {
        assert_eq!(after[name]["pid"].as_i64(), Some(*pid), "{name} kept its process");
        assert_eq!(after[name]["adopted"], true, "{name}");
        assert_eq!(after[name]["state"], "active");
    }
    let copies = processes(|a| a.join(" ").starts_with("sleep 100003"));
    assert_eq!(copies.len(), 3, "no second copy started");
    run.said("adopted running process");
    // Adopted instances are stopped like own ones.
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn a_damaged_state_file_is_ignored_and_nothing_is_signalled() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.damaged]\ncommand = [\"sleep\", \"100004\"]\ncpus = 1\n",
    );
    // A state file naming this test process: it must not be signalled.
    let me = std::process::id();
    std::fs::write(
        run.path("state.json"),
        format!(
            "{{\"format\":\"someone-else\",\"supervisor_pid\":1,\"instances\":[{{\"pid\":{me}}}]}}"
        ),
    )
    .unwrap();
    run.start(&[]);
    run.said("ignored, nothing adopted");
    assert_eq!(run.status()["damaged"]["state"], "active");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn reload_adds_removes_changes_and_keeps() {
    let v1 = r#"
[host]
keep-free = []

[service.keep]
command = ["sleep", "100005", "{instance}"]
instances = 2
cpus = 1

[service.gone]
command = ["sleep", "100005", "2"]
cpus = 1

[service.changed]
command = ["sleep", "100005", "3"]
cpus = 1
"#;
    let mut run = Run::new(v1);
    run.start(&unpinned());
    let before = run.status();
    let v2 = v1
        .replace("[service.gone]\ncommand = [\"sleep\", \"100005\", \"2\"]\ncpus = 1\n", "")
        .replace("\"3\"]", "\"3\"]\nenv = { LEVEL = \"2\" }")
        + "\n[service.added]\ncommand = [\"sleep\", \"100005\", \"4\"]\ncpus = 1\n";
    std::fs::write(run.config(), &v2).unwrap();

    let dry = run.ctl(&["reload", "--dry-run"]);
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    for line in [
        "keep-0: keep",
        "keep-1: keep",
        // Only its env: gone's node 2 is free now, and a plan from scratch would move changed
        // there from node 3 (lowest ids); the sticky re-plan keeps it and gives node 2 to added.
        "changed: restart (env changed)\n",
        "added: start",
        "gone: stop",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert_eq!(run.status().len(), 4, "a dry run changes nothing");

    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = run.settle();
    let names: Vec<&str> = after.keys().map(String::as_str).collect();
    assert_eq!(names, ["added", "changed", "keep-0", "keep-1"]);
    assert_eq!(after["keep-0"]["pid"], before["keep-0"]["pid"], "untouched");
    assert_eq!(after["keep-1"]["pid"], before["keep-1"]["pid"], "untouched");
    assert_ne!(after["changed"]["pid"], before["changed"]["pid"], "restarted");
    assert_eq!(after["changed"]["state"], "active");
    for name in ["keep-0", "keep-1", "changed"] {
        for what in ["nodes", "cpus"] {
            assert_eq!(after[name][what], before[name][what], "{name} stays: {what}");
        }
    }
    assert_eq!(after["changed"]["nodes"], "3");
    assert_eq!(after["added"]["nodes"], "2", "the node gone left");
    assert_eq!(after["added"]["state"], "active");
    let gone = before["gone"]["pid"].as_i64().unwrap() as i32;
    assert!(!run.seen.iter().any(|&(p, s)| p == gone && alive(p, s)), "removed instance stopped");

    // An invalid file: reported, nothing changes.
    std::fs::write(run.config(), v2.replace("cpus = 1\n", "cpus = 0\n")).unwrap();
    let out = run.ctl(&["reload"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing changed") && err.contains("`cpus` must be at least 1"), "{err}");
    let again = run.status();
    for name in ["added", "changed", "keep-0", "keep-1"] {
        assert_eq!(again[name]["pid"], after[name]["pid"], "{name}");
    }
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn instances_that_cannot_start_fail_alone_and_named() {
    let mut run = Run::new(
        r#"
[host]
keep-free = []

[service.good]
command = ["sleep", "100006"]
cpus = 1

[service.nobinary]
command = ["/nonexistent/server"]
cpus = 1

[service.nouser]
command = ["sleep", "100006"]
user = "no-such-user-pinctl"
cpus = 1

[service.nodir]
command = ["sleep", "100006"]
working-dir = "/nonexistent/dir"
cpus = 1
"#,
    );
    run.start(&unpinned());
    let s = run.status();
    assert_eq!(s["good"]["state"], "active");
    for (name, why) in [
        ("nobinary", "`/nonexistent/server` does not exist"),
        ("nouser", "unknown user `no-such-user-pinctl`"),
        ("nodir", "working-dir `/nonexistent/dir` does not exist"),
    ] {
        assert_eq!(s[name]["state"], "failed", "{name}");
        let reason = s[name]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{name}: {reason}");
    }
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("failed: unknown user"), "{text}");
    // A start by hand tries again (and fails again, named).
    let out = run.ctl(&["start", "nouser"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed to start: nouser"));
    let out = run.ctl(&["stop", "no-such-instance"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no instance `no-such-instance`"));
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn status_shows_each_instance_cpu_time_and_rss() {
    let mut run = Run::new(
        r#"
[host]
keep-free = []

[service.busy]
command = ["sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec sleep 100008"]
cpus = 1

[service.never]
command = ["/nonexistent/server"]
cpus = 1
"#,
    );
    run.start(&unpinned());
    let pid = run.status()["busy"]["pid"].as_i64().unwrap() as i32;
    // Once `sleep` has started (after its exec the loader still maps libraries and faults
    // pages in), its CPU time and RSS stand still and can be compared exactly: the supervisor's
    // answer is taken between two identical readings of /proc.
    let cpu_and_rss = || -> Option<(f64, u64)> {
        let comm = pinctl_sysfs::proc::pid::comm::read(&mut proc(), pid as u32).ok()??;
        let (stat, status) = (stat(pid).filter(|_| comm == "sleep")?, status(pid)?);
        // utime + stime + cutime + cstime, in the kernel's USER_HZ (100 on Linux).
        Some(((stat.cpu_ticks + stat.waited_ticks) as f64 / 100.0, status.rss_bytes?))
    };
    let (s, (cpu, rss)) = wait_for("busy to run `sleep`, settled", || {
        let before = cpu_and_rss()?;
        let s = run.status();
        (cpu_and_rss()? == before).then_some((s, before))
    });
    assert!(cpu > 0.0, "the loop used CPU");
    assert!((s["busy"]["cpu_s"].as_f64().unwrap() - cpu).abs() < 1e-9, "{}", s["busy"]);
    assert_eq!(s["busy"]["rss_bytes"].as_u64(), Some(rss));
    assert_eq!(s["never"]["cpu_s"], Value::Null, "nothing runs");
    assert_eq!(s["never"]["rss_bytes"], Value::Null);
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CPU TIME") && text.contains("RSS"), "{text}");
    let row = text.lines().find(|l| l.starts_with("busy ")).unwrap();
    assert!(row.contains(&format!("{cpu:.2}s")), "{row}");
    assert!(row.contains("KiB") || row.contains("MiB"), "{row}");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// Runs `pinctl run` on `run`'s file with these paths to completion (it is expected to refuse)
/// and returns its exit status and stderr.
fn refused_run(run: &Run, extra: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("run").arg("-c").arg(run.config()).args(extra);
    let out = bounded_output(&mut cmd);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn one_supervisor_per_state_file_socket_and_cgroup_subtree() {
    assert!(
        std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
            || std::path::Path::new("/sys/fs/cgroup/unified/cgroup.controllers").exists(),
        "this test needs a cgroup v2 hierarchy (unified or hybrid), as CI's machines have"
    );
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.second]\ncommand = [\"sleep\", \"100007\"]\ncpus = 1\n",
    );
    run.start(&[]);
    let first = run.status()["second"]["pid"].as_i64().unwrap();
    let (other_socket, other_state) = (run.path("other.sock"), run.path("other.json"));
    let (socket, state) = (run.socket(), run.path("state.json"));
    let arg = |p: &std::path::Path| p.to_str().unwrap().to_string();
    // The same state file through another socket: the lock refuses, naming its holder.
    let (code, err) =
        refused_run(&run, &["--socket", &arg(&other_socket), "--state-file", &arg(&state)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("another `pinctl run` (PID {})", run.pid())), "{err}");
    assert!(err.contains("[host] name"), "the hint leads to a supervisor of its own: {err}");
    // The same socket with another state file.
    let (code, err) =
        refused_run(&run, &["--socket", &arg(&socket), "--state-file", &arg(&other_state)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("another `pinctl run` is serving"), "{err}");
    // The same name (so the same cgroup subtree) with a socket and state file of its own.
    let (code, err) =
        refused_run(&run, &["--socket", &arg(&other_socket), "--state-file", &arg(&other_state)]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("belongs to another `pinctl run`"), "{err}");
    // None of them started, adopted or signalled anything: the first is unaffected.
    let s = run.status();
    assert_eq!(
        (s["second"]["state"].as_str(), s["second"]["pid"].as_i64()),
        (Some("active"), Some(first))
    );
    assert!(!other_socket.exists());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(run.socket()).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    assert!(run.terminate().success());
}

#[test]
fn two_service_files_with_default_paths_get_a_supervisor_each() {
    // Services named apart: the files of one host are planned together, and a second `s`
    // would be refused (as soon as the other supervisor runs) for naming the first's service.
    let config = |name: &str| {
        format!("[host]\nkeep-free = []\n[service.{name}]\ncommand = [\"sleep\", \"100011\"]\n")
    };
    let mut a = Run::new(&config("sa"));
    let mut b = Run::new(&config("sb"));
    for run in [&mut a, &mut b] {
        let mut cmd = Command::new(BIN);
        cmd.arg("run").arg("-c").arg(run.config()).stdin(Stdio::null());
        cmd.stdout(std::fs::File::create(run.path("stdout")).unwrap());
        cmd.stderr(std::fs::File::create(run.path("stderr")).unwrap());
        run.child = Some(cmd.spawn().unwrap());
    }
    let mut pids = Vec::new();
    for run in [&a, &b] {
        // Named after its file: /run/pinctl/NAME.sock, NAME.state.json.
        let socket = PathBuf::from(format!("/run/pinctl/{}.sock", run.name));
        let pid = wait_for("both supervisors to start their instance", || {
            let out = bounded_output(
                Command::new(BIN).args(["status", "--json", "--socket"]).arg(&socket),
            );
            let v: Value = serde_json::from_slice(&out.stdout).ok()?;
            let i = &v["instances"][0];
            (i["state"] == "active").then(|| i["pid"].as_i64())?
        });
        pids.push(pid);
        assert!(PathBuf::from(format!("/run/pinctl/{}.state.json", run.name)).exists());
    }
    assert_ne!(pids[0], pids[1], "each file has its own instance");
    for run in [&mut a, &mut b] {
        for pid in &pids {
            if let Some(s) = stat(*pid as i32) {
                run.seen.insert((*pid as i32, s.start_time));
            }
        }
        assert!(run.terminate().success(), "{}", run.stderr());
    }
    for pid in pids {
        assert!(!running(pid as i32), "{pid} was stopped");
    }
    for run in [&a, &b] {
        // The lock file outlives a supervisor by design; a test's own goes with the test.
        let _ = std::fs::remove_file(format!("/run/pinctl/locks/{}.state.json.lock", run.name));
    }
}

#[test]
fn an_invalid_file_refuses_to_start_with_located_diagnostics() {
    let run = Run::new("[service.a]\ncommand = [\"sleep\"]\nrestart-delay = \"soon\"\n");
    let out = bounded_output(&mut run.command(&[]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}.toml:3:17", run.name);
    assert!(err.contains("invalid `restart-delay`") && err.contains(&at), "{err}");
    assert!(!run.socket().exists());
}

#[test]
fn output_lines_are_prefixed_with_the_instance_name() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.talker]\ncommand = [\"sh\", \"-c\", \"echo one; echo two >&2; exec sleep 100008\"]\ncpus = 1\n",
    );
    run.start(&[]);
    let stdout = wait_for("both lines", || {
        let s = std::fs::read_to_string(run.path("stdout")).ok()?;
        (s.contains("talker: one") && s.contains("talker: two")).then_some(s)
    });
    assert!(stdout.lines().all(|l| l.starts_with("talker: ")), "{stdout}");
    run.status();
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// The shipped units pass `systemd-analyze verify`, and call `pinctl` without a folder, so
/// systemd finds it where the package puts it (/usr/bin) or a manual install (/usr/local/bin).
#[test]
fn the_shipped_units_pass_systemd_analyze_verify() {
    for (name, keys) in [
        ("pinctl.service", &["Type=notify", "Delegate=yes", "KillMode=process", "ExecReload="][..]),
        // One supervisor per service file of /etc/pinctl, named after the file.
        (
            "pinctl@.service",
            &[
                "Type=notify",
                "Delegate=yes",
                "KillMode=process",
                "ExecReload=",
                "ExecStart=pinctl run -c /etc/pinctl/%i.toml",
                "RuntimeDirectoryPreserve=yes",
            ][..],
        ),
        (
            "pinctl-irq.service",
            &[
                "Type=oneshot",
                "RemainAfterExit=yes",
                "PartOf=irqbalance.service",
                "ExecStart=pinctl irq apply -c ",
                "ExecStop=pinctl irq restore -c ",
            ][..],
        ),
    ] {
        let unit =
            std::fs::read_to_string(format!("{}/systemd/{name}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        for key in keys {
            assert!(unit.contains(key), "systemd/{name} lacks {key}");
        }
        let execs: Vec<&str> = unit.lines().filter(|l| l.starts_with("Exec")).collect();
        for line in &execs {
            let program = line.split_once('=').unwrap().1.split_whitespace().next().unwrap();
            assert!(program == "pinctl" || program == "/bin/kill", "{name}: `{line}`");
        }
        // This machine has no pinctl in systemd's search path: the built one stands in.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        let here = unit.replace("Start=pinctl ", &format!("Start={BIN} "));
        std::fs::write(&path, here.replace("Stop=pinctl ", &format!("Stop={BIN} "))).unwrap();
        let out =
            Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap_or_else(|e| {
                panic!(
                    "systemd-analyze ({e}): install Debian's `systemd` package (scripts/test does)"
                )
            });
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.trim().is_empty(), "{name}: {text}");
        // A template is verified as the unit of one file, `pinctl@db.service`, too.
        if name.ends_with("@.service") {
            let one = dir.path().join(name.replace("@.", "@db."));
            std::fs::copy(&path, &one).unwrap();
            let out = Command::new("systemd-analyze").arg("verify").arg(&one).output().unwrap();
            let text = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.trim().is_empty(), "{name} as db: {text}");
        }
    }
}

#[test]
fn sd_notify_ready_status_reloading_watchdog_and_stopping() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.notified]\ncommand = [\"sleep\", \"100009\"]\ncpus = 1\n",
    );
    let path = run.path("notify");
    let server = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    server.set_read_timeout(Some(WAIT)).unwrap();
    let mut cmd = run.command(&[]);
    cmd.env("NOTIFY_SOCKET", &path).env("WATCHDOG_USEC", "200000").env_remove("WATCHDOG_PID");
    run.child = Some(cmd.spawn().unwrap());
    let mut messages = Vec::new();
    let expect = |want: &str, messages: &mut Vec<String>| {
        wait_for(want, || {
            if messages.iter().any(|m| m.contains(want)) {
                return Some(());
            }
            let mut buf = [0u8; 512];
            let n = server.recv(&mut buf).expect("a notification before the timeout");
            messages.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            None
        })
    };
    expect("READY=1", &mut messages);
    assert!(messages.iter().any(|m| m.contains("STATUS=1/1 running")), "{messages:?}");
    expect("WATCHDOG=1", &mut messages);
    run.status();
    signal(run.pid(), Signal::HUP).unwrap();
    expect("RELOADING=1\nMONOTONIC_USEC=", &mut messages);
    signal(run.pid(), Signal::TERM).unwrap();
    expect("STOPPING=1", &mut messages);
    let mut child = run.child.take().unwrap();
    assert!(wait_for("pinctl to exit", || child.try_wait().unwrap()).success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn detach_leaves_instances_running_for_the_next_supervisor() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.detached]\ncommand = [\"sleep\", \"100010\", \"{instance}\"]\ninstances = 2\ncpus = 1\n",
    );
    run.start(&unpinned());
    let before = run.status();
    let out = run.ctl(&["detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut old = run.child.take().unwrap();
    assert!(wait_for("the old supervisor to exit", || old.try_wait().unwrap()).success());
    for (name, i) in &before {
        let pid = i["pid"].as_i64().unwrap() as i32;
        assert!(running(pid), "{name} still runs after detach");
    }
    run.start(&unpinned());
    let after = run.status();
    for (name, i) in &before {
        assert_eq!(after[name]["pid"], i["pid"], "{name}");
        assert_eq!(after[name]["adopted"], true, "{name}");
    }
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// An instance that writes to its output survives a detach: while no supervisor reads its FIFO
/// its writes fail instead of killing it (SIGPIPE is ignored, as systemd does), and the
/// supervisor that adopts it reads the FIFO again: its output goes on.
#[test]
fn a_talking_instance_survives_detach_and_its_output_goes_on_after_adoption() {
    let mut run = Run::new(
        "[host]\nkeep-free = []\n[service.talker]\ncommand = [\"sh\", \"-c\", \"n=0; while :; do n=$((n+1)); echo tick $n; sleep 0.05; done\", \"talker-100015\"]\ncpus = 1\n",
    );
    run.start(&unpinned());
    let pid = run.status()["talker"]["pid"].as_i64().unwrap() as i32;
    let out = run.ctl(&["detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut old = run.child.take().unwrap();
    assert!(wait_for("the old supervisor to exit", || old.try_wait().unwrap()).success());
    // Twenty writes to a FIFO nobody reads.
    std::thread::sleep(Duration::from_millis(1000));
    let state = stat(pid).map(|s| s.state);
    assert!(state.is_some_and(|s| s != 'Z'), "talker {pid} died after detach: {state:?}");
    run.start(&unpinned());
    assert_eq!(run.status()["talker"]["pid"].as_i64(), Some(i64::from(pid)));
    let said = wait_for("the output followed again", || {
        let e = run.stderr();
        e.contains("its output is read again from its FIFO").then_some(e)
    });
    assert!(!said.contains("is lost until it restarts"), "{said}");
    // The same process's lines reach the new supervisor's stdout.
    let out = wait_for("lines of the adopted talker", || {
        let o = std::fs::read_to_string(run.path("stdout")).unwrap_or_default();
        (o.lines().filter(|l| l.starts_with("talker: tick ")).count() >= 3).then_some(o)
    });
    assert!(out.lines().all(|l| l.starts_with("talker: tick ")), "{out}");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
    // Stopped for good: its FIFO and their folder are gone.
    assert!(!run.path("state.json.output").exists());
}

/// The numbers of the `tick N` lines in an output file, in order.
fn ticks(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("tick ")?.parse().ok())
        .collect()
}

/// logrotate's `create` mode: the output file is renamed, and `pinctl reopen-logs` (or
/// SIGUSR1) makes the supervisor write a new one at the path; the file also keeps being written
/// after a detach and adoption.
#[test]
fn output_files_are_reopened_for_logrotate_and_kept_across_a_detach() {
    let config = r#"
[host]
keep-free = []

[service.talker]
command = ["sh", "-c", "n=0; while :; do n=$((n+1)); echo tick $n; sleep 0.02; done", "talker-100016"]
cpus = 1
output = "LOG"
"#;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("talker.log");
    let mut run = Run::new(&config.replace("LOG", log.to_str().unwrap()));
    run.start(&unpinned());
    let grown = |path: &std::path::Path, n: usize| {
        wait_for("lines in the output file", || (ticks(path).len() >= n).then_some(()))
    };
    grown(&log, 5);
    let first = dir.path().join("talker.log.1");
    std::fs::rename(&log, &first).unwrap();
    let out = run.ctl(&["reopen-logs"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{said} {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(said, format!("talker: reopened {}\n", log.display()));
    grown(&log, 5);
    // Every line is in one of the two files, in order, none twice: the rotated file ends
    // where the new one starts.
    let (old, new) = (ticks(&first), ticks(&log));
    assert_eq!(old.windows(2).find(|w| w[1] != w[0] + 1), None, "{old:?}");
    assert_eq!(new[0], old[old.len() - 1] + 1, "old ends {:?}, new starts {:?}", old.last(), new);
    // SIGUSR1 does the same.
    let second = dir.path().join("talker.log.2");
    std::fs::rename(&log, &second).unwrap();
    signal(run.pid(), Signal::USR1).unwrap();
    grown(&log, 3);
    // Across a detach, the file keeps being written by the next supervisor.
    let pid = run.status()["talker"]["pid"].as_i64().unwrap();
    assert!(run.ctl(&["detach"]).status.success());
    let mut old = run.child.take().unwrap();
    assert!(wait_for("the old supervisor to exit", || old.try_wait().unwrap()).success());
    let before = ticks(&log).len();
    run.start(&unpinned());
    assert_eq!(run.status()["talker"]["pid"].as_i64(), Some(pid));
    grown(&log, before + 5);
    let third = dir.path().join("talker.log.3");
    std::fs::rename(&log, &third).unwrap();
    let out = run.ctl(&["reopen-logs"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    grown(&log, 3);
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// Each start opens the output file again at its path, as an instance that opened it itself
/// did: a file removed while it ran is there again after a restart.
#[test]
fn a_restarted_instance_opens_its_output_file_again() {
    let config = r#"
[host]
keep-free = []

[service.talker]
command = ["sh", "-c", "echo started; while :; do sleep 0.05; done", "talker-100019"]
cpus = 1
output = "LOG"
"#;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("talker.log");
    let mut run = Run::new(&config.replace("LOG", log.to_str().unwrap()));
    run.start(&unpinned());
    let started = || std::fs::read_to_string(&log).ok().filter(|t| t == "started\n");
    wait_for("the first start's line", started);
    std::fs::remove_file(&log).unwrap();
    let out = run.ctl(&["restart", "talker"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for("the second start's line in a new file", started);
    assert!(!run.stderr().contains("output reopened"), "{}", run.stderr());
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// What an instance writes as it stops (a database's `Shutdown complete`) reaches its file
/// before the supervisor exits.
#[test]
fn the_last_lines_of_a_stopping_instance_reach_its_file() {
    let config = r#"
[host]
keep-free = []

[service.db]
command = ["sh", "-c", "trap 'seq 1 20000; echo shutdown complete; exit 0' TERM; echo ready; while :; do sleep 0.05; done", "db-100018"]
cpus = 1
output = "LOG"
"#;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("db.log");
    let mut run = Run::new(&config.replace("LOG", log.to_str().unwrap()));
    run.start(&unpinned());
    wait_for("the ready line", || {
        std::fs::read_to_string(&log).ok().filter(|t| t.contains("ready")).map(|_| ())
    });
    assert!(run.terminate().success());
    // (sh may say `Terminated` for its sleep in between.)
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("ready\n") && text.ends_with("shutdown complete\n"), "{text:?}");
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// Debian's logrotate in its default `create` mode with `pinctl reopen-logs` as `postrotate`:
/// the renamed file ends where the new one starts, nothing lost or doubled.
#[test]
fn logrotate_create_mode_with_reopen_logs_loses_nothing() {
    let config = r#"
[host]
keep-free = []

[service.talker]
command = ["sh", "-c", "n=0; while :; do n=$((n+1)); echo tick $n; sleep 0.01; done", "talker-100020"]
cpus = 1
output = "LOG"
"#;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("talker.log");
    let mut run = Run::new(&config.replace("LOG", log.to_str().unwrap()));
    run.start(&unpinned());
    wait_for("lines to rotate", || (ticks(&log).len() >= 20).then_some(()));
    let conf = dir.path().join("logrotate.conf");
    std::fs::write(
        &conf,
        format!(
            "{} {{\n    rotate 2\n    create 0640 root root\n    nocompress\n    postrotate\n        {} reopen-logs --socket {}\n    endscript\n}}\n",
            log.display(),
            BIN,
            run.socket().display()
        ),
    )
    .unwrap();
    crate::supervisor::logrotate(&conf);
    let rotated = dir.path().join("talker.log.1");
    wait_for("lines in the new file", || (ticks(&log).len() >= 20).then_some(()));
    let (old, new) = (ticks(&rotated), ticks(&log));
    assert!(!old.is_empty(), "nothing in the rotated file");
    assert_eq!(old.windows(2).find(|w| w[1] != w[0] + 1), None, "{old:?}");
    assert_eq!(new.windows(2).find(|w| w[1] != w[0] + 1), None, "{new:?}");
    assert_eq!(new[0], old[old.len() - 1] + 1, "old ends {:?}, new starts {:?}", old.last(), new);
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// A file that cannot be opened again is said, with the instance, and the command fails; the
/// writer keeps the file it had.
#[test]
fn a_reopen_that_fails_is_said_and_the_old_file_kept() {
    let config = r#"
[host]
keep-free = []

[service.talker]
command = ["sh", "-c", "while :; do echo tick; sleep 0.02; done", "talker-100017"]
cpus = 1
output = "LOG"
"#;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let log = logs.join("talker.log");
    let mut run = Run::new(&config.replace("LOG", log.to_str().unwrap()));
    run.start(&unpinned());
    wait_for("lines in the output file", || log.exists().then_some(()));
    // Where the file was, a link now: never followed.
    let moved = dir.path().join("talker.log.1");
    std::fs::rename(&log, &moved).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &log).unwrap();
    let out = run.ctl(&["reopen-logs"]);
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with(&format!("talker: cannot reopen {}: ", log.display())), "{said}");
    let size = std::fs::metadata(&moved).unwrap().len();
    wait_for("the old file to grow", || {
        (std::fs::metadata(&moved).unwrap().len() > size).then_some(())
    });
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn an_adopted_instance_killed_from_outside_is_noticed_through_its_pidfd_and_restarted() {
    let config = r#"
[host]
keep-free = []

[service.adoptee]
command = ["sleep", "100011", "{instance}"]
instances = 2
cpus = 1
restart = "on-failure"
output = "/dev/null"
"#;
    let mut run = Run::new(config);
    run.start(&unpinned());
    let mut old = run.child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    run.start(&unpinned());
    let adopted = run.status();
    for i in adopted.values() {
        assert_eq!(i["adopted"], true, "{i}");
    }
    // Watched through pidfds on any kernel this suite runs on (pidfd_open: Linux 5.3).
    let stderr = run.said_times("watched through a pidfd", 2);
    assert!(!stderr.contains("polling /proc"), "{stderr}");
    assert_eq!(stderr.matches("watched through a pidfd").count(), 2, "{stderr}");
    let victim = adopted["adoptee-0"]["pid"].as_i64().unwrap() as i32;
    let restarts = adopted["adoptee-0"]["restarts"].as_u64().unwrap();
    signal(victim, Signal::KILL).unwrap();
    // Not our child and not polled: only the pidfd tells the supervisor it is gone.
    let after = wait_for("the killed adopted instance to be replaced", || {
        let s = run.status();
        let i = &s["adoptee-0"];
        (i["state"] == "active" && i["pid"].as_i64() != Some(victim as i64)).then_some(s)
    });
    assert_eq!(after["adoptee-0"]["restarts"].as_u64(), Some(restarts + 1), "{after:?}");
    assert_eq!(after["adoptee-0"]["adopted"], false, "its replacement is pinctl's own child");
    assert_eq!(after["adoptee-1"]["pid"], adopted["adoptee-1"]["pid"], "the other is untouched");
    assert_eq!(after["adoptee-1"]["adopted"], true);
    run.said("status unknown: adopted process");
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// `pinctl status` shows what the watcher of `pinctl run` last found of each instance: the
/// share of its memory on its planned nodes and its drift, here a thread moved off its planned
/// CPU with `taskset` (an `alert` service: reported, never moved back, until a reload makes
/// it a `rebalance` one).
#[test]
fn status_shows_each_instance_local_fraction_and_drift() {
    let mut run = Run::new(
        r#"
[host]
keep-free = []
watch-interval = "200ms"
# A host whose page cache fills its node must not make this a node-pressure test.
node-free-watermark = "1MiB"

[service.db]
command = ["sleep", "100011"]
cpus = 1
memory-policy = "bind"
min-memory = "4KiB"
drift-hold = "200ms"

[service.small]
command = ["sleep", "100012"]
cpus = 1
min-memory = "1GiB"
"#,
    );
    run.start(&[]);
    let pid = run.status()["db"]["pid"].as_i64().unwrap();
    // Under min-memory: LOCAL says so, and why, instead of a bare `-`.
    let small = wait_for("a first sample of small", || {
        let d = run.status()["small"]["drift"].clone();
        d.is_object().then_some(d)
    });
    assert!(small["local_fraction"].is_null(), "{small}");
    let why = small["locality_not_judged"].as_str().unwrap().to_string();
    assert!(why.ends_with("resident, under min-memory 1024.0MiB"), "{why}");
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    let row = text.lines().position(|l| l.starts_with("small ")).unwrap();
    assert!(text.lines().nth(row).unwrap().contains("<min"), "{text}");
    assert_eq!(text.lines().nth(row + 1).unwrap(), format!("    locality not judged: {why}"));
    let planned = run.status()["db"]["cpus"].as_str().unwrap().to_string();
    let in_place = wait_for("a first sample", || {
        let s = run.status();
        let d = s["db"]["drift"].clone();
        d.is_object().then_some(d)
    });
    // One node here: every page of a bound instance is on it.
    assert_eq!(in_place["local_fraction"].as_f64(), Some(1.0), "{in_place}");
    assert_eq!(in_place["drifting"], serde_json::json!([]), "{in_place}");
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert!(header.windows(2).any(|w| w == ["LOCAL", "DRIFT"]), "{text}");
    let row = text.lines().find(|l| l.starts_with("db ")).unwrap();
    assert!(row.contains("100.0%") && row.contains("in-place"), "{text}");

    // Every CPU of this machine: the thread may now run outside the planned one.
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let moved = Command::new("taskset")
        .args(["-p", "-c", online.trim(), &pid.to_string()])
        .output()
        .unwrap();
    assert!(moved.status.success(), "{}", String::from_utf8_lossy(&moved.stderr));
    if online.trim() == planned {
        // A one-CPU machine cannot move a thread anywhere else; the in-place state was shown.
        return;
    }
    let drifting = wait_for("the CPU drift in status", || {
        let s = run.status();
        let d = s["db"]["drift"].clone();
        (d["drifting"] == serde_json::json!(["cpu"])).then_some(d)
    });
    assert_eq!(drifting["threads_out_of_place"].as_u64(), Some(1), "{drifting}");
    let text = String::from_utf8_lossy(&run.ctl(&["status"]).stdout).to_string();
    let row = text.lines().find(|l| l.starts_with("db ")).unwrap();
    assert!(row.contains(" cpu "), "{text}");
    // `alert` (the default) never re-pins.
    let allowed = || allowed_cpus(pid as i32);
    assert_eq!(allowed(), online.trim());

    // A reload re-reads the drift keys: the same service, now `rebalance`, is re-pinned
    // without a restart. Its dry run changes nothing (five cycles later the thread is still
    // where taskset put it).
    let config = std::fs::read_to_string(run.config()).unwrap();
    let rebalance = config.replace("drift-hold", "on-drift = \"rebalance\"\ndrift-hold");
    std::fs::write(run.config(), rebalance).unwrap();
    let dry = run.ctl(&["reload", "--dry-run"]);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(allowed(), online.trim(), "a dry run changed the watcher's action");
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for("the reloaded `rebalance` to re-pin the thread", || {
        (allowed() == planned).then_some(())
    });
    wait_for("the CPU drift to end in status", || {
        let s = run.status();
        (s["db"]["drift"]["drifting"] == serde_json::json!([])).then_some(())
    });
    assert_eq!(run.status()["db"]["pid"].as_i64(), Some(pid), "re-pinned, not restarted");
    run.said("pinctl: watch: watch reloaded=yes");
    run.said("threads_repinned=1");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn scaling_a_service_keeps_its_running_instance_and_starts_or_stops_only_the_difference() {
    let v1 = "[host]\nkeep-free = []\n[service.s]\ncommand = [\"sleep\", \"100021\", \"{instance}\"]\n\
              cpus = 1\noutput = \"/dev/null\"\n";
    let mut run = Run::new(v1);
    run.start(&unpinned());
    let first = run.status()["s"]["pid"].as_i64().unwrap();
    std::fs::write(run.config(), v1.replace("cpus = 1\n", "cpus = 1\ninstances = 2\n")).unwrap();
    let out = run.ctl(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("s-0: keep (was `s`)") && text.contains("s-1: start"), "{text}");
    let after = run.settle();
    assert_eq!(after.keys().map(String::as_str).collect::<Vec<_>>(), ["s-0", "s-1"]);
    assert_eq!(after["s-0"]["pid"].as_i64(), Some(first), "not restarted, only renamed");
    assert_eq!(after["s-1"]["state"], "active");
    // `s-0` still runs in the cgroup it was started in (cgroup v2 renames none): a next
    // supervisor adopts it from there rather than taking it for a stranger.
    let out = run.ctl(&["detach"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut old = run.child.take().unwrap();
    assert!(wait_for("the old supervisor to exit", || old.try_wait().unwrap()).success());
    run.start(&unpinned());
    let adopted = run.status();
    assert_eq!(adopted["s-0"]["pid"].as_i64(), Some(first), "{}", run.stderr());
    assert_eq!(adopted["s-0"]["adopted"], true);
    assert_eq!(adopted["s-1"]["pid"], after["s-1"]["pid"]);
    // And back to one: s-0 is `s` again, s-1 stops.
    std::fs::write(run.config(), v1).unwrap();
    let out = run.ctl(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("s: keep (was `s-0`)") && text.contains("s-1: stop"), "{text}");
    let after = run.settle();
    assert_eq!(after.keys().map(String::as_str).collect::<Vec<_>>(), ["s"]);
    assert_eq!(after["s"]["pid"].as_i64(), Some(first));
    // Its exit is still seen under its new name: killed, it is restarted as `s`.
    let _ = signal(first as i32, Signal::KILL);
    let again = wait_for("`s` to be restarted", || {
        let s = run.status();
        let pid = s["s"]["pid"].as_i64()?;
        (pid != first && s["s"]["state"] == "active").then_some(pid)
    });
    assert_ne!(again, first);
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn a_reload_starts_nothing_until_what_it_stops_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("old-{}", std::process::id());
    let seen = dir.path().join("seen");
    // `old` takes its time to stop (it ignores TERM until KILLed after its stop-timeout);
    // `new` says, when it starts, whether `old` still runs: on one data directory, that is two
    // databases at once.
    let v1 = format!(
        "[host]\nkeep-free = []\n[service.old]\ncommand = [\"sh\", \"-c\", \"trap '' TERM; \
         while :; do sleep 1; done\", \"{marker}\"]\nstop-timeout = \"2s\"\noutput = \"/dev/null\"\n\
         [service.kept]\ncommand = [\"sleep\", \"100022\"]\noutput = \"/dev/null\"\n"
    );
    let mut run = Run::new(&v1);
    run.start(&unpinned());
    let kept = run.status()["kept"]["pid"].as_i64();
    let old = run.status()["old"]["pid"].as_i64().unwrap() as i32;
    // A pattern that finds `old` but not the shell that carries the pattern itself.
    let pattern = format!("[o]{}", &marker[1..]);
    let v2 = format!(
        "[host]\nkeep-free = []\n[service.new]\ncommand = [\"sh\", \"-c\", \"if pgrep -f '{pattern}' \
         >/dev/null; then echo overlap; else echo alone; fi > {}; exec sleep 100023\"]\n\
         output = \"/dev/null\"\n[service.kept]\ncommand = [\"sleep\", \"100022\"]\n\
         output = \"/dev/null\"\n",
        seen.display()
    );
    std::fs::write(run.config(), v2).unwrap();
    let out = run.ctl(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    // The reload answered once `new` had started (after `old` was KILLed).
    assert!(text.contains("new: start") && text.contains("old: stop"), "{text}");
    assert!(stat(old).is_none_or(|s| s.state == 'Z'), "old is gone when the reload answers");
    let said = wait_for("new to say what it found", || std::fs::read_to_string(&seen).ok());
    assert_eq!(said.trim(), "alone", "new started while old still ran");
    let after = run.settle();
    assert_eq!(after["kept"]["pid"].as_i64(), kept, "kept untouched");
    assert!(run.terminate().success(), "{}", run.stderr());
}

/// A `pinctl` client left running while the test goes on (its answer may wait for the
/// supervisor); killed by PID if the test ends first.
struct Client(std::process::Child);

impl Client {
    fn spawn(run: &Run, args: &[&str]) -> Client {
        let mut cmd = Command::new(BIN);
        cmd.args(args).arg("--socket").arg(run.socket());
        Client(
            cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap(),
        )
    }

    /// Its exit status, waited for at most `WAIT`.
    fn finish(&mut self, what: &str) -> std::process::ExitStatus {
        wait_for(what, || self.0.try_wait().unwrap())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// The value of `key` in the environment of process `pid`.
fn env_of(pid: i64, key: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    environ.split(|&b| b == 0).find_map(|kv| {
        Some(String::from_utf8_lossy(kv.strip_prefix(prefix.as_bytes())?).into_owned())
    })
}

/// Issue 26: `stop x` (x takes its stop-timeout to go), a reload that changes `x`, then
/// `start x` while it still stops. The start ran `x`'s old settings, the reload never
/// answered and every later reload waited behind it. Now the start joins the reload: `x`
/// starts once gone, with the new settings, and both are answered.
#[test]
fn stop_then_a_reload_that_changes_it_then_start_answers_and_runs_the_new_settings() {
    let v1 = "[host]\nkeep-free = []\n[service.x]\ncommand = [\"sh\", \"-c\", \"trap '' TERM; \
              while :; do sleep 0.2; done\"]\nenv = { VERSION = \"1\" }\nstop-timeout = \"2s\"\n\
              output = \"/dev/null\"\n";
    let mut run = Run::new(v1);
    run.start(&unpinned());
    let old = run.status()["x"]["pid"].as_i64().unwrap();
    let mut stop = Client::spawn(&run, &["stop", "x"]);
    wait_for("x to be stopping", || (run.status()["x"]["state"] == "deactivating").then_some(()));
    std::fs::write(run.config(), v1.replace("VERSION = \"1\"", "VERSION = \"2\"")).unwrap();
    let mut reload = Client::spawn(&run, &["reload"]);
    wait_for("the reload to be applied", || {
        run.stderr().contains("x: reload: restart").then_some(())
    });
    let mut start = Client::spawn(&run, &["start", "x"]);
    assert!(reload.finish("the reload to answer").success(), "{}", run.stderr());
    assert!(start.finish("the start to answer").success(), "{}", run.stderr());
    assert!(stop.finish("the stop to answer").success(), "{}", run.stderr());
    let s = run.settle();
    let new = s["x"]["pid"].as_i64().expect("x runs");
    assert_ne!(new, old);
    assert_eq!(env_of(new, "VERSION").as_deref(), Some("2"), "x runs the reload's settings");
    // Later reloads are applied and answered: by hand, then by SIGHUP.
    std::fs::write(run.config(), v1.replace("VERSION = \"1\"", "VERSION = \"3\"")).unwrap();
    let out = run.ctl(&["reload"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(run.config(), v1.replace("VERSION = \"1\"", "VERSION = \"4\"")).unwrap();
    signal(run.pid(), Signal::HUP).unwrap();
    wait_for("the SIGHUP reload to run x's fourth settings", || {
        let s = run.status();
        let pid = s["x"]["pid"].as_i64()?;
        (s["x"]["state"] == "active" && env_of(pid, "VERSION")? == "4").then_some(())
    });
    // It ignores TERM: stopped with KILL after its stop-timeout, which pinctl's status says.
    assert_eq!(run.terminate().code(), Some(1), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// A start of an instance a reload removed, while it still stops: refused, and the reload
/// answers with it gone. (It was restarted once stopped, out of the file, and the reload
/// waited for it for ever.)
#[test]
fn an_instance_a_reload_removed_is_never_started_again() {
    let v1 = "[host]\nkeep-free = []\n[service.gone]\ncommand = [\"sh\", \"-c\", \"trap '' TERM; \
              while :; do sleep 0.2; done\"]\nstop-timeout = \"2s\"\noutput = \"/dev/null\"\n\
              [service.kept]\ncommand = [\"sleep\", \"100025\"]\noutput = \"/dev/null\"\n";
    let mut run = Run::new(v1);
    run.start(&unpinned());
    let old = run.status()["gone"]["pid"].as_i64().unwrap() as i32;
    std::fs::write(
        run.config(),
        v1.split("[service.gone]").next().unwrap().to_string()
            + "[service.kept]\ncommand = [\"sleep\", \"100025\"]\noutput = \"/dev/null\"\n",
    )
    .unwrap();
    let mut reload = Client::spawn(&run, &["reload"]);
    wait_for("gone to be stopping", || {
        (run.status()["gone"]["state"] == "deactivating").then_some(())
    });
    let out = run.ctl(&["start", "gone"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("`gone` removed from the file by a reload"), "{said}");
    assert!(reload.finish("the reload to answer").success(), "{}", run.stderr());
    assert!(stat(old).is_none_or(|s| s.state == 'Z'), "gone is gone when the reload answers");
    let s = run.settle();
    assert!(!s.contains_key("gone"), "{s:?}");
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

#[test]
fn a_restarted_instance_shows_its_old_placement_until_its_new_process_runs() {
    // Two CPUs here: the instance moves from CPU 0 to CPUs 0-1, and stops slowly.
    let v1 = "[host]\nkeep-free = []\n[service.slow]\ncommand = [\"sh\", \"-c\", \
              \"trap '' TERM; while :; do sleep 1; done\"]\ncpus = 1\nstop-timeout = \"2s\"\n\
              output = \"/dev/null\"\n";
    let mut run = Run::new(v1);
    run.start(&[]);
    let before = run.status()["slow"].clone();
    std::fs::write(run.config(), v1.replace("cpus = 1\n", "cpus = 2\n")).unwrap();
    let mut reload = Command::new(BIN);
    reload.args(["reload", "--socket"]).arg(run.socket());
    let mut reload = reload.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let during = wait_for("the old process to be stopping", || {
        let s = run.status();
        (s["slow"]["state"] == "deactivating").then(|| s["slow"].clone())
    });
    assert_eq!(during["pid"], before["pid"]);
    assert_eq!(during["cpus"], before["cpus"], "the old process with its own placement");
    let status = wait_for("the reload to answer", || reload.try_wait().unwrap());
    assert!(status.success());
    let after = run.settle();
    assert_ne!(after["slow"]["pid"], before["pid"]);
    assert_ne!(after["slow"]["cpus"], before["cpus"], "the new process with the new one");
    // It ignores TERM: stopped with KILL after its stop-timeout, which pinctl's status says.
    assert_eq!(run.terminate().code(), Some(1), "{}", run.stderr());
}

#[test]
fn starting_a_program_that_dies_at_once_is_a_failed_start() {
    let config = "[host]\nkeep-free = []\n[service.crash]\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
                  restart = \"never\"\n\
                  [service.fine]\ncommand = [\"sleep\", \"100024\"]\n";
    let mut run = Run::new(config);
    run.start(&unpinned());
    let out = run.ctl(&["restart", "crash"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("crash: did not start: exit status 3"), "{text}");
    let out = run.ctl(&["restart", "fine"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(run.terminate().success(), "{}", run.stderr());
}

#[test]
fn plan_warnings_are_said_at_start_and_on_reload_and_what_a_reload_cannot_apply_is_told() {
    // keep-free left to its default: on a machine with one node the plan warns that the
    // NIC's node is used.
    let v1 = "[service.w]\ncommand = [\"sleep\", \"100025\"]\ncpus = 1\noutput = \"/dev/null\"\n";
    let mut run = Run::new(v1);
    run.start(&[]);
    let plan = Command::new(BIN).args(["plan", "-c"]).arg(run.config()).output().unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout).to_string();
    let warning = plan
        .lines()
        .filter_map(|l| l.trim().strip_prefix("warning: "))
        // Not the one on processes other tests pin: those come and go between the two plans.
        .find(|w| !w.contains("pinned outside pinctl"))
        .unwrap_or_else(|| panic!("no warning in the plan:\n{plan}"))
        .to_string();
    run.said(&warning);
    let v2 = format!("[host]\nmetrics-listen = \"127.0.0.1:0\"\n{v1}");
    std::fs::write(run.config(), v2).unwrap();
    let out = run.ctl(&["reload"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&warning), "the reload's answer: {text}");
    assert!(text.contains("not applied: metrics-listen changed from off to 127.0.0.1:0"), "{text}");
    assert!(run.terminate().success(), "{}", run.stderr());
}

#[test]
fn clients_find_their_supervisor_from_its_file_or_the_environment_and_take_services_and_patterns() {
    let config = "[host]\nkeep-free = []\n[service.web]\ncommand = [\"sleep\", \"100026\", \
                  \"{instance}\"]\ninstances = 2\ncpus = 1\noutput = \"/dev/null\"\n\
                  [service.db]\ncommand = [\"sleep\", \"100027\"]\noutput = \"/dev/null\"\n";
    let mut run = Run::new("");
    // The socket named in the file, not on the command line: only `-c FILE` leads to it.
    let with_socket =
        format!("[host]\nsocket = \"{}\"\n{}", run.socket().display(), &config["[host]\n".len()..]);
    std::fs::write(run.config(), with_socket).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("run").arg("-c").arg(run.config()).arg("--state-file").arg(run.path("state.json"));
    cmd.args(unpinned()).stdin(Stdio::null());
    cmd.stdout(std::fs::File::create(run.path("stdout")).unwrap());
    cmd.stderr(std::fs::File::create(run.path("stderr")).unwrap());
    run.child = Some(cmd.spawn().unwrap());
    let before = run.settle();
    let client = |args: &[&str], env: Option<&PathBuf>| {
        let mut c = Command::new(BIN);
        c.args(args).env_remove("PINCTL_SOCKET");
        if let Some(socket) = env {
            c.env("PINCTL_SOCKET", socket);
        }
        bounded_output(&mut c)
    };
    let config_arg = run.config().display().to_string();
    let out = client(&["status", "-c", &config_arg], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("web-0") && text.contains("db"), "{text}");
    let out = client(&["status", "--json", "db"], Some(&run.socket()));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> =
        json["instances"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["db"]);
    // A service's name restarts all its instances, and nothing else.
    let out = client(&["restart", "-c", &config_arg, "web"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let after = run.settle();
    for name in ["web-0", "web-1"] {
        assert_ne!(after[name]["pid"], before[name]["pid"], "{name} was restarted");
    }
    assert_eq!(after["db"]["pid"], before["db"]["pid"]);
    // A pattern, as supervisorctl's `web:*`.
    let out = client(&["stop", "-c", &config_arg, "web-*"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let stopped = run.settle();
    assert_eq!(stopped["web-0"]["state"], "inactive");
    assert_eq!(stopped["web-1"]["state"], "inactive");
    assert_eq!(stopped["db"]["state"], "active");
    // What matches nothing is named, and nothing is done.
    let out = client(&["start", "-c", &config_arg, "web-*", "cache*"], None);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no instance `cache*`"), "{err}");
    assert_eq!(run.settle()["web-0"]["state"], "inactive");
    assert!(run.terminate().success(), "{}", run.stderr());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}

/// `pinctl watch -c FILE` sees the instances that `pinctl run -c FILE` supervises (no
/// `pid-file` or `unit` needed): it asks the file's supervisor, over its socket, which process
/// and cgroup each instance is.
#[test]
fn watch_asks_the_supervisor_of_its_file_for_its_instances() {
    let mut run = Run::new("");
    let text = format!(
        "[host]\nkeep-free = []\nsocket = \"{}\"\n\n[service.db]\ncommand = [\"sleep\", \"100014\"]\n\
         cpus = 1\nmin-memory = \"4KiB\"\n",
        run.socket().display()
    );
    std::fs::write(run.config(), text).unwrap();
    run.start(&[]);
    let pid = run.status()["db"]["pid"].as_i64().unwrap();
    let out = Command::new(BIN)
        .args(["watch", "--once", "--json", "-c"])
        .arg(run.config())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}\n{}", String::from_utf8_lossy(&out.stderr));
    let db = &v["instances"][0];
    assert_eq!(db["instance"], "db");
    assert_eq!(db["sample"]["pids"][0].as_i64(), Some(pid), "{db}");
    assert!(run.terminate().success());
    assert_eq!(run.leftovers(), Vec::<i32>::new());
}
