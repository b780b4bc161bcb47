/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * The one source of the layouts lanes.bpf.c shares with crates/lanes: every
 * struct the daemon reads or writes, every field as (struct, field, offset,
 * C type). lanes.bpf.c checks its structs against this table
 * (_Static_assert, bpf/include/tcpaccel_bpf.h); crates/lanes/build.rs
 * generates the Rust side from it (bpf/abi_gen.rs), so src/bpf.rs stops
 * compiling when a field is added, dropped, renamed or retyped here.
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

#endif
