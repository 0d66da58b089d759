//! The watcher's words for people (docs/drift.md). What the watch loop says ([`Said`]) as one
//! log line: `kind key=value ...` (values with blanks, quotes or `=` quoted), or one JSON
//! object with `"event": kind` (a drift episode or a rebalance as its whole report,
//! `{"drift": ...}`, `{"rebalance": ...}`); and `watch --once`'s sample of every instance as
//! `numastat -p` shows a process. The caller decides where they go: `pinctl watch` prints them,
//! `pinctl run` writes its lines to its log after `pinctl: watch: `.

use std::io::{self, Write};

use crate::sample::Refused;
use crate::watch::{CycleReport, DriftEvent, RebalanceReport};
use crate::watch_loop::{Presence, Said};
use crate::{DriftKind, Edge};

/// A log field's value: text, or a figure that JSON writes as a number, array or boolean
/// rather than as the text the line shows.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Text(String),
    Count(u64),
    Seconds(f64),
    Pids(Vec<u32>),
    Yes,
}

impl From<String> for Field {
    fn from(text: String) -> Field {
        Field::Text(text)
    }
}

impl From<&str> for Field {
    fn from(text: &str) -> Field {
        Field::Text(text.to_string())
    }
}

impl Field {
    fn text(&self) -> String {
        match self {
            Field::Text(t) => t.clone(),
            Field::Count(n) => n.to_string(),
            Field::Seconds(s) => s.to_string(),
            Field::Pids(p) => p.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            Field::Yes => "yes".into(),
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            Field::Text(t) => t.clone().into(),
            Field::Count(n) => (*n).into(),
            Field::Seconds(s) => (*s).into(),
            Field::Pids(p) => p.clone().into(),
            Field::Yes => true.into(),
        }
    }
}

type Fields = Vec<(&'static str, Field)>;

/// `said` as one line: a JSON object with `json`, else `kind key=value ...`.
pub fn line(said: &Said<'_>, json: bool) -> String {
    match said {
        Said::Drift(e) if json => serde_json::json!({ "drift": e }).to_string(),
        Said::Rebalance(r) if json => serde_json::json!({ "rebalance": r }).to_string(),
        _ if json => {
            let (kind, fields) = record(said);
            let mut m = serde_json::Map::new();
            m.insert("event".into(), kind.into());
            for (k, v) in fields {
                m.insert(k.into(), v.json());
            }
            serde_json::Value::Object(m).to_string()
        }
        _ => {
            let (kind, fields) = record(said);
            let mut line = kind.to_string();
            for (k, v) in fields {
                let v = v.text();
                if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
                    line.push_str(&format!(" {k}={v:?}"));
                } else {
                    line.push_str(&format!(" {k}={v}"));
                }
            }
            line
        }
    }
}

/// The line's kind and its fields.
fn record(said: &Said<'_>) -> (&'static str, Fields) {
    let message = |m: &str| vec![("message", Field::from(m))];
    match said {
        Said::Watching { instances, interval } => (
            "watch",
            vec![
                ("instances", Field::Count(*instances as u64)),
                ("interval_seconds", Field::Seconds(interval.as_secs_f64())),
            ],
        ),
        Said::Reloaded { interval } => (
            "watch",
            vec![
                ("reloaded", Field::Yes),
                ("interval_seconds", Field::Seconds(interval.as_secs_f64())),
            ],
        ),
        Said::Drift(e) => ("drift", texts(event_fields(e))),
        Said::Instance { instance, presence } => ("instance", instance_fields(instance, presence)),
        Said::Rebalance(r) => ("rebalance", texts(rebalance_fields(r))),
        Said::Notice(n) => ("notice", message(n)),
        Said::AlertError { instance, message } => {
            let instance = instance.map(|i| ("instance", Field::from(i)));
            (
                "alert-error",
                instance.into_iter().chain([("message", message.as_str().into())]).collect(),
            )
        }
        Said::Metrics { listen } => {
            ("metrics", vec![("listen", format!("http://{listen}/metrics").into())])
        }
        Said::MetricsError(m) => ("metrics-error", message(m)),
        Said::WatchError(m) => ("watch-error", message(m)),
    }
}

/// Text fields as log fields (the drift and rebalance lines' text form).
fn texts(fields: Vec<(&'static str, String)>) -> Fields {
    fields.into_iter().map(|(k, v)| (k, Field::Text(v))).collect()
}

fn instance_fields(instance: &str, presence: &Presence) -> Fields {
    let mut fields: Fields = vec![("instance", instance.into())];
    match presence {
        Presence::Found { pids, source, refused } => {
            fields.push(("status", "found".into()));
            fields.push(("pids", Field::Pids(pids.to_vec())));
            fields.push(("source", (*source).into()));
            if !refused.is_empty() {
                fields.push(("refused", refused_text(refused).into()));
            }
        }
        Presence::Refused { reason } => {
            fields.push(("status", "refused".into()));
            fields.push(("reason", reason.as_str().into()));
        }
        Presence::Missing { reason } => {
            fields.push(("status", "missing".into()));
            fields.push(("reason", reason.as_str().into()));
        }
    }
    fields
}

fn refused_text(refused: &[Refused]) -> String {
    let each: Vec<String> =
        refused.iter().map(|r| format!("refused PID {} ({})", r.pid, r.reason)).collect();
    each.join("; ")
}

fn event_fields(e: &DriftEvent) -> Vec<(&'static str, String)> {
    let edge = if e.edge == Edge::Start { "start" } else { "end" };
    let mut f = vec![
        ("edge", edge.to_string()),
        ("instance", e.instance.clone()),
        ("service", e.service.clone()),
        ("kind", e.kind.name().to_string()),
        ("episode", e.episode.to_string()),
        ("value", format!("{:.4}", e.value)),
        ("threshold", format!("{:.4}", e.threshold)),
    ];
    if let Some(l) = e.local_fraction {
        f.push(("local_fraction", format!("{l:.4}")));
    }
    if let Some(s) = e.lasted_seconds {
        f.push(("lasted_seconds", format!("{s:.1}")));
    }
    f.push(("action", e.action.name().to_string()));
    f.push(("alert", if e.alert { "yes" } else { "no" }.to_string()));
    f.push(("detail", e.detail.clone()));
    f
}

fn rebalance_fields(r: &RebalanceReport) -> Vec<(&'static str, String)> {
    let mut f = vec![("instance", r.instance.clone()), ("pid", r.pid.to_string())];
    if let Some(t) = &r.threads {
        f.push(("threads_repinned", t.repinned.to_string()));
        f.push(("threads_complete", t.complete.to_string()));
    }
    if let Some(m) = &r.memory {
        f.push(("pages_moved", m.pages_moved.to_string()));
        f.push(("pages_failed", m.pages_failed.to_string()));
        f.push(("huge_blocks", m.blocks.to_string()));
        f.push(("huge_blocks_whole", m.blocks_whole.to_string()));
        f.push(("batches", m.batches.to_string()));
        f.push(("seconds", format!("{:.3}", m.took.as_secs_f64())));
        f.push(("lookup_seconds", format!("{:.3}", m.lookup.as_secs_f64())));
        f.push(("worst_batch_stall_ms", format!("{:.2}", m.worst_stall.as_secs_f64() * 1000.0)));
        f.push(("call_cost_ms", format!("{:.2}", m.call_cost.as_secs_f64() * 1000.0)));
        f.push(("page_cost_us", format!("{:.2}", m.page_cost.as_secs_f64() * 1e6)));
        f.push(("passes", m.passes.to_string()));
        if let Some(after) = m.locality_after {
            f.push(("locality_after", format!("{after:.3}")));
        }
        f.push((
            "stop",
            serde_json::to_value(&m.stop)
                .map_or_else(|_| String::new(), |v| v["reason"].as_str().unwrap_or("").to_string()),
        ));
    }
    if let Some(e) = &r.error {
        f.push(("error", e.clone()));
    }
    f
}

fn mib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / f64::from(1 << 20))
}

/// `numastat -p` for each planned instance (MiB per node and kind), then what is wrong.
pub fn once(out: &mut impl Write, r: &CycleReport) -> io::Result<()> {
    let nodes: Vec<u32> = r.host.nodes.keys().copied().collect();
    for (n, i) in r.instances.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{} (service {}): planned CPUs {}, memory {} on node(s) {}, on-drift {}",
            i.instance,
            i.service,
            i.planned_cpus,
            i.planned_policy,
            i.planned_nodes,
            i.action.name()
        )?;
        let Some(s) = &i.sample else {
            writeln!(out, "  not sampled: {}", i.error.as_deref().unwrap_or("unknown"))?;
            continue;
        };
        let from = match &s.cgroup {
            Some(c) => format!("{c}/memory.numa_stat"),
            None => format!("/proc/{}/numa_maps", s.pids[0]),
        };
        writeln!(
            out,
            "  pids {}; from {from} in {:.0}us",
            s.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            s.cost.as_secs_f64() * 1e6
        )?;
        for r in &s.refused {
            writeln!(
                out,
                "  refused PID {}: {} (not sampled, re-pinned or moved)",
                r.pid, r.reason
            )?;
        }
        let mut header = format!("  {:<10}", "MiB");
        for n in &nodes {
            header.push_str(&format!(" {:>12}", format!("Node {n}")));
        }
        writeln!(out, "{header} {:>12}", "Total")?;
        for (k, kind) in ["anon", "file", "shmem", "huge"].into_iter().enumerate() {
            let mut row = format!("  {kind:<10}");
            let mut total = 0;
            for n in &nodes {
                let b = s.memory.0.get(n).map_or(0, |b| b.kinds()[k].1);
                total += b;
                row.push_str(&format!(" {:>12}", mib(b)));
            }
            writeln!(out, "{row} {:>12}", mib(total))?;
        }
        let mut row = format!("  {:<10}", "total");
        for n in &nodes {
            row.push_str(&format!(" {:>12}", mib(s.memory.0.get(n).map_or(0, |b| b.total()))));
        }
        writeln!(out, "{row} {:>12}", mib(s.memory.total()))?;
        let local = i.local_fraction.map_or_else(
            || "not judged (under min-memory)".to_string(),
            |f| format!("{:.1}%", f * 100.0),
        );
        writeln!(
            out,
            "  local {local}; {} of {} threads out of place",
            i.threads_out_of_place,
            s.threads.len()
        )?;
        if i.findings.is_empty() {
            writeln!(out, "  ok")?;
        }
        for (kind, f) in &i.findings {
            let kind: DriftKind = *kind;
            writeln!(out, "  drift {}: {}", kind.name(), f.detail)?;
        }
    }
    for n in &r.notices {
        writeln!(out, "\nnote: {n}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_line_quotes_values_with_blanks_and_json_keeps_figures_as_numbers() {
        let found = Presence::Found { pids: vec![7, 9], source: "cgroup", refused: Vec::new() };
        let said = Said::Instance { instance: "db-0", presence: &found };
        assert_eq!(
            line(&said, false),
            "instance instance=db-0 status=found pids=7,9 source=cgroup"
        );
        let missing = Presence::Missing { reason: "no process".into() };
        let said = Said::Instance { instance: "db-0", presence: &missing };
        assert_eq!(
            line(&said, false),
            r#"instance instance=db-0 status=missing reason="no process""#
        );
        let said = Said::Watching { instances: 2, interval: Duration::from_millis(1500) };
        assert_eq!(line(&said, false), "watch instances=2 interval_seconds=1.5");
        let json: serde_json::Value = serde_json::from_str(&line(&said, true)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"event": "watch", "instances": 2, "interval_seconds": 1.5})
        );
        let said = Said::Metrics { listen: "127.0.0.1:9464".parse().unwrap() };
        assert_eq!(line(&said, false), "metrics listen=http://127.0.0.1:9464/metrics");
    }
}
