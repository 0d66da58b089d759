//! Users and groups as the system's name service knows them (`getpwnam_r`, `getpwuid_r`,
//! `getgrnam_r`, `getgrouplist`): how a service's `user` and `group` become ids, as systemd
//! resolves `User=` and `Group=`. Only the C library's functions honour `/etc/nsswitch.conf`
//! (LDAP, sssd, systemd-userdb), and no crate offers them without `unsafe` outside this one
//! (rustix makes system calls, and the name service is no system call).

use std::ffi::{CStr, CString, OsStr, c_char, c_int};
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

/// The largest buffer a lookup grows to (an entry with thousands of members fits).
const MAX_BUFFER: usize = 1 << 20;
/// The most groups a user may be in (Linux's `NGROUPS_MAX`).
const MAX_GROUPS: usize = 65536;

/// A user of this system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    /// The primary group.
    pub gid: u32,
    pub home: PathBuf,
}

fn c_string(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
}

/// Runs a `get*_r` lookup with a buffer that grows while the C library answers ERANGE,
/// reading the entry it fills with `read`; `None` when there is no such entry.
fn lookup<E, T>(
    mut call: impl FnMut(*mut E, &mut [c_char], *mut *mut E) -> c_int,
    read: impl FnOnce(&E) -> T,
) -> io::Result<Option<T>> {
    let mut buf: Vec<c_char> = vec![0; 1024];
    loop {
        let mut entry = MaybeUninit::<E>::uninit();
        let mut found: *mut E = std::ptr::null_mut();
        match call(entry.as_mut_ptr(), &mut buf, &mut found) {
            0 if found.is_null() => return Ok(None),
            // SAFETY: the lookup succeeded and pointed `found` at `entry`, which it filled; the
            // strings it holds point into `buf`, alive until `read` returns.
            0 => return Ok(Some(read(unsafe { entry.assume_init_ref() }))),
            libc::ERANGE if buf.len() < MAX_BUFFER => buf.resize(buf.len() * 2, 0),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The bytes of a string of an entry.
fn bytes_of<'e>(s: *const c_char) -> &'e [u8] {
    // SAFETY: only called on the strings of an entry a lookup filled, NUL-terminated in the
    // lookup's buffer, which outlives the entry's reading.
    unsafe { CStr::from_ptr(s) }.to_bytes()
}

fn user_of(p: &libc::passwd) -> User {
    User {
        name: String::from_utf8_lossy(bytes_of(p.pw_name)).into_owned(),
        uid: p.pw_uid,
        gid: p.pw_gid,
        home: PathBuf::from(OsStr::from_bytes(bytes_of(p.pw_dir))),
    }
}

/// The user named `name`, `None` when there is none.
pub fn user_by_name(name: &str) -> io::Result<Option<User>> {
    let name = c_string(name)?;
    lookup(
        |entry, buf, found| {
            // SAFETY: `name` is NUL-terminated; `entry`, `found` and the `buf.len()` bytes of
            // `buf` are live and writable, and are all getpwnam_r writes.
            unsafe { libc::getpwnam_r(name.as_ptr(), entry, buf.as_mut_ptr(), buf.len(), found) }
        },
        user_of,
    )
}

/// The user whose id is `uid`, `None` when there is none.
pub fn user_by_id(uid: u32) -> io::Result<Option<User>> {
    lookup(
        |entry, buf, found| {
            // SAFETY: `entry`, `found` and the `buf.len()` bytes of `buf` are live and writable,
            // and are all getpwuid_r writes.
            unsafe { libc::getpwuid_r(uid, entry, buf.as_mut_ptr(), buf.len(), found) }
        },
        user_of,
    )
}

/// The id of the group named `name`, `None` when there is none.
pub fn group_by_name(name: &str) -> io::Result<Option<u32>> {
    let name = c_string(name)?;
    lookup(
        |entry, buf, found| {
            // SAFETY: `name` is NUL-terminated; `entry`, `found` and the `buf.len()` bytes of
            // `buf` are live and writable, and are all getgrnam_r writes.
            unsafe { libc::getgrnam_r(name.as_ptr(), entry, buf.as_mut_ptr(), buf.len(), found) }
        },
        |g: &libc::group| g.gr_gid,
    )
}

/// The groups of user `name` (named after it in the group database), with `gid` (its primary
/// group) among them: what a service running as the user is given.
pub fn group_list(name: &str, gid: u32) -> io::Result<Vec<u32>> {
    let name = c_string(name)?;
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut n = groups.len() as c_int;
        // SAFETY: `name` is NUL-terminated; `groups` holds `n` writable ids, which is all
        // getgrouplist writes (it stores the count it needs in `n` when they do not fit).
        let found = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if found >= 0 {
            groups.truncate(n.max(0) as usize);
            return Ok(groups);
        }
        if groups.len() >= MAX_GROUPS {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "more than NGROUPS_MAX groups"));
        }
        let more = (n.max(0) as usize).max(groups.len() * 2).min(MAX_GROUPS);
        groups.resize(more, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_nobody_else() {
        let root = user_by_name("root").unwrap().unwrap();
        assert_eq!((root.uid, root.gid, root.home.to_str()), (0, 0, Some("/root")));
        assert_eq!(user_by_id(0).unwrap().unwrap(), root);
        assert_eq!(user_by_name("no-such-user-pinctl").unwrap(), None);
        assert_eq!(user_by_id(4_000_000_000).unwrap(), None);
        assert_eq!(user_by_name("ro\0ot").unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(group_by_name("root").unwrap(), Some(0));
        assert_eq!(group_by_name("no-such-group-pinctl").unwrap(), None);
        assert!(group_list("root", 0).unwrap().contains(&0));
        // A user in no group of the database still has the primary group it is given.
        assert_eq!(group_list("no-such-user-pinctl", 4242).unwrap(), [4242]);
    }
}
