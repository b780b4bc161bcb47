#!/usr/bin/env bash
# Rebuilds the committed BPF objects from their C source with fixed flags, so
# that a rebuild with Debian's clang-14 gives the same bytes (the convention of
# cilium/ebpf's bpf2go: the object is committed, CI rebuilds and compares).
#
#   scripts/build-bpf.sh           rebuild in place
#   scripts/build-bpf.sh --check   rebuild into a temp dir; exit 1 if any
#                                  object differs from the committed one
#
# Needs clang-14 and libbpf-dev (bpf/bpf_helpers.h) and linux-libc-dev.
# Each program includes its ABI table (<name>.abi.h beside it) and checks
# its shared structs against it at compile time; the Rust crates generate
# their side from the same table (crates/bpf-abi-gen: <name>.abi.rs beside
# it, structs and conversions to the domain types), so a layout change that
# leaves either side behind fails this build or cargo's.
# No -g: debug info would carry the build directory's absolute path; the
# loader (crates/sys/src/bpf/obj.rs) needs no BTF. The source is compiled from
# its own directory by relative name, so the object holds no path either.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-clang-14}
command -v "$CLANG" >/dev/null || { echo "build-bpf: $CLANG not found (apt-get install clang-14 libbpf-dev)" >&2; exit 4; }
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "build-bpf: bpf/bpf_helpers.h not found (apt-get install libbpf-dev)" >&2; exit 4; }
multiarch=$(gcc -dumpmachine 2>/dev/null || echo "$(uname -m)-linux-gnu")
check=0
[ "${1:-}" = --check ] && check=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
# source -> committed object
for src in crates/pacer/bpf/*.bpf.c crates/lanes/bpf/*.bpf.c crates/lab/bpf/*.bpf.c; do
  dir=$(dirname "$src"); name=$(basename "$src" .c)
  # The shared header (bpf/include/tcpaccel_bpf.h), by a relative path too.
  inc=$(realpath --relative-to="$dir" bpf/include)
  ( cd "$dir" && "$CLANG" -O2 -target bpfel -mcpu=v2 -Wall -Werror -I "$inc" \
      -idirafter "/usr/include/$multiarch" -c "$name.c" -o "$out/$name.o" )
  if [ $check = 1 ]; then
    if cmp -s "$out/$name.o" "$dir/$name.o"; then
      echo "build-bpf: $dir/$name.o matches its source"
    else
      echo "build-bpf: $dir/$name.o differs from a rebuild of $src; run scripts/build-bpf.sh and commit" >&2
      status=1
    fi
  else
    cp "$out/$name.o" "$dir/$name.o"
    echo "build-bpf: wrote $dir/$name.o ($(stat -c %s "$dir/$name.o") bytes)"
  fi
done
exit $status
