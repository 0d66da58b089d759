//! `pinctl plan` against the real binary, on the bundled topologies (docs/planning.md).

use predicates::prelude::*;

use crate::support::{EPYC, XEON, pinctl, root, write_config};

#[test]
fn the_readme_command_shows_a_multi_node_plan() {
    pinctl()
        .args(["plan", "-c", "configs/tidb-epyc.toml", "--topology", EPYC])
        .assert()
        .success()
        .stdout(predicate::str::contains("INSTANCE  NODES  CPUS           MEMORY"))
        .stdout(predicate::str::contains("tikv-0    2      16-23,80-87    preferred 2"))
        .stdout(predicate::str::contains("near `nvme0n1`: on the device's node 2"))
        .stdout(predicate::str::contains("tidb-0    0      0-7,64-71      bind 0"))
        .stdout(predicate::str::contains("free nodes: 5,7\nkept free:  5 (for `eth0`)"))
        .stdout(predicate::str::contains("warning").not());
}

#[test]
fn json_follows_the_contract() {
    let out = pinctl()
        .args(["plan", "-c", "configs/tidb-epyc.toml", "--topology", EPYC, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let services = v["services"].as_array().unwrap();
    assert_eq!(services.len(), 6);
    assert_eq!(services[0]["name"], "tikv-0");
    assert_eq!(services[0]["nodes"], serde_json::json!([2]));
    assert_eq!(services[0]["cpus"], "16-23,80-87");
    assert_eq!(services[0]["memory_policy"], "preferred");
    assert_eq!(services[0]["memory_nodes"], serde_json::json!([2]));
    assert!(services[0]["reasons"].as_array().unwrap().len() >= 2);
    assert_eq!(services[5]["name"], "tidb-3");
    assert_eq!(v["free_nodes"], serde_json::json!([5, 7]));
    assert_eq!(v["kept_free_nodes"], serde_json::json!([5]));
    assert_eq!(v["warnings"], serde_json::json!([]));
    assert_eq!(v["host_warnings"], serde_json::json!([]));
    assert_eq!(v["config_warnings"], serde_json::json!([]));
    assert_eq!(v["schema_version"], pinctl_plan::PLAN_SCHEMA_VERSION);
    assert_eq!(v["optimal"], true);
    // Every instance owns its node: nobody shares a CPU, no node is shared.
    assert_eq!(services[0]["sharing_group"], serde_json::Value::Null);
    assert_eq!(v["sharing_groups"], serde_json::json!([]));
    assert_eq!(v["node_use"], serde_json::json!([]));

    // Sharing TiDB beside exclusive TiKV: who shares what, and the CPUs per CPU of each node.
    let out = pinctl()
        .args(["plan", "-c", "configs/scenarios/tikv-tidb-sharing-epyc.toml"])
        .args(["--topology", EPYC, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tidb0 = &v["services"][2];
    assert_eq!((&tidb0["name"], &tidb0["cpus"]), (&"tidb-0".into(), &"0-7,64-71".into()));
    // The group is named once; its members point at it.
    assert_eq!(tidb0["sharing_group"], 0);
    assert_eq!(v["services"][3]["sharing_group"], 0, "tidb-1 is in the same group");
    assert_eq!(
        v["sharing_groups"][0],
        serde_json::json!({"group": 0, "nodes": [0], "cpus": "0-7,64-71",
                           "members": ["tidb-0", "tidb-1"]})
    );
    assert_eq!(v["services"][0]["sharing_group"], serde_json::Value::Null, "tikv-0 owns node 2");
    assert_eq!(
        v["node_use"][0],
        serde_json::json!({"node": 0, "instances": ["tidb-0", "tidb-1"], "usable_cpus": 16,
                           "cpus_given": 32, "cpus_per_cpu": 2.0})
    );
    let nodes: Vec<u64> =
        v["node_use"].as_array().unwrap().iter().map(|u| u["node"].as_u64().unwrap()).collect();
    assert_eq!(nodes, [0, 1, 3, 4, 7]);
}

#[test]
fn the_table_says_which_instances_share_cpus_and_how_many_per_cpu() {
    let out = pinctl()
        .args(["plan", "-c", "configs/scenarios/redis-overcommit-vm.toml"])
        .args(["--topology", "configs/topologies/vm-2cpu.json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.ends_with(
            "shared CPUs:\n  node 0: redis-0, redis-1, redis-2, redis-3 (4 CPUs of instances on 2 \
             usable CPUs: 2 per CPU)\nsharing groups (instances whose CPUs overlap):\n  0: CPUs \
             0 of node 0: redis-0, redis-2\n  1: CPUs 1 of node 0: redis-1, redis-3\n"
        ),
        "{text}"
    );
    // Without overcommit the same file is refused, naming the key that would allow it.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("configs/scenarios/redis-overcommit-vm.toml"))
        .unwrap()
        .replace("cpu-overcommit = 2\n", "");
    let config = write_config(dir.path(), &text);
    pinctl()
        .args(["plan", "--topology", "configs/topologies/vm-2cpu.json", "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "redis-2 needs 1 CPU on one node: the most free on a node it may use is 0",
        ))
        .stderr(predicate::str::contains("`cpu-overcommit` in `[host]` would let"));
}

const EIGHT_TIKV: &str = r#"
[host]
keep-free = ["eth0"]
[service.tikv]
command = ["/opt/tidb/bin/tikv-server"]
instances = 8
"#;

#[test]
fn a_kept_free_node_is_used_with_a_warning_and_refused_under_strict() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), EIGHT_TIKV);
    pinctl()
        .args(["plan", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .success()
        .stdout(predicate::str::contains("uses node 5, kept free for `eth0`, as a last resort"))
        .stdout(predicate::str::contains(
            "warning: tikv-5 needs a node of its own (share-nodes = \"when-needed\"): 8 nodes, 7 \
             taken, 1 kept free for `eth0`; it uses node 5",
        ));
    pinctl()
        .args(["plan", "--strict", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::contains(
            "--strict: the best plan breaks 1 soft rule:\n  tikv-5 needs a node of its own",
        ));
}

#[test]
fn an_infeasible_config_names_the_instance_and_the_shortage() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[service.mysql]\ncommand = [\"/usr/sbin/mysqld\"]\ninstances = 3\nnodes = 1\n",
    );
    pinctl().args(["plan", "--topology", XEON, "-c"]).arg(&config).assert().code(1).stderr(
        predicate::str::contains(
            "mysql-2 needs 1 whole node: 2 nodes, 2 taken (by mysql-0, mysql-1)",
        ),
    );
}

#[test]
fn a_bind_that_cannot_fit_suggests_preferred_or_more_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.tikv]\ncommand = [\"/bin/tikv\"]\nmemory = \"100GiB\"\nmemory-policy = \"bind\"\n",
    );
    pinctl()
        .args(["plan", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("use `memory-policy = \"preferred\"` or `nodes = 2`"));
}

#[test]
fn emit_systemd_writes_one_drop_in_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    pinctl()
        .args(["plan", "-c", "configs/tidb-epyc.toml", "--topology", EPYC, "--emit", "systemd"])
        .arg(dir.path())
        .assert()
        .success();
    let tikv = std::fs::read_to_string(dir.path().join("tikv@0.service.d/50-pinctl.conf")).unwrap();
    assert!(
        tikv.contains("[Service]\nCPUAffinity=16-23,80-87\nNUMAPolicy=preferred\nNUMAMask=2\n"),
        "{tikv}"
    );
    let tidb = std::fs::read_to_string(dir.path().join("tidb@3.service.d/50-pinctl.conf")).unwrap();
    assert!(tidb.contains("CPUAffinity=32-39,96-103\nNUMAPolicy=bind\nNUMAMask=4\n"), "{tidb}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 6);
}

#[test]
fn emit_numactl_prints_a_command_line_per_instance() {
    pinctl()
        .args(["plan", "-c", "configs/interleaved.toml", "--emit", "numactl", "--topology"])
        .arg("configs/topologies/interleaved-4node.json")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "# nginx\nnumactl --physcpubind=2,6,10,14,18,22,26,30,34,38,42,46 --membind=2 -- /usr/sbin/nginx -g 'daemon off;'\n",
        ));
}

/// Scaling a service down and emitting again removes the drop-ins the earlier emit wrote for
/// the instances that are gone, and nothing else: not another file's, not one a user wrote,
/// not a link.
#[test]
fn emit_systemd_removes_the_drop_ins_of_instances_that_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let units = dir.path().join("units");
    let config = dir.path().join("web.toml");
    let write = |n: u32| {
        let text = format!(
            "[host]\nkeep-free = []\n[service.web]\ncommand = [\"/bin/web\"]\ninstances = {n}\ncpus = 1\n"
        );
        std::fs::write(&config, text).unwrap();
    };
    let emit = || {
        let out = pinctl()
            .args(["plan", "--topology", EPYC, "--emit", "systemd"])
            .arg(&units)
            .arg("-c")
            .arg(&config)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    write(3);
    emit();
    // Beside them: a drop-in of the same name that a user wrote, and one from another file.
    let mine = units.join("web-5.service.d");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("50-pinctl.conf"), "[Service]\nCPUAffinity=0\n").unwrap();
    let other = units.join("db-0.service.d");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("50-pinctl.conf"),
        "# Written by `pinctl plan -c /etc/db.toml --emit systemd`: instance `db-0`.\n",
    )
    .unwrap();
    write(1);
    let printed = emit();
    let gone = |i: u32| units.join(format!("web-{i}.service.d"));
    assert!(units.join("web.service.d/50-pinctl.conf").is_file(), "{printed}");
    assert!(!gone(1).exists() && !gone(2).exists(), "{printed}");
    assert!(printed.contains(&format!("removed {}", gone(1).join("50-pinctl.conf").display())));
    // web-0's was written for `instances = 3` too: the single instance is `web` now.
    assert!(!gone(0).exists(), "{printed}");
    assert!(mine.join("50-pinctl.conf").is_file() && other.join("50-pinctl.conf").is_file());
}

/// `--emit numactl` names, per instance, the settings a numactl line cannot carry.
#[test]
fn emit_numactl_says_what_a_line_cannot_carry() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\ncpus = 1\n\
         user = \"nobody\"\nworking-dir = \"/srv\"\nenv = { A = \"1\" }\nlimits = { nofile = 1024 }\n\
         [service.plain]\ncommand = [\"/bin/plain\"]\ncpus = 1\n",
    );
    let out = pinctl()
        .args(["plan", "--topology", EPYC, "--emit", "numactl", "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (stdout, stderr) =
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    let said = "db: a numactl line does not carry `env`, `user`, `working-dir`, `limits`: set \
                them where the line runs, or start it with `pinctl exec -c FILE --service db`";
    assert!(stderr.contains(&format!("warning: {said}")), "{stderr}");
    assert!(stdout.contains(&format!("# warning: {said}\n# db\nnumactl")), "{stdout}");
    assert!(!stderr.contains("plain:") && !stdout.contains("# warning: plain"), "{stdout}");
}

#[test]
fn emit_rejects_unknown_formats() {
    pinctl()
        .args(["plan", "-c", "configs/tidb-epyc.toml", "--topology", EPYC, "--emit", "docker"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown `--emit` format `docker`"));
}

/// The service file of one instance `near` SPEC, not keeping any node free.
fn near_config(dir: &std::path::Path, spec: &str) -> std::path::PathBuf {
    write_config(
        dir,
        &format!(
            "[host]\nkeep-free = []\n[service.tikv]\ncommand = [\"/bin/tikv\"]\nnear = [\"{spec}\"]\n"
        ),
    )
}

/// How many times `needle` occurs in everything a command printed.
fn occurrences(out: &std::process::Output, needle: &str) -> usize {
    let all =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    all.matches(needle).count()
}

/// A `near` entry that fails for every instance of a service is said once, with how many
/// more instances it concerns: each diagnostic holds the line it points at, and 145 entries in
/// 8192 instances were 1.2 million diagnostics (11.8 GB). Long lines are cut around the caret.
#[test]
fn an_unresolved_near_entry_is_said_once_per_service_not_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    let entries: Vec<String> = (0..40).map(|i| format!("\"/data{{instance}}/v{i:02}\"")).collect();
    let config = write_config(
        dir.path(),
        &format!(
            "[host]\nkeep-free = []\n[service.tikv]\ncommand = [\"/bin/tikv\", \"{{instance}}\"]\n\
             instances = 32\ncpus = 1\nmemory-policy = \"preferred\"\nnear = [{}]\n",
            entries.join(", ")
        ),
    );
    let out = pinctl().args(["check", "--topology", EPYC, "-c"]).arg(&config).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(occurrences(&out, "is a path"), 40, "one per entry: {out:?}");
    assert_eq!(occurrences(&out, "= note: the same for 31 more instances of `tikv`"), 40);
    let text = String::from_utf8_lossy(&out.stdout);
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 420, "a line of {longest} characters:\n{text}");
    assert!(text.lines().any(|l| l.starts_with("8 | ...") && l.ends_with("...")), "{text}");
}

#[test]
fn unresolved_near_entries_warn_once_on_another_hosts_topology() {
    let dir = tempfile::tempdir().unwrap();
    for (spec, why) in [
        ("/data/tikv", "near `/data/tikv` is a path"),
        ("nvme9n1", "near `nvme9n1` is not a device of this topology"),
    ] {
        let config = near_config(dir.path(), spec);
        for command in ["plan", "check"] {
            let out =
                pinctl().args([command, "--topology", EPYC, "-c"]).arg(&config).output().unwrap();
            assert!(out.status.success(), "{command} {spec}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let diagnostics = if command == "plan" { &stderr } else { &stdout };
            assert!(diagnostics.contains(&format!("warning: tikv: {why}")), "{command}: {out:?}");
            assert!(diagnostics.contains("pinctl.toml:5:9"), "{command}: {out:?}");
            // Said once: by the check of the file, with its place, not again by the planner.
            assert_eq!(occurrences(&out, &format!("`{spec}`")), 1, "{command}: {out:?}");
            assert_eq!(occurrences(&out, "placed without it"), 1, "{command}: {out:?}");
        }
        // In JSON it is a warning of the file, with its place, and not the planner's.
        let out = pinctl()
            .args(["plan", "--json", "--topology", EPYC, "-c"])
            .arg(&config)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let file = v["config_warnings"].as_array().unwrap();
        assert_eq!(file.len(), 1, "{v}");
        let file = file[0].as_str().unwrap();
        assert!(file.contains(&format!("pinctl.toml:5:9: tikv: {why}")), "{file}");
        assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
        crate::topology::assert_conforms("plan", &v, spec);
    }
}

#[test]
fn strict_refuses_a_near_device_the_topology_lacks_with_its_place_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = near_config(dir.path(), "nvme9n1");
    // On a snapshot (a warning without --strict, above) and on the live machine.
    for topology in [Some(EPYC), None] {
        let mut cmd = pinctl();
        cmd.args(["plan", "--strict", "-c"]).arg(&config);
        if let Some(t) = topology {
            cmd.args(["--topology", t]);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{topology:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{topology:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("error: tikv: near `nvme9n1` is not a device of this topology"),
            "{topology:?}: {stderr}"
        );
        assert!(stderr.contains("pinctl.toml:5:9\n"), "{topology:?}: {stderr}");
        assert!(stderr.contains("near = [\"nvme9n1\"]\n  |         ^^^^^^^"), "{stderr}");
        assert_eq!(occurrences(&out, "`nvme9n1`"), 1, "{topology:?}: {stderr}");
        assert!(!stderr.contains("warning"), "{topology:?}: {stderr}");
    }
    // --json changes nothing of that.
    let out = pinctl()
        .args(["plan", "--strict", "--json", "--topology", EPYC, "-c"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn config_errors_point_into_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        write_config(dir.path(), "[service.a]\ncommand = [\"/bin/a\"]\nmemory-polcy = \"bind\"\n");
    pinctl()
        .args(["plan", "--topology", EPYC, "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("pinctl.toml:3:1"));
}

/// `plan --json` on the bundled examples and on the live machine is what the schema in docs/
/// says.
#[test]
fn json_conforms_to_the_schema() {
    let cases = [
        ("configs/tidb-epyc.toml", Some(EPYC)),
        ("configs/mysql-xeon.toml", Some(XEON)),
        ("configs/interleaved.toml", Some("configs/topologies/interleaved-4node.json")),
        ("configs/mysql-arm.toml", Some("configs/topologies/arm-128core.json")),
    ];
    let dir = tempfile::tempdir().unwrap();
    let live = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\ncpus = 1\n",
    );
    let live = live.to_str().unwrap().to_string();
    for (config, topology) in cases.into_iter().chain([(live.as_str(), None)]) {
        let mut cmd = pinctl();
        cmd.args(["plan", "--json", "-c", config]);
        if let Some(t) = topology {
            cmd.args(["--topology", t]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{config} on {topology:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        crate::topology::assert_conforms("plan", &v, &format!("{config} on {topology:?}"));
    }
}

/// The GPU host of configs/gpu-host.toml, as a snapshot and as the sysfs tree it was read from.
const GPU_HOST: [&str; 2] = ["configs/topologies/gpu-2s.json", "tests/fixtures/sysfs/gpu-2s"];

#[test]
fn one_service_per_gpu_lands_next_to_its_gpu() {
    for topology in GPU_HOST {
        let out = pinctl()
            .args(["plan", "-c", "configs/gpu-host.toml", "--topology", topology, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let services = v["services"].as_array().unwrap();
        assert_eq!(services.len(), 8);
        for (i, s) in services.iter().enumerate() {
            // nvidia0-3 are behind socket 0, nvidia4-7 behind socket 1.
            let node = i / 4;
            assert_eq!(s["name"], format!("infer-{i}"));
            assert_eq!(s["nodes"], serde_json::json!([node]), "{topology}: infer-{i}");
            assert_eq!(s["memory_nodes"], serde_json::json!([node]), "{topology}: infer-{i}");
            let reasons = s["reasons"].to_string();
            assert!(
                reasons.contains(&format!("near `nvidia{i}`: on the device's node {node}")),
                "{topology}: infer-{i}: {reasons}"
            );
        }
        assert_eq!(v["warnings"], serde_json::json!([]));
    }
}

#[test]
fn near_names_a_gpu_by_pci_address_and_follows_local_cpulist() {
    for topology in GPU_HOST {
        pinctl()
            .args(["plan", "-c", "configs/scenarios/gpu-near-by-address-2s.toml"])
            .args(["--topology", topology])
            .assert()
            .success()
            .stdout(predicate::str::contains("train     1      16-23  bind 1"))
            .stdout(predicate::str::contains("near `nvidia6`: on the device's node 1"))
            .stdout(predicate::str::contains("gaudi     1      24-31  bind 1"))
            .stdout(predicate::str::contains(
                "near `e5:00.0` (`0000:e5:00.0`): on the device's node 1",
            ))
            .stdout(predicate::str::contains("warning").not());
    }
}

#[test]
fn a_pci_address_no_device_has_is_named_in_the_warning() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        "[host]\nkeep-free = []\n[service.a]\ncommand = [\"/bin/a\"]\ncpus = 2\nnear = [\"99:00.0\"]\n",
    );
    pinctl()
        .args(["plan", "--topology", GPU_HOST[0], "-c"])
        .arg(&config)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: a: near `99:00.0` is not a device of this topology (known devices: \
             0000:e5:00.0, card0, card1, eth0, nvidia0,",
        ))
        // Said once, located: the planner does not repeat it.
        .stdout(predicate::str::contains("99:00.0").not());
    // With --strict, the same entry is an error naming it.
    pinctl()
        .args(["plan", "--strict", "--topology", GPU_HOST[0], "-c"])
        .arg(&config)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("near `99:00.0` is not a device of this topology"));
}
