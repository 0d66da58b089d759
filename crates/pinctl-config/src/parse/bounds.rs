//! What a whole file may expand to, checked before any service is expanded into instances.
//!
//! Each service is bounded on its own (`instances` at most [`MAX_INSTANCES`]), but a file is
//! many services: 200 lines of `instances = 8192` make 1.6 million instances, and one
//! `{instance}` string copied into 8192 instances is 8192 strings. So the file as a whole is
//! bounded twice, from the merged tables alone: its instances all together, and the bytes of
//! the per-instance settings they would be given.

use std::mem::size_of;

use super::{MAX_INSTANCES, PLACEHOLDER, RawService, Walker};
use crate::diagnostic::Span;
use crate::model::Instance;

/// The most bytes of per-instance settings a file expands to, all instances together: an
/// instance's name, the `{instance}` arguments of its `command` (the others are shared),
/// `near`, `unit`, `working-dir`, `env`, `output` and `pid-file`, with what each string costs
/// to hold (and a `near` entry what it costs to resolve and plan). 8192 instances with a
/// command line of 32 `{instance}` arguments, twenty `env` variables and two `near` entries
/// take about 41 MiB; 8192 instances may have 14 `near` entries each.
pub const MAX_EXPANDED_BYTES: u64 = 64 << 20;

/// What holding one more string costs besides its bytes: its `String` (or shared pointer)
/// and the allocator's rounding.
const STRING_COST: u64 = 32;

/// What a `near` entry of an instance costs besides its string: each distinct entry is
/// resolved to devices, kept in the planner's inputs with them, and becomes a target the
/// planner weighs for every option of its instance (measured: about half a KiB each).
const NEAR_ENTRY_COST: u64 = 480;

/// What one instance of a service holds once expanded, by the key that puts it there.
#[derive(Debug, Default, Clone, Copy)]
struct InstanceCost {
    fixed: u64,
    command: u64,
    near: u64,
    env: u64,
    /// `unit`, `working-dir`, `output`, `pid-file`.
    paths: u64,
}

impl InstanceCost {
    fn of(service_name: &str, m: &RawService) -> InstanceCost {
        let string = |s: &str| s.len() as u64 + STRING_COST;
        let command =
            m.command.iter().flat_map(|(argv, _)| argv).map(|a| match a.contains(PLACEHOLDER) {
                true => string(a),
                // Held once and shared: one pointer per instance.
                false => size_of::<std::sync::Arc<str>>() as u64,
            });
        let paths = [&m.unit, &m.working_dir, &m.output, &m.drift.pid_file];
        InstanceCost {
            // The instance itself, its name (`NAME-8191`) and the key of its `pid-file`.
            fixed: size_of::<Instance>() as u64 + 2 * string(service_name) + 10,
            command: command.sum(),
            near: m.near.iter().flatten().map(|(n, _)| string(n) + NEAR_ENTRY_COST).sum(),
            env: m.env.iter().map(|(k, (v, _))| string(k) + string(v)).sum(),
            paths: paths.iter().filter_map(|p| p.as_ref()).map(|(p, _)| string(p)).sum(),
        }
    }

    fn total(&self) -> u64 {
        self.fixed + self.command + self.near + self.env + self.paths
    }

    /// The key that makes most of it, for the message.
    fn largest(&self, m: &RawService) -> String {
        let near = m.near.as_ref().map_or(0, Vec::len);
        let parts = [
            (self.command, format!("`command` ({} arguments)", m.command_len())),
            (self.near, format!("`near` ({near} entries)")),
            (self.env, format!("`env` ({} variables)", m.env.len())),
            (self.paths, "its paths".to_string()),
            (self.fixed, "its name".to_string()),
        ];
        parts.into_iter().max_by_key(|(n, _)| *n).map(|(_, what)| what).unwrap_or_default()
    }
}

impl RawService {
    fn command_len(&self) -> usize {
        self.command.as_ref().map_or(0, |(argv, _)| argv.len())
    }

    /// How many instances the service asks for.
    pub(super) fn instance_count(&self) -> u32 {
        self.instances.as_ref().map_or(1, |(n, _)| *n)
    }
}

impl Walker {
    /// Whether the services (name, name span, merged table) stay within [`MAX_INSTANCES`] and
    /// [`MAX_EXPANDED_BYTES`] all together; each bound broken is one error at the largest
    /// service (its `instances`, or its name), with the largest services in notes.
    pub(super) fn within_bounds(&mut self, services: &[(&str, &Span, &RawService)]) -> bool {
        let instances = self.instances_within_bound(services);
        instances && self.expansion_within_bound(services)
    }

    fn instances_within_bound(&mut self, services: &[(&str, &Span, &RawService)]) -> bool {
        let counts: Vec<u64> = services.iter().map(|s| u64::from(s.2.instance_count())).collect();
        let total: u64 = counts.iter().sum();
        if total <= u64::from(MAX_INSTANCES) {
            return true;
        }
        let (_, name_span, merged) = services[largest(&counts)];
        let span = merged.instances.as_ref().map_or(name_span, |(_, s)| s).clone();
        let notes = self.largest_notes(services, &counts, |count, _| {
            format!("{count} instance{}", if count == 1 { "" } else { "s" })
        });
        let d = self.error(
            &span,
            format!(
                "the file defines {total} instances in all ({} services), more than the {} a file may have",
                services.len(),
                MAX_INSTANCES
            ),
        );
        d.notes.extend(notes);
        d.help = Some(format!(
            "each instance needs a CPU of its own and Linux builds top out at {MAX_INSTANCES} \
             CPUs: lower `instances` (it is per service, and `[defaults]` gives it to every \
             service) or split the file per host"
        ));
        false
    }

    fn expansion_within_bound(&mut self, services: &[(&str, &Span, &RawService)]) -> bool {
        let costs: Vec<InstanceCost> =
            services.iter().map(|(name, _, m)| InstanceCost::of(name, m)).collect();
        let bytes: Vec<u64> = services
            .iter()
            .zip(&costs)
            .map(|(s, c)| u64::from(s.2.instance_count()).saturating_mul(c.total()))
            .collect();
        let total = bytes.iter().fold(0u64, |a, b| a.saturating_add(*b));
        if total <= MAX_EXPANDED_BYTES {
            return true;
        }
        let biggest = largest(&bytes);
        let notes = self.largest_notes(services, &bytes, |_, i| {
            let (_, _, m) = services[i];
            format!(
                "{} instance{} of {} each, most of it {}",
                m.instance_count(),
                if m.instance_count() == 1 { "" } else { "s" },
                shown_size(costs[i].total()),
                costs[i].largest(m)
            )
        });
        let d = self.error(
            services[biggest].1,
            format!(
                "the services of the file expand to {} of per-instance settings, more than the {} \
                 a file may expand to",
                shown_size(total),
                shown_size(MAX_EXPANDED_BYTES)
            ),
        );
        d.notes.extend(notes);
        d.help = Some(
            "every instance gets its own copy of `near`, `env`, the paths and each `command` \
             argument that holds `{instance}`: shorten them, lower `instances`, or split the file"
                .into(),
        );
        false
    }

    /// Notes naming the (at most three) services with the largest `sizes`, where each is,
    /// and how many others there are.
    fn largest_notes(
        &self,
        services: &[(&str, &Span, &RawService)],
        sizes: &[u64],
        describe: impl Fn(u64, usize) -> String,
    ) -> Vec<String> {
        const SHOWN: usize = 3;
        let mut order: Vec<usize> = (0..services.len()).collect();
        // Largest first; equal sizes in file order.
        order.sort_by_key(|&i| (std::cmp::Reverse(sizes[i]), i));
        let mut notes: Vec<String> = order
            .iter()
            .take(SHOWN)
            .map(|&i| {
                let (name, span, _) = services[i];
                format!(
                    "service `{name}` ({}): {}",
                    self.location_text(span),
                    describe(sizes[i], i)
                )
            })
            .collect();
        if services.len() > SHOWN {
            notes.push(format!("and {} more services", services.len() - SHOWN));
        }
        notes
    }
}

/// The index of the largest of `sizes`, the first of equals: where the error points, the
/// service whose `instances` or settings are best lowered.
fn largest(sizes: &[u64]) -> usize {
    (0..sizes.len()).max_by_key(|&i| (sizes[i], std::cmp::Reverse(i))).unwrap_or(0)
}

/// A byte count in its largest binary unit, to one decimal (`470.8MiB`, `64MiB`, `900B`).
fn shown_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)];
    let (unit, shift) = UNITS.into_iter().find(|(_, s)| bytes >= 1 << s).unwrap_or(("B", 0));
    let value = bytes as f64 / (1u64 << shift) as f64;
    let text = format!("{value:.1}");
    format!("{}{unit}", text.strip_suffix(".0").unwrap_or(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the services of `text` expand to, and whether the file is accepted.
    fn expanded(text: &str) -> (bool, u64) {
        let (document, errors) = toml::de::DeTable::parse_recoverable(text);
        assert!(errors.is_empty(), "{errors:?}");
        let mut walker = Walker {
            file: std::sync::Arc::new(crate::SourceFile::new(std::path::Path::new("f"), text)),
            diagnostics: Vec::new(),
            watch: Default::default(),
            interrupts: Default::default(),
        };
        let mut raw = super::super::RawDocument::default();
        walker.read_table(document.get_ref(), super::super::TOP_READERS, &mut raw);
        let bytes = raw
            .services
            .iter()
            .map(|(name, _, own)| {
                let m = super::super::merge(&raw.defaults, own);
                u64::from(m.instance_count()) * InstanceCost::of(name, &m).total()
            })
            .sum();
        (crate::parse(std::path::Path::new("f.toml"), text).is_ok(), bytes)
    }

    /// The figures docs/config.md gives: a large file of a common shape, and the most `near`
    /// entries 8192 instances may have.
    #[test]
    fn the_documented_files_expand_as_documented() {
        let env: Vec<String> =
            (0..20).map(|i| format!("V{i:02}=\"/srv/data/{{instance}}/value-{i:02}\"")).collect();
        let args: Vec<String> =
            (0..32).map(|i| format!("\"--opt-{i:02}=/srv/data/{{instance}}/x\"")).collect();
        let common = format!(
            "[service.a]\ncommand = [\"/usr/bin/server\", {}]\ninstances = 8192\n\
             near = [\"/srv/{{instance}}\", \"/data{{instance}}\"]\n[service.a.env]\n{}\n",
            args.join(", "),
            env.join("\n")
        );
        let (accepted, bytes) = expanded(&common);
        assert!(accepted);
        assert_eq!(bytes >> 20, 41, "{bytes}");
        let near = |n: usize| {
            let entries: Vec<String> =
                (0..n).map(|i| format!("\"/srv/d/{{instance}}/v{i:03}\"")).collect();
            format!(
                "[service.a]\ncommand = [\"x\"]\ninstances = 8192\nnear = [{}]\n",
                entries.join(", ")
            )
        };
        assert!(expanded(&near(14)).0);
        assert!(!expanded(&near(15)).0);
    }

    #[test]
    fn sizes_are_shown_in_their_largest_unit() {
        assert_eq!(shown_size(64 << 20), "64MiB");
        assert_eq!(shown_size(482_064 << 10), "470.8MiB");
        assert_eq!(shown_size(900), "900B");
        assert_eq!(shown_size(0), "0B");
    }
}
