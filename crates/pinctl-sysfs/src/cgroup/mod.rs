//! The cgroup v2 files pinctl reads, one module per file, each a parser tested on strings and a
//! bounded read under a root. A reader takes the cgroup's folder relative to the root
//! (`sys/fs/cgroup/system.slice/db.service`): [`folder`] makes it from the cgroup's path as
//! `/proc/PID/cgroup` names it.

pub mod controllers;
pub mod events;
pub mod numa_stat;
pub mod procs;

/// Where the v2 hierarchy is mounted, relative to the root: alone (unified mode), or beside
/// the v1 controllers (systemd's hybrid mode, where v2 has no controllers).
pub const MOUNTS: [&str; 2] = ["sys/fs/cgroup", "sys/fs/cgroup/unified"];

/// The folder under the unified mount of the cgroup at `path` (`/pinctl/db-0`), `None` for the
/// root cgroup.
pub fn folder(path: &str) -> Option<String> {
    let path = path.trim_matches('/');
    (!path.is_empty()).then(|| format!("{}/{path}", MOUNTS[0]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn folders_of_paths() {
        assert_eq!(super::folder("/pinctl/db-0/").unwrap(), "sys/fs/cgroup/pinctl/db-0");
        assert_eq!(super::folder("/"), None);
    }
}
