//! irqbalance's control socket (irqbalance.c, `sock_handle`): a command per connection, sent
//! in one message with the sender's credentials (`SCM_CREDENTIALS`; irqbalance takes commands
//! from root only), answered (`setup`) or not (`settings ...`), then closed by irqbalance.
//!
//! - `setup` answers `SLEEP <s> [IRQ <n> LOAD <l> DIFF <d> CLASS <c> ]... BANNED <mask>`: its
//!   interval, the interrupts it leaves alone, and the CPUs it avoids (a kernel mask).
//! - `settings cpus <cpulist>` makes it avoid those CPUs from its next pass on, in place of its
//!   own choice (`IRQBALANCE_BANNED_CPULIST`, isolated and `nohz_full` CPUs); `settings cpus
//!   NULL` gives its own choice back.
//! - `settings ban irqs <n> <n>...` makes it leave those interrupts alone, in place of the
//!   list it had (`--banirq` included); `settings ban irqs NONE` empties the list.
//!
//! irqbalance before 1.9.3 reads a command into 500 bytes: longer commands are refused here
//! rather than cut there.

use std::io::{IoSlice, Read as _};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pinctl_topology::CpuSet;
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, UCred, sendmsg};

/// The longest command sent: irqbalance before 1.9.3 reads at most 500 bytes.
pub const MAX_COMMAND_BYTES: usize = 499;
/// The longest answer read (`setup` with every interrupt banned).
pub const MAX_REPLY_BYTES: usize = 1 << 20;
/// How long irqbalance may take to answer or close: it serves its socket between passes.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// What `setup` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// Seconds between its passes.
    pub sleep: u32,
    /// Interrupts it leaves alone.
    pub banned_irqs: Vec<u32>,
    /// CPUs it avoids.
    pub banned_cpus: CpuSet,
}

/// Why irqbalance could not be told.
#[derive(Debug, thiserror::Error)]
pub enum IrqbalanceError {
    #[error("cannot use irqbalance's socket `{}`: {why}", path.display())]
    Socket { path: PathBuf, why: String },
    #[error("irqbalance's answer `{answer}` to `setup` is not what it writes ({why})")]
    Answer { answer: String, why: &'static str },
    #[error("`{command}...` is {len} bytes, longer than irqbalance reads ({MAX_COMMAND_BYTES})")]
    TooLong { command: String, len: usize },
    #[error(
        "irqbalance closed `setup` unanswered: it takes commands from root only (pinctl runs as \
         uid {uid})"
    )]
    NotRoot { uid: u32 },
}

/// Parses `setup`'s answer.
pub fn parse_setup(text: &str) -> Result<Setup, IrqbalanceError> {
    let bad = |why| IrqbalanceError::Answer { answer: text.chars().take(200).collect(), why };
    let mut words = text.split_ascii_whitespace();
    if words.next() != Some("SLEEP") {
        return Err(bad("no SLEEP"));
    }
    let sleep = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| bad("no interval"))?;
    let mut banned_irqs = Vec::new();
    loop {
        match words.next() {
            Some("IRQ") => {
                let n = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| bad("an IRQ without a number"))?;
                banned_irqs.push(n);
                // LOAD l DIFF d CLASS c
                for _ in 0..6 {
                    words.next();
                }
            }
            Some("BANNED") => {
                let mask = words.next().ok_or_else(|| bad("BANNED without a mask"))?;
                let banned_cpus =
                    CpuSet::parse_mask(mask).map_err(|_| bad("a mask that does not parse"))?;
                return Ok(Setup { sleep, banned_irqs, banned_cpus });
            }
            _ => return Err(bad("no BANNED")),
        }
    }
}

/// `settings cpus <list>`, or `settings cpus NULL` for irqbalance's own choice.
pub fn ban_cpus_command(cpus: Option<&CpuSet>) -> String {
    match cpus {
        Some(c) if !c.is_empty() => format!("settings cpus {c}"),
        _ => "settings cpus NULL".to_string(),
    }
}

/// `settings ban irqs <n> <n>...`, or `settings ban irqs NONE`.
pub fn ban_irqs_command(irqs: &[u32]) -> String {
    if irqs.is_empty() {
        return "settings ban irqs NONE".to_string();
    }
    let list: Vec<String> = irqs.iter().map(u32::to_string).collect();
    format!("settings ban irqs {}", list.join(" "))
}

/// Sends `command` to the irqbalance listening on `socket` and reads what it answers until it
/// closes the connection. The socket must be root's ([`pinctl_trust::check_socket`]).
pub fn exchange(socket: &Path, command: &str) -> Result<String, IrqbalanceError> {
    let err = |why: String| IrqbalanceError::Socket { path: socket.to_path_buf(), why };
    if command.len() > MAX_COMMAND_BYTES {
        let shown: String = command.chars().take(40).collect();
        return Err(IrqbalanceError::TooLong { command: shown, len: command.len() });
    }
    match pinctl_trust::check_socket(socket) {
        Ok(true) => {}
        Ok(false) => return Err(err("it is gone".into())),
        Err(e) => return Err(err(e.to_string())),
    }
    let mut stream = UnixStream::connect(socket).map_err(|e| err(e.to_string()))?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| err(e.to_string()))?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(|e| err(e.to_string()))?;
    let credentials = UCred {
        pid: rustix::process::getpid(),
        uid: rustix::process::getuid(),
        gid: rustix::process::getgid(),
    };
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    cmsg.push(SendAncillaryMessage::ScmCredentials(credentials));
    let iov = [IoSlice::new(command.as_bytes())];
    sendmsg(&stream, &iov, &mut cmsg, SendFlags::empty())
        .map_err(|e| err(format!("sending `{command}`: {e}")))?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_REPLY_BYTES as u64 + 1)
        .read_to_end(&mut answer)
        .map_err(|e| err(format!("waiting for irqbalance after `{command}`: {e}")))?;
    if answer.len() > MAX_REPLY_BYTES {
        return Err(err(format!("it answered more than {MAX_REPLY_BYTES} bytes")));
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// What pinctl asks of irqbalance: the seam its tests replace.
pub trait Balancer {
    /// `setup`: its interval, banned interrupts and CPUs.
    fn setup(&mut self, socket: &Path) -> Result<Setup, IrqbalanceError>;
    /// A `settings` command (no answer).
    fn settings(&mut self, socket: &Path, command: &str) -> Result<(), IrqbalanceError>;
}

/// The irqbalance of the live machine, through its socket.
#[derive(Debug, Default, Clone, Copy)]
pub struct SocketBalancer;

impl Balancer for SocketBalancer {
    fn setup(&mut self, socket: &Path) -> Result<Setup, IrqbalanceError> {
        let answer = exchange(socket, "setup")?;
        if answer.is_empty() {
            return Err(IrqbalanceError::NotRoot { uid: pinctl_trust::euid() });
        }
        parse_setup(&answer)
    }

    fn settings(&mut self, socket: &Path, command: &str) -> Result<(), IrqbalanceError> {
        exchange(socket, command).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_answers_of_irqbalance_1_9() {
        let s = parse_setup("SLEEP 10 BANNED 00000000").unwrap();
        assert_eq!((s.sleep, s.banned_irqs.len(), s.banned_cpus.is_empty()), (10, 0, true));
        let s = parse_setup(
            "SLEEP 1 IRQ 45 LOAD 0 DIFF 0 CLASS 5 IRQ 46 LOAD 12 DIFF 3 CLASS 5 BANNED 00000000,000000f3",
        )
        .unwrap();
        assert_eq!(s.banned_irqs, vec![45, 46]);
        assert_eq!(s.banned_cpus.to_string(), "0-1,4-7");
        for bad in [
            "",
            "SLEEP",
            "SLEEP x BANNED 0",
            "SLEEP 10 BANNED",
            "SLEEP 10 BANNED zz",
            "SLEEP 10 IRQ x",
            "SLEEP 10 OTHER",
        ] {
            assert!(parse_setup(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn commands() {
        assert_eq!(ban_cpus_command(Some(&"0-5".parse().unwrap())), "settings cpus 0-5");
        assert_eq!(ban_cpus_command(None), "settings cpus NULL");
        assert_eq!(ban_cpus_command(Some(&CpuSet::new())), "settings cpus NULL");
        assert_eq!(ban_irqs_command(&[45, 46]), "settings ban irqs 45 46");
        assert_eq!(ban_irqs_command(&[]), "settings ban irqs NONE");
        let long = ban_irqs_command(&(1000..1200).collect::<Vec<_>>());
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            exchange(&dir.path().join("s.sock"), &long),
            Err(IrqbalanceError::TooLong { .. })
        ));
    }

    /// A listener in a temporary folder plays irqbalance: it gets the command with the
    /// credentials of this process, answers `setup`, and closes.
    #[test]
    fn the_command_goes_with_credentials_and_the_answer_comes_back() {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("irqbalance42.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        rustix::net::sockopt::set_socket_passcred(&listener, true).unwrap();
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 500];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
            let mut cmsg = RecvAncillaryBuffer::new(&mut space);
            let mut iov = [std::io::IoSliceMut::new(&mut buf)];
            let msg = recvmsg(&conn, &mut iov, &mut cmsg, RecvFlags::empty()).unwrap();
            let uid = cmsg.drain().find_map(|c| match c {
                RecvAncillaryMessage::ScmCredentials(c) => Some(c.uid.as_raw()),
                _ => None,
            });
            let n = msg.bytes;
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            use std::io::Write as _;
            (&conn).write_all(b"SLEEP 10 BANNED 00000003").unwrap();
            (text, uid)
        });
        let setup = SocketBalancer.setup(&path).unwrap();
        let (command, uid) = server.join().unwrap();
        assert_eq!(command, "setup");
        assert_eq!(uid, Some(pinctl_trust::euid()));
        assert_eq!(setup.banned_cpus.to_string(), "0-1");
    }
}
