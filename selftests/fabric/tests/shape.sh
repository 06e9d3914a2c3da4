#!/usr/bin/env bash
# tbf shaping of a plane: TCP goodput close to the configured rate, also for
# a rate changed at run time, and the qdisc sits where AF_XDP traffic passes.
. "$(dirname "$0")/lib.sh"
t_require
[ -x "$B_TCP" ] || t_skip "bench/tcp_peer is not built (MRC_BUILD_BENCH=OFF)"

# Host: 200 Mbit/s, then 50 Mbit/s, 2 s transfers. In the VM (MRC_IN_VM=1)
# a TCG guest pushes about 120 Mbit/s of verified TCP at best, less when the
# host is busy: there the rates are lower (50, then 10 Mbit/s) and
# the transfers 4 s long; the bounds are the same fractions of the rate.
r1=200 r2=50 dur=2
if t_vm; then
	r1=50 r2=10 dur=4
	echo "MRC_IN_VM=1: shaping at $r1 then $r2 Mbit/s, $dur s transfers (host: 200 then 50 Mbit/s, 2 s)"
fi
t_up direct planes=1 shape=${r1}mbit
t_check "tbf on the wire's egress toward B" bash -c \
	"tc -n $(fabric_ns "$R" W) qdisc show dev w0b-$R | grep -q 'tbf.*rate ${r1}Mbit'"
goodput() { # -> server gbps of a single-flow transfer, data verified
	local port=$((20000 + RANDOM % 10000))
	ip netns exec "$(t_ns B)" "$B_TCP" server --port $port --timeout 30 >"$T_TMP/srv.json" 2>"$T_TMP/srv.err" &
	local spid=$!
	ip netns exec "$(t_ns A)" "$B_TCP" client --connect 198.18.0.2 --port $port --duration $dur --verify \
		>"$T_TMP/cli.json" 2>"$T_TMP/cli.err"
	wait $spid
	tail -1 "$T_TMP/srv.json" | jq -r '"\(.summary.gbps) \(.summary.verify)"'
}
gbit() { awk -v m="$1" -v f="$2" 'BEGIN { printf "%g", m * f / 1000 }'; } # MBIT FRACTION -> Gbit/s
read -r g v <<<"$(goodput)"
t_eq "$r1 Mbit/s: data verified" "$v" ok
# goodput = rate less TCP/IP/Ethernet headers (~1.7% at MTU 3500) and ramp-up
t_range "$r1 Mbit/s: goodput (Gbit/s)" "$g" "$(gbit $r1 0.85)" "$(gbit $r1 1.005)"
"$T_DIR/../fabric.sh" shape "$R" p0 ${r2}mbit both
read -r g v <<<"$(goodput)"
t_eq "$r2 Mbit/s: data verified" "$v" ok
t_range "$r2 Mbit/s after reshaping: goodput (Gbit/s)" "$g" "$(gbit $r2 0.84)" "$(gbit $r2 1.01)"
t_done
