// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * tcpaccel lanes: per-ACK lane signals for the lanes daemon (issue 13).
 *
 * A cgroup sock_ops program. For every TCP socket of the daemon's network
 * namespace on a configured lane pair (local address, peer address) it keeps
 * per-subflow state; for MPTCP subflows it groups them by connection and
 * keeps, per connection, the bytes moved and one smoothed eq. (5.7) cost per
 * lane ([Lanes] ch. 5, Algorithm 1 line 9: cost <- 3/4 cost + 1/4 measured,
 * on every ACK that brings a new RTT sample, as in the thesis). It tells
 * the daemon through the ring buffer `lanes_events` only when a connection's
 * decision changes: its bytes reach the size threshold, its age reaches
 * t_deadline while segments arrive (deadline policy), or its cheapest lane
 * becomes a Long-flow Lane (link-cost policy). One event per connection.
 *
 * Per ACK, not per round trip: BPF_SOCK_OPS_RTT_CB runs once per round trip
 * only (net/ipv4/tcp_input.c, tcp_rtt_estimator: tcp_bpf_rtt is called when
 * snd_una passes rtt_seq, i.e. once per window), so a connection's subflows
 * get BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG and the program runs as
 * BPF_SOCK_OPS_PARSE_HDR_OPT_CB on every segment the subflow receives
 * (tcp_validate_incoming; MPTCP subflows never take the header-prediction
 * fast path). That callback comes before the segment is processed: the
 * socket's counters and srtt_us are those after the previous segment, one
 * ACK behind. Bytes (bytes_acked + bytes_received) are counted on every
 * segment, so a downloading connection reaches its size threshold too. A
 * cost sample is taken only when bytes_acked moved since the subflow's
 * previous callback: the previous segment acknowledged new data, so the
 * kernel took an RTT sample and srtt_us is new. Data segments of a
 * download, which acknowledge nothing new, re-read no stale srtt_us: the
 * smoothing stays one step per ACK of the sender, as the thesis's.
 * Once a connection's decision is signalled its subflows drop the per-
 * segment callbacks (LL subflows keep the per-RTT one for lane samples):
 * the long flows, which carry most bytes, cost per segment only until they
 * are decided.
 *
 * One earlier event per connection, EV_PREPARE, says that the decision may
 * come soon: the bytes reached half the size threshold, or the age half of
 * t_deadline while segments arrive. The daemon opens the connection's backup
 * LL subflows only then, so the many short flows that never get there cost
 * no subflow handshake, and those that do have their LL subflows up by the
 * time they switch. It is a hint, not a decision: it changes no cost and
 * is not part of the twin below (its rule is tcpaccel_lanes::bpf::prepare_due).
 *
 * Connections accepted here (passive open) are tracked only when the daemon
 * manages server-side connections (lanes_cfg.passive); otherwise their SL
 * subflows are skipped (no callbacks after ESTABLISHED) and their LL
 * subflows give lane samples only, once per round trip.
 *
 * Integer only: costs are fixed point with 10 fractional bits, beta and
 * delta are 1 or 2, and large terms saturate. The pure twin of every line of
 * arithmetic and of the decision is tcpaccel_core::lanes::bpf, tested there
 * exactly against the float eq. (5.7). Keep the two in step.
 *
 * Idle backup LL subflows carry no ACKs; a Long-flow Lane is measured by any
 * socket of the namespace on its pair (other connections' LL subflows, the
 * daemon's handshake probes at their ESTABLISHED): `lanes_lane` keeps the
 * lane's latest sample and a connection applies each new one once.
 *
 * No globals, no subprograms, no BTF (crates/sys/src/bpf.rs loads classic
 * "maps" definitions only).
 */
#include "tcpaccel_bpf.h"
#include "lanes.abi.h"

#define MAX_SLOTS 8
#define FP_SHIFT 10
#define FP_ONE (1ull << FP_SHIFT)
/* Saturation of nu^beta and |x|^delta (fixed point): 2^30. */
#define POW_MAX (1ull << 30)
/* A fixed-point base below which squaring stays under POW_MAX: 2^20. */
#define SQ_BASE_MAX (1ull << 20)

enum { POLICY_DEADLINE = 0, POLICY_LINK_COST = 1, POLICY_SIZE = 2 };
enum { EV_SIZE = 1, EV_DEADLINE = 2, EV_LINK_COST = 3, EV_PREPARE = 4 };
enum { KIND_SL = 0, KIND_LL = 1 };
#define NO_SLOT 0xffffffffu

/* Written by the daemon (crates/lanes/src/bpf.rs, CfgAbi). */
struct lanes_cfg {
	__u64 netns_cookie;
	__u64 size_threshold;   /* 0: none */
	__u64 t_deadline_us;
	__u64 nu_unit_us;
	__u64 t0_fp;
	__u64 alpha_fp;
	__u64 gamma_fp;
	__u32 policy;
	__u32 beta;             /* 1 or 2 */
	__u32 delta;            /* 1 or 2 */
	__u32 per_lane_base;
	__u32 ll_mask;          /* bit s: slot s is a Long-flow Lane */
	__u32 enabled;
	__u32 passive;          /* track passively opened connections too */
	__u32 pad;
};

struct pair_key {
	__u8 local[16];         /* IPv6, or IPv4 mapped ::ffff:a.b.c.d */
	__u8 remote[16];
};

struct lane_val {
	__u32 slot;
	__u32 kind;
};

struct lane_sample {
	__u64 seq;
	__u32 rtt_us;
	__u32 pad;
};

struct sf_state {
	__u64 conn;             /* connection key, 0 for a plain TCP socket */
	__u64 last_bytes;       /* bytes_acked + bytes_received at the last callback */
	__u64 last_acked;       /* bytes_acked at the last callback */
	__u32 slot;
	__u32 kind;
	__u32 quiet;            /* per-segment callbacks switched off (decided) */
	__u32 pad;
};

struct conn_state {
	__u64 start_ns;
	__u64 bytes;
	__s64 cost[MAX_SLOTS];
	__u64 lane_seq[MAX_SLOTS];
	__u32 min_rtt[MAX_SLOTS];
	__u32 conn_min_rtt;
	__u32 have;             /* bit s: cost[s] is set */
	__u32 done;             /* the decision was signalled */
	__u32 prepared;         /* EV_PREPARE was signalled */
	__u32 subflows;
};

struct lanes_event {
	__u32 kind;
	__u32 slot;             /* cheapest LL slot, NO_SLOT if none known */
	__u64 age_us;
	__u64 bytes;
	__s64 cost_sl;
	__s64 cost_ll;
	__u32 have_costs;
	__u32 family;
	__u8 local[16];
	__u8 remote[16];
	__u16 lport;
	__u16 rport;
	__u32 pad;
	__u64 ktime_ns;         /* bpf_ktime_get_ns() at the decision */
};

struct lanes_stats {
	__u64 acks;             /* callbacks of tracked connections (segments) */
	__u64 events;
	__u64 dropped;
	__u64 subflows;
};

/* The structs the daemon shares against the ABI table (lanes.abi.h). */
LANES_ABI(TCPACCEL_ABI_CHECK)

struct map_def SEC("maps") lanes_cfg = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct lanes_cfg),
	.max_entries = 1,
};

struct map_def SEC("maps") lanes_pairs = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(struct pair_key),
	.value_size = sizeof(struct lane_val),
	.max_entries = 64,
};

struct map_def SEC("maps") lanes_lane = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct lane_sample),
	.max_entries = MAX_SLOTS,
};

struct map_def SEC("maps") lanes_socks = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct sf_state),
	.max_entries = 16384,
};

struct map_def SEC("maps") lanes_conns = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct conn_state),
	.max_entries = 8192,
};

struct map_def SEC("maps") lanes_events = {
	.type = BPF_MAP_TYPE_RINGBUF,
	.key_size = 0,
	.value_size = 0,
	.max_entries = 256 * 1024,
};

struct map_def SEC("maps") lanes_stats = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct lanes_stats),
	.max_entries = 1,
};

/* Twin: bpf::nu_fp. nu = (rtt - base) / unit, fixed point, saturated. */
static __always_inline __u64 nu_fp(__u32 rtt_us, __u32 base_us, __u64 unit_us)
{
	__u64 d = rtt_us > base_us ? rtt_us - base_us : 0;
	__u64 v;

	if (unit_us == 0)
		unit_us = 1000;
	v = (d << FP_SHIFT) / unit_us;
	return v > POW_MAX ? POW_MAX : v;
}

/* Twin: bpf::pow_fp. v^e for e in {1, 2}, saturated at POW_MAX. */
static __always_inline __u64 pow_fp(__u64 v, __u32 e)
{
	if (v > POW_MAX)
		v = POW_MAX;
	if (e != 2)
		return v;
	if (v > SQ_BASE_MAX)
		return POW_MAX;
	return (v * v) >> FP_SHIFT;
}

/* Twin: bpf::cost_ll_fp. eq. (5.7) LL: t0 (1 + alpha nu^beta). */
static __always_inline __s64 cost_ll_fp(struct lanes_cfg *cfg, __u64 nu)
{
	__u64 inner = (cfg->alpha_fp * pow_fp(nu, cfg->beta)) >> FP_SHIFT;
	return (__s64)((cfg->t0_fp * (FP_ONE + inner)) >> FP_SHIFT);
}

/* Twin: bpf::deadline_term_fp. sgn(t - td) gamma |t - td|^delta, t in ms. */
static __always_inline __s64 deadline_term_fp(struct lanes_cfg *cfg, __u64 age_us)
{
	__u64 td = cfg->t_deadline_us;
	__u64 x_us = age_us > td ? age_us - td : td - age_us;
	__u64 x = (x_us << FP_SHIFT) / 1000;
	__s64 term;

	if (x > POW_MAX)
		x = POW_MAX;
	term = (__s64)((cfg->gamma_fp * pow_fp(x, cfg->delta)) >> FP_SHIFT);
	return age_us < td ? -term : term;
}

/* Twin: bpf::BpfConn::sample. */
static __always_inline void sample(struct lanes_cfg *cfg, struct conn_state *c, __u32 s,
				   __u32 rtt_us, __u64 age_us)
{
	__u32 base;
	__s64 m;

	if (s >= MAX_SLOTS || rtt_us == 0)
		return;
	if (c->min_rtt[s] == 0 || rtt_us < c->min_rtt[s])
		c->min_rtt[s] = rtt_us;
	if (c->conn_min_rtt == 0 || rtt_us < c->conn_min_rtt)
		c->conn_min_rtt = rtt_us;
	base = cfg->per_lane_base ? c->min_rtt[s] : c->conn_min_rtt;
	m = cost_ll_fp(cfg, nu_fp(rtt_us, base, cfg->nu_unit_us));
	if (!(cfg->ll_mask & (1u << s)))
		m += deadline_term_fp(cfg, age_us);
	if (c->have & (1u << s)) {
		/* Algorithm 1 line 9; an arithmetic shift floors. */
		c->cost[s] = (3 * c->cost[s] + m) >> 2;
	} else {
		c->cost[s] = m;
		c->have |= 1u << s;
	}
}

/* The callers checked the family: AF_INET or AF_INET6. */
static __always_inline void fill_addrs(struct bpf_sock_ops *skops, __u8 *local, __u8 *remote)
{
	tcpaccel_local_addr(skops, local);
	tcpaccel_remote_addr(skops, remote);
}

static __always_inline void lane_sample(__u32 slot, __u32 rtt_us)
{
	struct lane_sample *ls;

	if (rtt_us == 0)
		return;
	ls = bpf_map_lookup_elem(&lanes_lane, &slot);
	if (!ls)
		return;
	ls->rtt_us = rtt_us;
	__sync_fetch_and_add(&ls->seq, 1);
}

/* The callbacks a tracked subflow gets: every received segment while its
 * connection is undecided; afterwards (and for a socket that only samples
 * a lane) an LL subflow keeps the per-round-trip one for lane samples and
 * an SL subflow only the close. */
static __always_inline int cb_flags(struct sf_state *sf)
{
	if (!sf->quiet)
		return BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG;
	if (sf->kind == KIND_LL)
		return BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_STATE_CB_FLAG;
	return BPF_SOCK_OPS_STATE_CB_FLAG;
}

static __always_inline void on_established(struct bpf_sock_ops *skops, int passive)
{
	__u32 zero = 0;
	struct lanes_cfg *cfg = bpf_map_lookup_elem(&lanes_cfg, &zero);
	struct pair_key key = {};
	struct lane_val *lane;
	struct sf_state sf = {};
	struct bpf_sock *sk;
	struct lanes_stats *st;
	__u64 cookie, conn = 0;
	void *msk;

	if (!cfg || !cfg->enabled)
		return;
	if (skops->family != AF_INET && skops->family != AF_INET6)
		return;
	if (bpf_get_netns_cookie(skops) != cfg->netns_cookie)
		return;
	fill_addrs(skops, key.local, key.remote);
	lane = bpf_map_lookup_elem(&lanes_pairs, &key);
	if (!lane)
		return;
	sf.slot = lane->slot;
	sf.kind = lane->kind;
	if (sf.kind == KIND_LL)
		lane_sample(sf.slot, skops->srtt_us >> 3);
	sk = skops->sk;
	if (!sk)
		return;
	msk = bpf_skc_to_mptcp_sock(sk);
	if (msk && passive && !cfg->passive)
		msk = 0; /* not managed here: at most a lane sample */
	if (msk) {
		/* The connection's address is its key while it lives (root
		 * loads this program, so the verifier lets it be a value). */
		struct conn_state fresh = {};
		struct conn_state *c;

		conn = (__u64)msk;
		c = bpf_map_lookup_elem(&lanes_conns, &conn);
		if (!c) {
			fresh.start_ns = bpf_ktime_get_ns();
			bpf_map_update_elem(&lanes_conns, &conn, &fresh, BPF_NOEXIST);
			c = bpf_map_lookup_elem(&lanes_conns, &conn);
		}
		if (!c)
			return;
		__sync_fetch_and_add(&c->subflows, 1);
		/* A subflow joining a decided connection (the LL subflows
		 * opened for the switch) needs no per-segment callbacks. */
		sf.quiet = c->done;
	} else if (sf.kind != KIND_LL) {
		return; /* a plain TCP socket on SL says nothing about a lane */
	} else {
		sf.quiet = 1; /* lane samples only: once per round trip */
	}
	sf.conn = conn;
	sf.last_bytes = skops->bytes_acked + skops->bytes_received;
	sf.last_acked = skops->bytes_acked;
	cookie = bpf_get_socket_cookie(skops);
	bpf_map_update_elem(&lanes_socks, &cookie, &sf, BPF_ANY);
	st = bpf_map_lookup_elem(&lanes_stats, &zero);
	if (st)
		__sync_fetch_and_add(&st->subflows, 1);
	bpf_sock_ops_cb_flags_set(skops, cb_flags(&sf));
}

/* Every segment a tracked subflow receives (BPF_SOCK_OPS_PARSE_HDR_OPT_CB,
 * the socket as it was before the segment), and the per-round-trip
 * BPF_SOCK_OPS_RTT_CB of lane-sampling sockets. */
static __always_inline void on_ack(struct bpf_sock_ops *skops)
{
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct sf_state *sf = bpf_map_lookup_elem(&lanes_socks, &cookie);
	__u32 zero = 0, rtt_us, kind = 0, slot = NO_SLOT, fresh;
	struct lanes_cfg *cfg;
	struct conn_state *c;
	struct lanes_stats *st;
	struct lanes_event *ev;
	__u64 cur, acked, age_us, conn;
	__s64 best_sl = 0, best_ll = 0;
	__u32 have_sl = 0, have_ll = 0;

	if (!sf) {
		/* A socket whose callbacks an earlier instance of this
		 * program switched on (the daemon restarted): taken over now,
		 * its age counted from here, as the daemon's adoption does. */
		on_established(skops, 0);
		sf = bpf_map_lookup_elem(&lanes_socks, &cookie);
		if (!sf)
			return;
	}
	/* Twin: bpf::Ack::fresh_rtt. bytes_acked moved since the last
	 * callback: the segment before this one acknowledged new data and
	 * srtt_us holds its RTT sample. */
	acked = skops->bytes_acked;
	fresh = acked != sf->last_acked;
	sf->last_acked = acked;
	rtt_us = skops->srtt_us >> 3;
	if (sf->kind == KIND_LL && fresh)
		lane_sample(sf->slot, rtt_us);
	conn = sf->conn;
	if (!conn)
		return;
	c = bpf_map_lookup_elem(&lanes_conns, &conn);
	cfg = bpf_map_lookup_elem(&lanes_cfg, &zero);
	if (!c || !cfg)
		return;
	st = bpf_map_lookup_elem(&lanes_stats, &zero);
	if (st)
		__sync_fetch_and_add(&st->acks, 1);
	/* Twin: bpf::BpfConn::on_ack from here. */
	cur = acked + skops->bytes_received;
	c->bytes += cur - sf->last_bytes;
	sf->last_bytes = cur;
	if (c->done) {
		if (!sf->quiet) {
			sf->quiet = 1;
			bpf_sock_ops_cb_flags_set(skops, cb_flags(sf));
		}
		return;
	}
	age_us = (bpf_ktime_get_ns() - c->start_ns) / 1000;
	if (cfg->policy != POLICY_DEADLINE) {
		if (sf->kind == KIND_SL && fresh)
			sample(cfg, c, sf->slot, rtt_us, age_us);
#pragma unroll
		for (__u32 s = 0; s < MAX_SLOTS; s++) {
			__u32 k = s;
			struct lane_sample *ls;

			if (!(cfg->ll_mask & (1u << s)))
				continue;
			ls = bpf_map_lookup_elem(&lanes_lane, &k);
			if (!ls || ls->seq == c->lane_seq[s])
				continue;
			c->lane_seq[s] = ls->seq;
			sample(cfg, c, s, ls->rtt_us, age_us);
		}
	}
#pragma unroll
	for (__u32 s = 0; s < MAX_SLOTS; s++) {
		if (!(c->have & (1u << s)))
			continue;
		if (cfg->ll_mask & (1u << s)) {
			if (!have_ll || c->cost[s] < best_ll) {
				best_ll = c->cost[s];
				slot = s;
			}
			have_ll = 1;
		} else {
			if (!have_sl || c->cost[s] < best_sl)
				best_sl = c->cost[s];
			have_sl = 1;
		}
	}
	if (cfg->size_threshold && c->bytes >= cfg->size_threshold)
		kind = EV_SIZE;
	else if (cfg->policy == POLICY_DEADLINE && age_us >= cfg->t_deadline_us)
		kind = EV_DEADLINE;
	else if (cfg->policy == POLICY_LINK_COST && have_sl && have_ll && best_ll < best_sl)
		kind = EV_LINK_COST;
	/* Twin: tcpaccel_lanes::bpf::prepare_due. */
	else if (!c->prepared && ((cfg->size_threshold && c->bytes >= cfg->size_threshold / 2) ||
				  (cfg->policy != POLICY_SIZE && age_us >= cfg->t_deadline_us / 2)))
		kind = EV_PREPARE;
	if (!kind)
		return;
	ev = bpf_ringbuf_reserve(&lanes_events, sizeof(*ev), 0);
	if (!ev) {
		if (st)
			__sync_fetch_and_add(&st->dropped, 1);
		return; /* asked again on the next ACK */
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->kind = kind;
	ev->slot = slot;
	ev->age_us = age_us;
	ev->bytes = c->bytes;
	ev->cost_sl = best_sl;
	ev->cost_ll = best_ll;
	ev->have_costs = have_sl && have_ll;
	ev->family = skops->family;
	fill_addrs(skops, ev->local, ev->remote);
	ev->lport = (__u16)skops->local_port;
	ev->rport = __builtin_bswap16((__u16)(skops->remote_port >> 16));
	ev->ktime_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(ev, 0);
	if (kind == EV_PREPARE) {
		c->prepared = 1;
		return;
	}
	c->done = 1;
	if (st)
		__sync_fetch_and_add(&st->events, 1);
}

static __always_inline void on_close(struct bpf_sock_ops *skops)
{
	__u64 cookie = bpf_get_socket_cookie(skops);
	struct sf_state *sf = bpf_map_lookup_elem(&lanes_socks, &cookie);
	struct conn_state *c;
	__u64 conn;

	if (!sf)
		return;
	conn = sf->conn;
	if (conn) {
		c = bpf_map_lookup_elem(&lanes_conns, &conn);
		/* Not atomic (v2 has no fetch-add result); a count left
		 * behind by a race only lets the LRU map evict the entry. */
		if (c && c->subflows <= 1)
			bpf_map_delete_elem(&lanes_conns, &conn);
		else if (c)
			c->subflows -= 1;
	}
	bpf_map_delete_elem(&lanes_socks, &cookie);
}

SEC("sockops")
int tcpaccel_lanes(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:
		on_established(skops, 0);
		break;
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:
		on_established(skops, 1);
		break;
	case BPF_SOCK_OPS_RTT_CB:
	case BPF_SOCK_OPS_PARSE_HDR_OPT_CB:
		on_ack(skops);
		break;
	case BPF_SOCK_OPS_STATE_CB:
		if (skops->args[1] == BPF_TCP_CLOSE)
			on_close(skops);
		break;
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
