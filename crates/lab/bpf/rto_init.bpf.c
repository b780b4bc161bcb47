// SPDX-License-Identifier: MIT OR GPL-2.0
/*
 * tcpaccel lab: the initial RTO of a time-dilated run (issue 25).
 *
 * A scale-model run multiplies every time constant by D. The kernel lets a
 * route raise rto_min (the lab sets it on every host route), but a
 * connection's first timeout — the SYN's and the SYN-ACK's, and the data's
 * until the first RTT sample — is TCP_TIMEOUT_INIT (1 s) whatever the
 * route says. Its one knob is this callback: for BPF_SOCK_OPS_TIMEOUT_INIT
 * the kernel takes the program's reply as the initial RTO in jiffies
 * (include/net/tcp.h, tcp_timeout_init: a reply <= 0 keeps 1 s, and the
 * result is capped at TCP_RTO_MAX). The callback runs for the connecting
 * socket (tcp_connect_init) and for the listener's request socket
 * (tcp_conn_request), so both ends of a handshake get the scaled value.
 *
 * The program is attached to the cgroup2 root, so it sees every socket on
 * the machine; it answers only in the network namespaces user space put in
 * `lab_rto_init` (netns cookie -> initial RTO in jiffies), i.e. the hosts
 * of the run that loaded it. Every other socket keeps the kernel's 1 s.
 * Nothing is shared with user space but that map of scalars, so this
 * program has no ABI table (the pacer's and the lanes program's share
 * structs and have one).
 */
#include "tcpaccel_bpf.h"

struct map_def SEC("maps") lab_rto_init = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(__u32),
	.max_entries = 1024,
};

SEC("sockops")
int tcpaccel_rto_init(struct bpf_sock_ops *skops)
{
	if (skops->op == BPF_SOCK_OPS_TIMEOUT_INIT) {
		__u64 netns = bpf_get_netns_cookie(skops);
		__u32 *jiffies = bpf_map_lookup_elem(&lab_rto_init, &netns);

		if (jiffies)
			skops->reply = *jiffies;
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
