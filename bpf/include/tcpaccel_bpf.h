/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * What every tcpaccel BPF program shares: the map definition the project's
 * own loader reads (crates/sys/src/bpf/obj.rs, MapDef: classic "maps" section,
 * no BTF), the socket constants the uapi headers that linux/bpf.h pulls
 * in do not define, the checks of the ABI tables, and the one reader of a
 * socket's addresses. Included by crates/pacer/bpf/pace.bpf.c,
 * crates/lanes/bpf/lanes.bpf.c and crates/lab/bpf/rto_init.bpf.c;
 * scripts/build-bpf.sh puts this directory on the include path.
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

/*
 * The ABI tables. Each program's layouts shared with user space live in one
 * table, <program>.abi.h beside its source: a list of the shared structs
 * with their sizes, S(name, size), and per struct an X-macro
 * ABI_FIELDS_<name>(F) of its fields, F(struct, field, offset, C type).
 * The program checks its structs against the table with the assertions
 * below (offset, type, size, and that the listed fields cover every byte,
 * so padding is an explicit field and a field missing from the table is a
 * build error); crates/bpf-abi-gen generates the Rust side from the same
 * table (<program>.abi.rs beside it: the structs, and their conversions to
 * the domain types named in the table's <PROGRAM>_RUST list, which the C
 * side never expands). Expanded once per program:
 * <PROGRAM>_ABI(TCPACCEL_ABI_CHECK).
 */
#define TCPACCEL_ABI_FIELD_CHECK(s, f, off, ty)                                  \
	_Static_assert(__builtin_offsetof(struct s, f) == (off),                 \
		       "struct " #s " field " #f ": not at offset " #off          \
		       " as the ABI table says");                                \
	_Static_assert(__builtin_types_compatible_p(__typeof__(((struct s *)0)->f), ty), \
		       "struct " #s " field " #f ": not " #ty " as the ABI table says");
#define TCPACCEL_ABI_FIELD_BYTES(s, f, off, ty) +sizeof(ty)
#define TCPACCEL_ABI_CHECK(s, size)                                              \
	ABI_FIELDS_##s(TCPACCEL_ABI_FIELD_CHECK)                                 \
	_Static_assert(sizeof(struct s) == (size),                               \
		       "struct " #s ": sizeof is not " #size " as the ABI table says"); \
	_Static_assert(0 ABI_FIELDS_##s(TCPACCEL_ABI_FIELD_BYTES) == (size),     \
		       "struct " #s ": its ABI table does not cover every byte "   \
		       "(a field is missing, or padding is implicit)");

/*
 * A socket's address as 16 bytes, the form both programs' map keys and
 * events use: IPv6 as it is, IPv4 mapped (::ffff:a.b.c.d). Returns 0 for
 * another family. The caller zeroes `out` (keys are built from `= {}`).
 *
 * The IPv6 words are read through a volatile pointer, one 4-byte load per
 * word, on purpose: the verifier admits only 4-byte reads of these context
 * fields (net/core/filter.c, sock_ops_is_valid_access: any other size is
 * "invalid bpf_context access"), and plain C leaves the load width to the
 * optimizer. clang-14 turns a memcpy from the context into byte loads, and
 * nothing stops a newer clang from merging neighbouring words; volatile
 * accesses are neither merged, split nor widened.
 */
static __always_inline int tcpaccel_addr16(__u32 family, __u32 ip4, const volatile __u32 *ip6,
					   __u8 *out)
{
	if (family == AF_INET) {
		out[10] = 0xff;
		out[11] = 0xff;
		__builtin_memcpy(&out[12], &ip4, 4);
		return 1;
	}
	if (family == AF_INET6) {
		__u32 w[4] = { ip6[0], ip6[1], ip6[2], ip6[3] };

		__builtin_memcpy(out, w, 16);
		return 1;
	}
	return 0;
}

static __always_inline int tcpaccel_remote_addr(const struct bpf_sock_ops *skops, __u8 *out)
{
	return tcpaccel_addr16(skops->family, skops->remote_ip4,
			       (const volatile __u32 *)skops->remote_ip6, out);
}

static __always_inline int tcpaccel_local_addr(const struct bpf_sock_ops *skops, __u8 *out)
{
	return tcpaccel_addr16(skops->family, skops->local_ip4,
			       (const volatile __u32 *)skops->local_ip6, out);
}

#endif
