//! Which capture stands for which host: `HOST=CAPTURE` arguments, or a folder of captures
//! named after their hosts (`10.0.1.16.json`, `db-7.tar.gz`, a sysfs tree `db-8/`).

use std::fs;
use std::path::{Path, PathBuf};

/// One host and the capture it is planned on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCapture {
    /// As the deployer names it: a host name or an address (TiUP's `host`, Ansible's
    /// `inventory_hostname`).
    pub host: String,
    pub capture: PathBuf,
}

/// Why the hosts of a fleet could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("`{arg}` is not HOST=CAPTURE (a host name or address, `=`, then a capture's path)")]
    NotHostCapture { arg: String },
    #[error(
        "`{host}` is not a host name or address: letters, digits, `.`, `-`, `_`, `:` and `%`, \
         at most 253 of them"
    )]
    BadHost { host: String },
    #[error("host `{host}` is given twice: `{first}` and `{second}`")]
    Twice { host: String, first: PathBuf, second: PathBuf },
    #[error("cannot list captures in `{path}`")]
    Folder {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Suffixes of the captures pinctl reads, longest first, so that `db.tar.gz` is host `db`.
const CAPTURE_SUFFIXES: [&str; 9] =
    [".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".txz", ".tar", ".json", ".xml"];

/// Parses `HOST=CAPTURE`. The host is everything before the first `=` (no host name or
/// address holds one), so a capture path may contain `=`.
pub fn host_capture(arg: &str) -> Result<HostCapture, HostsError> {
    let Some((host, capture)) = arg.split_once('=').filter(|(_, c)| !c.is_empty()) else {
        return Err(HostsError::NotHostCapture { arg: arg.to_string() });
    };
    checked_host(host)?;
    Ok(HostCapture { host: host.to_string(), capture: PathBuf::from(capture) })
}

/// A host name, an IPv4 or IPv6 address (with a `%zone`): what a deployer may call a host.
/// Anything else (a blank, a `/`, a control character) is refused rather than carried into
/// output keys and file names.
fn checked_host(host: &str) -> Result<(), HostsError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_:%".contains(c);
    if host.is_empty() || host.len() > 253 || !host.chars().all(allowed) {
        return Err(HostsError::BadHost { host: host.to_string() });
    }
    Ok(())
}

/// The captures in `dir`, each named after its host: a file with a capture's suffix, or a
/// folder (a sysfs tree). Other entries and hidden ones are skipped; sorted by host.
pub fn captures_in(dir: &Path) -> Result<Vec<HostCapture>, HostsError> {
    let io = |source| HostsError::Folder { path: dir.to_path_buf(), source };
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let is_dir = entry.file_type().map_err(io)?.is_dir();
        let host = if is_dir {
            Some(name.as_str())
        } else {
            CAPTURE_SUFFIXES.iter().find_map(|s| name.strip_suffix(s))
        };
        if let Some(host) = host {
            checked_host(host)?;
            found.push(HostCapture { host: host.to_string(), capture: entry.path() });
        }
    }
    found.sort_by(|a, b| a.host.cmp(&b.host));
    refuse_twice(&found)?;
    Ok(found)
}

/// Two captures for one host: which would be planned is a guess, so neither is.
pub fn refuse_twice(hosts: &[HostCapture]) -> Result<(), HostsError> {
    let mut sorted: Vec<&HostCapture> = hosts.iter().collect();
    sorted.sort_by(|a, b| a.host.cmp(&b.host));
    match sorted.windows(2).find(|w| w[0].host == w[1].host) {
        Some(w) => Err(HostsError::Twice {
            host: w[0].host.clone(),
            first: w[0].capture.clone(),
            second: w[1].capture.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_then_capture() {
        let hc = host_capture("10.0.1.16=caps/a=b.json").unwrap();
        assert_eq!(hc.host, "10.0.1.16");
        assert_eq!(hc.capture, PathBuf::from("caps/a=b.json"));
        assert_eq!(host_capture("fe80::1%eth0=x.json").unwrap().host, "fe80::1%eth0");
        for bad in ["nohost", "=x.json", "h=", "a b=x.json", "a/b=x.json", "h\u{1b}=x"] {
            assert!(host_capture(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_folder_names_its_hosts() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["db-1.json", "db-2.tar.gz", "db-3.xml", "notes.txt", ".hidden.json"] {
            fs::write(dir.path().join(f), "").unwrap();
        }
        fs::create_dir(dir.path().join("db-4")).unwrap();
        let hosts: Vec<String> =
            captures_in(dir.path()).unwrap().into_iter().map(|h| h.host).collect();
        assert_eq!(hosts, ["db-1", "db-2", "db-3", "db-4"]);
    }

    #[test]
    fn one_capture_per_host() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("db-1.json"), "").unwrap();
        fs::write(dir.path().join("db-1.xml"), "").unwrap();
        let err = captures_in(dir.path()).unwrap_err();
        assert!(matches!(err, HostsError::Twice { ref host, .. } if host == "db-1"), "{err}");
    }
}
