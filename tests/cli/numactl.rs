//! Differential test: the real numactl and pinctl's numactl personality (pinctl invoked through
//! a symlink named `numactl`) run the same command lines; the real `numactl --show` run under
//! each must print the same thing, and `--show`/`--hardware` themselves must match.
//!
//! Fails where numactl is not installed (scripts/test installs it): a comparison that cannot
//! be made must not pass. On a one-node machine only
//! node 0 and the CPUs of this cpuset can be exercised; multi-node behaviour is checked in
//! the VM suite (tests/vm).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::PINCTL;

/// The real numactl; the test fails without it.
fn real_numactl() -> PathBuf {
    ["/usr/bin/numactl", "/usr/local/bin/numactl", "/bin/numactl"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("numactl is not installed: `apt-get install numactl` (scripts/test installs it)")
}

/// A directory with `numactl -> pinctl`.
fn pinctl_as_numactl() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("numactl");
    std::os::unix::fs::symlink(PINCTL, &link).unwrap();
    (dir, link)
}

fn run(program: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(program).args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Status, stdout and stderr.
fn run_full(program: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(program).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// numactl command lines that mean something on a one-node host. Every one ends by running the
/// real `numactl --show`, which reports the policy and affinity the kernel gave it.
const LINES: &[&str] = &[
    "",
    "-l",
    "--localalloc",
    "-m 0",
    "--membind=0",
    "-m0",
    "-m all",
    "-m +0",
    "-m 0x0",
    "-p 0",
    "--preferred=0",
    "-i 0",
    "-i all",
    "--interleave=+0",
    "-P 0",
    "--preferred-many=all",
    "-N 0",
    "--cpunodebind=all",
    "--cpun=0",
    "-N 0 -m same",
    "-C 0",
    "-C 1",
    "-C +1",
    "-C !0",
    "-C !+0",
    "-C all",
    "-C 0-1",
    "-C 01",
    "-b -m 0",
    "-a -m all",
    "-a -N all",
    "-a -C all",
    "-m 0 -N 0 -C 0",
    "-N 0 -i all -C 1",
];

#[test]
fn show_under_numactl_and_pinctl_agrees() {
    let numactl = real_numactl();
    let (_dir, pinctl) = pinctl_as_numactl();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut compared = 0;
    for line in LINES {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        // CPU 1 only exists on machines with two CPUs or more.
        if cpus < 2 && line.contains('1') && line.contains("-C") {
            eprintln!("skipped `{line}`: this machine has one CPU");
            continue;
        }
        let show = numactl.to_str().unwrap();
        args.extend([show, "--show"]);
        let expect = run(&numactl, &args);
        let got = run(&pinctl, &args);
        assert_eq!(got, expect, "numactl {}", args.join(" "));
        compared += 1;
    }
    assert!(compared >= 20, "only {compared} command lines compared");
}

#[test]
fn refusals_agree() {
    let numactl = real_numactl();
    let (_dir, pinctl) = pinctl_as_numactl();
    // Nodes beyond this host, conflicting policies, bad lists, no command: numactl exits 1.
    for line in [
        "-m 1023",
        "-N 1023",
        "-i 0 -m 0",
        "-m x",
        "-m 0",
        "-m same",
        "-p 0,0-1023",
        "--bogus",
        "-m 0 -H",
        "-m 0 -b",
        "-C 0 -m 1023",
        "-m 1023 -C 100000",
        "-N 0 -C 100000",
    ] {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        if line != "-m 0" {
            args.push("true");
        }
        // stdout too (`<LIST> is invalid`, naming the first bad list); numactl 2.0.16 also
        // writes a stray newline there from its error path (2.0.19 no longer does), so blank
        // lines are left out.
        let text = |(code, out): (Option<i32>, String)| {
            (code, out.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n"))
        };
        let expect = text(run(&numactl, &args));
        let got = text(run(&pinctl, &args));
        assert_eq!(expect.0, Some(1), "numactl {line}");
        assert_eq!(got, expect, "pinctl's numactl on `{line}`");
    }
}

#[test]
fn show_and_hardware_match_byte_for_byte() {
    let numactl = real_numactl();
    let (_dir, pinctl) = pinctl_as_numactl();
    assert_eq!(run(&pinctl, &["--show"]), run(&numactl, &["--show"]));
    assert_eq!(run(&pinctl, &["-s"]), run(&numactl, &["-s"]));
    // Free memory moves between two runs: compare every line but `free`, whose shape is
    // checked instead.
    let strip =
        |s: String| s.lines().filter(|l| !l.contains(" free: ")).collect::<Vec<_>>().join("\n");
    let (code, hw) = run(&pinctl, &["--hardware"]);
    let (real_code, real_hw) = run(&numactl, &["--hardware"]);
    assert_eq!(code, real_code);
    // numactl mode prints 2.0.19's wider distance columns; an older numactl beside it is
    // compared with the table's spacing collapsed (the exact widths are checked in
    // `hardware_has_numactl_2_0_19s_widths`).
    let real_is_2_0_19 = run(&numactl, &["--version"]).1.trim() == "2.0.19";
    let collapse = |s: String| -> String {
        if real_is_2_0_19 {
            return strip(s);
        }
        strip(s)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(collapse(hw.clone()), collapse(real_hw));
    assert!(
        hw.lines().any(|l| l.starts_with("node ") && l.contains(" free: ") && l.ends_with(" MB"))
    );
}

#[test]
fn show_reports_the_options_before_it() {
    let numactl = real_numactl();
    let (_dir, pinctl) = pinctl_as_numactl();
    // numactl applies options as it reads them, so `--show` sees those before it and
    // ignores those after.
    for line in ["-m 0 -s", "-i all --show", "-l -s", "-C 0 -s -m 0", "-N 0 -p 0 --show"] {
        let args: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(run(&pinctl, &args), run(&numactl, &args), "numactl {line}");
    }
}

/// numactl exits 1 on every failure, and scripts test `$? == 1`: numactl mode does too, where
/// `pinctl exec` exits 127, 126, 215 or 242 (its own contract, docs/exit-codes.md).
#[test]
fn every_failure_exits_1_as_numactls_do() {
    let numactl = real_numactl();
    let (_dir, pinctl) = pinctl_as_numactl();
    let not_executable = tempfile::NamedTempFile::new().unwrap();
    let not_executable = not_executable.path().to_str().unwrap();
    for (class, args) in [
        ("command not found", vec!["-N", "0", "/nonexistent/pinctl-test-command"]),
        ("command not in PATH", vec!["-m", "0", "pinctl-test-no-such-command"]),
        ("command not executable", vec!["-l", not_executable]),
        ("node outside the cpuset", vec!["-m", "1023", "true"]),
        ("CPU outside the cpuset", vec!["-C", "100000", "true"]),
        ("node list naming nothing", vec!["-N", "!all", "true"]),
        ("no command", vec!["-m", "0"]),
    ] {
        let (real, ..) = run_full(&numactl, &args);
        let (code, _, err) = run_full(&pinctl, &args);
        assert_eq!(real, Some(1), "numactl itself, {class}: numactl {args:?}");
        assert_eq!(code, Some(1), "{class}: numactl {args:?}: {err}");
        assert!(!err.is_empty(), "{class}: a failure says why");
    }
    // The same failures keep their own statuses in `pinctl exec`.
    let exec = |args: &[&str]| Command::new(PINCTL).arg("exec").args(args).output().unwrap();
    assert_eq!(exec(&["--", "/nonexistent/pinctl-test-command"]).status.code(), Some(127));
    assert_eq!(exec(&["--", not_executable]).status.code(), Some(126));
}

#[test]
fn version_prints_the_numactl_release_followed() {
    let (_dir, pinctl) = pinctl_as_numactl();
    assert_eq!(run_full(&pinctl, &["--version"]), (Some(0), "2.0.19\n".into(), String::new()));
    // numactl acts on --version where getopt reaches it: what follows is never read...
    assert_eq!(run(&pinctl, &["--version", "--bogus"]), (Some(0), "2.0.19\n".into()));
    // ...and, like --hardware, it refuses to follow a policy.
    let (code, out, err) = run_full(&pinctl, &["-m", "0", "--version"]);
    assert_eq!((code, out.as_str()), (Some(1), ""));
    assert!(err.starts_with("numactl: specify policy after --shm/--file\nusage: numactl"), "{err}");
}

#[test]
fn hints_name_numactls_options() {
    let (_dir, pinctl) = pinctl_as_numactl();
    // Every failure this host can produce: none may send the user to an option numactl
    // mode rejects.
    for args in [
        vec!["-m", "1023", "true"],
        vec!["-C", "100000", "true"],
        vec!["-N", "netdev:pinctl-no-such-nic", "true"],
        vec!["-N", "file:/nonexistent/pinctl", "true"],
        vec!["/nonexistent/pinctl-test-command"],
    ] {
        let (code, _, err) = run_full(&pinctl, &args);
        assert_eq!(code, Some(1), "numactl {args:?}: {err}");
        // The message; numactl's usage text may follow it.
        let err = err.lines().next().unwrap_or_default();
        for pinctl_only in ["--if-unsupported", "--cpus", "--nodes", "--mem ", "--near"] {
            assert!(!err.contains(pinctl_only), "numactl {args:?} suggests {pinctl_only}: {err}");
        }
    }
}
