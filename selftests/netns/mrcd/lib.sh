# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
# Two hosts for mrcd tests: namespaces A and B joined by four veth planes
# (ports 1..4; 198.18.P.1/24 + fd00:0:P::1/64 on A, .2 / ::2 on B), a bpffs
# per host under a private directory, mrcd started in each. Names carry a
# per-run suffix; everything is removed by the EXIT trap.
set -u

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; [ -n "${T:-}" ] && { echo "--- mrcd A log"; tail -n 40 "$T/a.log" 2>/dev/null; echo "--- mrcd B log"; tail -n 40 "$T/b.log" 2>/dev/null; } >&2; exit 1; }
note() { echo "# $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, XDP, bpffs)"
: "${MRC_BUILD_DIR:?set MRC_BUILD_DIR to the build directory}"
MRCD=$MRC_BUILD_DIR/user/mrcd/mrcd
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl
[ -x "$MRCD" ] && [ -x "$MRCCTL" ] || skip "mrcd/mrcctl not built in $MRC_BUILD_DIR"
command -v jq >/dev/null || skip "jq is not installed"
command -v bpftool >/dev/null || skip "bpftool is not installed"

RUN=$$$RANDOM
NSA=mrcdA$RUN
NSB=mrcdB$RUN
T=$(mktemp -d /tmp/mrcd-netns.XXXXXX)
PIDA=
PIDB=
PIDS=  # other processes a case started (mrc_perf), killed by pid on exit

cleanup() {
	for p in $PIDA $PIDB $PIDS; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	for h in a b; do umount "$T/bpf$h" 2>/dev/null; done
	ip netns del "$NSA" 2>/dev/null
	ip netns del "$NSB" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

inA() { ip netns exec "$NSA" "$@"; }
inB() { ip netns exec "$NSB" "$@"; }
ctlA() { "$MRCCTL" -s "$T/a.sock" "$@"; }
ctlB() { "$MRCCTL" -s "$T/b.sock" "$@"; }

setup_hosts() {
	ip netns add "$NSA" || skip "cannot create network namespaces"
	ip netns add "$NSB"
	inA ip link set lo up
	inB ip link set lo up
	for p in 1 2 3 4; do
		ip link add "ma$p" netns "$NSA" type veth peer name "mb$p" netns "$NSB" || skip "veth unavailable"
		inA ip addr add "198.18.$p.1/24" dev "ma$p"
		inB ip addr add "198.18.$p.2/24" dev "mb$p"
		inA ip -6 addr add "fd00:0:$p::1/64" dev "ma$p" nodad
		inB ip -6 addr add "fd00:0:$p::2/64" dev "mb$p" nodad
		inA ip link set "ma$p" up
		inB ip link set "mb$p" up
	done
	for h in a b; do
		mkdir -p "$T/bpf$h"
		mount -t bpf bpf "$T/bpf$h" || skip "cannot mount a bpffs"
	done
}

# start_mrcd a|b [extra mrcd args]
start_mrcd() {
	local h=$1
	shift
	local ns peer_last args=()
	if [ "$h" = a ]; then ns=$NSA; peer_last=2; else ns=$NSB; peer_last=1; fi
	for p in 1 2 3 4; do
		args+=(--plane "m$h$p:$p" --peer "m$h$p=198.18.$p.$peer_last")
	done
	ip netns exec "$ns" "$MRCD" "${args[@]}" --pin-dir "$T/bpf$h/mrc" --socket "$T/$h.sock" \
		--metrics 127.0.0.1:9477 --log-level debug "$@" >>"$T/$h.log" 2>&1 &
	if [ "$h" = a ]; then PIDA=$!; else PIDB=$!; fi
	local i
	for i in $(seq 1 100); do
		"$MRCCTL" -s "$T/$h.sock" -j dev show >/dev/null 2>&1 && return 0
		kill -0 "$(pid_of "$h")" 2>/dev/null || fail "mrcd $h exited: $(tail -n 5 "$T/$h.log")"
		sleep 0.1
	done
	fail "mrcd $h did not come up"
}

pid_of() { if [ "$1" = a ]; then echo "$PIDA"; else echo "$PIDB"; fi; }

stop_mrcd() {
	local h=$1 sig=${2:-TERM} pid
	pid=$(pid_of "$h")
	kill -"$sig" "$pid"
	wait "$pid" 2>/dev/null
	local rc=$?
	if [ "$h" = a ]; then PIDA=; else PIDB=; fi
	return $rc
}

# JSON checks: jqa FILTER JSON-TEXT -> fails the test unless FILTER is true
expect() {
	local filter=$1 json=$2 what=${3:-$1}
	echo "$json" | jq -e "$filter" >/dev/null 2>&1 || fail "$what: $(echo "$json" | head -c 600)"
}

# HTTP GET of /metrics inside a namespace, without curl.
scrape() {
	ip netns exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/9477 && printf "GET /metrics HTTP/1.1\r\nHost: mrcd\r\nConnection: close\r\n\r\n" >&3 && timeout 5 cat <&3'
}

# Waits (bounded) until mrcd on host $1 reports every port up and the peer
# answers ICMP on every plane (neighbour discovery done, IPv6 out of DAD).
wait_ready() {
	local h=$1 i p peer ns
	if [ "$h" = a ]; then ns=$NSA; peer=2; else ns=$NSB; peer=1; fi
	for i in $(seq 1 50); do
		[ "$("$MRCCTL" -s "$T/$h.sock" -j port show | jq '[.[] | select(.state == "up")] | length')" = 4 ] && break
		sleep 0.1
	done
	for p in 1 2 3 4; do
		for i in 1 2 3 4 5; do
			ip netns exec "$ns" ping -c 1 -W 1 "198.18.$p.$peer" >/dev/null 2>&1 && break
		done
		for i in 1 2 3 4 5; do
			ip netns exec "$ns" ping -6 -c 1 -W 1 "fd00:0:$p::$peer" >/dev/null 2>&1 && break
		done
	done
}

# bpftool map dump as [{key, value}] with BTF-formatted fields (bpftool puts
# them under "formatted" next to the raw bytes for some map types).
bdump() { bpftool -j map dump pinned "$1" | jq -c '[.[] | (.formatted // .)]'; }
