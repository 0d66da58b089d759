//! From TiUP's instances on one host to a pinctl service file: one service per instance,
//! named after its component and port (`tikv-20160`), with the settings of its component from
//! a short table ([`COMPONENTS`]) that a pinctl mapping file can override (docs/fleet.md,
//! "TiUP"). Planning that file on the host's capture is planning the host.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pinctl_plan::Plan;
use pinctl_topology::{CpuSet, MemoryPolicy, Topology};

use super::edit::NumaFields;
use super::read::{Instance, TiupTopology};

/// A TiUP component pinctl can place: one that has `numa_node` in TiUP's spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    /// The topology's section: `tikv_servers`.
    pub section: &'static str,
    /// TiUP's name for it, and the `[component.NAME]` of a mapping file: `tikv`.
    pub name: &'static str,
    /// The key of the port that names an instance, and its default.
    pub port_key: &'static str,
    pub default_port: u32,
    /// Whether TiUP's spec has `numa_cores` for it (TiDB, TiKV, TiFlash only); without it an
    /// instance can only be given whole nodes.
    pub numa_cores: bool,
    /// Whether it stores data: placed near the drive of its `data_dir`.
    pub storage: bool,
    /// The settings pinctl plans it with unless the mapping file says otherwise.
    pub settings: &'static [(&'static str, &'static str)],
}

const HEAVY: &[(&str, &str)] = &[("share-weight", "4")];

/// Every component whose spec in pingcap/tiup `pkg/cluster/spec` has `numa_node`, in the
/// order of `Specification`. Sections not here (`grafana_servers`, TiSpark) are left alone.
pub const COMPONENTS: &[Component] = &[
    Component {
        section: "tidb_servers",
        name: "tidb",
        port_key: "port",
        default_port: 4000,
        numa_cores: true,
        storage: false,
        settings: &[],
    },
    Component {
        section: "tikv_servers",
        name: "tikv",
        port_key: "port",
        default_port: 20160,
        numa_cores: true,
        storage: true,
        settings: HEAVY,
    },
    Component {
        section: "tiflash_servers",
        name: "tiflash",
        port_key: "tcp_port",
        default_port: 9000,
        numa_cores: true,
        storage: true,
        settings: HEAVY,
    },
    Component {
        section: "tiproxy_servers",
        name: "tiproxy",
        port_key: "port",
        default_port: 6000,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "pd_servers",
        name: "pd",
        port_key: "client_port",
        default_port: 2379,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "tso_servers",
        name: "tso",
        port_key: "port",
        default_port: 3379,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "scheduling_servers",
        name: "scheduling",
        port_key: "port",
        default_port: 3379,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "resource_manager_servers",
        name: "resource_manager",
        port_key: "port",
        default_port: 3379,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "router_servers",
        name: "router",
        port_key: "port",
        default_port: 3379,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "tidb_dashboard_servers",
        name: "tidb_dashboard",
        port_key: "port",
        default_port: 12333,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "pump_servers",
        name: "pump",
        port_key: "port",
        default_port: 8250,
        numa_cores: false,
        storage: true,
        settings: &[],
    },
    Component {
        section: "drainer_servers",
        name: "drainer",
        port_key: "port",
        default_port: 8249,
        numa_cores: false,
        storage: true,
        settings: &[],
    },
    Component {
        section: "cdc_servers",
        name: "cdc",
        port_key: "port",
        default_port: 8300,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "kvcdc_servers",
        name: "kvcdc",
        port_key: "port",
        default_port: 8600,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
    Component {
        section: "monitoring_servers",
        name: "prometheus",
        port_key: "port",
        default_port: 9090,
        numa_cores: false,
        storage: true,
        settings: &[],
    },
    Component {
        section: "alertmanager_servers",
        name: "alertmanager",
        port_key: "web_port",
        default_port: 9093,
        numa_cores: false,
        storage: false,
        settings: &[],
    },
];

/// The component of a section.
pub fn component(section: &str) -> Option<&'static Component> {
    COMPONENTS.iter().find(|c| c.section == section)
}

/// Keys a mapping file may not give a component: TiUP decides them (it starts one process
/// per instance, with `numactl --membind` on `numa_node`).
const DECIDED_BY_TIUP: [&str; 4] = ["command", "instances", "memory-policy", "unit"];

/// The mapping file (`-c FILE` beside `--tiup`): `[host]` for every host's service file,
/// `[component.NAME]` settings, and `[data-dirs]`, which drive holds which data folder.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    pub path: Option<PathBuf>,
    host: toml::Table,
    components: BTreeMap<String, toml::Table>,
    /// Folder prefix -> device, longest first.
    data_dirs: Vec<(String, String)>,
}

/// Why a mapping file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

impl Mapping {
    /// Reads the mapping file at `path` from `text`.
    pub fn parse(path: &Path, text: &str) -> Result<Mapping, MappingError> {
        let invalid = |message: String| MappingError::Invalid { path: path.to_path_buf(), message };
        let mut table: toml::Table =
            text.parse().map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        let mut mapping = Mapping { path: Some(path.to_path_buf()), ..Mapping::default() };
        if let Some(host) = table.remove("host") {
            mapping.host =
                into_table(host).ok_or_else(|| invalid("`host` is not a table".into()))?;
        }
        if let Some(components) = table.remove("component") {
            let components = into_table(components)
                .ok_or_else(|| invalid("`component` is not a table".into()))?;
            for (name, settings) in components {
                if !COMPONENTS.iter().any(|c| c.name == name) {
                    let known: Vec<&str> = COMPONENTS.iter().map(|c| c.name).collect();
                    return Err(invalid(format!(
                        "unknown component `{name}` (known: {})",
                        known.join(", ")
                    )));
                }
                let settings = into_table(settings)
                    .ok_or_else(|| invalid(format!("`component.{name}` is not a table")))?;
                if let Some(key) = DECIDED_BY_TIUP.iter().find(|k| settings.contains_key(**k)) {
                    return Err(invalid(format!(
                        "`component.{name}.{key}`: TiUP decides it (one process per instance, memory bound to `numa_node`)"
                    )));
                }
                mapping.components.insert(name, settings);
            }
        }
        if let Some(dirs) = table.remove("data-dirs") {
            let dirs =
                into_table(dirs).ok_or_else(|| invalid("`data-dirs` is not a table".into()))?;
            for (prefix, device) in dirs {
                let toml::Value::String(device) = device else {
                    return Err(invalid(format!("`data-dirs.\"{prefix}\"` is not a device name")));
                };
                if !prefix.starts_with('/') {
                    return Err(invalid(format!(
                        "`data-dirs.\"{prefix}\"` is not an absolute folder"
                    )));
                }
                mapping.data_dirs.push((prefix.trim_end_matches('/').to_string(), device));
            }
            mapping.data_dirs.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        }
        if let Some(key) = table.keys().next() {
            return Err(invalid(format!(
                "unknown table `{key}` (expected host, component, data-dirs)"
            )));
        }
        Ok(mapping)
    }

    /// The drive `[data-dirs]` says holds `dir`: the longest prefix that ends at a `/`.
    pub fn drive_of(&self, dir: &str) -> Option<&str> {
        self.data_dirs
            .iter()
            .find(|(prefix, _)| {
                dir == prefix
                    || dir.strip_prefix(prefix.as_str()).is_some_and(|r| r.starts_with('/'))
            })
            .map(|(_, d)| d.as_str())
    }
}

fn into_table(v: toml::Value) -> Option<toml::Table> {
    match v {
        toml::Value::Table(t) => Some(t),
        _ => None,
    }
}

/// An instance as pinctl plans it: its service's name (`tikv-20160`), where TiUP deploys and
/// stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned<'a> {
    pub instance: &'a Instance,
    pub component: &'static Component,
    pub name: String,
    pub deploy_dir: String,
    pub data_dir: Option<String>,
}

/// What TiUP would use for `instance`: its port (or the component's default), its deploy
/// and data folders (its own, else `global`'s joined with `NAME-PORT`, as TiUP does).
pub fn planned<'a>(topology: &TiupTopology, instance: &'a Instance) -> Option<Planned<'a>> {
    let component = component(&instance.section)?;
    // TiUP's ports are integers; anything else (which TiUP refuses) is named by the
    // instance's place instead, so that no text of the topology reaches a TOML table name.
    let port = match instance.get(component.port_key) {
        None => component.default_port.to_string(),
        Some(f) if !f.value.is_empty() && f.value.bytes().all(|b| b.is_ascii_digit()) => {
            f.value.clone()
        }
        Some(_) => format!("at{}", instance.index),
    };
    let dir_name = format!("{}-{port}", component.name.replace('_', "-"));
    let folder = |key: &str, global: Option<&String>| match instance.get(key) {
        Some(f) if f.value.starts_with('/') => Some(f.value.clone()),
        _ => global
            .filter(|g| g.starts_with('/'))
            .map(|g| format!("{}/{dir_name}", g.trim_end_matches('/'))),
    };
    let deploy_dir = folder("deploy_dir", topology.global_deploy_dir.as_ref())
        .unwrap_or_else(|| format!("deploy/{dir_name}"));
    let data_dir = folder("data_dir", topology.global_data_dir.as_ref());
    let name = dir_name.replace('.', "-").to_lowercase();
    Some(Planned { instance, component, name, deploy_dir, data_dir })
}

/// The pinctl service file of one host's instances: `[host]` from the mapping, then a
/// service per instance with its component's settings (the table's, then the mapping's),
/// `near` its data folder's drive when `[data-dirs]` knows it. Also the instances whose drive
/// is unknown, to be said.
pub fn service_file(
    host: &str,
    instances: &[Planned<'_>],
    mapping: &Mapping,
    source: &Path,
) -> (String, Vec<String>) {
    let mut text = format!(
        "# The TiUP instances of host `{host}` in {}, as `pinctl fleet --tiup` plans them.\n",
        source.display()
    );
    let mut unknown = Vec::new();
    if !mapping.host.is_empty() {
        text.push_str("[host]\n");
        for (key, value) in &mapping.host {
            let _ = writeln!(text, "{key} = {value}");
        }
    }
    for p in instances {
        let _ = write!(
            text,
            "\n[service.{}]\ncommand = [{}]\nmemory-policy = \"bind\"\n",
            p.name,
            toml::Value::String(format!(
                "{}/scripts/run_{}.sh",
                p.deploy_dir,
                p.component.name.replace('_', "-")
            ))
        );
        let mut settings: BTreeMap<&str, String> =
            p.component.settings.iter().map(|(k, v)| (*k, v.to_string())).collect();
        if p.component.storage {
            match p.data_dir.as_deref().map(|d| (d, mapping.drive_of(d))) {
                Some((_, Some(drive))) => {
                    settings.insert("near", toml::Value::Array(vec![drive.into()]).to_string());
                }
                Some((dir, None)) => {
                    unknown.push(format!("{}: no drive known for data_dir `{dir}`", p.name))
                }
                None => {}
            }
        }
        if let Some(own) = mapping.components.get(p.component.name) {
            for (key, value) in own {
                settings.insert(key.as_str(), value.to_string());
            }
        }
        for (key, value) in settings {
            let _ = writeln!(text, "{key} = {value}");
        }
    }
    (text, unknown)
}

/// What TiUP's `numa_node`/`numa_cores` of `p` must say for its planned placement: its nodes,
/// and its CPUs when it has fewer than those nodes hold. Refused when TiUP cannot say it (a
/// component without `numa_cores` given part of a node, memory not bound to its nodes).
pub fn numa_fields(
    p: &Planned<'_>,
    plan: &Plan,
    topology: &Topology,
) -> Result<NumaFields, String> {
    let placed = plan.instance(&p.name).ok_or_else(|| format!("{} is not in the plan", p.name))?;
    let placement = &placed.placement;
    if placement.memory_policy != MemoryPolicy::Bind || placement.memory_nodes != placement.nodes {
        return Err(format!(
            "{}: planned with memory {} {}, but TiUP binds memory to `numa_node` ({})",
            p.name, placement.memory_policy, placement.memory_nodes, placement.nodes
        ));
    }
    let whole: CpuSet = placement
        .nodes
        .iter()
        .filter_map(|n| topology.node(n))
        .flat_map(|n| n.cpus.iter())
        .collect();
    let cores = (placement.cpus != whole).then(|| placement.cpus.to_string());
    if cores.is_some() && !p.component.numa_cores {
        return Err(format!(
            "{}: planned on CPUs {} of node {}, but TiUP's {} has no `numa_cores`: give it whole nodes",
            p.name, placement.cpus, placement.nodes, p.component.name
        ));
    }
    Ok(NumaFields { node: placement.nodes.to_string(), cores })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_is_on_the_drive_of_its_longest_folder_prefix() {
        let m = Mapping::parse(
            Path::new("m.toml"),
            "[data-dirs]\n\"/data\" = \"sda\"\n\"/data1/\" = \"nvme0n1\"\n",
        )
        .unwrap();
        assert_eq!(m.drive_of("/data1/tikv-20160"), Some("nvme0n1"));
        assert_eq!(m.drive_of("/data1"), Some("nvme0n1"));
        assert_eq!(m.drive_of("/data/x"), Some("sda"));
        assert_eq!(m.drive_of("/data10/x"), None, "a prefix ends at a `/`");
        assert_eq!(m.drive_of("/other"), None);
    }

    #[test]
    fn instances_are_named_and_housed_as_tiup_does() {
        let text = "global:\n  deploy_dir: /tidb-deploy\n  data_dir: /tidb-data\n\
                    tiflash_servers:\n  - host: a\n    tcp_port: 9001\n\
                    tikv_servers:\n  - host: a\n    data_dir: /data2/kv\n\
                    grafana_servers:\n  - host: a\n";
        let t = super::super::read::read(Path::new("t.yaml"), text).unwrap();
        let flash = planned(&t, &t.instances[0]).unwrap();
        assert_eq!(flash.name, "tiflash-9001");
        assert_eq!(flash.deploy_dir, "/tidb-deploy/tiflash-9001");
        assert_eq!(flash.data_dir.as_deref(), Some("/tidb-data/tiflash-9001"));
        let kv = planned(&t, &t.instances[1]).unwrap();
        assert_eq!((kv.name.as_str(), kv.data_dir.as_deref()), ("tikv-20160", Some("/data2/kv")));
        assert!(planned(&t, &t.instances[2]).is_none(), "grafana has no numa_node");
        let hostile = "tikv_servers:\n  - host: a\n    port: \"1]\\n[host]\\nx = 1\"\n";
        let h = super::super::read::read(Path::new("h.yaml"), hostile).unwrap();
        assert_eq!(planned(&h, &h.instances[0]).unwrap().name, "tikv-at0");
        let mapping =
            Mapping::parse(Path::new("m.toml"), "[data-dirs]\n\"/data2\" = \"nvme1n1\"\n").unwrap();
        let (file, unknown) = service_file("a", &[flash, kv], &mapping, Path::new("t.yaml"));
        assert!(file.contains("[service.tikv-20160]\ncommand = [\"/tidb-deploy/tikv-20160/scripts/run_tikv.sh\"]\nmemory-policy = \"bind\"\nnear = [\"nvme1n1\"]\nshare-weight = 4\n"), "{file}");
        assert_eq!(
            unknown,
            ["tiflash-9001: no drive known for data_dir `/tidb-data/tiflash-9001`"]
        );
        pinctl_config::parse(Path::new("a.toml"), &file).unwrap();
    }
}
