//! numactl compatibility: pinctl invoked as `numactl`.

use std::ffi::OsString;

use crate::exit::{CmdResult, Failed, Status};

pub(crate) fn run(_args: &[OsString]) -> CmdResult {
    Err(Failed::new(Status::Failure, anyhow::anyhow!("numactl mode is being built")))
}
