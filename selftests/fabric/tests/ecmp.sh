#!/usr/bin/env bash
# clos ECMP: different UDP source ports (the MRC entropy) spread over the
# spines; one 5-tuple stays on one spine. IPv4 and IPv6.
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
t_done
