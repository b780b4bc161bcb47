//! The pacer's `--metrics` view: on each scrape, the same pinned maps
//! `tcpaccel pace status` reads, per attachment (cgroup) and rule:
//! connections paced, rate updates, failed updates, the last rate set and
//! the sockets open now.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::attach::{status, AttachStatus};

/// Registers the pacer's metrics (prefix `tcpaccel_pacer_`) in `reg`.
pub fn register(reg: &mut Registry) {
    reg.register_collector(Box::new(PacerCollector));
}

#[derive(Debug)]
struct PacerCollector;

type Labels = [(&'static str, String); 4];

fn labels(a: &AttachStatus, dest: &str, pace: &str) -> Labels {
    let cgroup = a.cgroup.as_ref().map_or_else(|| a.cgroup_id.to_string(), |p| p.display().to_string());
    [
        ("cgroup", cgroup),
        ("rule", dest.to_string()),
        ("pace", pace.to_string()),
        ("link", a.link_id.to_string()),
    ]
}

/// Encodes one family; `value` picks the number from a rule.
fn family(
    enc: &mut DescriptorEncoder,
    all: &[AttachStatus],
    name: &str,
    help: &str,
    kind: MetricType,
    value: impl Fn(&crate::attach::RuleStatus) -> u64,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for a in all {
        for r in &a.rules {
            let l = labels(a, &r.dest, &r.pace);
            let v = value(r);
            match kind {
                MetricType::Counter => ConstCounter::new(v).encode(m.encode_family(&l)?)?,
                _ => ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)).encode(m.encode_family(&l)?)?,
            }
        }
    }
    Ok(())
}

impl Collector for PacerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let all = match status() {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("pacer metrics: reading the pinned maps: {e}");
                Vec::new()
            }
        };
        let n = ConstGauge::new(all.len() as i64);
        n.encode(enc.encode_descriptor(
            "tcpaccel_pacer_attachments",
            "cgroups with the pacer attached",
            None,
            n.metric_type(),
        )?)?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_connections",
            "Connections the rule paced",
            MetricType::Counter,
            |r| r.stats.conns,
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_rate_updates",
            "Pacing rates set (one per connection for static, per change for dynamic)",
            MetricType::Counter,
            |r| r.stats.updates,
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_update_errors",
            "Failed bpf_setsockopt calls",
            MetricType::Counter,
            |r| r.stats.errors,
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_last_rate_bits_per_second",
            "Payload rate the rule last set",
            MetricType::Gauge,
            |r| r.stats.last_rate.saturating_mul(8),
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_open_sockets",
            "Sockets open now under the rule",
            MetricType::Gauge,
            |r| r.open as u64,
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_held_sockets",
            "Open sockets past --hold's probe, among which it shares its bottleneck estimate",
            MetricType::Gauge,
            |r| r.stats.held,
        )?;
        family(
            &mut enc,
            &all,
            "tcpaccel_pacer_held_cap_bits_per_second",
            "Caps of the sockets past --hold's probe, summed (payload)",
            MetricType::Gauge,
            |r| r.stats.held_cap.saturating_mul(8),
        )
    }
}
