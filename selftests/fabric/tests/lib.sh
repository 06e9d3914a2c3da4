# SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
# Common setup of the fabric netns tests: skip (77) without root or tools,
# one fabric run per test torn down in a trap, small assertion helpers.
# shellcheck shell=bash

set -uo pipefail

T_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../fabric.sh
. "$T_DIR/../fabric.sh"

T_NAME=$(basename "$0" .sh)
T_RUNS=()
T_PIDS=()
T_TMP=$(mktemp -d "/tmp/mrc-fabric-$T_NAME.XXXXXX")
T_FAILS=0

# Inside the VM layer (vm-tests/run.sh sets MRC_IN_VM=1) the guest may run
# under TCG, 10 to 30 times slower: tests that depend on rates or periods pick
# VM values with t_vm (and say so), keeping the host's values otherwise.
t_vm() { [ "${MRC_IN_VM:-0}" = 1 ]; }

t_skip() {
	echo "SKIP $T_NAME: $*"
	exit 77
}

t_require() { # tools...
	[ "$(id -u)" = 0 ] || t_skip "needs root (network namespaces)"
	ip netns list >/dev/null 2>&1 || t_skip "no network namespace support"
	local c
	for c in ip tc jq ethtool "$@"; do
		command -v "$c" >/dev/null 2>&1 || t_skip "$c is not installed"
	done
	: "${MRC_BUILD_DIR:?MRC_BUILD_DIR must name the build directory}"
	B_FAULT=$MRC_BUILD_DIR/selftests/fabric/mrc_fault
	B_PKT=$MRC_BUILD_DIR/selftests/fabric/fabric_pkt
	B_SAMPLE=$MRC_BUILD_DIR/selftests/fabric/fabric_sample
	B_TCP=$MRC_BUILD_DIR/bench/tcp_peer
	export MRC_BUILD_DIR
	for c in "$B_FAULT" "$B_PKT" "$B_SAMPLE"; do
		[ -x "$c" ] || { echo "FAIL $T_NAME: $c is not built"; exit 1; }
	done
}

t_cleanup() {
	local p r
	for p in "${T_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for r in "${T_RUNS[@]}"; do fabric_down "$r"; done
	if [ "$T_FAILS" = 0 ]; then
		rm -rf "$T_TMP"
	else
		echo "logs kept in $T_TMP"
	fi
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

# t_up ARGS... -> sets R (run id); the run is torn down at exit.
t_up() {
	R=$(fabric_up "$@") || { echo "FAIL $T_NAME: fabric_up $*"; exit 1; }
	T_RUNS+=("$R")
	ST=$(fabric_state "$R")
}

t_ok() { echo "ok   $*"; }
t_fail() {
	echo "FAIL $*"
	T_FAILS=$((T_FAILS + 1))
}
t_check() { # description command...
	local d=$1
	shift
	if "$@" >/dev/null; then t_ok "$d"; else t_fail "$d"; fi
}
# t_range DESC VALUE LO HI (floating point, inclusive)
t_range() {
	if awk -v v="$2" -v lo="$3" -v hi="$4" 'BEGIN { exit !(v >= lo && v <= hi) }'; then
		t_ok "$1: $2 in [$3, $4]"
	else
		t_fail "$1: $2 not in [$3, $4]"
	fi
}
t_eq() { # DESC A B
	if [ "$2" = "$3" ]; then t_ok "$1: $2"; else t_fail "$1: got '$2', want '$3'"; fi
}

# Waits (bounded) until a file exists.
t_wait_file() { # FILE [TIMEOUT_S]
	local i n=$((${2:-10} * 100))
	for ((i = 0; i < n; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.01
	done
	return 1
}

t_done() {
	if [ "$T_FAILS" = 0 ]; then
		echo "PASS $T_NAME"
		exit 0
	fi
	echo "FAIL $T_NAME: $T_FAILS check(s) failed"
	exit 1
}

# port field of a host: t_port NODE PLANE FIELD
t_port() { jq -r --arg h "$1" --argjson p "$2" --arg f "$3" '.hosts[$h].ports[$p][$f]' "$ST"; }
t_ns() { jq -r --arg h "$1" '.hosts[$h].ns' "$ST"; }

# Sends MRC frames from host SRC's plane port to host DST and captures them at
# DST's port (T_RECV_TIMEOUT_MS bounds a capture that expects nothing). Prints the receiver's JSON; the sender's goes to $T_TMP/send.json.
# t_xfer SRC DST PLANE FAMILY(ipv4|ipv6) fabric_pkt-send-args...
t_xfer() {
	local src=$1 dst=$2 p=$3 fam=$4 ready="$T_TMP/ready.$RANDOM" out="$T_TMP/recv.$RANDOM"
	shift 4
	"$B_PKT" recv --netns "$(t_ns "$dst")" --dev "$(t_port "$dst" "$p" ifname)" --ready "$ready" \
		--timeout-ms "${T_RECV_TIMEOUT_MS:-15000}" --idle-ms 250 >"$out" &
	local pid=$!
	t_wait_file "$ready" 10 || { echo "receiver did not start" >&2; kill $pid; return 1; }
	"$B_PKT" send --netns "$(t_ns "$src")" --dev "$(t_port "$src" "$p" ifname)" \
		--dst-mac "$(t_port "$src" "$p" nexthop_mac)" --src "$(t_port "$src" "$p" "$fam")" \
		--dst "$(t_port "$dst" "$p" "$fam")" "$@" >"$T_TMP/send.json" || { kill $pid; return 1; }
	wait $pid
	cat "$out"
}

# rx/tx packet counter of an interface: t_cnt NS IF rx_packets|tx_packets|rx_bytes|tx_bytes
t_cnt() {
	ip -n "$1" -j -s link show dev "$2" | jq -r --arg k "$3" '.[0].stats64 |
		if $k == "rx_packets" then .rx.packets elif $k == "tx_packets" then .tx.packets
		elif $k == "rx_bytes" then .rx.bytes else .tx.bytes end'
}
