//! One cgroup v2 child per instance, where pinctl may write its subtree (root, or a systemd
//! unit with `Delegate=yes`). cgroup v2 forbids processes in a cgroup that has children with
//! controllers, so pinctl first moves itself into a leaf (`_supervisor`, a name no instance can
//! have: instance names start with a letter or digit). Each instance gets `<base>/<name>`;
//! `cgroup.kill` (Linux 5.14+) ends everything in it at once; with `enforce = "cgroup"` its
//! `cpuset.cpus`/`cpuset.mems` are the plan's.
//!
//! Every step that fails makes the caller fall back to process groups; nothing here is fatal.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::spec::PlacementSpec;

/// Where the v2 hierarchy is mounted: alone (unified mode), or beside the v1 controllers
/// (systemd's hybrid mode, where v2 has no controllers but `cgroup.kill` works).
const ROOTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
const LEAF: &str = "_supervisor";

/// The writable subtree: `dir` on disk, `path` as `/proc/PID/cgroup` names it.
#[derive(Debug, Clone)]
pub(crate) struct Subtree {
    dir: PathBuf,
    path: String,
    /// Whether `cpuset` is enabled for the instances' cgroups.
    cpuset: bool,
}

fn write(path: &Path, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

impl Subtree {
    /// Sets up the subtree below `own` (this process's v2 cgroup path, `/` for the root) and
    /// moves this process into its leaf. `Err` says why the subtree cannot be used.
    pub(crate) fn setup(own: &str) -> Result<Subtree, String> {
        let Some(root) =
            ROOTS.iter().map(Path::new).find(|r| r.join("cgroup.controllers").exists())
        else {
            return Err(format!("no cgroup v2 hierarchy at {}", ROOTS.join(" or ")));
        };
        // The root cgroup may hold processes; below it pinctl makes its own folder.
        let path =
            if own == "/" { "/pinctl".to_string() } else { own.trim_end_matches('/').to_string() };
        let dir = root.join(path.trim_start_matches('/'));
        let leaf = dir.join(LEAF);
        let setup = || -> io::Result<bool> {
            fs::create_dir_all(&leaf)?;
            write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
            let available = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            let mut cpuset = false;
            for c in ["cpuset", "memory"] {
                if available.split_whitespace().any(|a| a == c)
                    && write(&dir.join("cgroup.subtree_control"), &format!("+{c}")).is_ok()
                {
                    cpuset |= c == "cpuset";
                }
            }
            Ok(cpuset)
        };
        match setup() {
            Ok(cpuset) => Ok(Subtree { dir, path, cpuset }),
            Err(e) => Err(format!("cannot use the cgroup subtree `{}`: {e}", dir.display())),
        }
    }

    /// The instance's cgroup as `/proc/PID/cgroup` shows it.
    pub(crate) fn path_of(&self, name: &str) -> String {
        format!("{}/{name}", self.path)
    }

    fn dir_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Creates the instance's cgroup; with `enforce`, writes its cpuset.
    pub(crate) fn prepare(
        &self,
        name: &str,
        enforce: Option<&PlacementSpec>,
    ) -> Result<(), String> {
        let dir = self.dir_of(name);
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Some(p) = enforce {
            if !self.cpuset {
                return Err(
                    "`enforce = \"cgroup\"`: the cpuset controller cannot be enabled here".into()
                );
            }
            write(&dir.join("cpuset.cpus"), &p.cpus.to_string()).map_err(|e| e.to_string())?;
            let mems = if p.memory_nodes.is_empty() { &p.nodes } else { &p.memory_nodes };
            write(&dir.join("cpuset.mems"), &mems.to_string()).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The instance's `cgroup.procs`, open for writing: its child joins the cgroup between
    /// fork and exec (pinctl_sys::CommandCgroup), before its placement is applied.
    pub(crate) fn procs(&self, name: &str) -> Result<std::fs::File, String> {
        let path = self.dir_of(name).join("cgroup.procs");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open `{}`: {e}", path.display()))
    }

    /// Kills everything in the instance's cgroup (`cgroup.kill`).
    pub(crate) fn kill(&self, name: &str) -> bool {
        write(&self.dir_of(name).join("cgroup.kill"), "1").is_ok()
    }

    /// Removes the instance's cgroup when it is empty (best effort).
    pub(crate) fn remove(&self, name: &str) {
        let _ = fs::remove_dir(self.dir_of(name));
    }
}
