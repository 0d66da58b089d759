//! sd_notify: datagrams to `$NOTIFY_SOCKET` (an abstract socket when it starts with `@`), so
//! `Type=notify` units know when pinctl is ready, reloading or stopping. Without the variable
//! every call is a no-op.

use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where notifications go, read once from the environment.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET`, `$WATCHDOG_USEC` and `$WATCHDOG_PID` (the watchdog applies when
    /// that PID is ours or not given).
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            let bytes = path.as_encoded_bytes();
            let addr = match bytes.strip_prefix(b"@") {
                Some(name) => SocketAddr::from_abstract_name(name).ok()?,
                None => SocketAddr::from_pathname(&path).ok()?,
            };
            // Non-blocking: a systemd that does not read its socket must not stall the loop
            // (a notification that does not fit is dropped; the next one says the same).
            let socket = UnixDatagram::unbound().ok()?;
            socket.set_nonblocking(true).ok()?;
            Some((socket, addr))
        });
        let ours = std::env::var("WATCHDOG_PID")
            .map_or(true, |p| p.trim() == std::process::id().to_string());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&us| us > 0 && ours)
            .map(Duration::from_micros);
        Notifier { target, watchdog }
    }

    /// How often to send `WATCHDOG=1` (half of `$WATCHDOG_USEC`), when asked to.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|d| d / 2)
    }

    /// Sends one notification (`READY=1`, `STATUS=...`, several lines at once). Failures are
    /// ignored: systemd may be gone, pinctl goes on.
    pub fn send(&self, message: &str) {
        if let Some((socket, addr)) = &self.target {
            let _ = socket.send_to_addr(message.as_bytes(), addr);
        }
    }

    /// `RELOADING=1` with the `MONOTONIC_USEC=` that `Type=notify-reload` asks for.
    pub fn reloading(&self) {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let usec = t.tv_sec as u64 * 1_000_000 + t.tv_nsec as u64 / 1000;
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_reach_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            target: Some((
                UnixDatagram::unbound().unwrap(),
                SocketAddr::from_pathname(&path).unwrap(),
            )),
            watchdog: Some(Duration::from_secs(10)),
        };
        n.send("READY=1\nSTATUS=2/2 running");
        n.reloading();
        let mut buf = [0u8; 256];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=2/2 running");
        let len = server.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..len]).unwrap();
        assert!(text.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{text}");
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(5)));
    }
}
