#!/bin/sh
# Runs a lab scenario as N shards through Slurm and merges them: the
# engine is Debian's slurm-wlm with munge (installed when missing), here
# as a one-node cluster started on this machine (its own munged, slurmctld
# and slurmd, a minimal slurm.conf, all in OUT/slurm), stopped again at
# the end. On a real cluster keep only the sbatch and merge steps.
#
#   scripts/slurm-shards.sh [-n N] [-p P] [--compare] OUT SCENARIO [lab run options...]
#
#   -n N        shards (array tasks 0..N-1, `lab run --shard I/N`; default 4)
#   -p P        at most P shards at once (default 1: on one machine, shards
#               running side by side would measure each other)
#   --compare   also run the scenario unsharded (same options and seed) into
#               OUT/unsharded and compare its flow records with the merged
#               ones (identical up to timing), then `lab compare` their FCTs
#
# Writes OUT/shard-I/ (one per task), OUT/merged/ (records, report) and
# OUT/slurm/ (the cluster's configuration and logs). Needs root (the lab
# makes network namespaces). Example, the web search figure in 4 shards:
#
#   scripts/slurm-shards.sh -n 4 --compare lab-results/ws-shards lanes-websearch \
#       --quick --repeat 2 --set variants=mptcp,single,link-cost,size
set -eu

usage() {
    sed -n '2,/^set -eu/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2
    exit 2
}

n=4
p=1
compare=0
while [ $# -gt 0 ]; do
    case "$1" in
    -n) n=$2; shift 2 ;;
    -p) p=$2; shift 2 ;;
    --compare) compare=1; shift ;;
    -h | --help) usage ;;
    *) break ;;
    esac
done
[ $# -ge 2 ] || usage
out=$1
scenario=$2
shift 2
case "$n$p" in *[!0-9]*) echo "slurm-shards.sh: -n and -p take whole numbers" >&2; exit 2 ;; esac
[ "$n" -ge 1 ] && [ "$p" -ge 1 ] || { echo "slurm-shards.sh: -n and -p must be at least 1" >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
    echo "slurm-shards.sh: run as root (the lab makes network namespaces; the cluster runs as root)" >&2
    exit 2
fi

here=$(cd "$(dirname "$0")/.." && pwd)
tcpaccel=${TCPACCEL:-$(command -v tcpaccel || echo "$here/target/debug/tcpaccel")}
[ -x "$tcpaccel" ] || { echo "slurm-shards.sh: no tcpaccel binary ($tcpaccel); set TCPACCEL" >&2; exit 2; }

# The engine: Debian's packages.
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends slurm-wlm munge
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
conf=$out/slurm
rm -rf "$conf"
mkdir -p "$conf/state" "$conf/spool" "$conf/munge"
chmod 711 "$conf/munge"

pids=""
stop() {
    # Only the daemons this script started, by their pids.
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    for pid in $pids; do
        while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    done
}
trap stop EXIT
trap 'exit 130' INT TERM

# munge: a key and a socket of our own, not the system's.
mungekey --create --keyfile="$conf/munge/munge.key" --force
chmod 600 "$conf/munge/munge.key"
munged --foreground --force --socket="$conf/munge/munge.socket" --key-file="$conf/munge/munge.key" \
    --pid-file="$conf/munge/munged.pid" --seed-file="$conf/munge/seed" >"$conf/munge/munged.log" 2>&1 &
pids="$pids $!"

host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
# Ports of their own, away from a system cluster's 6817/6818.
cat >"$conf/slurm.conf" <<EOF
ClusterName=tcpaccel
SlurmctldHost=$host
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$conf/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$conf/state
SlurmdSpoolDir=$conf/spool
SlurmctldPidFile=$conf/slurmctld.pid
SlurmdPidFile=$conf/slurmd.pid
SlurmctldLogFile=$conf/slurmctld.log
SlurmdLogFile=$conf/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=lab Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$conf/slurm.conf"

slurmctld -D -i -f "$SLURM_CONF" >"$conf/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" >"$conf/slurmd.out" 2>&1 &
pids="$pids $!"

# Wait for the node to take jobs.
i=0
until [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = idle ]; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
        echo "slurm-shards.sh: the one-node cluster did not come up; logs in $conf" >&2
        sinfo >&2 || true
        exit 1
    fi
    sleep 0.2
done
echo "cluster up: $(sinfo -h -o '%P %D node(s) %C CPUs (A/I/O/T) %T')"

# The shards: one array task each; the task id is the shard's index.
args=""
for a in "$@"; do args="$args '$(printf %s "$a" | sed "s/'/'\\\\''/g")'"; done
last=$((n - 1))
started=$(date +%s)
sbatch --wait --parsable --job-name="lab-$scenario" --array="0-$last%$p" --cpus-per-task=1 \
    --output="$conf/shard-%a.log" \
    --wrap="exec '$tcpaccel' lab run '$scenario' --shard \$SLURM_ARRAY_TASK_ID/$n --out '$out'/shard-\$SLURM_ARRAY_TASK_ID --json$args" \
    >"$conf/job-id" || {
    echo "slurm-shards.sh: a shard failed (exit codes: sacct is off; see $conf/shard-*.log)" >&2
    tail -n 5 "$conf"/shard-*.log >&2 || true
    exit 1
}
echo "array job $(cat "$conf/job-id"): $n shards done in $(($(date +%s) - started)) s"

dirs=""
i=0
while [ $i -lt "$n" ]; do dirs="$dirs $out/shard-$i"; i=$((i + 1)); done
# shellcheck disable=SC2086 # the shard directories, one word each
"$tcpaccel" lab merge --out "$out/merged" $dirs >"$out/merged.txt"
echo "merged: $out/merged/ (report: $out/merged/index.html)"

if [ "$compare" = 1 ]; then
    started=$(date +%s)
    "$tcpaccel" lab run "$scenario" --out "$out/unsharded" --json "$@" >"$out/unsharded.txt"
    echo "unsharded run done in $(($(date +%s) - started)) s: $out/unsharded/"
    # The flows' identity (run, id, class, size, scheduled start) must be
    # the same; completion times are the network's and vary.
    python3 - "$out/unsharded" "$out/merged" <<'EOF'
import json, sys
def flows(d):
    rows = [json.loads(l) for l in open(d + "/records.jsonl") if l.strip()]
    head = rows[0]
    key = [(f["variant"], f["repeat"], f["id"], f["class"], f["bytes"], f["start"]) for f in rows if f["type"] == "flow"]
    runs = [(s["variant"], s["repeat"]) for s in rows if s["type"] == "summary"]
    return head, key, runs
(ha, a, ra), (hb, b, rb) = flows(sys.argv[1]), flows(sys.argv[2])
same_head = all(ha[k] == hb[k] for k in ("scenario", "params", "variants", "repeats", "seed"))
print(f"unsharded: {len(a)} flow records in {len(ra)} runs; merged: {len(b)} flow records in {len(rb)} runs")
print(f"same scenario, parameters, variants, repeats, seed: {same_head}")
print(f"flow records identical up to timing (variant, repeat, id, class, bytes, start, in order): {a == b}")
sys.exit(0 if same_head and a == b and ra == rb else 1)
EOF
    "$tcpaccel" lab compare --base "$out/unsharded" --against "$out/merged" | tee "$out/compare.txt"
fi
