#!/usr/bin/env bash
# How the engine shares the wire between the QPs of one process (issue 23):
# one mrc_perf pair with QPS QPs (default 8; 64 KiB WRITEs, 16 in flight per
# QP, --verify), SECONDS long, through the host services and in exclusive
# mode, interleaved round by round (the order alternates) on the same 4-plane
# veth fabric (`fabric.sh up direct planes=4`). Per run: the goodput, the
# bytes the server placed on each QP (its --counters-json: rx_data_bytes
# counts no duplicate), each QP's share of the mean and Jain's index over
# them (target >= 0.95, the one of bench/svc_fair.sh), and the sender's ACK
# timeouts and retransmitted packets per QP (its --counters-json: a QP that
# lost more gets less). Prints every run and the medians.
#
#   bench/svc_q8.sh [-b BUILD] [-B BUILD2] [-r ROUNDS] [-t SECONDS] [-q QPS]
#                   [-m MODES] [-x ARG]... [-o DIR]
#
# -m: the modes, comma-separated (default service,exclusive). -x: one more
# mrc_perf argument for both sides (repeatable), e.g. -m exclusive -x --no-cc
# (congestion control off: exclusive mode only, the service's QPs take
# mrcd's or the default profile): then nothing but the engine's turns and
# losses divide the wire between the QPs.
#
# -B: a second build directory (say, the one before a change): each round
# also runs each mode with its mrc_perf and mrc-serviced, interleaved with
# BUILD's, and its medians are printed beside.
#
# Every run verifies its data (one that does not fails the script). Needs
# root; builds nothing (default BUILD ./build). Documentation/service.md,
# section 4 ("CPU share").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build BUILD2='' ROUNDS=3 SECS=4 QPS=8 OUT='' MODES=service,exclusive XARGS=()
while getopts b:B:r:t:q:m:x:o:h o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; B) BUILD2=$(cd "$OPTARG" && pwd) ;;
    r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;; q) QPS=$OPTARG ;; o) OUT=$OPTARG ;;
    m) MODES=$OPTARG ;; x) XARGS+=("$OPTARG") ;;
    *) sed -n '2,29p' "$0"; exit 2 ;;
  esac
done
. "$ROOT/bench/bench_lib.sh"
perf_of() { echo "$1/user/tools/mrc_perf"; }
svcd_of() { echo "$1/user/svc/mrc-serviced"; }
BINS=("$(perf_of "$BUILD")" "$(svcd_of "$BUILD")")
[ -n "$BUILD2" ] && BINS+=("$(perf_of "$BUILD2")" "$(svcd_of "$BUILD2")")
bench_setup svc_q8 "${BINS[@]}"
bench_fabric_up planes=4 >/dev/null
BENCH=svc_q8
. "$ROOT/bench/svc_bench_lib.sh"
trap 'stop_all; bench_svc_down; bench_cleanup' EXIT INT TERM

declare -A JAIN  # "b|B mode" -> Jain's index of each round, space-separated
rev=()
# run R TAG BUILD MODE: one run, its line, its Jain's index into JAIN.
run() {
  local r=$1 tag=$2 build=$3 mode=$4 name g j shares
  name="$tag.$mode.$r"
  PERF=$(perf_of "$build")
  [ "$mode" = service ] && bench_svc_up svc_q8 "$(svcd_of "$build")"
  qrun "$name" "$mode" "$QPS" "${XARGS[@]}"
  [ "$mode" = service ] && bench_svc_down
  g=$(field "$name" gbps)
  j=$(qbytes "$name" | jain)
  shares=$(qbytes "$name" | awk '{ b[NR] = $1; s += $1 } END { for (i = 1; i <= NR; i++) printf "%s%.2f", (i > 1 ? " " : ""), b[i] * NR / s }')
  JAIN["$tag $mode"]+="$j "
  printf 'round %s -%s %-9s %s Gbit/s, Jain %s; bytes per QP: %s; share of the mean: %s; ACK timeouts (retransmitted packets) per QP: %s\n' \
    "$r" "$tag" "$mode" "$g" "$j" "$(qbytes "$name" | tr '\n' ' ' | sed 's/ $//')" "$shares" \
    "$(jq -r '[.qps[] | "\(.timeouts) (\(.tx_rtx_pkts))"] | join(" ")' "$OUT/$name.ccounters")"
}
for ((r = 1; r <= ROUNDS; r++)); do
  runs=()
  for mode in ${MODES//,/ }; do
    runs+=("b $mode")
    [ -n "$BUILD2" ] && runs+=("B $mode")
  done
  if ((r % 2 == 0)); then
    # the other order: the last run of a round first
    for ((i = ${#runs[@]} - 1; i >= 0; i--)); do rev+=("${runs[i]}"); done
    runs=("${rev[@]}")
    rev=()
  fi
  for x in "${runs[@]}"; do
    read -r tag mode <<<"$x"
    if [ "$tag" = b ]; then b=$BUILD; else b=$BUILD2; fi
    run "$r" "$tag" "$b" "$mode"
  done
done
for k in "b service" "B service" "b exclusive" "B exclusive"; do
  [ -n "${JAIN[$k]:-}" ] || continue
  read -ra v <<<"${JAIN[$k]}"
  echo "median Jain over $QPS QPs, -$k: $(med "${v[@]}") (per round: ${v[*]})"
done
echo "-b $BUILD${BUILD2:+, -B $BUILD2}; logs: $OUT"
