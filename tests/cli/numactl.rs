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
    ] {
        let mut args: Vec<&str> = line.split_whitespace().collect();
        if line != "-m 0" {
            args.push("true");
        }
        let expect = run(&numactl, &args).0;
        let got = run(&pinctl, &args).0;
        assert_eq!(expect, Some(1), "numactl {line}");
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
    assert_eq!(strip(hw.clone()), strip(real_hw));
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
