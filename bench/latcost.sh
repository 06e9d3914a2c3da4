#!/usr/bin/env bash
# What one blocking round trip costs each side: an 8-byte mrc ping-pong
# (mrc_perf -l --progress app: each side's thread runs the engine and sleeps
# in Context::progress) against a TCP ping-pong (tcp_peer --pingpong: each
# side blocks in recv), interleaved round by round on a one-plane veth fabric
# (`fabric.sh up direct planes=1 wire=off offload=on`). Both processes of
# every run are counted with `perf stat` (software events and tracepoints:
# no PMU needed), and each figure is divided by the round trips of the run:
#
#   RTT p50 / p99 / min, and per side: CPU microseconds (task-clock, all
#   threads), system calls, context switches, softirqs run in the process's
#   context (the veth/XDP receive path of the peer runs in the sender's
#   sendto), and for mrc the engine passes (mrc_perf --counters).
#
#   bench/latcost.sh [-b BUILD] [-r ROUNDS] [-t SECONDS] [-s BYTES]
#                    [-p none|same|split] [-o DIR] [-- mrc_perf options]
#
# -p: CPU placement of the two processes (taskset): none (the scheduler's),
# same (both on CPU 0: no idle vCPU to wake, every round trip is two context
# switches on one CPU), split (server on CPU 1, client on CPU 0).
# Needs root and perf (scripts/deps.sh installs linux-perf); builds nothing
# (default BUILD ./build; MRC_PERF names another mrc_perf binary).
# Documentation/performance.md, "Blocking round trips".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=3 SECS=2 SIZE=8 PLACE=none OUT=
while getopts b:r:t:s:p:o:h o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; t) SECS=$OPTARG ;;
    s) SIZE=$OPTARG ;; p) PLACE=$OPTARG ;; o) OUT=$OPTARG ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
EXTRA=("$@")
case $PLACE in
  none) SCPU=() CCPU=() ;;
  same) SCPU=(taskset -c 0) CCPU=(taskset -c 0) ;;
  split) SCPU=(taskset -c 1) CCPU=(taskset -c 0) ;;
  *) echo "latcost: -p none|same|split" >&2; exit 2 ;;
esac
PERF=${MRC_PERF:-$BUILD/user/tools/mrc_perf} TCP=$BUILD/bench/tcp_peer
. "$ROOT/bench/bench_lib.sh"
command -v perf >/dev/null || { echo "latcost: perf missing (scripts/deps.sh installs linux-perf)" >&2; exit 1; }
bench_setup latcost "$PERF" "$TCP"
EVENTS=task-clock,context-switches,raw_syscalls:sys_enter,irq:softirq_entry
bench_fabric_up planes=1 wire=off offload=on mtu=3500
echo "latcost: fabric $RUN, $ROUNDS rounds of mrc and tcp, $SECS s each, $SIZE B, placement $PLACE, out $OUT"

port=27600
one() { # TRANSPORT ROUND
  local t=$1 r=$2 tag="$1.r$2" srv cli
  port=$((port + 1))
  if [ "$t" = mrc ]; then
    local common=(-m 3392 -s "$SIZE" -p "$port" --json -l --verify --progress app --counters "${EXTRA[@]}")
    srv=("$PERF" server -d "$DEVB" "${common[@]}")
    cli=("$PERF" client "$B0" -d "$DEVA" "${common[@]}" -D "$SECS")
  else
    srv=("$TCP" server --mode tcp --port "$port" --timeout $((SECS + 60)))
    cli=("$TCP" client --mode tcp --connect "$B0" --port "$port" --pingpong --msg-size "$SIZE"
         --duration "$SECS" --timeout $((SECS + 60)))
  fi
  # Bounded: each side is stopped if it overruns by a minute.
  ip netns exec "$NSB" "${SCPU[@]}" perf stat -x, -e "$EVENTS" -o "$OUT/$tag.server.stat" -- \
    timeout $((SECS + 60)) "${srv[@]}" >"$OUT/$tag.server.log" 2>&1 &
  SPID=$!
  sleep 0.5
  ip netns exec "$NSA" "${CCPU[@]}" perf stat -x, -e "$EVENTS" -o "$OUT/$tag.client.stat" -- \
    timeout $((SECS + 60)) "${cli[@]}" >"$OUT/$tag.client.log" 2>&1 || true
  wait "$SPID" || true
  SPID=
  echo "$t $r" >>"$OUT/runs.txt"
}

: >"$OUT/runs.txt"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then one mrc "$r"; one tcp "$r"; else one tcp "$r"; one mrc "$r"; fi
done

python3 - "$OUT" <<'EOF'
import json, os, re, statistics as st, sys
out = sys.argv[1]

def summary(path):
    for line in open(path):
        line = line.strip()
        if line.startswith("{") and '"summary"' in line:
            return json.loads(line)["summary"]
    return None

def stat(path):
    v = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) >= 3 and not line.startswith("#"):
            try:
                v[f[2]] = float(f[0])
            except ValueError:
                pass
    return v

def passes(path):
    m = re.search(r"application passes (\d+)", open(path).read())
    return int(m.group(1)) if m else None

rows = {}
for line in open(os.path.join(out, "runs.txt")):
    t, r = line.split()
    tag = f"{t}.r{r}"
    s = summary(os.path.join(out, tag + ".client.log"))
    if not s:
        print(f"latcost: {tag}: no summary (see {out}/{tag}.client.log)", file=sys.stderr)
        continue
    if t == "mrc":
        rtt = (s["rtt_p50_us"], s["rtt_p99_us"], s["rtt_min_us"]); n = s["iters"]
        if s.get("verify") != "ok":
            print(f"latcost: {tag}: verification {s.get('verify')}", file=sys.stderr)
            continue
    else:
        rtt = (s["p50_us"], s["p99_us"], s["min_us"]); n = s["iters"]
    row = {"round": int(r), "rtt": rtt, "n": n}
    for side in ("client", "server"):
        v = stat(os.path.join(out, f"{tag}.{side}.stat"))
        row[side] = {"cpu_us": v.get("task-clock", 0) * 1e3 / n,  # task-clock is in ms
                     "syscalls": v.get("raw_syscalls:sys_enter", 0) / n,
                     "cs": v.get("context-switches", 0) / n,
                     "softirqs": v.get("irq:softirq_entry", 0) / n}
        if t == "mrc":
            p = passes(os.path.join(out, f"{tag}.{side}.log"))
            row[side]["passes"] = p / n if p is not None else float("nan")
    rows.setdefault(t, []).append(row)
    c, sv = row["client"], row["server"]
    print(f"{t:3s} r{r}: {n} round trips, RTT p50 {rtt[0]:.1f} p99 {rtt[1]:.1f} min {rtt[2]:.1f} us; "
          f"per round trip, client / server: CPU {c['cpu_us']:.1f} / {sv['cpu_us']:.1f} us, "
          f"syscalls {c['syscalls']:.2f} / {sv['syscalls']:.2f}, context switches {c['cs']:.2f} / {sv['cs']:.2f}, "
          f"softirqs {c['softirqs']:.2f} / {sv['softirqs']:.2f}"
          + (f", passes {c['passes']:.2f} / {sv['passes']:.2f}" if t == "mrc" else ""))

if not rows.get("mrc") or not rows.get("tcp"):
    sys.exit("latcost: missing runs")
med = lambda xs: st.median(xs)
print()
print("| per round trip (median of rounds) | mrc | TCP | mrc / TCP |")
print("| --- | --- | --- | --- |")
def line(name, f, fmt="{:.1f}"):
    a, b = med([f(x) for x in rows["mrc"]]), med([f(x) for x in rows["tcp"]])
    print(f"| {name} | {fmt.format(a)} | {fmt.format(b)} | {a / b:.2f} |" if b else f"| {name} | {fmt.format(a)} | {fmt.format(b)} | - |")
line("RTT p50 (us)", lambda x: x["rtt"][0])
line("RTT p99 (us)", lambda x: x["rtt"][1])
line("RTT min (us)", lambda x: x["rtt"][2])
for side in ("client", "server"):
    line(f"{side}: CPU (us)", lambda x: x[side]["cpu_us"])
    line(f"{side}: system calls", lambda x: x[side]["syscalls"], "{:.2f}")
    line(f"{side}: context switches", lambda x: x[side]["cs"], "{:.2f}")
    line(f"{side}: softirqs", lambda x: x[side]["softirqs"], "{:.2f}")
for side in ("client", "server"):
    print(f"| {side}: engine passes (mrc) | {med([x[side]['passes'] for x in rows['mrc']]):.2f} | - | - |")
json.dump(rows, open(os.path.join(out, "latcost.json"), "w"), indent=1)
print(f"\n(written to {out}/latcost.json)")
EOF
