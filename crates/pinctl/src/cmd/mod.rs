//! One module per subcommand; each owns its clap arguments and its `run`, and calls no other
//! command: what several build comes from `host` (the one loader), what several print from
//! `render`.

pub(crate) mod check;
pub(crate) mod control;
pub(crate) mod exec;
pub(crate) mod fleet;
pub(crate) mod host;
pub(crate) mod irq;
pub(crate) mod numactl;
pub(crate) mod plan;
pub(crate) mod probe;
pub(crate) mod render;
pub(crate) mod run;
pub(crate) mod topology;
pub(crate) mod watch;
