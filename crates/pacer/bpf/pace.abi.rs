// Generated from crates/pacer/bpf/pace.abi.h by crates/bpf-abi-gen. Do not edit: change the table,
// then `cargo run -p tcpaccel-bpf-abi-gen -- --write`.

/// `struct rule` (16 bytes), field for field as in crates/pacer/bpf/pace.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rule {
    pub kind: u32,
    pub flags: u32,
    pub wire_bps: u64,
}

#[repr(C)]
#[allow(dead_code)]
struct RuleLayout {
    kind: u32,
    flags: u32,
    wire_bps: u64,
}
const _: () = assert!(::core::mem::size_of::<RuleLayout>() == 16);
const _: () = assert!(::core::mem::offset_of!(RuleLayout, kind) == 0);
const _: () = assert!(::core::mem::offset_of!(RuleLayout, flags) == 4);
const _: () = assert!(::core::mem::offset_of!(RuleLayout, wire_bps) == 8);

impl Rule {
    pub(crate) const SIZE: usize = 16;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.flags.to_ne_bytes());
        b[8..16].copy_from_slice(&self.wire_bps.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = Rule::default();
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[0..4]);
            v.kind = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[4..8]);
            v.flags = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.wire_bps = u64::from_ne_bytes(a);
        }
        v
    }
}

impl ::tcpaccel_sys::bpf::Plain for Rule {
    const SIZE: usize = Rule::SIZE;
    fn write(&self, out: &mut [u8]) {
        Rule::write(self, out);
    }
    fn read(b: &[u8]) -> Self {
        Self::read(b)
    }
}

/// `struct rule_stats` (56 bytes), field for field as in crates/pacer/bpf/pace.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RuleStats {
    pub(crate) conns: u64,
    pub(crate) updates: u64,
    pub(crate) errors: u64,
    pub(crate) last_rate: u64,
    pub(crate) released: u64,
    pub(crate) held: u64,
    pub(crate) held_cap: u64,
}

#[repr(C)]
#[allow(dead_code)]
struct RuleStatsLayout {
    conns: u64,
    updates: u64,
    errors: u64,
    last_rate: u64,
    released: u64,
    held: u64,
    held_cap: u64,
}
const _: () = assert!(::core::mem::size_of::<RuleStatsLayout>() == 56);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, conns) == 0);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, updates) == 8);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, errors) == 16);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, last_rate) == 24);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, released) == 32);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, held) == 40);
const _: () = assert!(::core::mem::offset_of!(RuleStatsLayout, held_cap) == 48);

impl RuleStats {
    pub(crate) const SIZE: usize = 56;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.conns.to_ne_bytes());
        b[8..16].copy_from_slice(&self.updates.to_ne_bytes());
        b[16..24].copy_from_slice(&self.errors.to_ne_bytes());
        b[24..32].copy_from_slice(&self.last_rate.to_ne_bytes());
        b[32..40].copy_from_slice(&self.released.to_ne_bytes());
        b[40..48].copy_from_slice(&self.held.to_ne_bytes());
        b[48..56].copy_from_slice(&self.held_cap.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = RuleStats::default();
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[0..8]);
            v.conns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.updates = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[16..24]);
            v.errors = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[24..32]);
            v.last_rate = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[32..40]);
            v.released = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[40..48]);
            v.held = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[48..56]);
            v.held_cap = u64::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::abi::RuleStats> for RuleStats {
    fn from(value: &crate::abi::RuleStats) -> RuleStats {
        let crate::abi::RuleStats { conns, updates, errors, last_rate, released, held, held_cap } = value;
        RuleStats {
            conns: *conns,
            updates: *updates,
            errors: *errors,
            last_rate: *last_rate,
            released: *released,
            held: *held,
            held_cap: *held_cap,
        }
    }
}

impl ::core::convert::From<RuleStats> for crate::abi::RuleStats {
    fn from(value: RuleStats) -> crate::abi::RuleStats {
        let RuleStats { conns, updates, errors, last_rate, released, held, held_cap } = value;
        crate::abi::RuleStats {
            conns,
            updates,
            errors,
            last_rate,
            released,
            held,
            held_cap,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::abi::RuleStats {
    const SIZE: usize = RuleStats::SIZE;
    fn write(&self, out: &mut [u8]) {
        RuleStats::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        RuleStats::read(b).into()
    }
}

/// `struct dst_key` (24 bytes), field for field as in crates/pacer/bpf/pace.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DstKey {
    pub(crate) prefixlen: u32,
    pub(crate) port: [u8; 2],
    pub(crate) addr: [u8; 16],
    pub(crate) pad: [u8; 2],
}

#[repr(C)]
#[allow(dead_code)]
struct DstKeyLayout {
    prefixlen: u32,
    port: [u8; 2],
    addr: [u8; 16],
    pad: [u8; 2],
}
const _: () = assert!(::core::mem::size_of::<DstKeyLayout>() == 24);
const _: () = assert!(::core::mem::offset_of!(DstKeyLayout, prefixlen) == 0);
const _: () = assert!(::core::mem::offset_of!(DstKeyLayout, port) == 4);
const _: () = assert!(::core::mem::offset_of!(DstKeyLayout, addr) == 6);
const _: () = assert!(::core::mem::offset_of!(DstKeyLayout, pad) == 22);

impl DstKey {
    pub(crate) const SIZE: usize = 24;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.prefixlen.to_ne_bytes());
        b[4..6].copy_from_slice(&self.port);
        b[6..22].copy_from_slice(&self.addr);
        b[22..24].copy_from_slice(&self.pad);
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = DstKey::default();
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[0..4]);
            v.prefixlen = u32::from_ne_bytes(a);
        }
        v.port.copy_from_slice(&b[4..6]);
        v.addr.copy_from_slice(&b[6..22]);
        v.pad.copy_from_slice(&b[22..24]);
        v
    }
}

impl ::core::convert::From<&crate::abi::DstKey> for DstKey {
    fn from(value: &crate::abi::DstKey) -> DstKey {
        let crate::abi::DstKey { prefixlen, port, addr } = value;
        DstKey {
            prefixlen: *prefixlen,
            port: port.to_be_bytes(),
            addr: *addr,
            pad: [0; 2],
        }
    }
}

impl ::core::convert::From<DstKey> for crate::abi::DstKey {
    fn from(value: DstKey) -> crate::abi::DstKey {
        let DstKey { prefixlen, port, addr, pad: _ } = value;
        crate::abi::DstKey {
            prefixlen,
            port: u16::from_be_bytes(port),
            addr,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::abi::DstKey {
    const SIZE: usize = DstKey::SIZE;
    fn write(&self, out: &mut [u8]) {
        DstKey::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        DstKey::read(b).into()
    }
}

/// `struct sock_state` (224 bytes), field for field as in crates/pacer/bpf/pace.abi.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SockState {
    pub(crate) rule: u32,
    pub(crate) rate: u32,
    pub(crate) updates: u64,
    pub(crate) win_start_ns: u64,
    pub(crate) win_acked: u64,
    pub(crate) dlv_rate: u64,
    pub(crate) cap: u64,
    pub(crate) cap_ns: u64,
    pub(crate) full_dlv: u64,
    pub(crate) full_cnt: u32,
    pub(crate) full: u32,
    pub(crate) train_ns: u64,
    pub(crate) train_acked: u64,
    pub(crate) last_ns: u64,
    pub(crate) last_acked: u64,
    pub(crate) btl_rate: u64,
    pub(crate) btl_bytes: u64,
    pub(crate) win_cap: u64,
    pub(crate) last_cap: u64,
    pub(crate) undo_cap: u64,
    pub(crate) undo_ns: u64,
    pub(crate) sent_cap: u64,
    pub(crate) win_nxt: u32,
    pub(crate) fill: u32,
    pub(crate) allow: u64,
    pub(crate) out_rate: u64,
    pub(crate) out_ns: u64,
    pub(crate) seen_acked: u64,
    pub(crate) held_cap: u64,
    pub(crate) seen_srtt_us: u32,
    pub(crate) seen_min_rtt_us: u32,
    pub(crate) seen_cwnd: u32,
    pub(crate) seen_ssthresh: u32,
}

#[repr(C)]
#[allow(dead_code)]
struct SockStateLayout {
    rule: u32,
    rate: u32,
    updates: u64,
    win_start_ns: u64,
    win_acked: u64,
    dlv_rate: u64,
    cap: u64,
    cap_ns: u64,
    full_dlv: u64,
    full_cnt: u32,
    full: u32,
    train_ns: u64,
    train_acked: u64,
    last_ns: u64,
    last_acked: u64,
    btl_rate: u64,
    btl_bytes: u64,
    win_cap: u64,
    last_cap: u64,
    undo_cap: u64,
    undo_ns: u64,
    sent_cap: u64,
    win_nxt: u32,
    fill: u32,
    allow: u64,
    out_rate: u64,
    out_ns: u64,
    seen_acked: u64,
    held_cap: u64,
    seen_srtt_us: u32,
    seen_min_rtt_us: u32,
    seen_cwnd: u32,
    seen_ssthresh: u32,
}
const _: () = assert!(::core::mem::size_of::<SockStateLayout>() == 224);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, rule) == 0);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, rate) == 4);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, updates) == 8);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, win_start_ns) == 16);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, win_acked) == 24);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, dlv_rate) == 32);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, cap) == 40);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, cap_ns) == 48);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, full_dlv) == 56);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, full_cnt) == 64);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, full) == 68);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, train_ns) == 72);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, train_acked) == 80);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, last_ns) == 88);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, last_acked) == 96);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, btl_rate) == 104);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, btl_bytes) == 112);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, win_cap) == 120);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, last_cap) == 128);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, undo_cap) == 136);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, undo_ns) == 144);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, sent_cap) == 152);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, win_nxt) == 160);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, fill) == 164);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, allow) == 168);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, out_rate) == 176);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, out_ns) == 184);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, seen_acked) == 192);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, held_cap) == 200);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, seen_srtt_us) == 208);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, seen_min_rtt_us) == 212);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, seen_cwnd) == 216);
const _: () = assert!(::core::mem::offset_of!(SockStateLayout, seen_ssthresh) == 220);

impl SockState {
    pub(crate) const SIZE: usize = 224;
    /// Writes the struct into the first `SIZE` bytes of `b`.
    pub(crate) fn write(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.rule.to_ne_bytes());
        b[4..8].copy_from_slice(&self.rate.to_ne_bytes());
        b[8..16].copy_from_slice(&self.updates.to_ne_bytes());
        b[16..24].copy_from_slice(&self.win_start_ns.to_ne_bytes());
        b[24..32].copy_from_slice(&self.win_acked.to_ne_bytes());
        b[32..40].copy_from_slice(&self.dlv_rate.to_ne_bytes());
        b[40..48].copy_from_slice(&self.cap.to_ne_bytes());
        b[48..56].copy_from_slice(&self.cap_ns.to_ne_bytes());
        b[56..64].copy_from_slice(&self.full_dlv.to_ne_bytes());
        b[64..68].copy_from_slice(&self.full_cnt.to_ne_bytes());
        b[68..72].copy_from_slice(&self.full.to_ne_bytes());
        b[72..80].copy_from_slice(&self.train_ns.to_ne_bytes());
        b[80..88].copy_from_slice(&self.train_acked.to_ne_bytes());
        b[88..96].copy_from_slice(&self.last_ns.to_ne_bytes());
        b[96..104].copy_from_slice(&self.last_acked.to_ne_bytes());
        b[104..112].copy_from_slice(&self.btl_rate.to_ne_bytes());
        b[112..120].copy_from_slice(&self.btl_bytes.to_ne_bytes());
        b[120..128].copy_from_slice(&self.win_cap.to_ne_bytes());
        b[128..136].copy_from_slice(&self.last_cap.to_ne_bytes());
        b[136..144].copy_from_slice(&self.undo_cap.to_ne_bytes());
        b[144..152].copy_from_slice(&self.undo_ns.to_ne_bytes());
        b[152..160].copy_from_slice(&self.sent_cap.to_ne_bytes());
        b[160..164].copy_from_slice(&self.win_nxt.to_ne_bytes());
        b[164..168].copy_from_slice(&self.fill.to_ne_bytes());
        b[168..176].copy_from_slice(&self.allow.to_ne_bytes());
        b[176..184].copy_from_slice(&self.out_rate.to_ne_bytes());
        b[184..192].copy_from_slice(&self.out_ns.to_ne_bytes());
        b[192..200].copy_from_slice(&self.seen_acked.to_ne_bytes());
        b[200..208].copy_from_slice(&self.held_cap.to_ne_bytes());
        b[208..212].copy_from_slice(&self.seen_srtt_us.to_ne_bytes());
        b[212..216].copy_from_slice(&self.seen_min_rtt_us.to_ne_bytes());
        b[216..220].copy_from_slice(&self.seen_cwnd.to_ne_bytes());
        b[220..224].copy_from_slice(&self.seen_ssthresh.to_ne_bytes());
    }
    /// Reads the struct from the first `SIZE` bytes of `b`.
    pub(crate) fn read(b: &[u8]) -> Self {
        let mut v = SockState::default();
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[0..4]);
            v.rule = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[4..8]);
            v.rate = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8..16]);
            v.updates = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[16..24]);
            v.win_start_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[24..32]);
            v.win_acked = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[32..40]);
            v.dlv_rate = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[40..48]);
            v.cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[48..56]);
            v.cap_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[56..64]);
            v.full_dlv = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[64..68]);
            v.full_cnt = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[68..72]);
            v.full = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[72..80]);
            v.train_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[80..88]);
            v.train_acked = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[88..96]);
            v.last_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[96..104]);
            v.last_acked = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[104..112]);
            v.btl_rate = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[112..120]);
            v.btl_bytes = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[120..128]);
            v.win_cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[128..136]);
            v.last_cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[136..144]);
            v.undo_cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[144..152]);
            v.undo_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[152..160]);
            v.sent_cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[160..164]);
            v.win_nxt = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[164..168]);
            v.fill = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[168..176]);
            v.allow = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[176..184]);
            v.out_rate = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[184..192]);
            v.out_ns = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[192..200]);
            v.seen_acked = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[200..208]);
            v.held_cap = u64::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[208..212]);
            v.seen_srtt_us = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[212..216]);
            v.seen_min_rtt_us = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[216..220]);
            v.seen_cwnd = u32::from_ne_bytes(a);
        }
        {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[220..224]);
            v.seen_ssthresh = u32::from_ne_bytes(a);
        }
        v
    }
}

impl ::core::convert::From<&crate::abi::SockState> for SockState {
    fn from(value: &crate::abi::SockState) -> SockState {
        let crate::abi::SockState { rule, rate, updates, hold, seen_acked, held_cap, seen_srtt_us, seen_min_rtt_us, seen_cwnd, seen_ssthresh } = value;
        let tcpaccel_core::pacing::BpfHold { win_start_ns, win_acked, dlv_rate, cap, cap_ns, full_dlv, full_cnt, full, train_ns, train_acked, last_ns, last_acked, btl_rate, btl_bytes, win_cap, last_cap, undo_cap, undo_ns, sent_cap, win_nxt, fill, allow, out_rate, out_ns } = hold;
        SockState {
            rule: *rule,
            rate: *rate,
            updates: *updates,
            win_start_ns: *win_start_ns,
            win_acked: *win_acked,
            dlv_rate: *dlv_rate,
            cap: *cap,
            cap_ns: *cap_ns,
            full_dlv: *full_dlv,
            full_cnt: *full_cnt,
            full: u32::from(*full),
            train_ns: *train_ns,
            train_acked: *train_acked,
            last_ns: *last_ns,
            last_acked: *last_acked,
            btl_rate: *btl_rate,
            btl_bytes: *btl_bytes,
            win_cap: *win_cap,
            last_cap: *last_cap,
            undo_cap: *undo_cap,
            undo_ns: *undo_ns,
            sent_cap: *sent_cap,
            win_nxt: *win_nxt,
            fill: *fill,
            allow: *allow,
            out_rate: *out_rate,
            out_ns: *out_ns,
            seen_acked: *seen_acked,
            held_cap: *held_cap,
            seen_srtt_us: *seen_srtt_us,
            seen_min_rtt_us: *seen_min_rtt_us,
            seen_cwnd: *seen_cwnd,
            seen_ssthresh: *seen_ssthresh,
        }
    }
}

impl ::core::convert::From<SockState> for crate::abi::SockState {
    fn from(value: SockState) -> crate::abi::SockState {
        let SockState { rule, rate, updates, win_start_ns, win_acked, dlv_rate, cap, cap_ns, full_dlv, full_cnt, full, train_ns, train_acked, last_ns, last_acked, btl_rate, btl_bytes, win_cap, last_cap, undo_cap, undo_ns, sent_cap, win_nxt, fill, allow, out_rate, out_ns, seen_acked, held_cap, seen_srtt_us, seen_min_rtt_us, seen_cwnd, seen_ssthresh } = value;
        crate::abi::SockState {
            rule,
            rate,
            updates,
            hold: tcpaccel_core::pacing::BpfHold { win_start_ns, win_acked, dlv_rate, cap, cap_ns, full_dlv, full_cnt, full: full != 0, train_ns, train_acked, last_ns, last_acked, btl_rate, btl_bytes, win_cap, last_cap, undo_cap, undo_ns, sent_cap, win_nxt, fill, allow, out_rate, out_ns },
            seen_acked,
            held_cap,
            seen_srtt_us,
            seen_min_rtt_us,
            seen_cwnd,
            seen_ssthresh,
        }
    }
}

impl ::tcpaccel_sys::bpf::Plain for crate::abi::SockState {
    const SIZE: usize = SockState::SIZE;
    fn write(&self, out: &mut [u8]) {
        SockState::from(self).write(out);
    }
    fn read(b: &[u8]) -> Self {
        SockState::read(b).into()
    }
}

