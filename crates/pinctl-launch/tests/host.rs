//! One host, one plan ([`pinctl_launch::Host`]): the service files of a host planned together
//! on the bundled 8-node EPYC (NPS4: 8 nodes of 16 CPUs, nvme0n1 on node 2, nvme1n1 on node
//! 6, eth0 on node 5): no CPU given twice, each `nodes = 1` instance alone on its node, the
//! NVMe and keep-free rules held across files, the same placements whatever the order of the
//! files, disagreements and clashes refused naming both files, a reload of one file moving
//! nobody of another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_config::Config;
use pinctl_launch::{Host, LaunchError};
use pinctl_plan::Plan;
use pinctl_sysfs::{LoadedTopology, TopologySource};
use pinctl_topology::Placement;
use proptest::prelude::*;

fn epyc() -> LoadedTopology {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/topologies/epyc-nps4.json");
    let source = TopologySource::from_arg(Some(&path)).unwrap();
    pinctl_capture::load_topology(&source).unwrap()
}

fn config(path: &str, text: &str) -> Config {
    pinctl_config::parse(Path::new(path), text).unwrap()
}

const DB: &str = include_str!("../../../tests/fixtures/host/db.toml");

const CACHE: &str = include_str!("../../../tests/fixtures/host/cache.toml");

const WORKERS: &str = include_str!("../../../tests/fixtures/host/workers.toml");

/// The database, cache and workers files of one host.
fn files() -> Vec<Config> {
    vec![
        config("/etc/pinctl/db.toml", DB),
        config("/etc/pinctl/cache.toml", CACHE),
        config("/etc/pinctl/workers.toml", WORKERS),
    ]
}

fn host(configs: Vec<Config>) -> Result<Host, LaunchError> {
    Host::check(configs, epyc(), false)
}

fn placements(plan: &Plan) -> BTreeMap<String, Placement> {
    plan.placements.iter().map(|p| (p.instance.clone(), p.placement.clone())).collect()
}

#[test]
fn the_files_of_a_host_share_its_nodes_and_cpus() {
    let host = host(files()).unwrap();
    let plan = host.plan().unwrap();
    assert_eq!(plan.placements.len(), 9);
    // No CPU is given twice, whichever file the instances come from.
    for (k, a) in plan.placements.iter().enumerate() {
        for b in &plan.placements[k + 1..] {
            let both = a.placement.cpus.intersection(&b.placement.cpus);
            assert!(both.is_empty(), "{} and {} share CPUs {both}", a.instance, b.instance);
        }
    }
    // Each `nodes = 1` instance (MariaDB and Redis) has its node to itself.
    for owner in plan.placements.iter().filter(|p| !p.service.starts_with("worker")) {
        for other in plan.placements.iter().filter(|p| p.instance != owner.instance) {
            let both = owner.placement.nodes.intersection(&other.placement.nodes);
            assert!(both.is_empty(), "{} is on {}'s node {both}", other.instance, owner.instance);
        }
    }
    // The NVMe rule of the database file, and its keep-free (the NIC's node 5) for every file.
    assert_eq!(plan.instance("mariadb-0").unwrap().placement.nodes.to_string(), "2");
    assert_eq!(plan.instance("mariadb-1").unwrap().placement.nodes.to_string(), "6");
    for p in &plan.placements {
        assert!(!p.placement.nodes.contains(5), "{} is on the NIC's node 5", p.instance);
    }
    assert_eq!(plan.kept_free_nodes.to_string(), "5");
}

#[test]
fn a_file_planned_alone_would_take_the_nodes_another_file_holds() {
    // What each supervisor did before a host was planned as one: both on node 0.
    let db = Host::check(vec![files().remove(0)], epyc(), false).unwrap().plan().unwrap();
    let cache = Host::check(vec![files().remove(1)], epyc(), false).unwrap().plan().unwrap();
    let alone_db: Vec<String> =
        db.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    let alone_cache: Vec<String> =
        cache.placements.iter().map(|p| p.placement.nodes.to_string()).collect();
    assert!(alone_cache.iter().any(|n| alone_db.contains(n)), "{alone_db:?} {alone_cache:?}");
    // Together, they do not meet.
    let joint = host(files()).unwrap().plan().unwrap();
    let nodes_of = |prefix: &str| -> Vec<String> {
        let of = joint.placements.iter().filter(|p| p.instance.starts_with(prefix));
        of.map(|p| p.placement.nodes.to_string()).collect()
    };
    let (db, cache) = (nodes_of("mariadb"), nodes_of("redis"));
    assert!(cache.iter().all(|n| !db.contains(n)), "{db:?} {cache:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Which file is named first (or whose supervisor starts first) changes nothing.
    #[test]
    fn placements_do_not_depend_on_the_order_of_the_files(
        order in Just(vec![0usize, 1, 2]).prop_shuffle()
    ) {
        let all = files();
        let shuffled: Vec<Config> = order.iter().map(|&k| all[k].clone()).collect();
        let expected = placements(&host(files()).unwrap().plan().unwrap());
        let got = placements(&host(shuffled).unwrap().plan().unwrap());
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn host_wide_settings_that_disagree_are_refused_naming_both_lines() {
    let a = config(
        "/etc/pinctl/a.toml",
        "[host]\ncpu-overcommit = 2\n\n[service.x]\ncommand = [\"/bin/x\"]\ncpus = 1\n",
    );
    let b = config(
        "/etc/pinctl/b.toml",
        "[service.y]\ncommand = [\"/bin/y\"]\ncpus = 1\n\n[host]\ncpu-overcommit = 1.5\n",
    );
    let Err(LaunchError::Rejected { report }) = host(vec![b, a]) else { panic!("not refused") };
    assert!(
        report.contains("`[host] cpu-overcommit` differs from `/etc/pinctl/a.toml:2:1`"),
        "{report}"
    );
    assert!(report.contains("/etc/pinctl/b.toml:6:1"), "{report}");
}

#[test]
fn a_host_wide_setting_one_file_leaves_out_is_the_hosts() {
    let host = host(files()).unwrap();
    for f in &host.files {
        let kept = f.config.host.keep_free.as_ref().map(|k| k.len());
        assert_eq!(kept, Some(1), "{} does not keep eth0 free", f.config.path.display());
    }
}

#[test]
fn services_and_instances_are_named_once_on_a_host() {
    let twin = config("/etc/pinctl/more-cache.toml", CACHE);
    let Err(LaunchError::Rejected { report }) = host(vec![files().remove(1), twin]) else {
        panic!("not refused")
    };
    assert!(
        report.contains("service `redis` is also defined by `/etc/pinctl/cache.toml:2:10`"),
        "{report}"
    );
    assert!(report.contains("/etc/pinctl/more-cache.toml:2:"), "{report}");
    // An instance name another file's service takes: `web-0` of `web`, and a service `web-0`.
    let web = config(
        "/etc/pinctl/web.toml",
        "[service.web]\ncommand = [\"/bin/w\"]\ninstances = 2\ncpus = 1\n",
    );
    let web0 =
        config("/etc/pinctl/web0.toml", "[service.web-0]\ncommand = [\"/bin/w\"]\ncpus = 1\n");
    let Err(LaunchError::Rejected { report }) = host(vec![web, web0]) else {
        panic!("not refused")
    };
    assert!(
        report.contains("instance `web-0` is also defined by `/etc/pinctl/web.toml:1:10`"),
        "{report}"
    );
}

#[test]
fn two_files_of_one_supervisor_name_are_refused() {
    let a = config(
        "/etc/pinctl/a.toml",
        "[host]\nname = \"shared\"\n\n[service.x]\ncommand = [\"/bin/x\"]\ncpus = 1\n",
    );
    let b = config("/srv/pinctl/shared.toml", "[service.y]\ncommand = [\"/bin/y\"]\ncpus = 1\n");
    let Err(LaunchError::Rejected { report }) = host(vec![a, b]) else { panic!("not refused") };
    assert!(report.contains("supervisor `shared` is also the supervisor of"), "{report}");
}

/// Where the cache's supervisor runs its Redis instances: on `nodes`, in order.
fn redis_held_on(host: &Host, nodes: &[u32]) -> BTreeMap<String, Placement> {
    let mut held = BTreeMap::new();
    for (k, node) in nodes.iter().enumerate() {
        let nodes = pinctl_topology::NodeSet::parse_list(&node.to_string()).unwrap();
        let at = Placement {
            cpus: host.joint.loaded.topology.cpus_of(&nodes),
            memory_policy: pinctl_topology::MemoryPolicy::Bind,
            memory_nodes: nodes.clone(),
            nodes,
        };
        held.insert(format!("redis-{k}"), at);
    }
    held
}

#[test]
fn a_reload_of_one_file_moves_nobody_of_another() {
    // The cache's supervisor started before the database file was installed, and runs
    // redis-0 on node 2, where nvme0n1 is: the database file's plan goes around it instead of
    // taking the node (moving a running instance of another supervisor is not its to do).
    let host = host(files()).unwrap();
    let held = redis_held_on(&host, &[2, 1, 3]);
    let after = host.plan_keeping(&BTreeMap::new(), &held).unwrap();
    for (name, at) in &held {
        assert_eq!(after.instance(name).unwrap().placement.nodes, at.nodes, "{name} moved");
    }
    let mariadb = &after.instance("mariadb-0").unwrap().placement;
    assert!(!mariadb.nodes.contains(2), "mariadb-0 took redis-0's node: {}", mariadb.nodes);
    assert!(
        after.warnings.iter().any(|w| w.contains("mariadb-0") && w.contains("nvme0n1")),
        "{:?}",
        after.warnings
    );
    // The files' order, not the pinning, orders the placements.
    let names: Vec<&str> = after.placements.iter().map(|p| p.instance.as_str()).collect();
    assert_eq!(&names[..3], ["redis-0", "redis-1", "redis-2"]);
}

#[test]
fn a_file_that_cannot_fit_names_the_files_and_instances_holding_the_nodes() {
    let db = DB.replace("near = [\"nvme{instance}n1\"]", "only-nodes = [0, 1]");
    let host = host(vec![config("/etc/pinctl/db.toml", &db), files().remove(1)]).unwrap();
    assert!(host.plan().is_ok(), "the host fits when nobody runs yet");
    // The cache runs on the only nodes the database may use.
    let held = redis_held_on(&host, &[0, 1, 3]);
    let err = host.plan_keeping(&BTreeMap::new(), &held).unwrap_err();
    let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(
        text.contains(
            "nodes held by the running instances of other files: `/etc/pinctl/cache.toml`: \
             redis-0 (node 0), redis-1 (node 1), redis-2 (node 3)"
        ),
        "{text}"
    );
    assert!(text.contains("mariadb-"), "{text}");
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_live_host_is_the_files_of_the_folder() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = write(dir.path(), "db.toml", DB);
    write(dir.path(), "cache.toml", CACHE);
    write(dir.path(), "notes.txt", "not a service file");
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.toml")).unwrap();
    let gathered = pinctl_launch::live_files(std::slice::from_ref(&db), &[]);
    assert_eq!(gathered.paths, [db.clone(), dir.path().join("cache.toml")]);
    assert!(gathered.notes.is_empty(), "{:?}", gathered.notes);
    // The file of a supervisor running elsewhere is the host's too; one of the folder named
    // another way is not taken twice.
    let elsewhere = tempfile::tempdir().unwrap();
    let workers = write(elsewhere.path(), "workers.toml", WORKERS);
    let again = dir.path().join("cache-link.toml");
    std::fs::hard_link(dir.path().join("cache.toml"), &again).unwrap();
    let running = [workers.clone(), again.clone()];
    let gathered = pinctl_launch::live_files(std::slice::from_ref(&db), &running);
    assert_eq!(gathered.paths, [db.clone(), workers, again]);
    // A folder others may write: what is in it besides the file may be anyone's.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let gathered = pinctl_launch::live_files(std::slice::from_ref(&db), &[]);
    assert_eq!(gathered.paths, [db]);
    assert!(gathered.notes[0].contains("are not planned with this host"), "{:?}", gathered.notes);
}
