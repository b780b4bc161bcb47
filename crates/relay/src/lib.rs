//! tcpaccel-relay: the split-TCP relay of [SplitTCP] as a correct network
//! service — a SOCKS5 server (RFC 1928/1929) that can chain through further
//! SOCKS5 hops, a fixed forwarder, a zero-copy data path (splice) with a copy
//! fallback, per-hop socket tuning, access rules, a handshake budget that
//! keeps idle handshakes from starving other clients (`tcpaccel_core::admit`), and counters.
//! The RTT probe that feeds the placement planner (`tcpaccel_core::split`)
//! is `tcpaccel_sys::probe`.
//!
//! It does not set up logging (the binary does), decide placement (core does)
//! nor build lab topologies.
#![forbid(unsafe_code)]

pub mod acl;
pub mod config;
pub mod connlog;
pub mod metrics;
pub mod pool;
pub mod pump;
pub mod server;
pub mod socks;
pub mod stats;

pub use config::{Config, ConfigError, Settings};
pub use server::{Relay, RelayError, Reloader};
pub use stats::{Snapshot, Stats};

/// What the caller of [`serve_blocking`] hooks in.
pub struct Hooks {
    /// Called with the counters on SIGUSR1 and at exit.
    pub report: Box<dyn Fn(&Snapshot) + Send + Sync>,
    /// Reads the configuration again (the same file and flags) on SIGHUP;
    /// an error keeps the running configuration.
    pub reload: Option<Box<dyn Fn() -> Result<Config, String> + Send + Sync>>,
    /// Called once every listener (and the metrics endpoint, if any) is
    /// bound: the service's start line.
    pub started: Box<dyn FnOnce(&Started) + Send>,
}

/// What a relay is serving, once bound.
#[derive(Debug, Clone)]
pub struct Started {
    /// Each listener's bound address and what it does.
    pub listeners: Vec<(std::net::SocketAddr, config::Mode)>,
    /// The metrics endpoint's address.
    pub metrics: Option<std::net::SocketAddr>,
}

/// Runs a relay on its own multi-threaded runtime until SIGINT or SIGTERM:
/// counters on SIGUSR1 and at exit, a reload on SIGHUP (access rules, users,
/// next hops, tuning and timeouts; established connections keep theirs),
/// and the metrics endpoint if the configuration names one.
pub fn serve_blocking(cfg: Config, hooks: Hooks) -> Result<Snapshot, RelayError> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(RelayError::Runtime)?;
    let Hooks { report, reload, started } = hooks;
    let metrics = cfg.metrics;
    let modes: Vec<config::Mode> = cfg.listeners.iter().map(|l| l.mode.clone()).collect();
    let report: std::sync::Arc<dyn Fn(&Snapshot) + Send + Sync> = std::sync::Arc::from(report);
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        // Handlers first: bind logs "listening", and a signal sent as soon as
        // that line appears must find them installed (not the default action).
        let mut usr1 = signal(SignalKind::user_defined1()).map_err(RelayError::Runtime)?;
        let mut hup = signal(SignalKind::hangup()).map_err(RelayError::Runtime)?;
        let mut term = signal(SignalKind::terminate()).map_err(RelayError::Runtime)?;
        let mut int = signal(SignalKind::interrupt()).map_err(RelayError::Runtime)?;
        let relay = Relay::bind(cfg).await?;
        let stats = relay.stats();
        let _endpoint = match metrics {
            Some(addr) => {
                let mut reg = prometheus_client::registry::Registry::default();
                metrics::register(&mut reg, stats.clone());
                Some(tcpaccel_metrics::Endpoint::serve(addr, std::sync::Arc::new(reg)).map_err(RelayError::Metrics)?)
            }
            None => None,
        };
        started(&Started {
            listeners: relay.local_addrs().into_iter().zip(modes).collect(),
            metrics: _endpoint.as_ref().map(|e| e.addr()),
        });
        let r = report.clone();
        let on_usr1 = tokio::spawn(async move {
            while usr1.recv().await.is_some() {
                r(&stats.snapshot());
            }
        });
        let reloader = relay.reloader();
        let on_hup = tokio::spawn(async move {
            while hup.recv().await.is_some() {
                let Some(read) = &reload else {
                    tracing::warn!("SIGHUP: nothing to reload (no configuration source)");
                    continue;
                };
                match read() {
                    Ok(new) => {
                        let fixed = reloader.reload(new);
                        if fixed.is_empty() {
                            tracing::info!("SIGHUP: configuration reloaded");
                        } else {
                            tracing::warn!(
                                "SIGHUP: configuration reloaded; {} changed but need a restart (old values kept)",
                                fixed.join(", ")
                            );
                        }
                    }
                    Err(e) => tracing::warn!("SIGHUP: reload refused, configuration unchanged: {e}"),
                }
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
        on_hup.abort();
        report(&snap);
        Ok(snap)
    })
}
