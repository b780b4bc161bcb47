//! tcpaccel-relay: the split-TCP relay of seed 002 as a correct network
//! service — a SOCKS5 server (RFC 1928/1929) that can chain through further
//! SOCKS5 hops, a fixed forwarder, a zero-copy data path (splice) with a copy
//! fallback, per-hop socket tuning, access rules, a handshake budget that
//! keeps idle handshakes from starving other clients (`admit`), and counters
//! — plus the RTT
//! probe that feeds the placement planner (`tcpaccel_core::split`).
//!
//! It does not set up logging (the binary does), decide placement (core does)
//! nor build lab topologies.
#![forbid(unsafe_code)]

pub mod acl;
pub mod admit;
pub mod config;
pub mod probe;
pub mod pump;
pub mod server;
pub mod socks;
pub mod stats;

pub use config::{Config, ConfigError, RawConfig};
pub use server::{Relay, RelayError};
pub use stats::{Snapshot, Stats};

/// Runs the relay on its own tokio runtime until SIGINT or SIGTERM. Calls
/// `report` with the counters on every SIGUSR1 and once at exit, and returns
/// the final counters.
pub fn serve_blocking(
    cfg: Config,
    report: impl Fn(&Snapshot) + Send + Sync + 'static,
) -> Result<Snapshot, RelayError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(RelayError::Runtime)?;
    let report = std::sync::Arc::new(report);
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        // Handlers first: bind logs "listening", and a signal sent as soon as
        // that line appears must find them installed (not the default action).
        let mut usr1 = signal(SignalKind::user_defined1()).map_err(RelayError::Runtime)?;
        let mut term = signal(SignalKind::terminate()).map_err(RelayError::Runtime)?;
        let mut int = signal(SignalKind::interrupt()).map_err(RelayError::Runtime)?;
        let relay = Relay::bind(cfg).await?;
        let stats = relay.stats();
        let r = report.clone();
        let on_usr1 = tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                r(&stats.snapshot());
            }
        });
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM: stopping"),
                _ = int.recv() => tracing::info!("SIGINT: stopping"),
            }
        };
        let snap = relay.run(shutdown).await;
        on_usr1.abort();
        report(&snap);
        Ok(snap)
    })
}
