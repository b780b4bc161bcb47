//! The lanes daemon's configuration: TOML in, a validated [`Config`] out.
//! The file deserializes straight into typed values ([`ConfigFile`]: every
//! duration, size, address and name already of its type, unknown keys
//! refused); [`ConfigFile::build`] checks what needs the whole file and
//! indexes the lanes. Code builds a `ConfigFile` the same way (the lab does)
//! and never writes TOML to parse it back.
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

use serde::{Deserialize, Serialize};
use tcpaccel_core::lanes::bpf::{BpfParams, Unsupported, MAX_SLOTS};
use tcpaccel_core::lanes::{BaseRtt, LaneId, LaneKind, Policy, SwitchConfig};
use tcpaccel_core::units::{serde_duration, Bytes};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SwitchTo {
    /// Every LL subflow of the connection (the lane choice decides *when*).
    All,
    /// Only the LL lane the policy found cheapest.
    Cheapest,
}

/// Active probe settings (link-cost policy only): `[probe]`, missing keys
/// at their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeConfig {
    /// Peer TCP port a handshake probe connects to. A closed port answers
    /// with a RST, which times the round trip just as well.
    pub port: u16,
    /// Least time between two probes of one lane pair.
    #[serde(with = "serde_duration")]
    pub interval: Duration,
    /// A probe not answered within this is dropped (no sample).
    #[serde(with = "serde_duration")]
    pub timeout: Duration,
    /// How often sock_diag is read (RTT of each subflow, transfer activity).
    #[serde(with = "serde_duration")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// `[signals]`, missing keys at their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
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
    /// How to run (the flags' keys); the daemon's caller applies them.
    pub run: RunSettings,
    pub switch: SwitchConfig,
    pub switch_to: SwitchTo,
    pub probe: ProbeConfig,
    pub peers: Vec<Peer>,
    /// Local address of each SL lane, by lane index.
    pub sl_lanes: Vec<IpAddr>,
    /// Local address of each LL lane, by lane index.
    pub ll_lanes: Vec<IpAddr>,
    /// What records, metrics and the summary call each lane (see
    /// [`LaneNames`]).
    pub names: LaneNames,
    /// Also manage connections this host accepted (`[policy]
    /// manage_server_side`), created or open at the start (adopted). The
    /// daemon then opens no subflow for them (a client has no listener for
    /// joins): it switches among the LL subflows the peer opened. Off by
    /// default: with the daemon on both ends, both would decide for one
    /// connection (each switch is an MP_PRIO the other end honours).
    pub server_side: bool,
    /// `[signals]`: BPF or sock_diag.
    pub signals: SignalsConfig,
}

/// The lanes' names, by kind and index. The file names addresses only, so
/// a lane is called after the interface its local address is on where the
/// daemon runs ([`Config::name_lanes`]: `sl`, `ll1`, `ll2` in
/// `examples/topologies/lanes.toml`, `eth1` on a real host); until then, and
/// for an address whose interface holds another lane too, after its index
/// (`sl0`, `ll0`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaneNames {
    pub sl: Vec<String>,
    pub ll: Vec<String>,
}

impl LaneNames {
    /// `sl0..`, `ll0..`: the names before the interfaces are known.
    fn by_index(sl: usize, ll: usize) -> LaneNames {
        LaneNames {
            sl: (0..sl).map(|i| format!("sl{i}")).collect(),
            ll: (0..ll).map(|i| format!("ll{i}")).collect(),
        }
    }
}

/// Why the BPF signal path cannot run a configuration: its pure limits, no
/// kernel needed. Here rather than in [`crate::bpf`] so that reading the file
/// can refuse an explicit `source = "bpf"` without the file's module
/// depending on the loader (which depends on [`Config`]).
#[derive(Debug, thiserror::Error)]
pub enum BpfLimit {
    /// The switching parameters need what the program cannot compute.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    #[error(
        "{0} lanes configured; the BPF signal path handles at most {MAX_SLOTS} (use signals = \"diag\")"
    )]
    TooManyLanes(usize),
}

impl Config {
    /// The BPF program's parameters for this configuration, or why the BPF
    /// signal path cannot run it (too many lanes, parameters out of its range).
    pub fn bpf_params(&self) -> Result<BpfParams, BpfLimit> {
        let params = BpfParams::new(&self.switch)?;
        let lanes = self.sl_lanes.len() + self.ll_lanes.len();
        if lanes > MAX_SLOTS {
            return Err(BpfLimit::TooManyLanes(lanes));
        }
        Ok(params)
    }

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
    /// The name of `lane` (see [`LaneNames`]).
    pub fn lane_name(&self, lane: LaneId) -> &str {
        let (names, kind) = match lane.kind {
            LaneKind::Short => (&self.names.sl, "sl"),
            LaneKind::Long => (&self.names.ll, "ll"),
        };
        match names.get(usize::from(lane.index)) {
            Some(n) => n,
            // Only a LaneId from another configuration gets here.
            None => kind,
        }
    }
    /// The lane whose local address is `ip`, if any.
    pub fn lane_of(&self, ip: IpAddr) -> Option<LaneId> {
        if let Some(i) = self.sl_lanes.iter().position(|a| *a == ip) {
            return Some(LaneId::short(i as u16));
        }
        self.ll_lanes.iter().position(|a| *a == ip).map(|i| LaneId::long(i as u16))
    }
    /// Names every lane after the interface its local address is on
    /// (`interface_of`, a lookup in the daemon's namespace), when that
    /// interface holds no other lane's address; the others keep their
    /// index names. Pure: the lookup is passed in.
    pub fn name_lanes(&mut self, interface_of: impl Fn(IpAddr) -> Option<String>) {
        let found: Vec<Option<String>> = self.local_addresses().map(&interface_of).collect();
        let unique = |name: &String| found.iter().flatten().filter(|n| *n == name).count() == 1;
        let mut names = LaneNames::by_index(self.sl_lanes.len(), self.ll_lanes.len());
        for (slot, f) in names.sl.iter_mut().chain(names.ll.iter_mut()).zip(&found) {
            if let Some(n) = f.as_ref().filter(|n| unique(n)) {
                *slot = n.clone();
            }
        }
        self.names = names;
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
        let file: ConfigFile = toml::from_str(text)
            .map_err(|e| ConfigError::Syntax { path: origin.into(), msg: e.to_string() })?;
        file.build()
    }
}

/// `[policy]` as typed values: eq. 5.7's parameters and the policy.
/// Missing keys take the thesis's defaults (`SwitchConfig::default()`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyFile {
    pub kind: Policy,
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
    pub delta: f64,
    pub t0: f64,
    #[serde(with = "serde_duration")]
    pub t_deadline: Duration,
    pub base_rtt: BaseRtt,
    pub switch_to: SwitchTo,
    #[serde(with = "serde_duration")]
    pub nu_unit: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_threshold: Option<Bytes>,
    pub manage_server_side: bool,
}

impl Default for PolicyFile {
    fn default() -> Self {
        let d = SwitchConfig::default();
        PolicyFile {
            kind: d.policy,
            alpha: d.alpha,
            beta: d.beta,
            gamma: d.gamma,
            delta: d.delta,
            t0: d.t0,
            t_deadline: d.t_deadline,
            base_rtt: d.base,
            switch_to: SwitchTo::All,
            nu_unit: d.nu_unit,
            size_threshold: d.size_threshold.map(Bytes),
            manage_server_side: false,
        }
    }
}

/// One `{ local, remote }` lane pair of a `[[peer]]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairFile {
    pub local: IpAddr,
    pub remote: IpAddr,
}

/// One `[[peer]]`: its SL pairs (connections start there) and LL pairs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub sl: Vec<PairFile>,
    #[serde(default)]
    pub ll: Vec<PairFile>,
}

/// The configuration file as typed values: what the TOML deserializes into
/// (every value already of its type: durations, sizes, addresses, the
/// policy's names) and what code fills in to build a [`Config`] without
/// text (the lab does). [`ConfigFile::build`] makes the checks that need the
/// whole file (ranges, lanes that overlap) and indexes the lanes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// How to run: the keys of `tcpaccel lanes`'s flags, of the same names
    /// (a flag given wins over the file). Read at start, not on reload.
    #[serde(flatten)]
    pub run: RunSettings,
    #[serde(default)]
    pub policy: PolicyFile,
    #[serde(default)]
    pub signals: SignalsConfig,
    #[serde(default)]
    pub probe: ProbeConfig,
    #[serde(default)]
    pub peer: Vec<PeerFile>,
}

/// The daemon's run settings that a file can hold as well as a flag: one
/// set of names for both (`netns`, `json`, `duration`, `metrics`; the CLI's
/// test walks its flags against these keys).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// Run inside this network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// JSON Lines output instead of text.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub json: bool,
    /// Stop after this long.
    #[serde(default, with = "serde_duration::option", skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// Serve the metrics here (`PORT` alone is 127.0.0.1:PORT).
    #[serde(default, with = "listen", skip_serializing_if = "Option::is_none")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// `metrics`: the address grammar of `tcpaccel_metrics::parse_listen`.
mod listen {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::net::SocketAddr;

    pub(super) fn serialize<S: Serializer>(a: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match a {
            Some(a) => s.serialize_str(&a.to_string()),
            None => s.serialize_none(),
        }
    }
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(d)?;
        tcpaccel_metrics::parse_listen(&text).map(Some).map_err(serde::de::Error::custom)
    }
}

impl ConfigFile {
    /// Adds a peer with one SL pair and the given LL pairs.
    pub fn peer(
        &mut self,
        name: impl Into<String>,
        sl: (IpAddr, IpAddr),
        ll: impl IntoIterator<Item = (IpAddr, IpAddr)>,
    ) -> &mut Self {
        let pair = |(local, remote)| PairFile { local, remote };
        self.peer.push(PeerFile {
            name: Some(name.into()),
            sl: vec![pair(sl)],
            ll: ll.into_iter().map(pair).collect(),
        });
        self
    }

    /// The checks that need the whole file, and the lanes indexed: a
    /// [`Config`] or the first problem, named by its file key.
    pub fn build(self) -> Result<Config, ConfigError> {
        let p = &self.policy;
        let size_threshold = match p.size_threshold {
            None if p.kind == Policy::Size => {
                return Err(invalid(
                    "policy.size_threshold",
                    "kind = \"size\" needs a threshold, e.g. \"1MB\"",
                ))
            }
            Some(Bytes(0)) => return Err(invalid("policy.size_threshold", "must be above zero")),
            other => other.map(|b| b.0),
        };
        for (field, d) in [("policy.t_deadline", p.t_deadline), ("policy.nu_unit", p.nu_unit)] {
            if d.is_zero() {
                return Err(invalid(field, "must be above zero"));
            }
        }
        let switch = SwitchConfig {
            policy: p.kind,
            alpha: param("policy.alpha", p.alpha, true)?,
            beta: param("policy.beta", p.beta, false)?,
            gamma: param("policy.gamma", p.gamma, true)?,
            delta: param("policy.delta", p.delta, false)?,
            t0: param("policy.t0", p.t0, false)?,
            t_deadline: p.t_deadline,
            base: p.base_rtt,
            nu_unit: p.nu_unit,
            size_threshold,
        };

        let probe = self.probe;
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
            let pairs = |list: &[PairFile], kind: &str, lanes: &mut Vec<IpAddr>| {
                let mut out = Vec::new();
                for (i, &PairFile { local, remote }) in list.iter().enumerate() {
                    let f = format!("peer {name:?} {kind}[{i}]");
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
        let cgroup = &self.signals.cgroup;
        if cgroup.as_os_str().is_empty() || cgroup.components().any(|c| c == std::path::Component::ParentDir)
        {
            return Err(invalid(
                "signals.cgroup",
                format!("{:?}: a path inside the cgroup2 mount, \"/\" for its root", cgroup),
            ));
        }
        let names = LaneNames::by_index(sl_lanes.len(), ll_lanes.len());
        let cfg = Config {
            run: self.run,
            switch,
            switch_to: p.switch_to,
            probe,
            peers,
            names,
            sl_lanes,
            ll_lanes,
            server_side: p.manage_server_side,
            signals: self.signals,
        };
        // An explicit "bpf" must be runnable by the program: refused here,
        // with the field, rather than at start.
        if cfg.signals.source == SignalSource::Bpf {
            cfg.bpf_params().map_err(|e| invalid("signals.source", format!("\"bpf\": {e}")))?;
        }
        Ok(cfg)
    }
}

fn param(field: &str, x: f64, allow_zero: bool) -> Result<f64, ConfigError> {
    if !x.is_finite() || x < 0.0 || (!allow_zero && x == 0.0) {
        let need = if allow_zero { "a finite number >= 0" } else { "a finite number > 0" };
        return Err(invalid(field, format!("{x} is not {need}")));
    }
    Ok(x)
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

    /// Issue 51: a lane is called after its interface (`ll1`, `ll2` of
    /// examples/topologies/lanes.toml, not `ll0`, `ll1`), unless that
    /// interface holds another lane too or is unknown: then by index.
    #[test]
    fn lanes_are_named_after_their_interfaces_where_that_is_unambiguous() {
        let mut c = Config::parse(include_str!("../../../examples/lanes/lanes.toml"), "example").unwrap();
        assert_eq!((c.lane_name(LaneId::short(0)), c.lane_name(LaneId::long(1))), ("sl0", "ll1"));
        let topology = |a: IpAddr| match a.to_string().as_str() {
            "10.10.0.1" => Some("sl".to_string()),
            "10.20.0.1" => Some("ll1".into()),
            "10.30.0.1" => Some("ll2".into()),
            _ => None,
        };
        c.name_lanes(topology);
        let names: Vec<&str> = [LaneId::short(0), LaneId::long(0), LaneId::long(1)]
            .into_iter()
            .map(|l| c.lane_name(l))
            .collect();
        assert_eq!(names, ["sl", "ll1", "ll2"]);
        assert_eq!(c.lane_of("10.30.0.1".parse().unwrap()), Some(LaneId::long(1)));
        // Two lanes on one interface, one on none: index names for those.
        c.name_lanes(|a| (a.to_string() != "10.10.0.1").then(|| "eth1".to_string()));
        assert_eq!(
            (c.names.sl.as_slice(), c.names.ll.as_slice()),
            (&["sl0".to_string()][..], &["ll0".to_string(), "ll1".to_string()][..])
        );
    }

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
    fn a_built_config_equals_the_parsed_file() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut f = ConfigFile::default();
        f.policy.kind = Policy::Deadline;
        f.policy.t_deadline = Duration::from_millis(200);
        f.policy.gamma = 2.0;
        f.probe.port = 5201;
        f.probe.interval = Duration::from_millis(100);
        f.peer(
            "b",
            (ip("10.1.0.1"), ip("10.1.0.2")),
            [(ip("10.2.0.1"), ip("10.2.0.2")), (ip("10.3.0.1"), ip("10.3.0.2"))],
        );
        f.peer("c", (ip("10.1.0.1"), ip("10.1.0.3")), [(ip("10.2.0.1"), ip("10.2.0.3"))]);
        assert_eq!(f.clone().build().unwrap(), Config::parse(GOOD, "test").unwrap());
        // The file form of the typed values reads back to the same values.
        let text = toml::to_string(&f).unwrap();
        assert_eq!(toml::from_str::<ConfigFile>(&text).unwrap(), f, "{text}");
        // Checks that need the whole file still apply to built values.
        f.policy.beta = 0.0;
        assert!(f.build().unwrap_err().to_string().contains("policy.beta"));
    }

    #[test]
    fn run_settings_are_keys_of_the_file_too() {
        let c = Config::parse(
            &format!("netns = \"c1\"\njson = true\nduration = \"30s\"\nmetrics = \"9100\"\n{GOOD}"),
            "t",
        )
        .unwrap();
        assert_eq!(c.run.netns.as_deref(), Some("c1"));
        assert!(c.run.json);
        assert_eq!(c.run.duration, Some(Duration::from_secs(30)));
        assert_eq!(c.run.metrics, Some("127.0.0.1:9100".parse().unwrap()));
        assert_eq!(Config::parse(GOOD, "t").unwrap().run, RunSettings::default());
        assert!(refused(&format!("duration = \"30\"\n{GOOD}")).contains("missing unit"));
        assert!(refused(&format!("netnz = \"c1\"\n{GOOD}")).contains("netnz"));
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
        // Values of the wrong type or grammar: the parser's error shows the
        // key's line and what it accepts.
        let e = refused(&with("[policy]\nkind = \"fast\""));
        assert!(e.contains("kind = \"fast\"") && e.contains("`deadline`, `link-cost`, `size`"), "{e}");
        assert!(refused(&with("[policy]\nbeta = 0.0")).contains("policy.beta"));
        assert!(refused(&with("[policy]\nalpha = -1.0")).contains("policy.alpha"));
        let e = refused(&with("[policy]\nt_deadline = \"300\""));
        assert!(e.contains("t_deadline = \"300\"") && e.contains("missing unit"), "{e}");
        assert!(refused(&with("[policy]\nt_deadline = \"0ms\"")).contains("policy.t_deadline"));
        assert!(refused(&with("[policy]\nnu_unit = \"0us\"")).contains("policy.nu_unit"));
        assert!(refused(&with("[policy]\nnu_unit = \"ten\"")).contains("nu_unit = \"ten\""));
        assert!(refused(&with("[probe]\nport = 0")).contains("probe.port"));
        assert!(refused(&with("[probe]\nsample_interval = \"0ms\"")).contains("probe.sample_interval"));
        assert!(refused(&with("[policy]\nbogus = 1")).contains("bogus"));
        assert!(refused(&with("[signals]\nsource = \"ebpf\"")).contains("`auto`, `bpf`, `diag`"));
        assert!(refused(&with("[signals]\ncgroup = \"../x\"")).contains("signals.cgroup"));
        assert!(refused(&with("[signals]\nbackups = \"later\"")).contains("`prepare` or `established`"));
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
        assert!(refused(&with("[policy]\nsize_threshold = \"lots\"")).contains("size_threshold = \"lots\""));
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
        assert!(refused(bad_ip).contains("local = \"10.1.0.300\"") && refused(bad_ip).contains("IP address"));
        let mixed = r#"[[peer]]
            sl = [{ local = "10.1.0.1", remote = "fd00::2" }]
            ll = [{ local = "10.2.0.1", remote = "10.2.0.2" }]"#;
        assert!(refused(mixed).contains("different families"));
        assert!(refused("[[peer]\n").contains("t:"));
    }

    /// More lanes than the program's slots: an explicit "bpf" is refused when
    /// the file is read, naming the field and the limit; "diag" has no limit.
    #[test]
    fn bpf_refuses_more_lanes_than_slots() {
        let ll: Vec<String> = (0..MAX_SLOTS)
            .map(|i| format!("{{ local = \"10.2.{i}.1\", remote = \"10.2.{i}.2\" }}"))
            .collect();
        let file = |source: &str| {
            format!(
                "[signals]\nsource = \"{source}\"\n[[peer]]\nsl = [{{ local = \"10.1.0.1\", remote = \"10.1.0.2\" }}]\nll = [{}]",
                ll.join(", ")
            )
        };
        let e = refused(&file("bpf"));
        assert!(
            e.contains("signals.source") && e.contains("9 lanes configured") && e.contains("at most 8"),
            "{e}"
        );
        let c = Config::parse(&file("diag"), "t").unwrap();
        assert!(matches!(c.bpf_params(), Err(BpfLimit::TooManyLanes(9))));
    }
}
