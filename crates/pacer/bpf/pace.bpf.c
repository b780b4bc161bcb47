// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * tcpaccel pace: a cgroup sock_ops program that caps the pacing rate
 * (SO_MAX_PACING_RATE) of every TCP connection of the cgroup, MPTCP
 * subflows included.
 *
 * Rules come from user space (crates/pacer): a default rule (index 0) and
 * per-destination rules found through an LPM trie keyed by remote port and
 * address. A rule is static (a fixed on-wire rate) or dynamic (seed 000
 * eq. 1, cwnd * mss / RTT, recomputed where an ACK's progress shows).
 * A program sees few ACKs as such: BPF_SOCK_OPS_PARSE_HDR_OPT_CB (with
 * BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG) runs from tcp_validate_incoming,
 * which header prediction skips, with the socket's fields of before the
 * segment; ACKs that keep the advertised window take the fast path, and
 * in a steady transfer that is all of them (measured: 0 parse callbacks
 * for 5 s of a 100 Mbit/s transfer; BPF_SOCK_OPS_RTT_CB 4-5 per 0.5 s at
 * 100 ms; docs/notes/2026-11-29-hold-callbacks-and-pulses.md). So the
 * program also runs for every segment the socket sends
 * (BPF_SOCK_OPS_HDR_OPT_LEN_CB with BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG,
 * reserving no option space), with the socket's fields after the ACKs
 * received so far: an ACK-clocked sender sends on each ACK, a
 * kernel-paced one at its pacing times. Of those callbacks it acts on the
 * ones that see new bytes acked (sock_state.seen_acked).
 * Rates are given on the wire and turned into payload
 * bytes per second here, per socket, with the socket's own MSS: the pure
 * twin of this arithmetic is tcpaccel_core::pacing::bpf_payload_rate and
 * bpf_dynamic_rate, tested exactly there. Keep the two in step.
 *
 * No globals, no subprograms, no BTF: the loader in crates/sys/src/bpf.rs
 * handles classic "maps" definitions and map relocations only.
 */
#include "tcpaccel_bpf.h"
#include "pace.abi.h"

#define MAX_RULES 64
/* SO_MAX_PACING_RATE takes a 4-byte int through bpf_setsockopt; ~0U means
 * unlimited, so the largest cap is one below. */
#define RATE_MAX 0xFFFFFFFEu
/* ~0U: no cap. Unlike any other value it leaves the kernel's internal
 * pacing off on a socket that never had a cap (net/core/sock.c). */
#define RATE_UNPACED 0xFFFFFFFFu
/* Never pace a dynamic socket below this (bytes/s), so a tiny early window
 * cannot stall it: core's DynamicConfig::default().floor. */
#define DYNAMIC_FLOOR 12500u

enum rule_kind { RULE_NONE = 0, RULE_STATIC = 1, RULE_DYNAMIC = 2 };

/* rule.flags: cap dynamic pacing by the measured delivery rate (below). */
#define RULE_HOLD 1u
/* rule.flags: detach is under way. New connections are left alone, and a
 * socket the rule paced gets its cap lifted (set to unlimited) on its next
 * RTT sample: the way to reach what no file descriptor leads to (MPTCP
 * subflows), since a socket keeps its cap after the program is gone. */
#define RULE_RELEASE 2u

struct rule {
	__u32 kind;
	__u32 flags;
	/* Static: the rate. Dynamic: the ceiling, 0 for none. Bits/s on the wire. */
	__u64 wire_bps;
};

struct rule_stats {
	__u64 conns;      /* connections this rule paced */
	__u64 updates;    /* bpf_setsockopt calls that succeeded */
	__u64 errors;     /* bpf_setsockopt calls that failed */
	__u64 last_rate;  /* payload bytes/s last set */
	__u64 released;   /* sockets this program set back to unlimited (RULE_RELEASE) */
	__u64 held;       /* open sockets past --hold's probe (what it shares its estimate among) */
	__u64 held_cap;   /* their caps, summed (payload bytes/s; sock_state.held_cap each) */
};

struct dst_key {
	__u32 prefixlen;
	__u8 port[2];     /* network order; 0 = any port */
	__u8 addr[16];    /* IPv6, or IPv4 mapped as ::ffff:a.b.c.d */
	__u8 pad[2];      /* zero; beyond every prefix */
};

struct sock_state {
	__u32 rule;
	__u32 rate;       /* payload bytes/s last set on this socket */
	__u64 updates;
	/* Delivery-rate window (RULE_HOLD): start time and bytes_acked then. */
	__u64 win_start_ns;
	__u64 win_acked;
	__u64 dlv_rate;   /* payload bytes/s acked over the last window of one srtt */
	/* RULE_HOLD: the cap (payload bytes/s), grown in time while it binds,
	 * and when it was last grown. */
	__u64 cap;
	__u64 cap_ns;
	/* RULE_HOLD's full-pipe test: the delivery rate of the last window
	 * that grew by 1/8 or more, the windows with a queue since, and
	 * whether the pipe was found full (then growth is 33/32 per srtt). */
	__u64 full_dlv;
	__u32 full_cnt;
	__u32 full;
	/* RULE_HOLD's bottleneck estimate from the ACK trains of slow start's
	 * first, unpaced windows: the train being measured (its first ACK's
	 * time and bytes_acked, its last ACK's), and the estimate (payload
	 * bytes/s) from the train with the most bytes so far. */
	__u64 train_ns;
	__u64 train_acked;
	__u64 last_ns;
	__u64 last_acked;
	__u64 btl_rate;
	__u64 btl_bytes;
	/* RULE_HOLD: the cap when the current delivery window started, when
	 * the last one (dlv_rate's) started, and when the one before that
	 * started: the cap the last window's bytes were sent under. */
	__u64 win_cap;
	__u64 last_cap;
	/* RULE_HOLD: the cap before the last cut while the cut may be undone
	 * (0: none), and when the cut was made. */
	__u64 undo_cap;
	__u64 undo_ns;
	__u64 sent_cap;
	/* RULE_HOLD: snd_nxt when the current delivery window started, and
	 * the share (1/1024ths) of what its caps allowed that the socket sent
	 * in the last window (0 until known; 1024 where it sent less than
	 * half, or some of the window was unpaced, or the estimate is
	 * unsure); the bytes the caps
	 * returned allowed since the window started (~0: some unpaced), the
	 * last cap returned and when. */
	__u32 win_nxt;
	__u32 fill;
	__u64 allow;
	__u64 out_rate;
	__u64 out_ns;
	/* bytes_acked when a segment-time callback last ran the rule: a
	 * segment sent (HDR_OPT_LEN_CB) or received (PARSE_HDR_OPT_CB) with no
	 * ACK progress since is skipped (on_ack). */
	__u64 seen_acked;
	/* RULE_HOLD: this socket's part of its rule's stats->held_cap (its cap
	 * when it last added it; 0 before its probe ended). */
	__u64 held_cap;
	/* What the rule last acted on, for user space's trace only: srtt and
	 * min_rtt (µs), cwnd and ssthresh (segments). */
	__u32 seen_srtt_us;
	__u32 seen_min_rtt_us;
	__u32 seen_cwnd;
	__u32 seen_ssthresh;
};

/* The structs above against the ABI table (pace.abi.h). */
PACE_ABI(TCPACCEL_ABI_CHECK)

struct map_def SEC("maps") pace_rules = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct rule),
	.max_entries = MAX_RULES,
};

struct map_def SEC("maps") pace_stats = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct rule_stats),
	.max_entries = MAX_RULES,
};

struct map_def SEC("maps") pace_dst = {
	.type = BPF_MAP_TYPE_LPM_TRIE,
	.key_size = sizeof(struct dst_key),
	.value_size = sizeof(__u32),
	.max_entries = MAX_RULES,
	.flags = BPF_F_NO_PREALLOC,
};

/* Sockets this program paced, by socket cookie: what `detach` releases. */
struct map_def SEC("maps") pace_socks = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct sock_state),
	.max_entries = 65536,
};

static __always_inline __u32 clamp_rate(__u64 r)
{
	return r > RATE_MAX ? RATE_MAX : (__u32)r;
}

/* TCP option bytes an MPTCP subflow's data segment carries beyond the
 * timestamps: a DSS option with a 64-bit data ACK and a 64-bit mapping
 * (4 + 8 + 14), padded to 28. mss_cache does not count them (the kernel
 * takes them off per segment), so a subflow's segments carry that much less
 * payload in a frame of the same size. */
#define MPTCP_DSS_BYTES 28

/* Payload bytes/s of full segments that fill `wire_bps` on an Ethernet
 * wire: IP + TCP with timestamps (Linux's default) + 38 bytes of Ethernet
 * header, FCS, preamble and gap; the traffic tool's static:RATE. `opts`:
 * option bytes each segment carries beyond that (MPTCP_DSS_BYTES on a
 * subflow), which come out of the payload, not on top of the frame. */
static __always_inline __u64 payload_rate(__u64 wire_bps, __u32 mss, int v6, __u32 opts)
{
	if (mss == 0)
		mss = 1448;
	__u64 frame = (__u64)mss + (v6 ? 40 : 20) + 32 + 38;
	__u64 payload = mss > opts ? mss - opts : 1;
	return wire_bps * payload / (8 * frame);
}

/* MPTCP_DSS_BYTES on an MPTCP subflow, 0 on a plain TCP socket. */
static __always_inline __u32 extra_opts(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;

	if (!sk)
		return 0;
	return bpf_skc_to_mptcp_sock(sk) ? MPTCP_DSS_BYTES : 0;
}

/* seed 000 eq. (1): cwnd * mss / RTT, with RTT = max(srtt, min_rtt) (the
 * sender's own queueing is zero with the kernel's internal pacing: see
 * core's bpf_dynamic_rate), floored and capped by the ceiling. */
static __always_inline __u64 dynamic_rate(struct bpf_sock_ops *skops, __u32 cwnd, __u64 ceiling)
{
	__u32 srtt = skops->srtt_us >> 3;
	__u32 min_rtt = skops->rtt_min;
	__u32 rtt = srtt > min_rtt ? srtt : min_rtt;
	__u32 mss = skops->mss_cache;
	__u64 rate;

	if (rtt == 0 || cwnd == 0 || mss == 0)
		return ceiling ? ceiling : RATE_MAX;
	rate = (__u64)cwnd * mss * 1000000 / rtt;
	if (ceiling && rate > ceiling)
		return ceiling;
	if (rate < DYNAMIC_FLOOR)
		return ceiling && ceiling < DYNAMIC_FLOOR ? ceiling : DYNAMIC_FLOOR;
	return rate;
}

static __always_inline __u32 find_rule(struct bpf_sock_ops *skops)
{
	struct dst_key key = {};
	__u32 *idx;

	if (!tcpaccel_remote_addr(skops, key.addr))
		return 0;
	/* A rule naming the port wins over one without. remote_port holds
	 * the network-order port in its upper 16 bits on little-endian hosts
	 * (the kernel shifts it there; net/core/filter.c, sock_ops ctx access). */
	__u32 port = skops->remote_port >> 16;
	__builtin_memcpy(key.port, &port, 2);
	key.prefixlen = 16 + 128;
	idx = bpf_map_lookup_elem(&pace_dst, &key);
	if (!idx) {
		key.port[0] = 0;
		key.port[1] = 0;
		idx = bpf_map_lookup_elem(&pace_dst, &key);
	}
	return idx ? *idx : 0;
}

static __always_inline void set_rate(struct bpf_sock_ops *skops, __u32 rule_idx,
				     struct sock_state *st, __u32 rate)
{
	struct rule_stats *stats = bpf_map_lookup_elem(&pace_stats, &rule_idx);
	int value = (int)rate;
	long err = bpf_setsockopt(skops, SOL_SOCKET, SO_MAX_PACING_RATE, &value, sizeof(value));

	if (!stats)
		return;
	if (err) {
		__sync_fetch_and_add(&stats->errors, 1);
		return;
	}
	__sync_fetch_and_add(&stats->updates, 1);
	stats->last_rate = rate;
	st->rate = rate;
	st->updates++;
}

/* The rule's rate; for a dynamic rule eq. 1 with `cwnd`. */
static __always_inline __u32 rule_rate_cwnd(struct bpf_sock_ops *skops, struct rule *r, __u32 cwnd)
{
	int v6 = skops->family == AF_INET6;
	__u64 wire = r->wire_bps;
	__u32 opts = wire ? extra_opts(skops) : 0;

	if (r->kind == RULE_STATIC) {
		__u64 p = payload_rate(wire, skops->mss_cache, v6, opts);
		return clamp_rate(p ? p : 1);
	}
	__u64 ceiling = wire ? payload_rate(wire, skops->mss_cache, v6, opts) : 0;
	if (wire && ceiling == 0)
		ceiling = 1;
	return clamp_rate(dynamic_rate(skops, cwnd, ceiling));
}

static __always_inline __u32 rule_rate(struct bpf_sock_ops *skops, struct rule *r)
{
	return rule_rate_cwnd(skops, r, skops->snd_cwnd);
}

static __always_inline void on_established(struct bpf_sock_ops *skops)
{
	__u32 idx = find_rule(skops);
	struct rule *r = bpf_map_lookup_elem(&pace_rules, &idx);
	struct sock_state st = { .rule = idx };
	struct rule_stats *stats;
	__u64 cookie;

	if (!r || r->kind == RULE_NONE || (r->flags & RULE_RELEASE))
		return;
	/* --hold leaves slow start's first windows unpaced (hold_cap). */
	set_rate(skops, idx, &st, r->kind == RULE_DYNAMIC && (r->flags & RULE_HOLD) ? RATE_UNPACED : rule_rate(skops, r));
	if (st.updates == 0)
		return;
	stats = bpf_map_lookup_elem(&pace_stats, &idx);
	if (stats)
		__sync_fetch_and_add(&stats->conns, 1);
	cookie = bpf_get_socket_cookie(skops);
	bpf_map_update_elem(&pace_socks, &cookie, &st, BPF_ANY);
	/* RTT callbacks (once per round trip) for static sockets too: only so
	 * that a detach can release them (RULE_RELEASE) where no file
	 * descriptor reaches. Dynamic ones run on every segment sent as well
	 * (HDR_OPT_LEN_CB; the program reserves no option space), which is
	 * where the socket sees an ACK's progress in a steady transfer, and on
	 * every segment received that takes the slow path (PARSE_HDR_OPT_CB):
	 * the kernel skips the segment-sent callback where the options leave
	 * no room (timestamps, SACK blocks, an MPTCP subflow's DSS). */
	bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG |
				  (r->kind == RULE_DYNAMIC ? BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG |
				   BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG : 0));
}

/* A socket past --hold's probe leaves: its rule's count of held sockets
 * drops by one. */
static __always_inline void unhold(struct sock_state *st)
{
	__u32 idx = st->rule;
	struct rule_stats *stats;

	if (!st->cap)
		return;
	stats = bpf_map_lookup_elem(&pace_stats, &idx);
	if (stats) {
		__sync_fetch_and_add(&stats->held, -1);
		__sync_fetch_and_add(&stats->held_cap, -st->held_cap);
	}
}

/* RULE_RELEASE: lift the cap, forget the socket and stop its callbacks. */
static __always_inline void release(struct bpf_sock_ops *skops, __u32 rule_idx, __u64 cookie)
{
	struct rule_stats *stats = bpf_map_lookup_elem(&pace_stats, &rule_idx);
	struct sock_state *st;
	int unlimited = -1; /* ~0U: the kernel's "no cap" */

	if (bpf_setsockopt(skops, SOL_SOCKET, SO_MAX_PACING_RATE, &unlimited, sizeof(unlimited))) {
		if (stats)
			__sync_fetch_and_add(&stats->errors, 1);
		return;
	}
	if (stats)
		__sync_fetch_and_add(&stats->released, 1);
	st = bpf_map_lookup_elem(&pace_socks, &cookie);
	if (st)
		unhold(st);
	bpf_map_delete_elem(&pace_socks, &cookie);
	bpf_sock_ops_cb_flags_set(skops, 0);
}

/* RULE_HOLD, against slow-start and probing overshoot into a small buffer
 * (issue 17 item 5). Pure twin: core's BpfHold, tested exactly; keep the
 * two in step.
 *
 * With a buffer of 0.16 BDP and one RTT before a queue shows in the ACKs,
 * a rate may grow by about 1/8 per RTT near the bottleneck's rate without
 * overfilling it, but growing that slowly all the way from slow start's
 * first windows takes seconds on a long fat path. So the program first
 * measures the bottleneck, then grows fast below half of it and slowly
 * above:
 * - Probe: while cwnd is below HOLD_LOW_WINDOW (or 1/HOLD_PROBE_BDP_DIV
 *   of the estimated BDP, if more) in slow start the socket stays
 *   unpaced, so each window leaves as a burst and comes back as a
 *   train of ACKs spaced by the bottleneck (packet-train dispersion: the
 *   bottleneck spaces a burst by its serialization time). The train with
 *   the most bytes among those that came back faster than slow start's
 *   own pacing rate (hold_end_train) gives the estimate: bytes acked
 *   from its first ACK to its last over the time between them; ACKs more than
 *   HOLD_TRAIN_GAP_US apart end a train, and so does the end of the probe
 *   (the window in which the probe ends is the longest
 *   train, and a probe whose earlier trains fell short still ends with an
 *   estimate).
 * - Slow start, paced: eq. 1 with twice the cwnd while the RTT shows no
 *   queue (min_rtt/64 and HOLD_MIN_QUEUE_US), eq. 1 once it does (the
 *   kernel's own slow-start pacing ratio, tcp_pacing_ss_ratio 200%: eq. 1 as such
 *   sends one window per RTT, so slow start would grow by about 1.76
 *   instead of 2 per RTT and a transfer that never fills the pipe would
 *   end later than unpaced). Below half the estimate the cap is that
 *   rate itself, queue or not (a queue there is the probe's bursts
 *   draining); above, a cap grown in time per srtt and only while it
 *   binds: 9/8 up to 7/8 of the estimate, 1/16 above and only while the
 *   cap is less than 1/32 above the last window's delivery rate
 *   (HOLD_LEAD; the delivery rate lags the cap by an RTT, so in effect
 *   1/32 per srtt); without an estimate (no train of 8 segments) 5/4,
 *   and 11/10 once the RTT shows the first sign of a queue (min_rtt/400).
 * - While the RTT shows a queue (min_rtt/64 in slow start, min_rtt/32
 *   after, and at least HOLD_MIN_QUEUE_US; not in slow start below half
 *   the estimate in the two srtt after the probe, where it is the probe's
 *   bursts draining): the cap falls to 31/32 of the delivery rate (payload
 *   bytes acked per srtt), so the queue drains instead of growing into
 *   the buffer, and growth goes on from there; an estimate below that
 *   delivery rate (the bottleneck's, with a queue standing) rises to it
 *   once the cut stood an srtt (see Undo).
 *   A queue with a delivery rate within 1/64 of the cap is not the cap's
 *   doing (host noise; a queue draining below a cap already cut): it
 *   stops the cap's growth and counts for the full-pipe test, no cut.
 * - An unsure estimate (issue 47), from a train of fewer than
 *   HOLD_SURE_TRAIN_SEGS segments (a kernel-paced socket's initial
 *   window, 1.04-2.04 times the bottleneck), grows by 1/16 per srtt above
 *   5/8 of it instead of 1/8.
 * - A low estimate (issue 47): a window that delivered 1/16 more than the
 *   estimate says the estimate was low (a kernel-paced socket, such as
 *   BBR's, has no unpaced burst but its 9-segment initial window, whose
 *   train came back at 67-333 Mbit/s on a 470 Mbit/s path). Then, in or
 *   after slow start, the cap grows by 1/8 per srtt while it is less than
 *   1/8 above the delivery rate (HOLD_LOW_LEAD), instead of the 1/32 of
 *   the near and post-slow-start rules, under which BBR (whose startup
 *   ends when its rate stops growing by 1/4 per round) crept up for
 *   seconds.
 * - A queue is the cap's doing (and cut) only where the delivery rate fell
 *   1/64 short of the cap its bytes were sent under (sent_cap: the cap at
 *   the start of the window before the one measured), or where it is
 *   past min_rtt/32 (issue 47: on a loaded host srtt rose by 1.6-3.1 ms
 *   with no queue at the bottleneck); another queue stops growth only.
 *   And never below half the share (below): there the queue is not the
 *   cap's.
 * - Undo: a cut is undone (undo_cap restored) if an ACK within an srtt of
 *   it shows no queue: that round trip's ACKs left before the cut, so a
 *   queue the cap made shows in all of them, while a stall of the host or
 *   the path raises srtt in some.
 * - Full pipe (after BBR's): HOLD_FULL_WINDOWS windows that end with a
 *   queue the cap made (or one draining below a cap already cut) while
 *   the delivery rate has not grown by 1/8. One srtt of host
 *   noise does not set it (the delivery rate still grows); from then on,
 *   and after slow start (cwnd at or above ssthresh) above 7/8 of the
 *   share (below it, before the pipe was found full, the bands of slow
 *   start: HyStart ends slow start on a rise of delay), the cap grows by 33/32
 *   per srtt, so the end of a hold does not release at once the window
 *   CUBIC grew meanwhile, and only while it is less than 1/32 above the
 *   delivery rate (HOLD_LEAD): once the bottleneck is full the
 *   delivery rate stops following the cap, and so does the cap.
 * - With several of the rule's sockets past the probe and open
 *   (stats->held), each takes as its share in the two rules above (half
 *   of it; 7/8 of it) the estimate divided by their number, or what the
 *   others' caps (stats->held_cap) leave of the estimate if that is more:
 *   every estimate is the whole bottleneck, and flows that ramped together
 *   each took half. In slow start the band of 9/8 per srtt runs on past
 *   7/8 of the share to 7/8 of the estimate itself, while no queue shows
 *   (issue 47: in the web-like mix the trains of new flows among the
 *   others' traffic gave estimates of 50-180 Mbit/s on 470, shares of a
 *   few Mbit/s, and long flows grew by 8 segments per srtt for seconds
 *   on a half-empty path); a queue stops it, and what flows growing together
 *   overshoot is at most an eighth of the path's rate for an srtt.
 * - Wherever the cap grows, by at least HOLD_AI_SEGS segments per srtt
 *   (with that much more lead): additive increase beside the queue's
 *   multiplicative cut, so held flows converge to shares. */
/* A queue is at least this deep (µs) before the hold acts: on a path of
 * microseconds (veth, a LAN) the host's own scheduling moves srtt by far
 * more than a fraction of min_rtt, which is no queue that slowing down
 * drains, and holding on it ratcheted the rate down by 31/32 per window
 * (to 9 of 1000 Mbit/s on veth). */
#define HOLD_MIN_QUEUE_US 1000u
#define HOLD_LOW_WINDOW 64u
/* ... or 1/this of the estimate × min_rtt (segments), if more:
 * unpaced slow start queues about half a window (two segments sent per
 * one delivered), a 32nd of the BDP, and a transfer that ends below
 * it is never paced at all. */
#define HOLD_PROBE_BDP_DIV 16u
#define HOLD_TRAIN_GAP_US 2000u
#define HOLD_TRAIN_MIN_SEGS 8u
/* An estimate from a train of fewer segments is unsure: a kernel-paced
 * socket's initial window, whose ACKs the host batches (1.04-2.04 times
 * the bottleneck, issue 47). */
#define HOLD_SURE_TRAIN_SEGS 16u
/* ln(5/4), ln(17/16), ln(11/10), ln(33/32) and ln(9/8), times 1024:
 * growth per srtt. */
#define HOLD_LN_SS 228u
#define HOLD_LN_NEAR_BTL 62u
#define HOLD_LN_NEAR 98u
#define HOLD_LN_CA 32u
#define HOLD_LN_EIGHTH 120u
/* Queue thresholds, as divisors of min_rtt: first sign, hold in slow
 * start, hold after it. */
#define HOLD_WARN_DIV 400u
#define HOLD_SS_DIV 64u
#define HOLD_CA_DIV 32u
#define HOLD_FULL_WINDOWS 2u
/* A queue past min_rtt/this is the cap's doing whatever the delivery rate
 * of the window before (host noise moved srtt by up to 3.1 ms). */
#define HOLD_DEEP_DIV 32u
/* Near the bottleneck the cap grows only while cap < dlv_rate * 33/32
 * (plus HOLD_AI_SEGS segments per srtt). */
#define HOLD_LEAD 32u
/* ... and while cap < dlv_rate * 9/8 where the delivery rate passed the
 * estimate by a sixteenth (the estimate was low); a lead of 1/4 passed the
 * bottleneck by a quarter before the queue showed. */
#define HOLD_LOW_LEAD 8u
/* Wherever the cap grows it grows by at least this many segments per srtt,
 * and may lead the delivery rate by that much more: additive increase, so
 * a flow held small beside big ones catches up (growth by a fraction alone
 * keeps their ratio). */
#define HOLD_AI_SEGS 8u

/* The train since train_ns ends: it is the estimate if it acked at least
 * HOLD_TRAIN_MIN_SEGS, more bytes than the best so far, and came back
 * faster than ss_rate (eq. 1 with twice the window: what the kernel paces
 * slow start at when it paces the socket itself). A cap of "unlimited"
 * does not turn the kernel's own pacing off once something turned it on
 * (a pacing congestion control such as BBR when the socket was
 * established, even if the program switched to CUBIC after connecting as
 * iperf3 -C does; an earlier SO_MAX_PACING_RATE; an fq qdisc): then the
 * windows leave spread over the round trip and come back at the rate they
 * were sent, at most ss_rate, which is no estimate of the bottleneck. An
 * unpaced burst comes back at the bottleneck's rate, eight times ss_rate
 * and more while the probe lasts. Twin: core's BpfHold::end_train. */
static __always_inline void hold_end_train(struct sock_state *st, __u32 mss, __u64 ss_rate)
{
	__u64 bytes = st->last_acked - st->train_acked;
	__u64 dur = st->last_ns - st->train_ns;

	if (st->last_ns && dur && bytes >= (__u64)HOLD_TRAIN_MIN_SEGS * mss && bytes > st->btl_bytes) {
		__u64 rate = bytes * 1000000000ull / dur;

		if (rate > ss_rate) {
			st->btl_rate = rate;
			st->btl_bytes = bytes;
		}
	}
}

/* The probe's train bookkeeping, on every ACK while the socket is unpaced. */
static __always_inline void hold_train(struct sock_state *st, __u64 now, __u64 acked, __u32 mss, __u32 min_rtt,
				       __u64 ss_rate)
{
	__u64 gap_us = min_rtt && min_rtt / 8 < HOLD_TRAIN_GAP_US ? min_rtt / 8 : HOLD_TRAIN_GAP_US;

	if (st->last_ns && now - st->last_ns <= gap_us * 1000) {
		st->last_ns = now;
		st->last_acked = acked;
		return;
	}
	/* The train before ends here. */
	hold_end_train(st, mss, ss_rate);
	st->train_ns = now;
	st->train_acked = acked;
	st->last_ns = now;
	st->last_acked = acked;
}

/* The cap for eq. 1's `rate` (`ss_rate`: the same with twice the cwnd,
 * used in slow start), or RATE_UNPACED during the probe. */
static __always_inline __u64 hold_law(struct bpf_sock_ops *skops, struct sock_state *st, __u64 now, __u64 rate,
				      __u64 ss_rate, __u64 flows, __u64 others)
{
	__u64 acked = skops->bytes_acked;
	__u32 srtt = skops->srtt_us >> 3;
	__u32 min_rtt = skops->rtt_min;
	__u32 cwnd = skops->snd_cwnd;
	int new_win = 0;

	if (st->win_start_ns == 0) {
		st->win_start_ns = now;
		st->win_acked = acked;
		st->win_nxt = skops->snd_nxt;
	} else if (srtt && now - st->win_start_ns >= (__u64)srtt * 1000) {
		st->dlv_rate = (acked - st->win_acked) * 1000000000ull / (now - st->win_start_ns);
		/* What the socket sent in the window that ends here against
		 * what its caps allowed in it. */
		__u64 sent_b = (__u32)(skops->snd_nxt - st->win_nxt);
		__u64 allowed = st->allow;

		/* Not weighed where the estimate is unsure (a socket the kernel
		 * paces itself, whose one unpaced burst was its initial window):
		 * BBR pacing itself under a cap that did not bind sent 0.78-0.93
		 * of it, and the weighed cap grew to 1.3 times the path, where
		 * BBR's next probe overflowed the buffer (nginx, issue 47). */
		if (allowed == ~0ull || allowed == 0 || sent_b * 2 < allowed ||
		    st->btl_bytes < (__u64)HOLD_SURE_TRAIN_SEGS * skops->mss_cache)
			st->fill = 1024;
		else if (sent_b >= allowed)
			st->fill = 1024;
		else
			st->fill = sent_b * 1024 / allowed;
		st->allow = 0;
		st->win_nxt = skops->snd_nxt;
		st->win_start_ns = now;
		st->win_acked = acked;
		st->sent_cap = st->last_cap;
		st->last_cap = st->win_cap;
		st->win_cap = st->cap;
		new_win = 1;
		/* The full-pipe test's growth: a window that grew by 1/8. */
		if (st->cap && !st->full && st->dlv_rate * 8 >= st->full_dlv * 9) {
			st->full_dlv = st->dlv_rate;
			st->full_cnt = 0;
		}
	}
	int fast = cwnd < skops->snd_ssthresh && !st->full;
	if (st->cap == 0) {
		hold_train(st, now, acked, skops->mss_cache, min_rtt, ss_rate);
		__u64 probe_win = HOLD_LOW_WINDOW;
		__u32 mss = skops->mss_cache;

		if (mss) {
			__u64 w = st->btl_rate * min_rtt / 1000000 / mss / HOLD_PROBE_BDP_DIV;

			if (w > probe_win)
				probe_win = w;
		}
		if (fast && cwnd < probe_win)
			return RATE_UNPACED;
		/* The probe ends with this ACK: the train it is in counts too
		 * (the longest of the probe, the last window's first part). */
		hold_end_train(st, skops->mss_cache, ss_rate);
	}
	if (srtt == 0 || min_rtt == 0)
		return fast ? ss_rate : rate;
	__u64 queue = srtt > min_rtt ? srtt - min_rtt : 0;
	/* Slow start at twice eq. 1 while the RTT shows no queue the hold
	 * would act on; into a queue, eq. 1. */
	int ss_queue = queue > HOLD_MIN_QUEUE_US && queue * HOLD_SS_DIV > min_rtt;
	/* Below half the estimate in slow start the cap follows slow start's
	 * own rate (up to half the estimate), which can queue nothing the
	 * estimate does not already allow; and for two srtt after the probe's
	 * last ACK a queue is its bursts still draining, not the cap's doing.
	 * A queue after that is someone else's. */
	/* The rule's held sockets are taken to share one bottleneck (as RFC
	 * 3124's congestion manager shares one per destination): each
	 * estimate is the whole bottleneck, and flows that ramp together
	 * would each take half of it. */
	/* ... or what the others' caps leave of it, if more: a held socket
	 * does not send above its cap, and in the web-like mix (issue 47) a
	 * score of held flows that each took 1/N of the estimate ran at
	 * 10-30 Mbit/s on a half-empty 500 Mbit/s path. */
	__u64 share = st->btl_rate / flows;
	if (st->btl_rate > others && st->btl_rate - others > share)
		share = st->btl_rate - others;
	int probing = fast && share && st->cap < share / 2;
	int draining = probing && now - st->last_ns < (__u64)srtt * 2000;
	if (fast && (draining || !ss_queue))
		rate = ss_rate;
	/* A delivery rate under half the cap says the socket was limited by
	 * something else (its window, the receiver, the application): then a
	 * queue is no sign that its own rate is too high. */
	/* Never below half the share (where the probe's draining is too): a
	 * cap that low makes no queue at a bottleneck the estimate is within
	 * twice of, so a queue there is host noise or another's traffic, and
	 * cuts on it ratcheted iperf3 down to 10 of 100 Mbit/s (and HTTP to
	 * 65 of 470) while the path's delay jittered by 15-70 ms; there the
	 * cap grows back to half the share instead. */
	int below = share && st->cap * 2 < share;
	int queue_seen = !below && st->dlv_rate * 2 >= st->cap && queue > HOLD_MIN_QUEUE_US &&
			 queue * (fast ? HOLD_SS_DIV : HOLD_CA_DIV) > min_rtt;
	/* And a delivery rate that kept up with the cap (within 1/64) says
	 * the cap is not what queued: a queue the cap made holds the delivery
	 * at the bottleneck's rate, below the cap. Under a loaded host, srtt
	 * rose by 3-5 ms with the bottleneck's queue under 130 KB, and each
	 * such cut held an HTTP download lower. Such a queue (and one that
	 * drains below a cap already cut) stops the cap's growth, not more. */
	/* Against the cap the last window's bytes were sent under (the cap at
	 * the start of the window before it), not the cap of now, which a
	 * delivery rate lags by far more than 1/64 while the cap grows by an
	 * eighth per srtt: under a loaded host that lag turned each rise of
	 * srtt into a cut. A queue past min_rtt/32 is the cap's doing against
	 * the cap of now, as before (after slow start, the hold's threshold). */
	/* The caps as the socket uses them: a sender that sends 80% of its
	 * cap delivers 20% below it with no queue anywhere (issue 47: the
	 * kernel's pacing of a cap of 36 Mbit/s sent 78-81% of it). Until the
	 * pipe is found full: after that the cap is at the bottleneck, and a
	 * sender below it (BBR pacing itself) let it grow past the path.
	 * (Nor where the estimate is unsure: `fill` is 1024 there.) */
	__u64 fill = st->fill && !st->full ? st->fill : 1024;
	__u64 capf = st->cap * fill / 1024;
	__u64 sent = (st->sent_cap < st->cap ? st->sent_cap : st->cap) * fill / 1024;
	/* A shortfall of more than an eighth is the sender's own (BBR paces
	 * at 3/4 of its rate for a round in eight), not the bottleneck's. */
	int short_fall = st->sent_cap && st->dlv_rate * 64 < sent * 63 && st->dlv_rate * 8 >= sent * 7;
	/* ... and only where the last window's delivery rate did not grow by
	 * 1/8 (a delivery rate growing with the cap says the cap did not
	 * queue it): host noise past min_rtt/32 came too. */
	/* Once the pipe was found full (growth 1/32 per srtt) a delivery rate
	 * more than an eighth below the cap is the sender's own too (BBR's
	 * rate moved by a quarter between windows; cuts to 31/32 of the low
	 * ones ratcheted HTTP down). */
	int deep = queue * HOLD_DEEP_DIV > min_rtt && st->dlv_rate * 64 < capf * 63 &&
		   (st->full ? st->dlv_rate * 8 >= capf * 7 : st->dlv_rate != st->full_dlv);
	int queued = queue_seen && (short_fall || deep);
	/* (A delivery rate of 0 never shows a queue: queue_seen.) */
	if (probing && !queued) {
		__u64 follow = rate < share / 2 ? rate : share / 2;

		if (follow > st->cap) {
			st->cap = follow;
			st->cap_ns = now;
		}
	}
	if (st->cap == 0) {
		st->cap = rate;
		st->cap_ns = now;
		return rate;
	}
	/* A window that did not grow by 1/8 and ends with a queue the cap
	 * made, or one draining below a cap already cut (not host noise under
	 * a cap the delivery rate kept up with), counts towards a full pipe. */
	if (new_win && !st->full && st->dlv_rate != st->full_dlv && (queued || (queue_seen && st->dlv_rate > st->cap)) &&
	    ++st->full_cnt >= HOLD_FULL_WINDOWS)
		st->full = 1;
	if (queued) {
		__u64 hold = st->dlv_rate * 31 / 32;

		/* Never 0: a cap of 0 is the probe's state. */
		if (hold == 0)
			hold = 1;
		if (st->cap > hold) {
			if (st->undo_cap == 0) {
				st->undo_cap = st->cap;
				st->undo_ns = now;
			}
			st->cap = hold;
		}
	} else if (rate >= st->cap && !probing && !queue_seen) {
		__u64 dt_us = (now - st->cap_ns) / 1000;
		__u64 ln, lead = 0;

		/* No estimate (no train of 8 segments faster than slow start's
		 * pace: an HTTP server's socket under BBR) after slow start,
		 * until the pipe is found full, is taken as a low one: under the
		 * 1/32 after slow start the cap crept from 11 Mbit/s by 8
		 * segments per srtt. */
		int low = st->btl_rate ? st->dlv_rate * 16 > st->btl_rate * 17 : !fast && !st->full;

		if (below || low) {
			/* Delivered a sixteenth more than the estimate over an
			 * srtt, which no bottleneck at the estimate allows: the
			 * estimate was low (a kernel-paced socket's one train,
			 * its initial window's, can be). Or below half the
			 * share after slow start, where a queue is not the
			 * cap's: back to half, through a queue too. Grow by an
			 * eighth per srtt while within an eighth of the delivery
			 * rate. */
			ln = HOLD_LN_EIGHTH;
			lead = HOLD_LOW_LEAD;
		} else if (!fast && (st->full || st->cap * 8 >= share * 7)) {
			/* After slow start near the share, or once the pipe was
			 * found full. Below 7/8 of the share before that, the
			 * bands of slow start: HyStart ends slow start on a rise
			 * of delay that bursts and host noise make. */
			ln = HOLD_LN_CA;
			lead = HOLD_LEAD;
		} else if (st->btl_rate) {
			if (st->cap * 8 < st->btl_rate * 7) {
				/* An estimate from a short train (a kernel-paced
				 * socket's initial window) may be up to twice the
				 * bottleneck: above 5/8 of it, 1/16 per srtt. */
				if (st->btl_bytes < (__u64)HOLD_SURE_TRAIN_SEGS * skops->mss_cache &&
				    st->cap * 8 >= st->btl_rate * 5)
					ln = HOLD_LN_NEAR_BTL;
				else
					ln = HOLD_LN_EIGHTH;
			} else {
				ln = HOLD_LN_NEAR_BTL;
				lead = HOLD_LEAD;
			}
		} else {
			ln = queue * HOLD_WARN_DIV > min_rtt ? HOLD_LN_NEAR : HOLD_LN_SS;
		}
		if (dt_us > srtt)
			dt_us = srtt;
		__u64 ai = (__u64)skops->mss_cache * HOLD_AI_SEGS * 1000000 / srtt;
		__u64 step = st->cap * ln / 1024;

		if (step < ai)
			step = ai;
		if (!lead || !st->dlv_rate || capf * lead < st->dlv_rate * (lead + 1) + ai * lead)
			st->cap += step * dt_us / srtt;
	}
	/* A cut is undone if an ACK within an srtt of it shows no queue (as
	 * TCP undoes a spurious timeout, RFC 3522): the next round trip's ACKs
	 * left before the cut, so a queue the cap made is in every one of
	 * them, while a stall of the host or the path raises srtt for some
	 * ACKs and is gone by the next. Under preemption of the VM such cuts
	 * came window after window: an HTTP download's cap went from 428 to
	 * 240 Mbit/s in 2.5 s. */
	__u64 raise = 0;

	if (st->undo_cap) {
		if (now - st->undo_ns >= (__u64)srtt * 1000) {
			st->undo_cap = 0;
			/* The cut stands, and so does the queue: the delivery
			 * rate is the bottleneck's, and an estimate below it was
			 * low (not at the cut: a stall's cut raised a low
			 * estimate to the delivery of the moment). */
			raise = st->dlv_rate;
		} else if (queue <= HOLD_MIN_QUEUE_US || queue * (fast ? HOLD_SS_DIV : HOLD_CA_DIV) <= min_rtt) {
			if (st->undo_cap > st->cap)
				st->cap = st->undo_cap;
			st->undo_cap = 0;
		}
	}
	if (st->btl_rate && raise > st->btl_rate)
		st->btl_rate = raise;
	st->cap_ns = now;
	return rate < st->cap ? rate : st->cap;
}

/* hold_law, keeping count of the bytes its caps allowed (the twin's
 * BpfHold::on_ack). */
static __always_inline __u64 hold_cap(struct bpf_sock_ops *skops, struct sock_state *st, __u64 rate, __u64 ss_rate,
				      __u64 flows, __u64 others)
{
	__u64 now = bpf_ktime_get_ns();

	if (st->out_ns && st->allow != ~0ull) {
		__u64 dt = now - st->out_ns;

		if (dt > 1000000000ull)
			dt = 1000000000ull;
		st->allow = st->out_rate == RATE_UNPACED ? ~0ull : st->allow + st->out_rate * dt / 1000000000ull;
	}
	__u64 out = hold_law(skops, st, now, rate, ss_rate, flows, others);

	st->out_rate = out;
	st->out_ns = now;
	return out;
}

/* `segment`: a segment-time callback (one sent or one received), which
 * acts only on ACK progress since the last one; the RTT callback always
 * acts. */
static __always_inline void on_ack(struct bpf_sock_ops *skops, int segment)
{
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct sock_state *st = bpf_map_lookup_elem(&pace_socks, &cookie);
	struct rule *r;
	__u32 idx, rate;

	if (!st)
		return;
	__u64 acked = skops->bytes_acked;

	if (segment && acked == st->seen_acked)
		return;
	st->seen_acked = acked;
	st->seen_srtt_us = skops->srtt_us >> 3;
	st->seen_min_rtt_us = skops->rtt_min;
	st->seen_cwnd = skops->snd_cwnd;
	st->seen_ssthresh = skops->snd_ssthresh;
	idx = st->rule;
	r = bpf_map_lookup_elem(&pace_rules, &idx);
	if (!r)
		return;
	if (r->flags & RULE_RELEASE) {
		release(skops, idx, cookie);
		return;
	}
	if (r->kind != RULE_DYNAMIC)
		return;
	rate = rule_rate(skops, r);
	if (r->flags & RULE_HOLD) {
		struct rule_stats *stats = bpf_map_lookup_elem(&pace_stats, &idx);
		/* This socket, and the rule's others past their probe. */
		__u64 held = stats ? stats->held : 0;
		__u64 flows = held + (st->cap == 0);
		/* The caps of the rule's other held sockets (a race with one
		 * that closes may leave less than this one's part: none then). */
		__u64 all = stats ? stats->held_cap : 0;
		__u64 others = all > st->held_cap ? all - st->held_cap : 0;
		int probe = st->cap == 0;
		__u64 h = hold_cap(skops, st, rate, rule_rate_cwnd(skops, r, skops->snd_cwnd * 2), flows ? flows : 1,
				   others);

		if (st->cap && stats) {
			if (probe)
				__sync_fetch_and_add(&stats->held, 1);
			if (st->cap != st->held_cap) {
				__sync_fetch_and_add(&stats->held_cap, st->cap - st->held_cap);
				st->held_cap = st->cap;
			}
		}
		rate = h == RATE_UNPACED ? RATE_UNPACED : clamp_rate(h < DYNAMIC_FLOOR ? DYNAMIC_FLOOR : h);
	}
	if (rate != st->rate)
		set_rate(skops, idx, st, rate);
}

SEC("sockops")
int tcpaccel_pace(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_established(skops);
		break;
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_PARSE_HDR_OPT_CB:
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		/* One call site: on_ack is inlined, and twice over the
		 * verifier's limit. */
		on_ack(skops, skops->op != BPF_SOCK_OPS_RTT_CB);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == BPF_TCP_CLOSE) {
			__u64 cookie = bpf_get_socket_cookie(skops);
			struct sock_state *st = bpf_map_lookup_elem(&pace_socks, &cookie);

			if (st)
				unhold(st);
			bpf_map_delete_elem(&pace_socks, &cookie);
		}
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
