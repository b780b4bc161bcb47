//! The map keys and values of `bpf/pace.bpf.c`, as typed [`Plain`] values.
//!
//! Their byte layouts are not written here: `bpf/pace.abi.h` is the one
//! table of every shared field (offset and C type), the C program checks its
//! structs against it with `_Static_assert`, and the build script generates
//! module [`c`] from it (bpf/abi_gen.rs). Each type below converts to and
//! from its generated struct by struct literal, so a field added, dropped,
//! renamed or retyped in the table does not compile until it is handled
//! here.

use tcpaccel_core::pacing::BpfHold;
use tcpaccel_sys::bpf::Plain;

/// The structs of `bpf/pace.abi.h`, field for field (generated).
#[allow(dead_code)]
pub(crate) mod c {
    include!(concat!(env!("OUT_DIR"), "/pace.abi.rs"));
}

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
    const SIZE: usize = c::Rule::SIZE;
    fn write(&self, out: &mut [u8]) {
        c::Rule { kind: self.kind, flags: self.flags, wire_bps: self.wire_bps }.write(out);
    }
    fn read(b: &[u8]) -> Self {
        let c::Rule { kind, flags, wire_bps } = c::Rule::read(b);
        RuleAbi { kind, flags, wire_bps }
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
    /// Open sockets past `--hold`'s probe (what it divides its bottleneck
    /// estimate by); 0 without `--hold`.
    pub held: u64,
}

impl Plain for RuleStats {
    const SIZE: usize = c::RuleStats::SIZE;
    fn write(&self, out: &mut [u8]) {
        let RuleStats { conns, updates, errors, last_rate, released, held } = *self;
        c::RuleStats { conns, updates, errors, last_rate, released, held }.write(out);
    }
    fn read(b: &[u8]) -> Self {
        let c::RuleStats { conns, updates, errors, last_rate, released, held } = c::RuleStats::read(b);
        RuleStats { conns, updates, errors, last_rate, released, held }
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
    const SIZE: usize = c::DstKey::SIZE;
    fn write(&self, out: &mut [u8]) {
        c::DstKey { prefixlen: self.prefixlen, port: self.port.to_be_bytes(), addr: self.addr, pad: [0; 2] }
            .write(out);
    }
    fn read(b: &[u8]) -> Self {
        let c::DstKey { prefixlen, port, addr, pad: _ } = c::DstKey::read(b);
        DstKey { prefixlen, port: u16::from_be_bytes(port), addr }
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
    const SIZE: usize = c::SockState::SIZE;
    fn write(&self, out: &mut [u8]) {
        let BpfHold {
            win_start_ns,
            win_acked,
            dlv_rate,
            cap,
            cap_ns,
            full_dlv,
            full_cnt,
            full,
            train_ns,
            train_acked,
            last_ns,
            last_acked,
            btl_rate,
            btl_bytes,
        } = self.hold;
        c::SockState {
            rule: self.rule,
            rate: self.rate,
            updates: self.updates,
            win_start_ns,
            win_acked,
            dlv_rate,
            cap,
            cap_ns,
            full_dlv,
            full_cnt,
            full: u32::from(full),
            train_ns,
            train_acked,
            last_ns,
            last_acked,
            btl_rate,
            btl_bytes,
        }
        .write(out);
    }
    fn read(b: &[u8]) -> Self {
        let c::SockState {
            rule,
            rate,
            updates,
            win_start_ns,
            win_acked,
            dlv_rate,
            cap,
            cap_ns,
            full_dlv,
            full_cnt,
            full,
            train_ns,
            train_acked,
            last_ns,
            last_acked,
            btl_rate,
            btl_bytes,
        } = c::SockState::read(b);
        SockState {
            rule,
            rate,
            updates,
            hold: BpfHold {
                win_start_ns,
                win_acked,
                dlv_rate,
                cap,
                cap_ns,
                full_dlv,
                full_cnt,
                full: full != 0,
                train_ns,
                train_acked,
                last_ns,
                last_acked,
                btl_rate,
                btl_bytes,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator, on the real table and on broken ones.
    #[allow(dead_code)]
    mod abi_gen {
        include!("../../../bpf/abi_gen.rs");
    }

    const TABLE: &str = include_str!("../bpf/pace.abi.h");
    const SOURCE: &str = include_str!("../bpf/pace.bpf.c");

    #[test]
    fn the_program_checks_its_structs_against_the_table_the_rust_side_is_built_from() {
        // The C side of the single source: the program includes the table
        // and expands its assertions once. Without that line the C structs
        // could drift from the table unnoticed.
        assert!(SOURCE.contains("#include \"pace.abi.h\""));
        assert!(SOURCE.contains("PACE_ABI(TCPACCEL_ABI_CHECK)"));
        let structs = abi_gen::parse_abi(TABLE).unwrap();
        let names: Vec<(&str, usize)> = structs.iter().map(|s| (s.name.as_str(), s.size)).collect();
        assert_eq!(
            names,
            [
                ("rule", RuleAbi::SIZE),
                ("rule_stats", RuleStats::SIZE),
                ("dst_key", DstKey::SIZE),
                ("sock_state", SockState::SIZE)
            ]
        );
        for s in &structs {
            assert!(
                SOURCE.contains(&format!("struct {} {{", s.name)),
                "pace.bpf.c defines struct {}",
                s.name
            );
        }
    }

    #[test]
    fn a_table_with_a_gap_an_overlap_or_a_wrong_size_is_refused() {
        let good = "S(x, 16)\nF(x, a, 0, __u32)\nF(x, b, 4, __u8[4])\nF(x, c, 8, __s64)\n";
        let s = abi_gen::parse_abi(good).unwrap();
        assert_eq!(s[0].fields.iter().map(|f| f.size()).collect::<Vec<_>>(), [4, 4, 8]);
        for (bad, why) in [
            (good.replace("F(x, b, 4,", "F(x, b, 5,"), "a gap"),
            (good.replace("F(x, b, 4,", "F(x, b, 2,"), "an overlap"),
            (good.replace("S(x, 16)", "S(x, 24)"), "fields short of the size"),
            (good.replace("__s64", "__f64"), "an unknown type"),
            (good.replace("F(x, c,", "F(y, c,"), "a struct without S()"),
        ] {
            assert!(abi_gen::parse_abi(&bad).is_err(), "{why} passed");
        }
    }

    #[test]
    fn keys_and_values_land_at_the_tables_offsets() {
        // Offsets from the table, not from a copy of them: a value written
        // through Plain is read back field by field where the table puts it.
        let table = abi_gen::parse_abi(TABLE).unwrap();
        let field = |st: &str, f: &str| {
            let s = table.iter().find(|s| s.name == st).unwrap();
            let f = s.fields.iter().find(|x| x.name == f).unwrap();
            f.offset..f.offset + f.size()
        };
        let k = DstKey { prefixlen: 16 + 96 + 24, port: 5201, addr: [7; 16] };
        let mut b = [0xAAu8; 24];
        k.write(&mut b);
        assert_eq!(&b[field("dst_key", "port")], &5201u16.to_be_bytes(), "port in network order");
        assert_eq!(&b[field("dst_key", "addr")], &[7; 16]);
        assert_eq!(&b[field("dst_key", "pad")], &[0, 0], "padding zeroed: it is part of the trie key");
        assert_eq!(DstKey::read(&b), k);

        let hold =
            BpfHold { dlv_rate: 3, full_cnt: 2, full: true, train_ns: 5, btl_bytes: 9, ..BpfHold::default() };
        let s = SockState { rule: 7, rate: 11, updates: 13, hold };
        let mut b = [0xAAu8; 120];
        s.write(&mut b);
        let at = |f: &str| b[field("sock_state", f)].to_vec();
        assert_eq!(at("dlv_rate"), 3u64.to_ne_bytes());
        assert_eq!(at("full"), 1u32.to_ne_bytes());
        assert_eq!(at("btl_bytes"), 9u64.to_ne_bytes());
        assert_eq!(SockState::read(&b), s);
    }
}
