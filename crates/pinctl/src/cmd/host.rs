//! The one route from `-c FILE...` to a plan that every command planning files takes
//! (`check`, `plan`, `run` and its reloads, `watch`, `irq apply`; `exec -c` takes the same
//! route inside pinctl-launch): the files of the host loaded, joined and checked on one
//! topology ([`pinctl_launch::Host`]), as ripgrep builds one `HiArgs` for every searcher.
//!
//! With `--topology` (a dry run of a host that may not exist) the host is exactly the files
//! given. On the live machine it is those files, the other `*.toml` files of their folders
//! and the files of the supervisors running on the host (docs/planning.md, "A host").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pinctl_capture::load_topology;
use pinctl_launch::{Gathered, Host, ServiceFile};
use pinctl_plan::Plan;
use pinctl_sysfs::TopologySource;
use pinctl_topology::Placement;

use crate::error::Error;

/// The host of the files a command was given, and which of its files those are.
#[derive(Debug)]
pub(crate) struct LoadedHost {
    pub(crate) host: Host,
    /// The files the command was given, as given.
    pub(crate) asked: Vec<PathBuf>,
    /// Files of the host's folders left out of it, and why, one line each.
    pub(crate) notes: Vec<String>,
}

/// The files `asked` and the rest of their host on the topology `--topology` names (the live
/// machine without it). The files are read and validated first, so their errors are said
/// even where the topology cannot be read.
pub(crate) fn load(
    asked: &[PathBuf],
    topology: Option<&Path>,
    strict: bool,
) -> Result<LoadedHost, Error> {
    let mut gathered = match topology {
        Some(_) => Gathered { paths: asked.to_vec(), notes: Vec::new() },
        None => pinctl_launch::live_files(asked, &running_files()),
    };
    let configs = pinctl_launch::load_gathered(&mut gathered, asked.len())?;
    let configs = pinctl_launch::join(configs)?;
    let source = TopologySource::from_arg(topology).map_err(Error::failure)?;
    let mut loaded = load_topology(&source).map_err(Error::failure)?;
    pinctl_launch::probe_memory_policies(&pinctl_sys::LinuxKernel, &mut loaded);
    let host = Host::check(configs, loaded, strict)?;
    Ok(LoadedHost { host, asked: asked.to_vec(), notes: gathered.notes })
}

/// How long a plan waits for each running supervisor to name its file: one that hangs must
/// not hold up a unit's start.
const RUNNING_FILE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The service files of the supervisors running on this host (each trusted control socket
/// of /run/pinctl, asked with a bounded wait); those that do not answer hold nothing here.
pub(crate) fn running_files() -> Vec<PathBuf> {
    let dir = Path::new(pinctl_config::RUNTIME_DIR);
    pinctl_supervise::client::running_files(dir, RUNNING_FILE_WAIT)
}

impl LoadedHost {
    /// The file of the command (the first given).
    pub(crate) fn own(&self) -> &ServiceFile {
        self.host.file(&self.asked[0]).expect("the files asked for are the host's")
    }

    /// Whether `file` is one the command was given.
    pub(crate) fn is_asked(&self, file: &ServiceFile) -> bool {
        self.asked.contains(&file.config.path)
    }

    /// The host's plan, and the part of it that belongs to the files asked for.
    pub(crate) fn plan(&self) -> Result<(Plan, Plan), Error> {
        self.plan_keeping(&BTreeMap::new(), &BTreeMap::new())
    }

    /// [`LoadedHost::plan`], keeping `current` where it runs when it can and never moving
    /// `held` (a reload).
    pub(crate) fn plan_keeping(
        &self,
        current: &BTreeMap<String, Placement>,
        held: &BTreeMap<String, Placement>,
    ) -> Result<(Plan, Plan), Error> {
        let whole = self.host.plan_keeping(current, held)?;
        let mut part = whole.clone();
        part.placements
            .retain(|p| self.host.file_of(&p.instance).is_some_and(|f| self.is_asked(f)));
        Ok((whole, part))
    }

    /// The other files of the host, one line each (`` `b.toml` (supervisor `b`) ``), for a
    /// command to say what its file was planned with.
    pub(crate) fn others(&self) -> Vec<String> {
        self.host
            .files
            .iter()
            .filter(|f| !self.is_asked(f))
            .map(|f| {
                format!("`{}` (supervisor `{}`)", f.config.path.display(), Host::supervisor_of(f))
            })
            .collect()
    }
}

/// Asks the live machine's irqbalance which CPUs it avoids (root only; otherwise left unknown).
pub(crate) fn ask_irqbalance(t: &mut pinctl_topology::Topology) {
    use pinctl_irq::irqbalance::Balancer as _;
    let Some(b) = t.interrupts.irqbalance.as_mut() else { return };
    if pinctl_trust::euid() != 0 {
        return;
    }
    if let Ok(setup) = pinctl_irq::irqbalance::SocketBalancer.setup(Path::new(&b.socket)) {
        b.banned_cpus = Some(setup.banned_cpus);
    }
}
