//! What the test modules share: how pinctl is run, and the bundled inputs they name.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The pinctl binary cargo built for these tests.
pub(crate) const PINCTL: &str = env!("CARGO_BIN_EXE_pinctl");

/// The bundled topology snapshot of a 2-socket EPYC in NPS4 (8 nodes).
pub(crate) const EPYC: &str = "configs/topologies/epyc-nps4.json";
/// The bundled topology snapshot of a 2-socket Xeon (2 nodes).
pub(crate) const XEON: &str = "configs/topologies/xeon-e5-2682v4.json";

/// The repository root.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// pinctl, run from the repository root so that relative paths in arguments, and so the
/// paths it prints (and the snapshots holding them), do not depend on where the test runs.
pub(crate) fn pinctl() -> Command {
    let mut cmd = Command::new(PINCTL);
    cmd.current_dir(root());
    cmd
}

/// Writes `text` to `dir/pinctl.toml` and returns its path.
pub(crate) fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("pinctl.toml");
    std::fs::write(&path, text).unwrap();
    path
}
