//! The lanes daemon's configuration: TOML in, a validated [`Config`] out, in
//! one step ("parse, don't validate").
//!
//! What it is: the file format, its defaults ([Lanes]'s α = β = γ = δ = t0 = 1,
//! t_deadline = 300 ms) and every check that needs only the file: lanes that
//! overlap (an address in both SL and LL, a peer address used twice, two
//! peers sharing an SL address), families that do not match, parameters out
//! of range. What it is not: checks against the running system (do the
//! addresses exist in the namespace? is the userspace path manager on?) live
//! in [`crate::env`].
//!
//! ```toml
//! [policy]
//! kind = "link-cost"          # or "deadline", or "size"
//! t_deadline = "300ms"        # alpha, beta, gamma, delta, t0 default to 1
//! nu_unit = "1ms"             # the unit of ν in eq. 5.7 (core::lanes explains)
//! size_threshold = "1MB"      # optional with link-cost/deadline, required by "size"
//! manage_server_side = false  # true: also connections this host accepted
//!
//! [signals]
//! source = "auto"             # "bpf" (per-ACK, in the kernel), "diag" (sock_diag polling)
//! backups = "prepare"         # BPF: LL backups at the program's prepare signal, or "established"
//!
//! [[peer]]
//! name = "server"
//! sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
//! ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]
//! ```
//!
//! A lane is a local address: every local address named under `sl` is one
//! Short-flow Lane, every one named under `ll` one Long-flow Lane. A *lane
//! pair* is one local address and the peer address it talks to; the daemon
//! opens exactly one subflow per LL lane pair of the peer a connection goes
//! to, never a full mesh.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use tcpaccel_core::lanes::{BaseRtt, LaneId, Policy, SwitchConfig};
use tcpaccel_core::units::parse_duration;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {msg}")]
    Syntax { path: String, msg: String },
    #[error("{field}: {msg}")]
    Invalid { field: String, msg: String },
    #[error("overlapping lanes: {0}")]
    Overlap(String),
}

fn invalid(field: impl Into<String>, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), msg: msg.into() }
}

/// Which LL subflows a switch makes active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchTo {
    /// Every LL subflow of the connection (the lane choice decides *when*).
    All,
    /// Only the LL lane the policy found cheapest.
    Cheapest,
}

/// Active probe settings (link-cost policy only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeConfig {
    /// Peer TCP port a handshake probe connects to. A closed port answers
    /// with a RST, which times the round trip just as well.
    pub port: u16,
    /// Least time between two probes of one lane pair.
    pub interval: Duration,
    /// A probe not answered within this is dropped (no sample).
    pub timeout: Duration,
    /// How often sock_diag is read (RTT of each subflow, transfer activity).
    pub sample_interval: Duration,
    /// Probes are off when false: LL is then measured only by traffic on it.
    pub enabled: bool,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            port: 9,
            interval: Duration::from_millis(50),
            timeout: Duration::from_millis(500),
            sample_interval: Duration::from_millis(20),
            enabled: true,
        }
    }
}

/// Where the daemon's per-connection signals come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignalSource {
    /// The BPF program when the kernel and the policy allow it, else
    /// sock_diag readings, with a warning that says why.
    Auto,
    /// The BPF program (`crate::bpf`): per-ACK costs in the kernel, an
    /// event only when a connection's decision changes. Refused when the
    /// policy needs what the program cannot compute or the kernel lacks BPF.
    Bpf,
    /// sock_diag readings every `probe.sample_interval`.
    Diag,
}

impl SignalSource {
    pub fn name(self) -> &'static str {
        match self {
            SignalSource::Auto => "auto",
            SignalSource::Bpf => "bpf",
            SignalSource::Diag => "diag",
        }
    }
}

/// `[signals]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalsConfig {
    pub source: SignalSource,
    /// The cgroup (relative to the cgroup2 mount) the BPF program is
    /// attached to; "/" (the default) is every process of the host, of
    /// which the program keeps the daemon's network namespace only.
    pub cgroup: std::path::PathBuf,
    /// With BPF signals, when a connection's backup LL subflows are opened
    /// (`signals.backups`).
    pub backups: BackupsAt,
}

/// `signals.backups`: when a connection gets its backup LL subflows on the
/// BPF path. The sock_diag path always opens them at ESTABLISHED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupsAt {
    /// At the program's prepare signal (half the size threshold or of
    /// t_deadline), or with the decision if it comes first (then opened
    /// active, not as backups): no subflow handshake for the many
    /// connections that end before (the default).
    Prepare,
    /// At ESTABLISHED, for every connection: LL subflows are up long before
    /// any switch, at the cost of one handshake per connection.
    Established,
}

impl Default for SignalsConfig {
    fn default() -> Self {
        SignalsConfig { source: SignalSource::Auto, cgroup: "/".into(), backups: BackupsAt::Prepare }
    }
}

/// One local address and the peer address it pairs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanePair {
    pub lane: LaneId,
    pub local: IpAddr,
    pub remote: IpAddr,
}

/// A peer host: its SL pairs (connections start there) and LL pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    pub sl: Vec<LanePair>,
    pub ll: Vec<LanePair>,
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub switch: SwitchConfig,
    pub switch_to: SwitchTo,
    pub probe: ProbeConfig,
    pub peers: Vec<Peer>,
    /// Local address of each SL lane, by lane index.
    pub sl_lanes: Vec<IpAddr>,
    /// Local address of each LL lane, by lane index.
    pub ll_lanes: Vec<IpAddr>,
    /// Also manage connections this host accepted (`[policy]
    /// manage_server_side`). Off by default: when both ends run the
    /// daemon, each would open its own LL subflows.
    pub server_side: bool,
    /// `[signals]`: BPF or sock_diag.
    pub signals: SignalsConfig,
}

impl Config {
    /// The peer and SL pair a connection from `local` to `remote` starts on.
    pub fn sl_pair(&self, local: IpAddr, remote: IpAddr) -> Option<(usize, &LanePair)> {
        self.peers
            .iter()
            .enumerate()
            .find_map(|(i, p)| p.sl.iter().find(|s| s.local == local && s.remote == remote).map(|s| (i, s)))
    }
    /// The path-manager address id of an LL lane's local address: ids must
    /// be non-zero (0 is the initial subflow) and the same for an address
    /// every time, so lane index + 1.
    pub fn address_id(&self, lane: LaneId) -> u8 {
        // Validation keeps the LL lane count below 255.
        (lane.index as u8).saturating_add(1)
    }
    /// Every local address the daemon uses.
    pub fn local_addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.sl_lanes.iter().chain(self.ll_lanes.iter()).copied()
    }
    /// Reads and validates a file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        Config::parse(&text, &path.display().to_string())
    }
    /// Parses and validates TOML text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| ConfigError::Syntax { path: origin.into(), msg: e.to_string() })?;
        raw.validate()
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    kind: Option<String>,
    alpha: Option<f64>,
    beta: Option<f64>,
    gamma: Option<f64>,
    delta: Option<f64>,
    t0: Option<f64>,
    t_deadline: Option<String>,
    base_rtt: Option<String>,
    switch_to: Option<String>,
    nu_unit: Option<String>,
    size_threshold: Option<String>,
    manage_server_side: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    port: Option<u16>,
    interval: Option<String>,
    timeout: Option<String>,
    sample_interval: Option<String>,
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPair {
    local: String,
    remote: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    name: Option<String>,
    #[serde(default)]
    sl: Vec<RawPair>,
    #[serde(default)]
    ll: Vec<RawPair>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSignals {
    source: Option<String>,
    cgroup: Option<String>,
    backups: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    policy: RawPolicy,
    #[serde(default)]
    signals: RawSignals,
    #[serde(default)]
    probe: RawProbe,
    #[serde(default)]
    peer: Vec<RawPeer>,
}

fn duration(field: &str, v: &Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) => parse_duration(s).map_err(|e| invalid(field, e.to_string())),
    }
}

fn param(field: &str, v: Option<f64>, default: f64, allow_zero: bool) -> Result<f64, ConfigError> {
    let x = v.unwrap_or(default);
    if !x.is_finite() || x < 0.0 || (!allow_zero && x == 0.0) {
        let need = if allow_zero { "a finite number >= 0" } else { "a finite number > 0" };
        return Err(invalid(field, format!("{x} is not {need}")));
    }
    Ok(x)
}

fn ip(field: &str, s: &str) -> Result<IpAddr, ConfigError> {
    s.trim().parse::<IpAddr>().map_err(|_| invalid(field, format!("{s:?} is not an IP address")))
}

impl RawConfig {
    fn validate(self) -> Result<Config, ConfigError> {
        let p = &self.policy;
        let defaults = SwitchConfig::default();
        let policy = match p.kind.as_deref().map(str::trim) {
            None | Some("link-cost") => Policy::LinkCost,
            Some("deadline") => Policy::Deadline,
            Some("size") => Policy::Size,
            Some(other) => {
                return Err(invalid(
                    "policy.kind",
                    format!("{other:?}: expected \"deadline\", \"link-cost\" or \"size\""),
                ))
            }
        };
        let size_threshold = match p.size_threshold.as_deref() {
            None if policy == Policy::Size => {
                return Err(invalid(
                    "policy.size_threshold",
                    "kind = \"size\" needs a threshold, e.g. \"1MB\"",
                ))
            }
            None => None,
            Some(s) => {
                let b = tcpaccel_core::units::Bytes::parse(s)
                    .map_err(|e| invalid("policy.size_threshold", e.to_string()))?;
                if b.0 == 0 {
                    return Err(invalid("policy.size_threshold", "must be above zero"));
                }
                Some(b.0)
            }
        };
        let base = match p.base_rtt.as_deref().map(str::trim) {
            None | Some("connection") => BaseRtt::Connection,
            Some("per-lane") => BaseRtt::PerLane,
            Some(other) => {
                return Err(invalid(
                    "policy.base_rtt",
                    format!("{other:?}: expected \"connection\" or \"per-lane\""),
                ))
            }
        };
        let switch_to = match p.switch_to.as_deref().map(str::trim) {
            None | Some("all") => SwitchTo::All,
            Some("cheapest") => SwitchTo::Cheapest,
            Some(other) => {
                return Err(invalid(
                    "policy.switch_to",
                    format!("{other:?}: expected \"all\" or \"cheapest\""),
                ))
            }
        };
        let t_deadline = duration("policy.t_deadline", &p.t_deadline, defaults.t_deadline)?;
        if t_deadline.is_zero() {
            return Err(invalid("policy.t_deadline", "must be above zero"));
        }
        let nu_unit = duration("policy.nu_unit", &p.nu_unit, defaults.nu_unit)?;
        if nu_unit.is_zero() {
            return Err(invalid("policy.nu_unit", "must be above zero"));
        }
        let switch = SwitchConfig {
            policy,
            alpha: param("policy.alpha", p.alpha, defaults.alpha, true)?,
            beta: param("policy.beta", p.beta, defaults.beta, false)?,
            gamma: param("policy.gamma", p.gamma, defaults.gamma, true)?,
            delta: param("policy.delta", p.delta, defaults.delta, false)?,
            t0: param("policy.t0", p.t0, defaults.t0, false)?,
            t_deadline,
            base,
            nu_unit,
            size_threshold,
        };

        let d = ProbeConfig::default();
        let q = &self.probe;
        let probe = ProbeConfig {
            port: q.port.unwrap_or(d.port),
            interval: duration("probe.interval", &q.interval, d.interval)?,
            timeout: duration("probe.timeout", &q.timeout, d.timeout)?,
            sample_interval: duration("probe.sample_interval", &q.sample_interval, d.sample_interval)?,
            enabled: q.enabled.unwrap_or(d.enabled),
        };
        if probe.port == 0 {
            return Err(invalid("probe.port", "must be a port number 1-65535"));
        }
        if probe.sample_interval < Duration::from_millis(1) || probe.sample_interval > Duration::from_secs(10)
        {
            return Err(invalid("probe.sample_interval", "must be between 1ms and 10s"));
        }
        if probe.interval < Duration::from_millis(1) {
            return Err(invalid("probe.interval", "must be at least 1ms"));
        }
        if probe.timeout < Duration::from_millis(1) || probe.timeout > Duration::from_secs(30) {
            return Err(invalid("probe.timeout", "must be between 1ms and 30s"));
        }

        if self.peer.is_empty() {
            return Err(invalid("peer", "no [[peer]] given: name at least one peer with sl and ll pairs"));
        }
        // Lanes are local addresses; index them in order of first mention.
        let mut sl_lanes: Vec<IpAddr> = Vec::new();
        let mut ll_lanes: Vec<IpAddr> = Vec::new();
        let mut peers = Vec::new();
        let mut names = BTreeSet::new();
        for (pi, rp) in self.peer.iter().enumerate() {
            let name = rp.name.clone().unwrap_or_else(|| format!("peer{pi}"));
            if !names.insert(name.clone()) {
                return Err(invalid(format!("peer[{pi}].name"), format!("{name:?} used twice")));
            }
            if rp.sl.is_empty() || rp.ll.is_empty() {
                return Err(invalid(
                    format!("peer {name:?}"),
                    "needs at least one sl pair and one ll pair (connections start on SL and move to LL)",
                ));
            }
            let pairs = |list: &[RawPair], kind: &str, lanes: &mut Vec<IpAddr>| {
                let mut out = Vec::new();
                for (i, rpair) in list.iter().enumerate() {
                    let f = format!("peer {name:?} {kind}[{i}]");
                    let local = ip(&format!("{f}.local"), &rpair.local)?;
                    let remote = ip(&format!("{f}.remote"), &rpair.remote)?;
                    if local.is_ipv4() != remote.is_ipv4() {
                        return Err(invalid(f, format!("{local} and {remote} are of different families")));
                    }
                    if local.is_unspecified() || remote.is_unspecified() || remote.is_multicast() {
                        return Err(invalid(f, "addresses must be unicast and specified"));
                    }
                    let index = match lanes.iter().position(|a| *a == local) {
                        Some(x) => x,
                        None => {
                            lanes.push(local);
                            lanes.len() - 1
                        }
                    };
                    let lane =
                        if kind == "sl" { LaneId::short(index as u16) } else { LaneId::long(index as u16) };
                    out.push(LanePair { lane, local, remote });
                }
                Ok::<_, ConfigError>(out)
            };
            let sl = pairs(&rp.sl, "sl", &mut sl_lanes)?;
            let ll = pairs(&rp.ll, "ll", &mut ll_lanes)?;
            peers.push(Peer { name, sl, ll });
        }
        if ll_lanes.len() > 254 {
            return Err(invalid("peer", "more than 254 LL local addresses (path-manager ids are 1-255)"));
        }
        check_overlap(&peers, &sl_lanes, &ll_lanes)?;
        let server_side = self.policy.manage_server_side.unwrap_or(false);
        let source = match self.signals.source.as_deref().map(str::trim) {
            None | Some("auto") => SignalSource::Auto,
            Some("bpf") => SignalSource::Bpf,
            Some("diag") => SignalSource::Diag,
            Some(other) => {
                return Err(invalid(
                    "signals.source",
                    format!("{other:?}: expected \"auto\", \"bpf\" or \"diag\""),
                ))
            }
        };
        let cgroup: std::path::PathBuf = self.signals.cgroup.as_deref().unwrap_or("/").trim().into();
        if cgroup.as_os_str().is_empty() || cgroup.components().any(|c| c == std::path::Component::ParentDir)
        {
            return Err(invalid(
                "signals.cgroup",
                format!("{:?}: a path inside the cgroup2 mount, \"/\" for its root", cgroup),
            ));
        }
        let backups = match self.signals.backups.as_deref().map(str::trim) {
            None | Some("prepare") => BackupsAt::Prepare,
            Some("established") => BackupsAt::Established,
            Some(other) => {
                return Err(invalid(
                    "signals.backups",
                    format!("{other:?}: expected \"prepare\" or \"established\""),
                ))
            }
        };
        let cfg = Config {
            switch,
            switch_to,
            probe,
            peers,
            sl_lanes,
            ll_lanes,
            server_side,
            signals: SignalsConfig { source, cgroup, backups },
        };
        // An explicit "bpf" must be runnable by the program: refused here,
        // with the field, rather than at start.
        if source == SignalSource::Bpf {
            crate::bpf::check(&cfg).map_err(|e| invalid("signals.source", format!("\"bpf\": {e}")))?;
        }
        Ok(cfg)
    }
}

fn check_overlap(peers: &[Peer], sl: &[IpAddr], ll: &[IpAddr]) -> Result<(), ConfigError> {
    if let Some(a) = sl.iter().find(|a| ll.contains(a)) {
        return Err(ConfigError::Overlap(format!(
            "local address {a} is in both a Short-flow Lane and a Long-flow Lane; each address belongs to one lane"
        )));
    }
    // A remote address seen from the SL of one peer must identify that peer.
    let mut sl_owner: BTreeMap<IpAddr, &str> = BTreeMap::new();
    for p in peers {
        for s in &p.sl {
            if let Some(other) = sl_owner.insert(s.remote, &p.name) {
                if other != p.name {
                    return Err(ConfigError::Overlap(format!(
                        "SL remote address {} belongs to both peer {other:?} and peer {:?}",
                        s.remote, p.name
                    )));
                }
            }
        }
    }
    for p in peers {
        let mut seen = BTreeSet::new();
        for pair in p.sl.iter().chain(p.ll.iter()) {
            if !seen.insert((pair.local, pair.remote)) {
                return Err(ConfigError::Overlap(format!(
                    "peer {:?}: lane pair {} -> {} is listed twice",
                    p.name, pair.local, pair.remote
                )));
            }
        }
        let sl_remotes: BTreeSet<_> = p.sl.iter().map(|s| s.remote).collect();
        if let Some(l) = p.ll.iter().find(|l| sl_remotes.contains(&l.remote)) {
            return Err(ConfigError::Overlap(format!(
                "peer {:?}: remote address {} is used by both SL and LL; the lanes must not share a path",
                p.name, l.remote
            )));
        }
        // One subflow per lane pair, never a full mesh: an LL local address
        // pairs with one remote of this peer.
        let mut by_local: BTreeMap<IpAddr, IpAddr> = BTreeMap::new();
        for l in &p.ll {
            if let Some(r) = by_local.insert(l.local, l.remote) {
                return Err(ConfigError::Overlap(format!(
                    "peer {:?}: LL local address {} pairs with both {r} and {}; one pair per lane (no full mesh)",
                    p.name, l.local, l.remote
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        [policy]
        kind = "deadline"
        t_deadline = "200ms"
        gamma = 2.0

        [probe]
        port = 5201
        interval = "100ms"

        [[peer]]
        name = "b"
        sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
        ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }, { local = "10.3.0.1", remote = "10.3.0.2" }]

        [[peer]]
        name = "c"
        sl = [{ local = "10.1.0.1", remote = "10.1.0.3" }]
        ll = [{ local = "10.2.0.1", remote = "10.2.0.3" }]
    "#;

    #[test]
    fn parses_lanes_and_defaults() {
        let c = Config::parse(GOOD, "test").unwrap();
        assert_eq!(c.switch.policy, Policy::Deadline);
        assert_eq!(c.switch.t_deadline, Duration::from_millis(200));
        assert_eq!(c.switch.gamma, 2.0);
        assert_eq!((c.switch.alpha, c.switch.beta, c.switch.delta, c.switch.t0), (1.0, 1.0, 1.0, 1.0));
        assert_eq!(c.probe.port, 5201);
        assert_eq!(c.probe.sample_interval, Duration::from_millis(20));
        assert_eq!(c.sl_lanes.len(), 1);
        assert_eq!(c.ll_lanes, vec!["10.2.0.1".parse::<IpAddr>().unwrap(), "10.3.0.1".parse().unwrap()]);
        // The shared LL address is one lane for both peers.
        assert_eq!(c.peers[1].ll[0].lane, LaneId::long(0));
        assert_eq!(c.peers[0].ll[1].lane, LaneId::long(1));
        assert_eq!(c.address_id(LaneId::long(1)), 2);
        let (pi, pair) = c.sl_pair("10.1.0.1".parse().unwrap(), "10.1.0.3".parse().unwrap()).unwrap();
        assert_eq!((pi, pair.lane), (1, LaneId::short(0)));
        assert!(c.sl_pair("10.2.0.1".parse().unwrap(), "10.1.0.3".parse().unwrap()).is_none());
        // Thesis defaults when nothing is given.
        let minimal = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        let c = Config::parse(minimal, "m").unwrap();
        assert_eq!(c.switch, SwitchConfig::default());
        assert_eq!(c.switch_to, SwitchTo::All);
    }

    #[test]
    fn the_shipped_example_is_valid() {
        let c = Config::parse(include_str!("../../../examples/lanes/lanes.toml"), "example").unwrap();
        assert_eq!(c.switch, SwitchConfig::default());
        assert_eq!((c.sl_lanes.len(), c.ll_lanes.len()), (1, 2));
    }

    fn refused(text: &str) -> String {
        match Config::parse(text, "t") {
            Ok(c) => panic!("accepted: {c:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn overlapping_lanes_are_refused() {
        let both = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.1.0.1", remote = "10.2.0.2" }]"#;
        assert!(refused(both).contains("both a Short-flow Lane and a Long-flow Lane"));
        let same_remote = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.1.0.2" }]"#;
        assert!(refused(same_remote).contains("used by both SL and LL"));
        let mesh = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }, { local = "10.2.0.1", remote = "10.3.0.2" }]"#;
        assert!(refused(mesh).contains("no full mesh"));
        let twice = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }, { local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        assert!(refused(twice).contains("listed twice"));
        let shared_peer = r#"
            [[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]
            [[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.3" }]"#;
        assert!(refused(shared_peer).contains("belongs to both peer"));
    }

    #[test]
    fn bad_values_are_refused_with_the_field() {
        assert!(refused("").contains("no [[peer]]"));
        let pair = r#"
            [[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        let with = |extra: &str| format!("{extra}\n{pair}");
        assert!(refused(&with("[policy]\nkind = \"fast\"")).contains("policy.kind"));
        assert!(refused(&with("[policy]\nbeta = 0.0")).contains("policy.beta"));
        assert!(refused(&with("[policy]\nalpha = -1.0")).contains("policy.alpha"));
        assert!(refused(&with("[policy]\nt_deadline = \"300\"")).contains("policy.t_deadline"));
        assert!(refused(&with("[policy]\nt_deadline = \"0ms\"")).contains("policy.t_deadline"));
        assert!(refused(&with("[policy]\nnu_unit = \"0us\"")).contains("policy.nu_unit"));
        assert!(refused(&with("[policy]\nnu_unit = \"ten\"")).contains("policy.nu_unit"));
        assert!(refused(&with("[probe]\nport = 0")).contains("probe.port"));
        assert!(refused(&with("[probe]\nsample_interval = \"0ms\"")).contains("probe.sample_interval"));
        assert!(refused(&with("[policy]\nbogus = 1")).contains("bogus"));
        assert!(refused(&with("[signals]\nsource = \"ebpf\"")).contains("signals.source"));
        assert!(refused(&with("[signals]\ncgroup = \"../x\"")).contains("signals.cgroup"));
        assert!(refused(&with("[signals]\nbackups = \"later\"")).contains("signals.backups"));
        // An explicit "bpf" must be computable by the program: named fields.
        for (policy, field) in [
            ("beta = 3.0", "policy.beta"),
            ("alpha = 0.1", "policy.alpha"),
            ("nu_unit = \"1500ns\"", "policy.nu_unit"),
        ] {
            let e = refused(&with(&format!("[policy]\n{policy}\n[signals]\nsource = \"bpf\"")));
            assert!(e.contains("signals.source") && e.contains(field), "{policy}: {e}");
        }
        assert!(
            Config::parse(&with("[policy]\nbeta = 3.0\n[signals]\nsource = \"auto\""), "t").is_ok(),
            "auto falls back at start"
        );
        assert!(refused(&with("[policy]\nkind = \"size\"")).contains("policy.size_threshold"));
        assert!(refused(&with("[policy]\nsize_threshold = \"0B\"")).contains("policy.size_threshold"));
        assert!(refused(&with("[policy]\nsize_threshold = \"lots\"")).contains("policy.size_threshold"));
        let size = Config::parse(&with("[policy]\nkind = \"size\"\nsize_threshold = \"1MB\""), "t").unwrap();
        assert_eq!((size.switch.policy, size.switch.size_threshold), (Policy::Size, Some(1_000_000)));
        let both = Config::parse(&with("[policy]\nsize_threshold = \"64KiB\""), "t").unwrap();
        assert_eq!((both.switch.policy, both.switch.size_threshold), (Policy::LinkCost, Some(65_536)));
        let only_sl = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "10.1.0.2" }]"#;
        assert!(refused(only_sl).contains("at least one sl pair and one ll pair"));
        let bad_ip = r#"[[peer]]
            sl = [{ local = "10.1.0.300", remote = "10.1.0.2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        assert!(refused(bad_ip).contains("sl[0].local"));
        let mixed = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "fd00::2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        assert!(refused(mixed).contains("different families"));
        assert!(refused("[[peer]\n").contains("t:"));
    }
}
