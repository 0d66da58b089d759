//! `pinctl exec` against the real binary on this machine: it really applies the placement and
//! execs, so what the child reports in /proc/self/status is the kernel's answer.

use predicates::prelude::*;

use crate::support::{PINCTL, pinctl, write_config};

fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
        .to_string()
}

fn first_node() -> u32 {
    let allowed = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status_field(&allowed, "Mems_allowed_list");
    list.split([',', '-']).next().unwrap().parse().unwrap()
}

fn node_cpulist(node: u32) -> String {
    std::fs::read_to_string(format!("/sys/devices/system/node/node{node}/cpulist"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn nodes_pins_the_child_to_the_node_cpus() {
    let node = first_node();
    let out = pinctl()
        .args(["exec", "--nodes", &node.to_string(), "--", "cat", "/proc/self/status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status = String::from_utf8(out.stdout).unwrap();
    let allowed: pinctl_topology::CpuSet =
        status_field(&std::fs::read_to_string("/proc/self/status").unwrap(), "Cpus_allowed_list")
            .parse()
            .unwrap();
    let node_cpus: pinctl_topology::CpuSet = node_cpulist(node).parse().unwrap();
    // The node's CPUs, as far as this test's cpuset allows them.
    assert_eq!(
        status_field(&status, "Cpus_allowed_list"),
        node_cpus.intersection(&allowed).to_string()
    );
}

#[test]
fn the_child_inherits_the_bind_policy() {
    let node = first_node();
    // numa_maps shows the policy of each mapping of the child: `bind:N` for the default
    // (process) policy under MPOL_BIND.
    let out = pinctl()
        .args(["exec", "--nodes", &node.to_string(), "--", "cat", "/proc/self/numa_maps"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let maps = String::from_utf8(out.stdout).unwrap();
    assert!(maps.lines().any(|l| l.contains(&format!(" bind:{node} "))), "{maps}");

    let out = pinctl()
        .args(["exec", "--mem", "local", "--", "cat", "/proc/self/numa_maps"])
        .output()
        .unwrap();
    let maps = String::from_utf8(out.stdout).unwrap();
    assert!(maps.lines().any(|l| l.contains(" local ")), "{maps}");
}

#[test]
fn cpus_override_the_node_cpus() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let first_cpu: String =
        status_field(&status, "Cpus_allowed_list").split([',', '-']).next().unwrap().to_string();
    pinctl()
        .args(["exec", "--nodes", &first_node().to_string(), "--cpus", &first_cpu, "--"])
        .args(["grep", "Cpus_allowed_list", "/proc/self/status"])
        .assert()
        .success()
        .stdout(predicate::str::ends_with(format!("\t{first_cpu}\n")));
}

#[test]
fn dry_run_json_prints_the_resolved_placement_and_runs_nothing() {
    let node = first_node();
    let out = pinctl()
        .args(["exec", "--nodes", &node.to_string(), "--dry-run", "--json", "--"])
        .args(["sh", "-c", "exit 9"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["memory_policy"], "bind");
    assert_eq!(v["memory_nodes"], node.to_string());
    assert_eq!(v["numa_balancing"], false);
    assert_eq!(v["command"][0], "sh");
    let cpus = v["cpus"].as_str().unwrap().to_string();
    assert_eq!(cpus, node_cpulist(node));
}

#[test]
fn dry_run_speaks_numactl_options() {
    let out =
        pinctl().args(["exec", "-N", "+0", "-i", "all", "--dry-run", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["memory_policy"], "interleave");
    assert_eq!(v["cpus"], node_cpulist(first_node()));
}

#[test]
fn a_node_outside_mems_allowed_is_refused_naming_the_allowed_nodes() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status_field(&status, "Mems_allowed_list");
    pinctl()
        .args(["exec", "--nodes", "1023", "--", "true"])
        .assert()
        .code(242)
        .stderr(predicate::str::contains("node `1023` is not allowed"))
        .stderr(predicate::str::contains(format!("may use nodes {allowed}")));
}

#[test]
fn command_not_found_is_127_and_not_executable_is_126() {
    pinctl()
        .args(["exec", "--", "pinctl-no-such-command"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains("`pinctl-no-such-command` not found"));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    pinctl().args(["exec", "--"]).arg(&script).assert().code(126);
}

#[test]
fn the_command_exit_status_is_passed_through() {
    pinctl().args(["exec", "--", "sh", "-c", "exit 7"]).assert().code(7);
}

#[test]
fn contradictions_are_usage_errors() {
    for args in [
        &["exec", "-m", "0", "-i", "0", "--", "true"][..],
        &["exec", "--nodes", "0", "--near", "lo", "--", "true"],
        &["exec", "-b", "-i", "0", "--", "true"],
        &["exec", "--mem", "bind", "--", "true"],
        &["exec", "--nodes", "0"],
        &["exec", "--nodes", "zero", "--", "true"],
    ] {
        pinctl().args(args).assert().code(2);
    }
}

#[test]
fn an_unsupported_policy_is_refused_unless_ignored() {
    // preferred-many is Linux 5.15+: on a kernel that has it this succeeds; on an older one
    // it must fail with 242 and succeed with --if-unsupported=ignore. Either way the
    // ignore form runs the command.
    let node = first_node().to_string();
    let strict = pinctl().args(["exec", "-P", &node, "--", "true"]).output().unwrap();
    let code = strict.status.code();
    assert!(code == Some(0) || code == Some(242), "{strict:?}");
    if code == Some(242) {
        assert!(String::from_utf8_lossy(&strict.stderr).contains("does not support"));
    }
    pinctl()
        .args(["exec", "--if-unsupported=ignore", "-P", &node, "--", "true"])
        .assert()
        .success();
}

/// A service file with one instance `db` (extra keys in `service`).
fn db_config(dir: &std::path::Path, service: &str) -> std::path::PathBuf {
    let text =
        format!("[host]\nkeep-free = []\n\n[service.db]\ncommand = [\"/bin/true\"]\n{service}");
    write_config(dir, &text)
}

/// What `pinctl exec -c FILE --service db` plans and what it applies, from one moment.
struct Planned {
    /// The dry run's placement (`--dry-run --json`).
    dry_run: serde_json::Value,
    /// The `Cpus_allowed_list` the child of the real run had.
    applied: String,
    /// What both said on stderr: the plan's word on processes pinned outside pinctl, if any.
    said: String,
}

/// The dry run and the real run of `db` (the real one under `wrapper`, e.g. `taskset`), as a
/// pair planned around the same processes pinned outside pinctl. Other tests pin processes
/// on this machine and the plan goes around them (saying so, with their PIDs); a pair whose
/// two runs said different things saw different machines and is asked again (bounded).
fn planned(config: &std::path::Path, wrapper: &[&str]) -> Planned {
    let deadline = std::time::Instant::now() + crate::supervisor::WAIT;
    loop {
        let dry = pinctl()
            .args(["exec", "-c"])
            .arg(config)
            .args(["--service", "db", "--dry-run", "--json"])
            .output()
            .unwrap();
        assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
        let mut real = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = std::process::Command::new(program);
                c.args(args).arg(PINCTL);
                c
            }
            None => std::process::Command::new(PINCTL),
        };
        let real = real
            .args(["exec", "-c"])
            .arg(config)
            .args(["--service", "db", "--", "grep", "Cpus_allowed_list", "/proc/self/status"])
            .output()
            .unwrap();
        assert!(real.status.success(), "{}", String::from_utf8_lossy(&real.stderr));
        let said = String::from_utf8_lossy(&dry.stderr).into_owned();
        if said == String::from_utf8_lossy(&real.stderr) {
            return Planned {
                dry_run: serde_json::from_slice(&dry.stdout).unwrap(),
                applied: status_field(&String::from_utf8_lossy(&real.stdout), "Cpus_allowed_list"),
                said,
            };
        }
        assert!(std::time::Instant::now() < deadline, "no two runs saw the same machine");
    }
}

#[test]
fn service_placement_comes_from_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let config = db_config(dir.path(), "memory-policy = \"preferred\"\n");
    let p = planned(&config, &[]);
    assert_eq!(p.dry_run["memory_policy"], "preferred");
    let node = p.dry_run["memory_nodes"].as_str().unwrap().parse::<u32>().unwrap();
    let cpus = p.dry_run["cpus"].as_str().unwrap();
    // The node's CPUs; fewer only where the plan said it went around others' pinned ones.
    if p.said.is_empty() {
        assert_eq!(cpus, node_cpulist(node));
    } else {
        assert!(p.said.contains("held by processes pinned outside pinctl"), "{}", p.said);
        let (some, all): (pinctl_topology::CpuSet, pinctl_topology::CpuSet) =
            (cpus.parse().unwrap(), node_cpulist(node).parse().unwrap());
        assert!(some.is_subset(&all), "{cpus} of node {node}");
    }
    // And for real: the child runs on those CPUs.
    assert_eq!(p.applied, cpus);
    pinctl()
        .args(["exec", "-c"])
        .arg(&config)
        .args(["--service", "nope", "--", "true"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no instance `nope` (instances: db)"));
}

#[test]
fn the_plan_ignores_the_affinity_pinctl_inherits() {
    // A unit with CPUAffinity=, or a shell under taskset, starts pinctl on fewer CPUs than the
    // cpuset allows. Every unit must compute the same plan, so the plan and its placement do
    // not shrink to that affinity: the child runs on the planned CPUs.
    let dir = tempfile::tempdir().unwrap();
    let config = db_config(dir.path(), "");
    let allowed =
        status_field(&std::fs::read_to_string("/proc/self/status").unwrap(), "Cpus_allowed_list");
    let first_cpu = allowed.split([',', '-']).next().unwrap();
    let p = planned(&config, &["taskset", "-c", first_cpu]);
    assert_eq!(p.applied, p.dry_run["cpus"].as_str().unwrap(), "{}", p.said);
}

#[test]
fn near_a_path_uses_the_node_of_its_block_device() {
    // The root filesystem's device may have no NUMA node on a VM (numa_node -1) or none at
    // all (overlay): either the placement names a node or the error says why.
    let out = pinctl().args(["exec", "--near", "/", "--dry-run", "--json"]).output().unwrap();
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["memory_policy"], "bind");
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--near `/`"), "{err}");
    }
}
