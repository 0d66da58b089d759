//! Errors of loading a topology source and writing a capture.

use std::io;
use std::path::PathBuf;

use pinctl_sysfs::DiscoveryError;

/// Why a topology source could not be loaded or a capture written.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading a tree (a directory or an archive) failed.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// A tarball could not be decompressed or unpacked.
    #[error("cannot unpack tarball `{path}`")]
    Tarball {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A tarball unpacked to a tree without `sys/` or `proc/`.
    #[error("tarball `{path}` holds no sysfs/procfs tree (no `sys/` or `proc/` folder found)")]
    NoRootInTarball { path: PathBuf },
    /// A JSON snapshot does not match pinctl's topology format.
    #[error("`{path}` is not a pinctl topology snapshot")]
    Snapshot {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A JSON snapshot written by a newer pinctl, in a form this one does not know.
    #[error(
        "snapshot `{path}` has schema_version {version}, newer than {known}, the newest this \
         pinctl reads: use a newer pinctl, or write the snapshot again with this one's \
         `pinctl topology --json`"
    )]
    SnapshotNewer { path: PathBuf, version: String, known: u32 },
    /// A JSON snapshot parses but breaks a rule of the model.
    #[error("snapshot `{path}`: `{at}`: {what}")]
    SnapshotInvalid { path: PathBuf, at: String, what: String },
    /// The probe result a capture carries (`pinctl/probe.json`) is not one pinctl wrote.
    #[error("`{path}` is not a `pinctl probe` result")]
    Measurement {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A probe result parses but does not fit the topology it came with.
    #[error("probe result `{path}`: `{at}`: {what}")]
    MeasurementInvalid { path: PathBuf, at: String, what: String },
    /// An hwloc XML file that pinctl's reader refused (the error names the file).
    #[error(transparent)]
    Hwloc(#[from] pinctl_hwloc_xml::HwlocXmlError),
    /// A capture was asked of a source that is not a file system tree.
    #[error("only the live machine or a sysfs/procfs directory can be captured, not `{what}`")]
    NotCapturable { what: String },
    /// The capture tarball could not be written.
    #[error("cannot write capture `{path}`")]
    CaptureWrite {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A rule of a snapshot or probe result broken: the JSON path of the offending value, and
/// what is wrong with it (made into [`SourceError::SnapshotInvalid`] or
/// [`SourceError::MeasurementInvalid`] with the file's path).
pub(crate) type Invalid = (String, String);

/// The rule at `at` is broken, as `what` says.
pub(crate) fn bad<T>(at: String, what: String) -> Result<T, Invalid> {
    Err((at, what))
}
