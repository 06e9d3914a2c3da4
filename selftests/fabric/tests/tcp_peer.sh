#!/usr/bin/env bash
# bench/tcp_peer on the fabric: tcp, tcp-multi and mptcp (one subflow per
# plane) with data verified byte for byte, exact byte counts, ping-pong
# latency, 10 ms samples, and --verify catching corrupted data.
. "$(dirname "$0")/lib.sh"
t_require
[ -x "$B_TCP" ] || t_skip "bench/tcp_peer is not built (MRC_BUILD_BENCH=OFF)"
sysctl -q net.mptcp.enabled >/dev/null 2>&1 || t_skip "no MPTCP in this kernel"

PORT=$((30000 + RANDOM % 10000))
xfer() { # MODE CLIENT-ARGS... ; server JSON lines in $T_TMP/srv.json
	local mode=$1
	shift
	PORT=$((PORT + 1))
	ip netns exec "$(t_ns B)" "$B_TCP" server --mode "$mode" --port $PORT --timeout 30 >"$T_TMP/srv.json" 2>"$T_TMP/srv.err" &
	local spid=$!
	ip netns exec "$(t_ns A)" "$B_TCP" client --mode "$mode" --connect 198.18.0.2 --port $PORT "$@" \
		>"$T_TMP/cli.json" 2>"$T_TMP/cli.err"
	local crc=$?
	wait $spid
	return $crc
}
summary() { grep summary "$T_TMP/srv.json" | jq -r ".summary.$1"; }
wire_tx() { # bytes the wire sent toward B on each plane
	local p
	for p in 0 1 2 3; do t_cnt "$(fabric_ns "$R" W)" "w${p}b-$R" tx_bytes; done | tr '\n' ' '
}

# In the VM (MRC_IN_VM=1, TCG) the guest's CPU, not the planes, limits a
# transfer (about 0.2 Gbit/s in all), and MPTCP's default scheduler then
# keeps the lowest-RTT subflows busy and leaves the last one idle: on 6.1
# plane 3's subflow carried nothing but its handshake in 3 of 4 runs. There
# the planes are shaped to 25 Mbit/s each, well below what the guest pushes,
# so every subflow's window fills and the scheduler must use all four, as on
# a network-bound fabric.
topo_vm=
tcp_bytes=50000000
if t_vm; then
	topo_vm=shape=25mbit
	tcp_bytes=20000000
	echo "MRC_IN_VM=1: planes shaped to 25 Mbit/s; the exact-bytes TCP transfer moves $tcp_bytes bytes"
fi
t_up direct planes=4 mptcp=A:B $topo_vm
t_eq "mptcp: client subflow endpoints on planes 1-3" "$(ip -n "$(t_ns A)" mptcp endpoint show | grep -c subflow)" 3

# The client's path manager opens the three extra subflows one after the
# other. In the VM (MRC_IN_VM=1) that took so long under TCG that plane 3's
# subflow carried nothing in 2 s: there the transfer lasts 6 s (the sample
# bounds scale with it).
md=2
if t_vm; then
	md=6
	echo "MRC_IN_VM=1: the MPTCP transfer lasts $md s (host: 2 s)"
fi
read -r -a w0 <<<"$(wire_tx)"
t_check "mptcp: $md s transfer" xfer mptcp --duration $md --verify
read -r -a w1 <<<"$(wire_tx)"
t_eq "mptcp: data verified" "$(summary verify)" ok
tot=0
for p in 0 1 2 3; do tot=$((tot + w1[p] - w0[p])); done
# The default MPTCP scheduler fills the lowest-RTT subflow first, so under CPU
# contention a plane may carry only ~1%: the check is that every plane's
# subflow carried data (0.2% of a 2 s transfer is megabytes, far beyond the
# handshake), not an even split.
# With the VM's shaped planes the split is close to even; 0.2% holds for both.
for p in 0 1 2 3; do
	t_range "mptcp: share of plane $p (one subflow per plane)" \
		"$(awk -v a=$((w1[p] - w0[p])) -v t=$tot 'BEGIN { printf "%.4f", a / t }')" 0.002 0.9
done
n=$(grep -c t_ms "$T_TMP/srv.json")
# (the server samples from accept to the last byte: longer than 2 s on a loaded machine)
t_range "mptcp: 10 ms samples in $md s" "$n" $((75 * md)) $((175 * md))
t_range "mptcp: samples cover the bytes received (fraction)" \
	"$(grep t_ms "$T_TMP/srv.json" | jq -s --argjson b "$(summary bytes)" 'map(.bytes) | add / $b')" 0.9 1

t_check "tcp-multi: 4 flows for 1.5 s" xfer tcp-multi --flows 4 --duration 1.5 --verify
t_eq "tcp-multi: flows" "$(summary flows)" 4
t_eq "tcp-multi: data verified" "$(summary verify)" ok

t_check "tcp: exactly $tcp_bytes bytes" xfer tcp --bytes $tcp_bytes --verify
t_eq "tcp: bytes received" "$(summary bytes)" $tcp_bytes
t_eq "tcp: data verified" "$(summary verify)" ok

t_check "ping-pong: 300 round trips of 1000 bytes" xfer tcp --pingpong --msg-size 1000 --iters 300
pp=$(grep summary "$T_TMP/cli.json")
t_eq "ping-pong: iterations" "$(jq .summary.iters <<<"$pp")" 300
t_check "ping-pong: 0 < p50 <= p99 <= p99.9" \
	bash -c "jq -e '.summary | .p50_us > 0 and .p50_us <= .p99_us and .p99_us <= .p999_us' >/dev/null <<<'$pp'"
t_check "ping-pong over mptcp" xfer mptcp --pingpong --msg-size 64 --iters 200
t_check "ping-pong, both ends polling 50 us" xfer tcp --pingpong --msg-size 64 --iters 300 --spin-us 50
pp=$(grep summary "$T_TMP/cli.json")
t_eq "ping-pong polling: iterations" "$(jq .summary.iters <<<"$pp")" 300
t_eq "ping-pong polling: client spin" "$(jq .summary.spin_us <<<"$pp")" 50
t_eq "ping-pong polling: server spin (from the hello)" "$(summary spin_us)" 50
t_eq "ping-pong polling: bytes echoed" "$(summary bytes)" $((300 * 64))

# clos: the server signals its plane-1 address, the client opens the subflow
# through plane 1's leaf and spines
t_up clos planes=2 leaves=2 spines=2 hosts=2 mptcp=A:B
t_eq "clos mptcp: server signal endpoint" "$(ip -n "$(t_ns B)" mptcp endpoint show | grep -c signal)" 1
rx() { t_cnt "$(t_ns B)" "$(t_port B "$1" ifname)" rx_bytes; }
a0=$(rx 0) a1=$(rx 1)
PORT=$((PORT + 1))
ip netns exec "$(t_ns B)" "$B_TCP" server --mode mptcp --port $PORT --timeout 30 >"$T_TMP/srv.json" 2>"$T_TMP/srv.err" &
spid=$!
ip netns exec "$(t_ns A)" "$B_TCP" client --mode mptcp --connect "$(t_port B 0 ipv4)" --port $PORT --duration 1.5 \
	--verify >"$T_TMP/cli.json" 2>"$T_TMP/cli.err"
wait $spid
t_eq "clos mptcp: data verified" "$(summary verify)" ok
d0=$(($(rx 0) - a0)) d1=$(($(rx 1) - a1))
t_range "clos mptcp: share of plane 1" "$(awk -v a=$d1 -v t=$((d0 + d1)) 'BEGIN { printf "%.3f", a / t }')" 0.1 0.9

# --verify must catch corruption: with checksum offload on, veth trusts
# CHECKSUM_PARTIAL and TCP accepts the flipped byte.
t_up direct planes=1 offload=on
"$B_FAULT" --state "$ST" set p0 --corrupt 2% --match-proto tcp >/dev/null
xfer tcp --duration 1 --verify
t_eq "verify: corrupted stream detected" "$(summary verify)" failed
t_done
