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
