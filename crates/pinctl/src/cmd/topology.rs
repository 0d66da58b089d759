//! `pinctl topology`.

use std::process::ExitCode;

use crate::exit::{CmdResult, Failed, Status};

/// Arguments of `pinctl topology`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopologyArgs {}

pub(crate) fn run(_args: TopologyArgs) -> CmdResult {
    Err(Failed::new(Status::Failure, anyhow::anyhow!("`pinctl topology` is being built")))
}

#[allow(dead_code)]
fn _ok() -> ExitCode {
    ExitCode::SUCCESS
}
