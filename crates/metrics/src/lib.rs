//! tcpaccel-metrics: the `--metrics ADDR` scrape endpoint of tcpaccel's
//! services (relay, gather server, lanes daemon, pacer).
//!
//! What it is: the `--metrics` address grammar ([`parse_listen`]: a port
//! alone means loopback, so counters leave the host only when an operator
//! writes another address) and a small HTTP/1.x server that answers
//! `GET /metrics` and `HEAD /metrics` with every metric of a [`Registry`].
//! The format follows the request's `Accept` header: OpenMetrics text when
//! the scraper offers it (Prometheus does, first), otherwise the Prometheus
//! text format 0.0.4 (curl, and parsers that only read 0.0.4, such as the
//! Python client's). The encoding is the maintained `prometheus-client`
//! crate's; [`to_prometheus_text`] turns its OpenMetrics text into 0.0.4.
//!
//! Connections are served concurrently, one small thread each, and bounded:
//! a connection must finish its request within [`REQUEST_TIMEOUT`], and at
//! most [`MAX_CONNECTIONS`] are held; a newcomer beyond that closes the
//! oldest, so idle connections can delay no scrape.
//!
//! What it is not: it defines no metrics. Each service registers its
//! counters and gauges (atomic, cheap to update from any thread) before
//! serving and keeps updating them; a scrape only reads them.
//!
//! Beside it, [`floodlog`]: the services' shared flood control for
//! per-connection log lines, with the `log_suppressed` counter each
//! service registers.

pub mod floodlog;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use prometheus_client::encoding::EncodeLabelSet;
pub use prometheus_client::metrics::counter::Counter;
pub use prometheus_client::metrics::family::Family;
pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::registry::Registry;

/// How long a scraper may take to send its request line and headers (and
/// to take the answer); a connection silent this long is closed.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Connections held at once; a newcomer beyond this closes the oldest.
pub const MAX_CONNECTIONS: usize = 2048;

/// Stack of each connection's thread: it reads one request head into a
/// heap buffer and renders into a String, so a small stack is plenty.
const CONN_STACK: usize = 128 * 1024;

/// The largest request head read; a scrape's is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;

/// The content type of the OpenMetrics text exposition format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of the Prometheus text exposition format 0.0.4.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics {value:?}: expected PORT (loopback), IP:PORT or [IPv6]:PORT")]
    Address { value: String },
    #[error("binding the metrics endpoint to {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("starting the metrics thread: {0}")]
    Spawn(std::io::Error),
}

/// Parses `--metrics`: `9464` (127.0.0.1:9464), `127.0.0.1:9464`,
/// `[::1]:9464` or any other address with a port. A port alone never
/// means "every interface": metrics name hosts and rates an operator may
/// not want to publish.
pub fn parse_listen(s: &str) -> Result<SocketAddr, MetricsError> {
    let t = s.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    t.parse::<SocketAddr>().map_err(|_| MetricsError::Address { value: s.to_string() })
}

/// Renders a registry in the OpenMetrics text format.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a
    // metric that cannot be encoded, which the types we use never are.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!("encoding metrics: {e}");
    }
    out
}

/// The exposition formats a scrape can be answered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Prometheus,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => CONTENT_TYPE,
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
        }
    }

    /// Chooses by an `Accept` header's value: OpenMetrics when it is
    /// offered with a weight at least that of every other acceptable type,
    /// the 0.0.4 text otherwise (also with no header, or `*/*`, which is what
    /// curl and most hand-written clients send).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Prometheus };
        let mut om = None::<f32>;
        let mut other = 0.0f32;
        for item in accept.split(',') {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if media == "application/openmetrics-text" {
                om = Some(om.map_or(q, |o| o.max(q)));
            } else {
                other = other.max(q);
            }
        }
        match om {
            Some(q) if q > 0.0 && q >= other => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }
}

/// Renders a registry in `format`.
pub fn render_as(registry: &Registry, format: Format) -> String {
    let text = render(registry);
    match format {
        Format::OpenMetrics => text,
        Format::Prometheus => to_prometheus_text(&text),
    }
}

/// Turns OpenMetrics text into the Prometheus text format 0.0.4. They
/// differ where a 0.0.4 parser would lose information: a counter family is
/// named without `_total` in OpenMetrics (`# TYPE x counter`, samples
/// `x_total`), and 0.0.4 parsers take a sample whose name is not the
/// family's as a new untyped metric; so HELP and TYPE of counters carry
/// the sample name here. `# UNIT` and `# EOF` do not exist in 0.0.4.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .filter(|(_, t)| t.trim() == "counter")
        .map(|(name, _)| name)
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find(|p| line.starts_with(p));
        match meta.and_then(|p| line[p.len()..].split_once(' ').map(|(n, rest)| (p, n, rest))) {
            Some((p, name, rest)) if counters.contains(name) => {
                out.push_str(p);
                out.push_str(name);
                out.push_str("_total ");
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Open connections, oldest first, so the oldest can be closed when full.
#[derive(Default)]
struct Open {
    next: u64,
    conns: BTreeMap<u64, TcpStream>,
}

/// A running endpoint; dropping it stops the thread.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    open: Arc<Mutex<Open>>,
    thread: Option<JoinHandle<()>>,
}

fn lock(open: &Mutex<Open>) -> std::sync::MutexGuard<'_, Open> {
    // Nothing panics while holding it; survive a poisoned lock anyway.
    open.lock().unwrap_or_else(|p| p.into_inner())
}

impl Endpoint {
    /// Binds `addr` and serves `registry` until dropped.
    pub fn serve(addr: SocketAddr, registry: Arc<Registry>) -> Result<Endpoint, MetricsError> {
        Endpoint::serve_with(addr, registry, MAX_CONNECTIONS)
    }

    /// As [`Endpoint::serve`] with another connection cap (at least 1).
    pub fn serve_with(
        addr: SocketAddr,
        registry: Arc<Registry>,
        max_connections: usize,
    ) -> Result<Endpoint, MetricsError> {
        let listener = TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
        let addr = listener.local_addr().map_err(|source| MetricsError::Bind { addr, source })?;
        if !addr.ip().is_loopback() {
            tracing::warn!("metrics endpoint on {addr} is reachable from other hosts");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let open = Arc::new(Mutex::new(Open::default()));
        let (flag, held) = (stop.clone(), open.clone());
        let max = max_connections.max(1);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    match conn {
                        Ok(stream) => admit(stream, &held, max, &registry),
                        Err(e) => {
                            // EMFILE and friends: back off instead of spinning.
                            tracing::warn!("accepting a metrics scrape: {e}");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            })
            .map_err(MetricsError::Spawn)?;
        tracing::info!("metrics on http://{addr}/metrics");
        Ok(Endpoint { addr, stop, open, thread: Some(thread) })
    }

    /// The bound address (the port is known here when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections held now.
    pub fn connections(&self) -> usize {
        lock(&self.open).conns.len()
    }
}

/// Registers a new connection (closing the oldest when `max` are held) and
/// answers it on its own thread.
fn admit(stream: TcpStream, open: &Arc<Mutex<Open>>, max: usize, registry: &Arc<Registry>) {
    let Ok(handle) = stream.try_clone() else {
        tracing::debug!("metrics connection: no descriptor for its handle; closed");
        return;
    };
    let id = {
        let mut o = lock(open);
        while o.conns.len() >= max {
            // Shutting the socket down wakes its thread's read at once.
            if let Some((_, oldest)) = o.conns.pop_first() {
                let _ = oldest.shutdown(Shutdown::Both);
            }
        }
        let id = o.next;
        o.next += 1;
        o.conns.insert(id, handle);
        id
    };
    let (open2, registry) = (open.clone(), registry.clone());
    let spawned =
        std::thread::Builder::new().name("metrics-conn".into()).stack_size(CONN_STACK).spawn(move || {
            if let Err(e) = answer(stream, &registry) {
                tracing::debug!("metrics request: {e}");
            }
            lock(&open2).conns.remove(&id);
        });
    if let Err(e) = spawned {
        tracing::warn!("metrics connection thread: {e}");
        if let Some(s) = lock(open).conns.remove(&id) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, s) in std::mem::take(&mut lock(&self.open).conns) {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wake the blocking accept; if that fails the thread ends with the process.
        if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The value of header `name` in a request head, if present.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// Reads one request head and writes one response, then closes.
fn answer(mut stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        // A deadline for the whole head, not per read: a byte every
        // second would otherwise hold the connection forever.
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request too large\n",
                true,
            );
        }
    }
    let head = String::from_utf8_lossy(&head);
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let body = method != "HEAD";
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let format = Format::negotiate(header(&head, "accept"));
            respond(&mut stream, "200 OK", format.content_type(), &render_as(registry, format), body)
        }
        ("GET" | "HEAD", _) => {
            respond(&mut stream, "404 Not Found", "text/plain", "metrics are at /metrics\n", body)
        }
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "only GET and HEAD\n", true),
    }
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &str,
    with_body: bool,
) -> std::io::Result<()> {
    let allow = if status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if with_body {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_loopback() {
        assert_eq!(parse_listen("9464").unwrap(), "127.0.0.1:9464".parse().unwrap());
        assert_eq!(parse_listen("0.0.0.0:9464").unwrap(), "0.0.0.0:9464".parse().unwrap());
        assert_eq!(parse_listen("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        for bad in ["", "localhost", "99999", "1.2.3.4", "::1:80", "-1"] {
            let e = parse_listen(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn accept_chooses_the_format() {
        use Format::*;
        let prometheus_server = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus_server)), OpenMetrics);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text; version=1.0.0")), OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Prometheus);
        assert_eq!(Format::negotiate(Some("*/*")), Prometheus);
        assert_eq!(Format::negotiate(None), Prometheus);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;q=0.2, text/plain")), Prometheus);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text;q=0")), Prometheus);
    }

    #[test]
    fn prometheus_text_names_counter_families_by_their_samples() {
        let om = "# HELP a_conns Connections.\n# TYPE a_conns counter\na_conns_total 3\n\
                  # HELP a_rate Rate.\n# TYPE a_rate gauge\n# UNIT a_rate bits\na_rate 5\n# EOF\n";
        let text = to_prometheus_text(om);
        assert_eq!(
            text,
            "# HELP a_conns_total Connections.\n# TYPE a_conns_total counter\na_conns_total 3\n\
             # HELP a_rate Rate.\n# TYPE a_rate gauge\na_rate 5\n"
        );
    }
}
