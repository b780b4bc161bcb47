/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The one source of the layouts lanes.bpf.c shares with crates/lanes: every
 * struct the daemon reads or writes, every field as (struct, field, offset,
 * C type). lanes.bpf.c checks its structs against this table
 * (_Static_assert, bpf/include/tcpaccel_bpf.h); crates/bpf-abi-gen
 * generates the Rust side from it (lanes.abi.rs, checked by
 * crates/lanes/build.rs), so crates/lanes stops compiling when a field is
 * added, dropped, renamed or retyped here and not in its Rust type.
 * Changing a struct means changing this table, then both sides.
 */
#ifndef LANES_ABI_H
#define LANES_ABI_H

#define LANES_ABI(S)          \
	S(lanes_cfg, 88)      \
	S(pair_key, 32)       \
	S(lane_val, 8)        \
	S(lane_sample, 16)    \
	S(lanes_event, 96)    \
	S(lanes_stats, 32)

#define ABI_FIELDS_lanes_cfg(F)                   \
	F(lanes_cfg, netns_cookie, 0, __u64)      \
	F(lanes_cfg, size_threshold, 8, __u64)    \
	F(lanes_cfg, t_deadline_us, 16, __u64)    \
	F(lanes_cfg, nu_unit_us, 24, __u64)       \
	F(lanes_cfg, t0_fp, 32, __u64)            \
	F(lanes_cfg, alpha_fp, 40, __u64)         \
	F(lanes_cfg, gamma_fp, 48, __u64)         \
	F(lanes_cfg, policy, 56, __u32)           \
	F(lanes_cfg, beta, 60, __u32)             \
	F(lanes_cfg, delta, 64, __u32)            \
	F(lanes_cfg, per_lane_base, 68, __u32)    \
	F(lanes_cfg, ll_mask, 72, __u32)          \
	F(lanes_cfg, enabled, 76, __u32)          \
	F(lanes_cfg, passive, 80, __u32)          \
	F(lanes_cfg, pad, 84, __u32)

#define ABI_FIELDS_pair_key(F)              \
	F(pair_key, local, 0, __u8[16])     \
	F(pair_key, remote, 16, __u8[16])

#define ABI_FIELDS_lane_val(F)          \
	F(lane_val, slot, 0, __u32)     \
	F(lane_val, kind, 4, __u32)

#define ABI_FIELDS_lane_sample(F)          \
	F(lane_sample, seq, 0, __u64)      \
	F(lane_sample, rtt_us, 8, __u32)   \
	F(lane_sample, pad, 12, __u32)

#define ABI_FIELDS_lanes_event(F)                \
	F(lanes_event, kind, 0, __u32)           \
	F(lanes_event, slot, 4, __u32)           \
	F(lanes_event, age_us, 8, __u64)         \
	F(lanes_event, bytes, 16, __u64)         \
	F(lanes_event, cost_sl, 24, __s64)       \
	F(lanes_event, cost_ll, 32, __s64)       \
	F(lanes_event, have_costs, 40, __u32)    \
	F(lanes_event, family, 44, __u32)        \
	F(lanes_event, local, 48, __u8[16])      \
	F(lanes_event, remote, 64, __u8[16])     \
	F(lanes_event, lport, 80, __u16)         \
	F(lanes_event, rport, 82, __u16)         \
	F(lanes_event, pad, 84, __u32)           \
	F(lanes_event, ktime_ns, 88, __u64)

#define ABI_FIELDS_lanes_stats(F)              \
	F(lanes_stats, acks, 0, __u64)         \
	F(lanes_stats, events, 8, __u64)       \
	F(lanes_stats, dropped, 16, __u64)     \
	F(lanes_stats, subflows, 24, __u64)

/*
 * The Rust side's domain types (crates/bpf-abi-gen; the C program never
 * expands this list): each struct converts to and from the Rust type named
 * by RUST, field by field under the same name, except where a line says
 * otherwise (the vocabulary is in crates/bpf-abi-gen/src/lib.rs).
 * lanes_event has none: crates/lanes decodes it with the lane slots
 * (parse_event).
 */
#define LANES_RUST                                                                                   \
	RUST(lanes_cfg, crate::bpf::CfgAbi)                                                          \
	NEST(lanes_cfg, params, tcpaccel_core::lanes::bpf::BpfParams, size_threshold, per_lane_base) \
	AS_BOOL(lanes_cfg, per_lane_base)                                                            \
	AS_BOOL(lanes_cfg, enabled)                                                                  \
	AS_BOOL(lanes_cfg, passive)                                                                  \
	PAD(lanes_cfg, pad)                                                                          \
	RUST(pair_key, crate::bpf::PairKey)                                                          \
	WITH(pair_key, local, crate::bpf::ip16)                                                      \
	WITH(pair_key, remote, crate::bpf::ip16)                                                     \
	RUST(lane_val, crate::bpf::LaneVal)                                                          \
	RENAME(lane_val, kind, long)                                                                 \
	AS_BOOL(lane_val, kind)                                                                      \
	RUST(lane_sample, crate::bpf::LaneSampleAbi)                                                 \
	PAD(lane_sample, pad)                                                                        \
	RUST(lanes_stats, crate::bpf::Stats, default)

#endif
