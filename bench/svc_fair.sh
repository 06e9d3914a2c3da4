#!/usr/bin/env bash
# The host service's figures of issue 23 (items 3 and 6) in one run,
# interleaved round by round against the in-process (exclusive) device on
# the same 4-plane veth fabric (`fabric.sh up direct planes=4`):
#
#   bulk1   one mrc_perf pair, bulk (1 QP, 64 KiB WRITEs, 16 in flight, the
#           "bulk" shape of bench/compare), through the services and in
#           exclusive mode: per round service/exclusive (target >= 0.9)
#   bulk8   8 such pairs at once through the services (exclusive mode cannot
#           run two), each SECONDS+4 s long: their aggregate against the
#           round's bulk1 through the service (target >= 1.0), and Jain's
#           index over the 8 per-process goodputs (target >= 0.95). Both
#           over the wall-clock window in which all 8 transfer (the clients
#           start one after the other): each client's interval reports
#           (-I 0.25, stamped with the wall clock as they arrive) inside it
#   q8      controls for the Jain index: one process with 8 QPs (16 in flight
#           each) through the service and in exclusive mode; Jain's index over
#           its QPs (bytes placed per QP, the server's --counters-json). The
#           same engine sharing without the service's clients in between
#   bulk8nv the bulk8 row without --verify: the only run that does not
#           verify, a control. With --verify each client writes a pattern
#           into every message and each server checks it (CPU per byte), so
#           on a CPU-bound machine a process's goodput may follow the CPU
#           share the kernel gives it; without, the clients touch no payload
#   lat8    8 B WRITE round trips (mrc_perf -l -s 8, engine thread progress in
#           both modes: the service has no application progress), p50 one
#           way, service/exclusive (target <= 1.2)
#
# Every run but bulk8nv verifies its data (--verify; one that does not
# fails the script). The order of the modes alternates between rounds. Prints every
# run, per-round ratios and their medians.
#
#   bench/svc_fair.sh [-b BUILD] [-r ROUNDS] [-t SECONDS] [-n PROCS] [-o DIR]
#                     [-A SERVICED] [-a "ARGS"] [-L] [-l "ARGS"] [-C]
#
# -A: a second mrc-serviced binary (say, the one before a change): each round
# also runs the bulk8 row through it, and its Jain's index is printed beside.
# -a "ARGS": arguments for that second service (-A, default this build's
# mrc-serviced), e.g. -a "--engine cc_qa=0" (NSCC without quick adapt).
# -L: only the lat8 row, in both modes, each round. -l "ARGS": more mrc_perf
# arguments for the lat8 row of both modes (both ends), e.g. -l "--spin-us 20".
# -C: beside a busy application: only bulk1 and lat8, each once quiet and
# once with a busy loop on every CPU (ours, at normal priority, bounded by
# timeout and killed by pid after the run), in both modes. Retention is
# busy / quiet (latency: quiet p50 / busy p50) within a round and mode.
#
# Needs root; builds nothing (default BUILD ./build).
# Documentation/performance.md, "The host service".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=5 SECS=4 NPROC=8 OUT= ALT= ALT_ARGS= LATONLY= LAT_ARGS= CORUN=
while getopts b:r:t:n:o:A:a:Ll:Ch o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;;
    n) NPROC=$OPTARG ;; o) OUT=$OPTARG ;; A) ALT=$OPTARG ;; a) ALT_ARGS=$OPTARG ;;
    L) LATONLY=1 ;; l) LAT_ARGS=$OPTARG ;; C) CORUN=1 ;;
    *) sed -n '2,49p' "$0"; exit 2 ;;
  esac
done
. "$ROOT/bench/bench_lib.sh"
PERF=$BUILD/user/tools/mrc_perf SVCD=$BUILD/user/svc/mrc-serviced
[ -n "$ALT_ARGS" ] && [ -z "$ALT" ] && ALT=$SVCD
bench_setup svc_fair "$PERF" "$SVCD"
bench_fabric_up planes=4 >/dev/null
PIDS=()
stop_all() {
  local p
  for p in "${PIDS[@]}" "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  PIDS=() BUSY=()
}
BUSY=()
# busy_on / busy_off: one shell busy loop per CPU, pinned, each ending by
# itself after 100 s at the latest; off kills them by pid.
busy_on() {
  local c
  for ((c = 0; c < $(nproc); c++)); do
    taskset -c "$c" timeout 100 sh -c 'while :; do :; done' &
    BUSY+=("$!")
  done
}
busy_off() {
  local p
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BUSY[@]}"; do wait "$p" 2>/dev/null || true; done
  BUSY=()
}
trap 'stop_all; bench_svc_down; bench_cleanup' EXIT INT TERM
PORT=$((23000 + RANDOM % 1000))
BULK=(-s 65536 -q 1 -t 16 --verify --json --no-mrcd)
SRV_ARGS=()  # extra arguments of the next start's server only
NOVERIFY=    # set: field() does not ask for a verified run
LAT=(-l -s 8 --verify --json --no-mrcd)
# shellcheck disable=SC2206
LAT+=($LAT_ARGS)

# Each line of stdin with the wall clock it arrived at in front (mrc_perf
# flushes every report).
stamp() { while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done; }
# start NAME MODE SECONDS ARGS...: a server on B and a client on A, in the
# background (pids in PIDS); the client's lines stamped with the wall clock.
start() {
  local name=$1 mode=$2 secs=$3
  shift 3
  PORT=$((PORT + 1))
  ip netns exec "$NSB" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/B.sock" timeout -s INT 90 \
    "$PERF" server -d "$DEVB" -p "$PORT" "$@" "${SRV_ARGS[@]}" >"$OUT/$name.server" 2>&1 &
  PIDS+=("$!")
  ip netns exec "$NSA" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/A.sock" timeout -s INT 90 \
    "$PERF" client "$B0" -d "$DEVA" -p "$PORT" "$@" -D "$secs" 2>&1 | stamp >"$OUT/$name.client" &
  PIDS+=("$!")
}
# field NAME KEY: a field of the client's summary, after checking both sides
# verified.
field() {
  local name=$1 key=$2 cv sv
  cv=$(grep '"summary"' "$OUT/$name.client" | cut -d' ' -f2- | jq -r .summary.verify 2>/dev/null || true)
  sv=$(grep '"summary"' "$OUT/$name.server" | jq -r .summary.verify 2>/dev/null || true)
  if [ -n "$NOVERIFY" ]; then
    cv=ok sv=ok  # the one control run without --verify (bulk8nv)
  fi
  if [ "$cv" != ok ] || [ "$sv" != ok ]; then
    echo "svc_fair: $name did not verify (client ${cv:-none}, server ${sv:-none})" >&2
    tail -n 3 "$OUT/$name.client" "$OUT/$name.server" >&2
    exit 1
  fi
  grep '"summary"' "$OUT/$name.client" | cut -d' ' -f2- | jq -r ".summary.$key"
}
# window FILE...: the per-process goodputs (Gbit/s, one per line) over the
# wall-clock window in which all of them transferred: the clients start one
# after the other (a second or more apart on a loaded machine), so their own
# summaries would count time in which fewer than all ran. Each client's
# interval reports (-I) ending inside the common window, averaged.
window() {
  python3 - "$@" <<'PY'
import json, sys
runs = []
for f in sys.argv[1:]:
    iv = []
    for line in open(f):
        t, _, rest = line.partition(' ')
        try:
            j = json.loads(rest)
        except ValueError:
            continue
        if 't_s' in j and 'gbps' in j:
            iv.append((float(t), float(j['gbps'])))
    runs.append(iv)
if any(len(iv) < 2 for iv in runs):
    sys.exit('svc_fair: a client reported fewer than 2 intervals')
# Interval k of a client covers (its report k-1, its report k]; the first
# report's start is unknown, so the window opens at the latest second report.
w0 = max(iv[0][0] for iv in runs)
w1 = min(iv[-1][0] for iv in runs)
for iv in runs:
    g = [gb for (t, gb), (tp, _) in zip(iv[1:], iv[:-1]) if tp >= w0 and t <= w1]
    if not g:
        sys.exit('svc_fair: no interval inside the common window (%.2f s)' % (w1 - w0))
    print('%.4f' % (sum(g) / len(g)))
print('window %.2f' % (w1 - w0), file=sys.stderr)
PY
}
wait_all() {
  local p
  for p in "${PIDS[@]}"; do wait "$p" || true; done
  PIDS=()
}
one() { # NAME MODE ARGS...: one pair of SECS, waited for
  local name=$1 mode=$2
  shift 2
  start "$name" "$mode" "$SECS" "$@"
  wait_all
}
# qjain NAME: Jain's index over the QPs of one process, from the bytes its
# server placed per QP (--counters-json: rx_data_bytes counts no duplicate).
qjain() { jq -r '.qps[].rx_data_bytes' "$OUT/$1.counters" | jain; }
q8() { # NAME MODE: one process with NPROC QPs (16 in flight each), its QPs' Jain
  SRV_ARGS=(--counters-json "$OUT/$1.counters")
  one "$1" "$2" -s 65536 -q "$NPROC" -t 16 --verify --json --no-mrcd
  SRV_ARGS=()
  field "$1" gbps >/dev/null
  qjain "$1"
}
jain() { awk '{ s += $1; q += $1 * $1; n++ } END { printf "%.4f", (s * s) / (n * q) }'; }
sum() { awk '{ s += $1 } END { printf "%.3f", s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# bulk8 NAME: NPROC pairs at once through the running services; their
# goodputs over the common window into G8.
bulk8() { # NAME [ARGS...] (default BULK)
  local name=$1 i files=()
  shift
  local args=("$@")
  [ ${#args[@]} = 0 ] && args=("${BULK[@]}")
  # Longer runs, so that the window in which all transfer lasts about SECS.
  for ((i = 0; i < NPROC; i++)); do
    start "$name.$i" service $((SECS + 4)) "${args[@]}" -I 0.25
  done
  wait_all
  for ((i = 0; i < NPROC; i++)); do
    field "$name.$i" gbps >/dev/null
    files+=("$OUT/$name.$i.client")
  done
  mapfile -t G8 < <(window "${files[@]}" 2>>"$OUT/windows")
  if [ "${#G8[@]}" != "$NPROC" ]; then
    echo "svc_fair: $name: no common window of the $NPROC transfers ($(tail -n 1 "$OUT/windows"))" >&2
    exit 1
  fi
}
declare -a X1 S1 S8 J R1 R8 XL SL RL JQS JQX JA JNV CVB CVL
# -C's figures by "MODE.KIND.ROUND": bulk0/bulk1 (Gbit/s quiet/busy),
# lat0/lat1 (p50 us), rb/rl (what busy kept).
declare -A CV
# corun MODE R: bulk1 and lat8, quiet and busy (the order alternating).
corun() {
  local m=$1 r=$2 b order
  if ((r % 2)); then order="0 1"; else order="1 0"; fi
  for b in $order; do
    if ((b)); then busy_on; fi
    one "$m.cbulk$b.$r" "$m" "${BULK[@]}"
    one "$m.clat$b.$r" "$m" "${LAT[@]}"
    if ((b)); then busy_off; fi
    CV[$m.bulk$b.$r]=$(field "$m.cbulk$b.$r" gbps)
    CV[$m.lat$b.$r]=$(field "$m.clat$b.$r" p50_us)
  done
  CV[$m.rb.$r]=$(ratio "${CV[$m.bulk1.$r]}" "${CV[$m.bulk0.$r]}")
  CV[$m.rl.$r]=$(ratio "${CV[$m.lat0.$r]}" "${CV[$m.lat1.$r]}")
  echo "round $r $m: bulk1 ${CV[$m.bulk0.$r]} Gbit/s quiet, ${CV[$m.bulk1.$r]} busy (kept ${CV[$m.rb.$r]}); 8 B p50 ${CV[$m.lat0.$r]} us quiet, ${CV[$m.lat1.$r]} busy (kept ${CV[$m.rl.$r]})"
}
mode_service() {
  local r=$1 g
  bench_svc_up svc_fair
  if [ -n "$CORUN" ]; then
    corun service "$r"
    bench_svc_down
    return
  fi
  if [ -n "$LATONLY" ]; then
    one "svc.lat.$r" service "${LAT[@]}"
    SL[r]=$(field "svc.lat.$r" p50_us)
    bench_svc_down
    echo "round $r service   8 B p50 ${SL[r]} us"
    return
  fi
  one "svc.bulk1.$r" service "${BULK[@]}"
  S1[r]=$(field "svc.bulk1.$r" gbps)
  bulk8 "svc.bulk8.$r"
  g=("${G8[@]}")
  S8[r]=$(printf '%s\n' "${g[@]}" | sum)
  J[r]=$(printf '%s\n' "${g[@]}" | jain)
  JQS[r]=$(q8 "svc.q8.$r" service)
  NOVERIFY=1
  bulk8 "svc.bulk8nv.$r" -s 65536 -q 1 -t 16 --json --no-mrcd
  NOVERIFY=
  JNV[r]=$(printf '%s\n' "${G8[@]}" | jain)
  one "svc.lat.$r" service "${LAT[@]}"
  SL[r]=$(field "svc.lat.$r" p50_us)
  bench_svc_down
  echo "round $r service   bulk1 ${S1[r]} Gbit/s, bulk$NPROC ${S8[r]} Gbit/s (each: ${g[*]}; $(tail -n 1 "$OUT/windows") s all at once), Jain ${J[r]} (without --verify: ${JNV[r]}; 1 process, $NPROC QPs: ${JQS[r]}), 8 B p50 ${SL[r]} us"
}
mode_exclusive() {
  local r=$1
  if [ -n "$CORUN" ]; then
    corun exclusive "$r"
    return
  fi
  if [ -n "$LATONLY" ]; then
    one "exc.lat.$r" exclusive "${LAT[@]}"
    XL[r]=$(field "exc.lat.$r" p50_us)
    echo "round $r exclusive 8 B p50 ${XL[r]} us"
    return
  fi
  one "exc.bulk1.$r" exclusive "${BULK[@]}"
  X1[r]=$(field "exc.bulk1.$r" gbps)
  JQX[r]=$(q8 "exc.q8.$r" exclusive)
  one "exc.lat.$r" exclusive "${LAT[@]}"
  XL[r]=$(field "exc.lat.$r" p50_us)
  echo "round $r exclusive bulk1 ${X1[r]} Gbit/s, Jain over 1 process's $NPROC QPs ${JQX[r]}, 8 B p50 ${XL[r]} us"
}
mode_alt() {
  local r=$1
  # shellcheck disable=SC2086
  bench_svc_up svc_fair "$ALT" $ALT_ARGS
  bulk8 "alt.bulk8.$r"
  bench_svc_down
  JA[r]=$(printf '%s\n' "${G8[@]}" | jain)
  echo "round $r -A service bulk$NPROC $(printf '%s\n' "${G8[@]}" | sum) Gbit/s (each: ${G8[*]}), Jain ${JA[r]}"
}
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order="service exclusive"; else order="exclusive service"; fi
  [ -n "$ALT" ] && if ((r % 2)); then order="$order alt"; else order="alt $order"; fi
  for m in $order; do "mode_$m" "$r"; done
  if [ -n "$CORUN" ]; then
    CVB[r]=$(ratio "${CV[service.rb.$r]}" "${CV[exclusive.rb.$r]}")
    CVL[r]=$(ratio "${CV[service.rl.$r]}" "${CV[exclusive.rl.$r]}")
    echo "round $r kept, service / exclusive: bulk ${CVB[r]}, 8 B p50 ${CVL[r]}"
    continue
  fi
  RL[r]=$(ratio "${SL[r]}" "${XL[r]}")
  if [ -n "$LATONLY" ]; then
    echo "round $r ratio: p50 service/exclusive ${RL[r]}"
    continue
  fi
  R1[r]=$(ratio "${S1[r]}" "${X1[r]}")
  R8[r]=$(ratio "${S8[r]}" "${S1[r]}")
  echo "round $r ratios: bulk1 service/exclusive ${R1[r]}, bulk$NPROC/bulk1 ${R8[r]}, p50 service/exclusive ${RL[r]}"
done
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [ -n "$CORUN" ]; then
  for m in service exclusive; do
    v=() w=() x=() y=()
    for ((r = 1; r <= ROUNDS; r++)); do
      v+=("${CV[$m.bulk0.$r]}") w+=("${CV[$m.bulk1.$r]}") x+=("${CV[$m.lat0.$r]}") y+=("${CV[$m.lat1.$r]}")
    done
    echo "median $m: bulk1 $(med "${v[@]}") Gbit/s quiet, $(med "${w[@]}") busy; 8 B p50 $(med "${x[@]}") us quiet, $(med "${y[@]}") busy"
  done
  echo "median kept, service / exclusive: bulk $(med "${CVB[@]}") (per round: ${CVB[*]}), 8 B p50 $(med "${CVL[@]}") (per round: ${CVL[*]})"
  echo "logs: $OUT"
  exit 0
fi
if [ -n "$LATONLY" ]; then
  echo "median 8 B p50: service $(med "${SL[@]}") us, exclusive $(med "${XL[@]}") us, ratio $(med "${RL[@]}") (target <= 1.2; per round: ${RL[*]})"
  echo "logs: $OUT"
  exit 0
fi
echo "median bulk1: service $(med "${S1[@]}") Gbit/s, exclusive $(med "${X1[@]}") Gbit/s, ratio $(med "${R1[@]}") (target >= 0.9; per round: ${R1[*]})"
echo "median bulk$NPROC: $(med "${S8[@]}") Gbit/s, ratio to bulk1 $(med "${R8[@]}") (target >= 1.0; per round: ${R8[*]})"
echo "median Jain over $NPROC: $(med "${J[@]}") (target >= 0.95; per round: ${J[*]})"
echo "median Jain over $NPROC without --verify: $(med "${JNV[@]}") (per round: ${JNV[*]})"
echo "median Jain over the $NPROC QPs of 1 process: service $(med "${JQS[@]}"), exclusive $(med "${JQX[@]}") (per round: service ${JQS[*]}; exclusive ${JQX[*]})"
echo "median 8 B p50: service $(med "${SL[@]}") us, exclusive $(med "${XL[@]}") us, ratio $(med "${RL[@]}") (target <= 1.2; per round: ${RL[*]})"
[ -n "$ALT" ] && echo "median Jain over $NPROC through -A $ALT: $(med "${JA[@]}") (per round: ${JA[*]})"
echo "logs: $OUT"
