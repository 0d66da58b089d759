//! Prometheus metrics of the watcher, with the Prometheus project's client
//! (`prometheus-client`), served over HTTP by hyper on the caller's tokio runtime. Names and
//! units follow Prometheus conventions (base units, `_bytes`, `_seconds`, `_ratio`, `_total`
//! for counters); docs/drift.md lists them. The instance is the `service_instance` label:
//! `instance` and `job` belong to the scraping Prometheus.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use tokio::net::TcpListener;

use crate::rules::{DriftKind, Edge};
use crate::watch::CycleReport;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    service_instance: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemoryLabels {
    service_instance: String,
    node: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriftLabels {
    service_instance: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;
type FloatCounter = Counter<f64, AtomicU64>;

/// The watcher's metrics; [`Metrics::record`] updates them from a cycle's report.
#[derive(Debug)]
pub struct Metrics {
    registry: Arc<Registry>,
    memory: Family<MemoryLabels, Gauge>,
    local_ratio: Family<InstanceLabels, FloatGauge>,
    up: Family<InstanceLabels, Gauge>,
    drifting: Family<DriftLabels, Gauge>,
    episodes: Family<DriftLabels, Counter>,
    threads_out: Family<InstanceLabels, Gauge>,
    policy_mappings: Family<InstanceLabels, Gauge>,
    interrupt_rate: Family<InstanceLabels, FloatGauge>,
    sample_seconds: Family<InstanceLabels, FloatGauge>,
    moved_pages: Family<InstanceLabels, Counter>,
    moved_bytes: Family<InstanceLabels, Counter>,
    move_seconds: Family<InstanceLabels, FloatCounter>,
    worst_stall: Family<InstanceLabels, FloatGauge>,
    repinned: Family<InstanceLabels, Counter>,
    node_free: Family<NodeLabels, Gauge>,
    node_miss: Family<NodeLabels, Counter>,
    node_foreign: Family<NodeLabels, Counter>,
    balancing_migrated: Counter,
    cycle_seconds: FloatGauge,
    restarts: Family<InstanceLabels, Counter>,
    dropped_connections: Counter,
    accept_errors: Counter,
    /// Last restart counts the supervisor gave, to add their increase.
    last_restarts: BTreeMap<String, u32>,
    /// Last values of the kernel's counters, to add their increase.
    last_kernel: BTreeMap<(String, &'static str), u64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered, in the order the exposition lists them.
    pub fn new() -> Metrics {
        let mut metrics = Metrics::unregistered();
        let mut r = Registry::default();
        metrics.register_instance_metrics(&mut r);
        metrics.register_rebalance_metrics(&mut r);
        metrics.register_node_metrics(&mut r);
        metrics.register_watcher_metrics(&mut r);
        metrics.registry = Arc::new(r);
        metrics
    }

    /// Every metric at zero, none registered yet.
    fn unregistered() -> Metrics {
        Metrics {
            registry: Arc::default(),
            memory: Default::default(),
            local_ratio: Default::default(),
            up: Default::default(),
            drifting: Default::default(),
            episodes: Default::default(),
            threads_out: Default::default(),
            policy_mappings: Default::default(),
            interrupt_rate: Default::default(),
            sample_seconds: Default::default(),
            moved_pages: Default::default(),
            moved_bytes: Default::default(),
            move_seconds: Default::default(),
            worst_stall: Default::default(),
            repinned: Default::default(),
            node_free: Default::default(),
            node_miss: Default::default(),
            node_foreign: Default::default(),
            balancing_migrated: Default::default(),
            cycle_seconds: Default::default(),
            restarts: Default::default(),
            dropped_connections: Default::default(),
            accept_errors: Default::default(),
            last_restarts: BTreeMap::new(),
            last_kernel: BTreeMap::new(),
        }
    }

    /// What each instance is doing: its memory by node, drift, threads, interrupts, sampling.
    fn register_instance_metrics(&self, r: &mut Registry) {
        r.register_with_unit(
            "pinctl_instance_memory",
            "Resident memory of an instance on a node, by kind (anon, file, shmem, huge)",
            Unit::Bytes,
            self.memory.clone(),
        );
        r.register(
            "pinctl_instance_local_memory_ratio",
            "Fraction of an instance's memory on its planned nodes",
            self.local_ratio.clone(),
        );
        r.register(
            "pinctl_instance_up",
            "Whether the instance was found and sampled",
            self.up.clone(),
        );
        r.register(
            "pinctl_instance_drifting",
            "Whether a drift episode of this kind is going on (1) or not (0)",
            self.drifting.clone(),
        );
        r.register(
            "pinctl_instance_drift_episodes",
            "Drift episodes started, by kind",
            self.episodes.clone(),
        );
        r.register(
            "pinctl_instance_threads_out_of_place",
            "Threads allowed or last running outside the planned CPUs",
            self.threads_out.clone(),
        );
        r.register(
            "pinctl_instance_policy_mismatched_mappings",
            "Mappings with resident memory whose policy differs from the planned one",
            self.policy_mappings.clone(),
        );
        r.register(
            "pinctl_instance_interrupts_per_second",
            "Movable interrupts per second on the instance's CPUs since the last cycle",
            self.interrupt_rate.clone(),
        );
        r.register_with_unit(
            "pinctl_instance_sample_duration",
            "Time the last sample of the instance took",
            Unit::Seconds,
            self.sample_seconds.clone(),
        );
    }

    /// What moving an instance back cost: pages, bytes, time, stalls, threads repinned.
    fn register_rebalance_metrics(&self, r: &mut Registry) {
        r.register(
            "pinctl_rebalance_moved_pages",
            "Pages moved back to the planned nodes",
            self.moved_pages.clone(),
        );
        r.register_with_unit(
            "pinctl_rebalance_moved",
            "Bytes moved back to the planned nodes",
            Unit::Bytes,
            self.moved_bytes.clone(),
        );
        r.register_with_unit(
            "pinctl_rebalance_duration",
            "Time spent moving memory back",
            Unit::Seconds,
            self.move_seconds.clone(),
        );
        r.register_with_unit(
            "pinctl_rebalance_worst_batch_stall",
            "Longest single move_pages batch of the last rebalance",
            Unit::Seconds,
            self.worst_stall.clone(),
        );
        r.register(
            "pinctl_rebalance_repinned_threads",
            "Threads set back to the planned CPUs",
            self.repinned.clone(),
        );
    }

    /// Each node's free memory and misses, and the kernel's own NUMA balancing.
    fn register_node_metrics(&self, r: &mut Registry) {
        r.register_with_unit(
            "pinctl_node_free_memory",
            "Free memory of a node (MemFree of nodeN/meminfo)",
            Unit::Bytes,
            self.node_free.clone(),
        );
        r.register(
            "pinctl_node_numa_miss_pages",
            "Pages allocated on this node that were meant for another (numa_miss)",
            self.node_miss.clone(),
        );
        r.register(
            "pinctl_node_numa_foreign_pages",
            "Pages meant for this node that were allocated on another (numa_foreign)",
            self.node_foreign.clone(),
        );
        r.register(
            "pinctl_numa_balancing_migrated_pages",
            "Pages migrated by automatic NUMA balancing (numa_pages_migrated of /proc/vmstat)",
            self.balancing_migrated.clone(),
        );
    }

    /// The watcher itself: its cycle, the supervisor's restarts, and this endpoint's connections.
    fn register_watcher_metrics(&self, r: &mut Registry) {
        r.register_with_unit(
            "pinctl_watch_cycle_duration",
            "Time the last watch cycle took",
            Unit::Seconds,
            self.cycle_seconds.clone(),
        );
        r.register(
            "pinctl_instance_restarts",
            "Automatic restarts of the instance by the supervisor (pinctl run only)",
            self.restarts.clone(),
        );
        r.register(
            "pinctl_metrics_connections_dropped",
            "Connections to this endpoint closed unserved, beyond the limit of connections at once \
             (an idle one closed to make room, or a new one while every slot answered a request)",
            self.dropped_connections.clone(),
        );
        r.register(
            "pinctl_metrics_accept_errors",
            "Connections to this endpoint that could not be accepted (aborted, or no file \
             descriptor or memory left)",
            self.accept_errors.clone(),
        );
    }

    /// What [`serve`] serves: the registry, with the server's own counters.
    pub fn server(&self) -> MetricsServer {
        MetricsServer {
            registry: self.registry.clone(),
            dropped: self.dropped_connections.clone(),
            accept_errors: self.accept_errors.clone(),
        }
    }

    /// The OpenMetrics exposition text, as `/metrics` serves it to scrapers that ask for it.
    pub fn encode(&self) -> String {
        encode(&self.registry)
    }

    /// Adds a kernel counter's increase since the last cycle (its whole value the first time).
    fn kernel_counter(&mut self, key: (String, &'static str), value: u64, counter: &Counter) {
        let last = self.last_kernel.insert(key, value).unwrap_or(0);
        counter.inc_by(value.saturating_sub(last));
    }

    /// Takes the supervisor's restart count of each instance (`pinctl run`).
    pub fn set_restarts<'a>(&mut self, counts: impl IntoIterator<Item = (&'a str, u32)>) {
        for (instance, n) in counts {
            let last = self.last_restarts.insert(instance.to_string(), n).unwrap_or(0);
            let labels = InstanceLabels { service_instance: instance.to_string() };
            self.restarts.get_or_create(&labels).inc_by(u64::from(n.saturating_sub(last)));
        }
    }

    /// Updates every metric from a cycle.
    pub fn record(&mut self, r: &CycleReport) {
        let inst = |i: &str| InstanceLabels { service_instance: i.to_string() };
        for (node, s) in &r.host.nodes {
            let l = NodeLabels { node: node.to_string() };
            self.node_free.get_or_create(&l).set(s.free_bytes as i64);
            let miss = self.node_miss.get_or_create_owned(&l);
            self.kernel_counter((node.to_string(), "miss"), s.numa_miss, &miss);
            let foreign = self.node_foreign.get_or_create_owned(&l);
            self.kernel_counter((node.to_string(), "foreign"), s.numa_foreign, &foreign);
        }
        let migrated = self.balancing_migrated.clone();
        self.kernel_counter((String::new(), "migrated"), r.host.numa_pages_migrated, &migrated);
        for i in &r.instances {
            let l = inst(&i.instance);
            self.up.get_or_create(&l).set(i64::from(i.sample.is_some()));
            if let Some(s) = &i.sample {
                for (node, b) in &s.memory.0 {
                    for (kind, bytes) in b.kinds() {
                        let ml = MemoryLabels {
                            service_instance: i.instance.clone(),
                            node: node.to_string(),
                            kind: kind.to_string(),
                        };
                        self.memory.get_or_create(&ml).set(bytes as i64);
                    }
                }
                self.sample_seconds.get_or_create(&l).set(s.cost.as_secs_f64());
            }
            if let Some(f) = i.local_fraction {
                self.local_ratio.get_or_create(&l).set(f);
            }
            self.threads_out.get_or_create(&l).set(i.threads_out_of_place as i64);
            let policy = i
                .findings
                .iter()
                .find(|(k, _)| *k == DriftKind::Policy)
                .map_or(0, |(_, f)| f.value as i64);
            self.policy_mappings.get_or_create(&l).set(policy);
            if let Some(rate) = i.interrupts_per_second {
                self.interrupt_rate.get_or_create(&l).set(rate);
            }
            for k in DriftKind::ALL {
                let dl = DriftLabels {
                    service_instance: i.instance.clone(),
                    kind: k.name().to_string(),
                };
                self.drifting.get_or_create(&dl).set(i64::from(i.drifting.contains(&k)));
                // Create the series at zero so rates work from the first episode.
                let _ = self.episodes.get_or_create(&dl);
            }
        }
        for e in r.events.iter().filter(|e| e.edge == Edge::Start) {
            let dl = DriftLabels {
                service_instance: e.instance.clone(),
                kind: e.kind.name().to_string(),
            };
            self.episodes.get_or_create(&dl).inc();
        }
        for rb in &r.rebalances {
            let l = inst(&rb.instance);
            if let Some(t) = &rb.threads {
                self.repinned.get_or_create(&l).inc_by(t.repinned as u64);
            }
            if let Some(m) = &rb.memory {
                self.moved_pages.get_or_create(&l).inc_by(m.pages_moved);
                self.moved_bytes.get_or_create(&l).inc_by(m.bytes_moved);
                self.move_seconds.get_or_create(&l).inc_by(m.took.as_secs_f64());
                self.worst_stall.get_or_create(&l).set(m.worst_stall.as_secs_f64());
            }
        }
        self.cycle_seconds.set(r.took.as_secs_f64());
    }
}

fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

/// The content type of the OpenMetrics exposition (for scrapers that ask for it).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the classic Prometheus text exposition (the default).
pub const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The OpenMetrics text as the classic Prometheus text format (what `promtool check metrics`
/// and scrapers that do not ask for OpenMetrics read): a counter family is named with its
/// `_total` in `# HELP`/`# TYPE`, and `# UNIT` and `# EOF` lines are left out.
pub fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta =
            ["# HELP ", "# TYPE "].into_iter().find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or("");
                if counters.contains(name) {
                    out.push_str(prefix);
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(&rest[name.len()..]);
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The metrics socket of `metrics-listen`, bound and not served yet. `pinctl watch` and
/// `pinctl run` both bind it when they start, before any runtime runs, so that a taken port
/// refuses the command at once; it is served once a runtime runs.
#[derive(Debug)]
pub struct Listening {
    listener: std::net::TcpListener,
    /// Where it listens (the port picked for port 0).
    pub addr: SocketAddr,
}

/// `metrics-listen` could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on `{addr}` (metrics-listen)")]
pub struct BindError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

impl Listening {
    pub fn bind(addr: SocketAddr) -> Result<Listening, BindError> {
        let bound = std::net::TcpListener::bind(addr).and_then(|listener| {
            listener.set_nonblocking(true)?;
            Ok(Listening { addr: listener.local_addr()?, listener })
        });
        bound.map_err(|source| BindError { addr, source })
    }

    /// Serves it on the tokio runtime this is called in, until that runtime stops.
    pub fn serve(self, server: MetricsServer) -> std::io::Result<()> {
        tokio::spawn(serve(TcpListener::from_std(self.listener)?, server));
        Ok(())
    }
}

/// Connections served at once; one more takes the slot of the connection that has waited
/// longest without a complete request (closed, and counted in
/// `pinctl_metrics_connections_dropped_total`), or is closed itself when every slot is
/// answering a request. A Prometheus server keeps one open; the cap keeps a flood from taking
/// the file descriptors the supervisor needs to start instances.
pub const MAX_CONNECTIONS: usize = 64;

/// A connection must send a whole request head within this time of connecting or of its
/// last response, or it is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a request head may hold (hyper's read buffer; its least allowed). pinctl reads
/// no request body.
pub const MAX_REQUEST_BYTES: usize = 8192;

/// A connection is asked to close after this long (a keep-alive scraper connects again), and
/// closed at once if a response is still not written [`HEADER_TIMEOUT`] later.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// The wait after an accept that failed for want of a resource (descriptors, buffers,
/// memory), doubled while it keeps failing, up to [`ACCEPT_BACKOFF_MAX`]: the failure is
/// transient, and retrying at once would spin on a listener the kernel keeps reporting ready.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The longest wait between two accepts that fail.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What [`serve`] serves: the registry, and the server's own counters in it.
#[derive(Debug, Clone)]
pub struct MetricsServer {
    registry: Arc<Registry>,
    dropped: Counter,
    accept_errors: Counter,
}

/// The connections being served, at most [`MAX_CONNECTIONS`]: for each, since when it has
/// been waiting for a complete request (since it connected, or since its last response), or
/// that it is being answered.
#[derive(Debug, Default)]
struct Slots {
    table: std::sync::Mutex<SlotTable>,
}

#[derive(Debug, Default)]
struct SlotTable {
    next: u64,
    open: BTreeMap<u64, Open>,
}

#[derive(Debug)]
struct Open {
    /// `None` while a request is being answered.
    waiting_since: Option<Instant>,
    close: Arc<tokio::sync::Notify>,
}

/// What [`Slots::admit`] did with a new connection.
enum Admitted {
    /// It has a slot; `made_room`: the connection that had waited longest without a complete
    /// request was told to close for it.
    Slot { slot: Slot, made_room: bool },
    /// Every slot is answering a request: it is closed.
    Full,
}

impl Slots {
    fn table(&self) -> std::sync::MutexGuard<'_, SlotTable> {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for a new connection: a free one, else the one of the connection that has
    /// waited longest without a complete request (told to close), so that connections which
    /// never send a request cannot lock real scrapes out.
    fn admit(self: &Arc<Slots>, now: Instant) -> Admitted {
        let mut t = self.table();
        let mut made_room = false;
        if t.open.len() >= MAX_CONNECTIONS {
            let idlest = t
                .open
                .iter()
                .filter_map(|(&id, o)| Some((o.waiting_since?, id)))
                .min()
                .map(|(_, id)| id);
            let Some(evicted) = idlest.and_then(|id| t.open.remove(&id)) else {
                return Admitted::Full;
            };
            evicted.close.notify_one();
            made_room = true;
        }
        let id = t.next;
        t.next += 1;
        let close = Arc::new(tokio::sync::Notify::new());
        t.open.insert(id, Open { waiting_since: Some(now), close: close.clone() });
        Admitted::Slot { slot: Slot { slots: self.clone(), id, close }, made_room }
    }

    /// A connection's request is complete (`None`), or its response was sent (`Some(now)`):
    /// it waits for its next request from then.
    fn waiting(&self, id: u64, since: Option<Instant>) {
        if let Some(o) = self.table().open.get_mut(&id) {
            o.waiting_since = since;
        }
    }
}

/// One of the [`MAX_CONNECTIONS`] slots, held while a connection is served.
struct Slot {
    slots: Arc<Slots>,
    id: u64,
    /// Told when the slot is taken for a newer connection.
    close: Arc<tokio::sync::Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.table().open.remove(&self.id);
    }
}

/// A response body that puts its connection back to waiting for a request once it is sent
/// (or dropped).
struct Answering {
    body: Full<Bytes>,
    slots: Arc<Slots>,
    id: u64,
}

impl hyper::body::Body for Answering {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.slots.waiting(self.id, Some(Instant::now()));
    }
}

/// Whether an accept failed for the connection's own sake (aborted, reset or refused by a
/// firewall before it was taken: accept(2), "Error handling"), so the next one is tried at
/// once. Any other failure (EMFILE, ENFILE, ENOBUFS, ENOMEM, or one not known here) means the
/// process or the host is short of something, and the next try waits. Neither gives the
/// listener up.
fn connections_fault(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        Errno::from_io_error(e),
        Some(
            Errno::PERM
                | Errno::INTR
                | Errno::AGAIN
                | Errno::PROTO
                | Errno::CONNABORTED
                | Errno::CONNRESET
                | Errno::TIMEDOUT
        )
    )
}

/// Serves `GET /metrics` on `listener` until the runtime stops; it never returns. A failed
/// accept is retried (after a growing wait when the process or host is short of descriptors
/// or memory); a connection beyond [`MAX_CONNECTIONS`] makes room (see there); each connection is
/// held to [`HEADER_TIMEOUT`], [`MAX_REQUEST_BYTES`] and [`CONNECTION_LIFETIME`].
pub async fn serve(listener: TcpListener, server: MetricsServer) {
    let slots = Arc::new(Slots::default());
    let mut backoff = ACCEPT_BACKOFF;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF;
                stream
            }
            Err(e) => {
                server.accept_errors.inc();
                if !connections_fault(&e) {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
                continue;
            }
        };
        let slot = match slots.admit(Instant::now()) {
            Admitted::Slot { slot, made_room } => {
                if made_room {
                    server.dropped.inc();
                    // The connection told to close closes in its own task: let it run before
                    // the next accept, so a flood never holds more than the cap's descriptors.
                    tokio::task::yield_now().await;
                }
                slot
            }
            Admitted::Full => {
                server.dropped.inc();
                drop(stream);
                continue;
            }
        };
        tokio::spawn(serve_connection(stream, slot, server.registry.clone()));
    }
}

/// Serves one connection until it ends, its time is up, or its slot is taken for a newer one.
async fn serve_connection(stream: tokio::net::TcpStream, slot: Slot, registry: Arc<Registry>) {
    let (slots, id, close) = (slot.slots.clone(), slot.id, slot.close.clone());
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (registry, slots) = (registry.clone(), slots.clone());
        slots.waiting(id, None);
        let body = respond(&req, &registry).map(|body| Answering { body, slots, id });
        async move { Ok::<_, Infallible>(body) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_REQUEST_BYTES);
    let io = hyper_util::rt::TokioIo::new(stream);
    let mut connection = std::pin::pin!(builder.serve_connection(io, service));
    let mut closed = std::pin::pin!(close.notified());
    let timed_out = tokio::select! {
        ended = tokio::time::timeout(CONNECTION_LIFETIME, connection.as_mut()) => ended.is_err(),
        () = closed.as_mut() => false,
    };
    if timed_out {
        connection.as_mut().graceful_shutdown();
        tokio::select! {
            _ = tokio::time::timeout(HEADER_TIMEOUT, connection) => {}
            () = closed => {}
        }
    }
    drop(slot);
}

fn respond(req: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let wants_openmetrics = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let (status, content_type, body) = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/metrics") if wants_openmetrics => (StatusCode::OK, OPENMETRICS, encode(registry)),
        ("GET", "/metrics") => (StatusCode::OK, TEXT, classic_text(&encode(registry))),
        ("GET", "/") => {
            (StatusCode::OK, "text/plain", "pinctl watch: metrics at /metrics\n".into())
        }
        _ => (StatusCode::NOT_FOUND, "text/plain", "not found: try /metrics\n".into()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_text_names_counters_with_total_and_drops_openmetrics_lines() {
        let om = "# HELP a_events Things.\n# TYPE a_events counter\na_events_total{x=\"1\"} 2\n\
                  # HELP b_bytes Size.\n# TYPE b_bytes gauge\n# UNIT b_bytes bytes\nb_bytes 3\n# EOF\n";
        assert_eq!(
            classic_text(om),
            "# HELP a_events_total Things.\n# TYPE a_events_total counter\na_events_total{x=\"1\"} 2\n\
             # HELP b_bytes Size.\n# TYPE b_bytes gauge\nb_bytes 3\n"
        );
    }
}
