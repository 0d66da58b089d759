//! Topology sources that are not a live tree: tarballs of a sysfs/procfs tree (read in memory
//! or unpacked), `pinctl topology --json` snapshots, hwloc XML (pinctl-hwloc-xml), and writing
//! captures (`pinctl topology --capture`), with the `pinctl probe` result they may carry. [`load_topology`] loads any `--topology` source.
//!
//! The heavy half of discovery: it holds the archive and compression code so pinctl-sysfs,
//! which the launcher uses on every unit start, does not. It reads trees through
//! pinctl-sysfs's [`FsRoot`](pinctl_sysfs::FsRoot) and discovery, so a capture is read exactly
//! as the machine it came from. It must not decide placements or call NUMA syscalls.
#![forbid(unsafe_code)]

mod capture;
mod error;
mod interrupts;
mod measured;
mod memtree;
mod snapshot;
mod tarball;

pub use capture::{CaptureSummary, capture_topology, capture_topology_with};
pub use error::SourceError;
pub use measured::PROBE_FILE;
pub use memtree::{MAX_ENTRY_BYTES, MAX_PATH_BYTES, MAX_TREE_BYTES};
pub use pinctl_trust::atomic::{StagedFile, write_atomically};
pub use tarball::{
    MAX_CAPTURE_BYTES, MAX_SNAPSHOT_BYTES, UnpackedTree, load_topology, read_tarball,
    unpack_tarball,
};
