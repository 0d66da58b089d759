//! Which boot this is: what pinctl keeps about processes and interrupts holds only within one
//! (a PID and start time, an interrupt number can mean something else after a reboot).

use std::path::Path;

/// The boot this kernel is in (`/proc/sys/kernel/random/boot_id`), when it can be read.
pub fn boot_id() -> Option<String> {
    let text = crate::read_regular(Path::new("/proc/sys/kernel/random/boot_id"), 64).ok()?;
    let id = String::from_utf8(text).ok()?.trim().to_string();
    (!id.is_empty()).then_some(id)
}
