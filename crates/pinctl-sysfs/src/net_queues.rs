//! A network interface's queues: `sys/class/net/<if>/queues/rx-N/rps_cpus` (the CPUs receive
//! packet steering hands the queue's packets to; all zeros: off) and `tx-N/xps_cpus` (the
//! CPUs whose packets go out through the queue), both hexadecimal masks.

use pinctl_topology::{CpuSet, NetQueues, QueueCpus};

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse;

/// The most queues of one kind read: the kernel's limit for one device is 4096
/// (`netdev_max_queues`' default cap); a listing with more is not the kernel's.
pub const MAX_QUEUES: u32 = 4095;

/// `sys/class/net/<if>/queues/<kind>-<n>/<file>`, relative to the root: where the mask is
/// written on the live machine.
pub fn queue_file(interface: &str, rx: bool, queue: u32) -> String {
    let (dir, file) = if rx { ("rx", "rps_cpus") } else { ("tx", "xps_cpus") };
    format!("sys/class/net/{interface}/queues/{dir}-{queue}/{file}")
}

/// The queues of `interface`; `None` when it has no `queues` folder.
pub fn read(fs: &mut FsRoot, interface: &str) -> Result<Option<NetQueues>, DiscoveryError> {
    // Through the interface's own folder (the class entry is a link): a capture keeps files
    // at their real place only.
    let Some(device) = fs.link(&format!("sys/class/net/{interface}"))? else { return Ok(None) };
    let dir = format!("{device}/queues");
    let Some(names) = fs.list(&dir)? else { return Ok(None) };
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    for name in &names {
        let (is_rx, n) = match (name.strip_prefix("rx-"), name.strip_prefix("tx-")) {
            (Some(n), _) => (true, n),
            (_, Some(n)) => (false, n),
            _ => continue,
        };
        let Some(queue) = n
            .parse::<u32>()
            .ok()
            .filter(|q| *q <= MAX_QUEUES && n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let file = format!("{dir}/{name}/{}", if is_rx { "rps_cpus" } else { "xps_cpus" });
        let cpus: Option<CpuSet> = fs
            .fact(&file, parse::id_mask, || {
                format!("{name} of {interface} is taken to steer nothing")
            })?
            .value();
        let q = QueueCpus { queue, cpus };
        if is_rx { rx.push(q) } else { tx.push(q) }
    }
    rx.sort_by_key(|q| q.queue);
    tx.sort_by_key(|q| q.queue);
    Ok(Some(NetQueues { interface: interface.to_string(), rx, tx }))
}
