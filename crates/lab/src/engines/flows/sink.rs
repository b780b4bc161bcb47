//! The receiving side of the flow engine: [`Sinks`], one listener per
//! namespace counting what each flow id delivers and answering [`ANSWER`]
//! once a flow is whole.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcpaccel_sys::netns;
use tcpaccel_sys::sockopt::{self, Family};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

use super::plan::decode_header;
use super::{runtime, FlowError, HostAddrs, Received, ANSWER, CHUNK, HEADER_LEN};

/// One MPTCP listener per namespace on 0.0.0.0:port (an MPTCP listener accepts
/// plain TCP too), counting what each flow id delivers. Runs on its own
/// 2-worker tokio runtime; create and stop it from synchronous code. A new
/// `Sinks` per run starts with empty counts (the listeners set SO_REUSEADDR,
/// so the same port can be reused at once).
pub struct Sinks {
    rt: Option<Runtime>,
    counts: Counts,
}

type Counts = Arc<Mutex<BTreeMap<u64, Received>>>;

fn lock(c: &Counts) -> std::sync::MutexGuard<'_, BTreeMap<u64, Received>> {
    // The map stays consistent whatever a panicking holder did mid-update.
    c.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sinks {
    /// Opens the listeners (one per distinct namespace of `hosts`) and starts
    /// accepting. Fails when a namespace is missing, MPTCP is off, or the port
    /// is taken.
    pub fn start(hosts: &[HostAddrs], port: u16) -> Result<Sinks, FlowError> {
        if port == 0 {
            return Err(FlowError::Option("sink port must not be 0".into()));
        }
        let mut namespaces = BTreeSet::new();
        for h in hosts {
            if h.ns.is_empty() {
                return Err(FlowError::EmptyNamespace { host: h.id });
            }
            namespaces.insert(h.ns.clone());
        }
        let rt = runtime("flow-sinks")?;
        let counts: Counts = Arc::new(Mutex::new(BTreeMap::new()));
        for ns in namespaces {
            let fd = netns::run_in(&ns, move || -> tcpaccel_sys::Result<OwnedFd> {
                let fd = sockopt::mptcp_socket(Family::V4)?;
                sockopt::set_reuseaddr(&fd, true)?;
                sockopt::bind(&fd, &SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))?;
                sockopt::listen(&fd, 4096)?;
                Ok(fd)
            })
            .map_err(|source| FlowError::Namespace { ns: ns.clone(), source })?
            .map_err(|source| FlowError::Listen { ns: ns.clone(), port, source })?;
            let std = std::net::TcpListener::from(fd);
            let io = |source| FlowError::Runtime { what: format!("sink listener in {ns:?}"), source };
            std.set_nonblocking(true).map_err(io)?;
            let listener = {
                let _in_rt = rt.enter();
                tokio::net::TcpListener::from_std(std).map_err(io)?
            };
            rt.spawn(accept_loop(listener, counts.clone(), ns));
        }
        Ok(Sinks { rt: Some(rt), counts })
    }

    /// Bytes received per flow id so far (also for flows cut off by the time
    /// limit), with first/last byte times.
    pub fn received(&self) -> BTreeMap<u64, Received> {
        lock(&self.counts).clone()
    }

    /// Closes the listeners and every open connection; returns the final counts.
    pub fn stop(mut self) -> BTreeMap<u64, Received> {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_millis(500));
        }
        lock(&self.counts).clone()
    }
}

impl Drop for Sinks {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept_loop(listener: tokio::net::TcpListener, counts: Counts, ns: String) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let counts = counts.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &counts).await {
                        tracing::debug!(%peer, error = %e, "sink connection ended early");
                    }
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(ns = %ns, error = %e, "sink accept failed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Reads one header and exactly the announced length, counting as it goes,
/// then answers [`ANSWER`]. Never reads past the announced length.
async fn serve(mut s: TcpStream, counts: &Counts) -> Result<(), String> {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).await.map_err(|e| format!("reading the header: {e}"))?;
    let (id, len) = decode_header(&h);
    let now = std::time::Instant::now();
    {
        let mut map = lock(counts);
        let r = map.entry(id).or_insert(Received {
            bytes: 0,
            first: now,
            last: now,
            connections: 0,
            completed: 0,
        });
        r.connections = r.connections.saturating_add(1);
    }
    let mut buf = vec![0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let want = left.min(CHUNK as u64) as usize;
        let n = s
            .read(&mut buf[..want])
            .await
            .map_err(|e| format!("flow {id}: {e} after {} of {len} bytes", len - left))?;
        if n == 0 {
            return Err(format!("flow {id}: end of stream after {} of {len} bytes", len - left));
        }
        left -= n as u64;
        if let Some(r) = lock(counts).get_mut(&id) {
            r.bytes = r.bytes.saturating_add(n as u64);
            r.last = std::time::Instant::now();
        }
    }
    s.write_all(&[ANSWER]).await.map_err(|e| format!("flow {id}: answering: {e}"))?;
    if let Some(r) = lock(counts).get_mut(&id) {
        r.completed = r.completed.saturating_add(1);
    }
    Ok(())
}
