//! The lanes daemon's counters for `--metrics` (scraped through
//! `tcpaccel_metrics::Endpoint`; label sets derive through `prometheus-client`): connections, switches, path-manager
//! commands by outcome, reloads, and bytes acknowledged per lane.
//!
//! What it is: the metric handles and [`LaneBytes`], the pure bookkeeping
//! that turns sock_diag readings (each subflow's cumulative `bytes_acked`)
//! into per-lane increments. What it is not: the endpoint, or a second
//! source of truth: the counters follow the daemon's [`Summary`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use tcpaccel_metrics::{Counter, EncodeLabelSet, Family, Gauge, Registry};

use crate::config::Config;
use crate::record::Summary;
use crate::tracker::Reading;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaneLabel {
    /// The lane's name, as in the decision records (its interface: `sl`,
    /// `ll1`, ...; see `config::LaneNames`).
    pub lane: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `failed`, `connection_gone`, `open_retry`, `switch_retry`.
    pub outcome: String,
}

/// The daemon's metrics. Register once, then hand to the daemon.
#[derive(Debug)]
pub struct LanesMetrics {
    connections: Counter,
    switches: Counter,
    commands: Family<OutcomeLabel, Counter>,
    reloads: Family<OutcomeLabel, Counter>,
    managed: Gauge,
    lane_bytes: Family<LaneLabel, Counter>,
    last: Mutex<Summary>,
}

impl LanesMetrics {
    /// Creates the metrics and registers them in `reg`.
    pub fn register(reg: &mut Registry) -> LanesMetrics {
        let m = LanesMetrics {
            connections: Counter::default(),
            switches: Counter::default(),
            commands: Family::default(),
            reloads: Family::default(),
            managed: Gauge::default(),
            lane_bytes: Family::default(),
            last: Mutex::new(Summary::default()),
        };
        reg.register(
            "tcpaccel_lanes_connections",
            "MPTCP connections the daemon managed (started on an SL pair)",
            m.connections.clone(),
        );
        reg.register("tcpaccel_lanes_switches", "Connections switched to LL", m.switches.clone());
        reg.register(
            "tcpaccel_lanes_commands_not_applied",
            "Path-manager commands the kernel refused, by outcome",
            m.commands.clone(),
        );
        reg.register(
            "tcpaccel_lanes_reloads",
            "Configuration reloads (SIGHUP) by outcome",
            m.reloads.clone(),
        );
        reg.register("tcpaccel_lanes_managed_connections", "Connections managed now", m.managed.clone());
        reg.register(
            "tcpaccel_lanes_bytes_acked",
            "Bytes acknowledged on subflows from each lane's local address",
            m.lane_bytes.clone(),
        );
        reg.register(
            "tcpaccel_lanes_log_suppressed",
            "Per-connection log lines left out under a flood (their count is logged in a summary)",
            crate::floodlog::FLOW_LOG.suppressed().clone(),
        );
        m
    }

    /// Brings the counters up to the daemon's summary (counts only grow).
    pub fn observe(&self, s: &Summary, managed: usize) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let up = |c: &Counter, now: u64, was: u64| {
            if now > was {
                c.inc_by(now - was);
            }
        };
        up(&self.connections, s.connections, last.connections);
        up(&self.switches, s.switches, last.switches);
        for (name, now, was) in [
            ("failed", s.failed_commands, last.failed_commands),
            ("connection_gone", s.connection_gone, last.connection_gone),
            ("open_retry", s.open_retries, last.open_retries),
            ("switch_retry", s.switch_retries, last.switch_retries),
        ] {
            up(&self.commands.get_or_create(&OutcomeLabel { outcome: name.into() }), now, was);
        }
        *last = *s;
        self.managed.set(i64::try_from(managed).unwrap_or(i64::MAX));
    }

    pub fn reloaded(&self, ok: bool) {
        let outcome = if ok { "applied" } else { "refused" };
        self.reloads.get_or_create(&OutcomeLabel { outcome: outcome.into() }).inc();
    }

    pub fn add_lane_bytes(&self, increments: &[(String, u64)]) {
        for (lane, n) in increments {
            self.lane_bytes.get_or_create(&LaneLabel { lane: lane.clone() }).inc_by(*n);
        }
    }
}

/// Per-lane byte increments from cumulative per-subflow counters.
#[derive(Debug, Default)]
pub struct LaneBytes {
    seen: HashMap<u64, u64>,
}

impl LaneBytes {
    /// Bytes acknowledged since the previous reading, per lane of the
    /// socket's local address. A socket seen for the first time counts from
    /// zero (its whole `bytes_acked`); sockets that are gone are forgotten.
    pub fn update(&mut self, cfg: &Config, readings: &[Reading]) -> Vec<(String, u64)> {
        let mut per_lane: Vec<(String, u64)> = Vec::new();
        let mut seen = HashMap::with_capacity(readings.len());
        for r in readings {
            let Some(lane) = lane_of(cfg, r.local.ip()) else { continue };
            let before = self.seen.get(&r.cookie).copied().unwrap_or(0);
            seen.insert(r.cookie, r.bytes_acked);
            let delta = r.bytes_acked.saturating_sub(before);
            if delta == 0 {
                continue;
            }
            match per_lane.iter_mut().find(|(l, _)| *l == lane) {
                Some((_, n)) => *n += delta,
                None => per_lane.push((lane, delta)),
            }
        }
        self.seen = seen;
        per_lane
    }
}

fn lane_of(cfg: &Config, ip: IpAddr) -> Option<String> {
    cfg.lane_of(ip).map(|l| cfg.lane_name(l).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cfg() -> Config {
        Config::parse(
            r#"
            [[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]
            "#,
            "t",
        )
        .unwrap()
    }

    fn r(cookie: u64, local: &str, acked: u64) -> Reading {
        Reading {
            cookie,
            local: format!("{local}:40000").parse().unwrap(),
            remote: "10.9.9.9:5201".parse().unwrap(),
            rtt: Duration::from_millis(1),
            bytes_acked: acked,
            bytes_received: 0,
            unacked: 0,
        }
    }

    #[test]
    fn lane_bytes_count_each_socket_once_per_lane() {
        let c = cfg();
        let mut lb = LaneBytes::default();
        assert_eq!(
            lb.update(&c, &[r(1, "10.1.0.1", 100), r(2, "10.2.0.1", 50), r(3, "10.7.0.1", 999)]),
            vec![("sl0".to_string(), 100), ("ll0".to_string(), 50)]
        );
        // Only the growth counts; a new socket on the same lane adds its total.
        assert_eq!(
            lb.update(&c, &[r(1, "10.1.0.1", 130), r(2, "10.2.0.1", 50), r(4, "10.2.0.1", 10)]),
            vec![("sl0".to_string(), 30), ("ll0".to_string(), 10)]
        );
        // Socket 1 gone, then a reused cookie starts from zero again.
        assert_eq!(lb.update(&c, &[r(2, "10.2.0.1", 60)]), vec![("ll0".to_string(), 10)]);
        assert_eq!(lb.update(&c, &[r(1, "10.1.0.1", 5)]), vec![("sl0".to_string(), 5)]);
    }

    #[test]
    fn counters_follow_the_summary() {
        let mut reg = Registry::default();
        let m = LanesMetrics::register(&mut reg);
        m.observe(&Summary { connections: 3, switches: 1, failed_commands: 2, ..Summary::default() }, 2);
        m.observe(&Summary { connections: 5, switches: 1, failed_commands: 2, ..Summary::default() }, 1);
        m.reloaded(false);
        m.add_lane_bytes(&[("ll0".into(), 1500)]);
        let text = tcpaccel_metrics::render(&reg);
        for line in [
            "tcpaccel_lanes_connections_total 5",
            "tcpaccel_lanes_switches_total 1",
            "tcpaccel_lanes_commands_not_applied_total{outcome=\"failed\"} 2",
            "tcpaccel_lanes_reloads_total{outcome=\"refused\"} 1",
            "tcpaccel_lanes_managed_connections 1",
            "tcpaccel_lanes_bytes_acked_total{lane=\"ll0\"} 1500",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
    }
}
