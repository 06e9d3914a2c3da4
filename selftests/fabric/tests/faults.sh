#!/usr/bin/env bash
# Each fault of mrc_fault.bpf.c, measured with MRC frames built and parsed by
# the codec (and ping): random loss within binomial bounds, blackhole (by
# match and by direction), trim (DSCP and header length per opcode, IPv4 and
# IPv6), ECN-CE above a rate, corruption (ICRC fails), duplication, flap
# (everything dropped part of each period), counters, detach.
. "$(dirname "$0")/lib.sh"
t_require ping

t_up direct planes=1
F() { "$B_FAULT" --state "$ST" "$@"; }
ctr() { F --json show p0 --dir "${2:-fwd}" | jq -r ".[0].counters.$1"; }
MRC_ONLY=(--match-proto udp --match-dport 4791)
# Bounds on packets beyond a token bucket (RATE_BPS, BURST bytes) for COUNT
# frames sent back to back: at most burst + refill during the send pass.
over_bounds() { # COUNT RATE_BPS BURST -> "LO HI" (from $T_TMP/send.json)
	jq -r --argjson n "$1" --argjson r "$2" --argjson b "$3" \
		'(.frame_len) as $f | (.secs) as $s |
		 "\($n - (($b + $r / 8 * $s) / $f | floor) - 2) \($n - ($b / $f | floor))"' "$T_TMP/send.json"
}

# --- random loss: 20% over 3000 packets ------------------------------------
F set p0 --loss 20% "${MRC_ONLY[@]}" --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 3000 --payload 512)
got=$(jq .parsed_ok <<<"$out")
# binomial sd = sqrt(3000*0.2*0.8) = 22 packets; +-4.5 sd = +-100
t_range "loss 20%: packets lost of 3000" $((3000 - got)) 500 700
t_eq "loss: program's dropped counter = packets lost" "$(ctr dropped)" $((3000 - got))
t_eq "loss: program's passed counter = packets received" "$(ctr passed)" "$got"

# ping (ICMP) through a 20% loss on the forward direction only
F set p0 --loss 20% --match-proto icmp --reset >/dev/null
pl=$(ip netns exec "$(t_ns A)" ping -q -c 400 -i 0.005 -W 1 198.18.0.2 | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p')
t_range "loss 20%: ping loss percent over 400 echoes" "$pl" 12 28

# --- blackhole ---------------------------------------------------------------
F set p0 --blackhole "${MRC_ONLY[@]}" --reset >/dev/null
# the program's counter shows every frame was handled before the capture ends
out=$(T_RECV_TIMEOUT_MS=1500 t_xfer A B 0 ipv6 --count 300 --payload 256)
t_eq "blackhole (UDP 4791 only): MRC frames received" "$(jq .frames <<<"$out")" 0
t_eq "blackhole: blackholed counter" "$(ctr blackholed)" 300
t_check "blackhole (UDP 4791 only): ping still answered" \
	bash -c "ip netns exec $(t_ns A) ping -q -c 3 -i 0.05 -W 1 198.18.0.2 >/dev/null"
F clear p0 >/dev/null
F set p0 --dir rev --blackhole "${MRC_ONLY[@]}" --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 200 --payload 256)
t_eq "blackhole rev only: A->B frames all arrive" "$(jq .parsed_ok <<<"$out")" 200
out=$(T_RECV_TIMEOUT_MS=1500 t_xfer B A 0 ipv4 --count 200 --payload 256)
t_eq "blackhole rev only: B->A frames none arrive" "$(jq .frames <<<"$out")" 0
t_eq "blackhole rev only: rev blackholed counter" "$(ctr blackholed rev)" 200
F clear p0 --dir both >/dev/null

# --- flap: everything dropped for D of every period T (--flap T/D) ------------
F set p0 --flap 20ms --match-proto icmp --reset >/dev/null
t_eq "flap 20ms: show --json gives the period and the down time (ns)" \
	"$(F --json show p0 | jq -r '.[0].faults.flap | "\(.period_ns) \(.down_ns)"')" "20000000 10000000"
pl=$(ip netns exec "$(t_ns A)" ping -q -c 400 -i 0.005 -W 1 198.18.0.2 | sed -n 's/.* \([0-9.]*\)% packet loss.*/\1/p')
# Half of the time down, but ping's 5 ms is no clock on a loaded host (33.5%
# and 40.75% measured): the range shows a periodic loss, the counter below is
# the exact check.
t_range "flap 20ms (10 ms down): ping loss percent over 400 echoes, 5 ms apart" "$pl" 20 80
t_eq "flap: program's flapped counter = echoes lost" "$(ctr flapped)" "$(awk -v p="$pl" 'BEGIN { printf "%d", p * 4 + 0.5 }')"
F set p0 --flap 20ms/20ms "${MRC_ONLY[@]}" --reset >/dev/null
out=$(T_RECV_TIMEOUT_MS=1500 t_xfer A B 0 ipv4 --count 200 --payload 256)
t_eq "flap 20ms/20ms (always down): MRC frames received" "$(jq .frames <<<"$out")" 0
t_eq "flap always down: flapped counter" "$(ctr flapped)" 200
F set p0 --flap 20ms/0ms "${MRC_ONLY[@]}" --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 200 --payload 256)
t_eq "flap 20ms/0ms (never down): MRC frames received" "$(jq .parsed_ok <<<"$out")" 200
t_check "flap: a down time longer than the period is refused" bash -c "! $B_FAULT --state $ST set p0 --flap 10ms/20ms 2>/dev/null"
for bad in 500ns 10ms/ /5ms 10ms/-1ms abc 10xs 10ms/nan inf 2h; do
	t_check "flap: '$bad' is refused with a reason" bash -c "$B_FAULT --state $ST set p0 --flap '$bad' 2>&1 | grep -q 'time\\|wants'"
	t_check "flap: '$bad' exits non-zero" bash -c "! $B_FAULT --state $ST set p0 --flap '$bad' >/dev/null 2>&1"
done
t_eq "flap: a refused --flap leaves the configuration as it was (20ms/0ms)" \
	"$(F --json show p0 | jq -r '.[0].faults.flap | "\(.period_ns) \(.down_ns)"')" "20000000 0"
F clear p0 >/dev/null

# --- a set of source ports (a quarter of MRC's EVs): --match-sport-mask ------
F set p0 --blackhole "${MRC_ONLY[@]}" --match-sport 0 --match-sport-mask 3 --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 400 --payload 256 --sport-range 49152-49551)
t_eq "blackhole sport & 3 == 0: frames received of 400 (source ports 49152-49551)" "$(jq .parsed_ok <<<"$out")" 300
t_eq "blackhole sport & 3 == 0: blackholed counter" "$(ctr blackholed)" 100
t_eq "blackhole sport & 3 == 0: unmatched counter" "$(ctr unmatched)" 300
F clear p0 >/dev/null

# --- trim above a rate --------------------------------------------------------
# 1 Mbit/s with a 20 KB bucket: of 300 back-to-back 1 KB frames ~18 fit
for spec in "ipv4 write_only" "ipv6 write_only_imm --ts" "ipv4 write_middle --ts" "ipv6 write_last_imm" "ipv4 write_first"; do
	read -r fam op ts <<<"$spec"
	F set p0 --trim-rate 1mbit --trim-burst 20000 --reset >/dev/null
	out=$(t_xfer A B 0 "$fam" --count 300 --payload 1024 --opcode "$op" $ts)
	tr=$(jq .trimmed <<<"$out")
	t_eq "trim $fam $op $ts: every frame arrives and parses" "$(jq .parsed_ok <<<"$out")" 300
	read -r lo hi <<<"$(over_bounds 300 1000000 20000)"
	t_range "trim $fam $op $ts: trimmed of 300" "$tr" "$lo" "$hi"
	t_eq "trim: trimmed headers carry DSCP 47" "$(jq .trimmed_dscp_ok <<<"$out")" "$tr"
	t_eq "trim: trimmed frames end after BTH+METH[+TSETH]+RETH[+ImmDt]" "$(jq .trimmed_len_ok <<<"$out")" "$tr"
	t_eq "trim: program's trimmed counter" "$(ctr trimmed)" "$tr"
done
# 100 frames of 1 KiB through a 20 KB bucket refilled at 10 Mbit/s: about 80
# are trimmed when the sender takes a few ms. In the VM (MRC_IN_VM=1) the
# sender took long enough under TCG for the bucket to refill and trimmed
# fewer than 60: there the bucket refills at 1 Mbit/s, like the cases above.
trate=10mbit
if t_vm; then
	trate=1mbit
	echo "MRC_IN_VM=1: codepoint case trims beyond $trate (host: 10mbit)"
fi
F set p0 --trim-rate $trate --trim-burst 20000 --trim-dscp 45 --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 100 --payload 1024)
t_check "trim: configurable codepoint (45 = trimmed last hop)" test "$(jq '.dscp["45"]' <<<"$out")" -ge 60
F set p0 --trim-rate 10mbit --trim-burst 2000 --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 300 --opcode ack)
t_eq "trim: control packets (ACK) are never trimmed or dropped" "$(jq '[.parsed_ok, .trimmed] | join(" ")' -r <<<"$out")" "300 0"

# --- ECN-CE above a rate -------------------------------------------------------
F set p0 --ecn-rate 1mbit --ecn-burst 20000 --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 300 --payload 1024 --ecn ect0)
ce=$(jq '.ecn.ce // 0' <<<"$out")
read -r lo hi <<<"$(over_bounds 300 1000000 20000)"
t_range "ecn: CE-marked of 300 ECT(0) frames (IPv4, checksum fixed: all parse)" "$ce" "$lo" "$hi"
t_eq "ecn: all frames parse" "$(jq .parsed_ok <<<"$out")" 300
t_eq "ecn: program's marked counter" "$(ctr marked)" "$ce"
F set p0 --ecn-rate 1mbit --ecn-burst 20000 --reset >/dev/null
out=$(t_xfer A B 0 ipv6 --count 300 --payload 1024 --ecn ect1)
read -r lo hi <<<"$(over_bounds 300 1000000 20000)"
t_range "ecn: CE-marked of 300 ECT(1) IPv6 frames" "$(jq '.ecn.ce // 0' <<<"$out")" "$lo" "$hi"
F set p0 --ecn-rate 10mbit --ecn-burst 20000 --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 300 --payload 1024 --ecn not)
t_eq "ecn: Not-ECT frames are never marked" "$(jq '.ecn.ce // 0' <<<"$out")" 0

# --- corruption ---------------------------------------------------------------
F set p0 --corrupt 100% --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 200 --payload 1024)
t_eq "corrupt 100%: every frame fails the ICRC in the codec" "$(jq '.parse_errors["ICRC mismatch"] // 0' <<<"$out")" 200
t_eq "corrupt: program's corrupted counter" "$(ctr corrupted)" 200
F set p0 --corrupt 10% --reset >/dev/null
out=$(t_xfer A B 0 ipv6 --count 2000 --payload 512)
bad=$(jq '.parse_errors["ICRC mismatch"] // 0' <<<"$out")
t_range "corrupt 10%: ICRC failures of 2000 (sd 13)" "$bad" 140 260
t_eq "corrupt 10%: the rest parse" $(($(jq .parsed_ok <<<"$out") + bad)) 2000

# --- duplication --------------------------------------------------------------
F set p0 --dup 100% --reset >/dev/null
out=$(t_xfer A B 0 ipv4 --count 200 --payload 512)
t_eq "dup 100%: frames received" "$(jq .frames <<<"$out")" 400
t_eq "dup 100%: duplicated PSNs" "$(jq .dup_psn <<<"$out")" 200
t_eq "dup: program's duplicated counter" "$(ctr duplicated)" 200
F set p0 --dup 25% --reset >/dev/null
out=$(t_xfer A B 0 ipv6 --count 2000 --payload 256)
t_range "dup 25%: duplicates of 2000 (sd 19)" "$(jq .dup_psn <<<"$out")" 415 585

# --- counters JSON, detach --------------------------------------------------------
js=$(F --json show p0)
t_eq "show --json lists counters" "$(jq -r '.[0].counters | keys | sort | join(",")' <<<"$js")" \
	"blackholed,corrupted,dropped,duplicated,flapped,marked,overrate_dropped,passed,seen,trimmed,unmatched"
t_eq "show --json: attachment point is the wire's egress" "$(jq -r '.[0] | "\(.ns) \(.hook)"' <<<"$js")" "$(fabric_ns "$R" W) egress"
F detach p0 --dir both >/dev/null
t_check "detach: pins removed" bash -c "! ls $FABRIC_BPFFS/mrc-fabric/$R/*/* >/dev/null 2>&1"
t_check "detach: no filter left" bash -c \
	"! tc -n $(fabric_ns "$R" W) filter show dev w0b-$R egress | grep -q mrc_fault"
out=$(t_xfer A B 0 ipv4 --count 100 --payload 512)
t_eq "detach: traffic is clean again" "$(jq '[.parsed_ok, .trimmed, .dup_psn] | join(" ")' -r <<<"$out")" "100 0 0"
t_done
