#!/usr/bin/env bash
# One mrc_perf transfer over a single plane shaped to 1 Gbit/s, beside two
# busy loops (one pinned per CPU, normal priority, 20 s at most, ended by
# pid); prints the client's goodput. The by-hand scheduling experiments of
# results-log.md, "2026-12-05 10:56-13:01", item 5.
#
#   bench/experiments/one_plane_busy.sh [-b BUILD] [-w WRAPPER] SCHED [pin]
#
# SCHED: mrc_perf --sched (nice, fifo, ...); pin: the server's engine thread
# on CPU 0, the client's on CPU 1 (mrc_perf --cpu); -w: a command the two
# mrc_perf run under (e.g. -w "nice -n -10"). Needs root. The fabric
# (fabric.sh, its own namespaces and 198.18.0.0/15 addresses) is removed on
# exit.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
WRAP=
while getopts "b:w:" o; do
	case $o in
	b) BUILD=$(readlink -f "$OPTARG") ;;
	w) WRAP=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
sched=${1:?usage: one_plane_busy.sh [-b BUILD] [-w WRAPPER] SCHED [pin]}
pin=${2:-}
F=$ROOT/selftests/fabric/fabric.sh
export MRC_BUILD_DIR=$BUILD
run=$("$F" up direct planes=1 shape=1gbit offload=on mtu=3500 | tail -1) || exit 1
out=$(mktemp -d /tmp/one-plane-busy.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	"$F" down "$run" >/dev/null 2>&1
	rm -rf "$out"
}
trap cleanup EXIT
"$F" show "$run" --json >"$out/state.json"
q() { jq -r "$1" "$out/state.json"; }
nsA=$(q .hosts.A.ns)
nsB=$(q .hosts.B.ns)
ipB=$(q '.hosts.B.ports[0].ipv4' | cut -d/ -f1)
P=$BUILD/user/tools/mrc_perf
es=() ec=()
[ "$pin" = pin ] && es=(--cpu 0) && ec=(--cpu 1)
# shellcheck disable=SC2086 # WRAP is a command line
ip netns exec "$nsB" $WRAP "$P" server -d "$(q '.hosts.B.ports[0].ifname')" -p 18600 --json --sched "$sched" \
	"${es[@]}" >"$out/server.log" 2>&1 &
pids+=($!)
sleep 0.5
for c in 0 1; do
	timeout 20 taskset -c $c bash -c 'while :; do :; done' &
	pids+=($!)
done
# shellcheck disable=SC2086
ip netns exec "$nsA" $WRAP "$P" client "$ipB" -d "$(q '.hosts.A.ports[0].ifname')" -p 18600 --json -D 4 \
	--sched "$sched" "${ec[@]}" >"$out/client.log" 2>&1
grep -o '"gbps":[0-9.]*' "$out/client.log" | tail -1
