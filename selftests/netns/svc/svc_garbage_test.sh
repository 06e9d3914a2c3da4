#!/usr/bin/env bash
# Isolation first (svc_garbage: a second client naming the first's QP handle
# and lkey gets EINVAL, as for nonexistent ones; the first's objects stay).
# Then a client that sends mrc-serviced garbage (svc_garbage: random and malformed
# control messages, wrong descriptors, foreign handles, random bytes over its
# whole shared area, published garbage work requests and ready entries,
# doorbell floods) for 5 s, beside an honest mrc_perf --verify pair through
# the same services. The honest pair must verify, the service must stay up,
# serve a new verified pair afterwards, count the garbage (bad requests,
# broken clients, bad work requests) and exit 0 on SIGTERM. Then a client
# that closes its end of the doorbell and stays: the service must not spin.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
G=$MRC_BUILD_DIR/selftests/netns/svc/svc_garbage
svc_need "$B_PERF" "$SVCD" "$G"
svc_fabric_up
PEER=$(t_port B 0 ipv4)
PORT=$((22700 + RANDOM % 1000))

pair() { # NAME SECONDS: a verified pair through the services
	local name=$1 secs=$2 spid crc src cv sv msgs
	PORT=$((PORT + 1))
	svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" server -d "$(ifs B)" -p "$PORT" --verify -j -i \
		>"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	svc_in A env MRC_MODE=service timeout -s INT 60 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$PORT" --verify -j -i \
		-D "$secs" >"$T_TMP/$name-client.log" 2>&1
	crc=$?
	wait "$spid"
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

SEED=${SVC_GARBAGE_SEED:-$RANDOM}
echo "garbage seed $SEED"
svc_in A timeout 30 "$G" "$T_TMP/A.sock" "$(ifs A)" 5 "$SEED" >"$T_TMP/garbage.log" 2>&1 &
gpid=$!
T_PIDS+=("$gpid")
pair honest 7
wait "$gpid"
t_eq "the garbage client ran to its end (isolation held)" "$?" 0
cat "$T_TMP/garbage.log"
t_eq "isolation checks" "$(grep -c '^isolation: .*(want' "$T_TMP/garbage.log")" 6
t_check "service A still runs" kill -0 "${SVC_PID[A]}"
pair after 1

# A client that closes its end of the doorbell and stays connected: the
# service stops watching that doorbell (a closed doorbell, counted) instead
# of waking on its end of file for ever. Its CPU over 1 s of that client's
# life, with no other client, stays under 0.3 s.
svc_ticks() { awk '{ print $14 + $15 }' "/proc/${SVC_PID[A]}/stat"; }
svc_in A timeout 30 "$G" "$T_TMP/A.sock" "$(ifs A)" shut 3 >"$T_TMP/shut.log" 2>&1 &
shpid=$!
T_PIDS+=("$shpid")
svc_wait_log "$shpid" "$T_TMP/shut.log" '^shut'
t_check "a client closed its end of the doorbell" grep -q '^shut' "$T_TMP/shut.log"
tk0=$(svc_ticks)
sleep 1 # the measurement window, not a wait for a state
tk1=$(svc_ticks)
t_range "service A's CPU in 1 s beside it (ticks of $(getconf CLK_TCK) per s)" "$((tk1 - tk0))" 0 \
	"$(($(getconf CLK_TCK) * 3 / 10))"
t_check "service A still runs" kill -0 "${SVC_PID[A]}"
wait "$shpid"
t_eq "the doorbell-closing client ended by itself" "$?" 0
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
done
tail -n 1 "$T_TMP/svc.A.log"
bad=$(grep -o 'bad requests [0-9]*' "$T_TMP/svc.A.log" | grep -o '[0-9]*$')
broken=$(grep -o 'broken [0-9]*' "$T_TMP/svc.A.log" | grep -o '[0-9]*$')
wqe=$(grep -o 'bad work requests [0-9]*' "$T_TMP/svc.A.log" | grep -o '[0-9]*$')
t_range "service A counted bad requests" "${bad:-0}" 100 1e12
t_range "service A counted broken clients" "${broken:-0}" 1 1e12
t_range "service A counted bad work requests" "${wqe:-0}" 1 1e12
closed=$(grep -o 'closed doorbells [0-9]*' "$T_TMP/svc.A.log" | grep -o '[0-9]*$')
t_range "service A counted closed doorbells" "${closed:-0}" 1 1e12
t_done
