//! The small value languages of the service file: byte sizes, durations, signal names. Each
//! parser takes a `&str` and says in its error what was expected, so that the caller only
//! adds where it was.

use std::time::Duration;

/// Parses a byte size: `48GiB`, `512MiB`, `4G`, `1.5GiB`, `4096`, `64 KiB`.
///
/// K, M, G, T, P and E (alone or as Ki/KiB, ...) are powers of 1024, as in systemd, numactl
/// and the JVM's `-Xmx4g`. `KB`, `MB`, `GB`, ... are refused: people use them for both 1000^n
/// and 1024^n, and a config that means one must not silently get the other.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty size: expected a byte size such as `48GiB` or `512MiB`".into());
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (number, unit) = (&s[..split], s[split..].trim_start());
    if number.is_empty() {
        if s.starts_with('-') {
            return Err(format!("size `{text}` is negative"));
        }
        return Err(format!("invalid size `{text}`: expected a number then a unit, e.g. `48GiB`"));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "ki" | "kib" => 10,
        "m" | "mi" | "mib" => 20,
        "g" | "gi" | "gib" => 30,
        "t" | "ti" | "tib" => 40,
        "p" | "pi" | "pib" => 50,
        "e" | "ei" | "eib" => 60,
        u @ ("kb" | "mb" | "gb" | "tb" | "pb" | "eb") => {
            let binary = format!("{}iB", u[..1].to_ascii_uppercase());
            return Err(format!(
                "ambiguous size unit `{}` in `{text}`: write `{number}{binary}` (powers of 1024) or a plain number of bytes",
                &unit
            ));
        }
        _ => {
            return Err(format!(
                "unknown size unit `{unit}` in `{text}`: expected B, K/KiB, M/MiB, G/GiB, T/TiB, P/PiB or E/EiB"
            ));
        }
    };
    let digits: String = number.chars().filter(|&c| c != '_').collect();
    let too_large = || format!("size `{text}` is too large (at most 16EiB - 1)");
    let bad = || format!("invalid number `{number}` in size `{text}`");
    let bytes: u128 = match digits.split_once('.') {
        None => {
            let n: u128 = digits.parse().map_err(|_| bad())?;
            n.checked_shl(shift).filter(|v| v >> shift == n).ok_or_else(too_large)?
        }
        Some((int, frac)) => {
            if frac.is_empty() || int.is_empty() || frac.contains('.') {
                return Err(bad());
            }
            if shift == 0 {
                return Err(format!("size `{text}` has a fraction of a byte"));
            }
            if frac.len() > 18 || int.len() > 20 {
                return Err(too_large());
            }
            let int: u128 = int.parse().map_err(|_| bad())?;
            let frac_value: u128 = frac.parse().map_err(|_| bad())?;
            let scale = 10u128.pow(frac.len() as u32);
            // Rounded down to whole bytes: 1.1K is 1126 bytes, not 1126.4.
            (int << shift) + ((frac_value << shift) / scale)
        }
    };
    u64::try_from(bytes).map_err(|_| too_large())
}

/// Formats a byte count the way sizes are best written in the file (`48GiB`, `1536MiB`).
pub(crate) fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 6] =
        [("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    for (unit, shift) in UNITS {
        if bytes >= 1 << shift {
            return format!("{:.1}{unit}", bytes as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{bytes}B")
}

/// Parses a start limit, `N/DURATION` (`5/10s`): at most N (at least 1) starts within the
/// duration (longer than zero).
pub(crate) fn parse_start_limit(text: &str) -> Result<(u32, Duration), String> {
    let Some((n, d)) = text.split_once('/') else {
        return Err("expected `N/DURATION`, e.g. `5/10s`".into());
    };
    let n: u32 =
        n.trim().parse().map_err(|_| format!("`{}` is not a number of starts", n.trim()))?;
    if n == 0 {
        return Err("the number of starts must be at least 1".into());
    }
    let d = parse_duration(d)?;
    if d.is_zero() {
        return Err("the interval must be longer than zero".into());
    }
    Ok((n, d))
}

/// Parses a duration: `30s`, `2m`, `1m30s`, `500ms`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration: expected e.g. `30s`, `2m` or `1m30s`".into());
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        let secs: u64 = s.parse().map_err(|_| format!("duration `{text}` is too large"))?;
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    // Units must go from larger to smaller and appear once (`1m30s`, not `30s1m`), as in
    // systemd's time spans; anything else is more likely a typo than a meaning.
    let mut last_rank = usize::MAX;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "invalid duration `{text}`: expected numbers with units, e.g. `30s`, `2m`, `1m30s`"
            ));
        }
        let n: u64 =
            rest[..digits].parse().map_err(|_| format!("duration `{text}` is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        rest = rest[unit_len..].trim_start();
        let (rank, unit_duration) = match unit {
            "h" => (0, Duration::from_secs(3600)),
            "m" | "min" => (1, Duration::from_secs(60)),
            "s" => (2, Duration::from_secs(1)),
            "ms" => (3, Duration::from_millis(1)),
            "" => {
                return Err(format!(
                    "invalid duration `{text}`: `{n}` has no unit (h, m, s or ms)"
                ));
            }
            other => {
                return Err(format!(
                    "unknown duration unit `{other}` in `{text}`: expected h, m, s or ms"
                ));
            }
        };
        if last_rank != usize::MAX && rank <= last_rank {
            return Err(format!(
                "invalid duration `{text}`: units must go from hours to milliseconds, each once"
            ));
        }
        last_rank = rank;
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| unit_duration.checked_mul(n))
            .ok_or_else(|| format!("duration `{text}` is too large"))?;
        total = total.checked_add(part).ok_or_else(|| format!("duration `{text}` is too large"))?;
    }
    Ok(total)
}

/// The Linux signals a service can be stopped with, by their name without `SIG`.
pub(crate) const SIGNALS: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

/// Parses a signal name: `TERM`, `SIGTERM`, `sigterm`, and the aliases `IOT`, `POLL`, `CLD`.
/// Returns the canonical name without `SIG`.
///
/// Numbers are refused: several differ between architectures (SIGUSR1 is 10 on x86, 30 on
/// Alpha, 16 on MIPS), so a name is the only portable way to say which signal is meant.
pub(crate) fn parse_signal(text: &str) -> Result<&'static str, String> {
    let upper = text.trim().to_ascii_uppercase();
    if !upper.is_empty() && upper.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "signal numbers differ between architectures: write a name such as `TERM` instead of `{text}`"
        ));
    }
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let canonical = match name {
        "IOT" => "ABRT",
        "POLL" => "IO",
        "CLD" => "CHLD",
        other => other,
    };
    SIGNALS.iter().copied().find(|s| *s == canonical).ok_or_else(|| {
        format!(
            "unknown signal `{text}`: expected a name such as `TERM`, `INT`, `QUIT` or `SIGTERM`"
        )
    })
}

/// The candidate closest to `word`, when it is close enough to be a plausible typo.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(&word.to_ascii_lowercase(), c), *c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Longest service name: its instances' default units (`NAME-8191.service`) must stay within
/// systemd's 255-byte unit names, and each of up to 8192 instances holds its name.
pub(crate) const MAX_SERVICE_NAME: usize = 200;

/// Whether `name` is a valid service name: `[a-z0-9][a-z0-9_-]*`, at most
/// [`MAX_SERVICE_NAME`] bytes.
pub(crate) fn is_service_name(name: &str) -> bool {
    name.len() <= MAX_SERVICE_NAME && is_service_name_unbounded(name)
}

/// Whether `name` could name an instance: a service name, or a service name with `-N` after
/// it (`tikv`, `tikv-0`). Names come back from files pinctl did not necessarily write (a state
/// file) and become cgroup folder names: nothing else (`..`, `/`, blanks) may pass.
pub fn is_instance_name(name: &str) -> bool {
    name.len() <= MAX_SERVICE_NAME + 6 && is_service_name_unbounded(name)
}

fn is_service_name_unbounded(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
}

/// Whether `name` is a systemd unit name for a service (`tikv@0.service`).
pub fn is_service_unit_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".service") else { return false };
    !stem.is_empty()
        && name.len() <= 255
        && !stem.starts_with('@')
        // `tikv@.service` is a template: systemd cannot run it without an instance.
        && !stem.ends_with('@')
        && stem.bytes().all(|b| b.is_ascii_alphanumeric() || b":-_.\\@".contains(&b))
        && stem.matches('@').count() <= 1
}

/// Whether `name` could name a network interface (at most 15 bytes, no `/`, blanks or `:`).
pub fn is_interface_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0)
}

/// Whether `name` could be a user or group: a name or a numeric id, nothing that would break
/// `/etc/passwd` parsing.
pub(crate) fn is_account_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && !name.starts_with('-')
        && !name
            .bytes()
            .any(|b| b == b':' || b == b'/' || b == b',' || b.is_ascii_whitespace() || b < 0x20)
}

#[cfg(test)]
mod tests {
    #[test]
    fn start_limits() {
        use super::parse_start_limit as p;
        assert_eq!(p("5/10s"), Ok((5, Duration::from_secs(10))));
        assert_eq!(p(" 3 / 1m30s"), Ok((3, Duration::from_secs(90))));
        for bad in ["5", "0/10s", "x/10s", "5/0s", "5/10 seconds", "-1/1s"] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        let table: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("4096B", 4096),
            ("1K", 1024),
            ("1k", 1024),
            ("1KiB", 1024),
            ("512MiB", 512 << 20),
            ("512Mi", 512 << 20),
            ("4G", 4 << 30),
            ("4g", 4 << 30),
            ("48GiB", 48 << 30),
            ("48 GiB", 48 << 30),
            (" 2TiB ", 2 << 40),
            ("1.5GiB", 3 << 29),
            ("1.1K", 1126),
            ("1_000", 1000),
            ("15EiB", 15 << 60),
        ];
        for &(text, bytes) in table {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn bad_sizes() {
        for (text, needle) in [
            ("", "empty"),
            ("GiB", "expected a number"),
            ("-1G", "negative"),
            ("4GB", "ambiguous size unit `GB`"),
            ("4 mb", "write `4MiB`"),
            ("4X", "unknown size unit `X`"),
            ("4GiBs", "unknown size unit"),
            ("1.5", "fraction of a byte"),
            ("1.", "invalid number"),
            (".5G", "invalid number"),
            ("1.2.3G", "invalid number"),
            ("16EiB", "too large"),
            ("99999999999999999999999G", "too large"),
            ("1e9", "unknown size unit"),
        ] {
            let err = parse_size(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn durations() {
        let table: &[(&str, u64)] = &[
            ("30s", 30_000),
            ("2m", 120_000),
            ("2min", 120_000),
            ("1m30s", 90_000),
            ("1m 30s", 90_000),
            ("1h", 3_600_000),
            ("1h2m3s4ms", 3_723_004),
            ("500ms", 500),
            ("45", 45_000),
            ("0", 0),
        ];
        for &(text, ms) in table {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(ms)), "{text}");
        }
    }

    #[test]
    fn bad_durations() {
        for (text, needle) in [
            ("", "empty"),
            ("s", "expected numbers with units"),
            ("30", ""),
            ("30x", "unknown duration unit `x`"),
            ("30sec", "unknown duration unit `sec`"),
            ("30s1m", "from hours to milliseconds"),
            ("1m1m", "from hours to milliseconds"),
            ("1m30", "has no unit"),
            ("-5s", "expected numbers"),
            ("1.5s", "unknown duration unit `.`"),
            ("99999999999h", "too large"),
        ] {
            if text == "30" {
                assert!(parse_duration(text).is_ok());
                continue;
            }
            let err = parse_duration(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn signals() {
        for (text, name) in [
            ("TERM", "TERM"),
            ("SIGTERM", "TERM"),
            ("sigterm", "TERM"),
            ("int", "INT"),
            ("SIGQUIT", "QUIT"),
            ("IOT", "ABRT"),
            ("SIGPOLL", "IO"),
            ("CLD", "CHLD"),
            ("WINCH", "WINCH"),
        ] {
            assert_eq!(parse_signal(text), Ok(name), "{text}");
        }
        for text in ["", "SIG", "TERMINATE", "SIGSIGTERM", "15", "RTMIN"] {
            assert!(parse_signal(text).is_err(), "{text}");
        }
        assert!(parse_signal("15").unwrap_err().contains("architectures"));
    }

    #[test]
    fn hints() {
        let keys = ["memory-policy", "memory", "instances", "only-nodes"];
        assert_eq!(closest("memory-polcy", &keys), Some("memory-policy"));
        assert_eq!(closest("instance", &keys), Some("instances"));
        assert_eq!(closest("only_nodes", &keys), Some("only-nodes"));
        assert_eq!(closest("zzz", &keys), None);
    }

    #[test]
    fn names() {
        for ok in ["tikv", "a", "0", "my_sql-2"] {
            assert!(is_service_name(ok), "{ok}");
        }
        for bad in ["", "TiKV", "-a", "_a", "a.b", "a b", "tí"] {
            assert!(!is_service_name(bad), "{bad}");
        }
        for ok in ["tikv-0", "redis", "a-8191"] {
            assert!(is_instance_name(ok), "{ok}");
        }
        for bad in ["", "../victim", "a/b", ".", "_supervisor", "A-0", "a 0", "a\n"] {
            assert!(!is_instance_name(bad), "{bad}");
        }
        assert!(is_service_unit_name("tikv@0.service"));
        assert!(is_service_unit_name("mysqld.service"));
        assert!(!is_service_unit_name("tikv"));
        assert!(!is_service_unit_name("tikv.socket"));
        assert!(!is_service_unit_name("tikv@.service"));
        assert!(!is_service_unit_name("a b.service"));
        assert!(!is_service_unit_name("a/b.service"));
        assert!(is_interface_name("eth0"));
        assert!(is_interface_name("enp65s0f0np0"));
        assert!(!is_interface_name("averyveryverylongname"));
        assert!(!is_interface_name("eth0:1"));
        assert!(is_account_name("mysql"));
        assert!(is_account_name("1001"));
        assert!(!is_account_name("my sql"));
        assert!(!is_account_name("a:b"));
    }

    #[test]
    fn format_sizes() {
        assert_eq!(format_size(48 << 30), "48GiB");
        assert_eq!(format_size(1536 << 20), "1536MiB");
        assert_eq!(format_size(1000), "1000B");
        assert_eq!(format_size(1500), "1.5KiB");
    }

    proptest! {
        #[test]
        fn size_round_trips_through_each_unit(n in 0u64..1 << 13, unit in 0usize..6) {
            let (suffix, shift) = [("", 0), ("K", 10), ("MiB", 20), ("G", 30), ("TiB", 40), ("Pi", 50)][unit];
            prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n << shift));
        }

        #[test]
        fn format_size_parses_back_exactly_when_whole(n in 1u64..1 << 40) {
            let text = format_size(n);
            if !text.contains('.') {
                prop_assert_eq!(parse_size(&text), Ok(n));
            }
        }

        #[test]
        fn duration_parts_add_up(h in 0u64..100, m in 0u64..60, s in 0u64..60, ms in 0u64..1000) {
            let text = format!("{h}h{m}m{s}s{ms}ms");
            let expect = Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms);
            prop_assert_eq!(parse_duration(&text), Ok(expect));
        }

        #[test]
        fn size_parser_never_panics(s in "\\PC{0,12}") {
            let _ = parse_size(&s);
            let _ = parse_duration(&s);
            let _ = parse_signal(&s);
        }

        #[test]
        fn every_signal_parses_with_and_without_sig(i in 0usize..31, lower in any::<bool>()) {
            let name = SIGNALS[i];
            let with = format!("SIG{name}");
            let (a, b) = if lower { (name.to_lowercase(), with.to_lowercase()) } else { (name.to_string(), with) };
            prop_assert_eq!(parse_signal(&a), Ok(name));
            prop_assert_eq!(parse_signal(&b), Ok(name));
        }
    }
}
