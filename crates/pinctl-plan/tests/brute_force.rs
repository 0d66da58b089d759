//! The planner against exhaustive search: on random small hosts and configs (up to 8 nodes,
//! up to 6 instances, random distances, packages, memory, devices, keep-free and reserved CPUs)
//! the plan has exactly the cost of the best of all feasible assignments, and the planner
//! fails exactly when no assignment is feasible; and every plan's cost, recomputed from its
//! placements as docs/planning.md defines it, is the cost the planner reports. Some cases are
//! re-plans: random instances run somewhere today, so the cost of moving is in the comparison.
//! Services may share nodes (`share-nodes`, with random weights), hosts may allow `cpu-overcommit`
//! and have last-level caches of one or two cores.

use std::collections::BTreeMap;
use std::time::Duration;

use pinctl_config::{
    Config, HostConfig, Instance, InstanceSize, KeepFree, Limits, Overcommit, Service, ShareNodes,
};
use pinctl_plan::{Cost, Load, PlanError, PlanInputs, PlannedInstance, Problem};
use pinctl_testkit::{GIB, SyntheticTopology};
use pinctl_topology::{CpuSet, DeviceKind, MemoryPolicy, NodeSet, Placement, Topology};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    topology: Topology,
    config: Config,
    inputs: PlanInputs,
}

#[derive(Debug, Clone)]
struct NodeSpec {
    cpus: u32,
    memory_gib: Option<u64>,
    package: u32,
}

#[derive(Debug, Clone)]
struct ServiceSpec {
    size: InstanceSize,
    share: ShareNodes,
    weight: u32,
    memory_gib: u64,
    policy: MemoryPolicy,
    only_nodes: Option<Vec<bool>>,
    near: Vec<Option<usize>>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (prop_oneof![9 => 1u32..=4, 1 => Just(0u32)], prop::option::weighted(0.9, 2u64..=16), 0u32..2)
        .prop_map(|(cpus, memory_gib, package)| NodeSpec { cpus, memory_gib, package })
}

fn service_spec(max_nodes: usize, max_instances: usize) -> impl Strategy<Value = ServiceSpec> {
    (
        prop_oneof![
            (1u32..=2).prop_map(|n| (InstanceSize::Nodes(n), ShareNodes::Never)),
            (1u32..=6).prop_map(|c| (InstanceSize::Cpus(c), ShareNodes::Never)),
            prop_oneof![Just(ShareNodes::WhenNeeded), Just(ShareNodes::Always)]
                .prop_map(|share| (InstanceSize::Nodes(1), share)),
        ],
        prop_oneof![3 => Just(1u32), 1 => 2u32..=3],
        prop_oneof![Just(0u64), 1u64..=6],
        prop_oneof![
            Just(MemoryPolicy::Bind),
            Just(MemoryPolicy::Preferred),
            Just(MemoryPolicy::Interleave)
        ],
        prop::option::weighted(0.2, prop::collection::vec(any::<bool>(), max_nodes)),
        prop::collection::vec(prop::option::weighted(0.5, 0usize..4), 1..=max_instances),
    )
        .prop_map(|((size, share), weight, memory_gib, policy, only_nodes, near)| {
            ServiceSpec { size, share, weight, memory_gib, policy, only_nodes, near }
        })
}

/// Small cases for the brute force: up to 8 nodes and 6 instances.
fn case() -> impl Strategy<Value = Case> {
    case_sized(8, 3, 3, 6)
}

/// Random hosts of 3 to `max_nodes` nodes and configs of up to `max_services` services of up to
/// `per_service` instances, `max_total` instances in all.
fn case_sized(
    max_nodes: usize,
    max_services: usize,
    per_service: usize,
    max_total: usize,
) -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(node_spec(), 3..=max_nodes),
        prop::collection::vec(11u32..=40, max_nodes * (max_nodes - 1) / 2),
        prop::collection::vec(prop::option::weighted(0.85, 0usize..max_nodes), 4),
        prop::collection::vec(service_spec(max_nodes, per_service), 1..=max_services),
        prop::collection::vec(any::<bool>(), max_nodes),
        prop_oneof![Just(None), Just(Some(0usize)), Just(Some(3usize))],
        0u32..2,
        prop::option::weighted(0.2, (any::<u32>(), any::<u8>())),
        prop::collection::vec(
            prop::option::weighted(0.4, (0..max_nodes, prop::option::of(0..max_nodes))),
            max_total,
        ),
        prop_oneof![3 => Just(None), 1 => Just(Some(150u32)), 1 => Just(Some(200u32))],
        1u32..=2,
    )
        .prop_map(
            move |(
                nodes,
                distances,
                devices,
                services,
                keep,
                nic,
                reserve,
                cpuset,
                now,
                overcommit,
                cores_per_cache,
            )| {
                let mut case =
                    build_case(nodes, distances, devices, services, keep, nic, reserve, max_total);
                case.config.host.cpu_overcommit = overcommit.and_then(Overcommit::from_hundredths);
                // Last-level caches of one or two cores (pairs of CPUs are cores).
                let t = &mut case.topology;
                let mut caches: std::collections::BTreeMap<u32, CpuSet> = Default::default();
                for c in &t.cpus {
                    caches.entry(c.id / (2 * cores_per_cache)).or_default().insert(c.id);
                }
                t.caches = caches
                    .into_values()
                    .map(|cpus| pinctl_topology::Cache { level: 3, cpus, size_bytes: None })
                    .collect();
                running_today(&mut case, &now);
                // The process's cpuset: random CPUs (of the first 32) and memory nodes.
                if let Some((cpus, mems)) = cpuset {
                    let host = &mut case.topology.host;
                    host.allowed_cpus = Some((0..32).filter(|c| cpus & (1 << c) != 0).collect());
                    host.allowed_nodes = Some((0..8).filter(|n| mems & (1 << n) != 0).collect());
                }
                case
            },
        )
}

#[allow(clippy::too_many_arguments)]
fn build_case(
    node_specs: Vec<NodeSpec>,
    distances: Vec<u32>,
    device_nodes: Vec<Option<usize>>,
    services: Vec<ServiceSpec>,
    keep: Vec<bool>,
    nic: Option<usize>,
    reserve: u32,
    max_total: usize,
) -> Case {
    let n = node_specs.len();
    let mut host = SyntheticTopology::new();
    let mut next_cpu = 0;
    for spec in &node_specs {
        let set: CpuSet = (next_cpu..next_cpu + spec.cpus).collect();
        next_cpu += spec.cpus;
        host = host.node(set, spec.package, spec.memory_gib.map(|g| g * GIB));
    }
    // Pair (i, j), i < j, takes the next random distance, row by row.
    let pair_index = |i: usize, j: usize| i * (2 * n - i - 1) / 2 + (j - i - 1);
    let matrix: Vec<Vec<u32>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| match i.cmp(&j) {
                    std::cmp::Ordering::Equal => 10,
                    std::cmp::Ordering::Less => distances[pair_index(i, j)],
                    std::cmp::Ordering::Greater => distances[pair_index(j, i)],
                })
                .collect()
        })
        .collect();
    // Pairs of CPUs share a core, so whole-core allocation is exercised.
    host = host.cores(|c| c / 2).distance_matrix(matrix);
    let names = ["eth0", "nvme0n1", "nvme1n1", "eth1"];
    for (d, node) in device_nodes.iter().enumerate() {
        let kind = if names[d].starts_with("eth") { DeviceKind::Nic } else { DeviceKind::Nvme };
        host = host.device(names[d], kind, node.filter(|&x| x < n).map(|x| x as u32));
    }
    let topology = host.build();

    let mut total = 0;
    let mut config_services = Vec::new();
    let mut near_map = BTreeMap::new();
    for (s, spec) in services.iter().enumerate() {
        let count = spec.near.len().min(max_total - total);
        if count == 0 {
            break;
        }
        total += count;
        let name = format!("s{s}");
        let instances = (0..count)
            .map(|i| {
                let near: Vec<String> = match spec.near[i] {
                    Some(d) if d < 3 => vec![names[d].to_string()],
                    Some(_) => vec![format!("/data{i}")],
                    None => vec![],
                };
                for spec in &near {
                    let resolved = if spec.starts_with('/') { vec![] } else { vec![spec.clone()] };
                    near_map.insert(spec.clone(), resolved);
                }
                Instance {
                    name: if count == 1 { name.clone() } else { format!("{name}-{i}") },
                    index: i as u32,
                    command: vec!["/bin/true".into()],
                    near,
                    unit: None,
                    working_dir: None,
                    env: BTreeMap::new(),
                    output: None,
                }
            })
            .collect();
        config_services.push(Service {
            name,
            size: spec.size,
            memory: (spec.memory_gib > 0).then_some(spec.memory_gib * GIB),
            memory_policy: spec.policy,
            only_nodes: spec
                .only_nodes
                .as_ref()
                .map(|mask| (0..n as u32).filter(|&i| mask[i as usize]).collect::<NodeSet>()),
            instances,
            user: None,
            group: None,
            restart: Default::default(),
            stop_signal: "TERM".into(),
            stop_timeout: Duration::from_secs(10),
            limits: Limits::default(),
            restart_delay: pinctl_config::DEFAULT_RESTART_DELAY,
            restart_max_delay: pinctl_config::DEFAULT_RESTART_MAX_DELAY,
            start_limit: None,
            enforce: None,
            share_nodes: spec.share,
            share_weight: spec.weight,
        });
    }
    let keep_free = match nic {
        None => Some((0..n as u32).filter(|&i| keep[i as usize]).map(KeepFree::Node).collect()),
        Some(_) if keep[0] => None,
        Some(d) => Some(vec![KeepFree::Nic(names[d].to_string())]),
    };
    let host = HostConfig {
        keep_free,
        reserve_cpus: (0..reserve).collect(),
        memory_reserve: None,
        ..HostConfig::default()
    };
    let config = Config::new("random.toml", host, config_services);
    let inputs = PlanInputs {
        near: near_map,
        default_keep_free: nic.map(|d| names[d].to_string()).into_iter().collect(),
        strict: false,
        current: BTreeMap::new(),
        reported_near: Default::default(),
    };
    Case { topology, config, inputs }
}

/// Where some instances run today (a re-plan): `now[k]` puts the k-th instance on one or two
/// random nodes (some outside the topology, some not of its size: it must move) and the
/// lowest CPUs of those nodes that its size asks for.
fn running_today(case: &mut Case, now: &[Option<(usize, Option<usize>)>]) {
    let instances: Vec<(InstanceSize, String)> =
        case.config.instances().map(|(s, i)| (s.size, i.name.clone())).collect();
    for ((size, name), at) in instances.iter().zip(now) {
        let Some((a, b)) = at else { continue };
        let nodes: NodeSet = [*a as u32].into_iter().chain(b.map(|b| b as u32)).collect();
        let mut cpus: Vec<u32> = case.topology.cpus_of(&nodes).iter().collect();
        if let InstanceSize::Cpus(c) = size {
            cpus.truncate(*c as usize);
        }
        let cpus = cpus.into_iter().collect();
        // Only where it runs counts for the planner: the policy is the service's.
        let memory_nodes = nodes.clone();
        let placement = Placement { nodes, cpus, memory_policy: MemoryPolicy::Bind, memory_nodes };
        case.inputs.current.insert(name.clone(), placement);
    }
}

/// The best cost over every assignment of node subsets to instances, by exhaustive search:
/// each instance's valid shapes alone, then every combination that stays feasible.
fn brute_force(problem: &Problem) -> Option<Cost> {
    let m = problem.instance_count();
    let n = problem.node_count();
    let mut shapes: Vec<Vec<Vec<usize>>> = Vec::new();
    for i in 0..m {
        let mut mine = Vec::new();
        for mask in 1u32..1 << n {
            let set: Vec<usize> = (0..n).filter(|b| mask & (1 << b) != 0).collect();
            let mut alone = vec![None; m];
            alone[i] = Some(set.clone());
            if problem.evaluate(&alone).is_some() {
                mine.push(set);
            }
        }
        shapes.push(mine);
    }
    let mut best = None;
    let mut assignment = vec![None; m];
    descend(problem, &shapes, 0, &mut assignment, &mut best);
    best
}

fn descend(
    problem: &Problem,
    shapes: &[Vec<Vec<usize>>],
    i: usize,
    assignment: &mut Vec<Option<Vec<usize>>>,
    best: &mut Option<Cost>,
) {
    if i == shapes.len() {
        let cost = problem.evaluate(assignment).expect("checked at every level");
        if best.as_ref().is_none_or(|b| cost < *b) {
            *best = Some(cost);
        }
        return;
    }
    for set in &shapes[i] {
        assignment[i] = Some(set.clone());
        if problem.evaluate(assignment).is_some() {
            descend(problem, shapes, i + 1, assignment, best);
        }
    }
    assignment[i] = None;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn plan_has_the_brute_force_optimum_cost(case in case()) {
        let result = pinctl_plan::plan(&case.topology, &case.config, &case.inputs);
        let problem = Problem::new(&case.topology, &case.config, &case.inputs);
        match (result, problem) {
            (Ok(plan), Ok(problem)) => {
                prop_assert!(plan.optimal, "small cases are searched exhaustively");
                let best = brute_force(&problem);
                prop_assert_eq!(Some(&plan.cost), best.as_ref());
                check_invariants(&case, &plan)?;
                check_cost_as_documented(&case, &plan)?;
            }
            (Err(PlanError::Infeasible { .. }), Ok(problem)) => {
                prop_assert_eq!(brute_force(&problem), None);
            }
            (Err(e @ (PlanError::Infeasible { .. } | PlanError::BindTooSmall { .. })), Err(e2)) => {
                prop_assert_eq!(e, e2, "preparation fails the same way");
            }
            (result, problem) => {
                prop_assert!(false, "unexpected: {:?} / {:?}", result.err(), problem.err());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Larger hosts (up to 16 nodes, 24 instances), where brute force is out of reach: the
    /// hard rules hold, the reported cost is the cost of the plan, and planning twice gives
    /// the same bytes.
    #[test]
    fn larger_plans_keep_the_hard_rules_and_are_deterministic(case in case_sized(16, 4, 6, 24)) {
        let first = pinctl_plan::plan(&case.topology, &case.config, &case.inputs);
        let again = pinctl_plan::plan(&case.topology, &case.config, &case.inputs);
        prop_assert_eq!(&first, &again);
        if let Ok(plan) = first {
            check_invariants(&case, &plan)?;
            check_cost_as_documented(&case, &plan)?;
            let problem = Problem::new(&case.topology, &case.config, &case.inputs).unwrap();
            let index = |id: u32| case.topology.node_index(id).unwrap();
            let assignment: Vec<Option<Vec<usize>>> = plan
                .placements
                .iter()
                .map(|p| Some(p.placement.nodes.iter().map(index).collect()))
                .collect();
            prop_assert_eq!(problem.evaluate(&assignment), Some(plan.cost.clone()));
            prop_assert_eq!(
                serde_json::to_string(&plan).unwrap(),
                serde_json::to_string(&again.unwrap()).unwrap()
            );
        }
    }
}

/// Whether an instance of `service` shares its node's CPUs (`share-nodes`).
fn sharing(service: &Service) -> bool {
    service.size == InstanceSize::Nodes(1) && service.share_nodes.shares()
}

fn check_invariants(case: &Case, plan: &pinctl_plan::Plan) -> Result<(), TestCaseError> {
    let t = &case.topology;
    let overcommit = case.config.host.cpu_overcommit.unwrap_or(Overcommit::NONE);
    // How many instances each CPU is given to: owners and sharing instances apart.
    let mut owned = CpuSet::new();
    let mut uses: std::collections::BTreeMap<u32, u32> = Default::default();
    let placed: Vec<(&PlannedInstance, &Service)> =
        plan.placements.iter().zip(case.config.instances().map(|(s, _)| s)).collect();
    for (p, service) in &placed {
        let owns = !sharing(service)
            && (matches!(service.size, InstanceSize::Nodes(_)) || p.placement.nodes.len() > 1);
        if owns {
            prop_assert!(
                p.placement.cpus.is_disjoint(&owned),
                "{} shares an owned CPU",
                p.instance
            );
            owned = owned.union(&p.placement.cpus);
        } else if !sharing(service) {
            for c in p.placement.cpus.iter() {
                *uses.entry(c).or_default() += 1;
            }
        }
    }
    let most = overcommit.hundredths().div_ceil(100);
    for (cpu, n) in &uses {
        prop_assert!(
            !owned.contains(*cpu),
            "CPU {} of an owned node given to a `cpus` instance",
            cpu
        );
        prop_assert!(
            *n <= most,
            "CPU {} given to {} instances, cpu-overcommit {}",
            cpu,
            n,
            overcommit
        );
    }
    for (p, service) in &placed {
        let usable_of = |nodes: &NodeSet| {
            let mut usable = t.cpus_of(nodes).difference(&case.config.host.reserve_cpus);
            if let Some(allowed) = &t.host.allowed_cpus {
                usable = usable.intersection(allowed);
            }
            usable
        };
        if sharing(service) {
            // The node's usable CPUs but those of the `cpus = N` instances there, which then
            // have CPUs of their own.
            let held: CpuSet = placed
                .iter()
                .filter(|(o, s)| o.placement.nodes == p.placement.nodes && !sharing(s))
                .fold(CpuSet::new(), |a, (o, _)| a.union(&o.placement.cpus));
            prop_assert!(uses.keys().filter(|c| held.contains(**c)).all(|c| uses[c] == 1));
            prop_assert!(held.is_disjoint(&owned));
            prop_assert_eq!(
                &p.placement.cpus,
                &usable_of(&p.placement.nodes).difference(&held),
                "{}",
                p.instance
            );
            prop_assert!(!p.placement.cpus.is_empty());
        }
    }
    for (p, (service, _)) in plan.placements.iter().zip(case.config.instances()) {
        prop_assert!(p.placement.cpus.is_subset(&t.cpus_of(&p.placement.nodes)));
        prop_assert!(p.placement.cpus.is_disjoint(&case.config.host.reserve_cpus));
        if let Some(allowed) = &t.host.allowed_cpus {
            prop_assert!(p.placement.cpus.is_subset(allowed));
        }
        if let Some(allowed) = &t.host.allowed_nodes {
            prop_assert!(p.placement.nodes.is_subset(allowed));
        }
        match service.size {
            InstanceSize::Cpus(c) => prop_assert_eq!(p.placement.cpus.len(), c as usize),
            InstanceSize::Nodes(_) if sharing(service) => {
                prop_assert_eq!(p.placement.nodes.len(), 1)
            }
            InstanceSize::Nodes(k) => {
                prop_assert_eq!(p.placement.nodes.len(), k as usize);
                let mut usable =
                    t.cpus_of(&p.placement.nodes).difference(&case.config.host.reserve_cpus);
                if let Some(allowed) = &t.host.allowed_cpus {
                    usable = usable.intersection(allowed);
                }
                prop_assert_eq!(&p.placement.cpus, &usable);
            }
        }
        if let Some(only) = &service.only_nodes {
            prop_assert!(p.placement.nodes.is_subset(only));
        }
    }
    Ok(())
}

/// The plan's reported cost, field by field, recomputed from its placements as
/// docs/planning.md defines each field, without `Problem`: the brute force above takes
/// `Problem::evaluate` as the definition, so this checks that definition itself. (Memory
/// overflow depends on the reserve arithmetic and is left to the seed and rule tests.)
fn check_cost_as_documented(case: &Case, plan: &pinctl_plan::Plan) -> Result<(), TestCaseError> {
    let (t, host) = (&case.topology, &case.config.host);
    let device_nodes = |name: &str| t.device(name).map(|d| d.nodes.clone()).unwrap_or_default();
    let usable = |j: u32| {
        let mut cpus = t.cpus_of(&NodeSet::from_iter([j])).difference(&host.reserve_cpus);
        if let Some(allowed) = &t.host.allowed_cpus {
            cpus = cpus.intersection(allowed);
        }
        cpus.len() as u64
    };
    let kept_free: NodeSet = match &host.keep_free {
        Some(entries) => entries
            .iter()
            .map(|e| match e {
                KeepFree::Node(j) => NodeSet::from_iter([*j]),
                KeepFree::Nic(name) => device_nodes(name),
            })
            .fold(NodeSet::new(), |a, b| a.union(&b)),
        None => case
            .inputs
            .default_keep_free
            .iter()
            .fold(NodeSet::new(), |a, name| a.union(&device_nodes(name))),
    };
    // Keeping every node free keeps none (docs/planning.md, rule 3).
    let kept_free = if kept_free.len() == t.nodes.len() { NodeSet::new() } else { kept_free };

    let n = t.nodes.len() as u32;
    let mut owned = vec![false; n as usize];
    let mut shared = vec![0u64; n as usize];
    let mut occupied = vec![false; n as usize];
    let mut occupants = vec![0u64; n as usize];
    let mut alone_first = vec![0u64; n as usize];
    let mut weights = vec![0u64; n as usize];
    let mut sharers = vec![false; n as usize];
    let mut sharing_memory = vec![0u64; n as usize];
    let package = |j: u32| t.cpus.iter().find(|c| c.node == Some(j))?.package;
    let mut want = Cost {
        memory_overflow: plan.cost.memory_overflow,
        shared_instances: 0,
        near_misses: 0,
        near_distance: 0,
        kept_free_used: 0,
        kept_free_cpus: 0,
        node_count: 0,
        cross_package_pairs: 0,
        node_distance: 0,
        moved: 0,
        spread: Vec::new(),
        tie_break: Vec::new(),
    };
    for (p, (service, instance)) in plan.placements.iter().zip(case.config.instances()) {
        let ids: Vec<u32> = p.placement.nodes.iter().collect();
        for entry in &instance.near {
            let target = case
                .inputs
                .near
                .get(entry)
                .into_iter()
                .flatten()
                .fold(NodeSet::new(), |a, d| a.union(&device_nodes(d)));
            if !target.is_empty() && p.placement.nodes.is_disjoint(&target) {
                want.near_misses += 1;
                let closest = ids.iter().flat_map(|&a| target.iter().map(move |b| (a, b)));
                want.near_distance += closest
                    .map(|(a, b)| u64::from(t.distances[a as usize][b as usize]))
                    .min()
                    .unwrap_or(0);
            }
        }
        let now = case.inputs.current.get(&p.instance);
        want.moved += u64::from(now.is_some_and(|now| now.nodes != p.placement.nodes));
        want.node_count += ids.len() as u64;
        for (k, &a) in ids.iter().enumerate() {
            for &b in &ids[k + 1..] {
                if let (Some(pa), Some(pb)) = (package(a), package(b)) {
                    want.cross_package_pairs += u64::from(pa != pb);
                }
                want.node_distance += u64::from(t.distances[a as usize][b as usize]);
            }
        }
        let owns =
            !sharing(service) && (matches!(service.size, InstanceSize::Nodes(_)) || ids.len() > 1);
        for &j in &ids {
            let j = j as usize;
            occupied[j] = true;
            occupants[j] += 1;
            if owns {
                owned[j] = true;
            } else if sharing(service) {
                sharers[j] = true;
                weights[j] += u64::from(service.share_weight);
                sharing_memory[j] += service.memory.unwrap_or(0);
                alone_first[j] += u64::from(service.share_nodes == ShareNodes::WhenNeeded);
            } else {
                shared[j] += p.placement.cpus.len() as u64;
            }
        }
        want.tie_break.push(ids);
    }
    let load = |j: u32| if owned[j as usize] { usable(j) } else { shared[j as usize] };
    let used_kept_free: Vec<u32> = kept_free.iter().filter(|&j| occupied[j as usize]).collect();
    want.kept_free_used = used_kept_free.len() as u64;
    // Sharing instances get every CPU of a node that `cpus` instances leave: it counts whole.
    let whole = |j: u32| if sharers[j as usize] { usable(j) } else { load(j) };
    want.kept_free_cpus = used_kept_free.iter().map(|&j| whole(j)).sum();
    // Instances that wanted a node of their own, beyond the first instance of each node.
    want.shared_instances =
        (0..n as usize).map(|j| alone_first[j].min(occupants[j].saturating_sub(1))).sum();
    let load = |j: u32| load(j) + weights[j as usize];
    let placeable =
        |j: &u32| usable(*j) > 0 && t.host.allowed_nodes.as_ref().is_none_or(|a| a.contains(*j));
    // A node's load is the larger of its CPU share and the share of its memory (MemTotal less
    // the 2% reserve, in whole MiB) its sharing instances expect (in MiB rounded up).
    let memory_share = |j: u32| {
        let total = t.node(j)?.memory_bytes?;
        let expected = sharing_memory[j as usize];
        (expected > 0).then(|| Load {
            used: expected.div_ceil(1 << 20) as u32,
            capacity: (((total - total / 50) >> 20) as u32).max(1),
        })
    };
    want.spread = (0..n)
        .filter(placeable)
        .map(|j| {
            let cpus = Load { used: load(j) as u32, capacity: usable(j) as u32 };
            match memory_share(j) {
                Some(memory) if !owned[j as usize] => cpus.max(memory),
                _ => cpus,
            }
        })
        .collect();
    want.spread.sort_by(|a, b| b.cmp(a));
    prop_assert_eq!(&plan.cost, &want);
    Ok(())
}
