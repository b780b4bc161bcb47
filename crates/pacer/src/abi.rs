//! The byte layouts of `bpf/pace.bpf.c`'s map keys and values, as [`Plain`]
//! values. Each `SIZE` is the C `sizeof`; the offsets are the C field
//! offsets. Change both sides together.

use tcpaccel_core::pacing::BpfHold;
use tcpaccel_sys::bpf::{ne_u32, ne_u64, Plain};

/// Number of entries of `pace_rules` / `pace_stats`; rule 0 is the default.
pub const MAX_RULES: u32 = 64;

/// `enum rule_kind`.
pub const RULE_NONE: u32 = 0;
pub const RULE_STATIC: u32 = 1;
pub const RULE_DYNAMIC: u32 = 2;

/// `rule.flags` bit: cap dynamic pacing by the measured delivery rate
/// (`hold_cap` in the C source, `tcpaccel_core::pacing::BpfHold`).
pub const RULE_HOLD: u32 = 1;
/// `rule.flags` bit: a detach is under way; the program lifts the cap of
/// every socket the rule paced on its next RTT sample (`release` in the C
/// source) and paces no new connection.
pub const RULE_RELEASE: u32 = 2;

/// `struct rule`: what to do with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleAbi {
    pub kind: u32,
    pub flags: u32,
    /// Static: the rate; dynamic: the ceiling (0: none). Bits/s on the wire.
    pub wire_bps: u64,
}

impl Plain for RuleAbi {
    const SIZE: usize = 16;
    fn write(&self, out: &mut [u8]) {
        out.fill(0);
        self.kind.write(&mut out[0..4]);
        self.flags.write(&mut out[4..8]);
        self.wire_bps.write(&mut out[8..16]);
    }
    fn read(b: &[u8]) -> Self {
        RuleAbi { kind: ne_u32(b, 0), flags: ne_u32(b, 4), wire_bps: ne_u64(b, 8) }
    }
}

/// `struct rule_stats`: the per-rule counters the program keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct RuleStats {
    /// Connections the rule paced.
    pub conns: u64,
    /// Successful `bpf_setsockopt` calls (one per connection for static,
    /// one per rate change for dynamic).
    pub updates: u64,
    /// Failed `bpf_setsockopt` calls.
    pub errors: u64,
    /// Payload bytes/s last set by this rule.
    pub last_rate: u64,
    /// Sockets the program itself set back to unlimited during a detach.
    pub released: u64,
}

impl Plain for RuleStats {
    const SIZE: usize = 40;
    fn write(&self, out: &mut [u8]) {
        self.conns.write(&mut out[0..8]);
        self.updates.write(&mut out[8..16]);
        self.errors.write(&mut out[16..24]);
        self.last_rate.write(&mut out[24..32]);
        self.released.write(&mut out[32..40]);
    }
    fn read(b: &[u8]) -> Self {
        RuleStats {
            conns: ne_u64(b, 0),
            updates: ne_u64(b, 8),
            errors: ne_u64(b, 16),
            last_rate: ne_u64(b, 24),
            released: ne_u64(b, 32),
        }
    }
}

/// `struct dst_key`: LPM trie key, port (network order, 0 = any) then the
/// IPv6 (or IPv4-mapped) address. `prefixlen` counts bits of port+address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DstKey {
    pub prefixlen: u32,
    pub port: u16,
    pub addr: [u8; 16],
}

impl Plain for DstKey {
    const SIZE: usize = 24;
    fn write(&self, out: &mut [u8]) {
        out.fill(0);
        self.prefixlen.write(&mut out[0..4]);
        out[4..6].copy_from_slice(&self.port.to_be_bytes());
        out[6..22].copy_from_slice(&self.addr);
    }
    fn read(b: &[u8]) -> Self {
        let mut addr = [0u8; 16];
        addr.copy_from_slice(&b[6..22]);
        DstKey { prefixlen: ne_u32(b, 0), port: u16::from_be_bytes([b[4], b[5]]), addr }
    }
}

/// `struct sock_state`: a socket the program paced (key: socket cookie).
/// Behind the first three fields the C struct holds `--hold`'s state, whose
/// pure twin is [`BpfHold`] (same fields, same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SockState {
    pub rule: u32,
    /// Payload bytes/s last set on the socket.
    pub rate: u32,
    pub updates: u64,
    /// RULE_HOLD only: the delivery-rate window, the cap, the full-pipe
    /// test and the bottleneck probe.
    pub hold: BpfHold,
}

impl Plain for SockState {
    const SIZE: usize = 120;
    fn write(&self, out: &mut [u8]) {
        let h = &self.hold;
        self.rule.write(&mut out[0..4]);
        self.rate.write(&mut out[4..8]);
        self.updates.write(&mut out[8..16]);
        let u64s = [h.win_start_ns, h.win_acked, h.dlv_rate, h.cap, h.cap_ns, h.full_dlv];
        for (k, v) in u64s.iter().enumerate() {
            v.write(&mut out[16 + 8 * k..24 + 8 * k]);
        }
        h.full_cnt.write(&mut out[64..68]);
        u32::from(h.full).write(&mut out[68..72]);
        let u64s = [h.train_ns, h.train_acked, h.last_ns, h.last_acked, h.btl_rate, h.btl_bytes];
        for (k, v) in u64s.iter().enumerate() {
            v.write(&mut out[72 + 8 * k..80 + 8 * k]);
        }
    }
    fn read(b: &[u8]) -> Self {
        let q = |at: usize| ne_u64(b, at);
        SockState {
            rule: ne_u32(b, 0),
            rate: ne_u32(b, 4),
            updates: q(8),
            hold: BpfHold {
                win_start_ns: q(16),
                win_acked: q(24),
                dlv_rate: q(32),
                cap: q(40),
                cap_ns: q(48),
                full_dlv: q(56),
                full_cnt: ne_u32(b, 64),
                full: ne_u32(b, 68) != 0,
                train_ns: q(72),
                train_acked: q(80),
                last_ns: q(88),
                last_acked: q(96),
                btl_rate: q(104),
                btl_bytes: q(112),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dst_key_layout_matches_the_c_struct() {
        // struct dst_key { u32 prefixlen; u8 port[2]; u8 addr[16]; } is 22
        // bytes, padded to 24 by its 4-byte alignment.
        let k = DstKey { prefixlen: 16 + 96 + 24, port: 5201, addr: [7; 16] };
        let mut b = [0xAAu8; 24];
        k.write(&mut b);
        assert_eq!(&b[4..6], &[0x14, 0x51]);
        assert_eq!(&b[22..], &[0, 0]);
        assert_eq!(DstKey::read(&b), k);
    }

    #[test]
    fn sock_state_layout_matches_the_c_struct() {
        // rule, rate (u32) and updates (u64); six u64 (window, delivery
        // rate, cap, its time, full_dlv); full_cnt and full (u32); six u64
        // (train, last ACK, estimate): 120 bytes, no padding.
        let hold =
            BpfHold { dlv_rate: 3, full_cnt: 2, full: true, train_ns: 5, btl_bytes: 9, ..BpfHold::default() };
        let s = SockState { rule: 7, rate: 11, updates: 13, hold };
        let mut b = [0xAAu8; 120];
        s.write(&mut b);
        assert_eq!((ne_u64(&b, 32), ne_u32(&b, 64), ne_u32(&b, 68)), (3, 2, 1));
        assert_eq!((ne_u64(&b, 72), ne_u64(&b, 112)), (5, 9));
        assert_eq!(SockState::read(&b), s);
    }
}
