//! The map keys and values of `bpf/pace.bpf.c`, as typed [`Plain`](tcpaccel_sys::bpf::Plain) values.
//!
//! Neither their byte layouts nor their conversions are written here:
//! `bpf/pace.abi.h` is the one table of every shared field (offset and C
//! type) and of the Rust type each struct maps to, the C program checks its
//! structs against it with `_Static_assert`, and crates/bpf-abi-gen
//! generates module [`c`] from it (`bpf/pace.abi.rs`, committed; the build
//! script fails when it is stale): the structs, and the conversions and
//! [`Plain`](tcpaccel_sys::bpf::Plain) of the types below. The conversions
//! destructure and build these types whole, so a field added, dropped,
//! renamed or retyped in the table does not compile until the type has it.

use tcpaccel_core::pacing::BpfHold;

/// The structs of `bpf/pace.abi.h`, field for field, and the conversions of
/// the types below (generated).
#[allow(dead_code)]
pub(crate) mod c {
    include!("../bpf/pace.abi.rs");
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

/// `struct rule`: what to do with a connection: `kind` (`RULE_*`),
/// `flags` (`RULE_HOLD`, `RULE_RELEASE`) and `wire_bps` (static: the rate;
/// dynamic: the ceiling, 0 for none; bits/s on the wire). The generated
/// struct itself (`PUB(rule)` in the table), so a field of the table is a
/// field here.
pub use c::Rule as RuleAbi;

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
    /// Their caps, summed (payload bytes/s): a held socket's share is at
    /// least what the others' caps leave of its estimate.
    pub held_cap: u64,
}

/// `struct dst_key`: LPM trie key, port (network order, 0 = any) then the
/// IPv6 (or IPv4-mapped) address. `prefixlen` counts bits of port+address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DstKey {
    pub prefixlen: u32,
    pub port: u16,
    pub addr: [u8; 16],
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
    /// `bytes_acked` when a segment-time callback last acted: the program
    /// skips one that sees no new bytes acked.
    pub seen_acked: u64,
    /// RULE_HOLD: this socket's part of its rule's [`RuleStats::held_cap`].
    pub held_cap: u64,
    /// What the rule last acted on (for a trace; the rule keeps none of
    /// it): the kernel's srtt and min_rtt in µs, cwnd and ssthresh in
    /// segments.
    pub seen_srtt_us: u32,
    pub seen_min_rtt_us: u32,
    pub seen_cwnd: u32,
    pub seen_ssthresh: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tcpaccel_bpf_abi_gen::{assert_round_trips, parse_table};
    use tcpaccel_sys::bpf::Plain;

    const TABLE: &str = include_str!("../bpf/pace.abi.h");
    const SOURCE: &str = include_str!("../bpf/pace.bpf.c");

    #[test]
    fn the_program_checks_its_structs_against_the_table_the_rust_side_is_built_from() {
        // The C side of the single source: the program includes the table
        // and expands its assertions once. Without that line the C structs
        // could drift from the table unnoticed.
        assert!(SOURCE.contains("#include \"pace.abi.h\""));
        assert!(SOURCE.contains("PACE_ABI(TCPACCEL_ABI_CHECK)"));
        let structs = parse_table(TABLE).unwrap();
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
    fn keys_and_values_land_at_the_tables_offsets() {
        // Offsets from the table, not from a copy of them: a value written
        // through Plain is read back field by field where the table puts it.
        let table = parse_table(TABLE).unwrap();
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
        let s = SockState {
            rule: 7,
            rate: 11,
            updates: 13,
            hold,
            seen_acked: 17,
            held_cap: 19,
            seen_srtt_us: 23,
            seen_min_rtt_us: 29,
            seen_cwnd: 31,
            seen_ssthresh: 37,
        };
        let mut b = vec![0xAAu8; SockState::SIZE];
        s.write(&mut b);
        let at = |f: &str| b[field("sock_state", f)].to_vec();
        assert_eq!(at("dlv_rate"), 3u64.to_ne_bytes());
        assert_eq!(at("full"), 1u32.to_ne_bytes());
        assert_eq!(at("btl_bytes"), 9u64.to_ne_bytes());
        assert_eq!(at("seen_acked"), 17u64.to_ne_bytes());
        assert_eq!(at("held_cap"), 19u64.to_ne_bytes());
        assert_eq!(at("seen_min_rtt_us"), 29u32.to_ne_bytes());
        assert_eq!(at("seen_ssthresh"), 37u32.to_ne_bytes());
        assert_eq!(SockState::read(&b), s);
    }

    proptest! {
        #[test]
        fn every_field_round_trips_through_the_domain_types(
            b in proptest::collection::vec(any::<u8>(), 256),
        ) {
            assert_round_trips(TABLE, "rule", &b[..RuleAbi::SIZE], RuleAbi::read, RuleAbi::write);
            assert_round_trips(TABLE, "rule_stats", &b[..RuleStats::SIZE], RuleStats::read, RuleStats::write);
            assert_round_trips(TABLE, "dst_key", &b[..DstKey::SIZE], DstKey::read, DstKey::write);
            assert_round_trips(TABLE, "sock_state", &b[..SockState::SIZE], SockState::read, SockState::write);
        }
    }
}
