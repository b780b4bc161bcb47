//! The gathering server's per-connection and per-client log lines under a
//! flood: one [`FloodLog`] for the process (every server in it), so 1000
//! refused connections write 20 lines at once, then 30 a minute, and the
//! count of the rest in one summary at most every 10 s
//! (`tcpaccel_metrics::floodlog`, the limiter is `tcpaccel_core::loglimit`),
//! counted in `tcpaccel_gather_log_suppressed_total` ([`crate::metrics`]).
//! A line whose level is filtered out is not counted.

use std::sync::LazyLock;

use tcpaccel_metrics::floodlog::FloodLog;

/// The server's flood-limited lines (`flood_event!(CONN_LOG, …)`).
pub static CONN_LOG: LazyLock<FloodLog> =
    LazyLock::new(|| FloodLog::new("per-connection log lines", "tcpaccel_gather_log_suppressed_total"));
