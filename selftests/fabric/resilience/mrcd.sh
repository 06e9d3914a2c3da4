#!/usr/bin/env bash
# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#
# mrcd on fabric hosts, for the resilience suite (10-mrcd-restart.scn):
#
#   mrcd.sh start RUN NODE...   a bpffs per host under the run's state
#                               directory (mounted once, from the calling
#                               mount namespace), then mrcd in the host's
#                               namespace: one plane per port, the other
#                               hosts' addresses on that plane as probe peers;
#                               waits until mrcctl gets an answer
#   mrcd.sh kill RUN NODE...    kill -9 (mrcd leaves XDP attached, maps pinned)
#   mrcd.sh stop RUN NODE...    kill what runs, unmount the bpffs
#   mrcd.sh status RUN NODE...  one JSON line per node: mrcd's pid, restarts,
#                               the XDP program on the host's ports, the QPs
#                               mrcd sees reported by applications
#   mrcd.sh pindir RUN NODE     the pin directory mrc_perf --pin-dir takes
#   mrcd.sh socket RUN NODE     the control socket (mrcctl -s)
#
# Files: /run/mrc-fabric/RUN/mrcd-NODE/{bpf/,mrcd.sock,mrcd.pid,mrcd.log}.
# Needs MRC_BUILD_DIR (user/mrcd/mrcd, user/tools/mrcctl) and root.
set -u
: "${MRC_BUILD_DIR:?MRC_BUILD_DIR must name the build directory}"
FABRIC_ROOT=${FABRIC_ROOT:-/run/mrc-fabric}
MRCD=$MRC_BUILD_DIR/user/mrcd/mrcd
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl

die() { echo "mrcd.sh: $*" >&2; exit 1; }

cmd=${1:?usage: mrcd.sh start|kill|stop|status|pindir|socket RUN NODE...}
run=${2:?missing RUN}
shift 2
[[ $run =~ ^[a-z][a-z0-9]{1,5}$ ]] || die "bad run id '$run'"
st=$FABRIC_ROOT/$run/state.json
[ -f "$st" ] || die "no fabric run $run ($st)"

dir_of() { echo "$FABRIC_ROOT/$run/mrcd-$1"; }

# A process that has not exited (a zombie has).
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# The mrcd process of a node: the pid file, if it still names a live mrcd.
pid_of() {
	local p
	p=$(cat "$(dir_of "$1")/mrcd.pid" 2>/dev/null) || return 1
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mrcd ] && alive "$p" && echo "$p"
}

start() {
	local node=$1 d ns args=() p ifn peers a i
	d=$(dir_of "$node")
	ns=$(jq -r --arg n "$node" '.hosts[$n].ns // empty' "$st")
	[ -n "$ns" ] || die "no host $node in run $run"
	if [ ! -x "$MRCD" ] || [ ! -x "$MRCCTL" ]; then die "mrcd/mrcctl not built in $MRC_BUILD_DIR"; fi
	pid_of "$node" >/dev/null && die "mrcd already runs on $node"
	mkdir -p "$d/bpf"
	mountpoint -q "$d/bpf" || mount -t bpf bpf "$d/bpf" || die "cannot mount a bpffs on $d/bpf"
	for p in $(jq -r --arg n "$node" '.hosts[$n].ports[].plane' "$st"); do
		ifn=$(jq -r --arg n "$node" --argjson p "$p" '.hosts[$n].ports[$p].ifname' "$st")
		args+=(--plane "$ifn:$((p + 1))")
		peers=$(jq -r --arg n "$node" --argjson p "$p" \
			'.hosts | to_entries[] | select(.key != $n) | .value.ports[$p].ipv4' "$st")
		for a in $peers; do args+=(--peer "$ifn=$a"); done
	done
	rm -f "$d/mrcd.sock"
	# Detached (own session, no inherited descriptors): callers may be
	# waiting for their output to close.
	setsid ip netns exec "$ns" "$MRCD" "${args[@]}" --pin-dir "$d/bpf/mrc" --socket "$d/mrcd.sock" \
		--metrics "" --log-level info </dev/null >>"$d/mrcd.log" 2>&1 &
	local pid=$!
	echo "$pid" >"$d/mrcd.pid"
	for i in $(seq 1 100); do
		"$MRCCTL" -s "$d/mrcd.sock" -j dev show >/dev/null 2>&1 && return 0
		alive "$pid" || die "mrcd on $node exited: $(tail -n 5 "$d/mrcd.log")"
		sleep 0.05
	done
	die "mrcd on $node did not answer within 5 s"
}

kill9() {
	local p
	p=$(pid_of "$1") || die "no mrcd runs on $1"
	kill -KILL "$p"
	# bounded wait until it is gone
	for _ in $(seq 1 100); do
		alive "$p" || return 0
		sleep 0.01
	done
	die "mrcd $p on $1 did not exit"
}

stop() {
	local d p
	d=$(dir_of "$1")
	if p=$(pid_of "$1"); then
		kill -TERM "$p"
		for _ in $(seq 1 100); do alive "$p" || break; sleep 0.02; done
		alive "$p" && kill -KILL "$p"
	fi
	mountpoint -q "$d/bpf" && umount "$d/bpf"
	rm -f "$d/mrcd.pid"
	return 0
}

status() {
	local node=$1 d ns pid dev qps xdp
	d=$(dir_of "$node")
	ns=$(jq -r --arg n "$node" '.hosts[$n].ns // empty' "$st")
	pid=$(pid_of "$node") || pid=0
	dev=$("$MRCCTL" -s "$d/mrcd.sock" -j dev show 2>/dev/null) || dev=null
	qps=$("$MRCCTL" -s "$d/mrcd.sock" -j qp show 2>/dev/null) || qps=null
	xdp=$(for i in $(jq -r --arg n "$node" '.hosts[$n].ports[].ifname' "$st"); do
		ip -n "$ns" -j link show dev "$i" | jq '.[0].xdp.prog.id // 0'
	done | jq -sc .)
	jq -nc --arg node "$node" --argjson pid "$pid" --argjson dev "$dev" --argjson qps "$qps" --argjson xdp "$xdp" \
		'{node: $node, pid: $pid, restarts: ($dev.restarts // null), xdp_prog_ids: $xdp,
		  qps_reported: (if $qps == null then null elif ($qps | type) == "array" then ($qps | length)
		                 else ($qps.qps // [] | length) end)}'
}

for node in "$@"; do
	case "$cmd" in
	start) start "$node" ;;
	kill) kill9 "$node" ;;
	stop) stop "$node" ;;
	status) status "$node" ;;
	pindir) echo "$(dir_of "$node")/bpf/mrc" ;;
	socket) echo "$(dir_of "$node")/mrcd.sock" ;;
	*) die "unknown command '$cmd'" ;;
	esac
done
