#!/usr/bin/env bash
# How long a peer takes to learn that a client died (Documentation/service.md
# section 5, "The peers"): on the 4-plane veth fabric with an mrc-serviced
# per host, an mrc_perf server on A (the receiver, through A's service) and
# an mrc_perf client on B writing to it (mrc_perf's defaults: ACK timeout
# 14 = 16.8 ms, retries 7 linear + 7 exponential). kill -9 of the receiver
# mid-transfer; prints the ms until the sender ends, and its error. Each
# round runs A's service once without tombstones (--tomb-linger-ms 0: the
# dead client's QPs are destroyed at once, the sender fails by retry
# exhaustion) and once with them (the default, 5000 ms: the dead client's
# QP refuses the sender's requests), interleaved; then the medians.
#
#   MRC_BUILD_DIR=$PWD/build MRC_SOURCE_DIR=$PWD bench/svc_peer_death.sh [ROUNDS]
#
# Needs root; builds nothing. The fabric's namespaces go in its trap.
: "${MRC_SOURCE_DIR:?set MRC_SOURCE_DIR (the source tree)}" "${MRC_BUILD_DIR:?set MRC_BUILD_DIR}"
. "$MRC_SOURCE_DIR/selftests/netns/svc/svc_lib.sh"
ROUNDS=${1:-3}
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
t_up direct planes=4
svc_start B || exit 1
PEER=$(t_port A 0 ipv4)
PORT=$((21700 + RANDOM % 1000))
declare -A MS=([before]="" [after]="")

one() { # MODE LINGER: one kill -9 with A's service at --tomb-linger-ms LINGER
	local mode=$1 linger=$2 port=$((PORT++)) vs pc t0 i ms
	SVC_OPTS=(--tomb-linger-ms "$linger")
	svc_start A || exit 1
	ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" "$B_PERF" server -d "$(ifs A)" -p "$port" --verify -j >"$T_TMP/v-server.log" 2>&1 &
	vs=$!
	T_PIDS+=("$vs")
	for ((i = 0; i < 500; i++)); do # the server listens before the client connects
		[ -n "$(ip netns exec "$(t_ns A)" ss -ltnH "sport = :$port" 2>/dev/null)" ] && break
		sleep 0.01
	done
	rm -f "$T_TMP/p-client.log" # no grep below may find the last round's lines
	svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" client "$PEER" -d "$(ifs B)" -p "$port" --verify -j -D 30 >"$T_TMP/p-client.log" 2>&1 &
	pc=$!
	T_PIDS+=("$pc")
	for ((i = 0; i < 1000; i++)); do
		grep -q "$SVC_MOVING" "$T_TMP/p-client.log" 2>/dev/null && break
		sleep 0.01
	done
	if ! grep -q "$SVC_MOVING" "$T_TMP/p-client.log"; then
		echo "$mode: no transfer, round left out: $(grep -v '^{"t_s"' "$T_TMP/p-client.log" | tail -1)"
		kill -9 "$vs" "$pc" 2>/dev/null
		wait "$pc"
		svc_stop A
		return
	fi
	kill -9 "$vs"
	t0=$(date +%s%N)
	for ((i = 0; i < 3000; i++)); do
		kill -0 "$pc" 2>/dev/null || break
		sleep 0.005
	done
	ms=$((($(date +%s%N) - t0) / 1000000))
	wait "$pc"
	echo "$mode (--tomb-linger-ms $linger): $ms ms from kill -9 of the receiver until the sender ended (exit $?): $(grep -v '^{"t_s"' "$T_TMP/p-client.log" | grep -m1 -i error)"
	MS[$mode]+="$ms "
	[ -n "${BENCH_KEEP:-}" ] && cp "$T_TMP/p-client.log" "$T_TMP/v-server.log" "$T_TMP/svc.A.log" "$BENCH_KEEP/"
	svc_stop A
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for ((r = 0; r < ROUNDS; r++)); do
	[ -z "${ONLY_AFTER:-}" ] && one before 0
	one after 5000
done
for m in before after; do
	echo "median $m: $(echo "${MS[$m]}" | median) ms (runs: ${MS[$m]})"
done
svc_stop B
t_done
