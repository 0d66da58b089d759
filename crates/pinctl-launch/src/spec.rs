//! numactl's node and CPU list grammar (libnuma's `numa_parse_nodestring`/`cpustring`), kept
//! apart from any I/O so it can be tested on strings.
//!
//! ```text
//! spec  := ['!'] ['+'] item (',' item)*        (empty string: the empty set)
//! item  := N | N-M | all | netdev:IF | block:DEV | file:PATH | pci:BDF | ip:HOST
//! ```
//! Numbers follow C's `strtoul(.., 0)` (so `0x3` and `010` are hex and octal, as in numactl).
//! `+` makes numbers indexes into the allowed set (`+0` = first allowed id); `!` inverts
//! within the allowed set; `all` is the allowed set; a device item resolves to its node(s) and,
//! as in numactl, ends the list. Every id must be allowed.
//!
//! Two dialects: pinctl's own options ([`Spec::parse`]) refuse a backwards range (`5-3`) and a
//! list that names nothing (`!0` on one node, `''`), as the service file does; the numactl
//! personality ([`Spec::parse_numactl`]) does what numactl 2.0 does: `N-M` with `M < N` is `N`
//! alone, and only an empty string may name nothing (`-i ''`: the default policy).

use std::marker::PhantomData;

use pinctl_topology::{CpuKind, IdKind, IdSet, NodeKind};

/// What a list holds. Node lists may name devices (`netdev:eth0`); CPU lists may not, and
/// the type of the list, not a runtime flag, says which it is.
pub trait ListKind: IdKind {
    /// Whether device items are allowed.
    const DEVICES: bool;
}

impl ListKind for CpuKind {
    const DEVICES: bool = false;
}

impl ListKind for NodeKind {
    const DEVICES: bool = true;
}

/// A parsed list of CPUs or nodes, before the host's allowed set gives it meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec<K: ListKind> {
    /// `!`: everything allowed but the list.
    pub invert: bool,
    /// `+`: numbers index the allowed set.
    pub relative: bool,
    /// The list's items in order.
    pub items: Vec<Item>,
    /// The text, shortened, for messages.
    pub text: String,
    /// numactl's dialect (see the module documentation).
    pub numactl: bool,
    kind: PhantomData<K>,
}

/// A CPU list.
pub type CpuSpec = Spec<CpuKind>;
/// A node list.
pub type NodeSpec = Spec<NodeKind>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Range(u64, u64),
    All,
    Device(Device),
}

/// A device whose node(s) stand for a node number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    Netdev(String),
    Block(String),
    File(String),
    Pci(String),
    Ip(String),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Netdev(s) => write!(f, "netdev:{s}"),
            Device::Block(s) => write!(f, "block:{s}"),
            Device::File(s) => write!(f, "file:{s}"),
            Device::Pci(s) => write!(f, "pci:{s}"),
            Device::Ip(s) => write!(f, "ip:{s}"),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("invalid {kind} list `{spec}`: `{element}` is not a number, a range or `all`")]
    Syntax { kind: &'static str, spec: String, element: String },
    #[error("invalid {kind} list `{spec}`: device specifications are for nodes only")]
    DeviceForCpus { kind: &'static str, spec: String },
    #[error("{kind} `{id}` is not allowed here: this process may use {kind}s {allowed}")]
    NotAllowed { kind: &'static str, id: u64, allowed: String },
    #[error(
        "relative {kind} `+{index}` is out of range: there are {count} allowed {kind}s ({allowed})"
    )]
    RelativeOutOfRange { kind: &'static str, index: u64, count: usize, allowed: String },
    #[error("invalid {kind} list `{spec}`: range `{element}` runs backwards")]
    Backwards { kind: &'static str, spec: String, element: String },
    #[error("invalid {kind} list `{spec}`: it names no {kind}s")]
    Empty { kind: &'static str, spec: String },
}

/// C's `strtoul(s, &end, 0)` on a digit prefix: returns the value and the rest.
fn strtoul(s: &str) -> Option<(u64, &str)> {
    let (radix, digits) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, h)
    } else if s.starts_with('0') && s.len() > 1 && s.as_bytes()[1].is_ascii_digit() {
        (8, &s[1..])
    } else {
        (10, s)
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    if end == 0 {
        // "0x" with no hex digit is the number 0 followed by "x..." in C; numactl then fails on
        // the trailing text, which we reproduce by failing here.
        return if radix == 10 || s == "0" { None } else { Some((0, &s[1..])) };
    }
    let v = u64::from_str_radix(&digits[..end], radix).ok()?;
    Some((v, &digits[end..]))
}

impl<K: ListKind> Spec<K> {
    /// pinctl's own options: backwards ranges and lists that name nothing are refused.
    pub fn parse(text: &str) -> Result<Spec<K>, SpecError> {
        Spec::parse_dialect(text, false)
    }

    /// The numactl personality: numactl 2.0's reading of backwards ranges and empty lists.
    pub fn parse_numactl(text: &str) -> Result<Spec<K>, SpecError> {
        Spec::parse_dialect(text, true)
    }

    fn parse_dialect(text: &str, numactl: bool) -> Result<Spec<K>, SpecError> {
        let shown = pinctl_topology::text::shown;
        let syntax = |element: &str| SpecError::Syntax {
            kind: K::NAME,
            spec: shown(text),
            element: shown(element),
        };
        let mut s = text;
        let invert = s.starts_with('!');
        if invert {
            s = &s[1..];
        }
        let relative = s.starts_with('+');
        if relative {
            s = &s[1..];
        }
        let spec = |invert, relative, items| Spec {
            invert,
            relative,
            items,
            text: shown(text),
            numactl,
            kind: PhantomData,
        };
        let mut items = Vec::new();
        if text.is_empty() {
            return Ok(spec(invert, relative, items));
        }
        loop {
            if s == "all" {
                items.push(Item::All);
                break;
            }
            if let Some((prefix, rest)) = s.split_once(':') {
                let dev = match prefix {
                    "netdev" => Some(Device::Netdev(rest.to_string())),
                    "block" => Some(Device::Block(rest.to_string())),
                    "file" => Some(Device::File(rest.to_string())),
                    "pci" => Some(Device::Pci(rest.to_string())),
                    "ip" => Some(Device::Ip(rest.to_string())),
                    _ => None,
                };
                if let Some(dev) = dev {
                    if !K::DEVICES {
                        return Err(SpecError::DeviceForCpus { kind: K::NAME, spec: shown(text) });
                    }
                    items.push(Item::Device(dev));
                    break;
                }
            }
            let element = s.split(',').next().unwrap_or(s);
            let (lo, rest) = strtoul(s).ok_or_else(|| syntax(element))?;
            let (hi, rest) = match rest.strip_prefix('-') {
                Some(r) => strtoul(r).ok_or_else(|| syntax(element))?,
                None => (lo, rest),
            };
            if hi < lo && !numactl {
                return Err(SpecError::Backwards {
                    kind: K::NAME,
                    spec: shown(text),
                    element: shown(element),
                });
            }
            items.push(Item::Range(lo, hi));
            match rest.strip_prefix(',') {
                Some(r) => s = r,
                None if rest.is_empty() => break,
                None => return Err(syntax(element)),
            }
        }
        Ok(spec(invert, relative, items))
    }

    /// The set this spec names, given the ids the process may use and a resolver for device
    /// items.
    pub fn resolve<E>(
        &self,
        allowed: &IdSet<K>,
        mut device: impl FnMut(&Device) -> Result<IdSet<K>, E>,
    ) -> Result<IdSet<K>, E>
    where
        E: From<SpecError>,
    {
        let kname = K::NAME;
        let absolute = |n: u64| -> Result<u64, SpecError> {
            if !self.relative {
                return Ok(n);
            }
            allowed.iter().nth(n as usize).map(u64::from).ok_or_else(|| {
                SpecError::RelativeOutOfRange {
                    kind: kname,
                    index: n,
                    count: allowed.len(),
                    allowed: allowed.to_string(),
                }
            })
        };
        let check = |id: u64| -> Result<u32, SpecError> {
            u32::try_from(id)
                .ok()
                .filter(|&i| allowed.contains(i))
                .ok_or_else(|| SpecError::NotAllowed { kind: kname, id, allowed: display(allowed) })
        };
        let mut set = IdSet::new();
        for item in &self.items {
            match item {
                Item::All => set = set.union(allowed),
                Item::Device(d) => set = set.union(&device(d)?),
                Item::Range(lo, hi) => {
                    let (lo, hi) = (absolute(*lo)?, absolute(*hi)?);
                    // numactl 2.0 reads a backwards range `N-M` as `N` alone (the strict
                    // dialect refused it in `parse`).
                    let hi = hi.max(lo);
                    check(lo)?;
                    check(hi)?;
                    // As libnuma does, a range keeps only its allowed members.
                    set = set.union(
                        &allowed.iter().filter(|&i| (lo..=hi).contains(&u64::from(i))).collect(),
                    );
                }
            }
        }
        if self.invert {
            set = allowed.difference(&set);
        }
        if set.is_empty() && !(self.numactl && self.text.is_empty()) {
            return Err(SpecError::Empty { kind: kname, spec: self.text.clone() }.into());
        }
        Ok(set)
    }
}

fn display<K: IdKind>(set: &IdSet<K>) -> String {
    if set.is_empty() { "none".to_string() } else { set.to_string() }
}

/// numactl's `pci:[seg:]bus:dev[:func]` (or `.func`) as a sysfs PCI address.
pub fn pci_address(spec: &str) -> Option<String> {
    let hex = |s: &str, max: u32| u32::from_str_radix(s, 16).ok().filter(|&v| v <= max);
    let (rest, func) = match spec.rsplit_once('.') {
        Some((r, f)) => (r, Some(hex(f, 7)?)),
        None => (spec, None),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (seg, bus, dev, func) = match (parts.as_slice(), func) {
        ([b, d], f) => (0, hex(b, 0xff)?, hex(d, 0x1f)?, f.unwrap_or(0)),
        ([s, b, d], Some(f)) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, f),
        // numactl's bus:dev:func form, or seg:bus:dev without a function.
        ([a, b, c], None) if c.len() == 1 => (0, hex(a, 0xff)?, hex(b, 0x1f)?, hex(c, 7)?),
        ([s, b, d], None) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, 0),
        ([s, b, d, f], None) => (hex(s, 0xffff)?, hex(b, 0xff)?, hex(d, 0x1f)?, hex(f, 7)?),
        _ => return None,
    };
    Some(format!("{seg:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids<K: IdKind>(s: &str) -> IdSet<K> {
        s.parse().unwrap()
    }

    fn node(text: &str, allowed: &str) -> Result<IdSet<NodeKind>, SpecError> {
        resolve(text, allowed)
    }

    fn cpu(text: &str, allowed: &str) -> Result<IdSet<CpuKind>, SpecError> {
        resolve(text, allowed)
    }

    fn resolve<K: ListKind>(text: &str, allowed: &str) -> Result<IdSet<K>, SpecError> {
        Spec::<K>::parse(text)?.resolve(&ids(allowed), |d| -> Result<IdSet<K>, SpecError> {
            match d {
                Device::Netdev(n) if n == "eth0" => Ok(ids("1")),
                _ => panic!("unexpected device {d}"),
            }
        })
    }

    #[test]
    fn numbers_ranges_and_all() {
        assert_eq!(node("0", "0-3").unwrap(), ids("0"));
        assert_eq!(node("1-2,0", "0-3").unwrap(), ids("0-2"));
        assert_eq!(node("all", "0-3").unwrap(), ids("0-3"));
        assert_eq!(node("0,all", "0,2").unwrap(), ids("0,2"));
        assert!(matches!(node("", "0-3"), Err(SpecError::Empty { .. })));
        // strtoul(.., 0): hex and octal, as numactl reads them.
        assert_eq!(node("0x3", "0-3").unwrap(), ids("3"));
        assert_eq!(cpu("010", "0-15").unwrap(), ids("8"));
        // A range keeps only allowed members (a cpuset with holes).
        assert_eq!(cpu("0-3", "0,2-3,7").unwrap(), ids("0,2-3"));
    }

    #[test]
    fn invert_and_relative() {
        assert_eq!(cpu("!0", "0-1").unwrap(), ids("1"));
        assert_eq!(node("!1-2", "0-3").unwrap(), ids("0,3"));
        // + indexes into the allowed set: the first allowed CPU of 4-7 is 4.
        assert_eq!(cpu("+0-1", "4-7").unwrap(), ids("4-5"));
        assert_eq!(cpu("!+0", "4-7").unwrap(), ids("5-7"));
        assert_eq!(node("+1", "2,5").unwrap(), ids("5"));
        assert_eq!(
            node("+2", "2,5").unwrap_err(),
            SpecError::RelativeOutOfRange {
                kind: "node",
                index: 2,
                count: 2,
                allowed: "2,5".into()
            }
        );
        // `!` must come before `+`, as in numactl.
        assert!(cpu("+!0", "0-3").is_err());
    }

    #[test]
    fn devices_end_the_list_and_are_for_nodes() {
        assert_eq!(node("netdev:eth0", "0-3").unwrap(), ids("1"));
        assert_eq!(node("0,netdev:eth0", "0-3").unwrap(), ids("0-1"));
        assert_eq!(
            NodeSpec::parse("file:/a,b").unwrap().items,
            vec![Item::Device(Device::File("/a,b".into()))]
        );
        assert_eq!(
            NodeSpec::parse("pci:0000:3b:00.0").unwrap().items,
            vec![Item::Device(Device::Pci("0000:3b:00.0".into()))]
        );
        assert!(matches!(CpuSpec::parse("netdev:eth0"), Err(SpecError::DeviceForCpus { .. })));
    }

    #[test]
    fn ids_outside_the_allowed_set_name_the_allowed_set() {
        let e = node("1", "0").unwrap_err();
        assert_eq!(e.to_string(), "node `1` is not allowed here: this process may use nodes 0");
        assert!(cpu("0-5", "0-1").is_err());
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in ["x", "1-", "-1", "1,,2", "1,", "1-2-3", "0xg", "all,0", "1 2"] {
            assert!(node(bad, "0-3").is_err(), "{bad}");
        }
    }

    #[test]
    fn pci_addresses_in_numactl_forms() {
        assert_eq!(pci_address("3b:00.0").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(pci_address("0000:3b:00.1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(pci_address("3b:00:1").as_deref(), Some("0000:3b:00.1"));
        assert_eq!(pci_address("1:3b:00").as_deref(), Some("0001:3b:00.0"));
        assert_eq!(pci_address("3b"), None);
        assert_eq!(pci_address("zz:00.0"), None);
    }

    #[test]
    fn backwards_ranges_and_empty_lists_in_both_dialects() {
        assert!(matches!(cpu("1-0,0", "0-3"), Err(SpecError::Backwards { .. })));
        assert!(matches!(cpu("5-3", "0-7"), Err(SpecError::Backwards { .. })));
        assert!(matches!(node("!0", "0"), Err(SpecError::Empty { .. })));
        let numactl = |text: &str, allowed: &str| {
            CpuSpec::parse_numactl(text)?
                .resolve(&ids(allowed), |_| -> Result<IdSet<CpuKind>, SpecError> {
                    unreachable!("no devices")
                })
        };
        // numactl 2.0.16: `--physcpubind=1-0` is CPU 1, `1-0,0` is 0-1, `''` is nothing.
        assert_eq!(numactl("1-0", "0-3").unwrap(), ids("1"));
        assert_eq!(numactl("1-0,0", "0-3").unwrap(), ids("0-1"));
        assert_eq!(numactl("", "0-3").unwrap(), ids(""));
        assert!(matches!(numactl("!0-3", "0-3"), Err(SpecError::Empty { .. })));
    }
}
