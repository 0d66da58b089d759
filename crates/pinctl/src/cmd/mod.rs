//! One module per subcommand; each owns its clap arguments and its `run`.

pub(crate) mod check;
pub(crate) mod control;
pub(crate) mod exec;
pub(crate) mod fleet;
pub(crate) mod host;
pub(crate) mod host_status;
pub(crate) mod irq;
pub(crate) mod numactl;
pub(crate) mod performance;
pub(crate) mod plan;
pub(crate) mod probe;
pub(crate) mod run;
pub(crate) mod topology;
pub(crate) mod watch;
