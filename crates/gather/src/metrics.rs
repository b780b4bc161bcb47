//! The gathering server's `--metrics` view, built from the same typed
//! [`Event`]s the server reports (no second bookkeeping inside the server):
//! per client (`id`, `class`) its target and goodput rates, streams, pool
//! share and window clamps from each status; joins, ends and connection
//! errors as counters; the pool size; the log lines left out under a flood
//! ([`crate::floodlog`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::status::Event;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientLabel {
    pub id: String,
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndLabel {
    /// "true" when the client's data was complete and verified.
    pub complete: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabel {
    pub stage: String,
}

/// The server's metrics; feed every event to [`GatherMetrics::observe`].
#[derive(Debug, Default)]
pub struct GatherMetrics {
    target: Family<ClientLabel, Gauge>,
    goodput: Family<ClientLabel, Gauge>,
    streams: Family<ClientLabel, Gauge>,
    streams_wanted: Family<ClientLabel, Gauge>,
    share: Family<ClientLabel, Gauge>,
    clamp: Family<ClientLabel, Gauge>,
    rtt: Family<ClientLabel, Gauge>,
    pool: Gauge,
    clients: Gauge,
    joined: Counter,
    ended: Family<EndLabel, Counter>,
    errors: Family<StageLabel, Counter>,
    /// The class of each live client, to drop its series when it ends.
    classes: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl GatherMetrics {
    /// Registers the metrics (prefix `tcpaccel_gather_`) in `reg`.
    pub fn register(reg: &mut Registry, pool: u64) -> GatherMetrics {
        let m = GatherMetrics::default();
        m.pool.set(gauge(pool));
        let per_client: [(&str, &str, &Family<ClientLabel, Gauge>); 7] = [
            ("tcpaccel_gather_target_bps", "The client's target rate (bit/s)", &m.target),
            (
                "tcpaccel_gather_goodput_bps",
                "The client's goodput over the last interval (bit/s)",
                &m.goodput,
            ),
            ("tcpaccel_gather_streams", "Data streams the client has open", &m.streams),
            (
                "tcpaccel_gather_streams_wanted",
                "Data streams the server asks the client for",
                &m.streams_wanted,
            ),
            ("tcpaccel_gather_pool_share_bytes", "The client's share of the receive-buffer pool", &m.share),
            ("tcpaccel_gather_window_clamp_bytes", "TCP_WINDOW_CLAMP in force over its streams", &m.clamp),
            ("tcpaccel_gather_rtt_us", "The largest smoothed RTT of its streams (us)", &m.rtt),
        ];
        for (name, help, fam) in per_client {
            reg.register(name, help, fam.clone());
        }
        reg.register(
            "tcpaccel_gather_pool_bytes",
            "The receive-buffer pool the clients share",
            m.pool.clone(),
        );
        reg.register("tcpaccel_gather_clients", "Clients connected now", m.clients.clone());
        reg.register("tcpaccel_gather_clients_joined", "Clients that joined", m.joined.clone());
        reg.register("tcpaccel_gather_clients_ended", "Clients that left, by outcome", m.ended.clone());
        reg.register(
            "tcpaccel_gather_connection_errors",
            "Connections closed for what their peer sent, by stage",
            m.errors.clone(),
        );
        reg.register(
            "tcpaccel_gather_log_suppressed",
            "Per-connection log lines left out under a flood (their count is logged in a summary)",
            crate::floodlog::CONN_LOG.suppressed().clone(),
        );
        m
    }

    pub fn observe(&self, e: &Event) {
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        match e {
            Event::Status(s) => {
                let l = ClientLabel { id: s.id.clone(), class: s.class.clone() };
                self.target.get_or_create(&l).set(gauge(s.target_bps));
                self.goodput.get_or_create(&l).set(gauge(s.goodput_bps));
                self.streams.get_or_create(&l).set(i64::from(s.streams));
                self.streams_wanted.get_or_create(&l).set(i64::from(s.streams_wanted));
                self.share.get_or_create(&l).set(gauge(s.allocation));
                self.clamp.get_or_create(&l).set(gauge(s.window_clamp));
                self.rtt.get_or_create(&l).set(gauge(s.rtt_us));
            }
            Event::Allocation { pool, .. } => {
                self.pool.set(gauge(*pool));
            }
            Event::ClientJoin { id, class, .. } => {
                self.joined.inc();
                classes.insert(id.clone(), class.clone());
            }
            Event::ClientEnd { id, complete, .. } => {
                self.ended.get_or_create(&EndLabel { complete: complete.to_string() }).inc();
                if let Some(class) = classes.remove(id) {
                    let l = ClientLabel { id: id.clone(), class };
                    for f in [
                        &self.target,
                        &self.goodput,
                        &self.streams,
                        &self.streams_wanted,
                        &self.share,
                        &self.clamp,
                        &self.rtt,
                    ] {
                        f.remove(&l);
                    }
                }
            }
            Event::ConnectionError { stage, .. } => {
                self.errors.get_or_create(&StageLabel { stage: stage.clone() }).inc();
            }
        }
        self.clients.set(gauge(classes.len() as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::ClientStatus;

    fn status(id: &str, goodput: u64) -> Event {
        Event::Status(ClientStatus {
            t: 1.0,
            id: id.into(),
            session: crate::proto::SessionId([7; 16]),
            class: "high".into(),
            priority: 2,
            target_bps: 1_000_000,
            goodput_bps: goodput,
            streams: 2,
            streams_wanted: 3,
            allocation: 15_000,
            window_clamp: 14_000,
            rtt_us: 120_000,
            received: 0,
            sent: 0,
            app_limited: false,
        })
    }

    #[test]
    fn statuses_become_per_client_gauges_and_ends_remove_them() {
        let mut reg = Registry::default();
        let m = GatherMetrics::register(&mut reg, 100_000);
        m.observe(&Event::ClientJoin {
            t: 0.5,
            id: "a b".into(),
            session: crate::proto::SessionId([7; 16]),
            class: "high".into(),
            target_bps: 1_000_000,
            peer: "127.0.0.1:9".into(),
        });
        m.observe(&status("a b", 980_000));
        let text = tcpaccel_metrics::render(&reg);
        for line in [
            "tcpaccel_gather_goodput_bps{id=\"a b\",class=\"high\"} 980000",
            "tcpaccel_gather_target_bps{id=\"a b\",class=\"high\"} 1000000",
            "tcpaccel_gather_streams_wanted{id=\"a b\",class=\"high\"} 3",
            "tcpaccel_gather_pool_share_bytes{id=\"a b\",class=\"high\"} 15000",
            "tcpaccel_gather_pool_bytes 100000",
            "tcpaccel_gather_clients 1",
            "tcpaccel_gather_clients_joined_total 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
        m.observe(&Event::ClientEnd {
            t: 9.0,
            id: "a b".into(),
            session: crate::proto::SessionId([7; 16]),
            bytes: 10,
            complete: true,
            sha256: String::new(),
            path: None,
            reason: "done".into(),
        });
        let text = tcpaccel_metrics::render(&reg);
        assert!(!text.contains("id=\"a b\""), "series of a client that left remain:\n{text}");
        assert!(text.contains("tcpaccel_gather_clients_ended_total{complete=\"true\"} 1"), "{text}");
        assert!(text.contains("tcpaccel_gather_clients 0"), "{text}");
    }
}
