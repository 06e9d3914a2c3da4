#!/usr/bin/env bash
# mrc_perf --verify, unmodified, through an mrc-serviced on each host (4
# planes, MRC_MODE=service): WRITE and WRITE-with-immediate, small and large
# messages, in-flight 1 to 64. Each run is bounded (-D 1 or a message count)
# and must end with both sides exiting 0 and both verifying every byte
# (mrc_perf's summary: verify ok). The services serve one client per run and
# side and count no broken client and no bad request. Then the same cases
# through services with wake-up coalescing (--coalesce-us 30: the engine
# thread's waits go through the service's client doorbells), whose metrics
# must show the waits.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
svc_need "$B_PERF" "$SVCD"
svc_fabric_up
PEER=$(t_port B 0 ipv4)

# name | options of both sides | client-only options
CASES=(
	"write-1B-t1|-s 1 -t 1|-D 1"
	"imm-4K-t8|-i -s 4096 -t 8|-D 1"
	"write-64K-default||-D 1"
	"imm-1M-t64|-i -s 1048576 -t 64|-D 1"
	"write-16M-t2|-s 16777216 -t 2|-n 4"
)
PORT=$((18700 + RANDOM % 1000))
N=0
# run_cases PREFIX: every case once, named PREFIX + its name.
run_cases() {
	local c name both client crc src spid cv msgs gbps sv
	for c in "${CASES[@]}"; do
		IFS='|' read -r name both client <<<"$c"
		name=$1$name
		PORT=$((PORT + 1))
		N=$((N + 1))
		# shellcheck disable=SC2086 # option lists
		svc_in B env MRC_MODE=service timeout -s INT 60 "$B_PERF" server -d "$(ifs B)" -p "$PORT" --verify -j \
			$both >"$T_TMP/$name-server.log" 2>&1 &
		spid=$!
		T_PIDS+=("$spid")
		# shellcheck disable=SC2086
		svc_in A env MRC_MODE=service timeout -s INT 60 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$PORT" --verify -j \
			$both $client >"$T_TMP/$name-client.log" 2>&1
		crc=$?
		wait "$spid"
		src=$?
		cv=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
		msgs=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.msgs' 2>/dev/null)
		gbps=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.gbps // empty' 2>/dev/null)
		sv=$(grep '"summary"' "$T_TMP/$name-server.log" | jq -r '.summary.verify' 2>/dev/null)
		if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ] && [ "${msgs:-0}" -gt 0 ]; then
			t_ok "$name: $msgs messages verified ${gbps:+($gbps Gbit/s)}"
		else
			t_fail "$name: client exit $crc (verify ${cv:-none}), server exit $src (verify ${sv:-none})"
			tail -n 5 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
		fi
	done
}
# stop_both: both services end cleanly, each served N clients, none broken.
stop_both() {
	local h
	for h in A B; do
		svc_stop "$h"
		t_eq "service $h: exit status" "$?" 0
		t_eq "service $h: clients" "$(grep -o 'clients served [0-9]*, broken [0-9]*, bad requests [0-9]*' "$T_TMP/svc.$h.log" | tail -n 1)" \
			"clients served $N, broken 0, bad requests 0"
	done
}
run_cases ""
stop_both
N=0
SVC_OPTS=(--coalesce-us 30 --metrics 127.0.0.1:0)
svc_start A || exit 1
svc_start B || exit 1
run_cases "coalesce-"
for h in A B; do
	svc_scrape "$h" "$T_TMP/metrics.$h.txt"
	waits=$(grep '^mrc_service_engine_waits_total{kind="coalesced"}' "$T_TMP/metrics.$h.txt" | awk '{print $2}')
	passes=$(grep '^mrc_service_engine_passes_total{by="engine_thread"}' "$T_TMP/metrics.$h.txt" | awk '{print $2}')
	t_check "service $h: the engine thread made coalescing waits (${waits:-none}) in its passes (${passes:-none})" \
		test "${waits:-0}" -gt 0 -a "${passes:-0}" -gt "${waits:-0}"
done
stop_both
t_done
