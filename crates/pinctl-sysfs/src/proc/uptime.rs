//! `/proc/uptime`: how long the machine has been up.

use std::time::Duration;

use crate::error::DiscoveryError;
use crate::fsroot::{KernelFiles, parsed};
use crate::parse::ParseError;

/// The first figure of `uptime` (seconds since boot, with hundredths).
pub fn parse(text: &str) -> Result<Duration, ParseError> {
    let first = text.split_whitespace().next().unwrap_or("");
    first
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| ParseError::new(1, first, "seconds since boot such as `3600.25`"))
}

/// The machine's uptime under the root of `files`.
pub fn read(files: &mut dyn KernelFiles) -> Result<Option<Duration>, DiscoveryError> {
    parsed(files, "proc/uptime", parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_since_boot() {
        assert_eq!(parse("3600.25 7000.50\n").unwrap(), Duration::from_millis(3_600_250));
        assert!(parse("").is_err());
        assert!(parse("-1 0").is_err());
        assert!(parse("soon 0").is_err());
        let live = read(&mut crate::FsRoot::new("/".as_ref())).unwrap().unwrap();
        assert!(live > Duration::ZERO);
    }
}
