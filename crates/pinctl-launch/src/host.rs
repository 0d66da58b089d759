//! One host, one plan: the service files of a host are planned together, whoever owns them
//! (docs/planning.md, "A host"). [`Host`] is every file of the host checked against one
//! topology and joined into one file the planner plans; each command then takes its own
//! file's part. Files are planned in one order whatever order they were named in (by
//! supervisor name, then path), so a file's placements never depend on which supervisor
//! starts first.
//!
//! The `[host]` settings that describe the machine rather than a file ([`HOST_WIDE`]) must
//! agree: a file that sets one sets what every other file setting it sets, and a file that
//! leaves it out takes the host's. Services and instances are named once on a host.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pinctl_config::{Config, Diagnostic, Severity, Span};
use pinctl_plan::{Plan, PlanInputs};
use pinctl_sysfs::LoadedTopology;
use pinctl_sysfs::proc::pinned::PinnedProcess;
use pinctl_topology::{CpuSet, Placement};

use crate::error::LaunchError;
use crate::planned::{
    PlannedPlacement, ServiceFile, default_route_if_unset, load_config, read_needed,
};

/// The most service files one folder may hold for a host: more is not a host's folder.
pub const MAX_HOST_FILES: usize = 256;

/// A `[host]` setting that belongs to the machine, not to one file.
struct HostWide {
    key: &'static str,
    /// Whether two files set it the same.
    same: fn(&Config, &Config) -> bool,
    /// Whether a file built in code (without the text to tell) sets it.
    set_in_code: fn(&Config) -> bool,
    /// Gives `to` the value of `from`.
    adopt: fn(&mut Config, &Config),
}

/// Every host-wide `[host]` setting; the others (`name`, `socket`, `state-file`,
/// `watch-interval`, `metrics-listen`) are each file's own.
const HOST_WIDE: &[HostWide] = &[
    HostWide {
        key: "keep-free",
        same: |a, b| a.host.keep_free == b.host.keep_free,
        set_in_code: |c| c.host.keep_free.is_some(),
        adopt: |to, from| {
            to.host.keep_free = from.host.keep_free.clone();
            to.spans.host.keep_free.clear();
        },
    },
    HostWide {
        key: "reserve-cpus",
        same: |a, b| a.host.reserve_cpus == b.host.reserve_cpus,
        set_in_code: |c| !c.host.reserve_cpus.is_empty(),
        adopt: |to, from| {
            to.host.reserve_cpus = from.host.reserve_cpus.clone();
            to.spans.host.reserve_cpus = None;
        },
    },
    HostWide {
        key: "memory-reserve",
        same: |a, b| a.host.memory_reserve == b.host.memory_reserve,
        set_in_code: |c| c.host.memory_reserve.is_some(),
        adopt: |to, from| {
            to.host.memory_reserve = from.host.memory_reserve;
            to.spans.host.memory_reserve = None;
        },
    },
    HostWide {
        key: "cpu-overcommit",
        same: |a, b| a.host.cpu_overcommit == b.host.cpu_overcommit,
        set_in_code: |c| c.host.cpu_overcommit.is_some(),
        adopt: |to, from| to.host.cpu_overcommit = from.host.cpu_overcommit,
    },
    HostWide {
        key: "steer-interrupts",
        same: |a, b| a.interrupts.steer == b.interrupts.steer,
        set_in_code: |c| c.interrupts.steer,
        adopt: |to, from| to.interrupts.steer = from.interrupts.steer,
    },
    HostWide {
        key: "node-free-watermark",
        same: |a, b| a.watch.node_free_watermark == b.watch.node_free_watermark,
        set_in_code: |c| c.watch.node_free_watermark.is_some(),
        adopt: |to, from| to.watch.node_free_watermark = from.watch.node_free_watermark,
    },
];

/// The names of the host-wide `[host]` settings (docs/config.md lists them).
pub fn host_wide_keys() -> Vec<&'static str> {
    HOST_WIDE.iter().map(|h| h.key).collect()
}

impl HostWide {
    /// Where `config` sets it: `Some(None)` when set in a file built in code.
    fn set_at<'c>(&self, config: &'c Config) -> Option<Option<&'c Span>> {
        match &config.spans.file {
            Some(_) => config.spans.host.keys.get(self.key).map(Some),
            None => (self.set_in_code)(config).then_some(None),
        }
    }
}

/// Every file of a host on one topology, and all of them as the one file the planner plans.
#[derive(Debug)]
pub struct Host {
    /// Each file, checked, with the host-wide settings it left out taken from the host; in
    /// the order they are planned.
    pub files: Vec<ServiceFile>,
    /// Every service of every file, in that order: what the planner plans.
    pub joint: ServiceFile,
    /// The processes of the live machine pinned by others (taskset, `CPUAffinity=`, a
    /// cpuset); empty on another host's topology.
    pub pinned: Vec<PinnedProcess>,
}

impl Host {
    /// Joins `configs` (refused when they disagree on a host-wide setting or name a service,
    /// instance or supervisor twice) and checks each against `loaded`.
    pub fn check(
        configs: Vec<Config>,
        loaded: LoadedTopology,
        strict: bool,
    ) -> Result<Host, LaunchError> {
        let configs = join(configs)?;
        let mut files = Vec::new();
        let mut reports = Vec::new();
        for config in configs {
            match ServiceFile::check(config, loaded.clone(), strict) {
                Ok(file) => files.push(file),
                Err(LaunchError::Rejected { report }) => reports.push(report),
                Err(e) => return Err(e),
            }
        }
        if !reports.is_empty() {
            return Err(LaunchError::Rejected { report: reports.join("\n") });
        }
        let mut inputs = PlanInputs { strict, ..PlanInputs::default() };
        for f in &files {
            inputs.near.extend(f.inputs.near.iter().map(|(k, v)| (k.clone(), v.clone())));
            inputs.reported_near.extend(f.inputs.reported_near.iter().cloned());
            if inputs.default_keep_free.is_empty() {
                inputs.default_keep_free = f.inputs.default_keep_free.clone();
            }
        }
        let config = joint_config(files.iter().map(|f| &f.config));
        let pinned = if loaded.is_live { pinned_on(&loaded) } else { Vec::new() };
        let joint = ServiceFile { config, loaded, inputs, diagnostics: Vec::new() };
        Ok(Host { files, joint, pinned })
    }

    /// The plan of the whole host.
    pub fn plan(&self) -> Result<Plan, LaunchError> {
        self.plan_keeping(&BTreeMap::new(), &BTreeMap::new())
    }

    /// The plan of the whole host, keeping the instances in `current` where they run when it
    /// can (a supervisor's reload, docs/supervisor.md "Sticky") and never moving those in
    /// `held` (the running instances of the other files' supervisors). When the plan fails
    /// while others hold nodes, the error names them.
    pub fn plan_keeping(
        &self,
        current: &BTreeMap<String, Placement>,
        held: &BTreeMap<String, Placement>,
    ) -> Result<Plan, LaunchError> {
        let (mut plan, pinned_note) = self.plan_around_pinned(current, held)?;
        plan.warnings.extend(pinned_note);
        Ok(plan)
    }

    /// [`Host::plan_keeping`], and apart from the plan's warnings the one on processes pinned
    /// outside pinctl (when any are).
    fn plan_around_pinned(
        &self,
        current: &BTreeMap<String, Placement>,
        held: &BTreeMap<String, Placement>,
    ) -> Result<(Plan, Option<String>), LaunchError> {
        let plan = self.plan_reserving(current, held, &CpuSet::new())?;
        // Processes pinned by others, not the host's own instances (`pinctl exec` marks what
        // it runs with the instance's name): their CPUs are planned around when the plan can
        // do without them, and named in a warning either way.
        let config = &self.joint.config;
        let theirs: Vec<&PinnedProcess> = self
            .pinned
            .iter()
            .filter(|p| p.mark.as_ref().is_none_or(|m| config.instance(m).is_none()))
            .collect();
        if theirs.is_empty() {
            return Ok((plan, None));
        }
        let cpus = theirs.iter().fold(CpuSet::new(), |acc, p| acc.union(&p.cpus));
        let named = pinned_names(&theirs);
        Ok(match self.plan_reserving(current, held, &cpus) {
            Ok(around) => (
                around,
                Some(format!(
                    "planned around CPUs {cpus}, held by processes pinned outside pinctl: {named}"
                )),
            ),
            Err(e) => {
                let why = std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string());
                let note = format!(
                    "cannot plan around CPUs {cpus}, held by processes pinned outside pinctl \
                     ({named}): instances share them ({why})"
                );
                (plan, Some(note))
            }
        })
    }

    /// [`Host::plan_keeping`] with `reserve` kept from the instances as `reserve-cpus` is.
    fn plan_reserving(
        &self,
        current: &BTreeMap<String, Placement>,
        held: &BTreeMap<String, Placement>,
        reserve: &CpuSet,
    ) -> Result<Plan, LaunchError> {
        let mut config = pinned(&self.joint.config, held);
        config.host.reserve_cpus = config.host.reserve_cpus.union(reserve);
        let mut running = current.clone();
        running.extend(held.iter().map(|(k, v)| (k.clone(), v.clone())));
        let inputs = PlanInputs { current: running, ..self.joint.inputs.clone() };
        let topology = &self.joint.loaded.topology;
        let mut plan = pinctl_plan::plan(topology, &config, &inputs).map_err(|source| {
            let source = Box::new(source);
            match (self.files.as_slice(), held.is_empty()) {
                ([one], true) => LaunchError::Plan { path: one.config.path.clone(), source },
                _ => LaunchError::HostPlan {
                    files: quoted_paths(self.files.iter().map(|f| &f.config.path)),
                    held: self.holders(held),
                    source,
                },
            }
        })?;
        // Pinning splits services: the placements come back in the files' order.
        let order: BTreeMap<&str, usize> =
            self.joint.config.instances().enumerate().map(|(k, (_, i))| (&*i.name, k)).collect();
        plan.placements.sort_by_key(|p| order.get(p.instance.as_str()).copied());
        Ok(plan)
    }

    /// The file that holds `instance`.
    pub fn file_of(&self, instance: &str) -> Option<&ServiceFile> {
        self.files.iter().find(|f| f.config.instance(instance).is_some())
    }

    /// The file read from `path`.
    pub fn file(&self, path: &Path) -> Option<&ServiceFile> {
        self.files.iter().find(|f| f.config.path == path)
    }

    /// The supervisor name of `file` (`[host] name`, else its file name).
    pub fn supervisor_of(file: &ServiceFile) -> String {
        file.config.supervisor().map(|s| s.name).unwrap_or_default()
    }

    /// `file`'s part of a plan of the host: its instances only; free and kept-free nodes
    /// stay the host's.
    pub fn part(plan: &Plan, file: &ServiceFile) -> Plan {
        let mut part = plan.clone();
        part.placements.retain(|p| file.config.instance(&p.instance).is_some());
        part
    }

    /// `; nodes held by other supervisors: `b.toml`: redis-0 (node 1), ...`, or nothing.
    fn holders(&self, held: &BTreeMap<String, Placement>) -> String {
        let mut by_file: BTreeMap<&Path, Vec<String>> = BTreeMap::new();
        for (name, at) in held {
            let Some(f) = self.file_of(name) else { continue };
            by_file.entry(&f.config.path).or_default().push(format!(
                "{name} (node{} {})",
                plural(at.nodes.len()),
                at.nodes
            ));
        }
        if by_file.is_empty() {
            return String::new();
        }
        let parts: Vec<String> = by_file
            .iter()
            .map(|(path, names)| format!("`{}`: {}", path.display(), names.join(", ")))
            .collect();
        format!("; nodes held by the running instances of other files: {}", parts.join("; "))
    }
}

/// The most pinned processes named in one warning.
const NAMED_PINNED: usize = 8;

/// `PID 812 (irqd) on CPUs 2-3, ...`, the first [`NAMED_PINNED`] of them.
fn pinned_names(processes: &[&PinnedProcess]) -> String {
    let mut names: Vec<String> = processes
        .iter()
        .take(NAMED_PINNED)
        .map(|p| format!("PID {} ({}) on CPUs {}", p.pid, p.name.escape_debug(), p.cpus))
        .collect();
    if processes.len() > NAMED_PINNED {
        names.push(format!("and {} more", processes.len() - NAMED_PINNED));
    }
    names.join(", ")
}

/// The processes of the live machine `loaded` pinned by others: allowed fewer CPUs or nodes
/// than pinctl itself is (its cpuset), kernel threads and pinctl's instances aside. A scan
/// that fails finds none.
pub fn pinned_on(loaded: &LoadedTopology) -> Vec<PinnedProcess> {
    let topology = &loaded.topology;
    let all_cpus =
        topology.host.allowed_cpus.clone().unwrap_or_else(|| {
            topology.nodes.iter().fold(CpuSet::new(), |acc, n| acc.union(&n.cpus))
        });
    let all_nodes =
        topology.host.allowed_nodes.clone().unwrap_or_else(|| {
            topology.nodes.iter().filter(|n| n.has_memory).map(|n| n.id).collect()
        });
    let mut root = pinctl_sysfs::FsRoot::new(Path::new("/"));
    pinctl_sysfs::proc::pinned::scan(&mut root, &all_cpus, &all_nodes, crate::INSTANCE_ENV)
        .map(|p| p.processes)
        .unwrap_or_default()
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn quoted_paths<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> String {
    let quoted: Vec<String> = paths.map(|p| format!("`{}`", p.display())).collect();
    quoted.join(", ")
}

/// `config` with each instance in `held` alone in a service of its own that may use only the
/// nodes it holds: the planner cannot move it.
fn pinned(config: &Config, held: &BTreeMap<String, Placement>) -> Config {
    if held.is_empty() {
        return config.clone();
    }
    let mut out = config.clone();
    out.services.clear();
    for service in &config.services {
        let (fixed, free): (Vec<_>, Vec<_>) =
            service.instances.iter().cloned().partition(|i| held.contains_key(&i.name));
        if !free.is_empty() {
            let mut s = service.clone();
            s.instances = free;
            out.services.push(s);
        }
        for instance in fixed {
            let mut s = service.clone();
            s.only_nodes = Some(held[&instance.name].nodes.clone());
            s.instances = vec![instance];
            out.services.push(s);
        }
    }
    out
}

/// The joint file of `configs` (as [`join`] returns them): what decides which devices a
/// live plan of the host needs.
pub(crate) fn joint_of(configs: &[Config]) -> Config {
    joint_config(configs.iter())
}

/// Every service of `files`, in order, as one file: the first file's host settings (the
/// host's, after [`join`]), each file's watch and interrupt settings by service.
fn joint_config<'a>(mut files: impl Iterator<Item = &'a Config>) -> Config {
    let first = files.next().expect("a host has a file").clone();
    let mut joint = Config::new(first.path.clone(), first.host.clone(), first.services.clone());
    joint.watch = first.watch.clone();
    joint.interrupts = first.interrupts.clone();
    for f in files {
        joint.services.extend(f.services.iter().cloned());
        joint.watch.services.extend(f.watch.services.clone());
        joint.watch.pid_files.extend(f.watch.pid_files.clone());
        joint.interrupts.services.extend(f.interrupts.services.clone());
    }
    joint
}

/// `configs` in the order a host plans them (supervisor name, then path), each with the
/// host-wide settings it leaves out taken from the files that set them. Refused, with both
/// places named, when two files disagree on a host-wide setting or name one supervisor,
/// service or instance.
pub fn join(mut configs: Vec<Config>) -> Result<Vec<Config>, LaunchError> {
    let name = |c: &Config| c.supervisor().map(|s| s.name).unwrap_or_default();
    configs.sort_by(|a, b| (name(a), &a.path).cmp(&(name(b), &b.path)));
    let mut problems = Vec::new();
    names_once(&configs, &mut problems);
    for setting in HOST_WIDE {
        let setters: Vec<usize> =
            (0..configs.len()).filter(|&k| setting.set_at(&configs[k]).is_some()).collect();
        let Some(&first) = setters.first() else { continue };
        for &k in &setters[1..] {
            if !(setting.same)(&configs[first], &configs[k]) {
                problems.push(disagreement(setting, &configs[first], &configs[k]));
            }
        }
        for k in (0..configs.len()).filter(|k| !setters.contains(k)) {
            let from = configs[first].clone();
            (setting.adopt)(&mut configs[k], &from);
        }
    }
    if problems.is_empty() {
        Ok(configs)
    } else {
        Err(LaunchError::Rejected { report: pinctl_config::render_all(&problems, None, false) })
    }
}

/// `[host] KEY` set one way in `first` and another in `second`.
fn disagreement(setting: &HostWide, first: &Config, second: &Config) -> Diagnostic {
    let key = setting.key;
    let at_second = setting.set_at(second).flatten();
    let there = place(first, setting.set_at(first).flatten());
    second
        .diagnostic_at(
            at_second,
            Severity::Error,
            format!("`[host] {key}` differs from {there}: the files of one host must agree on it"),
        )
        .with_help(format!(
            "`{key}` is a setting of the whole host: write the same value in every file \
             that sets it, or leave it out of all but one (docs/config.md)"
        ))
}

/// `` `path:line:column` `` of `span` in `config`'s file, or `` `path` ``.
fn place(config: &Config, span: Option<&Span>) -> String {
    match (&config.spans.file, span) {
        (Some(file), Some(span)) => {
            let at = file.locate(span);
            format!("`{}:{}:{}`", config.path.display(), at.line(), at.column())
        }
        _ => format!("`{}`", config.path.display()),
    }
}

/// Supervisors, services and instances are each named once on a host.
fn names_once(configs: &[Config], problems: &mut Vec<Diagnostic>) {
    let mut supervisors: BTreeMap<String, &Config> = BTreeMap::new();
    let mut services: BTreeMap<&str, (&Config, Option<&Span>)> = BTreeMap::new();
    let mut instances: BTreeMap<&str, (&Config, Option<&Span>)> = BTreeMap::new();
    for config in configs {
        if let Ok(s) = config.supervisor()
            && let Some(before) = supervisors.insert(s.name.clone(), config)
        {
            problems.push(config.diagnostic_at(
                config.spans.host.keys.get("name"),
                Severity::Error,
                format!(
                    "supervisor `{}` is also the supervisor of `{}`: each file of a host needs \
                     its own (set `[host] name`)",
                    s.name,
                    before.path.display()
                ),
            ));
        }
        let mut clashed = BTreeSet::new();
        for (index, service) in config.services.iter().enumerate() {
            let span = config.spans.services.get(index).map(|s| &s.name);
            if let Some((before, at)) = services.insert(&service.name, (config, span)) {
                clashed.insert(&service.name);
                problems.push(clash("service", &service.name, config, span, before, at));
            }
            for instance in &service.instances {
                let seen = instances.insert(&instance.name, (config, span));
                if let Some((before, at)) = seen.filter(|_| !clashed.contains(&service.name)) {
                    problems.push(clash("instance", &instance.name, config, span, before, at));
                }
            }
        }
    }
}

fn clash(
    what: &str,
    name: &str,
    config: &Config,
    span: Option<&Span>,
    before: &Config,
    before_at: Option<&Span>,
) -> Diagnostic {
    config.diagnostic_at(
        span,
        Severity::Error,
        format!(
            "{what} `{name}` is also defined by {}: the files of one host must name their \
             services and instances apart",
            place(before, before_at)
        ),
    )
}

/// What gathering a live host's files found besides the files: one line each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gathered {
    /// The files of the host, the files asked for first.
    pub paths: Vec<PathBuf>,
    /// Files left out, and why (an untrusted folder, a file that does not load).
    pub notes: Vec<String>,
}

impl Gathered {
    /// Adds `path` unless it is already there (the same file by another name included).
    pub fn add(&mut self, path: PathBuf) {
        if !self.paths.iter().any(|a| same_file(a, &path)) {
            self.paths.push(path);
        }
    }
}

/// The files of the live host of `asked`: each one, the other `*.toml` files of its folder
/// when the folder passes the state folder's trust rules (else they are left out, and a note
/// says why: a file another user could have put there never steers a plan), and `running`,
/// the files of the supervisors running on the host.
pub fn live_files(asked: &[PathBuf], running: &[PathBuf]) -> Gathered {
    let mut out = Gathered { paths: asked.to_vec(), notes: Vec::new() };
    for path in running {
        out.add(path.clone());
    }
    let folders: BTreeSet<PathBuf> = asked.iter().map(|p| folder_of(p)).collect();
    for folder in folders {
        if let Err(e) = pinctl_trust::check_folder(&folder) {
            out.notes.push(format!(
                "the other files of `{}` are not planned with this host: {e}",
                folder.display()
            ));
            continue;
        }
        match service_files_in(&folder) {
            Ok(found) => found.into_iter().for_each(|p| out.add(p)),
            Err(why) => out.notes.push(why),
        }
    }
    out
}

fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (std::fs::metadata(a), std::fs::symlink_metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// The regular `*.toml` files of `folder` (links are not followed), sorted, at most
/// [`MAX_HOST_FILES`].
fn service_files_in(folder: &Path) -> Result<Vec<PathBuf>, String> {
    let why = |e: std::io::Error| format!("cannot list `{}`: {e}", folder.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).map_err(why)? {
        let entry = entry.map_err(why)?;
        let path = entry.path();
        let is_toml = path.extension().is_some_and(|e| e == "toml");
        if is_toml && entry.file_type().map_err(why)?.is_file() {
            found.push(path);
            if found.len() > MAX_HOST_FILES {
                return Err(format!(
                    "`{}` holds more than {MAX_HOST_FILES} service files: its other files are \
                     not planned with this host",
                    folder.display()
                ));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Loads the files of `gathered`: those asked for (the first `asked` paths) must load; another
/// that does not is left out with a note (it could not hold nodes either).
pub fn load_gathered(gathered: &mut Gathered, asked: usize) -> Result<Vec<Config>, LaunchError> {
    let mut configs = Vec::new();
    let mut kept = Vec::new();
    for (k, path) in gathered.paths.iter().enumerate() {
        match load_config(path) {
            Ok(c) => {
                configs.push(c);
                kept.push(path.clone());
            }
            Err(e) if k < asked => return Err(e),
            Err(e) => {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                gathered.notes.push(format!(
                    "`{}` is not planned with this host: it does not load ({first})",
                    path.display()
                ));
            }
        }
    }
    gathered.paths = kept;
    Ok(configs)
}

/// The placement of instance `service` of the file at `config_path` on the live machine,
/// planned with the host's other files ([`Host`], [`live_files`]; `running`:
/// the files of the supervisors running on the host). Only the devices the host's plan
/// depends on are read ([`crate::planned::devices_needed`]): this runs in every unit's start-up.
pub fn planned_placement(
    config_path: &Path,
    service: &str,
    running: &[std::path::PathBuf],
) -> Result<PlannedPlacement, LaunchError> {
    let mut gathered = live_files(&[config_path.to_path_buf()], running);
    let configs = load_gathered(&mut gathered, 1)?;
    let configs = join(configs)?;
    let joint = joint_of(&configs);
    // The routing table is read once: for the devices to discover and for `keep-free`.
    let route = default_route_if_unset(&joint, Path::new("/"));
    let (_, loaded) = read_needed(&joint, Path::new("/"), route.as_ref(), |scope| {
        LoadedTopology::live_with(scope).map_err(|e| LaunchError::Topology(Box::new(e)))
    })?;
    let cpuset = loaded.topology.host.allowed_cpus.clone();
    let host = Host::check(configs, loaded, false)?;
    let (plan, pinned_note) = host.plan_around_pinned(&BTreeMap::new(), &BTreeMap::new())?;
    let own = host.file(config_path).map(|f| Host::part(&plan, f));
    match own.as_ref().and_then(|p| p.instance(service)) {
        Some(p) => Ok(PlannedPlacement { placement: p.placement.clone(), cpuset, pinned_note }),
        None => {
            let names: Vec<&str> =
                own.iter().flat_map(|p| &p.placements).map(|p| p.instance.as_str()).collect();
            Err(LaunchError::NoInstance {
                path: config_path.to_path_buf(),
                service: service.to_string(),
                instances: names.join(", "),
            })
        }
    }
}
