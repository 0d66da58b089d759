//! Errors of discovery and `near` resolution.

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
    /// A file discovery reads is a FIFO, a socket or a device rather than a regular file.
    #[error("`{path}` is not a regular file (a FIFO, socket or device?)")]
    NotRegular { path: PathBuf },
    /// A file is larger than any the kernel writes there.
    #[error("`{path}` is larger than {max} bytes, more than the kernel ever writes there")]
    TooLarge { path: PathBuf, max: usize },
    /// A symbolic link in a directory source leads out of its root (or loops).
    #[error("`{path}` is a link that leads out of the topology root `{root}` (or loops): refused")]
    LinkOutsideRoot { path: PathBuf, root: PathBuf },
    /// A `cpuN` or `nodeN` folder names an id beyond pinctl's ceiling.
    #[error("`{path}`: the id is above {max}, more than Linux supports (see docs/topology.md)")]
    IdTooLarge { path: PathBuf, max: u32 },
    /// The root directory has none of `sys/devices/system/node`, `sys/devices/system/cpu`,
    /// `sys/class`.
    #[error(
        "`{root}` is not a sysfs/procfs root: it has none of `sys/devices/system/node`, \
         `sys/devices/system/cpu`, `sys/class` (for a capture, point at the folder that holds \
         `sys/`)"
    )]
    NotARoot { root: PathBuf },
    /// Discovery worked around broken files and no node with CPUs or memory was left.
    #[error(
        "`{root}` describes no usable NUMA node once its broken files are set aside: {warnings}"
    )]
    NoUsableNode { root: PathBuf, warnings: String },
    /// `--topology` names something that does not exist.
    #[error("topology source `{path}` does not exist")]
    MissingSource { path: PathBuf },
    /// `--topology` names a file that is neither a tarball, JSON nor XML.
    #[error(
        "cannot tell what `{path}` is: expected a directory (sysfs/procfs root), a tarball \
         (.tar, .tar.gz, .tgz, .tar.bz2, .tar.xz), a pinctl JSON snapshot or an hwloc XML file"
    )]
    UnknownSource { path: PathBuf },
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
