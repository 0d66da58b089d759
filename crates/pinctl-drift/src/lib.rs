//! Drift: where each running instance's memory and threads really are, against where the plan
//! put them. Samples per instance (memory per node and kind from cgroup v2 `memory.numa_stat`
//! or, at a bounded cost, `/proc/PID/numa_maps`; threads' allowed and last-run CPUs; mapping
//! policies) and per host (free memory and NUMA counters per node), the drift rules as pure
//! functions of those samples with `now` passed in, episodes with hysteresis and cool-downs,
//! alert commands, Prometheus metrics, and rebalancing (threads re-pinned, pages moved back in
//! batches with a bounded stall under a rate limit).
//!
//! Used by `pinctl watch`, and by `pinctl run` as an observer of the supervisor
//! ([`supervised::SupervisedWatch`], as pinctl-irq's steering is). It must not change an
//! instance whose action is `ignore` or `alert`, call the kernel except through
//! [`rebalance::ProcessControl`], read a kernel file except through pinctl-sysfs's reader of
//! it (under the root it is given), or print: it returns events, reports and log lines
//! ([`text`]) for its caller to show.
#![forbid(unsafe_code)]

pub mod alert;
pub mod interrupts;
pub mod metrics;
pub mod read;
pub mod rebalance;
pub mod rules;
pub mod sample;
pub mod supervised;
pub mod text;
pub mod watch;
pub mod watch_loop;

pub use rules::{
    DriftKind, Edge, EpisodeTracker, Finding, InstanceDrift, Thresholds, Transition, Verdicts,
};
pub use sample::{
    HostSample, InstanceSample, KernelPolicy, MemorySource, NodeBytes, NodeMemory, NodeSample,
    PolicyUse, ThreadSample,
};
