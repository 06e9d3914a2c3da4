#!/bin/bash
# The flap scenarios 21 and 23 under engine scheduling modes, alternating,
# with the time the host's ksoftirqd threads spent waiting for a CPU during
# each run (/proc/PID/schedstat, second field: run-queue wait in ns).
#
#   sudo bench/experiments/fifo_ksoftirqd.sh [-b BUILD] [-n ROUNDS] [-o DIR] [VARIANT=ARGS ...]
#
# A variant is a name and the mrc_perf options it appends to the scenarios'
# workloads (MRC_RESILIENCE_PERF_ARGS). Default: nice="" fifo="--sched fifo".
# With fifo-rt-budget.patch applied: fifo0="--sched fifo --rt-runtime-us 0".
# Prints one line per scenario and run: during / remaining, ACK timeouts,
# empty 10 ms bins, the good planes' rate against the clean spans, and the
# ksoftirqd wait (both CPUs' threads together, ms) over the whole run.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$here/build rounds=4 out=
while getopts b:n:o: o; do
  case $o in
    b) build=$OPTARG ;;
    n) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- "nice=" "fifo=--sched fifo"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "fifo_ksoftirqd: -n: a count of rounds" >&2; exit 2; }
for v in "$@"; do
  [[ $v =~ ^[A-Za-z0-9_]+= ]] || { echo "fifo_ksoftirqd: '$v': a variant is NAME=MRC_PERF_OPTIONS" >&2; exit 2; }
done
[ -n "$out" ] || out=$(mktemp -d /tmp/fifo-ksoftirqd.XXXXXX)
mkdir -p "$out"

wait_ns() {  # the ksoftirqd threads' run-queue wait, summed
  local sum=0 p
  for p in $(pgrep -x 'ksoftirqd/[0-9]+'); do
    sum=$((sum + $(awk '{print $2}' "/proc/$p/schedstat")))
  done
  echo $sum
}

for r in $(seq 1 "$rounds"); do
  for v in "$@"; do
    name=${v%%=*} args=${v#*=}
    dir=$out/$name-$r
    w0=$(wait_ns)
    MRC_RESILIENCE_PERF_ARGS="$args" python3 "$here/selftests/fabric/resilience/resilience.py" \
      --build "$build" --out "$dir" run 21-flicker5ms-alt 23-flicker5ms-alt-500m >"$dir.log" 2>&1 || true
    w1=$(wait_ns)
    for s in 21-flicker5ms-alt 23-flicker5ms-alt-500m; do
      python3 - "$dir/$s/result.json" "$name" "$r" "$s" $(((w1 - w0) / 1000000)) <<'EOF'
import json, sys
path, name, rnd, scn, wait_ms = sys.argv[1:]
try:
    f = json.load(open(path))["figures"]
except (OSError, KeyError, ValueError) as e:
    print(f"{name} {rnd} {scn[:2]} no result ({e})")
    sys.exit(0)
print(f"{name} {rnd} {scn[:2]} during/remaining {f['during_over_remaining']} timeouts {f['timeouts']} "
      f"empty bins {f['zero_10ms_bins_during']} good planes {f['other_planes_faulted_over_clean']} "
      f"ksoftirqd wait {wait_ms} ms")
EOF
    done
  done
done
echo "fifo_ksoftirqd: runs in $out"
