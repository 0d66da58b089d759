//! The files of `/proc` pinctl reads for what runs (a process's, the kernel's counters), one
//! module per file as procfs-core lays them out: each has a parser of the file's text, tested
//! on strings, and a bounded read through [`KernelFiles`](crate::fsroot::KernelFiles) under a
//! root, so a captured tree stands in for the machine. (`/proc/meminfo` has the format of a
//! node's `meminfo`: [`crate::node::meminfo`].)

pub mod pid;
pub mod uptime;
pub mod vmstat;
