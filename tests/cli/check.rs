//! `pinctl check` against the real binary: exit 0 for a usable file, 1 with every problem
//! printed otherwise.

use predicates::prelude::*;

use crate::support::{EPYC, XEON, pinctl, write_config};

#[test]
fn every_bundled_config_is_valid_for_its_topology() {
    for (config, topology) in [
        ("configs/tidb-epyc.toml", EPYC),
        ("configs/mysql-xeon.toml", XEON),
        ("configs/mysql-arm.toml", "configs/topologies/arm-128core.json"),
        ("configs/interleaved.toml", "configs/topologies/interleaved-4node.json"),
        ("configs/gpu-host.toml", "configs/topologies/gpu-2s.json"),
    ] {
        pinctl()
            .args(["check", "-c", config, "--topology", topology])
            .assert()
            .success()
            .stdout(predicate::str::starts_with(format!("ok: `{config}` is valid for snapshot")));
    }
}

#[test]
fn machine_dependent_errors_fail_with_their_location() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_config(dir.path(), "[service.a]\ncommand = [\"/bin/a\"]\nonly-nodes = [1, 9]\n");
    pinctl()
        .args(["check", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("node 9, which this host does not have"))
        .stderr(predicate::str::contains("pinctl.toml:3:"));
}

#[test]
fn an_infeasible_plan_fails_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.a]\ncommand = [\"/bin/a\"]\ninstances = 9\nnodes = 1\n",
    );
    pinctl()
        .args(["check", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot place the services"))
        .stderr(predicate::str::contains("a-8 needs 1 whole node: 8 nodes, 8 taken"));
    // Without a size, the ninth shares a node instead.
    let shared = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.a]\ncommand = [\"/bin/a\"]\ninstances = 9\n",
    );
    pinctl()
        .args(["check", "--topology", EPYC, "-c"])
        .arg(&shared)
        .assert()
        .success()
        .stdout(predicate::str::contains("is valid for snapshot"))
        .stdout(predicate::str::contains("9 instances on nodes 0-7"));
}

#[test]
fn soft_rule_violations_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[service.tikv]\ncommand = [\"/bin/tikv\"]\nmemory = \"100GiB\"\nmemory-policy = \"preferred\"\n",
    );
    pinctl()
        .args(["check", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .success()
        .stdout(predicate::str::contains("`keep-free` is not set"))
        .stdout(predicate::str::contains(
            "warning: plan: tikv: expects 100GiB but node 0 can hold 62.7GiB",
        ))
        .stdout(predicate::str::contains("2 warnings"));
}

#[test]
fn syntax_errors_are_reported_all_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[service.a]\ncommand = [\"/bin/a\"]\ncpus = 0\nmemory-polcy = \"bind\"\n",
    );
    pinctl()
        .args(["check", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("pinctl.toml:3:"))
        .stderr(predicate::str::contains("pinctl.toml:4:1"));
}

/// On the live machine, a file whose instances could not start fails the check: a program
/// that does not exist or is not executable, an `alert-command` that does not exist, a user or
/// group that does not exist; each at its value, all at once. Against another host's topology
/// none of it is known, and the same file passes.
#[test]
fn a_file_that_cannot_start_here_fails_the_check_on_the_live_machine() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = format!(
        "[host]\nkeep-free = []\n\n\
         [service.a]\ncommand = [\"/no/such/program\"]\ncpus = 1\n\n\
         [service.b]\ncommand = [\"{}\"]\ncpus = 1\nuser = \"no-such-user-pinctl\"\n\
         group = \"no-such-group-pinctl\"\n\n\
         [service.c]\ncommand = [\"sleep\", \"1\"]\ncpus = 1\non-drift = \"alert\"\n\
         alert-command = [\"no-such-alerter-pinctl\"]\n",
        plain.display()
    );
    let config = write_config(dir.path(), &text);
    let out = pinctl().arg("check").arg("-c").arg(&config).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for said in [
        "a: `/no/such/program` does not exist: it cannot start (exit status 127)",
        "is not an executable file: it cannot start (exit status 126)",
        "b: unknown user `no-such-user-pinctl`: it cannot start (exit status 217)",
        "b: unknown group `no-such-group-pinctl`: it cannot start (exit status 216)",
        "c: `alert-command`: `no-such-alerter-pinctl` not found in PATH",
    ] {
        assert!(err.contains(said), "missing `{said}` in:\n{err}");
    }
    assert!(err.contains("pinctl.toml:5:11"), "the command's place: {err}");
    pinctl().args(["check", "--topology", EPYC, "-c"]).arg(&config).assert().success();
}
