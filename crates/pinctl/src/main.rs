//! The `pinctl` binary: everything is in the library next to it (src/lib.rs), which is split
//! out only so the man-page and completion generator can read the command-line definition.
#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    pinctl_sys::prepare_allocator();
    pinctl::run(std::env::args_os().collect())
}
