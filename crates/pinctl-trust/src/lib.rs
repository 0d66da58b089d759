//! Root-file safety, the ground floor every crate that keeps or reads files as root builds on:
//! the checked walk to a file another user may have written ([`read_checked`]: owner, mode and
//! type of every folder and link on the way, no link followed at the end, no blocking open, a
//! bound), what a supervisor believes ([`read_trusted`], [`check_folder`], [`check_socket`],
//! [`set_aside`]), private locks ([`lock_private`]), files written whole ([`atomic`]), the
//! bounded read of a regular file ([`read_regular`], which the machine reader reads every
//! kernel file through), the boot this is ([`boot_id`]) and, on top, the one JSON file pinctl
//! keeps and acts on as root ([`record`]: the supervisor's state file, the interrupt record).
//!
//! Why a crate of its own: the XML reader, the interrupt steerer, the launcher and the
//! supervisor all need these, and each used to import the machine reader (pinctl-sysfs) or
//! the supervisor (pinctl-supervise) for one function. pinctl-sys is lower still but must not
//! read files and is the `unsafe` crate; this one is safe code over rustix and depends on no
//! other pinctl crate, so anything can import it without importing upward. It must not know
//! what a topology, a service or an instance is: callers give it paths, bounds and formats.
#![forbid(unsafe_code)]

pub mod atomic;
mod boot;
mod lock;
pub mod record;
mod regular;
mod trusted;
mod walk;

pub use boot::boot_id;
pub use lock::{LOCK_PATIENCE, LockError, PrivateLock, lock_exclusive, lock_private};
pub use regular::{open_regular, read_all, read_regular};
pub use trusted::{
    Refused, TrustError, about, check_folder, check_socket, folder_of, read_trusted, set_aside,
};
pub use walk::{
    CheckedRead, CheckedReadError, MAX_LINKS, Untrusted, euid, folder_checked, read_checked,
};

#[cfg(test)]
mod tests;
