#!/usr/bin/env bash
# Runs the fuzz targets: every fuzz/DIR/fuzz_targets/TARGET.rs (each DIR is a
# cargo-fuzz crate of its own), one after the other, each for a bounded time.
# CI's fuzz step is this script with its defaults.
#
#   fuzz/run.sh [DIR/TARGET|DIR ...] [-- LIBFUZZER-FLAGS...]
#
# No argument runs them all. FUZZ_SECONDS (default 30) bounds each target's
# fuzzing time; flags after `--` come after the defaults, so they win:
#   fuzz/run.sh gather/gather_data -- -runs=1000000 -max_total_time=0
#
# Every target runs under -rss_limit_mb=256 (and so a 256 MB limit on any one
# allocation): the decoders must keep their memory within the bounds their
# input declares (a control message at most 16 MiB, a chunk at most the
# negotiated size), and nothing here legitimately needs more. ASan keeps freed
# memory in a quarantine of up to 256 MB by default, which counts against that
# limit and, for a target that allocates per input (the BPF object reader),
# reaches it after ~10,000 inputs with nothing leaked: the quarantine is 32 MB
# here unless ASAN_OPTIONS says otherwise.
#
# Seeds committed in fuzz/DIR/seeds/TARGET are read; what the fuzzer finds
# goes to target/fuzz-corpus/DIR/TARGET (kept between runs, not committed),
# crashes to fuzz/DIR/artifacts/TARGET. Needs a nightly toolchain and
# cargo-fuzz (`cargo install cargo-fuzz --locked`).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=${FUZZ_SECONDS:-30}

want=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    *) want+=("$1"); shift ;;
  esac
done
extra=("$@")

selected() { # DIR TARGET
  [ ${#want[@]} -eq 0 ] && return 0
  local w
  for w in "${want[@]}"; do
    [ "$w" = "$1" ] || [ "$w" = "$1/$2" ] && return 0
  done
  return 1
}

ran=0
for dir in fuzz/*/; do
  dir=${dir%/}
  name=${dir#fuzz/}
  [ -f "$dir/Cargo.toml" ] || continue
  for src in "$dir"/fuzz_targets/*.rs; do
    target=$(basename "$src" .rs)
    selected "$name" "$target" || continue
    corpus=$root/target/fuzz-corpus/$name/$target
    mkdir -p "$corpus"
    dirs=("$corpus")
    [ -d "$dir/seeds/$target" ] && dirs+=("$root/$dir/seeds/$target")
    echo "-- fuzz $name/$target (${seconds}s)"
    # One target dir for all the fuzz crates: their common dependencies are
    # built once.
    ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32} \
      cargo +nightly fuzz run --fuzz-dir "$dir" --target-dir "$root/target/fuzz" "$target" "${dirs[@]}" -- \
      -max_total_time="$seconds" -rss_limit_mb=256 -timeout=20 -print_final_stats=1 "${extra[@]}"
    ran=$((ran + 1))
  done
done
if [ "$ran" -eq 0 ]; then
  echo "no fuzz target matches ${want[*]}" >&2
  exit 1
fi
echo "fuzz: $ran targets ran without a finding"
