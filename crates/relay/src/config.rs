//! Relay configuration: [`Settings`], typed values as a user gives them in
//! the TOML file or on the command line (one set of names: each file key is
//! a long flag with `_` for `-`), merged with [`Settings::overlay`] and
//! turned into a validated [`Config`] in one step.
//!
//! Values are parsed only with `tcpaccel_core::units` and the parsers here,
//! the same for the file and the flags. This module does no I/O except
//! reading the configuration file and an auth file named by it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use tcpaccel_core::units::{self, Bytes, Rate};

use crate::acl::{Acl, Action, Rule};
use crate::socks::Target;

/// Everything that can go wrong turning settings into a [`Config`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
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

/// Settings as a user gives them, typed. The TOML file's keys are these
/// fields' names; the command line's long flags are the same names with
/// `-` for `_` (`tcpaccel relay`'s test walks both and fails on a
/// mismatch). Absent is `None` or empty; [`Config::from_settings`] puts
/// the defaults in.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// SOCKS5 listen address (default 127.0.0.1:1080 when no `forward` is given).
    pub listen: Option<SocketAddr>,
    /// Further SOCKS5 hops, `socks5://[user:pass@]HOST:PORT`, first is nearest.
    pub next: Vec<Hop>,
    /// Fixed forwards `LISTEN=TARGET` (no SOCKS).
    pub forward: Vec<Forward>,
    /// Accepted `user:pass` pairs (RFC 1929); none means no authentication.
    pub auth: Vec<Credentials>,
    /// File of `user:pass` lines (`#` comments).
    pub auth_file: Option<PathBuf>,
    /// Destinations clients may reach, `CIDR[:PORTS]`.
    #[serde(deserialize_with = "allow_rules")]
    pub allow: Vec<Rule>,
    /// Destinations refused, `CIDR[:PORTS]`. From a file, deny rules are
    /// checked before allow rules.
    #[serde(deserialize_with = "deny_rules")]
    pub deny: Vec<Rule>,
    /// The command line's `--allow`/`--deny` in the order given (first
    /// match wins); when set, it is the rule list instead of `deny` then
    /// `allow`. A file cannot interleave keys, so it has no such field.
    #[serde(skip)]
    pub rules_in_order: Option<Vec<Rule>>,
    pub cc: Option<String>,
    /// `none` or `static:RATE` (on the wire), the grammar of every `--pace`:
    /// `Some(None)` is an explicit `none` (a flag's `--pace none` overrides
    /// a file's `static:…`), `None` not given.
    #[serde(deserialize_with = "fixed_pace")]
    pub pace: Option<Option<Rate>>,
    #[serde(deserialize_with = "units::text::bytes")]
    pub sndbuf: Option<Bytes>,
    #[serde(deserialize_with = "units::text::bytes")]
    pub rcvbuf: Option<Bytes>,
    #[serde(deserialize_with = "units::text::bytes")]
    pub notsent_lowat: Option<Bytes>,
    #[serde(deserialize_with = "units::text::duration")]
    pub idle_timeout: Option<Duration>,
    #[serde(deserialize_with = "units::text::duration")]
    pub handshake_timeout: Option<Duration>,
    /// Limit for a new SOCKS client's first byte (shorter than the handshake's).
    #[serde(deserialize_with = "units::text::duration")]
    pub first_byte_timeout: Option<Duration>,
    #[serde(deserialize_with = "units::text::duration")]
    pub connect_timeout: Option<Duration>,
    pub max_conns: Option<usize>,
    /// Connections in the SOCKS handshake at once (part of `max_conns`).
    pub max_handshakes: Option<usize>,
    /// Connections in the SOCKS handshake at once from one source (IPv4
    /// address or IPv6 /64).
    pub per_source_handshakes: Option<usize>,
    /// For this long after accept a silent handshake counts as having sent
    /// its greeting (one round trip: it may be in flight).
    #[serde(deserialize_with = "units::text::duration")]
    pub handshake_grace: Option<Duration>,
    /// listen(2) backlog; the kernel caps it at net.core.somaxconn.
    pub backlog: Option<u32>,
    /// Use the user-space copy instead of splice(2).
    pub copy: Option<bool>,
    /// Pipe capacity per direction for splice.
    #[serde(deserialize_with = "units::text::bytes")]
    pub pipe_size: Option<Bytes>,
    /// Buffer per direction for the copy path.
    #[serde(deserialize_with = "units::text::bytes")]
    pub buffer_size: Option<Bytes>,
    /// Per-connection records as JSON lines on stderr instead of log lines.
    pub json_logs: Option<bool>,
    /// Warm connections kept to the first next hop (0: none).
    pub pool_size: Option<usize>,
    /// A warm connection unused this long is closed (and replaced while
    /// clients keep coming).
    #[serde(deserialize_with = "units::text::duration")]
    pub pool_idle: Option<Duration>,
    /// Answer success before the chain is up (see `Config::early_reply`).
    pub early_reply: Option<bool>,
    /// Metrics endpoint: `PORT` (loopback) or `IP:PORT`.
    #[serde(deserialize_with = "metrics_addr")]
    pub metrics: Option<SocketAddr>,
    /// Log filter (as `--log`, which wins when given; also RUST_LOG).
    pub log: Option<String>,
}

fn rules<'de, D: serde::Deserializer<'de>>(d: D, action: Action) -> Result<Vec<Rule>, D::Error> {
    let texts = <Vec<String> as serde::Deserialize>::deserialize(d)?;
    texts.iter().map(|t| Rule::parse(action, t).map_err(serde::de::Error::custom)).collect()
}

fn allow_rules<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Rule>, D::Error> {
    rules(d, Action::Allow)
}

fn deny_rules<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Rule>, D::Error> {
    rules(d, Action::Deny)
}

/// `pace`: [`PaceSpec::parse_fixed`](tcpaccel_core::pace_spec::PaceSpec::parse_fixed).
fn fixed_pace<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<Rate>>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    tcpaccel_core::pace_spec::PaceSpec::parse_fixed(&text).map(Some).map_err(serde::de::Error::custom)
}

fn metrics_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum PortOrText {
        Port(u16),
        Text(String),
    }
    match <PortOrText as serde::Deserialize>::deserialize(d)? {
        PortOrText::Port(p) => Ok(Some(SocketAddr::from(([127, 0, 0, 1], p)))),
        PortOrText::Text(t) => tcpaccel_metrics::parse_listen(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

impl Settings {
    /// Reads a TOML file.
    pub fn from_toml_file(path: &std::path::Path) -> Result<Settings, ConfigError> {
        let file = |msg: String| ConfigError::File { path: path.display().to_string(), msg };
        let text = std::fs::read_to_string(path).map_err(|e| file(e.to_string()))?;
        toml::from_str(&text).map_err(|e| file(e.to_string()))
    }

    /// `self` with every setting given in `over` replacing it (lists
    /// replace whole; the access rules, allow and deny together, are one
    /// setting).
    pub fn overlay(mut self, over: Settings) -> Settings {
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
            handshake_grace,
            backlog,
            copy,
            pipe_size,
            buffer_size,
            json_logs,
            pool_size,
            pool_idle,
            early_reply,
            metrics,
            log
        );
        list!(next, forward, auth);
        if over.rules_in_order.is_some() || !over.allow.is_empty() || !over.deny.is_empty() {
            self.allow = over.allow;
            self.deny = over.deny;
            self.rules_in_order = over.rules_in_order;
        }
        self
    }

    /// The access rules in the order they are checked.
    pub fn rules(&self) -> Vec<Rule> {
        match &self.rules_in_order {
            Some(r) => r.clone(),
            None => self.deny.iter().chain(&self.allow).cloned().collect(),
        }
    }
}

/// The keys the configuration file accepts, as serde sees [`Settings`]
/// (read from its derived `Deserialize`, so it cannot drift from it).
pub fn file_keys() -> &'static [&'static str] {
    use serde::de::{Deserializer, Visitor};
    #[derive(Debug)]
    struct Fields(&'static [&'static str]);
    impl std::fmt::Display for Fields {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{:?}", self.0)
        }
    }
    impl std::error::Error for Fields {}
    impl serde::de::Error for Fields {
        fn custom<T: std::fmt::Display>(_: T) -> Fields {
            Fields(&[])
        }
    }
    /// A deserializer that answers nothing and reports the struct's fields.
    struct Probe;
    impl<'de> Deserializer<'de> for Probe {
        type Error = Fields;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
            Err(Fields(&[]))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Fields> {
            Err(Fields(fields))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    match <Settings as serde::Deserialize>::deserialize(Probe) {
        Err(Fields(f)) => f,
        Ok(_) => &[],
    }
}

/// A fixed forward: connections to `listen` are relayed to `target`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Forward {
    pub listen: SocketAddr,
    pub target: Target,
}

impl std::str::FromStr for Forward {
    type Err = ConfigError;
    /// Parses `LISTEN=TARGET`, e.g. `127.0.0.1:9000=localhost:80`.
    fn from_str(f: &str) -> Result<Forward, ConfigError> {
        let (l, t) =
            f.split_once('=').ok_or_else(|| invalid("forward", format!("{f:?}: expected LISTEN=TARGET")))?;
        let listen: SocketAddr =
            l.parse().map_err(|_| invalid("forward", format!("{l:?}: listen address must be IP:PORT")))?;
        let target = parse_target(t).map_err(|m| invalid("forward", format!("{t:?}: {m}")))?;
        Ok(Forward { listen, target })
    }
}

impl TryFrom<String> for Forward {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Forward, ConfigError> {
        s.parse()
    }
}

/// An accepted RFC 1929 user and password.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Credentials {
    pub user: String,
    pub pass: String,
}

/// Never prints the password.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:***", self.user)
    }
}

impl Credentials {
    fn parse(field: &'static str, s: &str) -> Result<Credentials, ConfigError> {
        let (u, p) = s.split_once(':').ok_or_else(|| invalid(field, "expected user:pass"))?;
        if u.is_empty() || u.len() > 255 || p.len() > 255 {
            return Err(invalid(field, "user must be 1-255 bytes and password at most 255 bytes"));
        }
        Ok(Credentials { user: u.to_string(), pass: p.to_string() })
    }
}

impl std::str::FromStr for Credentials {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Credentials, ConfigError> {
        Credentials::parse("auth", s)
    }
}

impl TryFrom<String> for Credentials {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Credentials, ConfigError> {
        s.parse()
    }
}

/// A SOCKS5 hop this relay goes through.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
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

impl std::str::FromStr for Hop {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Hop, ConfigError> {
        Hop::parse(s)
    }
}

impl TryFrom<String> for Hop {
    type Error = ConfigError;
    fn try_from(s: String) -> Result<Hop, ConfigError> {
        Hop::parse(&s)
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

/// For messages: `SOCKS5`, or `forward to TARGET`.
impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Socks => f.write_str("SOCKS5"),
            Mode::Forward(t) => write!(f, "forward to {t}"),
        }
    }
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
    /// it displaces the least advanced handshake of the heaviest source
    /// (see `tcpaccel_core::admit`).
    pub max_handshakes: usize,
    /// At most this many handshakes from one source (IPv4 address, IPv6 /64)
    /// once they are `handshake_stall` old; younger ones are a burst.
    pub per_source_handshakes: usize,
    /// Age after which a handshake counts as stalled (not a setting of its
    /// own: 1 s covers a SOCKS negotiation with authentication, three round
    /// trips, on paths up to ~300 ms RTT).
    pub handshake_stall: Duration,
    /// For this long after accept a silent handshake counts as greeted when
    /// a newcomer displaces one (one round trip, default 200 ms): a client
    /// whose greeting is in flight outlives a flood that greets and stalls.
    pub handshake_grace: Duration,
    /// Backlog asked of listen(2); `u32::MAX` by default, which the kernel
    /// caps at net.core.somaxconn of the relay's network namespace.
    pub backlog: u32,
    pub splice: bool,
    pub pipe_size: usize,
    pub buffer_size: usize,
    pub json_logs: bool,
    /// Warm connections kept to the first next hop (0: none); see `pool`.
    pub pool_size: usize,
    /// A warm connection idle this long is closed (keep it below the next
    /// hop's handshake timeout, 5 s for ours: a warm connection is a
    /// handshake the hop is waiting on).
    pub pool_idle: Duration,
    /// Opt-in: when every next hop is ours (`tcpaccel+socks5://`) and a
    /// warm connection to the first is at hand, answer the client's CONNECT
    /// with success at once (after its own rules) and send its data behind
    /// the pipelined requests; a chain that then fails can only be told by
    /// a reset (the code it would have answered is logged and counted).
    pub early_reply: bool,
    /// Where the metrics endpoint listens, if anywhere.
    pub metrics: Option<SocketAddr>,
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
            ("handshake_grace", self.handshake_grace != new.handshake_grace),
            ("backlog", self.backlog != new.backlog),
            ("copy", self.splice != new.splice),
            ("pipe_size", self.pipe_size != new.pipe_size),
            ("buffer_size", self.buffer_size != new.buffer_size),
            ("metrics", self.metrics != new.metrics),
        ];
        let changed = fixed.iter().filter(|(_, c)| *c).map(|(n, _)| *n).collect();
        let merged = Config {
            listeners: self.listeners.clone(),
            max_conns: self.max_conns,
            max_handshakes: self.max_handshakes,
            per_source_handshakes: self.per_source_handshakes,
            handshake_stall: self.handshake_stall,
            handshake_grace: self.handshake_grace,
            backlog: self.backlog,
            splice: self.splice,
            pipe_size: self.pipe_size,
            buffer_size: self.buffer_size,
            metrics: self.metrics,
            ..new
        };
        (merged, changed)
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:1080";
pub const DEFAULT_MAX_CONNS: usize = 1024;
pub const DEFAULT_POOL_SIZE: usize = 2;
/// One round trip of a long path: a handshake this young may have its
/// greeting in flight.
pub const DEFAULT_HANDSHAKE_GRACE: Duration = Duration::from_millis(200);
/// Most warm connections: each is a handshake the next hop holds open
/// (twice as many for a moment while they are replaced), and ours let one
/// source hold 64 by default (`per_source_handshakes`) before closing the
/// oldest.
pub const MAX_POOL_SIZE: usize = 32;
/// Below our relays' 5 s handshake timeout, which closes a greeted
/// connection that sends no request.
pub const DEFAULT_POOL_IDLE: Duration = Duration::from_secs(3);

impl Config {
    pub fn from_settings(set: &Settings) -> Result<Config, ConfigError> {
        let mut listeners: Vec<Listener> = set
            .forward
            .iter()
            .map(|f| Listener { addr: f.listen, mode: Mode::Forward(f.target.clone()) })
            .collect();
        if set.listen.is_some() || listeners.is_empty() {
            let addr = set.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 1080)));
            listeners.push(Listener { addr, mode: Mode::Socks });
        }
        let mut users: Vec<(String, String)> =
            set.auth.iter().map(|c| (c.user.clone(), c.pass.clone())).collect();
        if let Some(path) = &set.auth_file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::AuthFile { path: path.display().to_string(), source })?;
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                let c = Credentials::parse("auth_file", line)?;
                users.push((c.user, c.pass));
            }
        }
        let acl = Acl { rules: set.rules() };
        for l in &listeners {
            if !l.addr.ip().is_loopback() && !acl.has_allow() {
                return Err(ConfigError::OpenRelay(l.addr));
            }
        }
        let notsent_lowat = set
            .notsent_lowat
            .map(|v| u32::try_from(v.get()).map_err(|_| invalid("notsent_lowat", "must fit in 32 bits")))
            .transpose()?;
        let tuning = Tuning {
            cc: set.cc.clone(),
            pace: set.pace.flatten(),
            sndbuf: set.sndbuf.map(Bytes::get),
            rcvbuf: set.rcvbuf.map(Bytes::get),
            notsent_lowat,
        };
        let max_conns = set.max_conns.unwrap_or(DEFAULT_MAX_CONNS);
        if max_conns == 0 {
            return Err(invalid("max_conns", "must be at least 1"));
        }
        // Handshakes get a quarter of the slots (at most 256) so that idle
        // ones can never hold all of them; a source a quarter of that, but at
        // least 8 (or the whole budget if smaller) for clients that open a
        // few connections at once.
        let max_handshakes = set.max_handshakes.unwrap_or((max_conns / 4).clamp(1, 256));
        if max_handshakes == 0 || max_handshakes > max_conns {
            return Err(invalid(
                "max_handshakes",
                format!("must be between 1 and max_conns ({max_conns}); keep it well below so handshakes cannot fill every slot"),
            ));
        }
        let per_source_handshakes =
            set.per_source_handshakes.unwrap_or((max_handshakes / 4).max(max_handshakes.min(8)));
        if per_source_handshakes == 0 {
            return Err(invalid("per_source_handshakes", "must be at least 1"));
        }
        let handshake_grace = set.handshake_grace.unwrap_or(DEFAULT_HANDSHAKE_GRACE);
        if handshake_grace > Duration::from_secs(10) {
            return Err(invalid(
                "handshake_grace",
                format!(
                    "{} is above 10s (one round trip of the clients' path, e.g. 200ms)",
                    units::format_duration(handshake_grace)
                ),
            ));
        }
        let backlog = set.backlog.unwrap_or(u32::MAX);
        if backlog == 0 {
            return Err(invalid("backlog", "must be at least 1"));
        }
        let handshake_timeout = set.handshake_timeout.unwrap_or(Duration::from_secs(5));
        let first_byte_timeout =
            set.first_byte_timeout.unwrap_or(Duration::from_secs(2)).min(handshake_timeout);
        let pipe_size = set.pipe_size.map_or(256 * 1024, Bytes::get);
        let buffer_size = set.buffer_size.map_or(256 * 1024, Bytes::get);
        for (field, v) in [("pipe_size", pipe_size), ("buffer_size", buffer_size)] {
            if !(4096..=64 << 20).contains(&v) {
                return Err(invalid(field, format!("{} is outside 4KiB to 64MiB", Bytes(v))));
            }
        }
        let pool_size = set.pool_size.unwrap_or(DEFAULT_POOL_SIZE);
        if pool_size > MAX_POOL_SIZE {
            return Err(invalid(
                "pool_size",
                format!(
                    "{pool_size} is more than {MAX_POOL_SIZE} (each warm connection is a handshake the next hop holds open; 0 disables the pool)"
                ),
            ));
        }
        let pool_idle = set.pool_idle.unwrap_or(DEFAULT_POOL_IDLE);
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&pool_idle) {
            return Err(invalid(
                "pool_idle",
                format!(
                    "{} is outside 100ms to 1h (keep it below the next hop's handshake timeout, 5s for tcpaccel relays; pool_size = 0 disables the pool)",
                    units::format_duration(pool_idle)
                ),
            ));
        }
        let early_reply = set.early_reply.unwrap_or(false);
        Ok(Config {
            listeners,
            next: set.next.clone(),
            users,
            acl,
            tuning,
            idle_timeout: set.idle_timeout.unwrap_or(Duration::from_secs(300)),
            handshake_timeout,
            first_byte_timeout,
            connect_timeout: set.connect_timeout.unwrap_or(Duration::from_secs(10)),
            max_conns,
            max_handshakes,
            per_source_handshakes,
            handshake_stall: Duration::from_secs(1),
            handshake_grace,
            backlog,
            splice: !set.copy.unwrap_or(false),
            pipe_size: pipe_size as usize,
            buffer_size: buffer_size as usize,
            json_logs: set.json_logs.unwrap_or(false),
            pool_size,
            pool_idle,
            early_reply,
            metrics: set.metrics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_toml(text: &str) -> Result<Config, String> {
        let set: Settings = toml::from_str(text).map_err(|e| e.to_string())?;
        Config::from_settings(&set).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_listen_on_loopback() {
        let c = Config::from_settings(&Settings::default()).unwrap();
        assert_eq!(c.listeners, vec![Listener { addr: DEFAULT_LISTEN.parse().unwrap(), mode: Mode::Socks }]);
        assert!(c.splice);
        assert!(c.users.is_empty());
        assert_eq!(c.metrics, None);
    }

    #[test]
    fn handshake_budget_defaults_scale_with_max_conns() {
        let c = Config::from_settings(&Settings::default()).unwrap();
        assert_eq!((c.max_conns, c.max_handshakes, c.per_source_handshakes), (1024, 256, 64));
        assert_eq!(c.backlog, u32::MAX, "the kernel caps it at somaxconn");
        assert_eq!(c.handshake_grace, Duration::from_millis(200));
        let long = Settings { handshake_grace: Some(Duration::from_secs(11)), ..Default::default() };
        let e = Config::from_settings(&long).unwrap_err().to_string();
        assert!(e.starts_with("handshake_grace: 11s is above 10s"), "{e}");
        assert_eq!(
            (c.first_byte_timeout, c.handshake_timeout),
            (Duration::from_secs(2), Duration::from_secs(5))
        );
        let with = |n| Config::from_settings(&Settings { max_conns: Some(n), ..Default::default() }).unwrap();
        assert_eq!((with(16).max_handshakes, with(16).per_source_handshakes), (4, 4));
        assert_eq!((with(100).max_handshakes, with(100).per_source_handshakes), (25, 8));
        assert_eq!((with(1).max_handshakes, with(1).per_source_handshakes), (1, 1));
        // The first-byte limit never outlasts the whole handshake.
        let set = Settings { handshake_timeout: Some(Duration::from_millis(300)), ..Default::default() };
        assert_eq!(Config::from_settings(&set).unwrap().first_byte_timeout, Duration::from_millis(300));
    }

    #[test]
    fn open_relay_is_refused_without_allow_rules() {
        assert!(matches!(from_toml("listen = \"0.0.0.0:1080\""), Err(e) if e.contains("refusing")));
        assert!(from_toml("listen = \"0.0.0.0:1080\"\nallow = [\"10.0.0.0/8\"]").is_ok());
    }

    /// Issue 26 item 8: the file takes the flags' names (`metrics`,
    /// `allow`, `deny`, `log`, `buffer_size`), with the flags' grammar.
    #[test]
    fn the_file_takes_every_setting_under_its_flag_name() {
        let text = r#"
            listen = "127.0.0.1:2080"
            next = ["socks5://alice:pw@127.0.0.1:2081", "socks5://[::1]:2082", "relay.example:1080"]
            forward = ["127.0.0.1:9000=localhost:80"]
            auth = ["bob:secret"]
            auth_file = "/dev/null"
            allow = ["127.0.0.0/8"]
            deny = ["127.0.0.1:25"]
            cc = "bbr"
            pace = "static:500mbit"
            sndbuf = "4MB"
            rcvbuf = 65536
            notsent_lowat = "128KB"
            idle_timeout = "2m"
            handshake_timeout = "4s"
            first_byte_timeout = "1s"
            connect_timeout = "3s"
            max_conns = 50
            max_handshakes = 10
            per_source_handshakes = 5
            handshake_grace = "150ms"
            backlog = 128
            copy = true
            pipe_size = "64KiB"
            buffer_size = "128KiB"
            json_logs = true
            pool_size = 4
            pool_idle = "1500ms"
            early_reply = true
            metrics = "9464"
            log = "info"
        "#;
        let set: Settings = toml::from_str(text).unwrap();
        assert_eq!(set.log.as_deref(), Some("info"));
        let c = Config::from_settings(&set).unwrap();
        assert_eq!(c.listeners.len(), 2);
        assert_eq!(c.next[0].auth, Some(("alice".into(), "pw".into())));
        assert_eq!(c.next[1].addr, Target::Ip("[::1]:2082".parse().unwrap()));
        assert_eq!(c.next[2].addr, Target::Domain("relay.example".into(), 1080));
        assert_eq!(c.users, vec![("bob".to_string(), "secret".to_string())]);
        // Deny first: 127.0.0.1:25 is refused although 127/8 is allowed.
        assert_eq!(c.acl.rules.len(), 2);
        assert!(!c.acl.permits("127.0.0.1".parse().unwrap(), 25));
        assert!(c.acl.permits("127.0.0.1".parse().unwrap(), 80));
        assert_eq!(c.tuning.pace, Some(Rate(500_000_000)));
        assert_eq!(
            (c.tuning.sndbuf, c.tuning.rcvbuf, c.tuning.notsent_lowat),
            (Some(4_000_000), Some(65536), Some(128_000))
        );
        assert_eq!(c.idle_timeout, Duration::from_secs(120));
        assert_eq!((c.max_conns, c.max_handshakes, c.per_source_handshakes, c.backlog), (50, 10, 5, 128));
        assert_eq!(c.handshake_grace, Duration::from_millis(150));
        assert!(!c.splice);
        assert_eq!((c.pipe_size, c.buffer_size), (65536, 131072));
        assert!(c.json_logs);
        assert_eq!((c.pool_size, c.pool_idle, c.early_reply), (4, Duration::from_millis(1500), true));
        assert_eq!(c.metrics, Some("127.0.0.1:9464".parse().unwrap()));
        assert_eq!(from_toml("metrics = 9465").unwrap().metrics, Some("127.0.0.1:9465".parse().unwrap()));
        // Every key above is a file key, and every file key is above.
        let mut written: Vec<&str> =
            text.lines().filter_map(|l| l.split_once(" = ")).map(|(k, _)| k.trim()).collect();
        let mut keys = file_keys().to_vec();
        written.sort_unstable();
        keys.sort_unstable();
        assert_eq!(written, keys);
    }

    #[test]
    fn bad_file_values_name_the_key_and_the_value() {
        for (text, needle) in [
            ("lisen = \"x\"", "lisen"),
            ("rules = [\"allow any\"]", "rules"),
            ("pace = \"fast\"", "\"fast\""),
            ("pace = \"500mbit\"", "static:RATE"),
            ("pace = \"dynamic\"", "only none or static:RATE"),
            ("idle_timeout = \"10\"", "missing unit"),
            ("idle_timeout = 10", "idle_timeout"),
            ("next = [\"http://x:1\"]", "only socks5"),
            ("forward = [\"127.0.0.1:1\"]", "LISTEN=TARGET"),
            ("allow = [\"10.0.0.0/33\"]", "10.0.0.0/33"),
            ("auth = [\"nopass\"]", "user:pass"),
            ("metrics = \"somewhere\"", "somewhere"),
            ("max_conns = 0", "max_conns"),
            ("max_conns = 8\nmax_handshakes = 9", "max_handshakes"),
            ("max_handshakes = 0", "max_handshakes"),
            ("per_source_handshakes = 0", "per_source_handshakes"),
            ("backlog = 0", "backlog"),
            ("buffer_size = 100", "buffer_size"),
            ("first_byte_timeout = \"soon\"", "\"soon\""),
        ] {
            let e = from_toml(text).err().unwrap_or_else(|| panic!("{text} accepted"));
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/relay/relay.toml");
        let set = Settings::from_toml_file(std::path::Path::new(path)).unwrap();
        let c = Config::from_settings(&set).unwrap();
        assert!(!c.listeners[0].addr.ip().is_loopback());
        assert!(c.acl.has_allow());
        assert_eq!(c.next.len(), 1);
    }

    #[test]
    fn overlay_replaces_given_fields_and_the_rules_as_one() {
        let file: Settings = toml::from_str(
            "listen = \"127.0.0.1:1\"\nnext = [\"a:1\"]\nallow = [\"10.0.0.0/8\"]\ndeny = [\"10.1.0.0/16\"]",
        )
        .unwrap();
        let flags = Settings { listen: Some("127.0.0.1:2".parse().unwrap()), ..Default::default() };
        let c = file.clone().overlay(flags);
        assert_eq!(c.listen, Some("127.0.0.1:2".parse().unwrap()));
        assert_eq!(c.next, vec![Hop::parse("a:1").unwrap()]);
        assert_eq!(c.rules().len(), 2);
        // Rules given on the command line replace the file's, in their order.
        let allow = Rule::parse(Action::Allow, "10.1.2.0/24").unwrap();
        let flags = Settings {
            rules_in_order: Some(vec![allow.clone()]),
            allow: vec![allow.clone()],
            ..Default::default()
        };
        assert_eq!(file.overlay(flags).rules(), vec![allow]);
    }

    #[test]
    fn mode_and_credentials_print_for_people() {
        assert_eq!(Mode::Socks.to_string(), "SOCKS5");
        let f: Forward = "127.0.0.1:9000=localhost:80".parse().unwrap();
        assert_eq!(Mode::Forward(f.target).to_string(), "forward to localhost:80");
        let c: Credentials = "bob:secret".parse().unwrap();
        assert!(!format!("{c:?}").contains("secret"));
    }
}
