#!/usr/bin/env bash
# Several clients of one mrc-serviced per host, and failures (Documentation/
# service.md, sections 5 and 8), with mrc_perf --verify, unmodified:
#  1. two mrc_perf pairs at once through the services, both verified;
#  2. kill -9 of one client mid-transfer: its service frees its QPs, CQs and
#     regions within 1 s (its log says so), the other pair completes verified;
#  3. kill -9 of host A's service mid-transfer: A's client does not hang, it
#     exits with an error naming the service within 5 s; a restarted service
#     serves a new verified pair.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
svc_need "$B_PERF" "$SVCD"
svc_fabric_up
PEER=$(t_port B 0 ipv4)
PORT=$((19700 + RANDOM % 1000))

# srv NAME PORT ARGS...: a server on B (background; pid in SPID[NAME]).
declare -A SPID CPID
srv() {
	local name=$1 port=$2
	shift 2
	svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" server -d "$(ifs B)" -p "$port" --verify -j \
		"$@" >"$T_TMP/$name-server.log" 2>&1 &
	SPID[$name]=$!
	T_PIDS+=("${SPID[$name]}")
}
# cli NAME PORT ARGS...: a client on A, background, no wrapper in between
# (its pid is mrc_perf's own: ip netns exec and env exec it).
cli() {
	local name=$1 port=$2
	shift 2
	ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" \
		"$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" --verify -j "$@" >"$T_TMP/$name-client.log" 2>&1 &
	CPID[$name]=$!
	T_PIDS+=("${CPID[$name]}")
}
# verified NAME: both sides exited 0 and verified.
verified() {
	local name=$1 crc src cv sv msgs
	wait "${CPID[$name]}"
	crc=$?
	wait "${SPID[$name]}"
	src=$?
	cv=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
	sv=$(grep '"summary"' "$T_TMP/$name-server.log" | jq -r '.summary.verify' 2>/dev/null)
	msgs=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.msgs' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ] && [ "${msgs:-0}" -gt 0 ]; then
		t_ok "$name: $msgs messages verified"
	else
		t_fail "$name: client exit $crc (verify ${cv:-none}), server exit $src (verify ${sv:-none})"
		tail -n 5 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
	fi
}
# transferring NAME: waits (bounded, 10 s) for the client's first interval
# report with data moving.
transferring() {
	local i
	for ((i = 0; i < 1000; i++)); do
		grep -q "$SVC_MOVING" "$T_TMP/$1-client.log" 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}

# 1. Two pairs at once.
P1=$((PORT + 1)) P2=$((PORT + 2))
srv one "$P1" -i
srv two "$P2"
cli one "$P1" -i -D 2
cli two "$P2" -D 2
verified one
verified two

# 2. kill -9 of a client mid-transfer, the other continues.
P3=$((PORT + 3)) P4=$((PORT + 4))
srv keep "$P3" -i
srv victim "$P4"
cli keep "$P3" -i -D 4
cli victim "$P4" -D 20
if transferring victim; then t_ok "victim transfers"; else t_fail "victim never transferred"; fi
VPID=${CPID[victim]}
kill -9 "$VPID"
t0=$(date +%s%N)
left=""
for ((i = 0; i < 500; i++)); do
	left=$(grep "(pid $VPID," "$T_TMP/svc.A.log" | grep -o 'left (.*): freed [0-9]* QPs, [0-9]* CQs, [0-9]* regions')
	[ -n "$left" ] && break
	sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
match_ok=0
[[ $left =~ freed\ [1-9][0-9]*\ QPs,\ [1-9][0-9]*\ CQs,\ [1-9][0-9]*\ regions ]] && match_ok=1
t_eq "service A freed the killed client's QPs, CQs and regions" "$match_ok" 1
t_range "ms until the service freed them" "$ms" 0 1000
wait "$VPID" 2>/dev/null
verified keep
kill -INT "${SPID[victim]}" 2>/dev/null
wait "${SPID[victim]}" 2>/dev/null

# 3. kill -9 of the service on A mid-transfer.
P5=$((PORT + 5)) P6=$((PORT + 6))
srv orphan "$P5"
cli orphan "$P5" -D 20
if transferring orphan; then t_ok "orphan transfers"; else t_fail "orphan never transferred"; fi
kill -9 "${SVC_PID[A]}"
wait "${SVC_PID[A]}" 2>/dev/null
t0=$(date +%s%N)
for ((i = 0; i < 500; i++)); do
	kill -0 "${CPID[orphan]}" 2>/dev/null || break
	sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
if kill -0 "${CPID[orphan]}" 2>/dev/null; then
	t_fail "A's client still runs 5 s after its service died"
	kill -9 "${CPID[orphan]}"
fi
wait "${CPID[orphan]}"
crc=$?
t_range "ms until A's client ended" "$ms" 0 5000
t_check "A's client failed (exit $crc)" test "$crc" != 0
t_check "A's client ends on a flush or names the dead service" grep -Eq "work request flushed|the mrc service \(pid [0-9]*\) is gone" "$T_TMP/orphan-client.log"
kill -INT "${SPID[orphan]}" 2>/dev/null
wait "${SPID[orphan]}" 2>/dev/null
svc_start A || exit 1
srv again "$P6"
cli again "$P6" -D 1
verified again

for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
done
t_check "no broken client on B" grep -q "broken 0," "$T_TMP/svc.B.log"
t_done
