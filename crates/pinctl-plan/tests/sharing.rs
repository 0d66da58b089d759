//! Instances that share nodes (`share-nodes`), CPUs given more than once (`cpu-overcommit`)
//! and CPUs placed by last-level cache: the scenarios of issue 19, each with the plan it must
//! get.

mod common;

use common::*;
use pinctl_plan::Plan;
use pinctl_topology::Topology;

/// The plan of a bundled scenario on a checked-in topology, `--strict` (no soft rule broken).
fn scenario(file: &str, topology_file: &str) -> (Topology, Plan) {
    let config = bundled(&format!("scenarios/{file}"));
    let t = topology(topology_file);
    let plan = pinctl_plan::plan(&t, &config, &inputs(&t, &config, true)).unwrap();
    (t, plan)
}

fn reasons<'a>(plan: &'a Plan, instance: &str) -> &'a [String] {
    &plan.instance(instance).unwrap().reasons
}

#[test]
fn eight_instances_without_a_size_on_two_nodes_share_four_to_a_node() {
    let (_, plan) = scenario("mysql-eight-xeon.toml", "xeon-e5-2682v4.json");
    let want: Vec<String> = (0..8)
        .map(|i| match i {
            0..4 => format!("mysql-{i} 0 0-15,32-47"),
            _ => format!("mysql-{i} 1 16-31,48-63"),
        })
        .collect();
    assert_eq!(where_each(&plan), want);
    assert!(plan.optimal && plan.warnings.is_empty(), "{:?}", plan.warnings);
    // 8 instances, 2 first ones: 6 without a node of their own, whatever the split; the
    // spread decides 4 + 4.
    assert_eq!(plan.cost.shared_instances, 6);
    assert_eq!(
        reasons(&plan, "mysql-1")[0],
        "shares node 0 and its CPUs with mysql-0, mysql-2, mysql-3 (share-nodes = \"when-needed\": \
         every node it may use hosts an instance)"
    );
    assert_eq!(
        reasons(&plan, "mysql-1")[1],
        "memory bind 24GiB fits node 0 (125.4GiB after the reserve; its 4 instances expect 96GiB \
         together)"
    );
    let group = plan.sharing_group_of("mysql-5").unwrap();
    assert_eq!(group.members, ["mysql-4", "mysql-5", "mysql-6", "mysql-7"]);
    assert_eq!(
        (group.nodes.to_string(), group.cpus.to_string()),
        ("1".into(), "16-31,48-63".into())
    );
    assert_eq!(plan.sharing_groups.len(), 2, "one group a node");
    let ratios: Vec<(u32, String)> =
        plan.node_use.iter().map(|u| (u.node, u.cpus_per_cpu())).collect();
    assert_eq!(ratios, [(0, "4".to_string()), (1, "4".to_string())]);
    assert_eq!(plan.node_use[1].instances, ["mysql-4", "mysql-5", "mysql-6", "mysql-7"]);
}

#[test]
fn one_node_each_comes_before_sharing() {
    let text = r#"
[host]
keep-free = []
[service.db]
command = ["/bin/db", "{instance}"]
instances = 2
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap();
    assert_eq!(where_each(&plan), ["db-0 0 0-15,32-47", "db-1 1 16-31,48-63"]);
    assert_eq!(
        reasons(&plan, "db-0")[0],
        "has node 0 to itself (share-nodes = \"when-needed\": a node of its own where the host has room)"
    );
    assert!(plan.placements.iter().all(|p| p.sharing_group.is_none()), "nobody shares");
    assert!(plan.sharing_groups.is_empty());
    let ratios: Vec<String> = plan.node_use.iter().map(|u| u.cpus_per_cpu()).collect();
    assert_eq!(ratios, ["1", "1"]);
    // A node of its own ranks with rule 1, above keeping the NIC's node free: as `nodes = 1`
    // does, the second instance uses it (with the warning) rather than share.
    let kept = text.replace("keep-free = []", "keep-free = [\"eth0\"]");
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), &kept, false).unwrap();
    assert_eq!(where_each(&plan), ["db-0 0 0-15,32-47", "db-1 1 16-31,48-63"]);
    assert_eq!(
        plan.warnings,
        ["db-0 needs a node of its own (share-nodes = \"when-needed\"): 2 nodes, 1 taken, 1 kept \
             free for `eth0`; it uses node 0"]
    );
}

#[test]
fn demanding_a_node_each_refuses_instead_of_sharing() {
    let config = bundled("scenarios/mysql-eight-xeon.toml");
    let t = topology("xeon-e5-2682v4.json");
    let mut never = config.clone();
    never.services[0].share_nodes = pinctl_config::ShareNodes::Never;
    let e = pinctl_plan::plan(&t, &never, &inputs(&t, &never, false)).unwrap_err();
    assert_eq!(e.to_string(), "mysql-2 needs 1 whole node: 2 nodes, 2 taken (by mysql-0, mysql-1)");
    let text = std::fs::read_to_string(repo().join("configs/scenarios/mysql-eight-xeon.toml"))
        .unwrap()
        .replace("instances = 8", "instances = 8\nshare-nodes = \"never\"");
    let e = plan_text(&t, &text, false).unwrap_err().to_string();
    assert!(e.starts_with("mysql-2 needs 1 whole node"), "{e}");
}

#[test]
fn four_redis_of_one_cpu_on_two_cpus_only_where_overcommit_is_allowed() {
    let (t, plan) = scenario("redis-overcommit-vm.toml", "vm-2cpu.json");
    // The CPUs given to the fewest instances first: each CPU carries two, alternately.
    assert_eq!(where_each(&plan), ["redis-0 0 0", "redis-1 0 1", "redis-2 0 0", "redis-3 0 1"]);
    assert_eq!(plan.sharing_group_of("redis-0").unwrap().members, ["redis-0", "redis-2"]);
    assert_eq!(plan.sharing_group_of("redis-1").unwrap().members, ["redis-1", "redis-3"]);
    assert_eq!(
        reasons(&plan, "redis-0")[0],
        "cpus = 1: packed in node 0 (4 CPUs of instances on its 2 usable CPUs: 2 per CPU, as \
         cpu-overcommit 2 allows), whole cores first; shares it with redis-1, redis-2, redis-3"
    );
    let node = &plan.node_use[0];
    assert_eq!((node.usable_cpus, node.cpus_given, node.cpus_per_cpu()), (2, 4, "2".into()));
    assert!(node.overlaps(&plan.sharing_groups));

    // Without the ratio, the third cannot be placed, and the error says what would allow it.
    let text =
        std::fs::read_to_string(repo().join("configs/scenarios/redis-overcommit-vm.toml")).unwrap();
    let refused = text.replace("cpu-overcommit = 2\n", "");
    let e = plan_text(&t, &refused, false).unwrap_err().to_string();
    assert_eq!(
        e,
        "redis-2 needs 1 CPU on one node: the most free on a node it may use is 0; 0 of its 1 node \
         owned by whole-node instances; the rest is shared (by redis-0, redis-1); \
         `cpu-overcommit` in `[host]` would let `cpus = N` instances share CPUs"
    );
    // 1.5 gives the node 3 CPUs of instances: three fit, the fourth does not.
    let tight = text.replace("cpu-overcommit = 2", "cpu-overcommit = 1.5");
    let e = plan_text(&t, &tight, false).unwrap_err().to_string();
    assert!(e.starts_with("redis-3 needs 1 CPU on one node"), "{e}");
    let three = tight.replace("instances = 4", "instances = 3");
    let plan = plan_text(&t, &three, false).unwrap();
    assert_eq!(plan.node_use[0].cpus_per_cpu(), "1.5");
}

#[test]
fn an_exclusive_tikv_and_sharing_tidb_on_the_epyc() {
    let (_, plan) = scenario("tikv-tidb-sharing-epyc.toml", "epyc-nps4.json");
    assert_eq!(
        where_each(&plan),
        [
            "tikv-0 2 16-23,80-87",
            "tikv-1 6 48-55,112-119",
            "tidb-0 0 0-7,64-71",
            "tidb-1 0 0-7,64-71",
            "tidb-2 1 8-15,72-79",
            "tidb-3 1 8-15,72-79",
            "tidb-4 3 24-31,88-95",
            "tidb-5 3 24-31,88-95",
            "tidb-6 4 32-39,96-103",
            "tidb-7 7 56-63,120-127",
        ]
    );
    // Nothing lands on the nodes TiKV owns, nor on the NIC's node 5.
    assert_eq!(plan.kept_free_nodes.to_string(), "5");
    assert!(plan.instance("tikv-0").unwrap().sharing_group.is_none());
    let shared: Vec<u32> = plan.node_use.iter().map(|u| u.node).collect();
    assert_eq!(shared, [0, 1, 3, 4, 7]);
    assert_eq!(
        reasons(&plan, "tidb-6")[0],
        "alone on node 4 (share-nodes = \"always\": sharing instances spread evenly over the nodes \
         they may use)"
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

#[test]
fn sharing_instances_take_what_cpus_instances_leave_of_their_node() {
    let text = r#"
[host]
keep-free = []
[service.agent]
command = ["/bin/agent"]
cpus = 4
only-nodes = [0]
[service.db]
command = ["/bin/db", "{instance}"]
instances = 2
share-nodes = "always"
only-nodes = [0]
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap();
    assert_eq!(where_each(&plan), ["agent 0 0-1,32-33", "db-0 0 2-15,34-47", "db-1 0 2-15,34-47"]);
    assert!(plan.instance("agent").unwrap().sharing_group.is_none(), "its CPUs are its own");
    assert!(
        reasons(&plan, "db-0")[0]
            .ends_with("; all its CPUs but the 4 that `cpus = N` instances hold"),
        "{:?}",
        reasons(&plan, "db-0")
    );
    // A node's last CPU cannot go to `cpus = N` instances while sharing ones are there.
    let full = text.replace("cpus = 4", "cpus = 32");
    let e = plan_text(&topology("xeon-e5-2682v4.json"), &full, false).unwrap_err().to_string();
    assert!(e.starts_with("db-0 needs a node to share: 0 of its 1 node owned"), "{e}");
}

#[test]
fn memory_must_fit_every_sharing_instance_under_bind_and_spreads_them() {
    let text = |memory: &str, policy: &str| {
        format!(
            "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\", \"{{instance}}\"]\n\
             instances = 3\nshare-nodes = \"always\"\nmemory = \"{memory}\"\nmemory-policy = \"{policy}\"\n"
        )
    };
    let t = topology("xeon-e5-2682v4.json");
    // Two 60 GiB instances fit one node's 125.4 GiB.
    let plan = plan_text(&t, &text("60GiB", "bind"), false).unwrap();
    let nodes: Vec<String> =
        plan.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert_eq!(nodes, ["0", "0", "1"]);
    // Two of 70 GiB do not: under bind, three cannot be placed on two nodes.
    let e = plan_text(&t, &text("70GiB", "bind"), false).unwrap_err().to_string();
    assert!(e.starts_with("db-2 needs a node to share"), "{e}");
    assert!(e.contains("without room for 70GiB under bind"), "{e}");
    // Under preferred they may spill, with a warning (an error under --strict).
    let plan = plan_text(&t, &text("70GiB", "preferred"), false).unwrap();
    assert!(
        plan.warnings.iter().any(|w| w.contains("together expect 140GiB but it holds 125.4GiB")),
        "{:?}",
        plan.warnings
    );
    assert!(plan_text(&t, &text("70GiB", "preferred"), true).is_err());
}

#[test]
fn sharing_instances_spread_by_memory_where_it_weighs_more_than_cpus() {
    // Two TiKV of 60 GiB and two TiDB of 4 GiB, all sharing two nodes: by count any two and
    // two are even, and the lowest ids would put both TiKV on node 0 (120 GiB of 125.4). By
    // the larger of CPU and memory share, one TiKV goes to each node.
    let text = r#"
[host]
keep-free = []
[service.tikv]
command = ["/bin/tikv", "{instance}"]
instances = 2
share-nodes = "always"
memory = "60GiB"
[service.tidb]
command = ["/bin/tidb", "{instance}"]
instances = 2
share-nodes = "always"
memory = "4GiB"
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), text, false).unwrap();
    let nodes: Vec<String> =
        plan.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert_eq!(nodes, ["0", "1", "0", "1"]);
    // A weight counts an instance as that many CPUs: one of weight 3 balances three of 1.
    let weighted = r#"
[host]
keep-free = []
[service.big]
command = ["/bin/big"]
share-nodes = "always"
share-weight = 3
[service.small]
command = ["/bin/small", "{instance}"]
instances = 3
share-nodes = "always"
"#;
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), weighted, false).unwrap();
    let nodes: Vec<String> =
        plan.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert_eq!(nodes, ["0", "1", "1", "1"]);
}

#[test]
fn cpus_8_on_the_epyc_stay_inside_one_l3() {
    let (t, plan) = scenario("l3-epyc.toml", "epyc-nps4.json");
    // Whole cores first alone would give the database cores 1-4: two in each CCX.
    assert_eq!(where_each(&plan), ["web 0 0,64", "db 0 4-7,68-71"]);
    let db = plan.instance("db").unwrap();
    assert_eq!(t.cache_of(4), t.cache_of(71), "one L3");
    assert!(
        db.reasons[0].contains("whole cores first, inside one L3 of the node's 2 (4-7,68-71)"),
        "{:?}",
        db.reasons
    );
}

#[test]
fn instances_sharing_a_genoa_node_spread_over_its_ccds() {
    let (t, plan) = scenario("memcached-genoa.toml", "epyc-9554-nps1.json");
    assert_eq!(
        where_each(&plan),
        [
            "memcached-0 0 0-3,128-131",
            "memcached-1 0 8-11,136-139",
            "memcached-2 0 16-19,144-147",
            "memcached-3 0 24-27,152-155",
            "analytics 0 32-43,160-171",
        ]
    );
    let caches = |cpus: &pinctl_topology::CpuSet| {
        let mut c: Vec<usize> = cpus.iter().filter_map(|cpu| t.cache_of(cpu)).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    for p in &plan.placements[..4] {
        assert_eq!(caches(&p.placement.cpus).len(), 1, "{}: {}", p.instance, p.placement.cpus);
    }
    // 24 CPUs: one whole CCD of 16 and 8 of the next, the fewest CCDs that hold them.
    assert_eq!(caches(&plan.placements[4].placement.cpus), [4, 5]);
    assert!(
        plan.placements[4].reasons[0].contains("over 2 L3s of the node's 8 (1 of them whole)"),
        "{:?}",
        plan.placements[4].reasons
    );
}

#[test]
fn on_a_real_epyc_hwloc_export_instances_get_an_l3_each() {
    // LLNL's Corona: EPYC 7401, a node is one die of two CCXs of three cores (SMT2).
    let path = repo().join(
        "../shared/fixtures/topologies/G09-mpibind-epyc7401-corona-8n-nvme-ib/raw/epyc-corona.xml",
    );
    let t = pinctl_hwloc_xml::read_hwloc_xml(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.caches.len(), 16, "two L3s in each of the 8 nodes");
    let text = r#"
[host]
keep-free = []
[service.db]
command = ["/bin/db", "{instance}"]
instances = 2
cpus = 6
only-nodes = [0]
[service.cache]
command = ["/bin/cache", "{instance}"]
instances = 4
cpus = 2
only-nodes = [1]
"#;
    let plan = plan_text(&t, text, false).unwrap();
    assert_eq!(
        where_each(&plan),
        [
            "db-0 0 0-2,48-50",
            "db-1 0 3-5,51-53",
            "cache-0 1 6,54",
            "cache-1 1 9,57",
            "cache-2 1 7,55",
            "cache-3 1 10,58",
        ]
    );
    for p in &plan.placements {
        let first = t.cache_of(p.placement.cpus.first().unwrap());
        assert!(
            p.placement.cpus.iter().all(|c| t.cache_of(c) == first),
            "{}: {}",
            p.instance,
            p.placement.cpus
        );
    }
}

#[test]
fn a_reload_adding_a_sharing_instance_moves_nobody() {
    let before =
        std::fs::read_to_string(repo().join("configs/scenarios/tikv-tidb-sharing-epyc.toml"))
            .unwrap()
            .replace("instances = 8", "instances = 6");
    let after = before.replace("instances = 6", "instances = 7");
    let (old, new, fresh) = replan(&topology("epyc-nps4.json"), &before, &after);
    assert_eq!(where_each(&new)[..8], where_each(&old)[..]);
    assert_eq!(new.cost.moved, 0);
    assert_eq!(where_each(&new)[8], "tidb-6 1 8-15,72-79", "to the lowest of the least loaded");
    // From scratch the spread would be the same, by other instances: tidb-3 would move to node
    // 1. Staying is what keeps it.
    assert_ne!(where_each(&fresh)[..8], where_each(&old)[..], "a weak test");
    assert!(reasons(&new, "tidb-3").iter().any(|r| r == "stays where it runs now"));
    // when-needed instances likewise: a ninth on the 8-node EPYC shares without moving anyone.
    let nine = |n: u32| {
        format!(
            "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\", \"{{instance}}\"]\ninstances = {n}\n"
        )
    };
    let (old, new, _) = replan(&topology("epyc-nps4.json"), &nine(8), &nine(9));
    assert_eq!(where_each(&new)[..8], where_each(&old)[..]);
    assert_eq!((new.cost.moved, new.cost.shared_instances), (0, 1));
}

/// Issue 26: every sharing instance listed every other sharer of its node, so a plan of
/// thousands of them grew with the square of their count (8,192 instances: 3.8 GiB). The plan
/// names each group once and every instance points at it: what it carries grows with the
/// instances, and each reason names a handful of the others.
#[test]
fn thousands_of_sharing_instances_name_their_group_once() {
    const INSTANCES: usize = 2048;
    let text = format!(
        "[host]\nkeep-free = []\n[service.db]\ncommand = [\"/bin/db\"]\ninstances = {INSTANCES}\n\
         share-nodes = \"always\"\nmemory = \"16MiB\"\n"
    );
    let plan = plan_text(&topology("xeon-e5-2682v4.json"), &text, false).unwrap();
    assert_eq!(plan.sharing_groups.len(), 2, "one group a node");
    assert_eq!(
        plan.sharing_groups[0].members.len() + plan.sharing_groups[1].members.len(),
        INSTANCES
    );
    assert_eq!(plan.sharing_group_of("db-1").unwrap().members[..2], ["db-0", "db-1"]);
    assert_eq!(
        reasons(&plan, "db-0")[0],
        "shares node 0 and its CPUs with db-1, db-2, db-3, db-4, db-5 and 1018 more \
         (share-nodes = \"always\": sharing instances spread evenly over the nodes they may use)"
    );
    // A few hundred bytes an instance (its reasons, its CPUs, its name in its group), not the
    // names of the 1,023 others (about 12 KiB each).
    let json = serde_json::to_string(&plan).unwrap();
    assert!(json.len() < INSTANCES * 1024, "{} bytes for {INSTANCES} instances", json.len());
}
