//! A running irqbalance, found by its control socket: `run/irqbalance/irqbalance<PID>.sock`
//! (irqbalance 1.4 and later, built with its user interface as Debian's and RHEL's are),
//! whose PID must run a program named `irqbalance` (`proc/<PID>/comm`): a socket left by one
//! that died is not it. One bound to an abstract socket (no `/run/irqbalance` folder) is not
//! seen.

use pinctl_topology::Irqbalance;

use crate::error::DiscoveryError;
use crate::fsroot::FsRoot;

/// The folder of irqbalance's control socket.
pub const SOCKET_DIR: &str = "run/irqbalance";

/// The PID in a socket's name: `irqbalance1234.sock` -> 1234.
pub fn pid_of_socket(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("irqbalance")?.strip_suffix(".sock")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&p| p > 0)
}

/// The irqbalance that runs, if any (the lowest PID when several sockets name one that runs).
pub fn find(fs: &mut FsRoot) -> Result<Option<Irqbalance>, DiscoveryError> {
    let Some(names) = fs.list(SOCKET_DIR)? else { return Ok(None) };
    let mut pids: Vec<u32> = names.iter().filter_map(|n| pid_of_socket(n)).collect();
    pids.sort_unstable();
    for pid in pids {
        let comm = fs.text_fact(&format!("proc/{pid}/comm"), || {
            format!("process {pid} is not taken for irqbalance")
        })?;
        if comm.is_some_and(|c| c.trim_end() == "irqbalance") {
            return Ok(Some(Irqbalance {
                pid,
                socket: format!("/{SOCKET_DIR}/irqbalance{pid}.sock"),
                banned_cpus: None,
            }));
        }
    }
    Ok(None)
}

/// The CPUs irqbalance avoids by its own choice, before anyone uses its socket: the list in
/// its environment's `IRQBALANCE_BANNED_CPULIST` (or the older mask `IRQBALANCE_BANNED_CPUS`),
/// else the kernel's isolated and `nohz_full` CPUs (irqbalance's `setup_banned_cpus`). Reading
/// another process's environment needs root; `None` when it cannot be read.
pub fn own_banned_cpus(
    fs: &mut FsRoot,
    pid: u32,
) -> Result<Option<pinctl_topology::CpuSet>, DiscoveryError> {
    use pinctl_topology::CpuSet;
    let Some(environ) = fs.read(&format!("proc/{pid}/environ")).ok().flatten().map(str::to_string)
    else {
        return Ok(None);
    };
    for var in environ.split('\0') {
        if let Some(mask) = var.strip_prefix("IRQBALANCE_BANNED_CPUS=").filter(|m| !m.is_empty()) {
            return Ok(CpuSet::parse_mask(mask.trim()).ok());
        }
    }
    for var in environ.split('\0') {
        if let Some(list) = var.strip_prefix("IRQBALANCE_BANNED_CPULIST=") {
            return Ok(CpuSet::parse_list(list.trim()).ok());
        }
    }
    let mut banned = CpuSet::new();
    for file in ["sys/devices/system/cpu/isolated", "sys/devices/system/cpu/nohz_full"] {
        if let Some(text) = fs.read(file)? {
            if let Ok(cpus) = crate::parse::id_list::<pinctl_topology::CpuKind>(text) {
                banned = banned.union(&cpus);
            }
        }
    }
    Ok(Some(banned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_names() {
        assert_eq!(pid_of_socket("irqbalance812.sock"), Some(812));
        assert_eq!(pid_of_socket("irqbalance.sock"), None);
        assert_eq!(pid_of_socket("irqbalance0.sock"), None);
        assert_eq!(pid_of_socket("irqbalance12x.sock"), None);
        assert_eq!(pid_of_socket("irqbalance99999999999.sock"), None);
        assert_eq!(pid_of_socket("other1.sock"), None);
    }
}
