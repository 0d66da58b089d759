//! Which devices a `near` entry means: a device name, a `/dev` node, or (on the live machine) a
//! path on a filesystem; and which interfaces carry the default route.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use crate::error::{DiscoveryError, NearError};
use crate::fsroot::{FsRoot, basename, parent, parsed};
use crate::parse;
use crate::source::LoadedTopology;

/// Devices named by a `near` entry: a device name in the topology (`nvme0n1`, `eth1`,
/// `nvidia0`), another name of one (`card1` or `renderD129` of a GPU named `nvidia0`), a PCI
/// address (`0000:41:00.0`, or `41:00.0` in domain 0: every device on that function),
/// `/dev/sdb` (a partition means its whole disk), or (live machine only) any path on a
/// filesystem -> the block device(s) under it (stat `st_dev` -> `/sys/dev/block/MAJ:MIN` ->
/// whole disk for a partition; dm/md keep their own name, they have members).
pub fn resolve_near(loaded: &LoadedTopology, spec: &str) -> Result<Vec<String>, NearError> {
    let topo = &loaded.topology;
    if topo.device(spec).is_some() {
        return Ok(vec![spec.to_string()]);
    }
    if let Some(d) = topo.devices.iter().find(|d| d.aliases.iter().any(|a| a == spec)) {
        return Ok(vec![d.name.clone()]);
    }
    if let Some(address) = pci_address(spec) {
        let on_function: Vec<String> = topo
            .devices
            .iter()
            .filter(|d| d.pci.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(&address)))
            .map(|d| d.name.clone())
            .collect();
        if on_function.is_empty() {
            return Err(unknown(loaded, spec));
        }
        return Ok(on_function);
    }
    if !is_path(spec) {
        return Err(unknown(loaded, spec));
    }
    if !loaded.is_live {
        // Without the machine, only `/dev/NAME` can be read, by the kernel's naming rules.
        let Some(name) = spec.strip_prefix("/dev/").filter(|n| !n.contains('/')) else {
            return Err(NearError::PathNeedsLiveMachine { spec: spec.to_string() });
        };
        let whole = match &loaded.fs_root {
            Some(root) => whole_disk_in_tree(root, name)?,
            None => None,
        }
        .or_else(|| whole_disk_by_name(loaded, name));
        return match whole {
            Some(d) if topo.device(&d).is_some() => Ok(vec![d]),
            _ => Err(unknown(loaded, spec)),
        };
    }
    let root = loaded.fs_root.clone().unwrap_or_else(|| "/".into());
    let name = path_device(&root, spec)?;
    if topo.device(&name).is_some() {
        Ok(vec![name])
    } else {
        Err(NearError::DeviceNotInTopology { spec: spec.to_string(), device: name })
    }
}

/// Whether a `near` entry is a path (`/data0`, `./data`, `../data`) rather than a name.
pub fn is_path(spec: &str) -> bool {
    spec.starts_with('/') || spec.starts_with("./") || spec.starts_with("../")
}

/// The block device a path on the live machine lives on, as `near` means it: `stat` ->
/// `st_dev` (`st_rdev` for a device node) -> `sys/dev/block/MAJ:MIN` under `root` -> its
/// whole disk for a partition; dm and md volumes keep their own name. An anonymous `st_dev`
/// (btrfs) is looked up by the mount's source.
pub fn path_device(root: &Path, spec: &str) -> Result<String, NearError> {
    let io = |source| NearError::Io { path: spec.into(), source };
    let meta = fs::metadata(spec).map_err(io)?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = parse::dev_major_minor(dev);
    let mut name = block_device_name(root, major, minor)?;
    if name.is_none() {
        // btrfs and some others report an anonymous st_dev: the mount's source names the disk.
        name = mount_source_device(root, major, minor)?;
    }
    name.ok_or_else(|| NearError::NotOnBlockDevice { spec: spec.to_string(), major, minor })
}

/// `spec` as a full PCI address: `0000:41:00.0` as it is, `41:00.0` in domain 0000 (as lspci
/// prints it).
fn pci_address(spec: &str) -> Option<String> {
    if parse::is_pci_address(spec) {
        return Some(spec.to_string());
    }
    let full = format!("0000:{spec}");
    parse::is_pci_address(&full).then_some(full)
}

fn unknown(loaded: &LoadedTopology, spec: &str) -> NearError {
    let names: Vec<&str> = loaded.topology.devices.iter().map(|d| d.name.as_str()).collect();
    let known = if names.is_empty() { "none".to_string() } else { names.join(", ") };
    NearError::UnknownDevice { spec: spec.to_string(), known }
}

/// The whole disk of a block device, from `sys/class/block/NAME` in a tree.
fn whole_disk_in_tree(root: &Path, name: &str) -> Result<Option<String>, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let Some(path) = fs.link(&format!("sys/class/block/{name}"))? else { return Ok(None) };
    Ok(Some(whole_of(&mut fs, &path)?))
}

fn whole_of(fs: &mut FsRoot, path: &str) -> Result<String, DiscoveryError> {
    if fs.read(&format!("{path}/partition"))?.is_some() {
        Ok(basename(parent(path)).to_string())
    } else {
        Ok(basename(path).to_string())
    }
}

/// The kernel names partitions `<disk><n>`, or `<disk>p<n>` when the disk name ends in a digit
/// (`sda1`, `nvme0n1p2`, `mmcblk0p1`): the disk is the name with that suffix removed, if the
/// topology has it.
fn whole_disk_by_name(loaded: &LoadedTopology, name: &str) -> Option<String> {
    let topo = &loaded.topology;
    if topo.device(name).is_some() {
        return Some(name.to_string());
    }
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.len() == name.len() {
        return None;
    }
    if let Some(disk) = base.strip_suffix('p').filter(|d| d.ends_with(|c: char| c.is_ascii_digit()))
    {
        if topo.device(disk).is_some() {
            return Some(disk.to_string());
        }
    }
    (!base.ends_with(|c: char| c.is_ascii_digit()) && topo.device(base).is_some())
        .then(|| base.to_string())
}

/// `/sys/dev/block/MAJ:MIN` -> the device's name, its whole disk for a partition.
fn block_device_name(root: &Path, major: u32, minor: u32) -> Result<Option<String>, NearError> {
    let mut fs = FsRoot::new(root);
    let Some(path) = fs.link(&format!("sys/dev/block/{major}:{minor}"))? else { return Ok(None) };
    Ok(Some(whole_of(&mut fs, &path)?))
}

fn mount_source_device(root: &Path, major: u32, minor: u32) -> Result<Option<String>, NearError> {
    let mut fs = FsRoot::new(root);
    let Some(text) = fs.read("proc/self/mountinfo")?.map(str::to_string) else { return Ok(None) };
    let mounts = parse::mountinfo(&text)
        .map_err(|source| DiscoveryError::Parse { path: fs.full("proc/self/mountinfo"), source })?;
    for m in mounts.iter().filter(|m| m.major == major && m.minor == minor) {
        if !m.source.starts_with("/dev/") {
            continue;
        }
        let Ok(meta) = fs::metadata(&m.source) else { continue };
        if meta.file_type().is_block_device() {
            let (ma, mi) = parse::dev_major_minor(meta.rdev());
            if let Some(name) = block_device_name(root, ma, mi)? {
                return Ok(Some(name));
            }
        }
    }
    Ok(None)
}

/// Interfaces of the default route(s): `/proc/net/route` (destination `00000000`) and
/// `/proc/net/ipv6_route` (`::/0`), under a root, in file order without repeats.
pub fn default_route_interfaces(root: &Path) -> Result<Vec<String>, DiscoveryError> {
    let mut fs = FsRoot::new(root);
    let mut out: Vec<String> = Vec::new();
    let v4 = parsed(&mut fs, "proc/net/route", parse::default_routes_v4)?;
    let v6 = parsed(&mut fs, "proc/net/ipv6_route", parse::default_routes_v6)?;
    for name in v4.into_iter().flatten().chain(v6.into_iter().flatten()) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}
