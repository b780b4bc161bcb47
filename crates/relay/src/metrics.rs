//! The relay's `--metrics` view: the same [`Stats`] the SIGUSR1 JSON
//! snapshot reads, encoded on each scrape by a `prometheus-client`
//! collector (no second set of counters to keep in step).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use crate::stats::Stats;

/// Registers the relay's metrics (prefix `tcpaccel_relay_`) in `reg`.
pub fn register(reg: &mut prometheus_client::registry::Registry, stats: Arc<Stats>) {
    reg.register_collector(Box::new(RelayCollector(stats)));
}

#[derive(Debug)]
struct RelayCollector(Arc<Stats>);

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX));
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for RelayCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.0.snapshot();
        counter(&mut enc, "tcpaccel_relay_connections", "Client connections accepted", s.connections_total)?;
        gauge(
            &mut enc,
            "tcpaccel_relay_connections_active",
            "Client connections open now",
            s.connections_active,
        )?;
        gauge(
            &mut enc,
            "tcpaccel_relay_handshakes_active",
            "Connections still in the SOCKS5 handshake",
            s.handshakes_active,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "tcpaccel_relay_bytes",
                "Payload bytes relayed, by direction (up: client to next hop)",
                None,
                MetricType::Counter,
            )?;
            for (dir, v) in [("up", s.bytes_up), ("down", s.bytes_down)] {
                ConstCounter::new(v).encode(m.encode_family(&[("direction", dir)])?)?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "tcpaccel_relay_connections_relayed",
                "Relayed connections by the data path they took (splice, or copy)",
                None,
                MetricType::Counter,
            )?;
            for (path, v) in [("splice", s.spliced), ("copy", s.copied)] {
                ConstCounter::new(v).encode(m.encode_family(&[("path", path)])?)?;
            }
        }
        counter(
            &mut enc,
            "tcpaccel_relay_pipe_failures",
            "Connections that wanted splice pipes, could not get them and copied",
            s.pipe_failures,
        )?;
        counter(
            &mut enc,
            "tcpaccel_relay_log_suppressed",
            "Per-connection log records left out under a flood",
            s.log_suppressed,
        )?;
        counter(
            &mut enc,
            "tcpaccel_relay_early_replies",
            "CONNECTs answered with success before the chain was up (early_reply)",
            s.early_replies,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "tcpaccel_relay_early_reply_failures",
                "Chains that failed after an early reply (the client got a reset), by the SOCKS reply code it would have been sent",
                None,
                MetricType::Counter,
            )?;
            for (code, v) in &s.early_reply_failures {
                ConstCounter::new(*v).encode(m.encode_family(&[("code", *code)])?)?;
            }
        }
        let mut m = enc.encode_descriptor(
            "tcpaccel_relay_errors",
            "Failed connections by kind",
            None,
            MetricType::Counter,
        )?;
        for (kind, v) in &s.errors {
            ConstCounter::new(*v).encode(m.encode_family(&[("kind", *kind)])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn a_scrape_reads_the_live_counters() {
        let stats = Arc::new(Stats::default());
        let mut reg = prometheus_client::registry::Registry::default();
        register(&mut reg, stats.clone());
        stats.connections_total.fetch_add(2, Relaxed);
        stats.bytes_up.fetch_add(1000, Relaxed);
        stats.copied.fetch_add(1, Relaxed);
        stats.error(crate::stats::ErrorKind::NotAllowed);
        stats.early_reply_failed(5);
        let text = tcpaccel_metrics::render(&reg);
        for line in [
            "tcpaccel_relay_connections_total 2",
            "tcpaccel_relay_bytes_total{direction=\"up\"} 1000",
            "tcpaccel_relay_bytes_total{direction=\"down\"} 0",
            "tcpaccel_relay_connections_relayed_total{path=\"copy\"} 1",
            "tcpaccel_relay_errors_total{kind=\"not_allowed\"} 1",
            "tcpaccel_relay_early_replies_total 0",
            "tcpaccel_relay_early_reply_failures_total{code=\"5\"} 1",
            "tcpaccel_relay_early_reply_failures_total{code=\"1\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
        stats.bytes_up.fetch_add(1, Relaxed);
        assert!(tcpaccel_metrics::render(&reg).contains("tcpaccel_relay_bytes_total{direction=\"up\"} 1001"));
    }
}
