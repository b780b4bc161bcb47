//! Per-ACK lane signals from the kernel: the shell around
//! `bpf/lanes.bpf.c` (issue 13 item 1).
//!
//! What it is: loads the program, fills its maps from a [`Config`] (the
//! lane pairs, the fixed-point eq. 5.7 parameters of
//! `tcpaccel_core::lanes::bpf`, the daemon's network-namespace cookie),
//! attaches it to a cgroup through a BPF link and reads its ring buffer into
//! typed [`Signal`]s for the tracker. Dropping [`BpfSignals`] detaches the
//! program: nothing is pinned, a stopped daemon leaves no program behind.
//!
//! Per ACK means per received segment: the program asks for
//! `BPF_SOCK_OPS_PARSE_HDR_OPT_CB` on every segment of an undecided
//! connection's subflows (`BPF_SOCK_OPS_RTT_CB` runs only once per round
//! trip), sees the socket one ACK behind, and takes a cost sample only
//! after an ACK of new data; see the program's header comment.
//!
//! Which cgroup: by default the root of the cgroup2 hierarchy, so that
//! every socket of the machine passes the program, and the program keeps
//! only those of the daemon's own network namespace (the cookie in
//! `lanes_cfg`, compared with `bpf_get_netns_cookie`). Why not one cgroup
//! per host: the lab's hosts are namespaces, not process trees — the
//! traffic generators, the probe threads and the kernel's own subflows (a
//! join opened by the path manager is charged to its connection's cgroup)
//! would all have to be moved into the right cgroup first. With the netns
//! filter, eight daemons attach eight programs to one cgroup and each sees
//! its own host only; a program costs a cookie comparison on sockets of
//! other namespaces. `signals.cgroup` narrows it when a host runs other work.
//!
//! Mapping an event to a connection: the event carries the 4-tuple of the
//! subflow whose ACK decided, which the tracker knows from the path-manager
//! events (the SL subflow's addresses, or an LL subflow's).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use tcpaccel_core::lanes::bpf::{BpfParams, SignalKind, Unsupported, MAX_SLOTS};
use tcpaccel_core::lanes::{Costs, LaneId, LaneKind};
use tcpaccel_sys::bpf::{
    self, Link, Loaded, Map, Object, Plain, RingBuf, ATTACH_CGROUP_SOCK_OPS, UPDATE_ANY,
};

use crate::config::Config;

/// The compiled program (rebuilt by `scripts/build-bpf.sh`).
pub const LANES_OBJECT: &[u8] = include_bytes!("../bpf/lanes.bpf.o");
const PROGRAM: &str = "tcpaccel_lanes";

/// Why the BPF signals could not start.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The configuration needs what the program cannot compute.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    #[error(
        "{0} lanes configured; the BPF signal path handles at most {MAX_SLOTS} (use signals = \"diag\")"
    )]
    TooManyLanes(usize),
    #[error("no cgroup2 hierarchy is mounted (needed to attach the lanes BPF program)")]
    NoCgroup2,
    #[error("cgroup {path}: {reason}")]
    Cgroup { path: PathBuf, reason: String },
    #[error(transparent)]
    Sys(#[from] tcpaccel_sys::Error),
}

impl BpfError {
    /// True when the kernel lacks something (no BPF, no ring buffer, a
    /// verifier that refuses the program): the daemon may fall back.
    pub fn is_missing_feature(&self) -> bool {
        match self {
            BpfError::NoCgroup2 => true,
            BpfError::Sys(e) => !e.is_privilege(),
            _ => false,
        }
    }
    /// True when loading or attaching was refused for want of privilege
    /// (not root, no CAP_BPF/CAP_SYS_ADMIN): exit code 3, not 4.
    pub fn is_missing_privilege(&self) -> bool {
        matches!(self, BpfError::Sys(e) if e.is_privilege())
    }
    /// True when the configuration is what the BPF path cannot run.
    pub fn is_config(&self) -> bool {
        matches!(self, BpfError::Unsupported(_) | BpfError::TooManyLanes(_))
    }
}

/// The lane behind each program slot: SL lanes first, then LL lanes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slots(Vec<LaneId>);

impl Slots {
    pub fn new(cfg: &Config) -> Result<Slots, BpfError> {
        let mut v: Vec<LaneId> = (0..cfg.sl_lanes.len()).map(|i| LaneId::short(i as u16)).collect();
        v.extend((0..cfg.ll_lanes.len()).map(|i| LaneId::long(i as u16)));
        if v.len() > MAX_SLOTS {
            return Err(BpfError::TooManyLanes(v.len()));
        }
        Ok(Slots(v))
    }
    pub fn slot(&self, lane: LaneId) -> Option<u32> {
        self.0.iter().position(|l| *l == lane).map(|p| p as u32)
    }
    pub fn lane(&self, slot: u32) -> Option<LaneId> {
        self.0.get(slot as usize).copied()
    }
    /// Bit s set: slot s is a Long-flow Lane.
    pub fn ll_mask(&self) -> u32 {
        self.0.iter().enumerate().filter(|(_, l)| l.kind == LaneKind::Long).fold(0, |m, (i, _)| m | 1 << i)
    }
}

/// Checks that `cfg` can run on the BPF path (no kernel needed).
pub fn check(cfg: &Config) -> Result<(BpfParams, Slots), BpfError> {
    Ok((BpfParams::new(&cfg.switch)?, Slots::new(cfg)?))
}

/// `struct lanes_cfg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfgAbi {
    pub netns_cookie: u64,
    pub params: BpfParams,
    pub ll_mask: u32,
    pub enabled: bool,
    /// Track passively opened (server-side) connections too
    /// (`manage_server_side`); otherwise the program sends no signal for them.
    pub passive: bool,
}

impl Plain for CfgAbi {
    const SIZE: usize = 88;
    fn write(&self, o: &mut [u8]) {
        let p = &self.params;
        let u64s = [
            self.netns_cookie,
            p.size_threshold,
            p.t_deadline_us,
            p.nu_unit_us,
            p.t0_fp,
            p.alpha_fp,
            p.gamma_fp,
        ];
        for (i, v) in u64s.iter().enumerate() {
            v.write(&mut o[i * 8..i * 8 + 8]);
        }
        let u32s = [
            p.policy,
            p.beta,
            p.delta,
            p.per_lane_base as u32,
            self.ll_mask,
            self.enabled as u32,
            self.passive as u32,
            0,
        ];
        for (i, v) in u32s.iter().enumerate() {
            v.write(&mut o[56 + i * 4..60 + i * 4]);
        }
    }
    fn read(b: &[u8]) -> Self {
        let q = |i: usize| bpf::ne_u64(b, i * 8);
        let d = |i: usize| bpf::ne_u32(b, 56 + i * 4);
        CfgAbi {
            netns_cookie: q(0),
            params: BpfParams {
                size_threshold: q(1),
                t_deadline_us: q(2),
                nu_unit_us: q(3),
                t0_fp: q(4),
                alpha_fp: q(5),
                gamma_fp: q(6),
                policy: d(0),
                beta: d(1),
                delta: d(2),
                per_lane_base: d(3) != 0,
            },
            ll_mask: d(4),
            enabled: d(5) != 0,
            passive: d(6) != 0,
        }
    }
}

fn mapped(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

fn unmapped(b: [u8; 16], family: u32) -> IpAddr {
    let v6 = Ipv6Addr::from(b);
    match (family, v6.to_ipv4_mapped()) {
        (2, Some(v4)) => IpAddr::V4(v4),
        (2, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        _ => IpAddr::V6(v6),
    }
}

/// `struct pair_key`: local and peer address, IPv4 mapped into IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairKey {
    pub local: IpAddr,
    pub remote: IpAddr,
}

impl Plain for PairKey {
    const SIZE: usize = 32;
    fn write(&self, o: &mut [u8]) {
        o[..16].copy_from_slice(&mapped(self.local));
        o[16..].copy_from_slice(&mapped(self.remote));
    }
    fn read(b: &[u8]) -> Self {
        let a: [u8; 16] = b[..16].try_into().unwrap_or([0; 16]);
        let r: [u8; 16] = b[16..32].try_into().unwrap_or([0; 16]);
        let fam = |x: [u8; 16]| if Ipv6Addr::from(x).to_ipv4_mapped().is_some() { 2 } else { 10 };
        PairKey { local: unmapped(a, fam(a)), remote: unmapped(r, fam(r)) }
    }
}

/// `struct lane_val`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneVal {
    pub slot: u32,
    pub long: bool,
}

impl Plain for LaneVal {
    const SIZE: usize = 8;
    fn write(&self, o: &mut [u8]) {
        self.slot.write(&mut o[..4]);
        (self.long as u32).write(&mut o[4..]);
    }
    fn read(b: &[u8]) -> Self {
        LaneVal { slot: bpf::ne_u32(b, 0), long: bpf::ne_u32(b, 4) != 0 }
    }
}

/// `struct lane_sample`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneSampleAbi {
    pub seq: u64,
    pub rtt_us: u32,
}

impl Plain for LaneSampleAbi {
    const SIZE: usize = 16;
    fn write(&self, o: &mut [u8]) {
        self.seq.write(&mut o[..8]);
        self.rtt_us.write(&mut o[8..12]);
        0u32.write(&mut o[12..]);
    }
    fn read(b: &[u8]) -> Self {
        LaneSampleAbi { seq: bpf::ne_u64(b, 0), rtt_us: bpf::ne_u32(b, 8) }
    }
}

/// `struct lanes_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Program runs on tracked connections' subflows: one per received
    /// segment until the connection is decided (the socket as it was
    /// after the previous segment), then one per round trip on its LL
    /// subflows only (lane samples).
    pub acks: u64,
    /// Signals put in the ring buffer.
    pub events: u64,
    /// Signals the ring buffer had no room for (asked again on the next
    /// segment).
    pub dropped: u64,
    /// Sockets tracked at ESTABLISHED.
    pub subflows: u64,
    /// The kernel's accounting of the program (every run, for every socket
    /// of the cgroup, other namespaces' included), counted only while BPF
    /// run-time statistics are on (`tcpaccel_sys::bpf::enable_stats`).
    pub run_ns: u64,
    pub runs: u64,
}

impl Plain for Stats {
    const SIZE: usize = 32;
    fn write(&self, o: &mut [u8]) {
        for (i, v) in [self.acks, self.events, self.dropped, self.subflows].iter().enumerate() {
            v.write(&mut o[i * 8..i * 8 + 8]);
        }
    }
    fn read(b: &[u8]) -> Self {
        let q = |i: usize| bpf::ne_u64(b, i * 8);
        Stats { acks: q(0), events: q(1), dropped: q(2), subflows: q(3), run_ns: 0, runs: 0 }
    }
}

/// What a ring-buffer event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The decision may come soon (see [`prepare_due`]): open the
    /// connection's backup LL subflows now.
    Prepare,
    /// The connection's decision: switch, for this reason.
    Decision(SignalKind),
}

/// `EV_PREPARE` of the program.
pub const EV_PREPARE: u32 = 4;

/// The program's rule for [`Kind::Prepare`] (the C mirrors it line for
/// line): half the size threshold moved, or, under the deadline and
/// link-cost policies (whose costs grow towards t_deadline), half of
/// t_deadline passed while ACKs arrive. Half, so that a flow that reaches
/// the threshold at the link's rate has its LL subflows established
/// (two round trips) long before; most short flows end earlier and open
/// none.
pub fn prepare_due(p: &BpfParams, bytes: u64, age_us: u64) -> bool {
    (p.size_threshold != 0 && bytes >= p.size_threshold / 2)
        || (p.policy != tcpaccel_core::lanes::bpf::POLICY_SIZE && age_us >= p.t_deadline_us / 2)
}

/// A connection's decision changed, or may soon (one `struct lanes_event`),
/// typed for the tracker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signal {
    pub kind: Kind,
    /// The cheapest LL lane, when the program had an LL cost.
    pub lane: Option<LaneId>,
    pub age_ms: f64,
    pub bytes: u64,
    /// Cheapest SL and LL costs, when both were known.
    pub costs: Option<Costs>,
    /// The subflow whose ACK decided.
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// When the program decided (CLOCK_MONOTONIC, ns).
    pub ktime_ns: u64,
}

/// Size of `struct lanes_event`.
pub const EVENT_SIZE: usize = 96;

/// Decodes one ring-buffer record; `None` for a record of the wrong size or
/// an unknown kind.
pub fn parse_event(b: &[u8], slots: &Slots) -> Option<Signal> {
    if b.len() < EVENT_SIZE {
        return None;
    }
    let raw = bpf::ne_u32(b, 0);
    let kind = if raw == EV_PREPARE { Kind::Prepare } else { Kind::Decision(SignalKind::from_raw(raw)?) };
    let slot = bpf::ne_u32(b, 4);
    let age_us = bpf::ne_u64(b, 8);
    let bytes = bpf::ne_u64(b, 16);
    let (sl, ll) = (bpf::ne_u64(b, 24) as i64, bpf::ne_u64(b, 32) as i64);
    let have = bpf::ne_u32(b, 40) != 0;
    let family = bpf::ne_u32(b, 44);
    let local: [u8; 16] = b[48..64].try_into().ok()?;
    let remote: [u8; 16] = b[64..80].try_into().ok()?;
    let lport = u16::from_ne_bytes([b[80], b[81]]);
    let rport = u16::from_ne_bytes([b[82], b[83]]);
    use tcpaccel_core::lanes::bpf::to_f64;
    Some(Signal {
        kind,
        lane: slots.lane(slot),
        age_ms: age_us as f64 / 1e3,
        bytes,
        costs: have.then(|| Costs { sl: to_f64(sl), ll: to_f64(ll) }),
        local: SocketAddr::new(unmapped(local, family), lport),
        remote: SocketAddr::new(unmapped(remote, family), rport),
        ktime_ns: bpf::ne_u64(b, 88),
    })
}

/// The program, attached, with its ring buffer.
pub struct BpfSignals {
    ring: RingBuf,
    lane_map: Map,
    stats: Map,
    slots: Slots,
    _loaded: Loaded,
    _link: Link,
    pub cgroup: PathBuf,
}

/// The cgroup2 directory `rel` names: absolute, or relative to the mount.
fn cgroup_dir(rel: &Path) -> Result<PathBuf, BpfError> {
    let mount = tcpaccel_sys::cgroup::cgroup2_mount().map_err(|_| BpfError::NoCgroup2)?;
    let cg = tcpaccel_sys::cgroup::Cgroup::open(rel.strip_prefix("/").unwrap_or(rel))
        .map_err(|e| BpfError::Cgroup { path: mount.join(rel), reason: e.to_string() })?;
    Ok(cg.path)
}

impl BpfSignals {
    /// Loads and attaches the program for the calling thread's network
    /// namespace; `cgroup` is relative to the cgroup2 mount ("/" the root).
    pub fn start(cfg: &Config, cgroup: &Path) -> Result<BpfSignals, BpfError> {
        let (params, slots) = check(cfg)?;
        let dir = cgroup_dir(cgroup)?;
        let netns_cookie = bpf::current_netns_cookie()?;
        let obj = Object::parse(LANES_OBJECT)?;
        let mut loaded = obj.load()?;
        let pairs = loaded.map("lanes_pairs")?;
        for peer in &cfg.peers {
            for p in peer.sl.iter().chain(peer.ll.iter()) {
                let slot = slots.slot(p.lane).ok_or(BpfError::TooManyLanes(MAX_SLOTS + 1))?;
                pairs.update(
                    &PairKey { local: p.local, remote: p.remote },
                    &LaneVal { slot, long: p.lane.kind == LaneKind::Long },
                    UPDATE_ANY,
                )?;
            }
        }
        let abi = CfgAbi {
            netns_cookie,
            params,
            ll_mask: slots.ll_mask(),
            enabled: true,
            passive: cfg.server_side,
        };
        loaded.map("lanes_cfg")?.update(&0u32, &abi, UPDATE_ANY)?;
        let ring = RingBuf::new(loaded.map("lanes_events")?)?;
        let dir_file = std::fs::File::open(&dir)
            .map_err(|e| BpfError::Cgroup { path: dir.clone(), reason: format!("open: {e}") })?;
        let link = loaded.program(PROGRAM)?.attach_cgroup(&dir_file, ATTACH_CGROUP_SOCK_OPS)?;
        let lane_map = loaded.maps.remove("lanes_lane").ok_or(BpfError::TooManyLanes(0))?;
        let stats = loaded.maps.remove("lanes_stats").ok_or(BpfError::TooManyLanes(0))?;
        Ok(BpfSignals { ring, lane_map, stats, slots, _loaded: loaded, _link: link, cgroup: dir })
    }

    /// The signals in the ring buffer now, in order; undecodable records
    /// are counted in the second value.
    pub fn drain(&mut self) -> (Vec<Signal>, usize) {
        let mut out = Vec::new();
        let mut bad = 0;
        let slots = &self.slots;
        self.ring.consume(|b| match parse_event(b, slots) {
            Some(s) => out.push(s),
            None => bad += 1,
        });
        (out, bad)
    }

    /// The ring buffer, for waiting on it.
    pub fn ring(&self) -> &RingBuf {
        &self.ring
    }

    /// A handshake probe's RTT of an LL lane: the program applies it to
    /// every connection with a subflow on that lane at its next ACK, as it
    /// does with samples of other sockets on the lane's pair.
    pub fn lane_sample(&self, lane: LaneId, rtt: std::time::Duration) -> Result<(), BpfError> {
        let Some(slot) = self.slots.slot(lane) else { return Ok(()) };
        let cur: LaneSampleAbi = self.lane_map.lookup(&slot)?.unwrap_or_default();
        let rtt_us = rtt.as_micros().clamp(1, u32::MAX as u128) as u32;
        self.lane_map.update(&slot, &LaneSampleAbi { seq: cur.seq.wrapping_add(1), rtt_us }, UPDATE_ANY)?;
        Ok(())
    }

    pub fn stats(&self) -> Stats {
        let mut s = self.stats.lookup::<u32, Stats>(&0).ok().flatten().unwrap_or_default();
        if let Ok(r) = self._loaded.program(PROGRAM).and_then(|p| p.run_stats()) {
            s.run_ns = r.run_time_ns;
            s.runs = r.run_cnt;
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(extra: &str) -> Config {
        Config::parse(
            &format!(
                r#"
                [policy]
                {extra}
                [[peer]]
                sl = [{{ local = "10.1.0.1", remote = "10.1.0.2" }}]
                ll = [{{ local = "10.2.0.1", remote = "10.2.0.2" }}, {{ local = "10.3.0.1", remote = "10.3.0.2" }}]
            "#
            ),
            "t",
        )
        .unwrap()
    }

    #[test]
    fn slots_put_sl_lanes_first_and_mark_the_long_ones() {
        let s = Slots::new(&cfg("")).unwrap();
        assert_eq!(s.lane(0), Some(LaneId::short(0)));
        assert_eq!(s.lane(2), Some(LaneId::long(1)));
        assert_eq!(s.lane(3), None);
        assert_eq!(s.slot(LaneId::long(0)), Some(1));
        assert_eq!(s.ll_mask(), 0b110);
    }

    #[test]
    fn configs_outside_the_bpf_path_are_refused_by_field() {
        let e = check(&cfg("beta = 1.5")).unwrap_err();
        assert!(e.is_config() && e.to_string().contains("policy.beta"), "{e}");
        let e = check(&cfg("alpha = 0.1")).unwrap_err();
        assert!(e.to_string().contains("policy.alpha"), "{e}");
        assert!(check(&cfg("kind = \"size\"\nsize_threshold = \"1MB\"")).is_ok());
    }

    #[test]
    fn abi_layouts_match_the_c_structs() {
        let (params, _) = check(&cfg("size_threshold = \"2MB\"")).unwrap();
        let c =
            CfgAbi { netns_cookie: 0x1122_3344_5566_7788, params, ll_mask: 6, enabled: true, passive: true };
        let mut b = [0u8; CfgAbi::SIZE];
        c.write(&mut b);
        assert_eq!(CfgAbi::read(&b), c);
        assert_eq!(bpf::ne_u64(&b, 8), 2_000_000, "size_threshold at offset 8");
        assert_eq!(bpf::ne_u32(&b, 72), 6, "ll_mask at offset 72");
        assert_eq!(bpf::ne_u32(&b, 80), 1, "passive at offset 80");
        let k = PairKey { local: "10.1.0.1".parse().unwrap(), remote: "fd00::2".parse().unwrap() };
        let mut b = [0u8; 32];
        k.write(&mut b);
        assert_eq!(&b[10..16], &[0xff, 0xff, 10, 1, 0, 1]);
        assert_eq!(PairKey::read(&b), k);
    }

    #[test]
    fn events_decode_to_typed_signals() {
        let slots = Slots::new(&cfg("")).unwrap();
        let mut b = vec![0u8; EVENT_SIZE];
        b[0..4].copy_from_slice(&3u32.to_ne_bytes());
        b[4..8].copy_from_slice(&2u32.to_ne_bytes());
        b[8..16].copy_from_slice(&301_500u64.to_ne_bytes());
        b[16..24].copy_from_slice(&5_000_000u64.to_ne_bytes());
        b[24..32].copy_from_slice(&(3i64 << 10).to_ne_bytes());
        b[32..40].copy_from_slice(&(-(1i64 << 9)).to_ne_bytes());
        b[40..44].copy_from_slice(&1u32.to_ne_bytes());
        b[44..48].copy_from_slice(&2u32.to_ne_bytes());
        b[48..64].copy_from_slice(&mapped("10.1.0.1".parse().unwrap()));
        b[64..80].copy_from_slice(&mapped("10.1.0.2".parse().unwrap()));
        b[80..82].copy_from_slice(&40000u16.to_ne_bytes());
        b[82..84].copy_from_slice(&5201u16.to_ne_bytes());
        b[88..96].copy_from_slice(&123_456_789u64.to_ne_bytes());
        let s = parse_event(&b, &slots).unwrap();
        assert_eq!(s.kind, Kind::Decision(SignalKind::LinkCost));
        assert_eq!(s.lane, Some(LaneId::long(1)));
        assert_eq!((s.age_ms, s.bytes), (301.5, 5_000_000));
        assert_eq!(s.costs, Some(Costs { sl: 3.0, ll: -0.5 }));
        assert_eq!(s.local, "10.1.0.1:40000".parse().unwrap());
        assert_eq!(s.remote, "10.1.0.2:5201".parse().unwrap());
        assert_eq!(s.ktime_ns, 123_456_789);
        b[0] = 4;
        assert_eq!(parse_event(&b, &slots).map(|s| s.kind), Some(Kind::Prepare));
        b[0] = 9;
        assert_eq!(parse_event(&b, &slots), None, "unknown kind");
        assert_eq!(parse_event(&b[..88], &slots), None, "short record");
    }

    #[test]
    fn prepare_comes_at_half_the_threshold_or_half_the_deadline() {
        let (size, _) = check(&cfg("kind = \"size\"\nsize_threshold = \"100KB\"")).unwrap();
        assert!(!prepare_due(&size, 49_999, 10_000_000), "size: age alone never prepares");
        assert!(prepare_due(&size, 50_000, 0));
        let (dl, _) = check(&cfg("kind = \"deadline\"\nt_deadline = \"300ms\"")).unwrap();
        assert!(!prepare_due(&dl, u64::MAX, 149_999), "no size threshold: bytes alone never prepare");
        assert!(prepare_due(&dl, 0, 150_000));
        let (both, _) =
            check(&cfg("kind = \"link-cost\"\nt_deadline = \"300ms\"\nsize_threshold = \"2MB\"")).unwrap();
        assert!(prepare_due(&both, 1_000_000, 0) && prepare_due(&both, 0, 150_000));
        assert!(!prepare_due(&both, 999_999, 149_999));
    }
}
