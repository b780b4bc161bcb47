//! Reports of the traffic tool: typed records serialized as JSON Lines
//! (each with a `type` field) and their one-line text forms.
//!
//! What it is: data types and formatting only. What it is not: no
//! measurement; the sender and receiver fill these in.

use std::time::Duration;

use serde::{Serialize, Serializer};
use tcpaccel_core::units::Rate;
use tcpaccel_sys::tcpinfo::TcpInfo;

/// `tcp_snd_ssthresh` before the first loss (TCP_INFINITE_SSTHRESH).
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

pub(crate) fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(crate) fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// A streamed report of a `send` run.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Report {
    Interval(IntervalReport),
}

/// One stream's state over one interval. TCP_INFO fields are `None` when
/// the socket does not answer TCP_INFO (e.g. some MPTCP sockets). In
/// reverse mode they describe our receiving socket, not the sender's.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSample {
    pub stream: u16,
    /// Upload: bytes newly acknowledged by the receiver; reverse: bytes read.
    pub bytes: u64,
    pub goodput_bps: u64,
    /// Segments retransmitted during the interval.
    pub retransmits: Option<u32>,
    /// Congestion window, in segments.
    #[serde(rename = "cwnd_segments")]
    pub cwnd: Option<u32>,
    /// In segments; `None` also while ssthresh is still "infinite" (no loss yet).
    #[serde(rename = "ssthresh_segments")]
    pub ssthresh: Option<u32>,
    pub srtt_us: Option<u32>,
    pub rttvar_us: Option<u32>,
    pub pacing_rate_bps: Option<u64>,
    pub delivery_rate_bps: Option<u64>,
    #[serde(rename = "mss_bytes")]
    pub mss: Option<u32>,
    /// Segments sent and not yet acknowledged.
    #[serde(rename = "unacked_segments")]
    pub unacked: Option<u32>,
    /// The whole TCP_INFO reading the fields above come from, for callers
    /// that need more of it (the path comparison's delivery counts); not
    /// part of the JSON report.
    #[serde(skip)]
    pub info: Option<TcpInfo>,
}

impl StreamSample {
    pub fn new(
        stream: u16,
        bytes: u64,
        dt: Duration,
        retransmits: Option<u32>,
        info: Option<&TcpInfo>,
    ) -> Self {
        let bps = |b: Option<u64>| b.filter(|&v| v != u64::MAX).map(|v| v.saturating_mul(8));
        StreamSample {
            stream,
            bytes,
            goodput_bps: Rate::from_bytes_over(bytes, dt).bits_per_sec(),
            retransmits,
            cwnd: info.map(|i| i.snd_cwnd),
            ssthresh: info.map(|i| i.snd_ssthresh).filter(|&s| s < INFINITE_SSTHRESH),
            srtt_us: info.map(|i| i.rtt),
            rttvar_us: info.map(|i| i.rttvar),
            pacing_rate_bps: bps(info.and_then(|i| i.pacing_rate)),
            delivery_rate_bps: bps(info.and_then(|i| i.delivery_rate)),
            mss: info.map(|i| i.snd_mss),
            unacked: info.map(|i| i.unacked),
            info: info.cloned(),
        }
    }
}

/// All streams over one interval, plus their sums.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalReport {
    pub start_s: f64,
    pub end_s: f64,
    pub bytes: u64,
    pub goodput_bps: u64,
    pub retransmits: Option<u32>,
    pub streams: Vec<StreamSample>,
}

impl IntervalReport {
    pub fn new(start: Duration, end: Duration, streams: Vec<StreamSample>) -> Self {
        let bytes = streams.iter().map(|s| s.bytes).sum();
        IntervalReport {
            start_s: start.as_secs_f64(),
            end_s: end.as_secs_f64(),
            bytes,
            goodput_bps: Rate::from_bytes_over(bytes, end.saturating_sub(start)).bits_per_sec(),
            retransmits: streams.iter().map(|s| s.retransmits).sum(),
            streams,
        }
    }

    /// Text lines: one per stream, and a SUM line when there are several.
    pub fn text_lines(&self) -> Vec<String> {
        let span = format!("{:7.2}-{:<7.2}s", self.start_s, self.end_s);
        let mut out = Vec::new();
        for s in &self.streams {
            out.push(format!(
                "[{:>3}] {span} {:>10} {:>14}  retr {:>4}  cwnd {:>6}  ssthresh {:>6}  srtt {:>9}  rttvar {:>9}  pacing {:>14}  delivery {:>14}",
                s.stream,
                human_bytes(s.bytes),
                Rate(s.goodput_bps).to_string(),
                opt(s.retransmits),
                opt(s.cwnd),
                opt(s.ssthresh),
                s.srtt_us.map(|v| format!("{:.3}ms", f64::from(v) / 1000.0)).unwrap_or_else(|| "-".into()),
                s.rttvar_us.map(|v| format!("{:.3}ms", f64::from(v) / 1000.0)).unwrap_or_else(|| "-".into()),
                s.pacing_rate_bps.map(|v| Rate(v).to_string()).unwrap_or_else(|| "-".into()),
                s.delivery_rate_bps.map(|v| Rate(v).to_string()).unwrap_or_else(|| "-".into()),
            ));
        }
        if self.streams.len() > 1 {
            out.push(format!(
                "[SUM] {span} {:>10} {:>14}  retr {:>4}",
                human_bytes(self.bytes),
                Rate(self.goodput_bps).to_string(),
                opt(self.retransmits)
            ));
        }
        out
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Bytes with a binary prefix, for text output.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_json_has_type_and_sums() {
        let a = StreamSample::new(0, 1_000_000, Duration::from_secs(1), Some(2), None);
        let b = StreamSample::new(1, 500_000, Duration::from_secs(1), Some(1), None);
        let r = Report::Interval(IntervalReport::new(Duration::ZERO, Duration::from_secs(1), vec![a, b]));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["type"], "interval");
        assert_eq!(v["bytes"], 1_500_000);
        assert_eq!(v["goodput_bps"], 12_000_000);
        assert_eq!(v["retransmits"], 3);
        assert_eq!(v["streams"][1]["goodput_bps"], 4_000_000);
        let Report::Interval(i) = r;
        let lines = i.text_lines();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].starts_with("[SUM]"), "{}", lines[2]);
    }

    #[test]
    fn infinite_ssthresh_and_unlimited_pacing_are_none() {
        let mut buf = vec![0u8; 232];
        buf[76..80].copy_from_slice(&INFINITE_SSTHRESH.to_ne_bytes());
        buf[104..112].copy_from_slice(&u64::MAX.to_ne_bytes());
        buf[160..168].copy_from_slice(&1_000u64.to_ne_bytes());
        let info = TcpInfo::parse(&buf).unwrap();
        let s = StreamSample::new(0, 0, Duration::from_secs(1), None, Some(&info));
        assert_eq!(s.ssthresh, None);
        assert_eq!(s.pacing_rate_bps, None);
        assert_eq!(s.delivery_rate_bps, Some(8_000));
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
    }
}
