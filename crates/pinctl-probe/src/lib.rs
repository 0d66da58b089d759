//! `pinctl probe`: measures, for every pair of a CPU node and a memory node this process may
//! use, the idle load-to-use latency (a dependent pointer chase in random order over a buffer
//! well past the last-level cache, on huge pages where the kernel gives them, best of several
//! passes) and the read bandwidth (one thread per core of the CPU node), one pair at a time,
//! within a time budget; and sets the result beside SLIT and HMAT. docs/probe.md explains the
//! method and what the numbers mean.
//!
//! [`ProbePlan`] decides what to measure from the topology alone; [`run_probe`] measures it
//! through a [`Measurer`] ([`LinuxMeasurer`] on the machine) on a [`Clock`], telling a
//! [`Progress`] sink; [`ProbeDocument`] compares. The system calls it needs (`mbind`,
//! `madvise`, thread affinity, `move_pages`) are pinctl-sys's. It must not print, parse a
//! command line or change anything that outlives it: no sysctl, no policy or affinity of the
//! process, no memory left mapped.
#![forbid(unsafe_code)]

pub mod chain;
mod error;
mod measure;
mod plan;
mod report;
mod run;

pub use error::ProbeError;
pub use measure::{LinuxMeasurer, Measurer, Prepared, Transfer};
pub use plan::{
    CpuSide, FULL_BUFFER_FLOOR, FULL_BUFFER_LLC_FACTOR, ProbeOptions, ProbePlan, QUICK_BUFFER,
    Shares, buffer_bytes, default_budget, last_level_cache,
};
pub use report::{
    Disagreement, PROBE_SCHEMA_VERSION, PairComparison, ProbeDocument, ProbeSchemaVersion,
    TIE_FRACTION, compare, disagreements,
};
pub use run::{Clock, Event, Labels, MonotonicClock, Progress, Silent, run_probe};
