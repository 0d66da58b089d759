//! The seed scenarios of issue 3 section 4: the checked-in topologies A-D and the bundled
//! configs, with the plan each must get.

mod common;

use common::*;
use pinctl_plan::PlanError;

/// The checked-in snapshots in configs/topologies are exactly what the builders make. Set
/// PINCTL_UPDATE_TOPOLOGIES=1 to rewrite them after changing a builder.
#[test]
fn topology_snapshots_are_current() {
    for (file, topology) in seeds() {
        let path = repo().join("configs/topologies").join(file);
        let json = serde_json::to_string_pretty(&topology).unwrap() + "\n";
        if std::env::var_os("PINCTL_UPDATE_TOPOLOGIES").is_some() {
            std::fs::write(&path, &json).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == json,
            "{} is stale: rerun with PINCTL_UPDATE_TOPOLOGIES=1",
            path.display()
        );
    }
}

const MYSQL_32: &str = r#"
[host]
keep-free = []
[service.mysql]
command = ["/usr/sbin/mysqld"]
cpus = 32
"#;

#[test]
fn a_one_mysql_of_32_cpus_gets_one_node_never_0_31() {
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), MYSQL_32, false).unwrap();
    let mysql = plan.instance("mysql").unwrap();
    assert_eq!(mysql.placement.cpus.to_string(), "0-15,32-47");
    assert_eq!(mysql.placement.nodes.to_string(), "0");
    assert_eq!(plan.free_nodes.to_string(), "1");
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

#[test]
fn a_two_mysql_get_one_node_each() {
    let config = bundled("mysql-xeon.toml");
    let topology = topology("xeon-e5-2682v4.json");
    let plan = pinctl_plan::plan(&topology, &config, &inputs(&topology, &config, true)).unwrap();
    let cpus: Vec<String> = plan.placements.iter().map(|p| p.placement.cpus.to_string()).collect();
    assert_eq!(cpus, ["0-15,32-47", "16-31,48-63"]);
    let memory: Vec<String> =
        plan.placements.iter().map(|p| p.placement.memory_nodes.to_string()).collect();
    assert_eq!(memory, ["0", "1"]);
    assert!(plan.free_nodes.is_empty());
}

#[test]
fn a_three_whole_node_instances_fail_naming_the_instance_and_the_shortage() {
    let text = r#"
[service.mysql]
command = ["/usr/sbin/mysqld"]
instances = 3
nodes = 1
"#;
    let err = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap_err();
    let PlanError::Infeasible { instance, .. } = &err else { panic!("{err}") };
    assert_eq!(instance, "mysql-2");
    assert_eq!(
        err.to_string(),
        "mysql-2 needs 1 whole node: 2 nodes, 2 taken (by mysql-0, mysql-1)"
    );
}

#[test]
fn b_tikv_near_drives_tidb_elsewhere_node_5_free() {
    let config = bundled("tidb-epyc.toml");
    let topology = topology("epyc-nps4.json");
    let plan = pinctl_plan::plan(&topology, &config, &inputs(&topology, &config, true)).unwrap();
    assert_eq!(plan.instance("tikv-0").unwrap().placement.nodes.to_string(), "2");
    assert_eq!(plan.instance("tikv-1").unwrap().placement.nodes.to_string(), "6");
    let tidb: Vec<u32> = (0..4)
        .map(|i| plan.instance(&format!("tidb-{i}")).unwrap().placement.nodes.first().unwrap())
        .collect();
    for node in &tidb {
        assert!([0, 1, 3, 4, 7].contains(node), "{tidb:?}");
    }
    assert_eq!(plan.kept_free_nodes.to_string(), "5");
    assert!(plan.free_nodes.contains(5));
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    assert!(plan.optimal);
    assert_eq!(plan.instance("tikv-0").unwrap().placement.cpus.to_string(), "16-23,80-87");
}

const EIGHT_TIKV: &str = r#"
[host]
keep-free = ["eth0"]
[service.tikv]
command = ["/opt/tidb/bin/tikv-server"]
instances = 8
nodes = 1
"#;

#[test]
fn b_eight_tikv_use_the_kept_free_node_with_a_warning() {
    let plan = plan_text(&topology("epyc-nps4.json"), EIGHT_TIKV, false).unwrap();
    let on_5: Vec<&str> = plan
        .placements
        .iter()
        .filter(|p| p.placement.nodes.contains(5))
        .map(|p| p.instance.as_str())
        .collect();
    assert_eq!(on_5, ["tikv-5"], "ties go to the lowest node id, so the sixth gets node 5");
    assert!(plan.kept_free_nodes.is_empty());
    assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
    assert!(plan.warnings[0].contains("kept free for `eth0`"), "{:?}", plan.warnings);
}

#[test]
fn b_eight_tikv_fail_under_strict() {
    let err = plan_text(&topology("epyc-nps4.json"), EIGHT_TIKV, true).unwrap_err();
    assert!(matches!(err, PlanError::Strict { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("tikv-5 needs 1 whole node: 8 nodes, 7 taken, 1 kept free for `eth0`"),
        "{err}"
    );
}

#[test]
fn b_four_tikv_of_two_nodes_each_stay_inside_one_socket() {
    let text = r#"
[host]
keep-free = []
[service.tikv]
command = ["/opt/tidb/bin/tikv-server"]
instances = 4
nodes = 2
"#;
    let plan = plan_text(&topology("epyc-nps4.json"), text, true).unwrap();
    let mut seen = pinctl_topology::NodeSet::new();
    for p in &plan.placements {
        assert_eq!(p.placement.nodes.len(), 2);
        let packages: Vec<u32> = p.placement.nodes.iter().map(|n| n / 4).collect();
        assert_eq!(packages[0], packages[1], "{} spans sockets: {}", p.instance, p.placement.nodes);
        assert!(p.placement.nodes.is_disjoint(&seen));
        seen = seen.union(&p.placement.nodes);
    }
    let sets: Vec<String> = plan.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert_eq!(sets, ["0-1", "2-3", "4-5", "6-7"]);
}

fn tikv_100g(policy: &str) -> String {
    format!(
        r#"
[host]
keep-free = ["eth0"]
[service.tikv]
command = ["/opt/tidb/bin/tikv-server"]
memory = "100GiB"
memory-policy = "{policy}"
near = ["nvme0n1"]
"#
    )
}

#[test]
fn b_100g_tikv_under_bind_on_one_node_suggests_preferred_or_two_nodes() {
    let err = plan_text(&topology("epyc-nps4.json"), &tikv_100g("bind"), false).unwrap_err();
    assert!(matches!(err, PlanError::BindTooSmall { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "tikv needs 100GiB under `bind`, but 1 node can hold at most 62.7GiB after the memory \
         reserve: use `memory-policy = \"preferred\"` or `nodes = 2`"
    );
}

#[test]
fn b_100g_tikv_under_preferred_is_placed_with_a_warning() {
    let topology = topology("epyc-nps4.json");
    let plan = plan_text(&topology, &tikv_100g("preferred"), false).unwrap();
    let tikv = plan.instance("tikv").unwrap();
    assert_eq!(tikv.placement.nodes.to_string(), "2");
    assert_eq!(tikv.placement.memory_nodes.to_string(), "2");
    assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
    assert!(
        plan.warnings[0].contains("expects 100GiB but node 2 can hold 62.7GiB"),
        "{:?}",
        plan.warnings
    );
    assert!(matches!(
        plan_text(&topology, &tikv_100g("preferred"), true),
        Err(PlanError::Strict { .. })
    ));
}

#[test]
fn c_three_mysql_of_32_cpus_each_get_four_whole_nodes_of_one_socket() {
    let config = bundled("mysql-arm.toml");
    let topology = topology("arm-128core.json");
    let plan = pinctl_plan::plan(&topology, &config, &inputs(&topology, &config, true)).unwrap();
    let mut seen = pinctl_topology::NodeSet::new();
    for p in &plan.placements {
        assert_eq!(p.placement.nodes.len(), 4, "{}: {}", p.instance, p.placement.nodes);
        assert_eq!(p.placement.cpus, topology.cpus_of(&p.placement.nodes), "whole nodes");
        let sockets: Vec<u32> = p.placement.nodes.iter().map(|n| n / 8).collect();
        assert!(sockets.iter().all(|s| *s == sockets[0]), "{}: {}", p.instance, p.placement.nodes);
        assert!(p.placement.nodes.is_disjoint(&seen));
        seen = seen.union(&p.placement.nodes);
    }
    let sets: Vec<String> = plan.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert_eq!(sets, ["0-3", "4-7", "8-11"]);
}

#[test]
fn d_four_services_of_12_cpus_each_get_one_nodes_interleaved_cpus() {
    let config = bundled("interleaved.toml");
    let topology = topology("interleaved-4node.json");
    let plan = pinctl_plan::plan(&topology, &config, &inputs(&topology, &config, true)).unwrap();
    let cpus: Vec<String> = plan.placements.iter().map(|p| p.placement.cpus.to_string()).collect();
    assert_eq!(
        cpus,
        [
            "0,4,8,12,16,20,24,28,32,36,40,44",
            "1,5,9,13,17,21,25,29,33,37,41,45",
            "2,6,10,14,18,22,26,30,34,38,42,46",
            "3,7,11,15,19,23,27,31,35,39,43,47",
        ]
    );
}

#[test]
fn plans_are_byte_for_byte_deterministic() {
    let config = bundled("tidb-epyc.toml");
    let topology = topology("epyc-nps4.json");
    let inputs = inputs(&topology, &config, false);
    let json = || {
        let plan = pinctl_plan::plan(&topology, &config, &inputs).unwrap();
        serde_json::to_string(&plan.document(&topology.warnings, &[])).unwrap()
    };
    let first = json();
    for _ in 0..5 {
        let again = json();
        assert_eq!(again, first);
    }
}
