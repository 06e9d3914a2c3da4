#!/usr/bin/env bash
# SRv6 uSID EVs on a Clos fabric (issue 25, Documentation/fabric.md "SRv6
# uSID Clos"): 4 planes x 4 spines, leaves and spines forwarding by the
# kernel's seg6local End with NEXT-C-SID. Each EV is a uSID container
# leaf A > spine k > leaf B > host B.
#
#  transfer  one SRv6 QP and one QP with today's UDP-port/flow-label entropy,
#            at once, data verified byte for byte; every spine's counter of
#            MRC packets naming it holds exactly its EV's packets (plus at
#            most the QP's probes), no spine sees an SRv6 packet naming
#            another, and the plain QP's packets are the only others
#  balance   per-spine-link packets of the SRv6 EVs within +-5% of their
#            mean (every EV active), ECMP-hashed EVs' spread reported beside
#  failure   the link leaf A -> one spine fails silently mid-transfer: exactly
#            its EV is retired (ASSUMED_BAD to the end, few packets lost on
#            it; the EV log names no other EV ASSUMED_BAD and no other EV was
#            ever probed), all others carry on, the data is verified and the
#            receiver never stalls for more than 20 ms around the fault
#            (--sample-ms 5; from 100 ms before its EV's retirement to 250 ms
#            after: a loaded host stalls its receiver without any fault too). The
#            same transfer first runs with no fault: no EV may be retired for
#            its own losses (design.md, "Which losses retire an EV"), and at
#            most one plane as a whole (issue 21's bound is one a minute on a
#            quiet host; a host stall longer than any delivery the QP has
#            seen still reads as a dead plane). A quiet attempt whose only
#            flaw is EVs retired and readmitted by their probes, nothing
#            dropped anywhere, runs again (at most three attempts) and the
#            last is judged as strictly.
#            An attempt whose only flaw is other EVs retired and readmitted
#            by their probes, nothing dropped anywhere in the fabric (a
#            loaded host's softirq held their packets: CI failed so once in
#            ~10 runs) runs once more and the second is judged as strictly;
#            per-EV judged losses against each spine's count of the EV's
#            packets, interface drops and the receiver's AF_XDP losses are
#            printed for each attempt
#  mrcd      the same EVs as an SRv6 format and explicit profile of mrcd on
#            host A (mrcctl): `mrcctl ev show` lists each EV's container and
#            hops, and an mrc_perf QP on that profile (--ev-profile) sends
#            over them: data verified; `mrcctl ev deny 7 hop 203 port 2`
#            (a link known bad) denies exactly the EV through spine 2/3, and
#            the QP's packets then cross spines of every plane, never that one;
#            EV probes (mrcctl probe ... fmt srv6) follow their containers: the
#            one through a failed spine link is lost, its neighbour's answered
#
# Knobs: MRC_PERF (binary), SRV6_SECS (transfer length, 3).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../srv6_clos.sh"
t_require timeout

B_PERF=${MRC_PERF:-$MRC_BUILD_DIR/user/tools/mrc_perf}
[ -x "$B_PERF" ] || { echo "FAIL $T_NAME: $B_PERF is not built"; exit 1; }
SRV6_XDP_PASS=$(fabric_pass_obj) || { echo "FAIL $T_NAME: no fabric_pass.bpf.o"; exit 1; }
export SRV6_XDP_PASS
SECS=${SRV6_SECS:-3}

SR=""
trap 'srv6_down "$SR"; t_cleanup' EXIT
SR=$(srv6_up planes=4 spines=4) || t_skip "this kernel/iproute2 cannot build the uSID fabric (seg6local End flavors next-csid)"
NA=$(srv6_ns "$SR" ha)
NB=$(srv6_ns "$SR" hb)
DEVS=p1,p2,p3,p4
srv6_evs "$SR" A B >"$T_TMP/evs.txt"
PORT=18900

# run NAME SERVER_OPTS CLIENT_OPTS [MID_CMD]: a verified run; MID_CMD runs 1 s in.
run() {
	local name=$1 sopt=$2 copt=$3 mid=${4:-} spid cpid crc src cv sv
	PORT=$((PORT + 1))
	# shellcheck disable=SC2086
	ip netns exec "$NB" timeout -s INT 60 "$B_PERF" server -d "$DEVS" -6 -B :: -p "$PORT" --no-mrcd --verify -j \
		--counters-json "$T_TMP/$name-server-counters.json" $sopt >"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	# shellcheck disable=SC2086
	ip netns exec "$NA" timeout -s INT 60 "$B_PERF" client fd00:1:402:: -d "$DEVS" -6 -p "$PORT" --no-mrcd \
		--verify -j -D "$SECS" --counters-json "$T_TMP/$name-counters.json" $copt >"$T_TMP/$name-client.log" 2>&1 &
	cpid=$!
	T_PIDS+=("$cpid")
	if [ -n "$mid" ]; then
		sleep 1
		$mid
	fi
	wait "$cpid"
	crc=$?
	wait "$spid"
	src=$?
	cv=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
	sv=$(grep '"summary"' "$T_TMP/$name-server.log" | jq -r '.summary.verify' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ]; then
		t_ok "$name: data verified ($(grep '"summary"' "$T_TMP/$name-client.log" | jq -r .summary.msgs) messages)"
	else
		t_fail "$name: client exit $crc (verify ${cv:-none}), server exit $src (verify ${sv:-none})"
		tail -n 5 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
		return 1
	fi
}

# --- transfer: an SRv6 QP and a UDP-entropy QP side by side
before=$(srv6_counters "$SR")
run transfer "-q 2" "-q 2 --srv6 $T_TMP/evs.txt --srv6-qps 1" || t_done
after=$(srv6_counters "$SR")
C=$T_TMP/transfer-counters.json
jq -n --argjson b "$before" --argjson a "$after" '$a | with_entries(.value.mine -= $b[.key].mine | .value.other -= $b[.key].other)' >"$T_TMP/spines.json"
t_eq "transfer: the SRv6 QP has 16 EVs" "$(jq '.qps[0].srv6_evs | length' "$C")" 16
t_eq "transfer: the UDP QP has no SRv6 EV" "$(jq '.qps[1].srv6_evs | length' "$C")" 0
t_check "transfer: the UDP QP sent data" jq -e '.qps[1].tx_data_pkts > 0' "$C"
probes=$(jq '.qps[0].tx_probe_pkts' "$C")
for p in 1 2 3 4; do
	for k in 1 2 3 4; do
		sid="fd00:$p:101:20$k:102:402::"
		ev=$(jq --arg s "$sid" '[.qps[0].srv6_evs[] | select(.sid == $s) | .tx_pkts] | add // 0' "$C")
		mine=$(jq --arg k "$p/$k" '.[$k].mine' "$T_TMP/spines.json")
		if [ "$ev" -gt 0 ] && [ "$mine" -ge "$ev" ] && [ "$mine" -le $((ev + probes)) ]; then
			t_ok "transfer: spine $p/$k saw $mine MRC packets naming it; EV $sid sent $ev (+ <= $probes probes)"
		else
			t_fail "transfer: spine $p/$k saw $mine MRC packets naming it; EV $sid sent $ev (+ <= $probes probes)"
		fi
	done
done
other=$(jq '[.[] | .other] | add' "$T_TMP/spines.json")
udp=$(jq '.qps[1].tx_data_pkts' "$C")
udpp=$(jq '.qps[1].tx_data_pkts + .qps[1].tx_probe_pkts' "$C")
t_range "transfer: MRC packets naming no spine they crossed (the UDP QP's, ECMP-hashed)" "$other" "$udp" "$udpp"
echo "per-spine packets (SRv6 QP / UDP QP): $(jq -c 'to_entries | map("\(.key)=\(.value.mine)/\(.value.other)") | join(" ")' "$T_TMP/spines.json")"

# --- balance: SRv6 per-spine spread vs ECMP's
mean=$(jq '[.[] | .mine] | add / length' "$T_TMP/spines.json")
lo=$(jq '[.[] | .mine] | min' "$T_TMP/spines.json")
hi=$(jq '[.[] | .mine] | max' "$T_TMP/spines.json")
emean=$(jq '[.[] | .other] | add / length' "$T_TMP/spines.json")
elo=$(jq '[.[] | .other] | min' "$T_TMP/spines.json")
ehi=$(jq '[.[] | .other] | max' "$T_TMP/spines.json")
echo "balance: SRv6 per spine link min $lo max $hi mean $mean; ECMP (UDP QP) min $elo max $ehi mean $emean"
t_range "balance: SRv6 least-loaded spine link / mean" "$(awk -v a="$lo" -v m="$mean" 'BEGIN{printf "%.3f", a/m}')" 0.95 1.05
t_range "balance: SRv6 most-loaded spine link / mean" "$(awk -v a="$hi" -v m="$mean" 'BEGIN{printf "%.3f", a/m}')" 0.95 1.05

# --- quiet: the failure case's transfer with no fault retires nothing
# quiet_run: the transfer, and the fabric's interface drops during it.
quiet_run() {
	local drops0
	drops0=$(srv6_drops "$SR")
	run quiet "--sample-ms 5" "--srv6 $T_TMP/evs.txt --ev-log $T_TMP/quiet-ev.log" || return 1
	jq -n -c --argjson b "$drops0" --argjson a "$(srv6_drops "$SR")" \
		'$a | with_entries(.value -= ($b[.key] // 0)) | with_entries(select(.value > 0))' >"$T_TMP/quiet-drops.json"
}
# quiet_noise: an EV retired for its own losses, but every EV GOOD again at
# the end (its probes readmitted it), nothing dropped anywhere in the
# fabric nor by the receiver's AF_XDP socket: a loaded host's softirq held
# its packets (CI failed so once, 2026-12-04 06:16, the clean-clone run of
# 1275b1d, with `scripts/test.sh`'s layers in parallel).
quiet_noise() {
	local n
	n=$(jq -s '[.[] | select(.to == "ASSUMED_BAD" and .reason != "plane_loss")] | length' "$T_TMP/quiet-ev.log")
	[ "$n" -gt 0 ] || return 1
	[ "$(jq '[.qps[0].srv6_evs[] | select(.state != "GOOD")] | length' "$T_TMP/quiet-counters.json")" = 0 ] || return 1
	[ "$(jq '[.[]] | add // 0' "$T_TMP/quiet-drops.json")" = 0 ] || return 1
	[ "$(jq '.af_xdp.rx_dropped + .af_xdp.rx_ring_full' "$T_TMP/quiet-server-counters.json")" = 0 ] || return 1
	echo "quiet: attempt 1 retired $n EV(s), all readmitted by their probes, nothing dropped: $(jq -s -c '[.[] | select(.to == "ASSUMED_BAD") | [.ev, .reason]] | unique' "$T_TMP/quiet-ev.log")"
}
# Noise alone: again, at most three attempts in all, and the last is judged
# as strictly (CI's clean-clone run of 92a2528 met such noise in two
# attempts in a row, 2026-12-04 07:45).
quiet_run || t_done
for attempt in 2 3; do
	quiet_noise || break
	echo "quiet: host noise, not a fault: attempt $attempt"
	for f in "$T_TMP"/quiet-*; do mv "$f" "${f/quiet-/quiet$((attempt - 1))-}"; done
	quiet_run || t_done
done
t_eq "quiet: EVs retired for their own losses with no fault (EV log)" \
	"$(jq -s '[.[] | select(.to == "ASSUMED_BAD" and .reason != "plane_loss")] | length' "$T_TMP/quiet-ev.log")" 0
t_range "quiet: planes retired with no fault" "$(jq '.qps[0].plane_suspects' "$T_TMP/quiet-counters.json")" 0 1
echo "quiet: losses judged by time alone (resent, nothing retired): $(jq '.qps[0].losses_by_time' "$T_TMP/quiet-counters.json")"

# --- failure: leaf A -> spine 2/3 fails silently 1 s in
FAILED="fd00:2:101:203:102:402::"
# failure_run: the transfer with the fault, and what the fabric saw of it
# (per-spine packets, interfaces that dropped, the receiver's AF_XDP losses:
# printed so that a judged loss can be told from a real one).
failure_run() {
	local drops0 before after sid pk
	drops0=$(srv6_drops "$SR")
	before=$(srv6_counters "$SR")
	run failure "--sample-ms 5" "--srv6 $T_TMP/evs.txt --ev-log $T_TMP/failure-ev.log" "srv6_blackhole $SR 2 3" || return 1
	after=$(srv6_counters "$SR")
	jq -n --argjson b "$before" --argjson a "$after" \
		'$a | with_entries(.value.mine -= $b[.key].mine | .value.other -= $b[.key].other)' >"$T_TMP/failure-spines.json"
	jq -n -c --argjson b "$drops0" --argjson a "$(srv6_drops "$SR")" \
		'$a | with_entries(.value -= ($b[.key] // 0)) | with_entries(select(.value > 0))' >"$T_TMP/failure-drops.json"
	for sid in $(jq -r '.qps[0].srv6_evs[] | select(.lost > 0) | .sid' "$T_TMP/failure-counters.json"); do
		pk=$(echo "$sid" | awk -F: '{print $2 "/" substr($4, 3)}')
		echo "failure: EV $sid judged $(jq --arg s "$sid" '.qps[0].srv6_evs[] | select(.sid == $s) | .lost' "$T_TMP/failure-counters.json") lost;" \
			"sent $(jq --arg s "$sid" '.qps[0].srv6_evs[] | select(.sid == $s) | .tx_pkts' "$T_TMP/failure-counters.json")," \
			"its spine $pk saw $(jq --arg k "$pk" '.[$k].mine' "$T_TMP/failure-spines.json")"
	done
	echo "failure: the receiver's AF_XDP losses: $(jq -c '.af_xdp | {rx_dropped, rx_ring_full, fill_empty, pool_empty}' "$T_TMP/failure-server-counters.json")"
	echo "failure: interfaces that dropped packets (node/dev=count): $(jq -r 'to_entries | map("\(.key)=\(.value)") | join(" ")' "$T_TMP/failure-drops.json")"
}
# (under TCG in the VM layer everything is 10-30 times slower)
stall_max=20
t_vm && stall_max=400
# longest_stall FILE [FROM_NS TO_NS]: the longest run of 5 ms samples in
# which the server received nothing, in ms, between its first and last
# bytes (and only samples taken in [FROM_NS, TO_NS] of CLOCK_MONOTONIC).
longest_stall() {
	grep '"t_ms"' "$1" | jq -s --argjson lo "${2:-0}" --argjson hi "${3:-1e300}" '
	[.[] | .bytes] as $b | ($b | map(. > 0) | index(true)) as $first |
	($b | length - 1 - (reverse | map(. > 0) | index(true))) as $last |
	reduce (.[$first:$last + 1][] | select(.mono_ns >= $lo and .mono_ns <= $hi) | .bytes) as $x
		({run: 0, max: 0}; if $x == 0 then .run += 1 | .max = ([.max, .run] | max) else .run = 0 end) | .max * 5'
}
# fault_window: "FROM_NS TO_NS", 100 ms before the failed EV was first
# retired (its link failed a few ms before) to 250 ms after ("0 0": never).
fault_window() {
	local tr
	tr=$(jq -s --arg e "$(jq -r --arg s "$FAILED" '.qps[0].srv6_evs[] | select(.sid == $s) | .ev' "$T_TMP/failure-counters.json")" \
		'[.[] | select(.ev == $e and .to == "ASSUMED_BAD") | .t_ns] | min // 0' "$T_TMP/failure-ev.log")
	if [ "$tr" = 0 ]; then echo "0 0"; else echo "$((tr - 100000000)) $((tr + 250000000))"; fi
}
# fault_stall: the longest receive stall in the fault's window (the whole
# run without one); elsewhere_stall: the longest the host made with no
# fault, in the rest of the run or in the quiet part's.
fault_stall() {
	local w
	read -ra w <<<"$(fault_window)"
	if [ "${w[0]}" = 0 ]; then longest_stall "$T_TMP/failure-server.log"; else longest_stall "$T_TMP/failure-server.log" "${w[@]}"; fi
}
elsewhere_stall() {
	local w
	read -ra w <<<"$(fault_window)"
	printf '%s\n' "$(longest_stall "$T_TMP/failure-server.log" 0 "${w[0]}")" \
		"$(longest_stall "$T_TMP/failure-server.log" "${w[1]}")" "$(longest_stall "$T_TMP/quiet-server.log")" | sort -n | tail -1
}
# noise_only: whether the attempt's only flaws have the shapes a loaded
# host gives with no fault (prints them). A host that holds one plane's
# packets, or a single packet, for milliseconds in a softirq waiting for a
# CPU makes healthy EVs look broken for that long: they are retired and
# their probes readmit them (the quiet part bounds how often); and it
# stalls the receiver with or without a fault. Noise: the failed EV retired
# to the end, every other EV GOOD again at the end, nothing dropped anywhere
# in the fabric or by the receiver's AF_XDP socket, data verified; other EVs
# retired on the way, or a stall around the fault no longer than one the
# host made elsewhere (the rest of the run or the quiet part).
noise_only() {
	local c=$T_TMP/failure-counters.json others stall elsewhere
	[ "$(jq -r --arg s "$FAILED" '.qps[0].srv6_evs[] | select(.sid == $s) | .state' "$c")" = ASSUMED_BAD ] || return 1
	[ "$(jq --arg s "$FAILED" '[.qps[0].srv6_evs[] | select(.sid != $s and .state != "GOOD")] | length' "$c")" = 0 ] || return 1
	[ "$(jq '[.[]] | add // 0' "$T_TMP/failure-drops.json")" = 0 ] || return 1
	[ "$(jq '.af_xdp.rx_dropped + .af_xdp.rx_ring_full' "$T_TMP/failure-server-counters.json")" = 0 ] || return 1
	others=$(jq -s -c '[.[] | select(.to == "ASSUMED_BAD") | [.ev, .reason]] | unique' "$T_TMP/failure-ev.log")
	stall=$(fault_stall)
	elsewhere=$(elsewhere_stall)
	if [ "$(jq -s '[.[] | select(.to == "ASSUMED_BAD") | .ev] | unique | length' "$T_TMP/failure-ev.log")" -gt 1 ]; then
		echo "failure: attempt 1 retired other EVs too, all readmitted by their probes: $others"
	elif [ "$stall" -gt "$stall_max" ] && [ "$stall" -le "$elsewhere" ]; then
		echo "failure: attempt 1 stalled the receiver ${stall} ms around the fault; the host stalled it ${elsewhere} ms with no fault"
	else
		return 1
	fi
}
# An attempt whose only flaws are noise is run once more and the second is
# judged as strictly as the first: a fault that retires its neighbours or
# stalls the receiver does so every time.
failure_run || t_done
if noise_only; then
	echo "failure: host noise, not the fault's doing: once more"
	for f in "$T_TMP"/failure-*; do mv "$f" "${f/failure-/failure1-}"; done
	srv6_heal "$SR" 2 3
	failure_run || t_done
fi
C=$T_TMP/failure-counters.json
dropped=$(_srv6_count "$(srv6_ns "$SR" s23)" 1)
t_eq "failure: the EV through the failed link is retired" \
	"$(jq -r --arg s "$FAILED" '.qps[0].srv6_evs[] | select(.sid == $s) | .state' "$C")" ASSUMED_BAD
fev=$(jq -r --arg s "$FAILED" '.qps[0].srv6_evs[] | select(.sid == $s) | .ev' "$C")
t_eq "failure: EVs ever retired (EV log): exactly the one through the failed link" \
	"$(jq -s -c '[.[] | select(.to == "ASSUMED_BAD") | .ev] | unique' "$T_TMP/failure-ev.log")" "[\"$fev\"]"
t_eq "failure: EV events dropped" "$(jq -s '[.[] | .dropped_before] | add // 0' "$T_TMP/failure-ev.log")" 0
t_eq "failure: other EVs ever probed (only retired EVs are)" \
	"$(jq --arg s "$FAILED" '[.qps[0].srv6_evs[] | select(.sid != $s and .probes_sent > 0)] | length' "$C")" 0
t_eq "failure: planes retired" "$(jq '.qps[0].plane_suspects' "$C")" 0
t_range "failure: packets lost on the failed link" "$dropped" 1 400
omin=$(jq --arg s "$FAILED" '[.qps[0].srv6_evs[] | select(.sid != $s) | .tx_pkts] | min' "$C")
omean=$(jq --arg s "$FAILED" '[.qps[0].srv6_evs[] | select(.sid != $s) | .tx_pkts] | add / length' "$C")
t_range "failure: every other EV carried on (least-used / mean)" \
	"$(awk -v a="$omin" -v m="$omean" 'BEGIN{printf "%.3f", a/m}')" 0.5 2
fault_stall=$(fault_stall)
echo "failure: longest receive stall with no fault (the rest of the run, the quiet part's run): $(elsewhere_stall) ms"
t_range "failure: longest receive stall around the fault, ms (5 ms samples)" "$fault_stall" 0 "$stall_max"
srv6_heal "$SR" 2 3

# --- mrcd: SRv6 format and profile through the controller
MRCD=$MRC_BUILD_DIR/user/mrcd/mrcd
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl
if [ ! -x "$MRCD" ] || [ ! -x "$MRCCTL" ]; then
	t_fail "mrcd: mrcd or mrcctl is not built"
	t_done
fi
mkdir -p "$T_TMP/bpf"
mount -t bpf bpf "$T_TMP/bpf" || t_skip "cannot mount a bpffs"
# mrcd (in T_PIDS) goes first, then its bpffs and the fabric
trap 'for p in "${T_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	umount "$T_TMP/bpf" 2>/dev/null; srv6_down "$SR"; t_cleanup' EXIT
ip netns exec "$NA" "$MRCD" --plane p1:1 --plane p2:2 --plane p3:3 --plane p4:4 --pin-dir "$T_TMP/bpf/mrc" \
	--socket "$T_TMP/mrcd.sock" --metrics "" >"$T_TMP/mrcd.log" 2>&1 &
T_PIDS+=("$!")
ctl() { "$MRCCTL" -s "$T_TMP/mrcd.sock" "$@"; }
for _ in $(seq 1 100); do ctl -j dev show >/dev/null 2>&1 && break; sleep 0.1; done
# block fd00:P (its plane nibble in the compact EV), leaf A 101, spine 20K
# (the other nibble), leaf B 102, host B 402: compact byte 0xPK
evs=""
for p in 1 2 3 4; do for k in 1 2 3 4; do evs+="${p}${k}@$p,"; done; done
if ctl -j ev-fmt create 14 mode srv6 widths 32,16,16,16,16 online >"$T_TMP/fmt.json" 2>&1 &&
	ctl -j ev-profile create 7 mode explicit fmt 14 count 16 min-active 4 events good,assumed_bad \
		fields 32:4244635648:0:15:0xf,16:257:0:0:0,16:512:0:15:0xf,16:258:0:0:0,16:1026:0:0:0 \
		evs "${evs%,}" online >"$T_TMP/evp.json" 2>&1; then
	t_ok "mrcd: SRv6 format 14 and explicit profile 7 ONLINE"
else
	t_fail "mrcd: creating the SRv6 format/profile: $(cat "$T_TMP/fmt.json" "$T_TMP/evp.json")"
	t_done
fi
ctl -j ev show 7 >"$T_TMP/evshow.json"
ctl ev show 7 | head -3
t_eq "mrcd: ev show lists 16 containers" "$(jq '[.evs[] | select(.sid != null)] | length' "$T_TMP/evshow.json")" 16
t_eq "mrcd: EV 6 (plane 2, spine 3) decodes to its hops" \
	"$(jq -c '.evs[6] | [.sid, .hops, .port]' "$T_TMP/evshow.json")" '["fd00:2:101:203:102:402::",["101","203","102","402"],2]'
# The link leaf A -> spine 2/3 is known to be bad: deny exactly the EVs whose
# path names that spine on plane 2, from their containers (no losses needed).
ctl -j ev deny 7 hop 203 port 2 >"$T_TMP/deny.json" 2>&1 || t_fail "mrcd: ev deny 7 hop 203 port 2: $(cat "$T_TMP/deny.json")"
t_eq "mrcd: ev deny hop 203 port 2 denied exactly" \
	"$(ctl -j ev show 7 | jq -c '[.evs[] | select(.state == "denied") | .sid]')" '["fd00:2:101:203:102:402::"]'
before=$(srv6_counters "$SR")
PORT=$((PORT + 1))
ip netns exec "$NB" timeout -s INT 60 "$B_PERF" server -d "$DEVS" -6 -B :: -p "$PORT" --no-mrcd --verify -j \
	>"$T_TMP/mrcd-server.log" 2>&1 &
spid=$!
T_PIDS+=("$spid")
# EV probes on SRv6 EVs (host B's XDP program, loaded by the server, answers
# them): mrcd sends each with its container as the destination, so with the
# link to spine 3/1 failed the probe through 3/1 is lost, the one through 3/2
# answered.
sleep 1
srv6_blackhole "$SR" 3 1
j=$(ctl -j probe fd00:3:402:: fd000003010102010102040200000000@3 fd000003010102020102040200000000@3 \
	fmt srv6 timeout 500 req-ids 11,12)
srv6_heal "$SR" 3 1
t_eq "mrcd: EV probes over containers via spines 3/1 (failed) and 3/2: answered req_ids and sources" \
	"$(echo "$j" | jq -c '(.result // .) | [[.responses[].req_id], [.responses[].from]]')" '[[12],["fd00:3:402::"]]'
ip netns exec "$NA" timeout -s INT 60 "$B_PERF" client fd00:1:402:: -d "$DEVS" -6 -p "$PORT" --verify -j -D 2 \
	--pin-dir "$T_TMP/bpf/mrc" --ev-profile 7 >"$T_TMP/mrcd-client.log" 2>&1
crc=$?
wait "$spid"
cv=$(grep '"summary"' "$T_TMP/mrcd-client.log" | jq -r '.summary.verify' 2>/dev/null)
if [ "$crc" = 0 ] && [ "$cv" = ok ]; then
	t_ok "mrcd: a QP on mrcd's SRv6 profile 7: data verified"
else
	t_fail "mrcd: client exit $crc (verify ${cv:-none})"
	tail -n 5 "$T_TMP/mrcd-client.log" "$T_TMP/mrcd-server.log" "$T_TMP/mrcd.log"
fi
after=$(srv6_counters "$SR")
# The profile leaves half of each plane's EVs active (the rest are backups
# the engine promotes when one is lost): every plane carried packets.
planes=$(jq -n --argjson b "$before" --argjson a "$after" \
	'[$a | to_entries[] | select(.value.mine > $b[.key].mine) | .key | split("/")[0]] | unique | length')
t_eq "mrcd: planes whose spines the QP's packets crossed" "$planes" 4
t_eq "mrcd: packets naming the denied spine 2/3" \
	"$(jq -n --argjson b "$before" --argjson a "$after" '$a["2/3"].mine - $b["2/3"].mine')" 0
t_done
