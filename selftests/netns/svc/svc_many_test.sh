#!/usr/bin/env bash
# Many processes through one mrc-serviced per host (issue 23 item 2,
# Documentation/service.md M4): 8 mrc_perf clients on host A and 8 mrc_perf
# servers on host B, two namespaces, 4 planes, each pair with several QPs,
# half WRITE and half WRITE-with-immediate, every byte verified (--verify on
# both sides). Pairs 0-1 stop early (short runs), pairs 6-7 start late (once
# the first six transfer), so processes come and go while others run.
# While all 8 transfer, `mrcctl -j service clients` (the service's OBSERVE op)
# on each host lists each of the 8 processes with its 3 QPs and bytes > 0.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout jq pgrep
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl
svc_need "$B_PERF" "$SVCD" "$MRCCTL"
svc_fabric_up
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
	# ip netns exec and env exec: SPID is timeout's pid, mrc_perf its child.
	ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" \
		timeout -s INT 60 "$B_PERF" server -d "$(ifs B)" -p "$port" --verify -j \
		-q "$QPS" -s 16384 -t 8 "${imm[@]}" >"$T_TMP/p$i-server.log" 2>&1 &
	SPID[$i]=$!
	T_PIDS+=("${SPID[$i]}")
	# No wrapper: CPID is mrc_perf's own pid (ip netns exec and env exec it).
	ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" \
		"$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" --verify -j -q "$QPS" \
		-s 16384 -t 8 -D "$d" "${imm[@]}" >"$T_TMP/p$i-client.log" 2>&1 &
	CPID[$i]=$!
	T_PIDS+=("${CPID[$i]}")
}
# transferring I: waits (bounded, 20 s) for pair I's first interval report
# with data moving.
transferring() {
	local i
	for ((i = 0; i < 2000; i++)); do
		grep -q "$SVC_MOVING" "$T_TMP/p$1-client.log" 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}
# verified I: both sides exited 0 and verified.
declare -A CRC
# ended I: waits for pair I's client and keeps its exit status.
ended() {
	wait "${CPID[$1]}"
	CRC[$1]=$?
}
verified() {
	local i=$1 crc src cv sv msgs
	[ -n "${CRC[$i]:-}" ] || ended "$i"
	crc=${CRC[$i]}
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

# observed HOST PID DIR: HOST's snapshot ($T_TMP/obs.HOST.json) lists PID
# with 3 QPs and DIR bytes (tx_bytes or rx_bytes) > 0.
observed() {
	local h=$1 pid=$2 dir=$3 line
	line=$(jq -c --argjson p "${pid:-0}" '.clients[] | select(.pid == $p)' "$T_TMP/obs.$h.json")
	if [ -n "$line" ] && [ "$(jq ".qps == $QPS and .$dir > 0" <<<"$line")" = true ]; then
		t_ok "service $h lists pid $pid: $line"
	else
		t_fail "service $h: pid $pid not listed with $QPS QPs and $dir > 0: '$line'"
		cat "$T_TMP/obs.$h.json"
	fi
}

# Pairs 0-1 run 12 s, 2-5 run 22 s; 6-7 start once 0-5 transfer and run 8 s.
# The margins are for a loaded host, where 16 processes may take 6 s to
# reach the snapshot (pairs of 6 s had ended before it in one run, and a
# late pair of 5 s once).
for ((i = 0; i < 6; i++)); do
	if ((i < 2)); then pair "$i" 12; else pair "$i" 22; fi
done
for ((i = 0; i < 6; i++)); do
	if transferring "$i"; then t_ok "pair $i transfers"; else t_fail "pair $i never transferred"; fi
done
for i in 6 7; do pair "$i" 8; done
for i in 6 7; do
	if transferring "$i"; then t_ok "late pair $i transfers"; else t_fail "late pair $i never transferred"; fi
done
# All 8 run: each one's process on both hosts is listed by its service (on
# B, mrc_perf is the child of its timeout).
for h in A B; do svc_in "$h" "$MRCCTL" -j service clients >"$T_TMP/obs.$h.json"; done
t_eq "service A: clients observed" "$(jq .total "$T_TMP/obs.A.json")" "$N"
t_eq "service B: clients observed" "$(jq .total "$T_TMP/obs.B.json")" "$N"
# Liveness and B's pids first: the jq checks below take seconds on a loaded
# host, longer than a late pair may still run.
declare -A ALIVE BPID
for ((i = 0; i < N; i++)); do
	kill -0 "${CPID[$i]}" 2>/dev/null && ALIVE[$i]=1
	BPID[$i]=$(pgrep -P "${SPID[$i]}")
done
for ((i = 0; i < N; i++)); do
	t_check "pair $i runs after the snapshot" test -n "${ALIVE[$i]:-}"
	observed A "${CPID[$i]}" tx_bytes
	observed B "${BPID[$i]}" rx_bytes
done
# The early ones end while the others (and the late ones) run.
# (Their clients' exits; each server ends a little later, once it has
# verified and seen its client leave.)
ended 0
ended 1
for i in 2 3 4 5; do
	t_check "pair $i still running when 0 and 1 ended" kill -0 "${CPID[$i]}"
done
ended 6
ended 7
for i in 2 3 4 5; do
	t_check "pair $i still running when 6 and 7 ended" kill -0 "${CPID[$i]}"
done
for i in 0 1 6 7; do verified "$i"; done
for i in 2 3 4 5; do verified "$i"; done

# Every client left its service cleanly; nothing broken.
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
	t_eq "service $h: clients that left" "$(grep -c 'left (' "$T_TMP/svc.$h.log")" "$N"
	t_check "service $h: no broken client" grep -q "broken 0," "$T_TMP/svc.$h.log"
done
t_done
