//! clap value parsers: each flag value is parsed once, at the edge, by the
//! grammar its type owns (`core::units`, `LossSpec`, `Pace`), so commands
//! receive typed values. A bad value is refused by clap with exit code 2,
//! naming the flag, the value and the accepted forms.

use std::net::SocketAddr;
use std::time::Duration;

use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::units::{parse_duration, Bytes, QueueLimit, Rate};
use tcpaccel_traffic::pace::Pace;

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

pub(crate) fn bytes(s: &str) -> Result<Bytes, String> {
    Bytes::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn queue_limit(s: &str) -> Result<QueueLimit, String> {
    QueueLimit::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn loss(s: &str) -> Result<LossSpec, String> {
    LossSpec::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn pace(s: &str) -> Result<Pace, String> {
    Pace::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| format!("{s:?} is not IP:PORT (e.g. 10.0.0.2:5201 or [fd00::2]:5201)"))
}

/// `--metrics`: PORT alone is loopback (see `tcpaccel_metrics::parse_listen`).
pub(crate) fn metrics_addr(s: &str) -> Result<SocketAddr, String> {
    tcpaccel_metrics::parse_listen(s).map_err(|e| e.to_string())
}

/// A link rate that may be `unlimited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateSetting(pub Option<Rate>);

pub(crate) fn rate_setting(s: &str) -> Result<RateSetting, String> {
    tcpaccel_emu::config::parse_rate_setting(s).map(RateSetting).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_parser_takes_its_grammar_and_names_a_bad_value() {
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(bytes("1MB").unwrap(), Bytes(1_000_000));
        assert_eq!(rate_setting("unlimited").unwrap(), RateSetting(None));
        assert_eq!(socket_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert!(matches!(pace("static:100mbit").unwrap(), Pace::Static(_)));
        for (r, bad) in [
            (duration("100").map(|_| ()), "100"),
            (rate_setting("-1gbit").map(|_| ()), "-1gbit"),
            (bytes("lots").map(|_| ()), "lots"),
            (queue_limit("12q").map(|_| ()), "12q"),
            (loss("ge:p=2").map(|_| ()), "ge:p=2"),
            (pace("fast").map(|_| ()), "fast"),
            (socket_addr("10.0.0.2").map(|_| ()), "10.0.0.2"),
        ] {
            let e = r.unwrap_err();
            assert!(e.contains(bad), "{e:?} does not name {bad:?}");
        }
    }
}
