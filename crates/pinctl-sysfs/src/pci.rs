//! Accelerators found by the class of every PCI function: GPUs (display, 0x03xx), processing
//! accelerators (0x12xx) and co-processors (0x0b40). `sys/class/drm` alone misses the GPUs of
//! NVIDIA's proprietary driver (no DRM node without `nvidia-drm`) and every 0x12xx card, so the
//! functions are read by class, with or without a DRM node, and named as their users know
//! them: `nvidiaN` from the driver's `information` file, else the DRM `cardN`, else the PCI
//! address.

use std::collections::HashMap;

use pinctl_topology::DeviceKind;

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse::{self, ParseError};

const PCI_DIR: &str = "sys/bus/pci/devices";
const NVIDIA_GPUS: &str = "proc/driver/nvidia/gpus";

/// Highest minor number the NVIDIA driver gives a GPU: 255 is `/dev/nvidiactl`.
const MAX_NVIDIA_MINOR: u32 = 254;

/// A PCI function that is an accelerator, before its locality is read.
#[derive(Debug)]
pub(crate) struct Accelerator {
    pub(crate) name: String,
    pub(crate) kind: DeviceKind,
    /// The function's folder under `sys/devices`.
    pub(crate) path: String,
    /// Its other names: DRM cards and render nodes not used as `name`.
    pub(crate) aliases: Vec<String>,
}

/// Which kind of device a PCI class (`0xBBSSPP`: base class, subclass, programming interface)
/// is, `None` for anything that is not an accelerator.
pub(crate) fn kind_of_class(class: u32) -> Option<DeviceKind> {
    let (base, sub) = (class >> 16, (class >> 8) & 0xff);
    match (base, sub) {
        (0x03, _) => Some(DeviceKind::Gpu),
        (0x12, _) | (0x0b, 0x40) => Some(DeviceKind::Accelerator),
        _ => None,
    }
}

/// A PCI function's `class` file: `0x030200`.
pub fn pci_class(text: &str) -> Result<u32, ParseError> {
    let t = text.trim();
    let expected = "a PCI class code like `0x030200`";
    let hex = t.strip_prefix("0x").ok_or_else(|| ParseError::new(1, t, expected))?;
    if hex.is_empty() || hex.len() > 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseError::new(1, t, expected));
    }
    u32::from_str_radix(hex, 16).map_err(|_| ParseError::new(1, t, expected))
}

/// The `Device Minor` (the N of `/dev/nvidiaN`) of NVIDIA's
/// `/proc/driver/nvidia/gpus/<address>/information`, checked against its `Bus Location` when
/// that line is there. The file is `Key: <tabs and spaces> value` lines.
pub fn nvidia_device_minor(text: &str, address: &str) -> Result<u32, String> {
    let mut minor = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let value = value.trim();
        match key.trim() {
            "Device Minor" => {
                if minor.is_some() {
                    return Err("two `Device Minor` lines".into());
                }
                match value.parse::<u32>() {
                    Ok(n) if n <= MAX_NVIDIA_MINOR => minor = Some(n),
                    _ => {
                        return Err(format!(
                            "`Device Minor` is `{}`, not a number from 0 to {MAX_NVIDIA_MINOR}",
                            pinctl_topology::text::shown(value)
                        ));
                    }
                }
            }
            "Bus Location" if !value.eq_ignore_ascii_case(address) => {
                return Err(format!(
                    "`Bus Location` is `{}`, not the folder's `{address}`",
                    pinctl_topology::text::shown(value)
                ));
            }
            _ => {}
        }
    }
    minor.ok_or_else(|| "no `Device Minor` line".into())
}

/// The order of `card2` before `card10`.
fn by_number(names: &mut [String]) {
    names.sort_by_key(|n| {
        let digits = n.trim_start_matches(|c: char| !c.is_ascii_digit());
        (n[..n.len() - digits.len()].to_string(), digits.parse::<u64>().unwrap_or(u64::MAX))
    });
}

fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[derive(Debug)]
struct Found {
    address: String,
    kind: DeviceKind,
    path: String,
    cards: Vec<String>,
    renders: Vec<String>,
    minor: Option<u32>,
}

/// Every accelerator function under `sys/bus/pci/devices`, sorted by PCI address. A driver
/// file that cannot name a GPU (unreadable, garbage, a minor two GPUs claim) leaves it named
/// by its DRM card or PCI address, with a discovery warning.
pub(crate) fn accelerators(fs: &mut FsRoot) -> Result<Vec<Accelerator>, DiscoveryError> {
    let mut addresses = fs.list(PCI_DIR)?.unwrap_or_default();
    addresses.retain(|a| parse::is_pci_address(a));
    addresses.sort_unstable();
    let mut found = Vec::new();
    for address in addresses {
        let Some(path) = fs.link(&format!("{PCI_DIR}/{address}"))? else { continue };
        let not_listed = || "the function is not listed as a GPU or accelerator".to_string();
        let Some(class) = fs.fact(&format!("{path}/class"), pci_class, not_listed)?.value() else {
            continue;
        };
        let Some(kind) = kind_of_class(class) else { continue };
        let (mut cards, mut renders) = (Vec::new(), Vec::new());
        for name in fs.list(&format!("{path}/drm"))?.unwrap_or_default() {
            if numbered(&name, "card") {
                cards.push(name);
            } else if numbered(&name, "renderD") {
                renders.push(name);
            }
        }
        by_number(&mut cards);
        by_number(&mut renders);
        let minor = if kind == DeviceKind::Gpu { nvidia_minor(fs, &address)? } else { None };
        found.push(Found { address, kind, path, cards, renders, minor });
    }
    // Two GPUs claiming one minor: `nvidiaN` would name either; refuse to guess which.
    let mut claims: HashMap<u32, usize> = HashMap::new();
    for f in &found {
        if let Some(m) = f.minor {
            *claims.entry(m).or_default() += 1;
        }
    }
    let mut out = Vec::with_capacity(found.len());
    for mut f in found {
        if let Some(m) = f.minor.filter(|m| claims[m] > 1) {
            let problem = format!("gives Device Minor {m}, as another GPU's does");
            fs.warn(&format!("{NVIDIA_GPUS}/{}/information", f.address), problem, || {
                unnamed(&f.address)
            });
            f.minor = None;
        }
        let name = match (f.minor, f.cards.first()) {
            (Some(m), _) => format!("nvidia{m}"),
            (None, Some(card)) => card.clone(),
            (None, None) => f.address.clone(),
        };
        let aliases = f.cards.into_iter().chain(f.renders).filter(|n| *n != name).collect();
        out.push(Accelerator { name, kind: f.kind, path: f.path, aliases });
    }
    Ok(out)
}

/// What discovery assumes of a GPU its driver's file cannot name.
fn unnamed(address: &str) -> String {
    format!("GPU `{address}` is not `nvidiaN`; its DRM card or PCI address names it in `near`")
}

/// The minor of the GPU at `address` from NVIDIA's driver file, `None` without the driver or
/// (with a discovery warning) when the file cannot say.
fn nvidia_minor(fs: &mut FsRoot, address: &str) -> Result<Option<u32>, DiscoveryError> {
    let rel = format!("{NVIDIA_GPUS}/{address}/information");
    let Some(text) = fs.text_fact(&rel, || unnamed(address))? else { return Ok(None) };
    match nvidia_device_minor(text, address) {
        Ok(minor) => Ok(Some(minor)),
        Err(reason) => {
            fs.warn(&rel, format!("cannot name it: {reason}"), || unnamed(address));
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t \
        GPU-3e0c8f9a-7a43-5e1d-1f4b-0c5b2c4e9d21\nVideo BIOS: \t 96.00.74.00.0d\nBus Type: \t \
        PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t \
        0000:41:00.0\nDevice Minor: \t 3\nGPU Excluded:\t No\n";

    #[test]
    fn classes() {
        assert_eq!(pci_class("0x030200\n").unwrap(), 0x030200);
        assert_eq!(kind_of_class(0x030200), Some(DeviceKind::Gpu));
        assert_eq!(kind_of_class(0x030000), Some(DeviceKind::Gpu));
        assert_eq!(kind_of_class(0x038000), Some(DeviceKind::Gpu));
        assert_eq!(kind_of_class(0x120000), Some(DeviceKind::Accelerator));
        assert_eq!(kind_of_class(0x0b4000), Some(DeviceKind::Accelerator));
        assert_eq!(kind_of_class(0x0b3000), None, "a MIPS processor is no co-processor");
        assert_eq!(kind_of_class(0x020000), None);
        for bad in ["030200", "0x", "0x03020000", "0xzz0200", ""] {
            assert!(pci_class(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_driver_file_names_the_minor() {
        assert_eq!(nvidia_device_minor(H100, "0000:41:00.0"), Ok(3));
        let e = nvidia_device_minor(H100, "0000:42:00.0").unwrap_err();
        assert_eq!(e, "`Bus Location` is `0000:41:00.0`, not the folder's `0000:42:00.0`");
        let no_bus = "Model: x\nDevice Minor:\t 7\n";
        assert_eq!(nvidia_device_minor(no_bus, "0000:01:00.0"), Ok(7));
        let e = nvidia_device_minor("Model: x\n", "0000:01:00.0").unwrap_err();
        assert_eq!(e, "no `Device Minor` line");
        let e = nvidia_device_minor("Device Minor: 255\n", "0000:01:00.0").unwrap_err();
        assert!(e.contains("`255`, not a number from 0 to 254"), "{e}");
        let e = nvidia_device_minor("Device Minor: -1\x1b[31m\n", "0000:01:00.0").unwrap_err();
        assert!(e.contains("`-1\\u{1b}[31m`"), "control characters shown escaped: {e}");
        let two = "Device Minor: 1\nDevice Minor: 2\n";
        assert_eq!(
            nvidia_device_minor(two, "0000:01:00.0").unwrap_err(),
            "two `Device Minor` lines"
        );
    }

    #[test]
    fn drm_names_in_number_order() {
        let mut v: Vec<String> = ["card10", "card2", "renderD129"].map(String::from).to_vec();
        by_number(&mut v);
        assert_eq!(v, ["card2", "card10", "renderD129"]);
    }
}
