#!/usr/bin/env bash
# Many processes through one mrc-serviced per host (issue 23 item 2,
# Documentation/service.md M4): 8 mrc_perf clients on host A and 8 mrc_perf
# servers on host B, two namespaces, 4 planes, each pair with several QPs,
# half WRITE and half WRITE-with-immediate, every byte verified (--verify on
# both sides). Pairs 0-1 stop early (short runs), pairs 6-7 start late (once
# the first six transfer), so processes come and go while others run.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout jq
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
for b in "$B_PERF" "$SVCD"; do
	[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
done
t_up direct planes=4
svc_start A || exit 1
svc_start B || exit 1
PEER=$(t_port B 0 ipv4)
PORT=$((20700 + RANDOM % 1000))
N=8
QPS=3

declare -A SPID CPID
# pair I DURATION: server on B and client on A (background), QPS QPs,
# odd pairs with immediate.
pair() {
	local i=$1 d=$2 imm=() port=$((PORT + $1))
	((i % 2)) && imm=(-i)
	svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" server -d "$(ifs B)" -p "$port" --verify -j \
		-q "$QPS" -s 16384 -t 8 "${imm[@]}" >"$T_TMP/p$i-server.log" 2>&1 &
	SPID[$i]=$!
	T_PIDS+=("${SPID[$i]}")
	ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" \
		timeout -s INT 60 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" --verify -j -q "$QPS" \
		-s 16384 -t 8 -D "$d" "${imm[@]}" >"$T_TMP/p$i-client.log" 2>&1 &
	CPID[$i]=$!
	T_PIDS+=("${CPID[$i]}")
}
# transferring I: waits (bounded, 20 s) for pair I's first interval report
# with data moving.
transferring() {
	local i
	for ((i = 0; i < 2000; i++)); do
		grep -q '"gbps":"\?[0-9]*\.[0-9]*[1-9]' "$T_TMP/p$1-client.log" 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}
# verified I: both sides exited 0 and verified.
verified() {
	local i=$1 crc src cv sv msgs
	wait "${CPID[$i]}"
	crc=$?
	wait "${SPID[$i]}"
	src=$?
	cv=$(grep '"summary"' "$T_TMP/p$i-client.log" | jq -r '.summary.verify' 2>/dev/null)
	sv=$(grep '"summary"' "$T_TMP/p$i-server.log" | jq -r '.summary.verify' 2>/dev/null)
	msgs=$(grep '"summary"' "$T_TMP/p$i-client.log" | jq -r '.summary.msgs' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ] && [ "${msgs:-0}" -gt 0 ]; then
		t_ok "pair $i: $msgs messages verified"
	else
		t_fail "pair $i: client exit $crc (verify ${cv:-none}), server exit $src (verify ${sv:-none})"
		tail -n 5 "$T_TMP/p$i-client.log" "$T_TMP/p$i-server.log"
	fi
}

# Pairs 0-1 run 2 s, 2-5 run 8 s; 6-7 start once 0-5 transfer and run 3 s.
for ((i = 0; i < 6; i++)); do
	if ((i < 2)); then pair "$i" 2; else pair "$i" 8; fi
done
for ((i = 0; i < 6; i++)); do
	if transferring "$i"; then t_ok "pair $i transfers"; else t_fail "pair $i never transferred"; fi
done
for i in 6 7; do pair "$i" 3; done
# The early ones end while the others (and the late ones) run.
verified 0
verified 1
for i in 2 3 4 5 6 7; do
	t_check "pair $i still running when 0 and 1 ended" kill -0 "${CPID[$i]}"
done
for ((i = 2; i < N; i++)); do verified "$i"; done

# Every client left its service cleanly; nothing broken.
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
	t_eq "service $h: clients that left" "$(grep -c 'left (' "$T_TMP/svc.$h.log")" "$N"
	t_check "service $h: no broken client" grep -q "broken 0," "$T_TMP/svc.$h.log"
done
t_done
