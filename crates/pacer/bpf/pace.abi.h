/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The one source of the layouts pace.bpf.c shares with crates/pacer: every
 * struct user space reads or writes, every field as (struct, field, offset,
 * C type). pace.bpf.c checks its structs against this table
 * (_Static_assert, bpf/include/tcpaccel_bpf.h); crates/bpf-abi-gen
 * generates the Rust side from it (pace.abi.rs, checked by
 * crates/pacer/build.rs), so crates/pacer stops compiling when a field is
 * added, dropped, renamed or retyped here and not in its Rust type.
 * Changing a struct means changing this table, then both sides.
 */
#ifndef PACE_ABI_H
#define PACE_ABI_H

#define PACE_ABI(S)           \
	S(rule, 16)           \
	S(rule_stats, 56)     \
	S(dst_key, 24)        \
	S(sock_state, 224)

#define ABI_FIELDS_rule(F)              \
	F(rule, kind, 0, __u32)         \
	F(rule, flags, 4, __u32)        \
	F(rule, wire_bps, 8, __u64)

#define ABI_FIELDS_rule_stats(F)              \
	F(rule_stats, conns, 0, __u64)        \
	F(rule_stats, updates, 8, __u64)      \
	F(rule_stats, errors, 16, __u64)      \
	F(rule_stats, last_rate, 24, __u64)   \
	F(rule_stats, released, 32, __u64)    \
	F(rule_stats, held, 40, __u64)        \
	F(rule_stats, held_cap, 48, __u64)

#define ABI_FIELDS_dst_key(F)               \
	F(dst_key, prefixlen, 0, __u32)     \
	F(dst_key, port, 4, __u8[2])        \
	F(dst_key, addr, 6, __u8[16])       \
	F(dst_key, pad, 22, __u8[2])

#define ABI_FIELDS_sock_state(F)                   \
	F(sock_state, rule, 0, __u32)              \
	F(sock_state, rate, 4, __u32)              \
	F(sock_state, updates, 8, __u64)           \
	F(sock_state, win_start_ns, 16, __u64)     \
	F(sock_state, win_acked, 24, __u64)        \
	F(sock_state, dlv_rate, 32, __u64)         \
	F(sock_state, cap, 40, __u64)              \
	F(sock_state, cap_ns, 48, __u64)           \
	F(sock_state, full_dlv, 56, __u64)         \
	F(sock_state, full_cnt, 64, __u32)         \
	F(sock_state, full, 68, __u32)             \
	F(sock_state, train_ns, 72, __u64)         \
	F(sock_state, train_acked, 80, __u64)      \
	F(sock_state, last_ns, 88, __u64)          \
	F(sock_state, last_acked, 96, __u64)       \
	F(sock_state, btl_rate, 104, __u64)        \
	F(sock_state, btl_bytes, 112, __u64)       \
	F(sock_state, win_cap, 120, __u64)         \
	F(sock_state, last_cap, 128, __u64)        \
	F(sock_state, undo_cap, 136, __u64)        \
	F(sock_state, undo_ns, 144, __u64)         \
	F(sock_state, sent_cap, 152, __u64)        \
	F(sock_state, win_nxt, 160, __u32)         \
	F(sock_state, fill, 164, __u32)            \
	F(sock_state, allow, 168, __u64)           \
	F(sock_state, out_rate, 176, __u64)        \
	F(sock_state, out_ns, 184, __u64)          \
	F(sock_state, seen_acked, 192, __u64)      \
	F(sock_state, held_cap, 200, __u64)        \
	F(sock_state, seen_srtt_us, 208, __u32)    \
	F(sock_state, seen_min_rtt_us, 212, __u32) \
	F(sock_state, seen_cwnd, 216, __u32)       \
	F(sock_state, seen_ssthresh, 220, __u32)

/*
 * The Rust side's domain types (crates/bpf-abi-gen; the C program never
 * expands this list): each struct converts to and from the Rust type named
 * by RUST, field by field under the same name, except where a line says
 * otherwise (the vocabulary is in crates/bpf-abi-gen/src/lib.rs); PUB:
 * the generated struct is the Rust type (rule is crate::abi::RuleAbi). A field
 * added to sock_state between win_start_ns and out_ns is a field of
 * tcpaccel_core::pacing::BpfHold, the program's pure twin.
 */
#define PACE_RUST                                                                       \
	PUB(rule)                                                                       \
	RUST(rule_stats, crate::abi::RuleStats)                                         \
	RUST(dst_key, crate::abi::DstKey)                                               \
	AS_BE(dst_key, port)                                                            \
	PAD(dst_key, pad)                                                               \
	RUST(sock_state, crate::abi::SockState)                                         \
	NEST(sock_state, hold, tcpaccel_core::pacing::BpfHold, win_start_ns, out_ns)   \
	AS_BOOL(sock_state, full)

#endif
