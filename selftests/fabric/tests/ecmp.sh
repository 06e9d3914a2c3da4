#!/usr/bin/env bash
# clos ECMP: different UDP source ports (the MRC entropy) spread over the
# spines; one 5-tuple stays on one spine. IPv4 and IPv6. direct ecmp=on:
# the hosts' ECMP addresses answer, and TCP 5-tuples spread over the planes,
# each on the same plane both ways.
. "$(dirname "$0")/lib.sh"
t_require

t_up clos planes=1 leaves=2 spines=2 hosts=2

# MRC packets leaf 0 (A's leaf) sent to each spine, counted by the fault
# program (0% loss, matching UDP to 4791 only, so router chatter is not counted)
"$B_FAULT" --state "$ST" set 'p0-l0-s*' --dir fwd --loss 0% --match-proto udp --match-dport 4791 >/dev/null ||
	{ t_fail "attach counters"; t_done; }
spine_rx() {
	"$B_FAULT" --state "$ST" --json show 'p0-l0-s*' --dir fwd |
		jq -r 'sort_by(.link) | map(.counters.passed) | join(" ")'
}

for fam in ipv4 ipv6; do
	read -r a0 a1 <<<"$(spine_rx)"
	out=$(t_xfer A B 0 "$fam" --count 256 --payload 64 --sport-range 49152-49407)
	read -r b0 b1 <<<"$(spine_rx)"
	t_eq "$fam: 256 flows delivered" "$(jq .parsed_ok <<<"$out")" 256
	d0=$((b0 - a0)) d1=$((b1 - a1))
	t_eq "$fam: every packet crossed a spine" $((d0 + d1)) 256
	# 256 flows hashed to 2 spines: each gets far more than 64 unless hashing is off
	t_range "$fam: packets on spine 0 of 256 distinct source ports" $d0 64 192
	t_range "$fam: packets on spine 1 of 256 distinct source ports" $d1 64 192

	for sport in 50001 50002 50003; do
		read -r a0 a1 <<<"$(spine_rx)"
		out=$(t_xfer A B 0 "$fam" --count 200 --payload 64 --sport $sport)
		read -r b0 b1 <<<"$(spine_rx)"
		d0=$((b0 - a0)) d1=$((b1 - a1))
		t_eq "$fam: one 5-tuple (sport $sport) delivered" "$(jq .parsed_ok <<<"$out")" 200
		t_check "$fam: one 5-tuple (sport $sport) stays on one spine ($d0/$d1)" \
			test $((d0 == 200 && d1 == 0 || d0 == 0 && d1 == 200)) = 1
	done
done

# direct, ecmp=on: a route with a nexthop per plane between the hosts' ECMP
# addresses (bench/compare's TCP-over-ECMP peer)
t_up direct planes=4 ecmp=on
a4=$(jq -r .hosts.A.ecmp_ipv4 "$ST") b4=$(jq -r .hosts.B.ecmp_ipv4 "$ST")
a6=$(jq -r .hosts.A.ecmp_ipv6 "$ST") b6=$(jq -r .hosts.B.ecmp_ipv6 "$ST")
t_eq "ecmp: state file" "$(jq -c '[.ecmp, .hosts.A.ecmp_ipv4, .hosts.B.ecmp_ipv6]' "$ST")" '[true,"198.19.255.1","fd00:ff::2"]'
t_eq "ecmp: A's route to B has a nexthop per plane" \
	"$(ip -n "$(t_ns A)" -j route show "$b4/32" | jq '.[0].nexthops | length')" 4
t_check "ecmp: ping IPv4 A -> B" ip netns exec "$(t_ns A)" ping -c 2 -i 0.2 -W 2 -I "$a4" "$b4"
t_check "ecmp: ping IPv6 A -> B" ip netns exec "$(t_ns A)" ping -6 -c 2 -i 0.2 -W 2 -I "$a6" "$b6"
dev_of() { sed -n 's/.* dev \([^ ]*\).*/\1/p' | head -1; }
declare -A seen=()
asym=0
for sport in $(seq 40000 40063); do
	f=$(ip -n "$(t_ns A)" route get "$b4" from "$a4" ipproto tcp sport "$sport" dport 5201 | dev_of)
	r=$(ip -n "$(t_ns B)" route get "$a4" from "$b4" ipproto tcp sport 5201 dport "$sport" | dev_of)
	seen[${f%%-*}]=$((${seen[${f%%-*}]:-0} + 1))
	[ "${f:1:1}" = "${r:1:1}" ] || asym=$((asym + 1))
done
for p in 0 1 2 3; do
	t_range "ecmp: TCP source ports of 64 on plane $p" "${seen[a$p]:-0}" 4 40
done
t_eq "ecmp: flows on the same plane both ways (L4 hash is symmetric)" "$asym" 0
t_done
