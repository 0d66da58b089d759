//! One interrupt's own files: `/proc/irq/N/smp_affinity_list` (the CPUs it may be delivered
//! to; root may write it), `effective_affinity_list` (where the kernel really delivers it,
//! Linux 4.15+), `node` (its device's node, `-1` when unknown) and
//! `/sys/kernel/irq/N/actions` (its handlers' names, Linux 4.17+ with sparse interrupts).

use pinctl_topology::{CpuSet, NodeId};

use crate::error::DiscoveryError;
use crate::fsroot::{Fact, FsRoot};
use crate::parse::{self, ParseError};

/// `proc/irq/N/smp_affinity_list`, relative to the root.
pub fn affinity_file(irq: u32) -> String {
    format!("proc/irq/{irq}/smp_affinity_list")
}

/// `proc/irq/N/effective_affinity_list`.
pub fn effective_affinity_file(irq: u32) -> String {
    format!("proc/irq/{irq}/effective_affinity_list")
}

/// `proc/irq/N/node`.
pub fn node_file(irq: u32) -> String {
    format!("proc/irq/{irq}/node")
}

/// `sys/kernel/irq/N/actions`.
pub fn actions_file(irq: u32) -> String {
    format!("sys/kernel/irq/{irq}/actions")
}

/// The longest handler list kept: a handful of names (a shared legacy line names each
/// handler); anything longer is cut where a name would be.
pub const MAX_NAME_BYTES: usize = 1024;

/// An `actions` file: the handlers' names separated by commas (`eth0-TxRx-3`, or
/// `ehci_hcd:usb1,uhci_hcd:usb2`), as `/proc/interrupts` shows them (`, `-separated), at most
/// [`MAX_NAME_BYTES`].
pub fn actions(text: &str) -> Result<String, ParseError> {
    let names: Vec<&str> =
        text.trim().split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    Ok(cut(&names.join(", ")))
}

/// `name` cut to [`MAX_NAME_BYTES`] at a character boundary.
pub fn cut(name: &str) -> String {
    if name.len() <= MAX_NAME_BYTES {
        return name.to_string();
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_string()
}

/// What one interrupt's files say; `None` where a file is missing or (with a warning) broken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqFiles {
    pub affinity: Option<CpuSet>,
    pub effective_affinity: Option<CpuSet>,
    pub node: Option<NodeId>,
    /// `None` without `sys/kernel/irq`: `/proc/interrupts` names it then.
    pub actions: Option<String>,
}

/// Reads the files of interrupt `irq`.
pub fn read(fs: &mut FsRoot, irq: u32) -> Result<IrqFiles, DiscoveryError> {
    let affinity = fs
        .fact(&affinity_file(irq), parse::id_list, || format!("IRQ {irq}'s affinity is unknown"))?
        .value();
    let effective_affinity = fs
        .fact(&effective_affinity_file(irq), parse::id_list, || {
            format!("IRQ {irq}'s effective affinity is unknown")
        })?
        .value();
    let node = match fs
        .fact(&node_file(irq), parse::numa_node, || format!("IRQ {irq}'s node is unknown"))?
    {
        Fact::Value(n) => n,
        Fact::Absent | Fact::Broken => None,
    };
    let actions = fs
        .fact(&actions_file(irq), actions, || format!("IRQ {irq} is named from /proc/interrupts"))?
        .value();
    Ok(IrqFiles { affinity, effective_affinity, node, actions })
}

/// Whether the kernel manages interrupt `name`'s affinity, as far as the name tells: the
/// drivers that always ask for managed vectors (`pci_alloc_irq_vectors_affinity`) name their
/// queues so. NVMe's I/O queues (`nvme0q1`...; `nvme0q0` is the admin queue, whose vector is
/// not managed, and a vector it shares with queue 1 is not either), virtio-blk's request
/// queues (`virtio0-req.0`) and virtio-scsi's (`virtio1-request.0`). Any other interrupt the
/// kernel refuses to move is found when pinctl tries (EIO).
pub fn managed_by_name(name: &str) -> bool {
    let handlers: Vec<&str> = name.split(',').map(str::trim).filter(|h| !h.is_empty()).collect();
    !handlers.is_empty() && handlers.iter().all(|h| managed_queue(h))
}

fn managed_queue(handler: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = handler.strip_prefix("nvme") {
        // nvme<controller>q<queue>
        return rest.split_once('q').is_some_and(|(c, q)| {
            digits(c) && digits(q) && q.parse::<u32>().is_ok_and(|q| q >= 1)
        });
    }
    if let Some(rest) = handler.strip_prefix("virtio") {
        return rest.split_once('-').is_some_and(|(n, queue)| {
            digits(n)
                && ["req.", "request."].iter().any(|p| queue.strip_prefix(p).is_some_and(digits))
        });
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_queues_by_name() {
        for managed in ["nvme0q1", "nvme12q64", "virtio0-req.0", "virtio3-request.12"] {
            assert!(managed_by_name(managed), "{managed}");
        }
        for movable in [
            "nvme0q0",
            "nvme0q0, nvme0q1",
            "eth0-TxRx-3",
            "virtio2-input.0",
            "virtio0-config",
            "nvmeXq1",
            "nvme0q",
            "",
            "mlx5_comp3@pci:0000:41:00.0",
        ] {
            assert!(!managed_by_name(movable), "{movable}");
        }
    }

    #[test]
    fn actions_are_listed_as_proc_interrupts_does() {
        assert_eq!(actions("eth0-TxRx-3\n").unwrap(), "eth0-TxRx-3");
        assert_eq!(
            actions("ehci_hcd:usb1,uhci_hcd:usb2\n").unwrap(),
            "ehci_hcd:usb1, uhci_hcd:usb2"
        );
        assert_eq!(actions("\n").unwrap(), "");
        let long = "é".repeat(MAX_NAME_BYTES);
        let cut = actions(&long).unwrap();
        assert!(cut.len() <= MAX_NAME_BYTES && cut.chars().all(|c| c == 'é'));
    }
}
