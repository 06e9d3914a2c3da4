#!/usr/bin/env bash
# The path MTU comes from the planes (issue 22): with default settings
# mrc_perf's QPs use the largest payload every plane of both ends carries
# (each end advertises its own limit in the exchange), data verified byte for
# byte on fabrics of MTU 1500, 4000 and 9000, on planes of different MTUs,
# and with ends of different MTUs; a forced -m larger than a plane carries
# fails at once, naming the interface, instead of "transport retry counter
# exceeded" seconds later.
#
# Expected path MTUs (IPv4, 72 header bytes: IP 20, UDP 8, BTH 12, RETH,
# ImmDt and TSETH 28, ICRC 4; a multiple of 64): MTU 1500 -> 1408, 4000 ->
# 3904, 9000 -> 8896; single-buffer AF_XDP (one 4 KiB page) caps at 3392.
#
# Knobs: MRC_PERF (the mrc_perf binary), MRC_PERF_CASES (subset of names).
. "$(dirname "$0")/lib.sh"
t_require timeout

B_PERF=${MRC_PERF:-$MRC_BUILD_DIR/user/tools/mrc_perf}
[ -x "$B_PERF" ] || { echo "FAIL $T_NAME: $B_PERF is not built"; exit 1; }

PORT=18800
# xfer NAME WANT(path MTU or "error:TEXT") SERVER_ARGS CLIENT_ARGS: one
# verified -i transfer between A (client) and B (server) of the run $R.
xfer() {
	local name=$1 want=$2 sargs=$3 cargs=$4 spid cpid crc src t0 t1
	local na nb deva devb peer
	na=$(t_ns A)
	nb=$(t_ns B)
	deva=$(jq -r '[.hosts.A.ports[].ifname] | join(",")' "$ST")
	devb=$(jq -r '[.hosts.B.ports[].ifname] | join(",")' "$ST")
	peer=$(t_port B 0 ipv4)
	PORT=$((PORT + 1))
	t0=$(date +%s%N)
	# shellcheck disable=SC2086 # option lists
	ip netns exec "$nb" timeout -s INT 40 "$B_PERF" server -d "$devb" -p "$PORT" --no-mrcd -i --verify -j \
		$sargs >"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	# shellcheck disable=SC2086
	ip netns exec "$na" timeout -s INT 40 "$B_PERF" client "$peer" -d "$deva" -p "$PORT" --no-mrcd -i --verify -j \
		-D 1 $cargs >"$T_TMP/$name-client.log" 2>&1 &
	cpid=$!
	T_PIDS+=("$cpid")
	wait "$cpid"
	crc=$?
	wait "$spid"
	src=$?
	t1=$(date +%s%N)
	local secs=$(((t1 - t0) / 1000000))ms
	if [[ $want == error:* ]]; then
		local text=${want#error:}
		# The side that forced -m reports it; the other side sees the hang-up.
		if [ "$crc" != 0 ] && [ "$src" != 0 ] && grep -qF "$text" "$T_TMP/$name-client.log" "$T_TMP/$name-server.log" &&
			! grep -q "retry counter exceeded" "$T_TMP/$name-client.log" "$T_TMP/$name-server.log" &&
			(((t1 - t0) < 10000000000)); then
			t_ok "$name: refused in $secs: $(grep -hF "$text" "$T_TMP/$name-client.log" "$T_TMP/$name-server.log" | head -n 1)"
		else
			t_fail "$name: client exit $crc, server exit $src in $secs, want both to fail with '$text'"
			tail -n 3 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
		fi
		return
	fi
	local cv sv mtu msgs
	cv=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
	mtu=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.path_mtu' 2>/dev/null)
	msgs=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.msgs' 2>/dev/null)
	sv=$(grep '"summary"' "$T_TMP/$name-server.log" | jq -r '.summary.verify' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ] && [ "$mtu" = "$want" ] && [ "${msgs:-0}" -gt 0 ]; then
		t_ok "$name: path MTU $mtu, $msgs messages verified"
	else
		t_fail "$name: client exit $crc (verify ${cv:-none}, path MTU ${mtu:-none}, want $want), server exit $src (verify ${sv:-none})"
		tail -n 3 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
	fi
}

# Sets the MTU of every plane port of HOST (its end of the veth only: the
# fabric side keeps the run's MTU, as a host configured below its switch).
host_mtu() { # HOST MTU
	local ns p
	ns=$(t_ns "$1")
	for p in $(jq -r --arg h "$1" '.hosts[$h].ports[].ifname' "$ST"); do
		ip -n "$ns" link set dev "$p" mtu "$2" || return 1
	done
}

want_case() { [ -z "${MRC_PERF_CASES:-}" ] || [[ " $MRC_PERF_CASES " == *" $1 "* ]]; }

t0=$(date +%s)
if want_case mtu1500; then
	t_up direct planes=4 mtu=1500
	xfer mtu1500 1408 "" ""
	xfer mtu1500-forced "error:exceeds the MTU 1500 of" "-m 3392" "-m 3392"
	fabric_down "$R"
fi
if want_case mtu4000; then
	t_up direct planes=4 mtu=4000
	xfer mtu4000 3392 "" ""
	xfer mtu4000-chunks2 3904 "--frame-chunks 2" "--frame-chunks 2"
	fabric_down "$R"
fi
if want_case mtu9000; then
	t_up direct planes=4 mtu=9000
	xfer mtu9000 3392 "" ""
	xfer mtu9000-chunks3 8896 "--frame-chunks 3" "--frame-chunks 3"
	xfer mtu9000-forced "error:exceeds the 3392 of single-buffer AF_XDP" "-m 4096" "-m 4096"
	fabric_down "$R"
fi
if want_case mixed; then
	# Planes of different MTUs: the smallest wins.
	t_up direct planes=4 mtu=9000 mtus=1500,9000,4000,3500
	xfer mixed 1408 "--frame-chunks 3" "--frame-chunks 3"
	fabric_down "$R"
fi
if want_case ends; then
	# The server's ports at 1500, the client's at 3500: the client learns
	# the server's limit in the exchange (its own planes carry 3392).
	t_up direct planes=4 mtu=3500
	host_mtu B 1500 || t_fail "setting B's MTU"
	xfer ends 1408 "" ""
	xfer ends-forced "error:exceeds what every plane of the peer carries (1408)" "" "-m 3392"
	fabric_down "$R"
fi
echo "runs took $(($(date +%s) - t0)) s"
t_done
