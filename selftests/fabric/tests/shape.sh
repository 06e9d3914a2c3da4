#!/usr/bin/env bash
# tbf shaping of a plane: TCP goodput close to the configured rate, also for
# a rate changed at run time, and the qdisc sits where AF_XDP traffic passes.
. "$(dirname "$0")/lib.sh"
t_require
[ -x "$B_TCP" ] || t_skip "bench/tcp_peer is not built (MRC_BUILD_BENCH=OFF)"

t_up direct planes=1 shape=200mbit
t_check "tbf on the wire's egress toward B" bash -c \
	"tc -n $(fabric_ns "$R" W) qdisc show dev w0b-$R | grep -q 'tbf.*rate 200Mbit'"
goodput() { # -> server gbps of a 2 s single-flow transfer, data verified
	local port=$((20000 + RANDOM % 10000))
	ip netns exec "$(t_ns B)" "$B_TCP" server --port $port --timeout 30 >"$T_TMP/srv.json" 2>"$T_TMP/srv.err" &
	local spid=$!
	ip netns exec "$(t_ns A)" "$B_TCP" client --connect 198.18.0.2 --port $port --duration 2 --verify \
		>"$T_TMP/cli.json" 2>"$T_TMP/cli.err"
	wait $spid
	tail -1 "$T_TMP/srv.json" | jq -r '"\(.summary.gbps) \(.summary.verify)"'
}
read -r g v <<<"$(goodput)"
t_eq "200 Mbit/s: data verified" "$v" ok
# goodput = rate less TCP/IP/Ethernet headers (~1.7% at MTU 3500) and ramp-up
t_range "200 Mbit/s: goodput (Gbit/s)" "$g" 0.17 0.201
"$T_DIR/../fabric.sh" shape "$R" p0 50mbit both
read -r g v <<<"$(goodput)"
t_eq "50 Mbit/s: data verified" "$v" ok
t_range "50 Mbit/s after reshaping: goodput (Gbit/s)" "$g" 0.042 0.0505
t_done
