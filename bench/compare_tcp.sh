#!/usr/bin/env bash
# One MRC QP over 4 veth planes against one kernel TCP flow over one plane,
# in the same run, interleaved (the machine's speed drifts: compare only
# numbers from the same run).
#
#   bench/compare_tcp.sh [-r ROUNDS] [-t SECONDS] [-s BYTES] [-q QPS] [-b BUILD] [-o OUT.json]
#
# Prints each round and the medians; writes JSON with every sample to OUT.
# Needs root. Builds nothing: point -b at a build directory (default ./build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=3 SECS=8 SIZE=65536 QPS=1 BUILD=$ROOT/build OUT=
while getopts r:t:s:q:b:o:h o; do
  case $o in
    r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;; s) SIZE=$OPTARG ;; q) QPS=$OPTARG ;;
    b) BUILD=$(cd "$OPTARG" && pwd) ;; o) OUT=$OPTARG ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "compare_tcp: needs root" >&2; exit 77; }
PERF=$BUILD/user/tools/mrc_perf
[ -x "$PERF" ] || { echo "compare_tcp: $PERF not built" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "compare_tcp: iperf3 missing (scripts/deps.sh)" >&2; exit 1; }
FABRIC=$ROOT/selftests/fabric/fabric.sh

RUN=
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  [ -n "$RUN" ] && "$FABRIC" down "$RUN" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

# Bare veth pairs (no wire namespace: nothing to inject here), jumbo-capable
# MTU for TCP's sake, offloads on as a TCP deployment would have them.
RUN=$("$FABRIC" up direct planes=4 wire=off offload=on mtu=3500 | tail -1)
STATE=$("$FABRIC" state "$RUN")
jq_() { python3 -c "import json,sys; d=json.load(open('$STATE')); print($1)"; }
NSA=$(jq_ "d['hosts']['A']['ns']"); NSB=$(jq_ "d['hosts']['B']['ns']")
DEVA=$(jq_ "','.join(p['ifname'] for p in d['hosts']['A']['ports'])")
DEVB=$(jq_ "','.join(p['ifname'] for p in d['hosts']['B']['ports'])")
B0=$(jq_ "d['hosts']['B']['ports'][0]['ipv4']")
echo "fabric $RUN: A=$NSA ($DEVA) B=$NSB ($DEVB)"

mrc_round() {
  ip netns exec "$NSB" "$PERF" server -d "$DEVB" -s "$SIZE" -q "$QPS" >/tmp/compare_srv.$$ 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  local out
  out=$(ip netns exec "$NSA" timeout $((SECS + 30)) "$PERF" client "$B0" -d "$DEVA" -s "$SIZE" -q "$QPS" \
        -D "$SECS" --json 2>/dev/null | grep '"summary"' || true)
  wait "$spid" 2>/dev/null || true
  python3 -c "import json,sys; print(json.loads(sys.argv[1])['summary']['gbps'])" "$out" 2>/dev/null || echo 0
}

tcp_round() {
  ip netns exec "$NSB" iperf3 -s -1 -B "$B0" >/dev/null 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  sleep 0.3
  local out
  out=$(ip netns exec "$NSA" timeout $((SECS + 20)) iperf3 -c "$B0" -t "$SECS" -J 2>/dev/null || true)
  wait "$spid" 2>/dev/null || true
  python3 -c "import json,sys; print(round(json.loads(sys.argv[1])['end']['sum_received']['bits_per_second']/1e9, 3))" "$out" 2>/dev/null || echo 0
}

MRC=() TCP=()
for r in $(seq 1 "$ROUNDS"); do
  m=$(mrc_round); t=$(tcp_round)
  MRC+=("$m"); TCP+=("$t")
  echo "round $r: mrc (1 QP x $QPS, 4 planes, ${SIZE} B) ${m} Gbit/s   tcp (1 flow, 1 plane) ${t} Gbit/s"
done
python3 - "$OUT" "${MRC[*]}" "${TCP[*]}" <<'EOF'
import json, statistics, sys
out, m, t = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
res = {"mrc_gbps": m, "tcp_gbps": t, "mrc_median": statistics.median(m), "tcp_median": statistics.median(t)}
res["ratio"] = res["mrc_median"] / res["tcp_median"] if res["tcp_median"] else None
print(f"median: mrc {res['mrc_median']:.2f} Gbit/s, tcp {res['tcp_median']:.2f} Gbit/s, ratio {res['ratio']:.2f}")
if out:
    json.dump(res, open(out, "w"), indent=1)
EOF
