#!/usr/bin/env bash
# mrc_perf (1 QP, 64 KiB RDMA WRITEs, verified) over 4 direct veth planes with
# different TX backends (mrc_perf --tx), interleaved: every round runs every
# mode once, in order, on the same fabric. Prints one line per run: Gbit/s,
# MB moved, CPU seconds (user + system) of the client and of the server, and
# the load average; then medians per mode with CPU seconds per GB (both
# processes). Documentation/xdp-tx.md, "Performance of libmrc with live TX".
#
#   bench/tx_compare.sh [-b BUILD] [-r ROUNDS] [-t SECONDS] [-o DIR] [-p] [MODE ...]
#
# MODE is an mrc_perf --tx value (xsk, live, live/N, auto), optionally
# followed by ':' and more mrc_perf options for both sides ("xsk:-m 3264").
# Default modes: xsk live. -p pins the client's engine thread to CPU 0 and
# the server's to CPU 1. Needs root; builds nothing (default BUILD ./build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=3 SECS=8 OUT= PIN=0
while getopts b:r:t:o:ph o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;;
    o) OUT=$OPTARG ;; p) PIN=1 ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
MODES=("$@")
[ ${#MODES[@]} -eq 0 ] && MODES=(xsk live)
PERF=$BUILD/user/tools/mrc_perf
. "$ROOT/bench/bench_lib.sh"
bench_setup tx_compare "$PERF"
SX=() CX=()
[ "$PIN" = 1 ] && SX=(--cpu 1) CX=(--cpu 0)
bench_fabric_up planes=4 wire=off offload=on mtu=3500
echo "tx_compare: fabric $RUN, $ROUNDS rounds of ${MODES[*]}, $SECS s each, pin=$PIN, out $OUT"

: >"$OUT/results.txt"
for r in $(seq 1 "$ROUNDS"); do
  for m in "${MODES[@]}"; do
    tx=${m%%:*} extra=()
    [[ "$m" == *:* ]] && read -r -a extra <<<"${m#*:}"
    tag="r${r}_$(echo "$m" | tr -d ' -' | tr '/:' '__')"
    # Bounded: each side is stopped if it overruns by a minute.
    ip netns exec "$NSB" /usr/bin/time -f "%U %S" -o "$OUT/$tag.server.time" \
      timeout $((SECS + 60)) "$PERF" server -d "$DEVB" -s 65536 --no-mrcd --tx "$tx" \
      "${extra[@]}" "${SX[@]}" --counters >"$OUT/$tag.server.log" 2>&1 &
    SPID=$!
    sleep 0.5
    ip netns exec "$NSA" /usr/bin/time -f "%U %S" -o "$OUT/$tag.client.time" \
      timeout $((SECS + 60)) "$PERF" client "$B0" -d "$DEVA" -s 65536 -D "$SECS" --no-mrcd \
      --tx "$tx" "${extra[@]}" "${CX[@]}" --verify --counters >"$OUT/$tag.client.log" 2>&1 || true
    wait "$SPID" || true
    SPID=
    g=$(grep -o "total: [0-9.]* Gbit/s" "$OUT/$tag.client.log" | awk '{print $2}')
    mb=$(grep -o "[0-9.]* MB in" "$OUT/$tag.client.log" | awk '{print $1}')
    cc=$(tail -1 "$OUT/$tag.client.time" | awk '{print $1 + $2}')
    sc=$(tail -1 "$OUT/$tag.server.time" | awk '{print $1 + $2}')
    v=$(grep -o "verification: [a-zA-Z]*" "$OUT/$tag.client.log" | head -1 | cut -d' ' -f2)
    echo "$m|$r|${g:-0}|${mb:-0}|${cc:-0}|${sc:-0}|${v:-none}|$(cut -d' ' -f1 /proc/loadavg)" |
      tee -a "$OUT/results.txt"
  done
done

python3 - "$OUT/results.txt" <<'EOF'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    m, r, g, mb, cc, sc, v, load = line.strip().split("|")
    rows.setdefault(m, []).append((float(g), float(mb), float(cc), float(sc), v, load))
print(f"{'mode':16s} {'Gbit/s (median)':>15s}  {'runs':28s} {'CPU s/GB':>9s} {'client':>7s} {'server':>7s}  verify")
for m, v in rows.items():
    gb = lambda x: x[1] / 1000 or float("nan")
    print(f"{m:16s} {st.median(x[0] for x in v):15.2f}  {' '.join('%.2f' % x[0] for x in v):28s} "
          f"{st.median((x[2] + x[3]) / gb(x) for x in v):9.2f} {st.median(x[2] / gb(x) for x in v):7.2f} "
          f"{st.median(x[3] / gb(x) for x in v):7.2f}  {','.join(sorted(set(x[4] for x in v)))}")
EOF
