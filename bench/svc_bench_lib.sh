# shellcheck shell=bash
# Shared by the host service benches (bench/svc_fair.sh, bench/svc_q8.sh;
# sourced after bench_lib.sh, once bench_fabric_up has run): mrc_perf pairs,
# a server on host B and a client on host A, through the services
# (bench_svc_up) or in exclusive mode, and the arithmetic of their figures.
#
#   BENCH                        the script's name, in messages
#   PERF                         the mrc_perf that start and one run
#   SECS                         one's duration (s)
#   SRV_ARGS, CLI_ARGS           extra arguments of the next start's server /
#                                client only
#   NOVERIFY                     set: field does not ask for a verified run
#   start NAME MODE SECONDS ARGS...
#                                a pair in the background (PIDS), logs
#                                OUT/NAME.server and OUT/NAME.client (each
#                                client line stamped with the wall clock)
#   wait_all, stop_all           wait for / stop the pairs started
#   one NAME MODE ARGS...        one pair of SECS, waited for
#   field NAME KEY               a field of the client's JSON summary, after
#                                checking that both sides verified (else exit 1)
#   qrun NAME MODE QPS [ARGS...] one process with QPS QPS (64 KiB WRITEs, 16
#                                in flight each, verified), SECS long, its
#                                server's counters in OUT/NAME.counters, its
#                                client's in OUT/NAME.ccounters; ARGS: more
#                                mrc_perf arguments of both sides
#   qbytes NAME                  the bytes the server of NAME placed per QP,
#                                one line each (NAME.counters, written by
#                                --counters-json: rx_data_bytes counts no
#                                duplicate)
#   jain, sum                    Jain's index / the sum of stdin's numbers
#   ratio A B, med VALUES...     A / B; the median
PIDS=()
SRV_ARGS=() CLI_ARGS=()
NOVERIFY=
SVC_PORT=$((23000 + RANDOM % 1000))

stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  PIDS=()
}
wait_all() {
  local p
  for p in "${PIDS[@]}"; do wait "$p" || true; done
  PIDS=()
}
# Each line of stdin with the wall clock it arrived at in front (mrc_perf
# flushes every report).
stamp() { while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done; }
start() {
  local name=$1 mode=$2 secs=$3
  shift 3
  SVC_PORT=$((SVC_PORT + 1))
  ip netns exec "$NSB" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/B.sock" timeout -s INT 90 \
    "$PERF" server -d "$DEVB" -p "$SVC_PORT" "$@" "${SRV_ARGS[@]}" >"$OUT/$name.server" 2>&1 &
  PIDS+=("$!")
  ip netns exec "$NSA" env MRC_MODE="$mode" MRC_SERVICE_SOCKET="$OUT/A.sock" timeout -s INT 90 \
    "$PERF" client "$B0" -d "$DEVA" -p "$SVC_PORT" "$@" "${CLI_ARGS[@]}" -D "$secs" 2>&1 | stamp >"$OUT/$name.client" &
  PIDS+=("$!")
}
one() {
  local name=$1 mode=$2
  shift 2
  start "$name" "$mode" "$SECS" "$@"
  wait_all
}
field() {
  local name=$1 key=$2 cv sv
  cv=$(grep '"summary"' "$OUT/$name.client" | cut -d' ' -f2- | jq -r .summary.verify 2>/dev/null || true)
  sv=$(grep '"summary"' "$OUT/$name.server" | jq -r .summary.verify 2>/dev/null || true)
  if [ -n "$NOVERIFY" ]; then
    cv=ok sv=ok  # a control run without --verify
  fi
  if [ "$cv" != ok ] || [ "$sv" != ok ]; then
    echo "$BENCH: $name did not verify (client ${cv:-none}, server ${sv:-none})" >&2
    tail -n 3 "$OUT/$name.client" "$OUT/$name.server" >&2
    exit 1
  fi
  grep '"summary"' "$OUT/$name.client" | cut -d' ' -f2- | jq -r ".summary.$key"
}
qrun() {
  local name=$1 mode=$2 qps=$3
  shift 3
  SRV_ARGS=(--counters-json "$OUT/$name.counters") CLI_ARGS=(--counters-json "$OUT/$name.ccounters")
  one "$name" "$mode" -s 65536 -q "$qps" -t 16 --verify --json --no-mrcd "$@"
  SRV_ARGS=() CLI_ARGS=()
}
qbytes() { jq -r '.qps[].rx_data_bytes' "$OUT/$1.counters"; }
jain() { awk '{ s += $1; q += $1 * $1; n++ } END { printf "%.4f", (s * s) / (n * q) }'; }
sum() { awk '{ s += $1 } END { printf "%.3f", s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
med() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
