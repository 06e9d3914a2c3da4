#!/usr/bin/env bash
# Per-process limits of mrc-serviced (issue 23 item 7, Documentation/
# service.md section 0): each limit, set low on host A's service, refuses an
# unmodified mrc_perf with ENOMEM and a sentence naming the limit and its
# option; QPs, CQs, regions, registered bytes, clients per uid.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
for b in "$B_PERF" "$SVCD"; do
	[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
done
t_up direct planes=4
svc_start B || exit 1
PEER=$(t_port B 0 ipv4)
PORT=$((21700 + RANDOM % 1000))
n=0

# (Servers and the first client are started without a shell function in
# between, so that their pid is timeout's, which passes signals on.)
# limited NAME SVC_OPTION VALUE PERF_ARGS -- SENTENCE: A's service with the
# option; a client with PERF_ARGS (and a server on B) fails naming it.
limited() {
	local name=$1 opt=$2 val=$3 want=$4 port=$((PORT + n))
	shift 4
	n=$((n + 1))
	SVC_OPTS=("$opt" "$val")
	svc_start A || return
	ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" timeout -s INT 20 "$B_PERF" server -d "$(ifs B)" -p "$port" \
		"$@" >"$T_TMP/$name-server.log" 2>&1 &
	local spid=$!
	T_PIDS+=("$spid")
	svc_in A env MRC_MODE=service timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" \
		-D 1 "$@" >"$T_TMP/$name-client.log" 2>&1
	local rc=$?
	t_check "$name: client failed (exit $rc)" test "$rc" != 0 -a "$rc" != 124
	if grep -q "$want" "$T_TMP/$name-client.log"; then
		t_ok "$name: $(grep -o "$want.*" "$T_TMP/$name-client.log" | head -n 1)"
	else
		t_fail "$name: no '$want' in the client's error"
		tail -n 3 "$T_TMP/$name-client.log"
	fi
	kill -INT "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	svc_stop A
}
limited qps --max-qps 2 "service limit: 2 QPs per process" -q 3
limited cqs --max-cqs 0 "service limit: 0 CQs per process"
limited mrs --max-mrs 0 "service limit: 0 regions per process"
limited mrbytes --max-mr-mib 1 "service limit: 1048576 registered bytes per process (--max-mr-mib" -s 1048576 -t 4

# Clients per uid: while one client of uid 0 runs, a second is refused.
SVC_OPTS=(--max-clients-per-uid 1)
svc_start A || exit 1
port=$((PORT + n))
ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" timeout -s INT 20 "$B_PERF" server -d "$(ifs B)" -p "$port" \
	>"$T_TMP/uid-server.log" 2>&1 &
spid=$!
T_PIDS+=("$spid")
ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" \
	-D 5 -j >"$T_TMP/uid-first.log" 2>&1 &
fpid=$!
T_PIDS+=("$fpid")
for ((i = 0; i < 1000; i++)); do
	grep -q "$SVC_MOVING" "$T_TMP/uid-first.log" 2>/dev/null && break
	sleep 0.01
done
svc_in A env MRC_MODE=service timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$((port + 1))" \
	-D 1 >"$T_TMP/uid-second.log" 2>&1
rc=$?
t_check "uid: the first client ran meanwhile" kill -0 "$fpid"
t_check "uid: second client failed (exit $rc)" test "$rc" != 0 -a "$rc" != 124
want="service limit: 1 clients per uid (--max-clients-per-uid; uid 0)"
if grep -q "$want" "$T_TMP/uid-second.log"; then t_ok "uid: $want"; else
	t_fail "uid: no '$want'"
	tail -n 3 "$T_TMP/uid-second.log"
fi
wait "$fpid"
t_eq "uid: the first client completed" "$?" 0
wait "$spid"
svc_stop A
t_eq "service A: exit status" "$?" 0
svc_stop B
t_done
