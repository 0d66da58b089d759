//! The steering decision on the 4-node guest's machine (tests/common): where every interrupt
//! goes, the RPS and XPS masks, what irqbalance must avoid, and what cannot be moved.

mod common;

use common::{cpus, interrupts, owner, plan, topology};
use pinctl_config::ServiceInterrupts;
use pinctl_irq::decide::queue_of;
use pinctl_irq::{SteerInputs, Why, decide};

#[test]
fn the_kept_free_nic_s_queues_go_to_its_node_one_cpu_each_and_nothing_movable_stays_on_quiet_cpus()
{
    let t = topology();
    let d = decide(&t, &t.interrupts, &plan());
    assert_eq!(d.quiet_cpus, cpus("0-4"));
    for q in 0..8u32 {
        let target = d.target(35 + q).unwrap();
        assert_eq!(target.to, cpus(if q % 2 == 0 { "6" } else { "7" }), "eth0-rxtx-{q}");
        assert_eq!(target.why, Why::KeptFreeNic { interface: "eth0".into() });
    }
    assert_eq!(d.target(43).unwrap().to, cpus("6-7"), "the event vector gets the whole node");
    assert_eq!(d.pinned_irqs(), (35..=43).collect::<Vec<_>>());
    // The movable admin queue of node 1's drive: node 1 is all quiet, so the nearest free CPUs
    // (nodes 2 and 3, both at 32; node 0 is quiet too).
    assert_eq!(d.target(26).unwrap().to, cpus("5-7"));
    assert_eq!(d.target(0).unwrap().to, cpus("5-7"), "timer: 0-7 less the quiet CPUs");
    assert_eq!(d.target(1).unwrap().to, cpus("5-7"), "i8042 on node 0: nearest free CPUs");
    for t in &d.irqs {
        assert!(t.to.is_disjoint(&d.quiet_cpus), "IRQ {} to {}", t.irq, t.to);
    }
    // Managed NVMe queues spread by the kernel: those on quiet CPUs stay, said.
    let unmovable: Vec<u32> = d.unmovable.iter().map(|u| u.irq).collect();
    assert_eq!(unmovable, vec![27, 28, 29, 33, 34]);
    assert!(d.target(30).is_none() && d.target(27).is_none(), "managed queues are never written");
    // RPS of every receive queue names the node's CPUs; XPS gives each transmit queue one.
    let rps: Vec<_> = d.queues.iter().filter(|q| q.rx).collect();
    assert_eq!(rps.len(), 8);
    assert!(rps.iter().all(|q| q.to == cpus("6-7")));
    let xps: Vec<String> = d.queues.iter().filter(|q| !q.rx).map(|q| q.to.to_string()).collect();
    assert_eq!(xps, ["6", "7", "6", "7", "6", "7", "6", "7"]);
    assert!(d.notes.is_empty(), "{:?}", d.notes);
}

#[test]
fn an_interrupt_already_off_quiet_cpus_is_not_governed() {
    let t = topology();
    let mut i = interrupts();
    i.irqs.iter_mut().find(|q| q.irq == 0).unwrap().affinity = Some(cpus("6"));
    let d = decide(&t, &i, &plan());
    assert!(d.target(0).is_none());
}

#[test]
fn a_nic_queues_service_takes_its_nic_s_queues_on_its_own_cpus() {
    let t = topology();
    let mut inputs = plan();
    inputs.owners.push(owner("lb", "lb", "5-7", ServiceInterrupts::NicQueues, &["eth0"]));
    let d = decide(&t, &t.interrupts, &inputs);
    assert_eq!(d.quiet_cpus, cpus("0-4"), "its CPUs are not kept quiet");
    let to: Vec<String> = (35..=42).map(|n| d.target(n).unwrap().to.to_string()).collect();
    assert_eq!(to, ["5", "6", "7", "5", "6", "7", "5", "6"]);
    assert!(
        matches!(&d.target(35).unwrap().why, Why::NicQueues { instances, .. } if instances == &["lb".to_string()])
    );
    assert!(d.notes.iter().any(|n| n.contains("kept free") && n.contains("lb")), "{:?}", d.notes);
}

#[test]
fn a_kept_free_node_given_to_services_sends_the_queues_to_the_nearest_free_cpus() {
    let t = topology();
    let mut inputs = plan();
    inputs.owners.push(owner("big", "big", "6-7", ServiceInterrupts::Quiet, &[]));
    let d = decide(&t, &t.interrupts, &inputs);
    assert_eq!(d.target(35).unwrap().to, cpus("5"), "node 2 (12 away) has CPU 5 free");
    assert!(d.notes.iter().any(|n| n.contains("nearest free CPUs, 5")), "{:?}", d.notes);
}

#[test]
fn with_every_cpu_quiet_nothing_is_steered_and_irqbalance_is_not_told() {
    let t = topology();
    let inputs = SteerInputs {
        owners: vec![owner("all", "all", "0-7", ServiceInterrupts::Quiet, &[])],
        kept_free_nics: vec!["eth0".into()],
    };
    let d = decide(&t, &t.interrupts, &inputs);
    assert!(d.irqs.is_empty() && d.queues.is_empty() && d.quiet_cpus.is_empty());
    assert!(d.notes[0].contains("no CPU is left for interrupts"), "{:?}", d.notes);
}

#[test]
fn without_instances_nothing_is_quiet_and_only_the_nic_is_placed() {
    let t = topology();
    let d = decide(
        &t,
        &t.interrupts,
        &SteerInputs { owners: vec![], kept_free_nics: vec!["eth0".into()] },
    );
    assert!(d.quiet_cpus.is_empty());
    assert!(d.irqs.iter().all(|t| t.why.pinned()));
    assert!(d.unmovable.is_empty());
}

#[test]
fn queue_numbers_from_the_drivers_names() {
    for (name, q) in [
        ("eth0-TxRx-3", Some(3)),
        ("eth0-rxtx-12", Some(12)),
        ("virtio2-input.0", Some(0)),
        ("virtio2-output.7", Some(7)),
        ("mlx5_comp5@pci:0000:41:00.0", Some(5)),
        ("bnxt_en-fp-2", Some(2)),
        ("eth0", None),
        ("eth0-event-8", None),
        ("virtio2-config", None),
        ("mlx5_async0@pci:0000:41:00.0", None),
    ] {
        assert_eq!(queue_of(name), q, "{name}");
    }
}

#[test]
fn fewer_transmit_queues_than_cpus_share_them_out() {
    let mut t = topology();
    t.interrupts.net_queues[0].tx.truncate(2);
    // Node 3 and node 2's CPU 5 for a NIC whose service took node 3.
    let mut inputs = plan();
    inputs.owners.retain(|o| o.instance != "web");
    let d = decide(&t, &t.interrupts, &inputs);
    let xps: Vec<String> = d.queues.iter().filter(|q| !q.rx).map(|q| q.to.to_string()).collect();
    assert_eq!(xps, ["6", "7"]);
    let mut t2 = topology();
    t2.interrupts.net_queues[0].tx.truncate(3);
    inputs.owners.push(owner("lb", "lb", "0-7", ServiceInterrupts::NicQueues, &["eth0"]));
    let d = decide(&t2, &t2.interrupts, &inputs);
    let xps: Vec<String> = d.queues.iter().filter(|q| !q.rx).map(|q| q.to.to_string()).collect();
    assert_eq!(xps, ["0,3,6", "1,4,7", "2,5"], "every CPU sends through one queue");
}

#[test]
fn what_plan_reports_as_landing_on_service_cpus() {
    let t = topology();
    let landing = pinctl_irq::landing::on_service_cpus(&t, &plan(), true);
    let of = |inst: &str| -> Vec<(u32, String)> {
        landing.iter().filter(|l| l.instance == inst).map(|l| (l.irq, l.steering.clone())).collect()
    };
    // db-0 (CPUs 0-1): the timer, i8042 and nvme0q0 (effective on 0), nvme0q7/q8 (managed, on
    // 0 and 1), every NIC vector (effective on CPU 0, the first of 0-7).
    let db0 = of("db-0");
    let numbers: Vec<u32> = db0.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [0, 1, 26, 33, 34].into_iter().chain(35..=43).collect::<Vec<_>>());
    assert!(db0.contains(&(0, "moved".into())));
    assert!(db0.contains(&(33, "stays (managed by the kernel)".into())));
    assert!(db0.contains(&(35, "moved".into())));
    // db-1 (CPUs 2-3): nvme0q1 and q2, which the kernel spread there.
    assert_eq!(
        of("db-1"),
        vec![
            (27, "stays (managed by the kernel)".into()),
            (28, "stays (managed by the kernel)".into())
        ]
    );
    let off = pinctl_irq::landing::on_service_cpus(&t, &plan(), false);
    assert!(off.iter().all(|l| l.steering == "steering is off"));
    let l = landing.iter().find(|l| l.irq == 35 && l.instance == "db-0").unwrap();
    assert_eq!(
        (l.devices.clone(), l.on_cpus.to_string(), l.fired),
        (vec!["eth0".to_string()], "0".to_string(), 10)
    );
}

#[test]
fn an_interrupt_steering_moved_is_judged_by_its_allowed_affinity() {
    // Steered to CPU 6, the timer has not fired since: its effective affinity still says 0.
    let mut t = topology();
    let timer = t.interrupts.irqs.iter_mut().find(|q| q.irq == 0).unwrap();
    timer.affinity = Some(cpus("6"));
    timer.effective_affinity = Some(cpus("0"));
    let landing = pinctl_irq::landing::on_service_cpus(&t, &plan(), true);
    assert!(!landing.iter().any(|l| l.irq == 0), "listed as landing on db-0: {landing:?}");
    // Steering off, where it is delivered is what lands.
    let off = pinctl_irq::landing::on_service_cpus(&t, &plan(), false);
    assert!(off.iter().any(|l| l.irq == 0 && l.instance == "db-0"));
}
