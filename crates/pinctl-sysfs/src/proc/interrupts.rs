//! `/proc/interrupts`: one line per interrupt, a count per online CPU (the header names the
//! CPUs: `CPU0 CPU1 ...`, offline ones left out), then the interrupt's chip, its hardware
//! number and trigger, and its handlers' names (`eth0-TxRx-3`, `nvme0q2`). Lines whose label
//! is not a number (`NMI:`, `LOC:`, `ERR:`) are the architecture's own counters and are left
//! out.
//!
//! The file is as large as interrupts times CPUs (megabytes on a 256-CPU host with thousands of
//! queues): it is read once per watch cycle under the procfs bound of
//! [`crate::fsroot::MAX_PROC_FILE_BYTES`], and the parser refuses more lines or CPUs than
//! Linux can have before anything is sized by them.

use pinctl_topology::{CpuId, IrqCount, MAX_CPU_ID};

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;
use crate::parse::ParseError;

/// Where the file is, under the root.
pub const FILE: &str = "proc/interrupts";

/// The highest interrupt number read: Linux numbers interrupts below `IRQ_BITMAP_BITS`
/// (`NR_IRQS` + 8196 with sparse interrupts; tens of thousands on the largest hosts).
pub const MAX_IRQ: u32 = (1 << 20) - 1;

/// The most numbered lines read: every interrupt number up to [`MAX_IRQ`] once.
pub const MAX_LINES: usize = MAX_IRQ as usize + 1;

/// The numbered lines of `/proc/interrupts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterruptTable {
    /// The CPU of each count column, from the header.
    pub cpus: Vec<CpuId>,
    /// Numbered interrupts, in the file's order (ascending on every kernel).
    pub lines: Vec<IrqLine>,
}

/// One numbered line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqLine {
    pub irq: u32,
    /// One count per column of [`InterruptTable::cpus`].
    pub counts: Vec<u64>,
    /// What follows the counts: chip, hardware number and trigger, handlers' names.
    pub description: String,
}

impl IrqLine {
    /// The handlers' names as far as this line tells them: the text after the last run of
    /// two or more blanks (the kernel prints two before the first handler and pads the fields
    /// before it), unless that is the hardware number and trigger of a line with no handler
    /// (`9-fasteoi`, `Edge`). `/sys/kernel/irq/N/actions` says it exactly where it exists.
    pub fn name(&self) -> &str {
        let d = self.description.trim_end();
        let tail = match d.rfind("  ") {
            Some(at) => d[at..].trim_start(),
            None => d.rsplit_once(' ').map_or(d, |(_, t)| t),
        };
        let trigger_only = tail.split_once('-').is_some_and(|(n, t)| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && !t.is_empty()
                && t.bytes().all(|b| b.is_ascii_alphabetic())
        }) || matches!(tail, "Edge" | "Level" | "edge" | "level");
        // A lone word is a chip with no handler.
        if trigger_only || !d.contains(|c: char| c.is_ascii_whitespace()) { "" } else { tail }
    }
}

impl InterruptTable {
    /// The line of interrupt `irq`.
    pub fn line(&self, irq: u32) -> Option<&IrqLine> {
        match self.lines.binary_search_by_key(&irq, |l| l.irq) {
            Ok(i) => Some(&self.lines[i]),
            // Not sorted (never seen): look through.
            Err(_) => self.lines.iter().find(|l| l.irq == irq),
        }
    }

    /// Where `line` fired, CPUs with a count of zero left out.
    pub fn fired(&self, line: &IrqLine) -> Vec<IrqCount> {
        self.cpus
            .iter()
            .zip(&line.counts)
            .filter(|(_, c)| **c > 0)
            .map(|(&cpu, &count)| IrqCount { cpu, count })
            .collect()
    }
}

/// Splits `line` at blanks, with the byte offset where each word starts.
fn words(line: &str) -> impl Iterator<Item = (usize, &str)> {
    line.split(|c: char| c.is_ascii_whitespace())
        .scan(0usize, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
}

/// Parses the file's text.
pub fn parse(text: &str) -> Result<InterruptTable, ParseError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(ParseError::new(1, text, "a header of CPU columns (`CPU0 CPU1 ...`)"));
    };
    let mut cpus = Vec::new();
    for w in header.split_whitespace() {
        let id = w
            .strip_prefix("CPU")
            .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|d| d.parse::<u32>().ok())
            .filter(|&id| id <= MAX_CPU_ID)
            .ok_or_else(|| ParseError::new(1, w, "a CPU column (`CPU7`) up to CPU65535"))?;
        cpus.push(id);
    }
    let mut table = InterruptTable { cpus, lines: Vec::new() };
    for (i, line) in lines {
        let Some((label, rest)) = line.split_once(':') else {
            return Err(ParseError::new(i + 1, line, "`LABEL: counts ...`"));
        };
        let label = label.trim();
        if label.is_empty() || !label.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let irq =
            label.parse::<u32>().ok().filter(|&n| n <= MAX_IRQ).ok_or_else(|| {
                ParseError::new(i + 1, label, "an interrupt number up to 1048575")
            })?;
        if table.lines.len() >= MAX_LINES {
            return Err(ParseError::new(i + 1, label, "at most 1048576 numbered lines"));
        }
        let mut counts = Vec::with_capacity(table.cpus.len());
        let mut description_at = rest.len();
        for (at, w) in words(rest) {
            if counts.len() == table.cpus.len() {
                description_at = at;
                break;
            }
            match w.parse::<u64>() {
                Ok(n) => counts.push(n),
                Err(_) => {
                    return Err(ParseError::new(
                        i + 1,
                        w,
                        "one count per CPU column of the header",
                    ));
                }
            }
        }
        if counts.len() < table.cpus.len() {
            return Err(ParseError::new(i + 1, line, "one count per CPU column of the header"));
        }
        let description = rest[description_at.min(rest.len())..].trim().to_string();
        table.lines.push(IrqLine { irq, counts, description });
    }
    Ok(table)
}

/// Reads and parses `proc/interrupts` under `fs`'s root; `None` without the file.
pub fn read(fs: &mut FsRoot) -> Result<Option<InterruptTable>, DiscoveryError> {
    crate::fsroot::parsed(fs, FILE, parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From the 4-node QEMU guest (Linux 6.1), with the NIC's queues up.
    const GUEST: &str = "           CPU0       CPU1       CPU2       CPU3       
  0:         84          0          0          0   IO-APIC   2-edge      timer
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
 24:          0          0          1          0   PCI-MSI 50331648-edge      PCIe PME, aerdrv, pciehp
 27:          0          0          1          0   PCI-MSI 34078721-edge      nvme0q1
 35:          3          0          0       1200   PCI-MSIX-0000:61:00.0   0-edge      eth0-rxtx-0
 40:          0          0          0          0   PCI-MSI 34078729-edge    
NMI:          0          0          0          0   Non-maskable interrupts
LOC:       1045       1048        619        749   Local timer interrupts
ERR:          0
MIS:          0
";

    #[test]
    fn numbered_lines_with_counts_and_names() {
        let t = parse(GUEST).unwrap();
        assert_eq!(t.cpus, vec![0, 1, 2, 3]);
        let irqs: Vec<u32> = t.lines.iter().map(|l| l.irq).collect();
        assert_eq!(irqs, vec![0, 9, 24, 27, 35, 40]);
        let nic = t.line(35).unwrap();
        assert_eq!(nic.counts, vec![3, 0, 0, 1200]);
        assert_eq!(nic.name(), "eth0-rxtx-0");
        assert_eq!(
            t.fired(nic),
            vec![IrqCount { cpu: 0, count: 3 }, IrqCount { cpu: 3, count: 1200 }]
        );
        assert_eq!(t.line(24).unwrap().name(), "PCIe PME, aerdrv, pciehp");
        assert_eq!(t.line(0).unwrap().name(), "timer");
        assert_eq!(t.line(9).unwrap().name(), "acpi");
        assert_eq!(t.line(40).unwrap().name(), "", "a line with no handler has no name");
        assert!(t.line(1).is_none());
    }

    #[test]
    fn offline_cpus_are_left_out_of_the_header() {
        let t = parse("   CPU0  CPU2\n 5:  1  2  IO-APIC 5-edge  x\n").unwrap();
        assert_eq!(t.cpus, vec![0, 2]);
        assert_eq!(t.fired(&t.lines[0])[1], IrqCount { cpu: 2, count: 2 });
    }

    #[test]
    fn arm_style_descriptions_keep_their_name() {
        let t = parse("  CPU0 CPU1\n 11:  5 6  GICv3  27 Level     arch_timer\n").unwrap();
        assert_eq!(t.lines[0].name(), "arch_timer");
    }

    #[test]
    fn what_the_kernel_never_writes_is_refused() {
        assert!(parse("").is_err());
        assert!(parse("CPU0 CPUx\n").is_err());
        assert!(parse("CPU0 CPU99999999\n").is_err(), "a CPU beyond the ceiling");
        assert!(parse("CPU0 CPU1\n 3: 1\n").is_err(), "a count missing");
        assert!(parse("CPU0\n 3: x IO-APIC\n").is_err());
        assert!(parse("CPU0\n 99999999: 1 IO-APIC\n").is_err(), "a number beyond MAX_IRQ");
        assert!(parse("CPU0\n no colon here\n").is_err());
        // Odd names are kept as text, whatever they hold.
        let t = parse("CPU0\n 7: 1  chip 7-edge  \u{1b}[31mred\n").unwrap();
        assert_eq!(t.lines[0].name(), "\u{1b}[31mred");
    }
}
