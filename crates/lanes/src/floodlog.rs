//! The lanes daemon's per-connection log lines under a flood (refused
//! path-manager commands, connections forgotten, malformed or lost events):
//! one [`FloodLog`] for the process (every daemon in it), 20 lines at once,
//! then 30 a minute, and the count of the rest in one summary at most every
//! 10 s (`tcpaccel_metrics::floodlog`, the limiter is
//! `tcpaccel_core::loglimit`), counted in
//! `tcpaccel_lanes_log_suppressed_total` ([`crate::metrics`]). A line
//! whose level is filtered out is not counted.
//! The daemon's records on stdout (decisions, warnings) are its output and
//! are not limited.

use std::sync::LazyLock;

use tcpaccel_metrics::floodlog::FloodLog;

/// The daemon's flood-limited lines (`flood_event!(FLOW_LOG, …)`).
pub static FLOW_LOG: LazyLock<FloodLog> =
    LazyLock::new(|| FloodLog::new("per-connection log lines", "tcpaccel_lanes_log_suppressed_total"));
