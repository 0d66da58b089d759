//! Errors of discovery, topology loading and `near` resolution.

use std::io;
use std::path::PathBuf;

use crate::parse::ParseError;

/// Why a topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A file or directory exists but could not be read.
    #[error("cannot read `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file holds something the kernel never writes there.
    #[error("cannot parse `{path}`")]
    Parse {
        path: PathBuf,
        #[source]
        source: ParseError,
    },
    /// A sysfs/procfs file is not text.
    #[error("`{path}` is not UTF-8 text")]
    NotText { path: PathBuf },
    /// The root directory has neither `sys/` nor `proc/`.
    #[error(
        "`{root}` is not a sysfs/procfs root: it has neither `sys/` nor `proc/` (for a capture, \
         point at the folder that holds them)"
    )]
    NotARoot { root: PathBuf },
    /// `--topology` names something that does not exist.
    #[error("topology source `{path}` does not exist")]
    MissingSource { path: PathBuf },
    /// `--topology` names a file that is neither a tarball, JSON nor XML.
    #[error(
        "cannot tell what `{path}` is: expected a directory (sysfs/procfs root), a tarball \
         (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz), a pinctl JSON snapshot or an hwloc XML file"
    )]
    UnknownSource { path: PathBuf },
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
    /// An hwloc XML file was given but pinctl was built without hwloc support.
    #[error(
        "`{path}` is an hwloc XML topology, but this pinctl was built without hwloc support: \
         rebuild with `cargo install --features hwloc` (needs the Debian packages libhwloc-dev \
         libudev-dev pkg-config)"
    )]
    HwlocDisabled { path: PathBuf },
    /// libhwloc rejected an XML file.
    #[cfg(feature = "hwloc")]
    #[error("cannot read hwloc XML `{path}`")]
    Hwloc {
        path: PathBuf,
        #[source]
        source: pinctl_hwloc::HwlocError,
    },
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

/// Why a `near` entry names no device.
#[derive(Debug, thiserror::Error)]
pub enum NearError {
    /// Neither a device of the topology nor a path that leads to one.
    #[error("`{spec}` is not a device of this topology (known devices: {known})")]
    UnknownDevice { spec: String, known: String },
    /// A filesystem path was given but the topology is not the live machine.
    #[error(
        "`{spec}` is a path: only device names (`nvme0n1`, `eth0`, `/dev/sdb`) can be resolved \
         on a topology that is not the live machine"
    )]
    PathNeedsLiveMachine { spec: String },
    /// The path could not be examined.
    #[error("cannot examine `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The path lives on a filesystem with no block device behind it.
    #[error(
        "`{spec}` is on device {major}:{minor}, which is not a block device (tmpfs, overlay, a \
         network filesystem?): name the device instead"
    )]
    NotOnBlockDevice { spec: String, major: u32, minor: u32 },
    /// The block device behind the path is not in the topology.
    #[error("`{spec}` is on block device `{device}`, which the topology does not list")]
    DeviceNotInTopology { spec: String, device: String },
    /// Reading sysfs failed while resolving.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
}
