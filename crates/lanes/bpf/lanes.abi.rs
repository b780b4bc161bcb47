// Generated from crates/lanes/bpf/lanes.abi.h by crates/bpf-abi-gen. Do not edit: change the table,
// then `cargo run -p tcpaccel-bpf-abi-gen -- --write`.

/// `struct lanes_cfg` (88 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LanesCfg {
    pub(crate) netns_cookie: u64,
    pub(crate) size_threshold: u64,
    pub(crate) t_deadline_us: u64,
    pub(crate) nu_unit_us: u64,
    pub(crate) t0_fp: u64,
    pub(crate) alpha_fp: u64,
    pub(crate) gamma_fp: u64,
    pub(crate) policy: u32,
    pub(crate) beta: u32,
    pub(crate) delta: u32,
    pub(crate) per_lane_base: u32,
    pub(crate) ll_mask: u32,
    pub(crate) enabled: u32,
    pub(crate) passive: u32,
    pub(crate) pad: u32,
}

#[repr(C)]
#[allow(dead_code)]
struct LanesCfgLayout {
    netns_cookie: u64,
    size_threshold: u64,
    t_deadline_us: u64,
    nu_unit_us: u64,
    t0_fp: u64,
    alpha_fp: u64,
    gamma_fp: u64,
    policy: u32,
    beta: u32,
    delta: u32,
    per_lane_base: u32,
    ll_mask: u32,
    enabled: u32,
    passive: u32,
    pad: u32,
}
const _: () = assert!(::core::mem::size_of::<LanesCfgLayout>() == 88);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, netns_cookie) == 0);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, size_threshold) == 8);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, t_deadline_us) == 16);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, nu_unit_us) == 24);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, t0_fp) == 32);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, alpha_fp) == 40);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, gamma_fp) == 48);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, policy) == 56);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, beta) == 60);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, delta) == 64);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, per_lane_base) == 68);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, ll_mask) == 72);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, enabled) == 76);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, passive) == 80);
const _: () = assert!(::core::mem::offset_of!(LanesCfgLayout, pad) == 84);

impl LanesCfg {
    pub(crate) const SIZE: usize = 88;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.netns_cookie.to_ne_bytes());
        b[8..16].copy_from_slice(&self.size_threshold.to_ne_bytes());
        b[16..24].copy_from_slice(&self.t_deadline_us.to_ne_bytes());
        b[24..32].copy_from_slice(&self.nu_unit_us.to_ne_bytes());
        b[32..40].copy_from_slice(&self.t0_fp.to_ne_bytes());
        b[40..48].copy_from_slice(&self.alpha_fp.to_ne_bytes());
        b[48..56].copy_from_slice(&self.gamma_fp.to_ne_bytes());
        b[56..60].copy_from_slice(&self.policy.to_ne_bytes());
        b[60..64].copy_from_slice(&self.beta.to_ne_bytes());
        b[64..68].copy_from_slice(&self.delta.to_ne_bytes());
        b[68..72].copy_from_slice(&self.per_lane_base.to_ne_bytes());
        b[72..76].copy_from_slice(&self.ll_mask.to_ne_bytes());
        b[76..80].copy_from_slice(&self.enabled.to_ne_bytes());
        b[80..84].copy_from_slice(&self.passive.to_ne_bytes());
        b[84..88].copy_from_slice(&self.pad.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = LanesCfg::default();
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[0..8]);
            v.netns_cookie = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.size_threshold = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[16..24]);
            v.t_deadline_us = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[24..32]);
            v.nu_unit_us = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[32..40]);
            v.t0_fp = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[40..48]);
            v.alpha_fp = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[48..56]);
            v.gamma_fp = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[56..60]);
            v.policy = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[60..64]);
            v.beta = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[64..68]);
            v.delta = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[68..72]);
            v.per_lane_base = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[72..76]);
            v.ll_mask = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[76..80]);
            v.enabled = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[80..84]);
            v.passive = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[84..88]);
            v.pad = u32::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::bpf::CfgAbi> for LanesCfg {
    fn from(value: &crate::bpf::CfgAbi) -> LanesCfg {
        let crate::bpf::CfgAbi { netns_cookie, params, ll_mask, enabled, passive } = value;
        let tcpaccel_core::lanes::bpf::BpfParams { size_threshold, t_deadline_us, nu_unit_us, t0_fp, alpha_fp, gamma_fp, policy, beta, delta, per_lane_base } = params;
        LanesCfg {
            netns_cookie: *netns_cookie,
            size_threshold: *size_threshold,
            t_deadline_us: *t_deadline_us,
            nu_unit_us: *nu_unit_us,
            t0_fp: *t0_fp,
            alpha_fp: *alpha_fp,
            gamma_fp: *gamma_fp,
            policy: *policy,
            beta: *beta,
            delta: *delta,
            per_lane_base: u32::from(*per_lane_base),
            ll_mask: *ll_mask,
            enabled: u32::from(*enabled),
            passive: u32::from(*passive),
            pad: 0,
        }
    }
}

impl ::core::convert::From<LanesCfg> for crate::bpf::CfgAbi {
    fn from(value: LanesCfg) -> crate::bpf::CfgAbi {
        let LanesCfg { netns_cookie, size_threshold, t_deadline_us, nu_unit_us, t0_fp, alpha_fp, gamma_fp, policy, beta, delta, per_lane_base, ll_mask, enabled, passive, pad: _ } = value;
        crate::bpf::CfgAbi {
            netns_cookie,
            params: tcpaccel_core::lanes::bpf::BpfParams { size_threshold, t_deadline_us, nu_unit_us, t0_fp, alpha_fp, gamma_fp, policy, beta, delta, per_lane_base: per_lane_base != 0 },
            ll_mask,
            enabled: enabled != 0,
            passive: passive != 0,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::bpf::CfgAbi {
    const SIZE: usize = LanesCfg::SIZE;
    fn write(&self, out: &mut [u8]) {
        LanesCfg::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        LanesCfg::read(b).into()
    }
}

/// `struct pair_key` (32 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PairKey {
    pub(crate) local: [u8; 16],
    pub(crate) remote: [u8; 16],
}

#[repr(C)]
#[allow(dead_code)]
struct PairKeyLayout {
    local: [u8; 16],
    remote: [u8; 16],
}
const _: () = assert!(::core::mem::size_of::<PairKeyLayout>() == 32);
const _: () = assert!(::core::mem::offset_of!(PairKeyLayout, local) == 0);
const _: () = assert!(::core::mem::offset_of!(PairKeyLayout, remote) == 16);

impl PairKey {
    pub(crate) const SIZE: usize = 32;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..16].copy_from_slice(&self.local);
        b[16..32].copy_from_slice(&self.remote);
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = PairKey::default();
        v.local.copy_from_slice(&b[0..16]);
        v.remote.copy_from_slice(&b[16..32]);
        v
    }
}

impl ::core::convert::From<&crate::bpf::PairKey> for PairKey {
    fn from(value: &crate::bpf::PairKey) -> PairKey {
        let crate::bpf::PairKey { local, remote } = value;
        PairKey {
            local: crate::bpf::ip16::to_abi(local),
            remote: crate::bpf::ip16::to_abi(remote),
        }
    }
}

impl ::core::convert::From<PairKey> for crate::bpf::PairKey {
    fn from(value: PairKey) -> crate::bpf::PairKey {
        let PairKey { local, remote } = value;
        crate::bpf::PairKey {
            local: crate::bpf::ip16::from_abi(local),
            remote: crate::bpf::ip16::from_abi(remote),
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::bpf::PairKey {
    const SIZE: usize = PairKey::SIZE;
    fn write(&self, out: &mut [u8]) {
        PairKey::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        PairKey::read(b).into()
    }
}

/// `struct lane_val` (8 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LaneVal {
    pub(crate) slot: u32,
    pub(crate) kind: u32,
}

#[repr(C)]
#[allow(dead_code)]
struct LaneValLayout {
    slot: u32,
    kind: u32,
}
const _: () = assert!(::core::mem::size_of::<LaneValLayout>() == 8);
const _: () = assert!(::core::mem::offset_of!(LaneValLayout, slot) == 0);
const _: () = assert!(::core::mem::offset_of!(LaneValLayout, kind) == 4);

impl LaneVal {
    pub(crate) const SIZE: usize = 8;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.slot.to_ne_bytes());
        b[4..8].copy_from_slice(&self.kind.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = LaneVal::default();
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[0..4]);
            v.slot = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[4..8]);
            v.kind = u32::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::bpf::LaneVal> for LaneVal {
    fn from(value: &crate::bpf::LaneVal) -> LaneVal {
        let crate::bpf::LaneVal { slot, long } = value;
        LaneVal {
            slot: *slot,
            kind: u32::from(*long),
        }
    }
}

impl ::core::convert::From<LaneVal> for crate::bpf::LaneVal {
    fn from(value: LaneVal) -> crate::bpf::LaneVal {
        let LaneVal { slot, kind } = value;
        crate::bpf::LaneVal {
            slot,
            long: kind != 0,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::bpf::LaneVal {
    const SIZE: usize = LaneVal::SIZE;
    fn write(&self, out: &mut [u8]) {
        LaneVal::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        LaneVal::read(b).into()
    }
}

/// `struct lane_sample` (16 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LaneSample {
    pub(crate) seq: u64,
    pub(crate) rtt_us: u32,
    pub(crate) pad: u32,
}

#[repr(C)]
#[allow(dead_code)]
struct LaneSampleLayout {
    seq: u64,
    rtt_us: u32,
    pad: u32,
}
const _: () = assert!(::core::mem::size_of::<LaneSampleLayout>() == 16);
const _: () = assert!(::core::mem::offset_of!(LaneSampleLayout, seq) == 0);
const _: () = assert!(::core::mem::offset_of!(LaneSampleLayout, rtt_us) == 8);
const _: () = assert!(::core::mem::offset_of!(LaneSampleLayout, pad) == 12);

impl LaneSample {
    pub(crate) const SIZE: usize = 16;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.seq.to_ne_bytes());
        b[8..12].copy_from_slice(&self.rtt_us.to_ne_bytes());
        b[12..16].copy_from_slice(&self.pad.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = LaneSample::default();
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[0..8]);
            v.seq = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[8..12]);
            v.rtt_us = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[12..16]);
            v.pad = u32::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::bpf::LaneSampleAbi> for LaneSample {
    fn from(value: &crate::bpf::LaneSampleAbi) -> LaneSample {
        let crate::bpf::LaneSampleAbi { seq, rtt_us } = value;
        LaneSample {
            seq: *seq,
            rtt_us: *rtt_us,
            pad: 0,
        }
    }
}

impl ::core::convert::From<LaneSample> for crate::bpf::LaneSampleAbi {
    fn from(value: LaneSample) -> crate::bpf::LaneSampleAbi {
        let LaneSample { seq, rtt_us, pad: _ } = value;
        crate::bpf::LaneSampleAbi {
            seq,
            rtt_us,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::bpf::LaneSampleAbi {
    const SIZE: usize = LaneSample::SIZE;
    fn write(&self, out: &mut [u8]) {
        LaneSample::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        LaneSample::read(b).into()
    }
}

/// `struct lanes_event` (96 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LanesEvent {
    pub(crate) kind: u32,
    pub(crate) slot: u32,
    pub(crate) age_us: u64,
    pub(crate) bytes: u64,
    pub(crate) cost_sl: i64,
    pub(crate) cost_ll: i64,
    pub(crate) have_costs: u32,
    pub(crate) family: u32,
    pub(crate) local: [u8; 16],
    pub(crate) remote: [u8; 16],
    pub(crate) lport: u16,
    pub(crate) rport: u16,
    pub(crate) pad: u32,
    pub(crate) ktime_ns: u64,
}

#[repr(C)]
#[allow(dead_code)]
struct LanesEventLayout {
    kind: u32,
    slot: u32,
    age_us: u64,
    bytes: u64,
    cost_sl: i64,
    cost_ll: i64,
    have_costs: u32,
    family: u32,
    local: [u8; 16],
    remote: [u8; 16],
    lport: u16,
    rport: u16,
    pad: u32,
    ktime_ns: u64,
}
const _: () = assert!(::core::mem::size_of::<LanesEventLayout>() == 96);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, kind) == 0);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, slot) == 4);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, age_us) == 8);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, bytes) == 16);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, cost_sl) == 24);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, cost_ll) == 32);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, have_costs) == 40);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, family) == 44);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, local) == 48);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, remote) == 64);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, lport) == 80);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, rport) == 82);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, pad) == 84);
const _: () = assert!(::core::mem::offset_of!(LanesEventLayout, ktime_ns) == 88);

impl LanesEvent {
    pub(crate) const SIZE: usize = 96;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.slot.to_ne_bytes());
        b[8..16].copy_from_slice(&self.age_us.to_ne_bytes());
        b[16..24].copy_from_slice(&self.bytes.to_ne_bytes());
        b[24..32].copy_from_slice(&self.cost_sl.to_ne_bytes());
        b[32..40].copy_from_slice(&self.cost_ll.to_ne_bytes());
        b[40..44].copy_from_slice(&self.have_costs.to_ne_bytes());
        b[44..48].copy_from_slice(&self.family.to_ne_bytes());
        b[48..64].copy_from_slice(&self.local);
        b[64..80].copy_from_slice(&self.remote);
        b[80..82].copy_from_slice(&self.lport.to_ne_bytes());
        b[82..84].copy_from_slice(&self.rport.to_ne_bytes());
        b[84..88].copy_from_slice(&self.pad.to_ne_bytes());
        b[88..96].copy_from_slice(&self.ktime_ns.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = LanesEvent::default();
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[0..4]);
            v.kind = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[4..8]);
            v.slot = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.age_us = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[16..24]);
            v.bytes = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[24..32]);
            v.cost_sl = i64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[32..40]);
            v.cost_ll = i64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[40..44]);
            v.have_costs = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[44..48]);
            v.family = u32::from_ne_bytes(a);
        }
        v.local.copy_from_slice(&b[48..64]);
        v.remote.copy_from_slice(&b[64..80]);
        {
            let mut a = [0u8; 2];
            a.copy_from_slice(&b[80..82]);
            v.lport = u16::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 2];
            a.copy_from_slice(&b[82..84]);
            v.rport = u16::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[84..88]);
            v.pad = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[88..96]);
            v.ktime_ns = u64::from_ne_bytes(a);
        }
        v
    }
}

/// `struct lanes_stats` (32 bytes), field for field as in crates/lanes/bpf/lanes.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LanesStats {
    pub(crate) acks: u64,
    pub(crate) events: u64,
    pub(crate) dropped: u64,
    pub(crate) subflows: u64,
}

#[repr(C)]
#[allow(dead_code)]
struct LanesStatsLayout {
    acks: u64,
    events: u64,
    dropped: u64,
    subflows: u64,
}
const _: () = assert!(::core::mem::size_of::<LanesStatsLayout>() == 32);
const _: () = assert!(::core::mem::offset_of!(LanesStatsLayout, acks) == 0);
const _: () = assert!(::core::mem::offset_of!(LanesStatsLayout, events) == 8);
const _: () = assert!(::core::mem::offset_of!(LanesStatsLayout, dropped) == 16);
const _: () = assert!(::core::mem::offset_of!(LanesStatsLayout, subflows) == 24);

impl LanesStats {
    pub(crate) const SIZE: usize = 32;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.acks.to_ne_bytes());
        b[8..16].copy_from_slice(&self.events.to_ne_bytes());
        b[16..24].copy_from_slice(&self.dropped.to_ne_bytes());
        b[24..32].copy_from_slice(&self.subflows.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = LanesStats::default();
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[0..8]);
            v.acks = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.events = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[16..24]);
            v.dropped = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[24..32]);
            v.subflows = u64::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::bpf::Stats> for LanesStats {
    fn from(value: &crate::bpf::Stats) -> LanesStats {
        let crate::bpf::Stats { acks, events, dropped, subflows, .. } = value;
        LanesStats {
            acks: *acks,
            events: *events,
            dropped: *dropped,
            subflows: *subflows,
        }
    }
}

impl ::core::convert::From<LanesStats> for crate::bpf::Stats {
    fn from(value: LanesStats) -> crate::bpf::Stats {
        let LanesStats { acks, events, dropped, subflows } = value;
        crate::bpf::Stats {
            acks,
            events,
            dropped,
            subflows,
            ..::core::default::Default::default()
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::bpf::Stats {
    const SIZE: usize = LanesStats::SIZE;
    fn write(&self, out: &mut [u8]) {
        LanesStats::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        LanesStats::read(b).into()
    }
}

