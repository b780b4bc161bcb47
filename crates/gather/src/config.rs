//! The gather server's validated configuration: classes (`NAME=TARGET[,priority]`),
//! the buffer pool and the stream bounds, checked once at the edge so that a
//! configuration that cannot work is refused with the numbers that do not fit.
//!
//! It does not open sockets; [`crate::server`] takes a [`ServerConfig`].

use std::time::Duration;
use tcpaccel_core::admit::Grouping;
use tcpaccel_core::units::{ParseError, Rate};

/// The smallest window the server gives one data stream. Below roughly two
/// full-size segments the sender stalls on silly-window avoidance, and the
/// kernel raises any `TCP_WINDOW_CLAMP` below about 1.1 KB anyway.
pub const MIN_STREAM_WINDOW: u64 = 4096;
/// The segment size (MSS) on Linux loopback (MTU 65536, less IP, TCP and
/// timestamp headers): two of them per stream is the floor there.
pub const LOOPBACK_SEGMENT: u64 = 65_483;
/// Default chunk size of data frames.
pub const DEFAULT_CHUNK: u32 = 64 * 1024;
/// Upper bound of the derived total stream budget.
const MAX_DERIVED_STREAMS: u64 = 65_536;
/// Default of [`ServerConfig::control_memory`].
pub const DEFAULT_CONTROL_MEMORY: u64 = 16 << 20;
/// Default of [`ServerConfig::stall_timeout`].
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of [`ServerConfig::no_data_timeout`].
pub const DEFAULT_NO_DATA_TIMEOUT: Duration = Duration::from_secs(30);
/// Default of [`ServerConfig::max_waiting`].
pub const DEFAULT_MAX_WAITING: u32 = 64;
/// Default of [`ServerConfig::max_waiting_per_source`].
pub const DEFAULT_MAX_WAITING_PER_SOURCE: u32 = 8;
/// Default of [`ServerConfig::max_handshakes`].
pub const DEFAULT_MAX_HANDSHAKES: u32 = 1024;
/// Default of [`ServerConfig::max_handshakes_per_source`].
pub const DEFAULT_MAX_HANDSHAKES_PER_SOURCE: u32 = 64;
/// Default of [`ServerConfig::handshake_grace`]: one round trip of a long path.
pub const DEFAULT_HANDSHAKE_GRACE: Duration = Duration::from_millis(200);
/// How long a source may exceed its handshake share (a burst of clients
/// behind one NAT), not a setting: a preface and hello take one round trip.
pub const HANDSHAKE_BURST: Duration = Duration::from_secs(1);
/// Default source grouping ([`Grouping::SUBNET`]): IPv4 /24, IPv6 /64 (a
/// host or site usually owns that much, so more addresses from it do not buy
/// more of the server).
pub const DEFAULT_SOURCE_PREFIX_V4: u8 = 24;
pub const DEFAULT_SOURCE_PREFIX_V6: u8 = 64;

/// A priority class: clients of it aim at `target`; a larger `priority` is
/// more important ([GatherQoS] §3.1 orders leftovers by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    pub name: String,
    pub target: Rate,
    pub priority: u32,
}

/// A configuration that cannot be used, with the numbers that do not fit.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("class {0:?}: expected NAME=TARGET[,PRIORITY], e.g. high=1mbit,2")]
    ClassSyntax(String),
    #[error("class {name:?}: target")]
    Target {
        name: String,
        #[source]
        source: ParseError,
    },
    #[error("class {name:?}: priority {value:?} is not a whole number 0..=4294967295")]
    Priority { name: String, value: String },
    #[error("class {0:?} is defined twice")]
    DuplicateClass(String),
    #[error("no class defined (give at least one --class NAME=TARGET[,PRIORITY])")]
    NoClass,
    #[error("--buffer-pool {pool} B is smaller than the minimum allocation of one stream ({min} B)")]
    PoolBelowOneStream { pool: u64, min: u64 },
    #[error(
        "--buffer-pool {pool} B cannot give each of --max-streams {streams} streams its minimum window of {min} B (needs {need} B; lower --max-streams to {fits} or raise the pool)"
    )]
    PoolBelowStreams { pool: u64, streams: u32, min: u64, need: u64, fits: u64 },
    #[error("--max-streams-per-client must be at least 1 (got {0})")]
    PerClient(u32),
    #[error("chunk size {got} B is outside 1 KiB..={max} B")]
    Chunk { got: u64, max: u32 },
    #[error("unknown class {name:?}; defined: {known}")]
    UnknownClass { name: String, known: String },
}

/// Parses `NAME=TARGET[,PRIORITY]`; the priority defaults to 1.
pub fn parse_class(s: &str) -> Result<Class, ConfigError> {
    let (name, rest) = s.split_once('=').ok_or_else(|| ConfigError::ClassSyntax(s.to_string()))?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(ConfigError::ClassSyntax(s.to_string()));
    }
    let (target, prio) = match rest.split_once(',') {
        Some((t, p)) => (t, Some(p.trim())),
        None => (rest, None),
    };
    let target =
        Rate::parse(target).map_err(|source| ConfigError::Target { name: name.to_string(), source })?;
    let priority = match prio {
        None => 1,
        Some(p) => p
            .parse::<u32>()
            .map_err(|_| ConfigError::Priority { name: name.to_string(), value: p.to_string() })?,
    };
    Ok(Class { name: name.to_string(), target, priority })
}

/// Everything the server needs, validated by [`ServerConfig::new`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub classes: Vec<Class>,
    /// Receive-buffer bytes shared by all data streams ([GatherQoS]'s server buffer).
    pub pool: u64,
    pub chunk_size: u32,
    /// Measurement, tuning and status interval.
    pub interval: Duration,
    pub max_streams_per_client: u32,
    /// Total data streams over all clients.
    pub max_streams: u32,
    /// Ask clients to checksum every chunk.
    pub checksum: bool,
    /// Tune stream counts ([GatherQoS] §3.2); off keeps every client at one stream.
    pub tune_streams: bool,
    /// How the pool is divided.
    pub policy: Policy,
    /// Who holds a demand on the pool: each client, or each of its data streams.
    pub sharing: Sharing,
    /// Bytes of incomplete control messages all connections together may
    /// hold; a message that would exceed it closes its connection with a
    /// `capacity` error (docs/gather-protocol.md §6).
    pub control_memory: u64,
    /// A transfer from which no chunk byte arrives for this long fails with
    /// `stalled` and gives its share back.
    pub stall_timeout: Duration,
    /// A session that has sent no data yet ("waiting") fails with `stalled`
    /// after this long.
    pub no_data_timeout: Duration,
    /// Sessions waiting for their first data at once; a hello beyond it
    /// evicts the oldest waiting one. Waiting sessions hold no stream budget.
    pub max_waiting: u32,
    /// Waiting sessions from one source (see `sources`); a hello beyond it is refused (`capacity`).
    pub max_waiting_per_source: u32,
    /// Of [`Self::control_memory`], the most one source may hold; a message
    /// beyond it displaces the source's own oldest (None: a sixteenth of
    /// `control_memory`, at least one client message).
    pub control_memory_per_source: Option<u64>,
    /// Connections between accept and their hello or attach record; a
    /// newcomer beyond it displaces the least advanced connection of the
    /// source holding the most (`tcpaccel_core::admit`).
    pub max_handshakes: u32,
    /// Of those, from one source once they are [`HANDSHAKE_BURST`] old.
    pub max_handshakes_per_source: u32,
    /// For this long after accept a connection counts as having sent its
    /// first message (it may be in flight) when a newcomer displaces one.
    pub handshake_grace: Duration,
    /// How source addresses are grouped for every per-source limit.
    pub sources: Grouping,
}

/// How the server divides its buffer pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// [GatherQoS] §3.1: by target and priority, from measured RTTs.
    Seed003,
    /// Evenly per client (the paper's "equality" baseline).
    Equal,
}

/// Who holds a demand on the pool (see [`crate::share`] for the two readings
/// of [GatherQoS] §3.1's "per connection" and their trade-off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sharing {
    /// One demand per client (`W = T_t · RTT`), split evenly over its streams:
    /// opening streams never enlarges a client's window.
    #[default]
    PerClient,
    /// One demand per data stream, each with its client's target, priority
    /// and RTT: a client with N streams holds about N·W of the pool.
    PerConnection,
}

impl Sharing {
    /// Parses the CLI / lab spelling: `client` or `connection`.
    pub fn parse(s: &str) -> Option<Sharing> {
        match s {
            "client" => Some(Sharing::PerClient),
            "connection" => Some(Sharing::PerConnection),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::PerClient => "client",
            Sharing::PerConnection => "connection",
        }
    }
}

impl ServerConfig {
    /// Validates the pool against the stream budget. `max_streams` absent
    /// derives the budget from the pool (each stream's minimum window).
    pub fn new(
        classes: Vec<Class>,
        pool: u64,
        max_streams: Option<u32>,
        max_streams_per_client: u32,
        interval: Duration,
    ) -> Result<ServerConfig, ConfigError> {
        if classes.is_empty() {
            return Err(ConfigError::NoClass);
        }
        for (i, c) in classes.iter().enumerate() {
            if classes[..i].iter().any(|d| d.name == c.name) {
                return Err(ConfigError::DuplicateClass(c.name.clone()));
            }
        }
        if pool < MIN_STREAM_WINDOW {
            return Err(ConfigError::PoolBelowOneStream { pool, min: MIN_STREAM_WINDOW });
        }
        if max_streams_per_client == 0 {
            return Err(ConfigError::PerClient(0));
        }
        let fits = pool / MIN_STREAM_WINDOW;
        let max_streams = match max_streams {
            Some(n) => {
                let need = u64::from(n) * MIN_STREAM_WINDOW;
                if need > pool || n == 0 {
                    return Err(ConfigError::PoolBelowStreams {
                        pool,
                        streams: n,
                        min: MIN_STREAM_WINDOW,
                        need,
                        fits,
                    });
                }
                n
            }
            None => fits.min(MAX_DERIVED_STREAMS) as u32,
        };
        Ok(ServerConfig {
            classes,
            pool,
            chunk_size: DEFAULT_CHUNK,
            interval,
            max_streams_per_client,
            max_streams,
            checksum: false,
            tune_streams: true,
            policy: Policy::Seed003,
            sharing: Sharing::PerClient,
            control_memory: DEFAULT_CONTROL_MEMORY,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            no_data_timeout: DEFAULT_NO_DATA_TIMEOUT,
            max_waiting: DEFAULT_MAX_WAITING,
            max_waiting_per_source: DEFAULT_MAX_WAITING_PER_SOURCE,
            control_memory_per_source: None,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_source: DEFAULT_MAX_HANDSHAKES_PER_SOURCE,
            handshake_grace: DEFAULT_HANDSHAKE_GRACE,
            sources: Grouping::SUBNET,
        })
    }

    /// Sets the chunk size (1 KiB ..= [`crate::proto::MAX_CHUNK`]).
    pub fn with_chunk_size(mut self, bytes: u64) -> Result<ServerConfig, ConfigError> {
        if !(1024..=u64::from(crate::proto::MAX_CHUNK)).contains(&bytes) {
            return Err(ConfigError::Chunk { got: bytes, max: crate::proto::MAX_CHUNK });
        }
        self.chunk_size = bytes as u32;
        Ok(self)
    }

    /// The most incomplete-message bytes one source may hold.
    pub fn control_memory_per_source(&self) -> u64 {
        self.control_memory_per_source
            .unwrap_or((self.control_memory / 16).max(u64::from(crate::proto::MAX_CLIENT_MSG_LEN)))
            .min(self.control_memory)
    }

    pub fn class(&self, name: &str) -> Result<&Class, ConfigError> {
        self.classes.iter().find(|c| c.name == name).ok_or_else(|| ConfigError::UnknownClass {
            name: name.to_string(),
            known: self.classes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes() -> Vec<Class> {
        vec![parse_class("high=1mbit,2").unwrap(), parse_class("low=500kbit").unwrap()]
    }

    #[test]
    fn class_syntax() {
        let c = parse_class("high=1mbit,2").unwrap();
        assert_eq!(c, Class { name: "high".into(), target: Rate::mbps(1), priority: 2 });
        assert_eq!(parse_class("low=0.5Mbit").unwrap().priority, 1);
        assert!(matches!(parse_class("high"), Err(ConfigError::ClassSyntax(_))));
        assert!(matches!(parse_class("=1mbit"), Err(ConfigError::ClassSyntax(_))));
        let e = parse_class("high=fast").unwrap_err();
        assert!(matches!(e, ConfigError::Target { .. }));
        assert!(std::error::Error::source(&e).is_some());
        assert!(matches!(parse_class("high=1mbit,-1"), Err(ConfigError::Priority { .. })));
    }

    #[test]
    fn pool_checks_name_the_numbers() {
        let i = Duration::from_secs(1);
        let e = ServerConfig::new(classes(), 1000, None, 8, i).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--buffer-pool 1000 B is smaller than the minimum allocation of one stream (4096 B)"
        );
        let e = ServerConfig::new(classes(), 60_000, Some(100), 8, i).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("60000 B") && m.contains("409600 B") && m.contains("to 14"), "{m}");
        let c = ServerConfig::new(classes(), 60_000, None, 8, i).unwrap();
        assert_eq!(c.max_streams, 14);
        assert!(matches!(ServerConfig::new(vec![], 60_000, None, 8, i), Err(ConfigError::NoClass)));
        let dup = vec![classes()[0].clone(), classes()[0].clone()];
        assert!(matches!(ServerConfig::new(dup, 60_000, None, 8, i), Err(ConfigError::DuplicateClass(_))));
        let e = c.class("medium").unwrap_err().to_string();
        assert_eq!(e, "unknown class \"medium\"; defined: high, low");
        assert_eq!(c.sharing, Sharing::PerClient);
        // A sixteenth of the memory, at least one client message, at most all.
        assert_eq!(c.control_memory_per_source(), 1 << 20);
        let small = ServerConfig { control_memory: 100_000, ..c.clone() };
        assert_eq!(small.control_memory_per_source(), 65_536);
        let tiny = ServerConfig { control_memory: 8192, ..c.clone() };
        assert_eq!(tiny.control_memory_per_source(), 8192);
        assert_eq!(c.sources.key("10.1.2.3".parse().unwrap()).to_string(), "10.1.2.0/24");
    }

    #[test]
    fn sharing_spellings() {
        for s in [Sharing::PerClient, Sharing::PerConnection] {
            assert_eq!(Sharing::parse(s.as_str()), Some(s));
        }
        assert_eq!(Sharing::parse("stream"), None);
    }
}
