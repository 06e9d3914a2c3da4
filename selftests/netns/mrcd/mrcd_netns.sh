#!/usr/bin/env bash
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#
# mrcd and mrcctl on two hosts (network namespaces joined by four veth
# planes), one case per run:
#
#   probe     EV probes A -> B over IPv4 and IPv6 with RTT in ns, req_id rules,
#             ETIMEDOUT with partial results (a port admin-down at B)
#   port      `port set 2 down` reflected in mrc_ports, mrc_ctl_dev and dev show
#   bpftool   profiles created with mrcctl, visible with bpftool (named fields)
#   restart   kill -9 mrcd, XDP and pins stay, restart keeps profiles/states
#   json      every mrcctl -j output (results and errors) parses as JSON
#   metrics   /metrics scrapes with the expected families
#   promtool  `promtool check metrics` reports nothing on live scrapes of mrcd
#             with an mrc_perf QP on a 4096-EV profile; by default the scrape
#             stays at a few hundred series (EV counters summed per profile
#             and port), with --metrics-per-ev it has one series per EV
#   eperm     modifying calls without CAP_NET_ADMIN fail with EPERM
#   config    a bad configuration file is refused with FILE:LINE: reason
#   policy    reroute policy on real probes: planes whose peer stops answering
#             are denied (within max_denied_fraction), allowed again once it
#             answers; decisions and EV events streamed by `mrcctl monitor`
#
# Root only (exit 77 otherwise). Needs MRC_BUILD_DIR, jq and bpftool;
# promtool needs promtool (Debian prometheus) and mrc_perf.
HERE=$(dirname "$(readlink -f "$0")")
CASE=${1:?usage: mrcd_netns.sh CASE}
# shellcheck source=lib.sh
source "$HERE/lib.sh"

# Explicit profile 5 (format 13, 16+16 bits) with two EVs per port, CC 9.
make_profiles() {
	local ctl=$1
	$ctl -j ev-fmt create 13 mode stev widths 16,16 online >/dev/null || fail "ev-fmt create"
	$ctl -j ev-profile create 5 mode explicit fmt 13 count 8 min-active 2 events good,assumed_bad \
		fields 16:0:0:65535:0xffff,16:0:0:65535:0xffff \
		evs 00010001@1,00010002@1,00020001@2,00020002@2,00030001@3,00030002@3,00040001@4,00040002@4 online \
		>/dev/null || fail "ev-profile create"
	$ctl -j cc-profile create 9 algo uet-1.0-nscc target-delay 12000 base-rtt 8000 eta 0.5 online >/dev/null ||
		fail "cc-profile create"
	$ctl -j ev-profile create 6 mode generated fmt 13 count 32 min-active 8 events assumed_bad \
		fields 16:256:0:15:0xf,16:512:0:15:0xf online >/dev/null || fail "generated ev-profile create"
}

case_probe() {
	setup_hosts
	start_mrcd a --probe-interval 0
	start_mrcd b --probe-interval 0
	wait_ready a
	wait_ready b
	local j
	j=$(ctlA -j probe 198.18.2.2 00000001@2 0001c123@2 timeout 2000) || fail "IPv4 probe failed: $j"
	expect '.answered == 2 and .sent == 2' "$j" "two IPv4 responses"
	expect '[.responses[] | select(.port == 2 and .rtt_ns > 0 and .rtt_ns < 1000000000 and .from == "198.18.2.2")] | length == 2' "$j" "RTT in ns on port 2"
	expect '[.responses[].rx_port] == [2, 2]' "$j" "responder port"
	note "IPv4 RTTs: $(echo "$j" | jq -c '[.responses[].rtt_ns]') ns"
	j=$(ctlA -j probe fd00:0:3::2 0000beef@3 00000042@3 timeout 2000) || fail "IPv6 probe failed: $j"
	expect '.answered == 2' "$j" "IPv6 responses"
	expect '[.responses[].from] | sort == ["fd00:0:3::2", "fd00:0:3::2"]' "$j" "IPv6 source"
	# The responses came through mrc_xdp's XDP_TX at B, not B's mrcd.
	j=$(ctlB -j stats)
	expect '[.ports[] | select(.port == 2) | .xdp.tx_ep_response] | .[0] >= 2' "$j" "B answered in XDP"
	# Duplicate req_id in one batch: EINVAL, nothing sent.
	j=$(ctlA -j probe 198.18.1.2 00000001@1 00000002@1 req-ids 7,7) && fail "duplicate req_id accepted"
	expect '.error.errno == 22 and .error.name == "EINVAL"' "$j" "duplicate req_id is EINVAL"
	# A request to nowhere: ETIMEDOUT, no responses.
	j=$(ctlA -j probe 198.18.1.99 00000001@1 timeout 200) && fail "probe to nowhere succeeded"
	expect '.error.errno == 110 and .result.answered == 0' "$j" "ETIMEDOUT without responses"
	# Partial results: B's port 2 is administratively down, its XDP drops
	# what arrives there; one batch with a request on port 1 and one on port 2.
	ctlB port set 2 down >/dev/null || fail "port set at B"
	j=$(ctlA -j probe 198.18.1.2 00000061@1 00000062@2=198.18.2.2 timeout 300) && fail "lost request not reported"
	expect '.error.name == "ETIMEDOUT" and .error.errno == 110' "$j" "ETIMEDOUT"
	expect '.result.sent == 2 and .result.answered == 1 and .result.responses[0].port == 1 and .result.responses[0].rtt_ns > 0' "$j" "partial results"
	j=$(ctlB -j stats)
	expect '[.ports[] | select(.port == 2) | .xdp.drop_admin_down][0] >= 1' "$j" "B dropped it on the admin-down port"
	ctlB port set 2 up >/dev/null
	j=$(ctlA -j probe 198.18.1.2 00000071@1 00000072@2=198.18.2.2 timeout 2000) || fail "port 2 back: $j"
	expect '.answered == 2 and ([.responses[].port] | sort) == [1, 2]' "$j" "both ports answer again"
	note "probe case passed"
}

case_port() {
	setup_hosts
	start_mrcd a --probe-interval 0
	wait_ready a
	local j ifidx
	ifidx=$(inA cat /sys/class/net/ma2/ifindex)
	j=$(ctlA -j port set 2 down) || fail "port set 2 down: $j"
	expect '.port == 2 and .admin == "down" and .state == "down"' "$j"
	j=$(bdump "$T/bpfa/mrc/mrc_ports")
	expect "[.[] | select(.key == $ifidx) | .value] == [{\"port\": 2, \"flags\": 1}]" "$j" "mrc_ports flags ADMIN_DOWN"
	j=$(ctlA -j dev show)
	expect '[.ports[] | select(.port == 2)][0].state == "down"' "$j" "dev show port 2 down"
	expect '.phy_port_mask == 30' "$j"
	j=$(bdump "$T/bpfa/mrc/mrc_ctl_dev")
	expect '.[0].value.admin_down_mask == 4 and .[0].value.port_down_mask == 4' "$j" "mrc_ctl_dev masks"
	j=$(bdump "$T/bpfa/mrc/mrc_cfg")
	expect '.[0].value.port_up_mask == 13' "$j" "EETH port-up mask without port 2"
	j=$(ctlA -j port show 2)
	expect '.[0].admin == "down" and .[0].admin_changes == 1' "$j"
	# A probe on an admin-down port is refused.
	j=$(ctlA -j probe 198.18.2.2 00000001@2) && fail "probe on an admin-down port"
	expect '.error.errno == 22' "$j" "probe on admin-down port is EINVAL"
	j=$(ctlA -j port set 2 up) || fail "port set 2 up"
	j=$(bdump "$T/bpfa/mrc/mrc_ports")
	expect "[.[] | select(.key == $ifidx) | .value.flags] == [0]" "$j" "mrc_ports flags cleared"
	j=$(ctlA -j port set 9 down) && fail "port 9 accepted"
	expect '.error.errno == 22 and (.error.object | test("port 9"))' "$j" "unknown port named"
	note "port case passed"
}

case_bpftool() {
	setup_hosts
	start_mrcd a --probe-interval 0
	make_profiles ctlA
	ctlA -j ev deny 5 00020002@2 >/dev/null || fail "ev deny"
	local j d="$T/bpfa/mrc"
	j=$(bdump "$d/mrc_ctl_fmt")
	expect '[.[] | select(.value.used == 1 and .value.id == 13) | .value] | .[0] | .cur_state == 2 and .mode == 1 and .field_count == 2 and .width[0] == 16 and .width[1] == 16' "$j" "mrc_ctl_fmt"
	j=$(bdump "$d/mrc_ctl_evp")
	expect '[.[] | select(.value.used == 1 and .value.id == 5) | .value] | .[0] | .cur_state == 2 and .mode == 2 and .fmt_id == 13 and .ev_count == 8 and .min_active == 2 and .event_mask == 3 and .n_denied == 1 and .field[0].mask == 65535' "$j" "mrc_ctl_evp profile 5"
	expect '[.[] | select(.value.used == 1 and .value.id == 6) | .value] | .[0] | .mode == 4 and .ev_count == 32 and .event_mask == 2 and .field[0].init_val == 256' "$j" "mrc_ctl_evp profile 6"
	local base
	base=$(echo "$j" | jq '[.[] | select(.value.used == 1 and .value.id == 5) | .value.base][0]')
	j=$(bdump "$d/mrc_ctl_evs")
	expect "[.[] | select(.key >= $base and .key < $base + 8) | .value] | (map(.port) == [1,1,2,2,3,3,4,4]) and (map(.wire) | .[2] == 131073) and (map(.state) | .[3] == 4) and (map(.populated) | all(. == 1))" "$j" "mrc_ctl_evs of profile 5"
	j=$(bdump "$d/mrc_ctl_cc")
	expect '[.[] | select(.value.used == 1 and .value.id == 9) | .value] | .[0] | .cur_state == 2 and .algorithm == 1 and .nscc.target_delay == 12000 and .nscc.base_rtt == 8000 and .nscc.eta == 0.5' "$j" "mrc_ctl_cc"
	j=$(bdump "$d/mrc_ctl_port")
	expect '[.[] | select(.value.configured == 1) | .value.ifname] == ["ma1","ma2","ma3","ma4"]' "$j" "mrc_ctl_port names"
	j=$(bdump "$d/mrc_ctl_dev")
	expect '.[0].value.magic == 1297236803 and .[0].value.version == 1 and .[0].value.port_mask == 30' "$j" "mrc_ctl_dev"
	# The pinned maps are the BPF object's, with BTF (bpftool prints names).
	j=$(bpftool -j map show pinned "$d/mrc_ctl_evs")
	expect '.name == "mrc_ctl_evs" and .type == "array" and .max_entries == 65536 and (.btf_id > 0)' "$j" "mrc_ctl_evs map"
	note "bpftool case passed"
}

case_restart() {
	setup_hosts
	start_mrcd a --probe-interval 0
	start_mrcd b --probe-interval 0
	wait_ready a
	make_profiles ctlA
	ctlA -j ev deny 5 00030001@3 >/dev/null || fail "ev deny"
	ctlA -j port set 3 down >/dev/null || fail "port set 3 down"
	local before after pid xdp_before xdp_after
	before=$(ctlA -j ev-profile show 5 evs | jq -c '{state, evs: [.evs[] | {ev, port, state}]}')
	xdp_before=$(inA ip -j link show ma1 | jq '.[0].xdp.prog.id')
	[ "$xdp_before" != null ] || fail "no XDP program on ma1"
	stop_mrcd a KILL
	# mrcd is gone: XDP stays attached, the maps stay pinned, EV probes are still answered.
	[ "$(inA ip -j link show ma1 | jq '.[0].xdp.prog.id')" = "$xdp_before" ] || fail "XDP detached by kill -9"
	[ -e "$T/bpfa/mrc/mrc_ctl_evp" ] || fail "pins gone"
	local j
	j=$(ctlB -j probe 198.18.1.1 00000077@1 timeout 2000) || fail "A's XDP stopped answering: $j"
	start_mrcd a --probe-interval 0
	after=$(ctlA -j ev-profile show 5 evs | jq -c '{state, evs: [.evs[] | {ev, port, state}]}')
	[ "$before" = "$after" ] || fail "profile 5 changed across the restart: $before / $after"
	xdp_after=$(inA ip -j link show ma1 | jq '.[0].xdp.prog.id')
	[ "$xdp_after" = "$xdp_before" ] || fail "XDP program replaced ($xdp_before -> $xdp_after)"
	j=$(ctlA -j dev show)
	expect '.restarts == 1' "$j" "restart counted"
	expect '[.ports[] | select(.port == 3)][0].admin == "down"' "$j" "port 3 still admin down"
	j=$(ctlA -j ev-fmt show 13)
	expect '.state == "online" and .fields == [16,16]' "$j"
	j=$(ctlA -j cc-profile show 9)
	expect '.state == "online" and .config.target_delay == 12000' "$j"
	j=$(ctlA -j ev-profile show 6)
	expect '.state == "online" and .ev_count == 32' "$j"
	local ifidx
	ifidx=$(inA cat /sys/class/net/ma3/ifindex)
	j=$(bdump "$T/bpfa/mrc/mrc_ports")
	expect "[.[] | select(.key == $ifidx) | .value.flags] == [1]" "$j" "port 3 admin down in mrc_ports"
	j=$(ctlA -j probe 198.18.1.2 00000001@1 timeout 2000) || fail "probe after restart: $j"
	# A clean stop (SIGTERM) keeps everything too; --cleanup removes it.
	stop_mrcd a TERM || fail "SIGTERM exit status"
	[ -e "$T/bpfa/mrc/mrc_ctl_evp" ] || fail "pins removed by a plain SIGTERM"
	start_mrcd a --probe-interval 0 --cleanup
	stop_mrcd a TERM || fail "SIGTERM with --cleanup"
	[ -e "$T/bpfa/mrc/mrc_ctl_evp" ] && fail "--cleanup left the pins"
	[ "$(inA ip -j link show ma1 | jq '.[0].xdp')" = null ] || fail "--cleanup left XDP attached"
	note "restart case passed"
}

case_json() {
	setup_hosts
	start_mrcd a --probe-interval 0
	make_profiles ctlA
	local cmd out n=0
	while IFS= read -r cmd; do
		[ -z "$cmd" ] && continue
		# shellcheck disable=SC2086
		out=$(ctlA -j $cmd 2>/dev/null)
		echo "$out" | jq -e . >/dev/null 2>&1 || fail "mrcctl -j $cmd: not JSON: $(echo "$out" | head -c 300)"
		out=$(ctlA -p $cmd 2>/dev/null)
		echo "$out" | jq -e . >/dev/null 2>&1 || fail "mrcctl -p $cmd: not JSON"
		n=$((n + 1))
	done <<'EOF'
dev show
port show
port show 1
ev-fmt show
ev-fmt show 13
ev-profile show
ev-profile show 5 evs
ev show 5
ev show 6 state good
cc-profile show
cc-profile show 9
qp show
stats
policy show
ev deny 5 00010001@1
ev allow 5 00010001@1
ev deny 5 port 4
ev allow 5 port 4
port set 1 down
port set 1 up
probe 198.18.1.2 00000001@1 timeout 100
ev-profile show 77
ev-fmt create 13 mode stev widths 16,16
ev-profile set 5 count 4
ev-profile set 5 min-active 99
cc-profile set 9 target-delay 1
ev replace 5 99999999@1 00000001@1
port set 7 up
probe 198.18.1.2 00000001@1 req-ids 1,1
EOF
	# Error objects say what and why.
	out=$(ctlA -j ev-profile set 5 count 4)
	expect '.error.object == "ev-profile 5" and .error.name == "EINVAL" and (.error.message | test("ONLINE"))' "$out"
	out=$(ctlA -j ev-fmt set 13 state offline)
	expect '.error.name == "EBUSY" and (.error.message | test("EV profile 5"))' "$out" "EBUSY names the EV profile"
	out=$(ctlA -j nosuch show 2>&1; true)
	note "json case passed ($n commands)"
}

case_metrics() {
	setup_hosts
	start_mrcd a --probe-interval 0
	make_profiles ctlA
	ctlA port set 4 down >/dev/null
	local m
	m=$(scrape "$NSA") || fail "scrape failed"
	echo "$m" | head -1 | grep -q "HTTP/1.1 200 OK" || fail "status line: $(echo "$m" | head -1)"
	for want in 'mrcd_up 1' 'mrc_xdp_mode{port="1",ifname="ma1",mode="native"} 1' 'mrc_port_up{port="4",ifname="ma4"} 0' \
		'mrc_port_up{port="1",ifname="ma1"} 1' 'mrc_xdp_drops_total{port="1",ifname="ma1",reason="admin_down"}' \
		'mrc_xdp_actions_total{port="2",ifname="ma2",action="pass_non_mrc"}' 'mrc_ev_profile_evs{profile="5",state="good"} 8' \
		'mrc_ev_profile_evs{profile="6",state="good"} 32' 'mrc_ctl_ev_reports_dropped_total 0' '# TYPE mrc_xdp_rx_packets_total counter' \
		'mrc_policy_decisions_total{action="deny_ev"}' 'mrcd_control_requests_total'; do
		echo "$m" | grep -qF "$want" || fail "metrics lack: $want"
	done
	# 404 for anything else.
	m=$(ip netns exec "$NSA" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9477; printf "GET / HTTP/1.1\r\n\r\n" >&3; timeout 5 cat <&3')
	echo "$m" | head -1 | grep -q "404" || fail "/ is not 404"
	note "metrics case passed ($(scrape "$NSA" | grep -c '^mrc') samples)"
}

# The body of a scrape (no HTTP head).
scrape_body() { scrape "$1" | sed '1,/^\r$/d'; }

# promtool check metrics on a scrape body: any output (warning or error) or a
# non-zero status fails.
promcheck() {
	local out rc
	out=$(promtool check metrics <"$1" 2>&1)
	rc=$?
	[ $rc -eq 0 ] && [ -z "$out" ] || fail "promtool check metrics ($2, rc $rc): $(echo "$out" | head -20)"
	note "promtool check metrics ($2): no problems"
}

case_promtool() {
	command -v promtool >/dev/null || skip "promtool is not installed (Debian prometheus, scripts/deps.sh)"
	local perf=$MRC_BUILD_DIR/user/tools/mrc_perf
	[ -x "$perf" ] || skip "mrc_perf not built in $MRC_BUILD_DIR"
	# The key is accepted by --check (and documented in the sample).
	printf '[daemon]\nmetrics_per_ev = true\n[[plane]]\nifname = "ma1"\nport = 1\n' >"$T/per-ev.toml"
	"$MRCD" --config "$T/per-ev.toml" --check >/dev/null || fail "mrcd --check refused metrics_per_ev"
	grep -q '^metrics_per_ev = false' "$HERE/../../../user/mrcd/mrcd.toml.sample" || fail "the sample lacks metrics_per_ev"
	setup_hosts
	start_mrcd a --probe-interval 200
	start_mrcd b --probe-interval 200
	wait_ready a
	wait_ready b
	local ctl
	for ctl in ctlA ctlB; do
		make_profiles $ctl
		# 64 x 64 generated EVs, given to the four ports in turn.
		$ctl -j ev-profile create 7 mode generated fmt 13 count 4096 min-active 8 events assumed_bad \
			fields 16:256:0:63:0x3f,16:512:0:63:0x3f online >/dev/null || fail "4096-EV profile create"
	done
	expect '.ev_count == 4096' "$(ctlA -j ev-profile show 7)" "profile 7 has 4096 EVs"
	# A light verified RDMA WRITE stream; path MTU 1024: lib.sh's veths have
	# an MTU of 1500.
	local args=(-d ma1,ma2,ma3,ma4 -m 1024 -s 16384 -t 4 -v --pin-dir "$T/bpfa/mrc" --ev-profile 7 --cc-profile 9)
	# ip netns exec execs mrc_perf: $! is mrc_perf's pid (not a subshell's).
	ip netns exec "$NSB" "$perf" server -d mb1,mb2,mb3,mb4 -m 1024 -s 16384 -t 4 -v --pin-dir "$T/bpfb/mrc" --ev-profile 7 --cc-profile 9 \
		>"$T/server.out" 2>&1 &
	local spid=$! i
	PIDS="$PIDS $spid"
	# The client needs the server's out-of-band TCP port (18515).
	for i in $(seq 1 100); do
		inB ss -Hltn 'sport = :18515' | grep -q . && break
		kill -0 "$spid" 2>/dev/null || fail "mrc_perf server exited: $(tail -n 10 "$T/server.out")"
		sleep 0.1
	done
	ip netns exec "$NSA" "$perf" client 198.18.1.2 "${args[@]}" -D 40 >"$T/client.out" 2>&1 &
	local cpid=$!
	PIDS="$PIDS $cpid"
	# Wait (bounded) for the client's per-EV counters of profile 7: every EV
	# of its QP is reported, with traffic on some.
	local n=0
	for i in $(seq 1 100); do
		n=$(ctlA -j ev show 7 2>/dev/null | jq '[.evs[] | select(.counters != null and .counters.qps > 0)] | length' 2>/dev/null)
		[ "${n:-0}" -ge 4096 ] && break
		kill -0 "$cpid" 2>/dev/null || fail "mrc_perf client exited: $(head -n 20 "$T/client.out"; echo ---; tail -n 10 "$T/server.out")"
		sleep 0.2
	done
	[ "${n:-0}" -ge 4096 ] || fail "per-EV counters of profile 7: $n EVs reported, want 4096"
	scrape_body "$NSA" >"$T/default.prom" || fail "scrape failed"
	promcheck "$T/default.prom" "default"
	local series
	series=$(grep -cv '^#' "$T/default.prom")
	note "default scrape: $series series with 4096 EVs reported"
	[ "$series" -le 300 ] || fail "default scrape has $series series (want <= 300): $(grep -v '^#' "$T/default.prom" | cut -d'{' -f1 | sort | uniq -c | sort -rn | head -5)"
	grep -q '^mrc_ev_tx_packets_total' "$T/default.prom" && fail "per-EV series without --metrics-per-ev"
	grep -qE '^mrc_ev_profile_tx_packets_total\{profile="7",port="1"\} [1-9]' "$T/default.prom" ||
		fail "no summed EV counter of profile 7 on port 1 with traffic"
	grep -qE '^mrc_qp_srtt_seconds\{.*\} [0-9.e-]+$' "$T/default.prom" || fail "no mrc_qp_srtt_seconds sample"
	# Probe RTTs on veths are microseconds: in seconds, above 0 and below 0.1.
	awk '$1 ~ /^mrc_probe_rtt_last_seconds\{/ { n++; if (!($2 > 0 && $2 < 0.1)) bad++ }
		END { exit !(n == 4 && !bad) }' "$T/default.prom" ||
		fail "mrc_probe_rtt_last_seconds is not four times in seconds: $(grep mrc_probe_rtt "$T/default.prom")"
	# mrcd restarted with --metrics-per-ev while the transfer goes on: one
	# series per EV of profile 7 (the client's counters stay in the maps).
	stop_mrcd a || fail "mrcd a did not exit cleanly"
	start_mrcd a --probe-interval 200 --metrics-per-ev
	scrape_body "$NSA" >"$T/per-ev.prom" || fail "scrape failed"
	promcheck "$T/per-ev.prom" "--metrics-per-ev"
	local per_ev evs
	per_ev=$(grep -cv '^#' "$T/per-ev.prom")
	evs=$(grep -c '^mrc_ev_tx_packets_total{profile="7",' "$T/per-ev.prom")
	note "--metrics-per-ev scrape: $per_ev series, $evs EVs of profile 7 in mrc_ev_tx_packets_total"
	[ "$evs" -ge 4096 ] || fail "--metrics-per-ev: $evs EVs of profile 7, want 4096"
	grep -qE '^mrc_ev_rtt_last_seconds\{profile="7",ev="0x[0-9a-f]{8}",port="[1-4]"\} ' "$T/per-ev.prom" ||
		fail "no per-EV RTT in seconds"
	# The transfer was healthy throughout: the client ends it (SIGTERM; bash
	# starts background jobs with SIGINT ignored) with the data verified.
	kill -TERM "$cpid" 2>/dev/null || fail "mrc_perf client exited during the test: $(head -n 5 "$T/client.out")"
	local rc
	timeout 30 tail --pid="$cpid" -f /dev/null
	kill -0 "$cpid" 2>/dev/null && fail "mrc_perf client still running 30 s after SIGTERM"
	wait "$cpid"
	rc=$?
	[ $rc -eq 0 ] && ! grep -q "completion error" "$T/client.out" ||
		fail "mrc_perf client failed (rc $rc): $(grep -v '^ *[0-9.]* s ' "$T/client.out" | head -n 12; echo ---; tail -n 12 "$T/server.out")"
	note "promtool case passed (default $series series, per-EV $per_ev)"
}

case_eperm() {
	setup_hosts
	start_mrcd a --probe-interval 0
	command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
	chmod 0666 "$T/a.sock"
	chmod 0755 "$T"
	local j
	# A non-root uid: read-only calls work, modifying calls are EPERM.
	j=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$MRCCTL" -s "$T/a.sock" -j dev show) || fail "nobody: dev show: $j"
	j=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$MRCCTL" -s "$T/a.sock" -j port set 1 down) &&
		fail "nobody could modify a port"
	expect '.error.errno == 1 and .error.name == "EPERM"' "$j" "EPERM for uid 65534"
	j=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$MRCCTL" -s "$T/a.sock" -j probe 198.18.1.2) &&
		fail "nobody could probe"
	expect '.error.name == "EPERM"' "$j"
	# Root without CAP_NET_ADMIN.
	j=$(setpriv --inh-caps=-net_admin --bounding-set=-net_admin "$MRCCTL" -s "$T/a.sock" -j ev-fmt create 1 mode stev widths 8) &&
		fail "root without CAP_NET_ADMIN could create a profile"
	expect '.error.name == "EPERM"' "$j" "EPERM without CAP_NET_ADMIN"
	j=$(ctlA -j ev-fmt show)
	expect 'length == 0' "$j" "nothing was created"
	j=$(ctlA -j port show 1)
	expect '.[0].admin == "up"' "$j" "port unchanged"
	j=$(ctlA -j stats)
	expect '.server.eperm == 3' "$j" "three EPERMs counted"
	note "eperm case passed"
}

case_config() {
	local cfg j
	cfg=$T/bad.toml
	printf '[daemon]\npin_dir = "/sys/fs/bpf/x"\n\n[[plane]]\nifname = "eth9"\nport = 99\n' >"$cfg"
	j=$("$MRCD" --config "$cfg" --check 2>&1) && fail "port 99 accepted"
	echo "$j" | grep -q "$cfg:6: plane.port = 99 is outside 1..15" || fail "message: $j"
	printf '[daemon]\npin_dir = 3\n' >"$cfg"
	j=$("$MRCD" --config "$cfg" --check 2>&1) && fail "a number as pin_dir"
	echo "$j" | grep -q "$cfg:2: daemon.pin_dir must be a string" || fail "message: $j"
	printf '[daemon]\nsocket = "/run/x.sock"\nbogus = 1\n' >"$cfg"
	j=$("$MRCD" --config "$cfg" --check 2>&1) && fail "unknown key accepted"
	echo "$j" | grep -q "$cfg:3: unknown key daemon.bogus" || fail "message: $j"
	printf '[daemon\n' >"$cfg"
	j=$("$MRCD" --config "$cfg" --check 2>&1) && fail "a syntax error accepted"
	echo "$j" | grep -q "$cfg:1:" || fail "message: $j"
	printf '[[plane]]\nifname = "eth1"\nport = 1\npeers = ["198.18.0.300"]\n' >"$cfg"
	j=$("$MRCD" --config "$cfg" --check 2>&1) && fail "a bad address accepted"
	echo "$j" | grep -q "$cfg:4: plane.peers" || fail "message: $j"
	j=$("$MRCD" --config "$MRC_SOURCE_DIR/user/mrcd/mrcd.toml.sample" --check 2>&1) || fail "the sample is refused: $j"
	note "config case passed"
}

case_policy() {
	setup_hosts
	# B's mrcd is not running yet: nothing answers A's EV probes. After 3
	# failed probe rounds A denies the planes: the monitor must be connected
	# by then to stream those decisions, so it starts first. In the VM
	# (MRC_IN_VM=1, TCG) starting one mrcctl takes up to a second: there the
	# rounds are 1 s apart instead of 200 ms.
	local pi=200
	if [ "${MRC_IN_VM:-0}" = 1 ]; then
		pi=1000
		note "MRC_IN_VM=1: probe interval $pi ms (host: 200 ms)"
	fi
	start_mrcd a --probe-interval $pi
	ctlA -j monitor >"$T/monitor.jsonl" 2>&1 &
	local mon=$! j i
	make_profiles ctlA
	for i in $(seq 1 100); do
		j=$(ctlA -j policy show)
		[ "$(echo "$j" | jq '.counters.deny_plane')" -ge 2 ] && [ "$(echo "$j" | jq '.counters.suppressed')" -ge 1 ] && break
		sleep 0.1
	done
	expect '.counters.deny_plane >= 2 and .counters.suppressed >= 1' "$j" "planes denied, the rest suppressed"
	expect '[.decisions[] | select(.action == "suppressed")][0].reason | test("plane deny .* suppressed: max_denied_fraction")' "$j" "suppression reason"
	expect '[.decisions[] | select(.action == "deny_plane")][0].reason | test("every probe on the plane failed")' "$j" "deny reason"
	j=$(ctlA -j ev-profile show 5)
	expect '.denied == 4' "$j" "half of profile 5 denied (max_denied_fraction 0.5)"
	# B comes up: its XDP answers, the planes are allowed again.
	start_mrcd b --probe-interval 0
	for i in $(seq 1 100); do
		j=$(ctlA -j policy show)
		[ "$(echo "$j" | jq '.counters.allow_plane')" -ge 2 ] && break
		sleep 0.1
	done
	expect '.counters.allow_plane >= 2' "$j" "planes allowed again"
	for i in $(seq 1 50); do
		[ "$(ctlA -j ev-profile show 5 | jq '.denied')" = 0 ] && break
		sleep 0.1
	done
	j=$(ctlA -j ev-profile show 5)
	expect '.denied == 0' "$j" "every EV of profile 5 usable again"
	sleep 0.3
	kill "$mon" 2>/dev/null
	wait "$mon" 2>/dev/null
	j=$(jq -s -c '.' "$T/monitor.jsonl") || fail "monitor output is not JSON lines"
	expect '[.[] | select(.type == "decision" and .action == "deny_plane")] | length >= 2' "$j" "deny decisions streamed"
	expect '[.[] | select(.type == "decision" and .action == "allow_plane")] | length >= 2' "$j" "allow decisions streamed"
	expect '[.[] | select(.type == "ev_event" and .profile == 5 and .state == "good" and .reason == "controller allow")] | length == 4' "$j" "one GOOD event per allowed EV"
	j=$(scrape "$NSA")
	echo "$j" | grep -q 'mrc_policy_decisions_total{action="deny_plane"} [1-9]' || fail "decision metric"
	note "policy case passed"
}

"case_$CASE"
