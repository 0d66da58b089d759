//! `pinctl fleet` (issue 29, docs/fleet.md): many hosts planned offline in one run, each as
//! `pinctl plan` plans it alone.

use predicates::prelude::*;

use crate::support::{EPYC, XEON, pinctl, write_config};

const ARM: &str = "configs/topologies/arm-128core.json";
const VM: &str = "configs/topologies/vm-2cpu.json";

/// Two one-node instances beside a one-CPU one: fits every bundled shape but the 2-CPU VM
/// under `nodes = 1` of three exclusive instances.
const FILE: &str = r#"
[host]
keep-free = []

[service.db]
command = ["/usr/bin/db", "{instance}"]
instances = 2
memory-policy = "preferred"

[service.cache]
command = ["/usr/bin/cache"]
cpus = 1
"#;

fn plan_alone(config: &std::path::Path, capture: &str) -> serde_json::Value {
    let out = pinctl()
        .arg("plan")
        .arg("-c")
        .arg(config)
        .args(["--topology", capture, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn each_host_gets_the_plan_it_would_get_alone() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), FILE);
    let out = pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .args(["--topology", &format!("db-1={EPYC}"), "--topology", &format!("db-2={XEON}")])
        .args(["--topology", &format!("10.0.1.3={ARM}"), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fleet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts = fleet["hosts"].as_object().unwrap();
    assert_eq!(hosts.keys().collect::<Vec<_>>(), ["10.0.1.3", "db-1", "db-2"]);
    for (host, capture) in [("db-1", EPYC), ("db-2", XEON), ("10.0.1.3", ARM)] {
        assert_eq!(fleet["hosts"][host]["plan"], plan_alone(&config, capture), "{host}");
        assert_eq!(fleet["hosts"][host]["error"], serde_json::Value::Null);
    }
    let summary = fleet["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 3);
    assert!(summary.iter().all(|s| s["instances"] == 3 && s["refused"].is_null()));
}

#[test]
fn a_host_that_cannot_be_planned_is_named_and_the_rest_still_are() {
    let dir = tempfile::tempdir().unwrap();
    let text = FILE.replace("instances = 2", "instances = 2\nnodes = 1");
    let config = write_config(dir.path(), &text);
    pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .args(["--topology", &format!("big={EPYC}"), "--topology", &format!("small={VM}")])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("== host big (configs/topologies/epyc-nps4.json)"))
        .stdout(predicate::str::contains("db-0      0      0-7,64-71"))
        .stdout(predicate::str::contains(
            "== host small (configs/topologies/vm-2cpu.json)\nno plan: ",
        ))
        .stdout(predicate::str::contains(
            "fleet: 2 hosts, 3 instances; 0 with a rule not kept, 1 with no plan\n\
             HOST   INSTANCES  RULES\nbig    3          ok\nsmall  0          no plan: ",
        ));
}

#[test]
fn a_rule_not_kept_is_said_per_host() {
    let dir = tempfile::tempdir().unwrap();
    // Eight exclusive nodes asked of the Xeon's two: with `when-needed` sharing they share,
    // and the TiKV drive named nowhere is a warning of that host's plan.
    let text = FILE.replace("instances = 2", "instances = 2\nnear = [\"nvme{instance}n1\"]");
    let config = write_config(dir.path(), &text);
    let out = pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .args(["--topology", &format!("a={EPYC}"), "--topology", &format!("b={XEON}")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("fleet: 2 hosts, 6 instances; 1 with a rule not kept, 0 with no plan"),
        "{text}"
    );
    let b = text.lines().find(|l| l.starts_with("b  ")).unwrap();
    assert!(b.contains("nvme"), "{b}");
}

#[test]
fn a_folder_of_captures_names_its_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), FILE);
    let captures = dir.path().join("captures");
    std::fs::create_dir(&captures).unwrap();
    let root = crate::support::root();
    std::fs::copy(root.join(EPYC), captures.join("db-1.json")).unwrap();
    std::fs::copy(root.join(XEON), captures.join("db-2.json")).unwrap();
    let out = pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .arg("--captures")
        .arg(&captures)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fleet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(fleet["hosts"]["db-2"]["plan"], plan_alone(&config, XEON));
    // The same host again on the command line: which capture is meant is a guess.
    pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .arg("--captures")
        .arg(&captures)
        .args(["--topology", &format!("db-1={XEON}")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("host `db-1` is given twice"));
}

#[test]
fn bad_hosts_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), FILE);
    for (arg, said) in [
        (EPYC.to_string(), "is not HOST=CAPTURE"),
        (format!("a b={EPYC}"), "`a b` is not a host name or address"),
    ] {
        pinctl()
            .arg("fleet")
            .arg("-c")
            .arg(&config)
            .args(["--topology", &arg])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(said));
    }
    pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no host to plan"));
}

#[test]
fn json_carries_the_drop_ins_emit_systemd_writes() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &FILE.replace("cpus = 1", "cpus = 1\nunit = \"cache@main.service\""),
    );
    let out = pinctl()
        .arg("fleet")
        .arg("-c")
        .arg(&config)
        .args([
            "--topology",
            &format!("db-1={EPYC}"),
            "--topology",
            &format!("db-2={XEON}"),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fleet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (host, capture) in [("db-1", EPYC), ("db-2", XEON)] {
        let units = dir.path().join(host);
        pinctl()
            .arg("plan")
            .arg("-c")
            .arg(&config)
            .args(["--topology", capture, "--emit", "systemd"])
            .arg(&units)
            .assert()
            .success();
        let drop_ins = fleet["hosts"][host]["systemd_drop_ins"].as_array().unwrap();
        assert_eq!(drop_ins.len(), 3, "{host}");
        for d in drop_ins {
            let path = d["path"].as_str().unwrap();
            assert!(path.starts_with(d["unit"].as_str().unwrap()), "{path}");
            let written = std::fs::read_to_string(units.join(path)).unwrap();
            assert_eq!(d["content"], written, "{host} {path}");
        }
        assert_eq!(fleet["hosts"][host]["systemd_error"], serde_json::Value::Null);
    }
    assert_eq!(
        fleet["hosts"]["db-1"]["systemd_drop_ins"][2]["path"],
        "cache@main.service.d/50-pinctl.conf"
    );
}
