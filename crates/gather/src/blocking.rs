//! Blocking entry points for callers without an async runtime (the CLI):
//! each builds a tokio runtime, runs one operation on it and returns.
//!
//! What it is not: no logic of its own beyond wiring events to a callback and
//! stopping the server on SIGINT/SIGTERM.

use crate::client::{self, ClientError, SendOptions, SendReport};
use crate::config::ServerConfig;
use crate::server::{Server, ServerError, SinkSpec};
use crate::status::{ClientStatus, Event};
use std::net::SocketAddr;

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

/// Serves until SIGINT or SIGTERM; `on_event` sees every event in order, on
/// this thread. `on_bound` is told the bound address once listening.
pub fn serve(
    cfg: ServerConfig,
    listen: SocketAddr,
    sink: SinkSpec,
    on_bound: impl FnOnce(SocketAddr),
    mut on_event: impl FnMut(Event),
) -> Result<(), ServerError> {
    let rt = runtime()?;
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        // Handlers before on_bound: a signal sent as soon as "listening" is
        // announced must stop the server cleanly, not take the default action.
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        // A stray SIGHUP (a `kill -HUP` meant for every service, a closed
        // terminal) must not end a server that reloads nothing: said, ignored.
        let mut hup = signal(SignalKind::hangup())?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let server = Server::bind(cfg, listen, sink, Some(tx)).await?;
        on_bound(server.local_addr()?);
        let run = tokio::spawn(server.run());
        loop {
            tokio::select! {
                e = rx.recv() => match e {
                    Some(e) => on_event(e),
                    None => break,
                },
                _ = int.recv() => break,
                _ = term.recv() => break,
                _ = hup.recv() => tracing::warn!(
                    "gather: SIGHUP ignored: gather serve reads no file and has nothing to reload (a change of flags takes a restart)"
                ),
            }
        }
        run.abort();
        // Events sent before the stop are the record of what happened (a
        // refused client already has its answer): print every one of them.
        while let Ok(e) = rx.try_recv() {
            on_event(e);
        }
        tcpaccel_metrics::flood_tick!(crate::floodlog::CONN_LOG, flush);
        Ok(())
    })
}

/// Sends one source; see [`client::send`].
pub fn send(opts: SendOptions) -> Result<SendReport, ClientError> {
    let rt = runtime().map_err(|source| ClientError::Io { what: "start runtime".into(), source })?;
    rt.block_on(client::send(opts))
}

/// Asks a server for its per-client view; see [`client::query_status`].
pub fn status(server: SocketAddr) -> Result<Vec<ClientStatus>, ClientError> {
    let rt = runtime().map_err(|source| ClientError::Io { what: "start runtime".into(), source })?;
    rt.block_on(client::query_status(server))
}
