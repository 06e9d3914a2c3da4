#!/usr/bin/env bash
# Adversarial packet injection (issue 20; Documentation/testing.md,
# "Adversarial packet injection"). A 4-plane direct fabric; mrc_perf writes
# from A (client, requester) to B (server, responder) with --verify, once
# with RDMA WRITE and once with WRITE-with-immediate (-i). Each transfer runs
# twice: a control run without injection, then a run during which mrc_inject
# (in the wire namespace, between the hosts) forges, truncates and replays
# packets of every class for a bounded time. Both mrc_perf of every run
# write all their counters (--counters-json); inject_check.py then checks
#
#   - every mrc_perf exited 0, data verified, no completion error and no
#     QP-fatal event, in the control and the injected runs;
#   - per injected class, the counters that must account for it moved at
#     least by the number injected (exactly, where the control run shows
#     legitimate traffic leaves the counter at 0 and nothing else of the
#     run reflects into it);
#
# and prints the table class / injected / counters / delta / control.
#
# Knobs (environment): MRC_INJECT_CLASSES (comma list, default all),
# MRC_INJECT_PPS (3000), MRC_INJECT_SECS (4), MRC_INJECT_XFER_SECS (8),
# MRC_INJECT_SHAPE (per-port tbf rate, 100mbit: slow enough that "not yet
# sent" PSNs stay unsent while forged packets are in flight).
. "$(dirname "$0")/lib.sh"
t_require python3 timeout

B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
B_INJ=$MRC_BUILD_DIR/selftests/fabric/mrc_inject
for c in "$B_PERF" "$B_INJ"; do
	[ -x "$c" ] || { echo "FAIL $T_NAME: $c is not built"; exit 1; }
done
PPS=${MRC_INJECT_PPS:-3000}
ISECS=${MRC_INJECT_SECS:-4}
XSECS=${MRC_INJECT_XFER_SECS:-8}
CTRL_SECS=${MRC_INJECT_CONTROL_SECS:-4}
SHAPE=${MRC_INJECT_SHAPE:-100mbit}
CLASSES=${MRC_INJECT_CLASSES:-}

t_up direct planes=4 "shape=$SHAPE"
NA=$(t_ns A)
NB=$(t_ns B)
NW=$(jq -r '.namespaces[] | select(.role == "wire") | .ns' "$ST")
DEV_A=$(jq -r '[.hosts.A.ports[].ifname] | join(",")' "$ST")
DEV_B=$(jq -r '[.hosts.B.ports[].ifname] | join(",")' "$ST")
W_A=$(jq -r '[.links | sort_by(.plane)[] | .wire.a] | join(",")' "$ST")
W_B=$(jq -r '[.links | sort_by(.plane)[] | .wire.b] | join(",")' "$ST")
PEER=$(t_port B 0 ipv4)
echo "fabric $R: A=$DEV_A B=$DEV_B wire to A=$W_A to B=$W_B shape=$SHAPE"

# xfer NAME MODE(write|imm) SECS INJECT(0|1): one verified transfer; logs and
# counters in $T_TMP/NAME-*. Every process is bounded by timeout.
PORT=18600
xfer() {
	local name=$1 mode=$2 secs=$3 inject=$4 imm=() spid cpid ipid=
	[ "$mode" = imm ] && imm=(-i)
	PORT=$((PORT + 1))
	local common=(-m 3072 "${imm[@]}" --slots 1024 --verify -j -p "$PORT" --no-mrcd)
	ip netns exec "$NB" timeout -s INT $((secs + 40)) "$B_PERF" server -d "$DEV_B" "${common[@]}" \
		--counters-json "$T_TMP/$name-server.json" >"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	ip netns exec "$NA" timeout -s INT $((secs + 40)) "$B_PERF" client "$PEER" -d "$DEV_A" "${common[@]}" \
		-D "$secs" --counters-json "$T_TMP/$name-client.json" >"$T_TMP/$name-client.log" 2>&1 &
	cpid=$!
	T_PIDS+=("$cpid")
	if [ "$inject" = 1 ]; then
		# The injector learns from the first second of traffic and stops
		# at least a second before the transfer does.
		sleep 1
		timeout -s INT $((ISECS + 20)) "$B_INJ" --netns "$NW" --to-a "$W_A" --to-b "$W_B" \
			--duration "$ISECS" --pps "$PPS" --learn-timeout 2 ${CLASSES:+--classes "$CLASSES"} ${MRC_INJECT_CUTS:+--cuts "$MRC_INJECT_CUTS"} \
			--out "$T_TMP/$name-inject.json" >/dev/null 2>"$T_TMP/$name-inject.log" &
		ipid=$!
		T_PIDS+=("$ipid")
	fi
	local crc src irc=0
	wait "$cpid"
	crc=$?
	# A transfer that ended early (a QP failed) ends the injection too: what
	# the injector reports was sent while both hosts were up.
	[ -n "$ipid" ] && kill -INT "$ipid" 2>/dev/null
	wait "$spid"
	src=$?
	if [ -n "$ipid" ]; then
		wait "$ipid"
		irc=$?
	fi
	echo "{\"name\":\"$name\",\"mode\":\"$mode\",\"inject\":$inject,\"client_rc\":$crc,\"server_rc\":$src,\"inject_rc\":$irc}" \
		>"$T_TMP/$name-run.json"
	echo "run $name ($mode, inject=$inject): client exit $crc, server exit $src${ipid:+, injector exit $irc}"
}

t0=$(date +%s)
xfer control-write write "$CTRL_SECS" 0
xfer control-imm imm "$CTRL_SECS" 0
xfer inject-write write "$XSECS" 1
xfer inject-imm imm "$XSECS" 1
echo "transfers took $(($(date +%s) - t0)) s"

if python3 "$T_DIR/inject_check.py" "$T_TMP"; then
	t_ok "adversarial injection: no QP error, data verified, every injected packet accounted for"
else
	t_fail "adversarial injection (the lines above name what failed)"
	for f in "$T_TMP"/*-client.log "$T_TMP"/*-server.log "$T_TMP"/*-inject.log; do
		[ -s "$f" ] || continue
		echo "--- $(basename "$f") (last lines)"
		tail -n 8 "$f"
	done
fi
t_done
