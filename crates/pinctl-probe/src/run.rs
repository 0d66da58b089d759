//! The probe's loop: memory node by memory node, set up the buffer, then for each CPU side
//! run latency passes and bandwidth passes until the pair's share of the budget is spent,
//! keeping the best pass of each. It decides only from the [`Clock`] and what the
//! [`Measurer`] reports, and tells a [`Progress`] sink what it does, so the tests run it on a
//! fake clock and a fake machine.
//!
//! The budget holds by construction: each step (a buffer's setup, a pair) ends at its share
//! of the budget counted from the start, so time one step overran comes out of the steps
//! after it. Every pair gets at least one pass of each kind, even past its deadline: the
//! probe overruns only when the budget cannot hold one pass per pair, and reports it.

use std::time::Duration;

use pinctl_topology::{MeasuredPair, Measurement, NodeId};

use crate::error::ProbeError;
use crate::measure::Measurer;
use crate::plan::ProbePlan;

pub use pinctl_sysfs::clock::{Clock, MonotonicClock};

/// What the probe is doing, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Setting up the buffer on a memory node.
    Preparing { memory: NodeId },
    /// A pair is measured: `done` of `total` pairs so far.
    Measured { pair: MeasuredPair, done: usize, total: usize },
}

/// Receives [`Event`]s as they happen, with the time spent so far and the budget.
pub trait Progress {
    fn event(&mut self, event: &Event, elapsed: Duration, budget: Duration);
}

/// A [`Progress`] that shows nothing.
#[derive(Debug, Default)]
pub struct Silent;

impl Progress for Silent {
    fn event(&mut self, _: &Event, _: Duration, _: Duration) {}
}

/// Who measured, when and on what: copied into the [`Measurement`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// `pinctl 0.1.0`.
    pub tool: String,
    /// RFC 3339 UTC.
    pub measured_at: String,
    pub kernel: Option<String>,
}

impl Labels {
    /// `tool` measuring now, on `kernel`.
    pub fn now(tool: impl Into<String>, kernel: Option<String>) -> Labels {
        let now = std::time::SystemTime::now();
        Labels {
            tool: tool.into(),
            measured_at: humantime::format_rfc3339_seconds(now).to_string(),
            kernel,
        }
    }
}

/// The part of the budget the steps are planned into; the rest absorbs what a pass's estimate
/// missed and the last buffer's release.
const PLANNED_SHARE: f64 = 0.95;
/// A pass is started only when this many times its estimated length fits before its
/// deadline: thread start-up and a busy machine make passes longer than the last one's rate.
const ESTIMATE_MARGIN: f64 = 1.25;
/// Share of a pair's time for latency passes; bandwidth passes get the rest.
const LATENCY_SHARE: f64 = 0.6;
/// Passes a kind aims for within its share; the best is kept.
const PASSES_AIMED: u32 = 5;
/// Most passes of one kind per pair: beyond these the best barely moves.
const MAX_PASSES: u32 = 12;
/// The first latency pass (it measures the cost of a load, which sizes the rest).
const FIRST_LOADS_FULL: u64 = 200_000;
const FIRST_LOADS_QUICK: u64 = 20_000;
/// Most loads in one pass (about 10 s at 100 ns: never reached within a budget).
const MAX_LOADS: u64 = 100_000_000;
/// Most repetitions of the read in one bandwidth pass.
const MAX_REPS: u32 = 10_000;

/// Runs `plan` on `measurer`, timing by `clock`, telling `progress`. The buffer is released
/// whatever happens.
pub fn run_probe(
    plan: &ProbePlan,
    measurer: &mut dyn Measurer,
    clock: &dyn Clock,
    progress: &mut dyn Progress,
    labels: Labels,
) -> Result<Measurement, ProbeError> {
    let result = measure_all(plan, measurer, clock, progress);
    measurer.release();
    let (mut pairs, elapsed) = result?;
    // Measured memory node by memory node; kept in the model's order.
    pairs.sort_by_key(|p| (p.cpu_node, p.memory_node));
    Ok(Measurement {
        tool: labels.tool,
        measured_at: labels.measured_at,
        kernel: labels.kernel,
        quick: plan.quick,
        budget_ms: millis(plan.budget),
        elapsed_ms: millis(elapsed),
        buffer_bytes: plan.buffer_bytes,
        last_level_cache_bytes: plan.last_level_cache_bytes,
        pairs,
        not_measured: plan.not_measured.clone(),
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn measure_all(
    plan: &ProbePlan,
    measurer: &mut dyn Measurer,
    clock: &dyn Clock,
    progress: &mut dyn Progress,
) -> Result<(Vec<MeasuredPair>, Duration), ProbeError> {
    let start = clock.now();
    let total = plan.pairs();
    let mut pairs = Vec::with_capacity(total);
    // The deadline of each step, counted from the start: overruns come out of later steps.
    let mut planned = Duration::ZERO;
    let first_loads = if plan.quick { FIRST_LOADS_QUICK } else { FIRST_LOADS_FULL };
    for &memory in &plan.memory_nodes {
        progress.event(&Event::Preparing { memory }, clock.now() - start, plan.budget);
        let prepared = measurer.prepare(memory, plan.buffer_bytes)?;
        planned += plan.shares.setup.mul_f64(PLANNED_SHARE);
        for side in &plan.cpu_sides {
            let pair_start = clock.now();
            planned += plan.shares.pair.mul_f64(PLANNED_SHARE);
            let deadline = start + planned;
            let time_left = deadline.saturating_sub(pair_start);
            let latency_deadline = pair_start + time_left.mul_f64(LATENCY_SHARE);
            let latency = latency_passes(
                measurer,
                clock,
                side.node,
                side.latency_cpu,
                first_loads,
                latency_deadline,
            )?;
            let bandwidth =
                bandwidth_passes(measurer, clock, side.node, &side.bandwidth_cpus, deadline)?;
            let pair = MeasuredPair {
                cpu_node: side.node,
                memory_node: memory,
                latency_ns: round(latency.best_ns, 10.0),
                read_bandwidth_gb_s: round(bandwidth.best_gb_s, 100.0),
                threads: side.bandwidth_cpus.len() as u32,
                latency_passes: latency.passes,
                bandwidth_passes: bandwidth.passes,
                huge_page_bytes: prepared.huge_page_bytes,
            };
            pairs.push(pair.clone());
            let event = Event::Measured { pair, done: pairs.len(), total };
            progress.event(&event, clock.now() - start, plan.budget);
        }
        measurer.release();
    }
    Ok((pairs, clock.now() - start))
}

/// `value` rounded to `1 / per` (0.1 ns, 0.01 GB/s): finer digits are noise.
fn round(value: f64, per: f64) -> f64 {
    (value * per).round() / per
}

struct Best {
    passes: u32,
    best_ns: f64,
}

/// Latency passes on `cpu` until `deadline` (at least one): the first of `first_loads`
/// loads, the rest sized so about [`PASSES_AIMED`] fit.
fn latency_passes(
    measurer: &mut dyn Measurer,
    clock: &dyn Clock,
    node: NodeId,
    cpu: pinctl_topology::CpuId,
    first_loads: u64,
    deadline: Duration,
) -> Result<Best, ProbeError> {
    let aim = deadline.saturating_sub(clock.now()) / PASSES_AIMED;
    let mut loads = first_loads;
    let mut best = Best { passes: 0, best_ns: f64::INFINITY };
    loop {
        let began = clock.now();
        let took = measurer.latency_pass(node, cpu, loads)?;
        let wall = clock.now().saturating_sub(began).max(took);
        best.passes += 1;
        best.best_ns = best.best_ns.min(took.as_secs_f64() * 1e9 / loads as f64);
        // Size the next pass from what a load cost, thread start included; stop when it
        // would not end in time.
        let per_load = (wall.as_secs_f64() * 1e9 / loads as f64).max(0.01);
        loads = ((aim.as_secs_f64() * 1e9 / per_load) as u64).clamp(first_loads, MAX_LOADS);
        let next = Duration::from_secs_f64(loads as f64 * per_load * 1e-9 * ESTIMATE_MARGIN);
        if best.passes >= MAX_PASSES || clock.now() + next > deadline {
            return Ok(best);
        }
    }
}

struct BestBandwidth {
    passes: u32,
    best_gb_s: f64,
}

/// Bandwidth passes on `cpus` until `deadline` (at least one): the first reads the buffer
/// once, the rest as many times as fit in about a [`PASSES_AIMED`]th of the time left.
fn bandwidth_passes(
    measurer: &mut dyn Measurer,
    clock: &dyn Clock,
    node: NodeId,
    cpus: &pinctl_topology::CpuSet,
    deadline: Duration,
) -> Result<BestBandwidth, ProbeError> {
    let aim = deadline.saturating_sub(clock.now()) / PASSES_AIMED;
    let mut reps = 1u32;
    let mut best = BestBandwidth { passes: 0, best_gb_s: 0.0 };
    loop {
        let began = clock.now();
        let transfer = measurer.bandwidth_pass(node, cpus, reps)?;
        let wall = clock.now().saturating_sub(began).max(transfer.elapsed);
        best.passes += 1;
        let seconds = transfer.elapsed.as_secs_f64().max(1e-9);
        best.best_gb_s = best.best_gb_s.max(transfer.bytes as f64 / seconds / 1e9);
        let per_rep = wall.as_secs_f64().max(1e-9) / f64::from(reps);
        reps = ((aim.as_secs_f64() / per_rep) as u32).clamp(1, MAX_REPS);
        let next = Duration::from_secs_f64(per_rep * f64::from(reps) * ESTIMATE_MARGIN);
        if best.passes >= MAX_PASSES || clock.now() + next > deadline {
            return Ok(best);
        }
    }
}
