//! `/proc/PID/environ`: the environment a process was started with.

use super::{Pid, nul_separated};
use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;

/// Whether the environment holds `name=value` exactly.
pub fn has(bytes: &[u8], name: &str, value: &str) -> bool {
    let want = format!("{name}={value}");
    nul_separated(bytes).any(|v| v == want.as_bytes())
}

/// The value of `name` in the environment, when it is there.
pub fn value<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    nul_separated(bytes).find_map(|v| v.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
}

/// The `environ` of `pid` under `fs`'s root (readable by the process's user and root only),
/// `None` when it is gone.
pub fn read(fs: &mut FsRoot, pid: impl Into<Pid>) -> Result<Option<Vec<u8>>, DiscoveryError> {
    Ok(fs.read_bytes(&pid.into().file("environ"))?.map(<[u8]>::to_vec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables() {
        let env = b"A=1\0PATH=/bin\0\0B=x=y\0";
        assert!(has(env, "B", "x=y"));
        assert!(has(env, "A", "1"));
        assert!(!has(env, "A", "12"));
        assert!(!has(env, "PAT", "H=/bin"));
        assert_eq!(value(env, "B"), Some(&b"x=y"[..]));
        assert_eq!(value(env, "PAT"), None);
        let me = read(&mut FsRoot::new("/".as_ref()), Pid::Current).unwrap().unwrap();
        let path = std::env::var("PATH").unwrap();
        assert!(has(&me, "PATH", &path));
    }
}
