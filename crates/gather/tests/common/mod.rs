//! Set-up shared by the gather server's integration tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tcpaccel_gather::{parse_class, Event, Server, ServerConfig, SinkSpec};
use tokio::sync::mpsc::UnboundedReceiver;

/// Two classes, high (2 Gbit/s, priority 2) and low (500 Mbit/s, 1), sharing
/// `pool` bytes of window, re-planned every `interval_ms`.
pub(crate) fn config(pool: u64, interval_ms: u64) -> ServerConfig {
    let classes = vec![parse_class("high=2gbit,2").unwrap(), parse_class("low=500mbit,1").unwrap()];
    ServerConfig::new(classes, pool, None, 4, Duration::from_millis(interval_ms)).unwrap()
}

/// Starts a server on a loopback port; its address and its event stream.
pub(crate) async fn start(cfg: ServerConfig, sink: SinkSpec) -> (SocketAddr, UnboundedReceiver<Event>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let server = Server::bind(cfg, "127.0.0.1:0".parse().unwrap(), sink, Some(tx)).await.unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());
    (addr, rx)
}

/// A fresh directory under the system's temporary one, removed on drop;
/// named by the test binary, `tag` and the process id.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "tcpaccel-gather-{}-{tag}-{}",
            env!("CARGO_CRATE_NAME"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
