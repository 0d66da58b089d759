//! Where an instance's output goes, how it outlives a `detach`, and how its file follows
//! logrotate.
//!
//! Every instance writes its stdout and stderr into a FIFO of its own,
//! `<state file>.output/<instance>` (a folder only pinctl may write, beside the state file),
//! which the supervisor reads ([`Fifos`]). A FIFO and not a pipe: a pipe is gone with the
//! process that read it, so an instance adopted after a `detach` had no output any more; the
//! FIFO stays at its path, and the supervisor that adopts the instance opens it again and goes
//! on from where the last one stopped reading. What the instance wrote while no supervisor had
//! it open failed with `EPIPE` (instances start with SIGPIPE ignored) and is lost.
//!
//! From the FIFO, lines go either into the instance's `output` file ([`OutputFile`], a pump
//! thread per running instance that opens the file as [`access`] decides and writes with
//! backpressure) or, prefixed with the instance's name, to pinctl's stdout
//! ([`relay`](crate::relay), with backpressure too). Neither drops a line: a slow disk or a slow
//! reader of pinctl's stdout makes the instance wait in its own `write`, never the supervisor.

pub mod access;
mod fifo;
mod file;
pub mod lines;

pub use access::{FileOwner, Opener};
pub use fifo::Fifos;
pub use file::{Opened, OutputFile};
