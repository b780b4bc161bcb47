//! tcpaccel-metrics: the `--metrics ADDR` scrape endpoint of tcpaccel's
//! services (relay, gather server, lanes daemon, pacer).
//!
//! What it is: the `--metrics` address grammar ([`parse_listen`]: a port
//! alone means loopback, so counters leave the host only when an operator
//! writes another address) and one plain thread that answers
//! `GET /metrics` with every metric of a [`Registry`], encoded in the
//! OpenMetrics text format (the successor of Prometheus' text format, which
//! Prometheus scrapes natively) by the maintained `prometheus-client` crate.
//!
//! What it is not: it defines no metrics. Each service registers its
//! counters and gauges (atomic, cheap to update from any thread) before
//! serving and keeps updating them; a scrape only reads them. Requests are
//! answered one at a time: scrapes are rare, and a client that sends nothing
//! is dropped after [`REQUEST_TIMEOUT`].

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub use prometheus_client::encoding::EncodeLabelSet;
pub use prometheus_client::metrics::counter::Counter;
pub use prometheus_client::metrics::family::Family;
pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::registry::Registry;

/// How long a scraper may take to send its request line and headers.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest request head read; a scrape's is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;

/// The content type of the OpenMetrics text exposition format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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

/// Renders a registry in the exposition format (what a scrape returns).
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a
    // metric that cannot be encoded, which the types we use never are.
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::warn!("encoding metrics: {e}");
    }
    out
}

/// A running endpoint; dropping it stops the thread.
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Binds `addr` and serves `registry` until dropped.
    pub fn serve(addr: SocketAddr, registry: Arc<Registry>) -> Result<Endpoint, MetricsError> {
        let listener = TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
        let addr = listener.local_addr().map_err(|source| MetricsError::Bind { addr, source })?;
        if !addr.ip().is_loopback() {
            tracing::warn!("metrics endpoint on {addr} is reachable from other hosts");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    match conn {
                        Ok(stream) => {
                            if let Err(e) = answer(stream, &registry) {
                                tracing::debug!("metrics request: {e}");
                            }
                        }
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
        Ok(Endpoint { addr, stop, thread: Some(thread) })
    }

    /// The bound address (the port is known here when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept; if that fails the thread ends with the process.
        if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Reads one request head and writes one response, then closes.
fn answer(mut stream: TcpStream, registry: &Registry) -> std::io::Result<()> {
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
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
            );
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => respond(&mut stream, "200 OK", CONTENT_TYPE, &render(registry)),
        ("GET", _) => respond(&mut stream, "404 Not Found", "text/plain", "metrics are at /metrics\n"),
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "only GET\n"),
    }
}

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
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
}
