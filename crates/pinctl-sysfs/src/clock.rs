//! Time as pinctl's loops read it: the machine's monotonic clock, behind a trait so that a
//! test drives a loop with a fake one. The one clock of the project's libraries (the probe's
//! budget, the drift watcher's cycles and a rebalance's stalls); the supervisor's pure steps
//! take `now` as an argument instead.

use std::time::{Duration, Instant};

/// Where a loop reads the time and waits.
pub trait Clock {
    /// Time since the clock's own fixed origin.
    fn now(&self) -> Duration;
    /// Waits `d` (a fake clock moves on by `d`).
    fn sleep(&mut self, d: Duration);
}

/// The machine's monotonic clock, counted from when it was made.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock(Instant);

impl MonotonicClock {
    pub fn new() -> MonotonicClock {
        MonotonicClock(Instant::now())
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
    fn sleep(&mut self, d: Duration) {
        std::thread::sleep(d);
    }
}
