//! The one way pinctl opens a file it reads whole: without blocking (a FIFO would wait for a
//! writer), without following a final link when asked, a regular file only, up to a bound. The
//! machine reader (pinctl-sysfs) reads every kernel file through it; [`read_regular`] is how
//! a file named on the command line is read.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// The bytes of the regular file at `path`, at most `max` of them: the one way pinctl reads a
/// file named on its command line (`-c`, a snapshot, hwloc XML). A FIFO, socket or device
/// (`/dev/zero`, also through a link) is an `InvalidInput` error at once instead of a wait or
/// an endless read; a longer file is an `InvalidData` error.
pub fn read_regular(path: &Path, max: usize) -> io::Result<Vec<u8>> {
    let f = open_regular(path, false)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, socket or device?)",
        )
    })?;
    let mut buf = Vec::new();
    if !read_all(f, &mut buf, max)? {
        let msg = format!("larger than {max} bytes");
        return Err(io::Error::new(io::ErrorKind::InvalidData, msg));
    }
    Ok(buf)
}

/// Opens `path` without blocking (a FIFO would wait for a writer) and without following a
/// final link when `no_follow`; `None` when it is not a regular file (a FIFO, a socket,
/// `/dev/zero`).
pub fn open_regular(path: &Path, no_follow: bool) -> io::Result<Option<fs::File>> {
    use rustix::fs::{Mode, OFlags};
    let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if no_follow {
        flags |= OFlags::NOFOLLOW;
    }
    // rustix, not std: see this crate's Cargo.toml (musl's extra fcntl per open).
    let f = fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    Ok(f.metadata()?.is_file().then_some(f))
}

/// Reads a whole file into `buf` without `read_to_end`'s size probe (a `statx` per file:
/// sysfs reports 4096 for every attribute, procfs 0, so the probe never helps here).
/// `Ok(false)` when the file holds more than `max` bytes (then `buf` holds at most
/// `max + 4096`).
pub fn read_all(mut f: impl Read, buf: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    let mut chunk = [0u8; 4096];
    let start = buf.len();
    loop {
        match f.read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) if buf.len() - start + n > max => return Ok(false),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
