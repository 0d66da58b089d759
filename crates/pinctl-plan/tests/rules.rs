//! One test per rule the seed scenarios do not reach: the cpuset, reserved CPUs, memory-only
//! nodes, missed `near`, the least use of a kept-free node, spread of shared instances,
//! `preferred` on several nodes.

mod common;

use common::*;
use pinctl_topology::Node;

#[test]
fn a_missed_near_names_who_took_the_node_and_warns() {
    let text = r#"
[host]
keep-free = ["eth0"]
[service.tikv]
command = ["/bin/tikv", "{instance}"]
instances = 2
near = ["nvme0n1"]
"#;
    let plan = plan_text(&topology("epyc-nps4.json"), text, false).unwrap();
    // Both want node 2; the other gets the closest node of the same socket (distance 12), and
    // the lowest ids decide which instance that is.
    assert_eq!(plan.instance("tikv-0").unwrap().placement.nodes.to_string(), "0");
    assert_eq!(plan.instance("tikv-1").unwrap().placement.nodes.to_string(), "2");
    assert_eq!(
        plan.warnings,
        [
            "tikv-0: not on the node of `nvme0n1` (node 2 went to tikv-1): placed on node 0 at distance 12"
        ]
    );
    assert!(plan_text(&topology("epyc-nps4.json"), text, true).is_err(), "strict refuses");
}

#[test]
fn a_kept_free_node_that_must_be_used_gets_the_smallest_instance() {
    // Two nodes, eth0 on node 0, one whole-node database and one 4-CPU web server: one of them
    // must use node 0. The web server goes there, leaving 28 of its CPUs to the network stack,
    // not the database, which would take all 32 (docs/planning.md, field `kept_free_cpus`).
    let text = r#"
[host]
keep-free = [0]
[service.db]
command = ["/usr/sbin/mysqld"]
nodes = 1
[service.web]
command = ["/usr/sbin/nginx"]
cpus = 4
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap();
    assert_eq!(plan.instance("db").unwrap().placement.nodes.to_string(), "1");
    assert_eq!(plan.instance("web").unwrap().placement.nodes.to_string(), "0");
    assert_eq!(plan.cost.kept_free_used, 1);
    assert_eq!(plan.cost.kept_free_cpus, 4);
    assert!(plan.optimal);
}

#[test]
fn shared_instances_spread_over_nodes_and_take_whole_cores() {
    let text = r#"
[host]
keep-free = []
[service.web]
command = ["/bin/web", "{instance}"]
instances = 4
cpus = 4
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap();
    let got: Vec<String> = plan
        .placements
        .iter()
        .map(|p| format!("{} {}", p.placement.nodes, p.placement.cpus))
        .collect();
    assert_eq!(got, ["0 0-1,32-33", "0 2-3,34-35", "1 16-17,48-49", "1 18-19,50-51"]);
    assert!(plan.optimal);
}

#[test]
fn reserved_cpus_and_the_cpuset_are_never_given() {
    let mut t = topology("epyc-nps4.json");
    // The process may only use nodes 0-1's CPUs, and node 1's memory is outside its cpuset.
    t.host.allowed_cpus = Some("0-15,64-79".parse().unwrap());
    t.host.allowed_nodes = Some("0,2-7".parse().unwrap());
    let text = r#"
[host]
keep-free = []
reserve-cpus = "0,64"
[service.db]
command = ["/bin/db"]
"#;
    let plan = plan_text(&t, text, false).unwrap();
    let db = plan.instance("db").unwrap();
    assert_eq!(db.placement.nodes.to_string(), "0");
    assert_eq!(db.placement.cpus.to_string(), "1-7,65-71");
    let two = text
        .replace("[service.db]", "[service.db]\ninstances = 2")
        .replace("command = [\"/bin/db\"]", "command = [\"/bin/db\", \"{instance}\"]");
    // Without a size, the second instance shares node 0 rather than be refused...
    let shared = plan_text(&t, &two, false).unwrap();
    for p in &shared.placements {
        assert_eq!(
            (p.placement.nodes.to_string(), p.placement.cpus.to_string()),
            ("0".into(), "1-7,65-71".into())
        );
    }
    // ...and where the file demands a node each, it is refused.
    let two = two.replace("instances = 2", "instances = 2\nshare-nodes = \"never\"");
    let err = plan_text(&t, &two, false).unwrap_err().to_string();
    assert!(
        err.starts_with("db-1 needs 1 whole node: 8 nodes, 1 taken (by db-0), 7 not available"),
        "{err}"
    );
}

#[test]
fn memory_only_nodes_never_host_instances_but_can_be_asked_for_memory() {
    let mut t = topology("xeon-e5-2682v4.json");
    t.nodes.push(Node {
        id: 2,
        cpus: pinctl_topology::CpuSet::new(),
        memory_bytes: Some(256 << 30),
        memory_free_bytes: None,
        has_cpu: false,
        has_memory: true,
    });
    for row in &mut t.distances {
        row.push(30);
    }
    t.distances.push(vec![30, 30, 10]);
    let text = r#"
[host]
keep-free = []
[service.cache]
command = ["/bin/cache"]
only-nodes = [1, 2]
memory-policy = "preferred-many"
[service.db]
command = ["/bin/db"]
"#;
    let plan = plan_text(&t, text, false).unwrap();
    let cache = plan.instance("cache").unwrap();
    assert_eq!(cache.placement.nodes.to_string(), "1");
    assert_eq!(cache.placement.memory_nodes.to_string(), "1-2");
    assert_eq!(plan.instance("db").unwrap().placement.nodes.to_string(), "0");
    assert!(!plan.free_nodes.contains(0) && !plan.free_nodes.contains(1));
}

#[test]
fn preferred_on_several_nodes_suggests_preferred_many() {
    let text = r#"
[host]
keep-free = []
[service.tikv]
command = ["/bin/tikv"]
nodes = 2
memory-policy = "preferred"
"#;
    let plan = plan_text(&topology("epyc-nps4.json"), text, false).unwrap();
    assert_eq!(plan.instance("tikv").unwrap().placement.memory_nodes.to_string(), "0-1");
    assert_eq!(plan.warnings.len(), 1);
    assert!(
        plan.warnings[0].contains("`preferred-many` prefers all of them"),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn a_cpus_instance_that_no_node_can_hold_any_more_is_refused() {
    // Four nodes of 12 CPUs hold four instances of 10 CPUs; the fifth would have to span
    // nodes, which a `cpus` instance that fits one node never does.
    let text = r#"
[host]
keep-free = []
[service.web]
command = ["/bin/web", "{instance}"]
instances = 5
cpus = 10
"#;
    let err = plan_text(&topology("interleaved-4node.json"), text, false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "web-4 needs 10 CPUs on one node: the most free on a node it may use is 2; 0 of its 4 \
         nodes owned by whole-node instances; the rest is shared (by web-0, web-1, web-2, web-3); \
         `cpu-overcommit` in `[host]` would let `cpus = N` instances share CPUs"
    );
}

#[test]
fn a_near_device_on_a_node_the_topology_lacks_warns_and_is_refused_under_strict() {
    let mut t = topology("epyc-nps4.json");
    let nvme = t.devices.iter_mut().find(|d| d.name == "nvme0n1").unwrap();
    nvme.node = Some(9);
    nvme.nodes = "9".parse().unwrap();
    let text =
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\nnear = [\"nvme0n1\"]\n";
    let plan = plan_text(&t, text, false).unwrap();
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("near `nvme0n1` is on node 9, which this topology")),
        "{:?}",
        plan.warnings
    );
    let e = plan_text(&t, text, true).unwrap_err().to_string();
    assert!(e.contains("--strict") && e.contains("node 9"), "{e}");
}

const FOUR_WEB: &str = r#"
[service.web]
command = ["/bin/web", "{instance}"]
instances = 4
cpus = 4
"#;

#[test]
fn removing_a_service_leaves_the_others_on_their_nodes_and_cpus() {
    let before = format!(
        "[host]\nkeep-free = []\n[service.first]\ncommand = [\"/bin/first\"]\ncpus = 4\n{FOUR_WEB}"
    );
    let after = format!("[host]\nkeep-free = []\n{FOUR_WEB}");
    let (old, new, fresh) = replan(&topology("xeon-e5-2682v4.json"), &before, &after);
    let kept: Vec<String> = where_each(&old).into_iter().skip(1).collect();
    assert_eq!(where_each(&new), kept);
    assert_eq!(new.cost.moved, 0);
    // From scratch, the web servers would move (to even out the load, or to the lowest CPUs):
    // the stickiness is what keeps them.
    assert_ne!(where_each(&fresh), kept, "the fresh plan already keeps them: a weak test");
    for p in &new.placements {
        assert!(p.reasons.iter().any(|r| r == "stays where it runs now"), "{:?}", p.reasons);
    }
}

#[test]
fn adding_a_service_that_fits_elsewhere_moves_nobody() {
    let three = FOUR_WEB.replace("instances = 4", "instances = 3");
    let before = format!("[host]\nkeep-free = []\n{three}");
    let after = format!("{before}[service.db]\ncommand = [\"/bin/db\"]\ncpus = 16\n");
    let (old, new, fresh) = replan(&topology("xeon-e5-2682v4.json"), &before, &after);
    assert_eq!(where_each(&new)[..3], where_each(&old)[..]);
    assert_eq!(new.cost.moved, 0);
    // Spread alone would gather the web servers on one node and give the other to the
    // database: moving a running instance is worth more than an even load.
    assert_eq!(new.instance("db").unwrap().placement.nodes.to_string(), "1");
    assert_ne!(where_each(&fresh)[..3], where_each(&old)[..], "a weak test");
}

#[test]
fn a_change_that_forces_a_move_moves_the_fewest_instances() {
    // Before: the 16-CPU instance alone on node 0, the three 4-CPU ones on node 1. Then a
    // whole-node database arrives: everything else must share one node. Giving it node 0 moves
    // one instance; node 1 (what the lowest ids would pick from scratch) would move three.
    let before = r#"
[host]
keep-free = []
[service.big]
command = ["/bin/big"]
cpus = 16
[service.small]
command = ["/bin/small", "{instance}"]
instances = 3
cpus = 4
"#;
    let after = format!("{before}[service.db]\ncommand = [\"/bin/db\"]\nnodes = 1\n");
    let (old, new, fresh) = replan(&topology("xeon-e5-2682v4.json"), before, &after);
    assert_eq!(
        where_each(&old),
        [
            "big 0 0-7,32-39",
            "small-0 1 16-17,48-49",
            "small-1 1 18-19,50-51",
            "small-2 1 20-21,52-53"
        ]
    );
    assert_eq!(new.cost.moved, 1);
    assert_eq!(where_each(&new)[1..4], where_each(&old)[1..]);
    assert_eq!(where_each(&new)[0], "big 1 22-29,54-61");
    assert_eq!(new.instance("db").unwrap().placement.nodes.to_string(), "0");
    let big = &new.instance("big").unwrap().reasons;
    assert!(
        big.contains(&"moves from node 0 (CPUs 0-7,32-39), where it runs now: staying would break a rule ranked above moving".to_string()),
        "{big:?}"
    );
    assert_eq!(
        fresh.instance("db").unwrap().placement.nodes.to_string(),
        "1",
        "from scratch: 3 move"
    );
}

#[test]
fn a_placement_rule_outranks_staying() {
    // tikv runs on node 0 because its drive's node 2 was taken; once the file no longer names
    // what took it, it moves next to its drive (rule 2 ranks above moving).
    let before = r#"
[host]
keep-free = []
[service.other]
command = ["/bin/other"]
only-nodes = [2]
[service.tikv]
command = ["/bin/tikv"]
near = ["nvme0n1"]
"#;
    let after =
        "[host]\nkeep-free = []\n[service.tikv]\ncommand = [\"/bin/tikv\"]\nnear = [\"nvme0n1\"]\n";
    let (old, new, _) = replan(&topology("epyc-nps4.json"), before, after);
    assert_eq!(old.instance("tikv").unwrap().placement.nodes.to_string(), "0");
    assert_eq!(new.instance("tikv").unwrap().placement.nodes.to_string(), "2");
    assert_eq!(new.cost.moved, 1);
}

/// The largest file the config allows, 8192 instances (one per CPU of a 64-node host), is
/// planned on a thread with a tokio worker's 2 MiB stack: the descent recurses once per
/// instance, and used to overflow such a stack (and a debug build's 8 MiB main thread).
#[test]
fn the_largest_file_is_planned_on_a_small_stack() {
    let host = (0..64u32).fold(pinctl_testkit::SyntheticTopology::new(), |t, n| {
        let cpus = format!("{}-{}", 128 * n, 128 * n + 127).parse().unwrap();
        t.node(cpus, n / 32, Some(64 * pinctl_testkit::GIB))
    });
    let topology = host.distances_by_package(20, 30).build();
    let text = format!(
        "[host]\nkeep-free = []\n[service.web]\ncommand = [\"/bin/web\", \"{{instance}}\"]\n\
         instances = {}\ncpus = 1\n",
        pinctl_config::MAX_INSTANCES
    );
    let planned = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || plan_text(&topology, &text, false).map(|p| p.placements.len()))
        .unwrap()
        .join()
        .expect("the planner panicked");
    assert_eq!(planned.unwrap(), pinctl_config::MAX_INSTANCES as usize);
}

#[test]
fn keeping_the_only_node_free_is_said_once_and_passes_strict() {
    // On a one-node host the default route's NIC is on the only node: nothing can be kept
    // free, and every instance used to carry the same warning, with `--strict` refusing.
    let text = r#"
[host]
keep-free = [0]
[service.web]
command = ["/bin/web", "{instance}"]
instances = 2
cpus = 1
"#;
    let plan = plan_text(&small_vm(), text, true).unwrap();
    assert_eq!(
        plan.warnings,
        [
            "keep-free: node 0 is on the only node: no node can be kept free, so none is (set `keep-free = []` to say so)"
        ]
    );
    assert!(plan.kept_free_nodes.is_empty());
    // Where some node can be kept free, using it is still a broken rule.
    let two = r#"
[host]
keep-free = [0]
[service.db]
command = ["/bin/db", "{instance}"]
instances = 2
nodes = 1
"#;
    assert!(plan_text(&xeon(), two, true).is_err(), "strict refuses");
}
