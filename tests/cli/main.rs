//! pinctl's integration tests, run against the real `pinctl` binary cargo builds for them.
//!
//! One test binary with a module per command or concern, rather than a binary per file:
//! cargo links each integration test binary separately, and the helpers in `support` exist
//! once instead of once per file.
//!
//! - `check`, `plan`, `plan_docs`, `topology`: the commands on bundled files and fixtures.
//! - `exec`: `pinctl exec` applying placements on this machine.
//! - `numactl`: pinctl's numactl mode against the real numactl (which must be installed).
//! - `vm`: static checks of the QEMU test bed, and the whole VM suite as an ignored test.

mod check;
mod exec;
mod numactl;
mod plan;
mod plan_docs;
mod support;
mod topology;
mod vm;
