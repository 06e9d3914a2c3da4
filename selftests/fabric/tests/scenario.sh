#!/usr/bin/env bash
# The scenario runner end to end on a short scenario (MPTCP over 2 planes,
# one blackholed and healed): JSON with samples, faults, per-plane series and
# summary, and a PNG plot. Also: grammar errors name the line.
. "$(dirname "$0")/lib.sh"
t_require python3 gnuplot
[ -x "$B_TCP" ] || t_skip "bench/tcp_peer is not built (MRC_BUILD_BENCH=OFF)"
SCN="$T_DIR/../scenario.sh"

cat >"$T_TMP/bad.scn" <<'SCN'
topology direct planes=2
workload B: tcp_peer server
at 1s: plane 1 melt
SCN
err=$("$SCN" --check "$T_TMP/bad.scn" 2>&1)
t_eq "grammar error: exit code" "$?" 2
t_check "grammar error names file and line ($err)" grep -q "bad.scn:3: unknown plane action 'melt'" <<<"$err"
printf 'topology direct\nworkload A: true\nat 2s plane 1 up\n' >"$T_TMP/bad2.scn"
t_check "grammar error: missing colon is named" bash -c "'$SCN' --check '$T_TMP/bad2.scn' 2>&1 | grep -q 'bad2.scn:3:'"
printf 'topology direct\nduration 2s\nworkload A: true\nat 1s: plane 1 loss 50%% sport 4/3\n' >"$T_TMP/bad3.scn"
t_check "grammar error: a source port outside its mask" bash -c "'$SCN' --check '$T_TMP/bad3.scn' 2>&1 | grep -q 'bad3.scn:4: want .sport N/MASK.'"
printf 'topology direct\nduration 2s\nworkload A: true\nat 1s: link p1 flicker 5ms/10ms\n' >"$T_TMP/bad4.scn"
t_check "grammar error: a flicker down longer than its period" bash -c "'$SCN' --check '$T_TMP/bad4.scn' 2>&1 | grep -q 'bad4.scn:4: flicker wants'"
printf 'topology direct\nduration 3s\nworkload A: true\nat 1s: link p1 flicker 20ms\nat 1.5s: link p1 rev flicker 5ms/1ms\nat 2s: link p1 clear\n' >"$T_TMP/flicker.scn"
t_check "grammar: link NAME [dir] flicker PERIOD[/DOWN] parses" "$SCN" --check "$T_TMP/flicker.scn"
printf 'topology direct\nduration 2s\nworkload A: true\nat 1s: plane 1 loss 50%% sport 0/3\n' >"$T_TMP/ok3.scn"
t_check "plane P loss PCT sport N/MASK parses" "$SCN" --check "$T_TMP/ok3.scn"

cat >"$T_TMP/short.scn" <<'SCN'
# MPTCP over two 200 Mbit/s planes; plane 1 blackholed for a second
topology direct planes=2 shape=200mbit mptcp=A:B
duration 3s
workload B: tcp_peer server --mode mptcp --port 5301 --timeout {timeout}
workload A: tcp_peer client --mode mptcp --port 5301 --connect {B.ipv4} --duration {duration} --verify
at 1s: plane 1 blackhole
at 2s: plane 1 heal
SCN
"$SCN" --build "$MRC_BUILD_DIR" --out "$T_TMP/out" "$T_TMP/short.scn" >"$T_TMP/run.log" 2>&1
t_eq "runner exit code" "$?" 0
J="$T_TMP/out/scenario.json"
t_check "scenario.json written" test -s "$J"
t_eq "two faults with timestamps" "$(jq '[.faults[] | select(.t_applied_s > 0)] | length' "$J")" 2
t_range "blackhole applied at (s)" "$(jq '.faults[0].t_applied_s' "$J")" 1.0 1.3
# In the VM (MRC_IN_VM=1) the workloads take longer to start and stop under
# TCG, so the run has more samples, and the blackhole takes effect later than
# 1.1 s (starting mrc_fault alone takes a tenth of a second): there the
# silent window runs from 20 ms after the fault program had its new
# configuration to the heal.
smax=500 blo=1.1 bhi=1.95
if t_vm; then
	smax=800
	blo=$(jq '[1.1, (.faults[0] | (.t_effect_s // .t_applied_s) + 0.02)] | max' "$J")
	bhi=$(jq '[1.95, .faults[1].t_start_s] | min' "$J")
	echo "MRC_IN_VM=1: up to $smax samples, blackhole window $blo-$bhi s (host: 500, 1.1-1.95 s)"
fi
t_range "10 ms samples over the run" "$(jq '.samples.t_s | length' "$J")" 280 $smax
t_eq "per-plane series" "$(jq '.samples.planes_gbps | keys | join(",")' -r "$J")" "0,1"
t_check "plane 1 carried traffic before the fault" \
	jq -e '[.samples as $s | range($s.t_s | length) | select($s.t_s[.] > 0.3 and $s.t_s[.] < 1.0) | $s.planes_gbps["1"][.]] | add > 0' "$J"
t_eq "plane 1 delivered nothing while blackholed ($blo-$bhi s)" \
	"$(jq --argjson lo "$blo" --argjson hi "$bhi" '[.samples as $s | range($s.t_s | length) | select($s.t_s[.] > $lo and $s.t_s[.] < $hi) | $s.planes_gbps["1"][.]] | add' "$J")" 0
t_check "summary per event (pre-fault median, min bin, recovery)" \
	jq -e '.summary.events[0] | has("pre_median_gbps") and has("min_bin_gbps") and has("recover_ms") and .pre_median_gbps > 0' "$J"
t_check "workload samples parsed" jq -e '.workload_samples.t_s | length > 200' "$J"
t_eq "workload data verified" "$(jq -r '.workloads[0].summary.verify' "$J")" ok
t_check "PNG plot written" bash -c "head -c 4 '$T_TMP/out/goodput.png' | grep -q PNG && [ \$(stat -c %s '$T_TMP/out/goodput.png') -gt 5000 ]"
run=$(jq -r .run "$J")
t_eq "the runner tore its fabric down" "$(ip netns list | grep -c -- "-$run-")" 0
t_done
