//! clap value parsers: each flag value is parsed once, at the edge, by the
//! grammar its type owns (`core::units`, `LossSpec`, `Pace`), so commands
//! receive typed values. A bad value is refused by clap with exit code 2,
//! naming the flag, the value and the accepted forms.

use std::net::SocketAddr;
use std::time::Duration;

use tcpaccel_core::loss::LossSpec;
use tcpaccel_core::pace_spec::PaceSpec;
use tcpaccel_core::units::{parse_duration, Bytes, QueueLimit, Rate};
use tcpaccel_pacer::rules::DstRule;
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

/// `send`/`recv --pace`: the one pacing grammar, a plain `dynamic` being the
/// traffic tool's default loop.
pub(crate) fn pace(s: &str) -> Result<Pace, String> {
    Pace::parse(s).map_err(|e| e.to_string())
}

/// `run --pace` and `pace --pace`: the same grammar, for front ends whose
/// `dynamic` is the cgroup pacer's (or the shim's) own, so the traffic
/// tool's `dynamic=kernel|loop` is refused, naming it.
pub(crate) fn pace_own_dynamic(s: &str) -> Result<PaceSpec, String> {
    let p = PaceSpec::parse(s).map_err(|e| e.to_string())?;
    match p.mode() {
        Some(m) => Err(format!(
            "pacing {:?}: dynamic={} names one of the traffic tool's userspace pacers (send/recv); \
             here dynamic is the cgroup pacer's per-ACK one (or the preload shim's loop): write dynamic or dynamic:CEILING",
            s.trim(),
            m.name()
        )),
        None => Ok(p),
    }
}

/// `relay --pace`: the one grammar, as a front end that holds a fixed cap
/// per socket takes it (`none` or `static:RATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FixedPace(pub Option<Rate>);

pub(crate) fn fixed_pace(s: &str) -> Result<FixedPace, String> {
    PaceSpec::parse_fixed(s).map(FixedPace).map_err(|e| e.to_string())
}

/// `pace --rule DEST=PACE`.
pub(crate) fn pace_rule(s: &str) -> Result<DstRule, String> {
    s.parse().map_err(|e: tcpaccel_pacer::rules::RuleError| e.to_string())
}

pub(crate) fn rate(s: &str) -> Result<Rate, String> {
    Rate::parse(s).map_err(|e| e.to_string())
}

pub(crate) fn socket_addr(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| format!("{s:?} is not IP:PORT (e.g. 10.0.0.2:5201 or [fd00::2]:5201)"))
}

/// `send --to`: an address, or a host name with a port (resolved when the
/// command runs: a host of the tcpaccel network it runs in, else the
/// system's resolver).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Addr(SocketAddr),
    Name { host: String, port: u16 },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Addr(a) => write!(f, "{a}"),
            Target::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// IP:PORT, [IPv6]:PORT or HOST:PORT.
pub(crate) fn target(s: &str) -> Result<Target, String> {
    if let Ok(a) = s.trim().parse() {
        return Ok(Target::Addr(a));
    }
    let bad = || format!("{s:?} is not IP:PORT or HOST:PORT (e.g. 10.0.0.2:5201, [fd00::2]:5201, h2:5201)");
    let (host, port) = s.trim().rsplit_once(':').ok_or_else(bad)?;
    let name_ok = !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    match port.parse() {
        Ok(port) if name_ok => Ok(Target::Name { host: host.to_string(), port }),
        _ => Err(bad()),
    }
}

/// `--bind`: IP (any port) or IP:PORT.
pub(crate) fn bind_addr(s: &str) -> Result<SocketAddr, String> {
    match s.trim().parse::<std::net::IpAddr>() {
        Ok(ip) => Ok(SocketAddr::new(ip, 0)),
        Err(_) => s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not IP or IP:PORT (e.g. 10.0.0.1 or [fd00::1]:5000)")),
    }
}

/// A report interval: a duration of at least 10 ms, or `off` (`None`).
pub(crate) fn interval_or_off(s: &str) -> Result<Interval, String> {
    if s.trim().eq_ignore_ascii_case("off") {
        return Ok(Interval(None));
    }
    let d = duration(s)?;
    if d < Duration::from_millis(10) {
        return Err(format!("{s:?}: must be at least 10ms (or off)"));
    }
    Ok(Interval(Some(d)))
}

/// [`interval_or_off`]'s value: `None` for `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval(pub(crate) Option<Duration>);

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

    /// `send --pace`, `run --pace`, `pace --pace` and `pace --rule` take the
    /// same texts (the shim's table test is in crates/preload).
    #[test]
    fn every_pace_flag_takes_the_one_grammar() {
        use tcpaccel_core::pace_spec::{Takes, FRONT_END_CASES};
        for (text, takes) in FRONT_END_CASES {
            let send = pace(text).map(|_| ());
            let own = pace_own_dynamic(text).map(|_| ());
            let rule = pace_rule(&format!("10.0.0.0/8={text}")).map(|_| ());
            let relay = fixed_pace(text).map(|_| ());
            assert_eq!(send.is_ok(), *takes != Takes::None, "send --pace {text}: {send:?}");
            assert_eq!(own.is_ok(), *takes == Takes::All, "run/pace --pace {text}: {own:?}");
            assert_eq!(rule.is_ok(), *takes == Takes::All, "pace --rule {text}: {rule:?}");
            let fixed = *takes == Takes::All && !text.contains("dynamic");
            assert_eq!(relay.is_ok(), fixed, "relay --pace {text}: {relay:?}");
            for e in [send, own, rule, relay].into_iter().filter_map(Result::err) {
                assert!(e.contains(text.trim()), "{e} does not name {text}");
            }
            // What `run` parses is what the cgroup pacer is configured with.
            if let Ok(p) = pace_own_dynamic(text) {
                let cfg = tcpaccel_pacer::PaceConfig::new(p, vec![], None).expect(text);
                assert_eq!(cfg.default.spec(), p, "{text}");
            }
        }
    }

    #[test]
    fn each_parser_takes_its_grammar_and_names_a_bad_value() {
        assert_eq!(duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(bytes("1MB").unwrap(), Bytes(1_000_000));
        assert_eq!(rate_setting("unlimited").unwrap(), RateSetting(None));
        assert_eq!(socket_addr("[::1]:80").unwrap(), "[::1]:80".parse().unwrap());
        assert!(matches!(pace("static:100mbit").unwrap(), Pace::Static(_)));
        assert_eq!(target("10.0.0.2:5201").unwrap(), Target::Addr("10.0.0.2:5201".parse().unwrap()));
        assert_eq!(target("[fd00::2]:80").unwrap(), Target::Addr("[fd00::2]:80".parse().unwrap()));
        assert_eq!(target("h2:5201").unwrap(), Target::Name { host: "h2".into(), port: 5201 });
        assert_eq!(target("localhost:80").unwrap().to_string(), "localhost:80");
        for (r, bad) in [
            (duration("100").map(|_| ()), "100"),
            (rate_setting("-1gbit").map(|_| ()), "-1gbit"),
            (bytes("lots").map(|_| ()), "lots"),
            (queue_limit("12q").map(|_| ()), "12q"),
            (loss("ge:p=2").map(|_| ()), "ge:p=2"),
            (pace("fast").map(|_| ()), "fast"),
            (socket_addr("10.0.0.2").map(|_| ()), "10.0.0.2"),
            (target("h2").map(|_| ()), "h2"),
            (target("h2:http").map(|_| ()), "h2:http"),
            (target("fd00::2:80").map(|_| ()), "fd00::2:80"),
            (target(":80").map(|_| ()), ":80"),
        ] {
            let e = r.unwrap_err();
            assert!(e.contains(bad), "{e:?} does not name {bad:?}");
        }
    }
}
