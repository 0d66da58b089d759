//! Opening files as another user without becoming that user.
//!
//! Linux checks a file's permissions against a thread's *file-system* ids (and its
//! supplementary groups), and everything else a process may do to another (`kill`, `tgkill`,
//! `prlimit`, `ptrace`) against its real, effective and saved ids. A thread that changes only
//! its file-system ids therefore opens and creates files with exactly the rights of the user it
//! writes for, while that user still cannot signal, limit or trace it: its real, effective and
//! saved ids stay the supervisor's. Changing the file-system user id away from 0 also drops the
//! capabilities that override file permissions (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`, ...) from the
//! thread's effective set, and makes the process not dumpable, so its `/proc` files stay root's.

use std::io;

use crate::raw;

/// Makes the calling thread (only) open and create files as user `uid`, group `gid` with the
/// supplementary `groups`, and reads the ids back: an error when the kernel did not take them
/// (the caller lacks `CAP_SETUID`/`CAP_SETGID`). The real, effective and saved ids are left
/// alone; so are every other thread's.
pub fn set_thread_file_identity(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    raw::set_thread_groups(groups)?;
    raw::setfsgid(gid);
    raw::setfsuid(uid);
    let (now_uid, now_gid) = (raw::fs_uid_now(), raw::fs_gid_now());
    if now_uid != uid || now_gid != gid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the file-system ids were not changed to {uid}:{gid} (they are \
                 {now_uid}:{now_gid}; changing them needs CAP_SETUID and CAP_SETGID)"
            ),
        ));
    }
    Ok(())
}

/// The calling thread's file-system user and group ids.
pub fn thread_file_identity() -> (u32, u32) {
    (raw::fs_uid_now(), raw::fs_gid_now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_ids(field: &str) -> Vec<u32> {
        // /proc/thread-self is the calling thread's own status.
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect()
    }

    #[test]
    fn only_the_file_system_ids_of_only_this_thread_change() {
        assert_eq!(
            status_ids("Uid:")[1],
            0,
            "changing file-system ids needs root (CI runs as root)"
        );
        let main_uids = status_ids("Uid:");
        // A folder only root may enter.
        let private = std::env::temp_dir().join(format!("pinctl-fsid-{}", std::process::id()));
        std::fs::create_dir_all(&private).unwrap();
        std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let inside = private.clone();
        std::thread::spawn(move || {
            set_thread_file_identity(65534, 65534, &[65534]).unwrap();
            assert_eq!(thread_file_identity(), (65534, 65534));
            // Real, effective, saved stay root's; only the fourth (file-system) id moved.
            assert_eq!(status_ids("Uid:"), vec![0, 0, 0, 65534]);
            assert_eq!(status_ids("Gid:"), vec![0, 0, 0, 65534]);
            assert_eq!(status_ids("Groups:"), vec![65534]);
            // And its file rights are nobody's: root's 0700 folder is closed to it.
            assert!(std::fs::read_dir(&inside).is_err(), "nobody could list root's folder");
        })
        .join()
        .unwrap();
        assert!(std::fs::read_dir(&private).is_ok(), "this thread is still root");
        std::fs::remove_dir(&private).unwrap();
        assert_eq!(status_ids("Uid:"), main_uids, "the other threads kept their ids");
        assert_eq!(thread_file_identity(), (0, 0));
    }
}
