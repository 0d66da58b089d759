//! The probe's loop on a fake machine and a fake clock: it keeps its budget, measures every
//! pair at least once, keeps the best pass, tells its progress in order, gives back its
//! buffer whatever happens, and overruns only when one pass per pair does not fit.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use pinctl_probe::{
    Clock, Event, Labels, Measurer, Prepared, ProbeError, ProbeOptions, ProbePlan, Progress,
    Transfer, run_probe,
};
use pinctl_testkit::{GIB, SyntheticTopology};
use pinctl_topology::{CpuId, CpuSet, NodeId, Topology};

/// A machine whose every operation advances a shared clock by what it would cost.
struct FakeMachine {
    now: Cell<Duration>,
    /// Latency (ns) of a load from CPU node i to memory node j.
    latency_ns: Vec<Vec<f64>>,
    /// The first pass of each pair is this much slower (cold TLB, caches).
    cold_factor: f64,
    /// Read bandwidth from CPU node i to memory node j, bytes per second.
    bandwidth: Vec<Vec<f64>>,
    setup: Duration,
    /// Fixed cost of starting a pass (threads, pinning).
    pass_overhead: Duration,
    buffer: Cell<Option<(NodeId, u64)>>,
    released: Cell<u32>,
    passes_this_pair: Cell<u32>,
    fail_latency_on: Option<NodeId>,
    log: RefCell<Vec<String>>,
}

impl FakeMachine {
    fn new(n: usize) -> FakeMachine {
        let latency_ns = (0..n)
            .map(|i| (0..n).map(|j| if i == j { 80.0 } else { 130.0 + 10.0 * j as f64 }).collect())
            .collect();
        let bandwidth =
            (0..n).map(|i| (0..n).map(|j| if i == j { 20e9 } else { 12e9 }).collect()).collect();
        FakeMachine {
            now: Cell::new(Duration::ZERO),
            latency_ns,
            cold_factor: 1.3,
            bandwidth,
            setup: Duration::from_millis(150),
            pass_overhead: Duration::from_micros(200),
            buffer: Cell::new(None),
            released: Cell::new(0),
            passes_this_pair: Cell::new(0),
            fail_latency_on: None,
            log: RefCell::new(Vec::new()),
        }
    }

    fn advance(&self, d: Duration) {
        self.now.set(self.now.get() + d);
    }
}

impl Clock for FakeMachine {
    fn now(&self) -> Duration {
        self.now.get()
    }
    fn sleep(&mut self, d: Duration) {
        self.now.set(self.now.get() + d);
    }
}

/// The machine behind a `&mut dyn Measurer` while the clock is borrowed too.
struct Hands<'a>(&'a FakeMachine);

impl Measurer for Hands<'_> {
    fn prepare(&mut self, memory: NodeId, bytes: u64) -> Result<Prepared, ProbeError> {
        self.0.advance(self.0.setup);
        self.0.buffer.set(Some((memory, bytes)));
        self.0.log.borrow_mut().push(format!("prepare {memory}"));
        Ok(Prepared { huge_page_bytes: bytes })
    }

    fn latency_pass(
        &mut self,
        node: NodeId,
        _cpu: CpuId,
        loads: u64,
    ) -> Result<Duration, ProbeError> {
        let (memory, _) = self.0.buffer.get().expect("a buffer");
        if self.0.fail_latency_on == Some(node) {
            return Err(ProbeError::Thread { what: "injected".into() });
        }
        let cold = self.0.passes_this_pair.get() == 0;
        self.0.passes_this_pair.set(self.0.passes_this_pair.get() + 1);
        let mut ns = self.0.latency_ns[node as usize][memory as usize];
        if cold {
            ns *= self.0.cold_factor;
        }
        let took = Duration::from_secs_f64(loads as f64 * ns * 1e-9);
        self.0.advance(took + self.0.pass_overhead);
        Ok(took)
    }

    fn bandwidth_pass(
        &mut self,
        node: NodeId,
        cpus: &CpuSet,
        reps: u32,
    ) -> Result<Transfer, ProbeError> {
        let (memory, bytes) = self.0.buffer.get().expect("a buffer");
        assert!(!cpus.is_empty());
        self.0.passes_this_pair.set(0);
        let moved = bytes * u64::from(reps);
        let took = Duration::from_secs_f64(
            moved as f64 / self.0.bandwidth[node as usize][memory as usize],
        );
        self.0.advance(took + self.0.pass_overhead);
        Ok(Transfer { bytes: moved, elapsed: took })
    }

    fn release(&mut self) {
        self.0.buffer.set(None);
        self.0.released.set(self.0.released.get() + 1);
    }
}

#[derive(Default)]
struct Recorded(Vec<(Event, Duration)>);

impl Progress for Recorded {
    fn event(&mut self, event: &Event, elapsed: Duration, _budget: Duration) {
        self.0.push((event.clone(), elapsed));
    }
}

fn topology(n: u32) -> Topology {
    let mut b = SyntheticTopology::new();
    for i in 0..n {
        b = b.node(format!("{}-{}", 2 * i, 2 * i + 1).parse().unwrap(), i, Some(16 * GIB));
    }
    b.build()
}

fn run(
    machine: &FakeMachine,
    plan: &ProbePlan,
) -> (Result<pinctl_topology::Measurement, ProbeError>, Recorded) {
    let mut progress = Recorded::default();
    let result = run_probe(plan, &mut Hands(machine), machine, &mut progress, Labels::default());
    (result, progress)
}

#[test]
fn keeps_its_budget_measures_every_pair_and_keeps_the_best_pass() {
    for quick in [false, true] {
        let t = topology(2);
        let plan =
            ProbePlan::new(&t, Some(32 << 20), &ProbeOptions { quick, budget: None }).unwrap();
        let machine = FakeMachine::new(2);
        let (m, progress) = run(&machine, &plan);
        let m = m.unwrap();
        assert!(
            m.elapsed_ms <= m.budget_ms,
            "quick {quick}: {} ms of {} ms",
            m.elapsed_ms,
            m.budget_ms
        );
        assert_eq!(m.pairs.len(), 4);
        for p in &m.pairs {
            let want = machine.latency_ns[p.cpu_node as usize][p.memory_node as usize];
            // The cold first pass is never the one kept.
            assert!((p.latency_ns - want).abs() < 0.05, "quick {quick}: {p:?}");
            assert!(p.latency_passes >= 2 && p.bandwidth_passes >= 2, "{p:?}");
            let gb = machine.bandwidth[p.cpu_node as usize][p.memory_node as usize] / 1e9;
            assert!((p.read_bandwidth_gb_s - gb).abs() < 0.02, "{p:?}");
            assert_eq!(p.threads, 2, "one per core, and each synthetic CPU is a core: {p:?}");
        }
        // Memory node by memory node, one setup each, progress in order.
        assert_eq!(*machine.log.borrow(), ["prepare 0", "prepare 1"]);
        let events: Vec<String> = progress
            .0
            .iter()
            .map(|(e, _)| match e {
                Event::Preparing { memory } => format!("prepare {memory}"),
                Event::Measured { pair, done, total } => {
                    format!("{}->{} {done}/{total}", pair.cpu_node, pair.memory_node)
                }
            })
            .collect();
        assert_eq!(
            events,
            ["prepare 0", "0->0 1/4", "1->0 2/4", "prepare 1", "0->1 3/4", "1->1 4/4"]
        );
        assert!(progress.0.windows(2).all(|w| w[0].1 <= w[1].1), "time runs forward");
        assert!(machine.buffer.get().is_none() && machine.released.get() >= 2);
    }
}

#[test]
fn a_slow_setup_is_paid_by_the_pairs_after_it() {
    let t = topology(2);
    let plan = ProbePlan::new(&t, None, &ProbeOptions { quick: false, budget: None }).unwrap();
    let mut machine = FakeMachine::new(2);
    // Each setup takes twice its share (4 s of a 9 s budget).
    machine.setup = plan.shares.setup * 2;
    let (m, _) = run(&machine, &plan);
    let m = m.unwrap();
    assert!(m.elapsed_ms <= m.budget_ms + 50, "{} ms of {} ms", m.elapsed_ms, m.budget_ms);
    assert_eq!(m.pairs.len(), 4);
    assert!(m.pairs.iter().all(|p| p.latency_passes >= 1 && p.bandwidth_passes >= 1));
}

#[test]
fn overruns_by_one_pass_per_pair_only_when_no_more_fits() {
    let t = topology(3);
    let options = ProbeOptions { quick: true, budget: Some(Duration::from_millis(800)) };
    let plan = ProbePlan::new(&t, None, &options).unwrap();
    let mut machine = FakeMachine::new(3);
    // A pass of a latency kind costs far more than a pair's share: 20 000 loads at 100 us.
    machine.latency_ns = vec![vec![100_000.0; 3]; 3];
    let (m, _) = run(&machine, &plan);
    let m = m.unwrap();
    assert_eq!(m.pairs.len(), 9);
    assert!(
        m.pairs.iter().all(|p| p.latency_passes == 1 && p.bandwidth_passes == 1),
        "{:?}",
        m.pairs
    );
    assert!(
        m.elapsed_ms > m.budget_ms,
        "reported as over budget: {} of {}",
        m.elapsed_ms,
        m.budget_ms
    );
}

#[test]
fn a_failing_pass_stops_the_probe_and_gives_back_the_buffer() {
    let t = topology(2);
    let plan = ProbePlan::new(&t, None, &ProbeOptions { quick: true, budget: None }).unwrap();
    let mut machine = FakeMachine::new(2);
    machine.fail_latency_on = Some(1);
    let (m, progress) = run(&machine, &plan);
    assert_eq!(m.unwrap_err().to_string(), "a measuring thread failed: injected");
    assert!(machine.buffer.get().is_none(), "released");
    assert_eq!(progress.0.len(), 2, "node 0's pair was measured, then node 1's failed");
}
