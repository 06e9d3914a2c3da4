#!/usr/bin/env bash
# One process's bulk goodput through the host service against the in-process
# (exclusive) device, interleaved round by round on the same 4-plane veth
# fabric (`fabric.sh up direct planes=4`): per round one mrc_perf pair with
# an mrc-serviced on each host (MRC_MODE=service) and one pair with no
# service (MRC_MODE=exclusive), the order alternating between rounds. Every
# run is the "bulk" shape of bench/compare (1 QP, 64 KiB WRITEs, 16 in
# flight) with --verify; a run that does not verify fails the script.
# Prints each run, the per-round ratio service/exclusive and the medians.
#
#   bench/svc_compare.sh [-b BUILD] [-r ROUNDS] [-t SECONDS] [-o DIR]
#
# Needs root; builds nothing (default BUILD ./build).
# Documentation/performance.md, "The host service".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=5 SECS=4 OUT=
while getopts b:r:t:o:h o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
  esac
done
. "$ROOT/bench/bench_lib.sh"
PERF=$BUILD/user/tools/mrc_perf SVCD=$BUILD/user/svc/mrc-serviced
bench_setup svc_compare "$PERF" "$SVCD"
bench_fabric_up planes=4 >/dev/null
trap 'bench_svc_down; bench_cleanup' EXIT INT TERM
PORT=$((21000 + RANDOM % 1000))
ARGS=(-s 65536 -q 1 -t 16 --verify --json --no-mrcd)
run() { # MODE ROUND -> prints Gbit/s
  local mode=$1 r=$2 cv sv g
  PORT=$((PORT + 1))
  ip netns exec "$NSB" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/B.sock" timeout -s INT 60 \
    "$PERF" server -d "$DEVB" -p "$PORT" "${ARGS[@]}" >"$OUT/$mode.$r.server" 2>&1 &
  SPID=$!
  ip netns exec "$NSA" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/A.sock" timeout -s INT 60 \
    "$PERF" client "$B0" -d "$DEVA" -p "$PORT" "${ARGS[@]}" -D "$SECS" >"$OUT/$mode.$r.client" 2>&1
  wait "$SPID"
  SPID=
  cv=$(grep '"summary"' "$OUT/$mode.$r.client" | jq -r .summary.verify)
  sv=$(grep '"summary"' "$OUT/$mode.$r.server" | jq -r .summary.verify)
  g=$(grep '"summary"' "$OUT/$mode.$r.client" | jq -r .summary.gbps)
  if [ "$cv" != ok ] || [ "$sv" != ok ]; then
    echo "svc_compare: $mode round $r did not verify (client $cv, server $sv)" >&2
    exit 1
  fi
  echo "$g"
}
declare -a GS GX RATIO
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order="service exclusive"; else order="exclusive service"; fi
  for m in $order; do
    if [ "$m" = service ]; then
      bench_svc_up svc_compare
      GS[r]=$(run service "$r")
      bench_svc_down
      echo "round $r service   ${GS[r]} Gbit/s"
    else
      GX[r]=$(run exclusive "$r")
      echo "round $r exclusive ${GX[r]} Gbit/s"
    fi
  done
  RATIO[r]=$(awk -v a="${GS[r]}" -v b="${GX[r]}" 'BEGIN { printf "%.3f", a / b }')
  echo "round $r service/exclusive ${RATIO[r]}"
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "median: service $(med "${GS[@]}") Gbit/s, exclusive $(med "${GX[@]}") Gbit/s, ratio $(med "${RATIO[@]}") (per round: ${RATIO[*]})"
echo "logs: $OUT"
