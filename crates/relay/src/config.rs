//! Relay configuration: the raw form shared by the TOML file and the command
//! line ([`RawConfig`]), turned into a validated [`Config`] in one step.
//!
//! Values are parsed only with `tcpaccel_core::units`. This module does no
//! I/O except reading an auth file named by the configuration.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tcpaccel_core::units::{parse_duration, Bytes, Rate};

use crate::acl::{Acl, Action, Rule};
use crate::socks::Target;

/// Everything that can go wrong turning raw settings into a [`Config`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: {source}")]
    Value { field: &'static str, source: tcpaccel_core::units::ParseError },
    #[error(transparent)]
    Rule(#[from] crate::acl::RuleError),
    #[error("{field}: {msg}")]
    Invalid { field: &'static str, msg: String },
    #[error("auth file {path}: {source}")]
    AuthFile { path: String, source: std::io::Error },
    #[error("config file {path}: {msg}")]
    File { path: String, msg: String },
    #[error(
        "refusing to listen on non-loopback address {0} without access rules: add --allow CIDR[:PORTS] (e.g. --allow 10.0.0.0/8) to say which destinations clients may reach"
    )]
    OpenRelay(SocketAddr),
}

fn invalid(field: &'static str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field, msg: msg.into() }
}

/// Settings as written by a user, in the TOML file or on the command line.
/// Field names are the long flags with `_` for `-`.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    /// SOCKS5 listen address (default 127.0.0.1:1080 when no `forward` is given).
    pub listen: Option<String>,
    /// Further SOCKS5 hops, `socks5://[user:pass@]HOST:PORT`, first is nearest.
    pub next: Vec<String>,
    /// Fixed forwards `LISTEN=TARGET` (no SOCKS).
    pub forward: Vec<String>,
    /// Accepted `user:pass` pairs (RFC 1929); none means no authentication.
    pub auth: Vec<String>,
    /// File of `user:pass` lines (`#` comments).
    pub auth_file: Option<String>,
    /// Ordered access rules, each `"allow CIDR[:PORTS]"` or `"deny CIDR[:PORTS]"`.
    pub rules: Vec<String>,
    pub cc: Option<String>,
    pub pace: Option<String>,
    pub sndbuf: Option<String>,
    pub rcvbuf: Option<String>,
    pub notsent_lowat: Option<String>,
    pub idle_timeout: Option<String>,
    pub handshake_timeout: Option<String>,
    /// Limit for a new SOCKS client's first byte (shorter than the handshake's).
    pub first_byte_timeout: Option<String>,
    pub connect_timeout: Option<String>,
    pub max_conns: Option<usize>,
    /// Connections in the SOCKS handshake at once (part of `max_conns`).
    pub max_handshakes: Option<usize>,
    /// Connections in the SOCKS handshake at once from one source (IPv4
    /// address or IPv6 /64).
    pub per_source_handshakes: Option<usize>,
    /// listen(2) backlog; the kernel caps it at net.core.somaxconn.
    pub backlog: Option<u32>,
    /// Use the user-space copy instead of splice(2).
    pub copy: Option<bool>,
    /// Pipe capacity per direction for splice.
    pub pipe_size: Option<String>,
    /// Buffer per direction for the copy path.
    pub buffer_size: Option<String>,
    /// One JSON line per closed connection on stderr.
    pub json_logs: Option<bool>,
}

impl RawConfig {
    /// Reads a TOML file.
    pub fn from_toml_file(path: &str) -> Result<RawConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::File { path: path.to_string(), msg: e.to_string() })?;
        toml::from_str(&text).map_err(|e| ConfigError::File { path: path.to_string(), msg: e.to_string() })
    }

    /// `self` with every setting given in `over` replacing it (lists replace whole).
    pub fn overlay(mut self, over: RawConfig) -> RawConfig {
        macro_rules! opt {
            ($($f:ident),*) => { $( if over.$f.is_some() { self.$f = over.$f; } )* };
        }
        macro_rules! list {
            ($($f:ident),*) => { $( if !over.$f.is_empty() { self.$f = over.$f; } )* };
        }
        opt!(
            listen,
            auth_file,
            cc,
            pace,
            sndbuf,
            rcvbuf,
            notsent_lowat,
            idle_timeout,
            handshake_timeout,
            first_byte_timeout,
            connect_timeout,
            max_conns,
            max_handshakes,
            per_source_handshakes,
            backlog,
            copy,
            pipe_size,
            buffer_size,
            json_logs
        );
        list!(next, forward, auth, rules);
        self
    }
}

/// A SOCKS5 hop this relay goes through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub addr: Target,
    pub auth: Option<(String, String)>,
    /// Written `tcpaccel+socks5://`: the hop is a tcpaccel relay, which
    /// accepts greeting, auth and CONNECT sent together and forwards bytes
    /// that follow its request; other hops get the step-by-step handshake.
    pub pipeline: bool,
}

impl Hop {
    /// Parses `socks5://[user:pass@]HOST:PORT` (also `socks5h://`, or no
    /// scheme), or `tcpaccel+socks5://...` for a hop that is a tcpaccel relay.
    pub fn parse(s: &str) -> Result<Hop, ConfigError> {
        let pipeline = s.starts_with("tcpaccel+socks5://");
        let rest = s
            .strip_prefix("socks5://")
            .or_else(|| s.strip_prefix("socks5h://"))
            .or_else(|| s.strip_prefix("tcpaccel+socks5://"))
            .unwrap_or(s)
            .trim_end_matches('/');
        if rest.contains("://") {
            return Err(invalid(
                "next",
                format!(
                    "{s:?}: only socks5:// (or tcpaccel+socks5:// for a tcpaccel relay) hops are supported"
                ),
            ));
        }
        let (auth, hostport) = match rest.rsplit_once('@') {
            Some((cred, hp)) => {
                let (u, p) =
                    cred.split_once(':').ok_or_else(|| invalid("next", format!("{s:?}: user:pass@")))?;
                (Some((u.to_string(), p.to_string())), hp)
            }
            None => (None, rest),
        };
        let addr = parse_target(hostport).map_err(|m| invalid("next", format!("{s:?}: {m}")))?;
        Ok(Hop { addr, auth, pipeline })
    }
}

/// Parses `HOST:PORT`, `IP:PORT` or `[IPv6]:PORT`.
pub fn parse_target(s: &str) -> Result<Target, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(Target::Ip(a));
    }
    let (host, port) = s.rsplit_once(':').ok_or("expected HOST:PORT")?;
    let port: u16 = port.parse().map_err(|_| format!("bad port {port:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Target::Ip(SocketAddr::new(ip, port)));
    }
    if host.is_empty() || host.len() > 255 || host.contains(':') {
        return Err(format!("bad host {host:?}"));
    }
    Ok(Target::Domain(host.to_string(), port))
}

/// What a listener does with a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Socks,
    Forward(Target),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub addr: SocketAddr,
    pub mode: Mode,
}

/// Options applied to each outgoing (upstream) socket before it connects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tuning {
    pub cc: Option<String>,
    pub pace: Option<Rate>,
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    pub notsent_lowat: Option<u32>,
}

/// A validated relay configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listeners: Vec<Listener>,
    pub next: Vec<Hop>,
    pub users: Vec<(String, String)>,
    pub acl: Acl,
    pub tuning: Tuning,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
    /// A SOCKS client that has sent nothing this long after being accepted is
    /// closed (at most `handshake_timeout`).
    pub first_byte_timeout: Duration,
    pub connect_timeout: Duration,
    /// Connections held at once, in the handshake or relaying; more wait in
    /// the listen backlog.
    pub max_conns: usize,
    /// Of those, at most this many in the SOCKS handshake; a newcomer beyond
    /// it displaces the oldest handshake (see `admit`).
    pub max_handshakes: usize,
    /// At most this many handshakes from one source (IPv4 address, IPv6 /64)
    /// once they are `handshake_stall` old; younger ones are a burst.
    pub per_source_handshakes: usize,
    /// Age after which a handshake counts as stalled (not a setting of its
    /// own: 1 s covers a SOCKS negotiation with authentication, three round
    /// trips, on paths up to ~300 ms RTT).
    pub handshake_stall: Duration,
    /// Backlog asked of listen(2); `u32::MAX` by default, which the kernel
    /// caps at net.core.somaxconn of the relay's network namespace.
    pub backlog: u32,
    pub splice: bool,
    pub pipe_size: usize,
    pub buffer_size: usize,
    pub json_logs: bool,
    /// Warm connections kept to the first next hop (0: none); see `pool`.
    /// Not a file key or flag yet: the default.
    pub pool_size: usize,
    /// A warm connection idle this long is closed (below our relays' 5 s
    /// handshake timeout).
    pub pool_idle: Duration,
}

impl Config {
    /// This configuration with the settings a reload may change taken from
    /// `new`, and the names of the settings `new` changes that need a
    /// restart (bound sockets, admission limits, the data path), which keep
    /// this configuration's values.
    pub fn reloaded(&self, new: Config) -> (Config, Vec<&'static str>) {
        let fixed = [
            ("listen/forward", self.listeners != new.listeners),
            ("max_conns", self.max_conns != new.max_conns),
            ("max_handshakes", self.max_handshakes != new.max_handshakes),
            ("per_source_handshakes", self.per_source_handshakes != new.per_source_handshakes),
            ("backlog", self.backlog != new.backlog),
            ("copy", self.splice != new.splice),
            ("pipe_size", self.pipe_size != new.pipe_size),
            ("buffer_size", self.buffer_size != new.buffer_size),
        ];
        let changed = fixed.iter().filter(|(_, c)| *c).map(|(n, _)| *n).collect();
        let merged = Config {
            listeners: self.listeners.clone(),
            max_conns: self.max_conns,
            max_handshakes: self.max_handshakes,
            per_source_handshakes: self.per_source_handshakes,
            handshake_stall: self.handshake_stall,
            backlog: self.backlog,
            splice: self.splice,
            pipe_size: self.pipe_size,
            buffer_size: self.buffer_size,
            ..new
        };
        (merged, changed)
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:1080";
pub const DEFAULT_MAX_CONNS: usize = 1024;

fn dur(field: &'static str, v: &Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        Some(s) => parse_duration(s).map_err(|source| ConfigError::Value { field, source }),
        None => Ok(default),
    }
}

fn bytes(field: &'static str, v: &Option<String>) -> Result<Option<u64>, ConfigError> {
    v.as_deref()
        .map(|s| Bytes::parse(s).map(|b| b.get()).map_err(|source| ConfigError::Value { field, source }))
        .transpose()
}

fn user_pass(field: &'static str, s: &str) -> Result<(String, String), ConfigError> {
    let (u, p) = s.split_once(':').ok_or_else(|| invalid(field, "expected user:pass"))?;
    if u.is_empty() || u.len() > 255 || p.len() > 255 {
        return Err(invalid(field, "user must be 1-255 bytes and password at most 255 bytes"));
    }
    Ok((u.to_string(), p.to_string()))
}

impl Config {
    pub fn from_raw(raw: &RawConfig) -> Result<Config, ConfigError> {
        let mut listeners = Vec::new();
        for f in &raw.forward {
            let (l, t) = f
                .split_once('=')
                .ok_or_else(|| invalid("forward", format!("{f:?}: expected LISTEN=TARGET")))?;
            let addr: SocketAddr = l
                .parse()
                .map_err(|_| invalid("forward", format!("{l:?}: listen address must be IP:PORT")))?;
            let target = parse_target(t).map_err(|m| invalid("forward", format!("{t:?}: {m}")))?;
            listeners.push(Listener { addr, mode: Mode::Forward(target) });
        }
        if raw.listen.is_some() || listeners.is_empty() {
            let l = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
            let addr: SocketAddr =
                l.parse().map_err(|_| invalid("listen", format!("{l:?}: expected IP:PORT")))?;
            listeners.push(Listener { addr, mode: Mode::Socks });
        }
        let next = raw.next.iter().map(|h| Hop::parse(h)).collect::<Result<Vec<_>, _>>()?;
        let mut users = raw.auth.iter().map(|a| user_pass("auth", a)).collect::<Result<Vec<_>, _>>()?;
        if let Some(path) = &raw.auth_file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::AuthFile { path: path.clone(), source })?;
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                users.push(user_pass("auth_file", line)?);
            }
        }
        let mut acl = Acl::default();
        for r in &raw.rules {
            let (verb, spec) = r.trim().split_once(char::is_whitespace).unwrap_or((r.as_str(), ""));
            let action = match verb {
                "allow" => Action::Allow,
                "deny" => Action::Deny,
                _ => {
                    return Err(invalid(
                        "rules",
                        format!("{r:?}: expected \"allow CIDR[:PORTS]\" or \"deny ...\""),
                    ))
                }
            };
            acl.rules.push(Rule::parse(action, spec.trim())?);
        }
        for l in &listeners {
            if !l.addr.ip().is_loopback() && !acl.has_allow() {
                return Err(ConfigError::OpenRelay(l.addr));
            }
        }
        let notsent_lowat = bytes("notsent_lowat", &raw.notsent_lowat)?
            .map(|v| u32::try_from(v).map_err(|_| invalid("notsent_lowat", "must fit in 32 bits")))
            .transpose()?;
        let tuning = Tuning {
            cc: raw.cc.clone(),
            pace: raw
                .pace
                .as_deref()
                .map(|s| Rate::parse(s).map_err(|source| ConfigError::Value { field: "pace", source }))
                .transpose()?,
            sndbuf: bytes("sndbuf", &raw.sndbuf)?,
            rcvbuf: bytes("rcvbuf", &raw.rcvbuf)?,
            notsent_lowat,
        };
        let max_conns = raw.max_conns.unwrap_or(DEFAULT_MAX_CONNS);
        if max_conns == 0 {
            return Err(invalid("max_conns", "must be at least 1"));
        }
        // Handshakes get a quarter of the slots (at most 256) so that idle
        // ones can never hold all of them; a source a quarter of that, but at
        // least 8 (or the whole budget if smaller) for clients that open a
        // few connections at once.
        let max_handshakes = raw.max_handshakes.unwrap_or((max_conns / 4).clamp(1, 256));
        if max_handshakes == 0 || max_handshakes > max_conns {
            return Err(invalid(
                "max_handshakes",
                format!("must be between 1 and max_conns ({max_conns}); keep it well below so handshakes cannot fill every slot"),
            ));
        }
        let per_source_handshakes =
            raw.per_source_handshakes.unwrap_or((max_handshakes / 4).max(max_handshakes.min(8)));
        if per_source_handshakes == 0 {
            return Err(invalid("per_source_handshakes", "must be at least 1"));
        }
        let backlog = raw.backlog.unwrap_or(u32::MAX);
        if backlog == 0 {
            return Err(invalid("backlog", "must be at least 1"));
        }
        let handshake_timeout = dur("handshake_timeout", &raw.handshake_timeout, Duration::from_secs(5))?;
        let first_byte_timeout = dur("first_byte_timeout", &raw.first_byte_timeout, Duration::from_secs(2))?
            .min(handshake_timeout);
        let pipe_size = bytes("pipe_size", &raw.pipe_size)?.unwrap_or(256 * 1024);
        let buffer_size = bytes("buffer_size", &raw.buffer_size)?.unwrap_or(256 * 1024);
        if !(4096..=64 << 20).contains(&pipe_size) || !(4096..=64 << 20).contains(&buffer_size) {
            return Err(invalid("pipe_size/buffer_size", "must be between 4KiB and 64MiB"));
        }
        Ok(Config {
            listeners,
            next,
            users,
            acl,
            tuning,
            idle_timeout: dur("idle_timeout", &raw.idle_timeout, Duration::from_secs(300))?,
            handshake_timeout,
            first_byte_timeout,
            connect_timeout: dur("connect_timeout", &raw.connect_timeout, Duration::from_secs(10))?,
            max_conns,
            max_handshakes,
            per_source_handshakes,
            handshake_stall: Duration::from_secs(1),
            backlog,
            splice: !raw.copy.unwrap_or(false),
            pipe_size: pipe_size as usize,
            buffer_size: buffer_size as usize,
            json_logs: raw.json_logs.unwrap_or(false),
            pool_size: 2,
            pool_idle: Duration::from_secs(3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_listen_on_loopback() {
        let c = Config::from_raw(&RawConfig::default()).unwrap();
        assert_eq!(c.listeners, vec![Listener { addr: DEFAULT_LISTEN.parse().unwrap(), mode: Mode::Socks }]);
        assert!(c.splice);
        assert!(c.users.is_empty());
    }

    #[test]
    fn handshake_budget_defaults_scale_with_max_conns() {
        let c = Config::from_raw(&RawConfig::default()).unwrap();
        assert_eq!((c.max_conns, c.max_handshakes, c.per_source_handshakes), (1024, 256, 64));
        assert_eq!(c.backlog, u32::MAX, "the kernel caps it at somaxconn");
        assert_eq!(
            (c.first_byte_timeout, c.handshake_timeout),
            (Duration::from_secs(2), Duration::from_secs(5))
        );
        let c = Config::from_raw(&RawConfig { max_conns: Some(16), ..Default::default() }).unwrap();
        assert_eq!((c.max_handshakes, c.per_source_handshakes), (4, 4));
        let c = Config::from_raw(&RawConfig { max_conns: Some(100), ..Default::default() }).unwrap();
        assert_eq!((c.max_handshakes, c.per_source_handshakes), (25, 8));
        let c = Config::from_raw(&RawConfig { max_conns: Some(1), ..Default::default() }).unwrap();
        assert_eq!((c.max_handshakes, c.per_source_handshakes), (1, 1));
        // The first-byte limit never outlasts the whole handshake.
        let raw = RawConfig { handshake_timeout: Some("300ms".into()), ..Default::default() };
        assert_eq!(Config::from_raw(&raw).unwrap().first_byte_timeout, Duration::from_millis(300));
    }

    #[test]
    fn open_relay_is_refused_without_allow_rules() {
        let raw = RawConfig { listen: Some("0.0.0.0:1080".into()), ..Default::default() };
        assert!(matches!(Config::from_raw(&raw), Err(ConfigError::OpenRelay(_))));
        let raw = RawConfig { rules: vec!["allow 10.0.0.0/8".into()], ..raw };
        assert!(Config::from_raw(&raw).is_ok());
    }

    #[test]
    fn toml_equivalent_to_flags() {
        let text = r#"
            listen = "127.0.0.1:2080"
            next = ["socks5://alice:pw@127.0.0.1:2081", "socks5://[::1]:2082", "relay.example:1080"]
            forward = ["127.0.0.1:9000=localhost:80"]
            auth = ["bob:secret"]
            rules = ["deny 127.0.0.1:25", "allow 127.0.0.0/8"]
            cc = "bbr"
            pace = "500mbit"
            sndbuf = "4MB"
            notsent_lowat = "128KB"
            idle_timeout = "2m"
            max_conns = 50
            copy = true
        "#;
        let raw: RawConfig = toml::from_str(text).unwrap();
        let c = Config::from_raw(&raw).unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.next[0].auth, Some(("alice".into(), "pw".into())));
        assert_eq!(c.next[1].addr, Target::Ip("[::1]:2082".parse().unwrap()));
        assert_eq!(c.next[2].addr, Target::Domain("relay.example".into(), 1080));
        assert_eq!(c.users, vec![("bob".to_string(), "secret".to_string())]);
        assert_eq!(c.acl.rules.len(), 2);
        assert_eq!(c.tuning.pace, Some(Rate(500_000_000)));
        assert_eq!(c.idle_timeout, Duration::from_secs(120));
        assert!(!c.splice);
        assert!(toml::from_str::<RawConfig>("lisen = \"x\"").is_err());
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/relay/relay.toml");
        let raw = RawConfig::from_toml_file(path).unwrap();
        let c = Config::from_raw(&raw).unwrap();
        assert!(!c.listeners[0].addr.ip().is_loopback());
        assert!(c.acl.has_allow());
        assert_eq!(c.next.len(), 1);
    }

    #[test]
    fn overlay_replaces_given_fields() {
        let a =
            RawConfig { listen: Some("127.0.0.1:1".into()), next: vec!["a:1".into()], ..Default::default() };
        let b = RawConfig { listen: Some("127.0.0.1:2".into()), ..Default::default() };
        let c = a.overlay(b);
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:2"));
        assert_eq!(c.next, vec!["a:1".to_string()]);
    }

    #[test]
    fn bad_values_are_errors() {
        for raw in [
            RawConfig { next: vec!["http://x:1".into()], ..Default::default() },
            RawConfig { forward: vec!["127.0.0.1:1".into()], ..Default::default() },
            RawConfig { pace: Some("fast".into()), ..Default::default() },
            RawConfig { rules: vec!["permit any".into()], ..Default::default() },
            RawConfig { auth: vec!["nopass".into()], ..Default::default() },
            RawConfig { max_conns: Some(0), ..Default::default() },
            RawConfig { max_conns: Some(8), max_handshakes: Some(9), ..Default::default() },
            RawConfig { max_handshakes: Some(0), ..Default::default() },
            RawConfig { per_source_handshakes: Some(0), ..Default::default() },
            RawConfig { backlog: Some(0), ..Default::default() },
            RawConfig { first_byte_timeout: Some("soon".into()), ..Default::default() },
        ] {
            assert!(Config::from_raw(&raw).is_err(), "{raw:?}");
        }
    }
}
