//! `/proc/PID/cmdline`: the arguments a process runs with.

use super::{Pid, nul_separated};
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;

/// The arguments (NUL-terminated in the file; bytes that are not UTF-8 replaced).
pub fn parse(bytes: &[u8]) -> Vec<String> {
    nul_separated(bytes).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
}

/// The `cmdline` of `pid` under `fs`'s root, `None` when it is gone (a zombie's is empty).
pub fn read(fs: &mut FsRoot, pid: impl Into<Pid>) -> Result<Option<Vec<String>>, DiscoveryError> {
    Ok(fs.read_bytes(&pid.into().file("cmdline"))?.map(parse))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        assert_eq!(parse(b"redis-server\0*:6379\0"), ["redis-server", "*:6379"]);
        assert_eq!(parse(b"a\xffb\0"), ["a\u{fffd}b"]);
        assert!(parse(b"").is_empty());
        let me = read(&mut FsRoot::new("/".as_ref()), Pid::Current).unwrap().unwrap();
        assert!(!me.is_empty());
    }
}
