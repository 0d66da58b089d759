//! What more than one bench needs.

use std::path::{Path, PathBuf};

/// The first `name` on `$PATH`, as the shell would find it.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Sends `sig` to process `pid`.
#[allow(dead_code)]
pub(crate) fn signal(pid: i32, sig: rustix::process::Signal) -> std::io::Result<()> {
    let pid = rustix::process::Pid::from_raw(pid).ok_or(rustix::io::Errno::SRCH)?;
    Ok(rustix::process::kill_process(pid, sig)?)
}
