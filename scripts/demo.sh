#!/usr/bin/env bash
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#
# mrc in one command: an MRC transfer over a 4-plane fabric that fails.
#
#   scripts/demo.sh [--no-deps] [--build DIR] [--out DIR] [--shape RATE]
#
# On a Debian 12 machine, as root: installs what is missing (scripts/deps.sh),
# configures and builds the tree unless it is built, brings up a veth fabric
# of 4 planes shaped to 1 Gbit/s each (network namespaces; nothing touches
# the host's own interfaces), and runs mrc_perf for 15 s with data verified
# byte for byte while the fabric misbehaves:
#
#    3 s  plane 2 silently blackholed (a dead switch: no carrier loss, the
#         hosts must infer it from missing acknowledgements)
#    6 s  plane 2 healed (probes readmit its paths)
#    9 s  grey failure: 5% random loss on plane 1, both directions
#   13 s  plane 1 healed
#
# Once a second it prints each plane's goodput and the total; at the end a
# summary (goodput, retransmissions, paths retired and readmitted, longest
# stall, verification) and a plot. Ctrl-C stops it cleanly: the processes it
# started are killed by PID and the fabric's namespaces are removed.
set -uo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
BUILD=$ROOT/build
OUT=
SHAPE=1gbit
DEPS=1
DURATION=15
while [ $# -gt 0 ]; do
	case "$1" in
	--no-deps) DEPS=0; shift ;;
	--build) BUILD=$(readlink -f "$2"); shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--shape) SHAPE=$2; shift 2 ;;
	-h | --help) sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo: unknown argument '$1' (--help)" >&2; exit 2 ;;
	esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: it creates network namespaces and attaches XDP programs"

# 1. Packages and build -------------------------------------------------------
if [ "$DEPS" = 1 ]; then
	say "checking packages (scripts/deps.sh)"
	"$ROOT/scripts/deps.sh" || die "scripts/deps.sh failed"
fi
need=("$BUILD/user/tools/mrc_perf" "$BUILD/selftests/fabric/mrc_fault" "$BUILD/bpf/fabric_pass.bpf.o")
built=1
for f in "${need[@]}"; do [ -e "$f" ] || built=0; done
# An existing build is brought up to date (ninja does nothing when it is):
# a checkout updated since its last build must not run stale objects.
if [ "$built" = 0 ] || [ -f "$BUILD/build.ninja" ]; then
	say "building into $BUILD (cmake + ninja; a few minutes the first time)"
	if [ ! -f "$BUILD/build.ninja" ]; then
		cmake -S "$ROOT" -B "$BUILD" -G Ninja >"${TMPDIR:-/tmp}/mrc-demo-cmake.$$.log" 2>&1 ||
			die "cmake failed: see ${TMPDIR:-/tmp}/mrc-demo-cmake.$$.log"
	fi
	ninja -C "$BUILD" || die "the build failed"
fi
for f in "${need[@]}"; do [ -e "$f" ] || die "$f was not built"; done
for t in ip tc jq gnuplot ethtool; do command -v "$t" >/dev/null || die "$t is missing (scripts/deps.sh)"; done

export MRC_BUILD_DIR=$BUILD
FABRIC=$ROOT/selftests/fabric/fabric.sh
PERF=$BUILD/user/tools/mrc_perf
OUT=${OUT:-${TMPDIR:-/tmp}/mrc-demo.$$}
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(readlink -f "$OUT")

# 2. Cleanup: only what this script started ---------------------------------
RUN=
PIDS=()
cleanup() {
	local p
	trap - EXIT INT TERM
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	if [ -n "$RUN" ]; then
		"$FABRIC" down "$RUN" >/dev/null 2>&1 && echo "demo: fabric $RUN removed (namespaces, pins, state)"
	fi
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT TERM

# 3. The fabric ---------------------------------------------------------------
say "bringing up a 4-plane fabric (veth, network namespaces), each plane shaped to $SHAPE"
RUN=$("$FABRIC" up direct planes=4 shape="$SHAPE" | tail -n 1) || die "fabric.sh up failed"
[[ $RUN =~ ^r[a-z0-9]+$ ]] || die "fabric.sh up: unexpected output '$RUN'"
ST=$("$FABRIC" state "$RUN")
NSA=$(jq -r '.hosts.A.ns' "$ST")
NSB=$(jq -r '.hosts.B.ns' "$ST")
IFA=$(jq -r '[.hosts.A.ports[].ifname] | join(",")' "$ST")
IFB=$(jq -r '[.hosts.B.ports[].ifname] | join(",")' "$ST")
BIP=$(jq -r '.hosts.B.ports[0].ipv4' "$ST")
cat <<EOF
   host A ($NSA)                 wire W                 host B ($NSB)
     a0 ---- plane 0: 198.18.0.1 <-> 198.18.0.2 ---- b0
     a1 ---- plane 1: 198.18.1.1 <-> 198.18.1.2 ---- b1      faults and $SHAPE shapers sit in W,
     a2 ---- plane 2: 198.18.2.1 <-> 198.18.2.2 ---- b2      invisible to the hosts
     a3 ---- plane 3: 198.18.3.1 <-> 198.18.3.2 ---- b3
EOF
# The fault programs are attached (passing everything) before the transfer,
# so each fault below is one map update.
for l in p1 p2; do
	"$FABRIC" fault "$RUN" set "$l" --dir both >/dev/null || die "attaching the fault program to $l failed"
done

# 4. The transfer ---------------------------------------------------------------
say "mrc_perf: one QP, RDMA WRITE with immediate, 64 KB messages, every message checked on arrival"
COMMON=(-m 3072 -i --slots 1024 --verify --json)
ip netns exec "$NSB" "$PERF" server -d "$IFB" "${COMMON[@]}" --sample-ms 10 --counters >"$OUT/server.log" 2>&1 &
PIDS+=($!)
SERVER=$!
# the server listens once its device is open
for _ in $(seq 1 100); do
	ip netns exec "$NSB" ss -ltn 2>/dev/null | grep -q ':18515 ' && break
	kill -0 "$SERVER" 2>/dev/null || die "the server exited: $(tail -n 3 "$OUT/server.log")"
	sleep 0.05
done
ip netns exec "$NSA" "$PERF" client "$BIP" -d "$IFA" "${COMMON[@]}" -D "$DURATION" -I 1 --counters \
	--ev-log "$OUT/ev.log" >"$OUT/client.log" 2>&1 &
PIDS+=($!)
CLIENT=$!
for _ in $(seq 1 200); do
	[ -s "$OUT/server.log" ] && grep -q '^{"t_ms"' "$OUT/server.log" && break
	kill -0 "$CLIENT" 2>/dev/null || die "the client exited: $(tail -n 3 "$OUT/client.log")"
	sleep 0.05
done
grep -q '^{"t_ms"' "$OUT/server.log" || die "no data after 10 s: $(tail -n 3 "$OUT/client.log")"

# The timeline: at the start of second N, the fault due then.
EVENTS=()
fault_at() { # SECOND: applies and prints the fault due then, if any
	local what='' short=
	case "$1" in
	3) "$FABRIC" fault "$RUN" set p2 --dir both --blackhole >/dev/null &&
		what="plane 2 blackholed (the wire drops everything; the hosts keep their carrier)" short="plane 2 blackholed" ;;
	6) "$FABRIC" fault "$RUN" clear p2 --dir both >/dev/null && what="plane 2 healed" short=$what ;;
	9) "$FABRIC" fault "$RUN" set p1 --dir both --loss 5% >/dev/null &&
		what="grey failure: 5% random loss on plane 1, both directions" short="5% loss on plane 1" ;;
	13) "$FABRIC" fault "$RUN" clear p1 --dir both >/dev/null && what="plane 1 healed" short=$what ;;
	esac
	if [ -n "$what" ]; then
		# stamp it with the receiver's clock: the last sample's t_ms
		local t
		t=$(grep '^{"t_ms"' "$OUT/server.log" | tail -n 1 | jq '.t_ms / 1000')
		EVENTS+=("$t|$short")
		printf '         >>> %5.2f s  %s\n' "$t" "$what"
	fi
}

printf '\n  %7s %8s %8s %8s %8s  %8s   %s\n' "t" "plane 0" "plane 1" "plane 2" "plane 3" "total" "(Gbit/s received by B over the last second)"
seen=0
start=$(date +%s.%N)
for ((sec = 1; sec <= DURATION; sec++)); do
	# sleep until second `sec` of the transfer
	now=$(date +%s.%N)
	left=$(awk -v s="$start" -v n="$now" -v k="$sec" 'BEGIN { d = s + k - n; print (d > 0 ? d : 0) }')
	sleep "$left"
	lines=$(grep -c '^{"t_ms"' "$OUT/server.log")
	if [ "$lines" -gt "$seen" ]; then
		grep '^{"t_ms"' "$OUT/server.log" | sed -n "$((seen + 1)),${lines}p" | jq -rs '
			def col(w): tostring | (" " * (w - length)) + .;
			((.[-1].mono_ns - .[0].mono_ns + 10000000) / 1e9) as $dt |
			(.[0].planes | length) as $n |
			[range($n) as $p | (map(.planes[$p]) | add) * 8 / $dt / 1e9] as $pl |
			"  " + ((.[-1].t_ms / 1000 * 10 | round / 10) | col(5)) + " s " +
			([$pl[] | (. * 1000 | round / 1000) | col(8)] | join(" ")) +
			"  " + (($pl | add) * 1000 | round / 1000 | col(8))'
		seen=$lines
	fi
	kill -0 "$CLIENT" 2>/dev/null || break
	fault_at "$sec"
done
wait "$CLIENT"
crc=$?
wait "$SERVER"
src=$?
PIDS=()

# 5. Summary ------------------------------------------------------------------
csum=$(grep '^{"summary"' "$OUT/client.log" | tail -n 1)
ssum=$(grep '^{"summary"' "$OUT/server.log" | tail -n 1)
if [ -z "$csum" ] || [ -z "$ssum" ]; then
	die "the transfer did not finish (client exit $crc, server exit $src): $(tail -n 5 "$OUT/client.log")"
fi
grep '^{"t_ms"' "$OUT/server.log" | jq -r '[.mono_ns, .bytes, (.planes | map(tostring) | join(" "))] | join(" ")' \
	>"$OUT/samples.dat"
stall=$(awk 'NR > 1 { dt = ($1 - prev) / 1e6 } { prev = $1 }
	$2 > 0 { seen = 1; if (run > best) best = run; run = 0; next }
	seen && NR > 1 { run += dt } END { printf "%.0f", best }' "$OUT/samples.dat")
retired=0 readmitted=0 planes_retired=0
if [ -s "$OUT/ev.log" ]; then
	retired=$(jq -s '[.[] | select(.to == "ASSUMED_BAD" and .from != "ASSUMED_BAD")] | length' "$OUT/ev.log")
	readmitted=$(jq -s '[.[] | select(.to == "GOOD" and .from == "ASSUMED_BAD" and .reason == "probe_ok")] | length' "$OUT/ev.log")
fi
planes_retired=$(jq '.summary.plane_suspects' <<<"$csum")
say "summary"
jq -r --argjson s "$ssum" --arg stall "$stall" --arg ret "$retired" --arg readm "$readmitted" --arg pr "$planes_retired" '.summary |
	"  goodput            \(.gbps) Gbit/s average over \(.seconds) s (\(.bytes / 1e6 | floor) MB, \(.msgs) messages of 64 KB)",
	"  per plane (MB)     \(.planes | map(. / 1e6 | floor | tostring) | join(" / "))   (sent + received on each plane)",
	"  retransmissions    \(.rtx) packets (\(.timeouts) ACK timeouts, \(.tlp) tail-loss probes)",
	"  paths (EVs)        \($ret) retired (ASSUMED_BAD), \($readm) readmitted by probes; whole plane retired \($pr) time(s)",
	"  longest stall      \($stall) ms without a byte delivered (10 ms samples)",
	"  verification       client: \(.verify), server: \($s.summary.verify) (\($s.summary.imm_ok) messages checked on arrival, \($s.summary.imm_bad) bad)"' <<<"$csum"

# 6. The plot -----------------------------------------------------------------
t0=$(head -n 1 "$OUT/samples.dat" | awk '{print $1}')
# 10 ms samples (t, total) and 100 ms means (t, total, planes)
awk -v t0="$t0" 'NR > 1 { dt = ($1 - prev) / 1e9; if (dt > 0) printf "%.3f %.4f\n", ($1 - t0) / 1e9 + 0.01, $2 * 8 / dt / 1e9 }
	{ prev = $1 }' "$OUT/samples.dat" >"$OUT/goodput10.dat"
awk -v t0="$t0" 'NR == 1 { prev = $1; next }
	{ b = int(($1 - t0) / 1e8); if (b != cur && n > 0) { emit() } cur = b; n++; span += ($1 - prev) / 1e9
	  tot += $2; for (i = 3; i <= NF; i++) pl[i] += $i; prev = $1; np = NF }
	function emit(   i) { printf "%.2f %.4f", cur / 10 + 0.05, tot * 8 / span / 1e9
	  for (i = 3; i <= np; i++) { printf " %.4f", pl[i] * 8 / span / 1e9; pl[i] = 0 } printf "\n"; n = 0; span = 0; tot = 0 }
	END { if (n > 0) emit() }' "$OUT/samples.dat" >"$OUT/goodput.dat"
{
	echo "set terminal pngcairo size 1100,520 font ',10' noenhanced"
	echo "set output '$OUT/goodput.png'"
	echo "set title 'mrc_perf over 4 planes ($SHAPE each): goodput received per plane and in total'"
	echo "set xlabel 'time (s)'; set ylabel 'Gbit/s'; set grid; set key outside right top; set yrange [-0.1:*]"
	for e in "${EVENTS[@]}"; do
		echo "set arrow from ${e%%|*},graph 0 to ${e%%|*},graph 1 nohead lc rgb 'red' dt 2"
		echo "set label \"${e#*|}\" at ${e%%|*},graph 0.98 rotate by 90 right offset -0.6,0 font ',8' tc rgb 'red'"
	done
	echo "plot '$OUT/goodput10.dat' using 1:2 with lines lw 0.5 lc rgb '#b0b0b0' title 'total, 10 ms', \\"
	echo "  '$OUT/goodput.dat' using 1:2 with lines lw 2 lc rgb 'black' title 'total, 100 ms', \\"
	echo "  '' using 1:3 with lines title 'plane 0', '' using 1:4 with lines title 'plane 1', \\"
	echo "  '' using 1:5 with lines title 'plane 2', '' using 1:6 with lines title 'plane 3'"
} | gnuplot 2>"$OUT/gnuplot.err" || echo "demo: gnuplot failed: $(cat "$OUT/gnuplot.err")"
echo "  plot               $OUT/goodput.png"
echo "  logs               $OUT/{client,server}.log, EV state changes in $OUT/ev.log"
if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
	die "mrc_perf failed (client exit $crc, server exit $src)"
fi
exit 0
