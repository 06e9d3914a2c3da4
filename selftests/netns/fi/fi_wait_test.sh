#!/usr/bin/env bash
# The wait objects of the provider's completion queues (Documentation/
# libfabric.md, "Wait objects"), driven by our program fi_wait_check (public
# libfabric API only, FI_EP_MSG) between two hosts of a direct 4-plane veth
# fabric, once with each progress mode (FI_MRC_PROGRESS=thread: libmrc's
# engine thread; app: the application's calls, the engine thread standing
# in while it sleeps):
#   - fi_cq_sread blocks until a message the peer sends 300 ms later;
#   - fi_trywait, then poll(2) on the FI_GETWAIT fd, until the same;
#   - fi_trywait and poll(2) in one thread, while another thread posts the
#     receive that a message already in the ring completes at once: only the
#     provider's write of the CQ's eventfd can wake the poll;
#   - spinning on fi_cq_read until a message 300 ms away, with
#     FI_MRC_YIELD_US=100000: no sched_yield in A's reads within 100 ms of the
#     first empty one, some after; after the completion the count starts over
#     (fi_wait_check counts the provider's calls with its own sched_yield);
#   - a burst: A posts 300 receives of 64 KiB at once, B sends 300 messages of
#     64 KiB (48 in flight): each completes its own receive in order, every
#     byte checked; they go straight into A's advertised receives ("Direct
#     messages"), which A advertises at most 64 ahead: both ends count more
#     than 64 direct messages (the window moved on), no arrival refused
#     (with no window A advertised all 300 and B's bound of 256 refused the
#     rest: checked to fail so).
# Every message's data is checked; a wait that reaches its bound (10 s, 5 s
# for the last) is a lost wake-up and fails the run.
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require
PROV_DIR=$MRC_BUILD_DIR/lib/libfabric
CHECK=$MRC_BUILD_DIR/selftests/netns/fi/fi_wait_check
for f in "$PROV_DIR/libmrc-fi.so" "$CHECK"; do
	[ -e "$f" ] || { echo "FAIL $T_NAME: $f is not built"; exit 1; }
done

ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
on() { # HOST PROGRESS CMD...
	local h=$1 p=$2
	shift 2
	ip netns exec "$(t_ns "$h")" env FI_PROVIDER_PATH="$PROV_DIR" FI_MRC_IFACES="$(ifs "$h")" \
		FI_MRC_PROGRESS="$p" FI_MRC_YIELD_US=$YIELD_US FI_LOG_LEVEL=info FI_LOG_PROV=mrc "$@"
}
YIELD_US=100000

for mode in thread app; do
	# a fabric per mode: a run that failed leaves nothing to the next
	t_up direct planes=4
	on B "$mode" timeout 90 "$CHECK" >"$T_TMP/$mode.srv" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	for ((i = 0; i < 1000; i++)); do
		grep -q '^listening' "$T_TMP/$mode.srv" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.01
	done
	t_check "$mode: the server listens" grep -q '^listening' "$T_TMP/$mode.srv"
	on A "$mode" timeout 90 "$CHECK" -y $YIELD_US -b "$(t_port B 0 ipv4)" >"$T_TMP/$mode.cli" 2>&1
	crc=$?
	[ "$crc" = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	t_eq "$mode: waiter (A) exit status" "$crc" 0
	t_eq "$mode: sender (B) exit status" "$src" 0
	for w in sread trywait thread yield; do
		t_check "$mode: $w data checked" grep -q "^ok   A: $w: the message's data" "$T_TMP/$mode.cli"
	done
	t_check "$mode: every check of A passed" grep -qE '^fi_wait_check: A: [0-9]+ checks passed' "$T_TMP/$mode.cli"
	t_check "$mode: yield: none within the threshold" grep -q '^ok   A: yield: no yield within the threshold' "$T_TMP/$mode.cli"
	t_check "$mode: yield: past it" grep -q '^ok   A: yield: empty reads past the threshold yield' "$T_TMP/$mode.cli"
	t_check "$mode: yield: a completion starts over" grep -q '^ok   A: yield: a completion starts the count over' "$T_TMP/$mode.cli"
	t_check "$mode: burst: each message in its own receive" grep -q '^ok   A: burst: 300 messages, each completing' "$T_TMP/$mode.cli"
	t_check "$mode: burst: every byte" grep -q '^ok   A: burst: every byte' "$T_TMP/$mode.cli"
	sent=$(sed -n 's/.*direct messages sent \([0-9]*\),.*/\1/p' "$T_TMP/$mode.srv" | head -n 1)
	recvd=$(sed -n 's/.*direct messages sent [0-9]*, received \([0-9]*\);.*/\1/p' "$T_TMP/$mode.cli" | head -n 1)
	t_range "$mode: burst: messages B sent direct" "${sent:-0}" 65 300
	t_range "$mode: burst: messages A received direct" "${recvd:-0}" 65 300
	for side in cli srv; do
		t_check "$mode: no arrival refused ($side)" bash -c "! grep -q 'arrival(s) refused' '$T_TMP/$mode.$side'"
	done
	grep -E '^ +(sread|trywait|thread|yield):' "$T_TMP/$mode.cli" | sed "s/^ */$mode: /"
	if [ "$T_FAILS" != 0 ]; then tail -n 30 "$T_TMP/$mode".*; fi
done
t_done
