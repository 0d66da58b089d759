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
