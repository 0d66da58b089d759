//! pinctl's integration tests, run against the real `pinctl` binary cargo builds for them.
//!
//! One test binary with a module per command or concern, rather than a binary per file:
//! cargo links each integration test binary separately, and the helpers in `support` exist
//! once instead of once per file.
//!
//! - `check`, `plan`, `plan_docs`, `topology`: the commands on bundled files and fixtures.
//! - `probe`: `pinctl probe` measuring this machine, and what it saves.
//! - `fleet`, `fleet_tiup`: `pinctl fleet` over bundled and shared captures, and TiUP's example
//!   topology filled in (issue 29).
//! - `exec`: `pinctl exec` applying placements on this machine.
//! - `numactl`: pinctl's numactl mode against the real numactl (which must be installed).
//! - `vm`: static checks of the QEMU test bed, and the whole VM suite as an ignored test.
//! - `run`: `pinctl run` supervising real processes (restarts, adoption, reload, sd_notify).
//! - `watch`: `pinctl watch` sampling, alerting and re-pinning real processes.
//! - `irq`: interrupts in `topology` and `plan`, and `pinctl irq` (issue 20).
//! - `hostile`: hostile inputs built in each test (issue 12).
//! - `trust`: `pinctl run` as root against hostile files, floods and SIGKILLs (issue 17).
//! - `output`: instances' output as root: out of the service user's reach, never dropped (issue 25).
//! - `host`: several service files of one host planned as one, `status --host` (issue 27).
//! - `supervisor`: the harness `run` and `trust` share.
//!
//! `tests/fuzz_parsers.rs` stays a binary of its own: it installs a counting global allocator,
//! which would count every other test's allocations too.

mod check;
mod exec;
mod fleet;
mod fleet_tiup;
mod host;
mod hostile;
mod irq;
mod numactl;
mod output;
mod plan;
mod plan_docs;
mod probe;
mod run;
mod supervisor;
mod support;
mod topology;
mod trust;
mod vm;
mod watch;
