#!/usr/bin/env bash
# One mrc QP over shaped planes, and whether what it retransmitted was lost:
# every plane of a 4-plane fabric shaped to RATE (tbf in the wire, both
# directions: bench/compare's shaped section), one mrc_perf transfer per run
# on the same fabric, and per run:
#
#   goodput per interval and in steady state (the intervals after the first
#   second) as a fraction of the shaped capacity; the sender's
#   retransmissions, tail-loss probes, spurious retransmissions it detected
#   (TSETH echo), EVs retired, readmitted by probes and returned at once
#   (their loss proven spurious), plane suspicions; the receiver's duplicate
#   packets (retransmissions whose original had arrived as well); every
#   shaper's packets, drops and overlimits during the run.
#
#   bench/shaped.sh [-b BUILD] [-R RATE] [-t SECONDS] [-I SEC] [-r RUNS]
#                   [-o DIR] [-- mrc_perf options]
#
# Defaults: RATE 1gbit, 6 s, 0.1 s intervals, 3 runs. A retransmission with
# no drop anywhere (shapers, veth, AF_XDP rings) is a loss inferred from a
# delay. Needs root; builds nothing (default BUILD ./build).
# Documentation/performance.md, "1 Gbit/s planes: the last percent".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build RATE=1gbit SECS=6 IVAL=0.1 RUNS=3 OUT=
while getopts b:R:t:I:r:o:h o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; R) RATE=$OPTARG ;; t) SECS=$OPTARG ;;
    I) IVAL=$OPTARG ;; r) RUNS=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
PERF=$BUILD/user/tools/mrc_perf
. "$ROOT/bench/bench_lib.sh"
bench_setup shaped "$PERF"
bench_fabric_up planes=4 wire=on offload=on mtu=3500
for p in 0 1 2 3; do "$FABRIC" plane "$RUN" "$p" shape "$RATE" >/dev/null; done
WNS=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['links'][0]['wire']['ns'])" "$STATE")
shapers() { ip netns exec "$WNS" tc -s -j qdisc show >"$1"; }

for r in $(seq 1 "$RUNS"); do
  shapers "$OUT/tc$r.before"
  ip netns exec "$NSB" "$PERF" server -d "$DEVB" --no-mrcd --counters "$@" >"$OUT/server$r.log" 2>&1 &
  SPID=$!
  sleep 0.5
  timeout $((${SECS%.*} + 60)) ip netns exec "$NSA" "$PERF" client "$B0" -d "$DEVA" -D "$SECS" \
    -I "$IVAL" -j --no-mrcd "$@" >"$OUT/client$r.json" 2>"$OUT/client$r.err" || true
  wait "$SPID" || true
  SPID=
  shapers "$OUT/tc$r.after"
done

python3 - "$OUT" "$RUNS" "$RATE" <<'EOF'
import json, re, sys
out, runs, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = re.fullmatch(r"([\d.]+)([kmg]?)bit", rate.lower())
cap = 4 * float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 1e9 if m else 0
def tbf(path):
    return {q["dev"]: q for q in json.load(open(path)) if q.get("kind") == "tbf"}
res = []
for r in range(1, runs + 1):
    lines = [json.loads(l) for l in open(f"{out}/client{r}.json") if l.startswith("{")]
    ivals = [l for l in lines if "t_s" in l]
    summ = next((l["summary"] for l in lines if "summary" in l), None)
    if not summ:
        print(f"run {r}: no summary (see {out}/client{r}.err)")
        continue
    steady = [l["gbps"] for l in ivals if l["t_s"] > 1.0 + 1e-6]
    srv = open(f"{out}/server{r}.log").read()
    dup = sum(int(x) for x in re.findall(r"\bdup (\d+)", srv))
    b, a = tbf(f"{out}/tc{r}.before"), tbf(f"{out}/tc{r}.after")
    sh = {d: {k: a[d][k] - b.get(d, {}).get(k, 0) for k in ("packets", "drops", "overlimits")} for d in a}
    rec = {"run": r, "gbps": summ["gbps"], "capacity_gbps": cap,
           "steady_fraction": round(sum(steady) / len(steady) / cap, 4) if steady and cap else None,
           "intervals": [[l["t_s"], l["gbps"]] for l in ivals],
           "rtx": summ["rtx"], "tlp": summ["tlp"], "spurious_rtx": summ["spurious_rtx"],
           "ev_assumed_bad": summ["ev_assumed_bad"], "ev_readmitted": summ.get("ev_readmitted"),
           "ev_undone": summ.get("ev_undone"), "plane_suspects": summ["plane_suspects"],
           "receiver_duplicates": dup, "shapers": sh,
           "shaper_drops": sum(v["drops"] for v in sh.values())}
    res.append(rec)
    low = min(steady, default=0)
    print(f"run {r}: {rec['gbps']:.3f} Gbit/s, steady {rec['steady_fraction']} of {cap:g} Gbit/s "
          f"(lowest interval {low:.3f}); rtx {rec['rtx']} (receiver duplicates {dup}, "
          f"proven spurious {rec['spurious_rtx']}), tlp {rec['tlp']}, EVs retired "
          f"{rec['ev_assumed_bad']} (readmitted by probes {rec['ev_readmitted']}, returned at once "
          f"{rec['ev_undone']}), plane suspicions {rec['plane_suspects']}; shapers: "
          f"{sum(v['packets'] for v in sh.values())} packets, {rec['shaper_drops']} dropped, "
          f"{sum(v['overlimits'] for v in sh.values())} overlimits")
json.dump(res, open(f"{out}/results.json", "w"), indent=1)
print(f"results: {out}/results.json")
EOF
