//! Which interrupts a PCI function raises: `sys/bus/pci/devices/<address>/msi_irqs/` holds one
//! entry per MSI or MSI-X vector, named by its interrupt number; a function on a legacy line
//! names it in its `irq` file (0: none).

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse;
use crate::proc::interrupts::MAX_IRQ;

const PCI_DIR: &str = "sys/bus/pci/devices";

/// The interrupts of the PCI function `address` (`0000:41:00.0`), ascending; empty for a
/// function that has none or is not there. Names that are not interrupt numbers up to
/// [`MAX_IRQ`] are not the kernel's and are passed over (they cost only that vector); a broken
/// `irq` file costs that line, with a warning.
pub fn read(fs: &mut FsRoot, address: &str) -> Result<Vec<u32>, DiscoveryError> {
    // Through the function's own folder (the class entry is a link): a capture keeps files
    // at their real place only.
    let Some(function) = fs.link(&format!("{PCI_DIR}/{address}"))? else { return Ok(Vec::new()) };
    let dir = format!("{function}/msi_irqs");
    let mut irqs: Vec<u32> = fs
        .list(&dir)?
        .unwrap_or_default()
        .iter()
        .filter(|n| !n.is_empty() && n.len() <= 7 && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse::<u32>().ok())
        .filter(|&n| n <= MAX_IRQ)
        .collect();
    if irqs.is_empty() {
        let line = fs
            .fact(&format!("{function}/irq"), parse::uint, || {
                format!("the legacy interrupt of {address} is unknown")
            })?
            .value();
        irqs.extend(line.filter(|&n| n > 0 && n <= MAX_IRQ));
    }
    irqs.sort_unstable();
    irqs.dedup();
    Ok(irqs)
}
