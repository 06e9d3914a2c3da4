#!/usr/bin/env bash
# Where the time of one MRC transfer goes: runs mrc_perf between two hosts
# over 4 veth planes (both in network namespaces of this run) under
# `perf record -a`, then sorts every CPU sample of both mrc_perf processes
# (their threads and the kernel work done on their behalf: the veth/XDP
# receive path runs in the sender's syscall) into stages, and prints
# nanoseconds per data packet for each stage.
#
#   bench/profile.sh [-b BUILD] [-t SECONDS] [-s BYTES] [-F HZ] [-o DIR] [-l PCT]
#                    [-M MTU] [-S RATE] [-- mrc_perf options]
#
# -S RATE: every plane shaped to RATE (tbf in the wire, both directions,
# `fabric.sh plane RUN P shape RATE`), as bench/compare's shaped section.
# -M MTU: the veths' MTU (default 3500). Above 3506 pass mrc_perf a payload
# (-m) and --frame-chunks that fit it, e.g. -M 16200 -- -m 16000 --frame-chunks 5.
# -l PCT: a grey failure for the whole run, PCT% random loss on plane 1 in
# both directions (mrc_fault on the wire, `fabric.sh plane RUN 1 loss PCT`);
# -l 0 runs over the same wire namespace and fault program without loss, to
# compare with.
#
# Needs root and perf (linux-perf). Builds nothing: point -b at a build
# directory (default ./build). Writes DIR/perf.data, DIR/stages.json and
# DIR/stages.md (default: a fresh directory under /tmp).
#
# On a VM without PMU counters perf samples with the cpu-clock timer: work
# done with interrupts disabled is charged to the point where they are
# enabled again (_raw_spin_unlock_irqrestore, page_frag_free, ...), which
# this script counts in the kernel stage it belongs to; with call chains
# (perf record -g) such a sample whose caller is a wire shaper's dequeue
# (tbf/htb, -S) counts as "qdisc shaper".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build SECS=5 SIZE=65536 HZ=2999 OUT= LOSS= MTU=3500 SHAPE=
while getopts b:t:s:F:o:l:M:S:h o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; t) SECS=$OPTARG ;; s) SIZE=$OPTARG ;;
    F) HZ=$OPTARG ;; o) OUT=$OPTARG ;; l) LOSS=$OPTARG ;; M) MTU=$OPTARG ;;
    S) SHAPE=$OPTARG ;; *) sed -n '2,26p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
PERF=$BUILD/user/tools/mrc_perf
. "$ROOT/bench/bench_lib.sh"
command -v perf >/dev/null || { echo "profile: perf missing (scripts/deps.sh installs linux-perf)" >&2; exit 1; }
bench_setup profile "$PERF"
# The wire (where mrc_fault and the shapers run) only when asked for.
bench_fabric_up planes=4 wire=$([ -n "$LOSS$SHAPE" ] && echo on || echo off) offload=on mtu="$MTU"
if [ -n "$SHAPE" ]; then
	for p in 0 1 2 3; do "$FABRIC" plane "$RUN" "$p" shape "$SHAPE" >/dev/null; done
fi
# -l 0: the same wire and the same fault program on plane 1, passing
# everything, to compare with (the program costs CPU of its own: comparing
# against a wire without it charged that cost to the loss)
if [ -n "$LOSS" ]; then
	if [ "$LOSS" = 0 ]; then
		"$FABRIC" fault "$RUN" set p1 --dir both >/dev/null
	else
		"$FABRIC" plane "$RUN" 1 loss "$LOSS" >/dev/null
	fi
fi

ip netns exec "$NSB" "$PERF" server -d "$DEVB" -s "$SIZE" --no-mrcd --counters "$@" >"$OUT/server.log" 2>&1 &
SPID=$!
sleep 0.5
# `ip netns exec` and the shell exec the tools: these PIDs are mrc_perf's.
echo "$SPID" >"$OUT/pids"
perf record -q -a -g -F "$HZ" -o "$OUT/perf.data" -- \
  sh -c 'echo $$ >>"$0/pids"; exec ip netns exec "$@"' "$OUT" "$NSA" "$PERF" client "$B0" -d "$DEVA" \
  -s "$SIZE" -D "$SECS" --no-mrcd --counters "$@" >"$OUT/client.log" 2>&1 &
PPID_=$!
# Bounded: the client (the last PID written) is stopped if it overruns.
(sleep $((SECS + 60)); c=$(tail -1 "$OUT/pids"); [ "$c" != "$SPID" ] && kill "$c" 2>/dev/null) &
WD=$!
wait "$PPID_" || true
kill "$WD" 2>/dev/null || true
wait "$SPID" || true
SPID=
perf script -i "$OUT/perf.data" -F comm,pid,cpu,ip,sym,dso 2>/dev/null >"$OUT/samples.txt"

python3 - "$OUT" "$HZ" <<'EOF'
import json, re, sys, collections
out, hz = sys.argv[1], float(sys.argv[2])
ours = {int(x) for x in open(f"{out}/pids").read().split()}
def frames(log):
    m = re.search(r"engine: rx (\d+) frames, tx (\d+) frames", open(log).read())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
c_rx, c_tx = frames(f"{out}/client.log")
s_rx, s_tx = frames(f"{out}/server.log")
gbps = re.search(r"total: ([\d.]+) Gbit/s", open(f"{out}/client.log").read())
gbps = float(gbps.group(1)) if gbps else 0.0
data_pkts = c_tx  # data packets (and probes) the client sent

# The wire's shapers (-S): their dequeue runs in the sender's softirq and,
# when the bucket is empty, re-arms the qdisc watchdog timer.
SHAPER = "qdisc shaper (tbf/htb dequeue, its timer)"
SHAPER_RX = re.compile(r"^tbf_|^htb_|qdisc_watchdog")
# Samples charged to where interrupts are enabled again (no PMU: cpu-clock
# sampling) or to a lock: the caller that did the work decides the stage.
IRQ_SPOT = re.compile(r"_raw_spin_unlock_irq|_raw_spin_unlock_bh|queued_spin|pv_native_safe|__local_bh_enable")
WAKE = re.compile(r"try_to_wake_up|__wake_up|sock_def_readable|schedule|ppoll|futex")
# First match wins.
STAGES = [
    ("ICRC (ISA-L crc32)", r"crc32|crc_"),
    ("payload copy (user memcpy)", r"^__mem(move|cpy)_"),
    ("engine (protocol: mrc::core)", r"mrc::core::"),
    ("codec (parse/build headers)", r"mrc::codec::"),
    ("AF_XDP rings and frame pool (user)", r"mrc::xdp::"),
    ("libmrc engine thread / queues", r"mrc::Context|mrc::lib::|mrc::Cq|mrc::Qp"),
    ("application (mrc_perf)", r"anonymous namespace|run_client|run_server|^main$"),
    ("syscall entry/exit, clock", r"entry_SYSCALL|do_syscall|syscall_exit|__x64_sys|^__libc_|^__GI___libc|sendto$|recvfrom$|ppoll|__vdso|read_tsc|irqentry|fdget|__fget|clock_gettime"),
    ("kernel AF_XDP TX (frame -> skb)", r"xsk_sendmsg|__xsk_generic_xmit|xsk_build_skb|xsk_destruct_skb|sock_wfree|sock_alloc_send|__dev_direct_xmit|xsk_cq|alloc_skb|kmem_cache|kmalloc|kfree|__build_skb|skb_release|consume_skb|__alloc_skb|skb_put|skb_store_bits|xsk_tx_"),
    ("kernel veth + XDP + AF_XDP RX", r"veth_|bpf_prog_|xdp_|^__xsk_|xsk_rcv|xsk_map|__xsk_map|page_frag|skb_pp_cow|napi|net_rx_action|handle_softirqs|do_softirq|__local_bh_enable|sock_def_readable|xp_alloc|xsk_poll|page_pool|__netif|netif_|dev_hard_start|validate_xmit|xsk_generic_rcv|bpf_"),
    ("kernel memcpy", r"^__pi_memcpy|^memcpy|copy_user|memcpy_orig|rep_movs"),
    (SHAPER, SHAPER_RX.pattern),
    ("scheduler, wakeups, locks", r"schedule|finish_task_switch|try_to_wake_up|_raw_spin|queued_spin|pv_native|wake_up|futex|hrtimer|update_|enqueue|dequeue|pick_next|select_task|ttwu|tick_|sysvec|asm_|irq_"),
]
rx = [(n, re.compile(p)) for n, p in STAGES]
by = collections.Counter()
total = 0
def samples(path):
    """(header line, [(symbol, dso), leaf first]) per sample of `perf script` with -g."""
    head, stack = None, []
    for line in open(path):
        if not line.strip():
            if head:
                yield head, stack
            head, stack = None, []
        elif line[0] in " \t" and head:
            f = line.split(None, 1)
            if len(f) == 2:
                sym_, _, dso_ = f[1].strip().rpartition(" (")
                stack.append((re.sub(r"\+0x[0-9a-f]+$", "", sym_), dso_.rstrip(")")))
        else:
            head, stack = line, []
    if head:
        yield head, stack
for line, stack in samples(f"{out}/samples.txt"):
    parts = line.split()
    if len(parts) < 3:
        continue
    comm = parts[0]
    if comm != "mrc_perf":
        continue
    # comm pid [cpu]; the stack follows, leaf first
    m = re.match(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]", line)
    if not m or int(m.group(2)) not in ours or not stack:
        continue
    sym, dso = stack[0]
    total += 1
    name = "other (" + ("kernel" if "kernel" in dso else "user") + ")"
    for n, r in rx:
        if r.search(sym):
            name = n
            break
    if IRQ_SPOT.search(sym):
        # Walk up to the first caller that says whose work it was.
        for f, _ in stack[1:]:
            if SHAPER_RX.search(f):
                name = SHAPER
                break
            if WAKE.search(f):
                break
    by[name] += 1
ns_per_sample = 1e9 / hz
rows = []
for n, _ in STAGES + [("other (kernel)", None), ("other (user)", None)]:
    s = by.get(n, 0)
    if not s:
        continue
    rows.append({"stage": n, "samples": s, "share": s / total if total else 0,
                 "ns_per_data_packet": s * ns_per_sample / data_pkts if data_pkts else 0})
res = {"gbps": gbps, "client_tx_frames": c_tx, "client_rx_frames": c_rx, "server_rx_frames": s_rx,
       "server_tx_frames": s_tx, "samples": total, "hz": hz,
       "cpu_ns_per_data_packet": total * ns_per_sample / data_pkts if data_pkts else 0, "stages": rows}
json.dump(res, open(f"{out}/stages.json", "w"), indent=1)
md = [f"goodput {gbps:.2f} Gbit/s; {c_tx} packets sent by the client ({s_tx} control packets back); "
      f"CPU of both mrc_perf processes {res['cpu_ns_per_data_packet']:.0f} ns per data packet", "",
      "| stage | share | ns per data packet |", "|---|---|---|"]
for r in rows:
    md.append(f"| {r['stage']} | {100 * r['share']:.1f}% | {r['ns_per_data_packet']:.0f} |")
open(f"{out}/stages.md", "w").write("\n".join(md) + "\n")
print("\n".join(md))
print(f"\n(written to {out}/stages.md and stages.json)")
EOF
