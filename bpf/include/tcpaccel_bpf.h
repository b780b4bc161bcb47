/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * What every tcpaccel BPF program shares: the map definition the project's
 * own loader reads (crates/sys/src/bpf.rs, MapDef: classic "maps" section,
 * no BTF) and the socket constants the uapi headers that linux/bpf.h pulls
 * in do not define. Included by crates/pacer/bpf/pace.bpf.c and
 * crates/lanes/bpf/lanes.bpf.c; scripts/build-bpf.sh puts this directory on
 * the include path.
 */
#ifndef TCPACCEL_BPF_H
#define TCPACCEL_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define AF_INET 2
#define AF_INET6 10
#define SOL_SOCKET 1
#define SO_MAX_PACING_RATE 47

struct map_def {
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 flags;
};

#endif
