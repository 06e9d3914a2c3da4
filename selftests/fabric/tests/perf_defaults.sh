#!/usr/bin/env bash
# mrc_perf's defaults must not fail (issue 22): a bounded matrix of message
# sizes (1 B .. 64 MiB), RDMA WRITE and WRITE-with-immediate, in-flight
# depths 1 .. 64, every run with --verify and otherwise default settings, on
# the fabric's default direct topology (4 planes). Each run is short (-D 1 or
# a message count) and must end with both sides exiting 0 and the data
# verified byte for byte (server: no bad, overwritten or missing immediate).
#
# Knobs (environment): MRC_PERF (the mrc_perf binary; default the build's),
# MRC_PERF_CASES (a space-separated subset of the case names below),
# MRC_PERF_SECS (length of the default-setting WriteIMM runs, 1),
# MRC_PERF_SERVER_WRAP (a command the server runs under, e.g. "taskset -c 0"
# to share a CPU with a load and make its thread fall behind), MRC_PERF_SHOW
# (print the server's summary of passing runs too).
. "$(dirname "$0")/lib.sh"
t_require timeout

B_PERF=${MRC_PERF:-$MRC_BUILD_DIR/user/tools/mrc_perf}
[ -x "$B_PERF" ] || { echo "FAIL $T_NAME: $B_PERF is not built"; exit 1; }

t_up direct planes=4
NA=$(t_ns A)
NB=$(t_ns B)
DEV_A=$(jq -r '[.hosts.A.ports[].ifname] | join(",")' "$ST")
DEV_B=$(jq -r '[.hosts.B.ports[].ifname] | join(",")' "$ST")
PEER=$(t_port B 0 ipv4)

# name | options of both sides (besides -d, -p, --verify, -j, --no-mrcd) | client-only options
CASES=(
	"write-1B-t1|-s 1 -t 1|-D 1"
	"imm-1B-t64|-i -s 1 -t 64|-D 1"
	"write-4K-t8|-s 4096 -t 8|-D 1"
	"imm-4K-default|-i -s 4096|-D 1"
	"imm-10001B-default|-i -s 10001|-D ${MRC_PERF_SECS:-1}"
	"imm-64K-default|-i|-D ${MRC_PERF_SECS:-1}"
	"write-64K-default||-D 1"
	"imm-1M-t64|-i -s 1048576 -t 64|-D 1"
	"write-64M-default|-s 67108864|-n 3"
	"imm-64M-t1|-i -s 67108864 -t 1|-n 3"
)

PORT=18700
run_case() { # NAME BOTH CLIENT
	local name=$1 both=$2 client=$3 spid cpid crc src
	PORT=$((PORT + 1))
	# shellcheck disable=SC2086 # option lists
	ip netns exec "$NB" ${MRC_PERF_SERVER_WRAP:-} timeout -s INT 60 "$B_PERF" server -d "$DEV_B" -p "$PORT" --no-mrcd --verify -j \
		$both >"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	# shellcheck disable=SC2086
	ip netns exec "$NA" timeout -s INT 60 "$B_PERF" client "$PEER" -d "$DEV_A" -p "$PORT" --no-mrcd --verify -j \
		$both $client >"$T_TMP/$name-client.log" 2>&1 &
	cpid=$!
	T_PIDS+=("$cpid")
	wait "$cpid"
	crc=$?
	wait "$spid"
	src=$?
	local cv sv msgs
	cv=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
	msgs=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.msgs' 2>/dev/null)
	sv=$(grep '"summary"' "$T_TMP/$name-server.log" | jq -r '.summary.verify' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ] && [ "$sv" = ok ] && [ "${msgs:-0}" -gt 0 ]; then
		t_ok "$name: $msgs messages verified"
		[ -n "${MRC_PERF_SHOW:-}" ] && grep -h summary "$T_TMP/$name-server.log"
	else
		t_fail "$name: client exit $crc (verify ${cv:-none}), server exit $src (verify ${sv:-none})"
		tail -n 5 "$T_TMP/$name-client.log" "$T_TMP/$name-server.log"
	fi
}

t0=$(date +%s)
for c in "${CASES[@]}"; do
	IFS='|' read -r name both client <<<"$c"
	if [ -n "${MRC_PERF_CASES:-}" ] && [[ " $MRC_PERF_CASES " != *" $name "* ]]; then continue; fi
	run_case "$name" "$both" "$client"
done
echo "runs took $(($(date +%s) - t0)) s"
t_done
