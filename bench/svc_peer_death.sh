#!/usr/bin/env bash
# How long a peer takes to learn that a client died, today (no tombstones,
# Documentation/service.md section 5): on the 4-plane veth fabric with an
# mrc-serviced per host, an mrc_perf server on A (the receiver, through A's
# service) and an mrc_perf client on B writing to it (mrc_perf's defaults:
# ACK timeout 14 = 16.8 ms, retries 7 linear + 7 exponential). kill -9 of the
# receiver mid-transfer; prints the ms until the sender ends, and its error.
#
#   MRC_BUILD_DIR=$PWD/build MRC_SOURCE_DIR=$PWD bench/svc_peer_death.sh
#
# Needs root; builds nothing. The fabric's namespaces go in its trap.
: "${MRC_SOURCE_DIR:?set MRC_SOURCE_DIR (the source tree)}" "${MRC_BUILD_DIR:?set MRC_BUILD_DIR}"
. "$MRC_SOURCE_DIR/selftests/netns/svc/svc_lib.sh"
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
t_up direct planes=4
svc_start A || exit 1
svc_start B || exit 1
PEER=$(t_port A 0 ipv4)
PORT=$((21700 + RANDOM % 1000))
ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" "$B_PERF" server -d "$(ifs A)" -p "$PORT" --verify -j >"$T_TMP/v-server.log" 2>&1 &
VS=$!
T_PIDS+=("$VS")
svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" client "$PEER" -d "$(ifs B)" -p "$PORT" --verify -j -D 30 >"$T_TMP/p-client.log" 2>&1 &
PC=$!
T_PIDS+=("$PC")
for ((i = 0; i < 1000; i++)); do
	grep -q '"gbps":"\?[0-9]*\.[0-9]*[1-9]' "$T_TMP/p-client.log" 2>/dev/null && break
	sleep 0.01
done
kill -9 "$VS"
t0=$(date +%s%N)
for ((i = 0; i < 3000; i++)); do
	kill -0 "$PC" 2>/dev/null || break
	sleep 0.01
done
echo "ms from kill -9 of the receiver until the sender ended: $((($(date +%s%N) - t0) / 1000000))"
wait "$PC"; echo "sender exit $?"
grep -v '^{"t_s"' "$T_TMP/p-client.log" | head -3
svc_stop A; svc_stop B
t_done
