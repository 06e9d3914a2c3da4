#!/usr/bin/env bash
# Link down/up and flapping: direct (through the wire: hosts lose carrier,
# keep their configuration) and clos (routes and neighbours come back).
. "$(dirname "$0")/lib.sh"
t_require ping

FS="$T_DIR/../fabric.sh"
t_up direct planes=2
NA=$(t_ns A)
A1=$(t_port A 1 ifname)
carrier_changes() { ip netns exec "$NA" cat "/sys/class/net/$A1/carrier_changes"; }
# A veth whose peer lost carrier reports operstate DOWN on the dev host, but
# LOWERLAYERDOWN on 6.1: a veth's iflink is its peer, and older kernels
# report LOWERLAYERDOWN for any device without carrier whose iflink is not
# itself (later ones only when that lower device is really down, upstream
# "net: linkwatch: only report IF_OPER_LOWERLAYERDOWN if iflink is actually
# down"). Both mean the port lost carrier.
oper() { ip -n "$NA" -j link show dev "$A1" | jq -r '.[0].operstate | if . == "LOWERLAYERDOWN" then "DOWN" else . end'; }
wait_oper() { # STATE, bounded 5 s
	for _ in $(seq 250); do [ "$(oper)" = "$1" ] && return 0; sleep 0.02; done
	return 1
}
ping_ok() { ip netns exec "$NA" ping -q -c 3 -i 0.05 -W 1 "$1" >/dev/null; }

"$FS" link "$R" p1 down
t_check "down: A's plane-1 port lost carrier" wait_oper DOWN
echo "     (operstate reported: $(ip -n "$NA" -j link show dev "$A1" | jq -r '.[0].operstate'))"
t_check "down: A's port stays administratively up (NO-CARRIER)" bash -c "ip -n $NA link show dev $A1 | grep -q NO-CARRIER"
t_check "down: plane 1 does not answer" bash -c "! ip netns exec $NA ping -q -c 2 -i 0.05 -W 0.3 198.18.1.2 >/dev/null"
t_check "down: plane 0 still answers" ping_ok 198.18.0.2
t_check "down: A keeps its plane-1 address" bash -c "ip -n $NA addr show dev $A1 | grep -q 198.18.1.1/24"
"$FS" link "$R" p1 up
t_check "up: carrier back" wait_oper UP
t_check "up: plane 1 answers (v4)" ping_ok 198.18.1.2
t_check "up: plane 1 answers (v6)" ping_ok fd00:0:0:1::2

# Host: a 0.4 s period for 2 s (5 cycles, 10 carrier changes), 150 echoes
# 10 ms apart. In the VM the flapper's every step (jq, ip, awk, date) takes
# 50 to 500 ms under TCG, more than a 0.2 s half period: there the period
# and the duration are 10 times longer (still 5 cycles), and so is the echo
# interval, so the same bounds apply.
period=0.4 dur=2 ival=0.01 endwait=250
if t_vm; then
	period=4 dur=20 ival=0.1 endwait=2500
	echo "MRC_IN_VM=1: flapping at a $period s period for $dur s (host: 0.4 s for 2 s)"
fi
c0=$(carrier_changes)
pid=$("$FS" flap "$R" p1 $period $dur)
T_PIDS+=("$pid")
# 150 echoes while the link flaps (down half a period, up half a period)
got=$(ip netns exec "$NA" ping -q -c 150 -i $ival -W 0.05 198.18.1.2 | sed -n 's/.* \([0-9]*\) received.*/\1/p')
for _ in $(seq $endwait); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
t_check "flap: the flapper ended after its duration" bash -c "! kill -0 $pid 2>/dev/null"
c1=$(carrier_changes)
t_range "flap: carrier changes in $dur s at a $period s period" $((c1 - c0)) 6 14
t_range "flap: echoes answered of 150 (half the time up)" "${got:-0}" 20 130
t_check "flap: link up afterwards" wait_oper UP
t_check "flap: plane 1 answers afterwards" ping_ok 198.18.1.2

# --- clos: admin down flushes routes; up must restore them --------------------
t_up clos planes=1 leaves=2 spines=2 hosts=2
NA=$(t_ns A)
L0=$(fabric_ns "$R" p0l0)
S0=$(fabric_ns "$R" p0s0)
"$FS" link "$R" p0-l0-s0 down
t_check "clos down: leaf 0's ECMP route marks spine 0 dead" bash -c "ip -n $L0 route show 198.18.0.0/24 | grep -q dead"
# Forward traffic only: leaf 0 skips the dead nexthop, but B's leaf 1 may
# hash the echo replies onto spine 0, which has no way back to leaf 0 (the
# hash seed is random per boot, so a ping here passed or failed by boot).
out=$(t_xfer A B 0 ipv4 --count 128 --payload 64 --sport-range 49152-49279)
t_eq "clos down: A's 128 flows reach B through spine 1" "$(jq .parsed_ok <<<"$out")" 128
"$FS" link "$R" p0-l0-s0 up
t_check "clos up: no dead nexthop left" bash -c "! ip -n $L0 route show 198.18.0.0/24 | grep -Eq 'dead|linkdown'"
t_check "clos up: spine 0's route to A's subnet is back" bash -c "ip -n $S0 route show 198.18.0.0/30 | grep -q via"
t_check "clos up: spine 0's static neighbour is back" bash -c "ip -n $S0 neigh show dev p0s0l0-$R | grep -q PERMANENT"
b0=$(t_cnt "$S0" "p0s0l0-$R" rx_packets)
out=$(t_xfer A B 0 ipv4 --count 128 --payload 64 --sport-range 49152-49279)
b1=$(t_cnt "$S0" "p0s0l0-$R" rx_packets)
t_eq "clos up: 128 flows delivered" "$(jq .parsed_ok <<<"$out")" 128
t_range "clos up: spine 0 carries its ECMP share again" $((b1 - b0)) 32 96
t_done
