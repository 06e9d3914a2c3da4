#!/usr/bin/env bash
# The libfabric provider "mrc" (Documentation/libfabric.md) driven by programs
# nobody here wrote (Debian's libfabric-bin) between two hosts of a direct
# 4-plane veth fabric:
#   - fi_info lists the provider (FI_EP_MSG with FI_MSG and FI_RMA) and, layered
#     by libfabric's ofi_rxm, "mrc;ofi_rxm" (FI_EP_RDM with FI_TAGGED);
#   - fi_pingpong over FI_EP_MSG and over FI_EP_RDM ("mrc;ofi_rxm", rxm's
#     default rendezvous by RMA read, which the provider emulates: rxm 1.17's
#     rendezvous by write, FI_OFI_RXM_USE_RNDV_WRITE=1, writes 0 bytes when
#     the application uses FI_MR_LOCAL, as fi_pingpong does, over any core
#     provider that needs it: libfabric PR #9650, fixed in 1.18.x and later,
#     not in Debian 12's 1.17; -c catches it), every message size it tests (1 B to 6 MiB) with its data
#     check (-c: every byte of every message compared; a mismatch prints
#     "Error at iteration" and fails the run), both ends exit 0 and report
#     every size;
#   - the bytes went over every plane;
#   - on a second fabric of jumbo planes (MTU 9000), MSG and RDM at 8 B,
#     64 KiB and 1 MiB with -c: the provider's path MTU is what the device
#     receives in one frame (3392 for single-buffer AF_XDP), not what the
#     planes carry; 4096 lost every full-size packet and 1 MiB hung;
#     with FI_MRC_FRAME_CHUNKS=3 MSG and RDM at 1 MiB with -c in frames of
#     up to 8896 payload bytes (checked on the wire), and 18, 0, -1 and
#     "abc" are refused;
#   - there too, FI_MRC_TX=xsk and =live: MSG and RDM at 1 MiB with -c, both
#     ends log the backend asked for, and the client's frames went out by
#     BPF_PROG_TEST_RUN with live only (strace); FI_MRC_TX=auto with
#     FI_MRC_FRAME_CHUNKS=3 keeps AF_XDP; an unknown backend, and live with
#     chunks 3, are refused;
#   - on one plane, an 8 B MSG round trip costs each side one sendto (the
#     ACK leaves with the answer);
#   - direct messages: 1 MiB MSG messages go straight into the peer's
#     advertised receives (both ends count them), RDM's never; with
#     FI_MRC_DIRECT_MIN=0 the ring carries them; bad values refused.
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require fi_info fi_pingpong strace
PROV_DIR=$MRC_BUILD_DIR/lib/libfabric
[ -f "$PROV_DIR/libmrc-fi.so" ] || { echo "FAIL $T_NAME: $PROV_DIR/libmrc-fi.so is not built"; exit 1; }

t_up direct planes=4
ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
# on HOST CMD...: CMD in HOST's namespace with the provider and its planes.
on() {
	local h=$1
	shift
	ip netns exec "$(t_ns "$h")" env FI_PROVIDER_PATH="$PROV_DIR" FI_MRC_IFACES="$(ifs "$h")" "$@"
}

# fi_info: the provider, its endpoint type and capabilities (the provider is
# loaded from FI_PROVIDER_PATH: libfabric scans it for *-fi.so).
on A fi_info -p mrc -t FI_EP_MSG -v >"$T_TMP/info.msg" 2>&1
t_eq "fi_info -p mrc: provider" "$(grep -m1 -o 'prov_name: .*' "$T_TMP/info.msg")" "prov_name: mrc"
t_eq "fi_info -p mrc: FI_EP_MSG" "$(grep -m1 -c 'type: FI_EP_MSG' "$T_TMP/info.msg")" 1
caps=$(grep -m1 '^    caps:' "$T_TMP/info.msg")
for c in FI_MSG FI_RMA FI_READ FI_WRITE FI_REMOTE_READ FI_REMOTE_WRITE FI_SEND FI_RECV; do
	t_check "fi_info -p mrc: caps have $c" grep -qw "$c" <<<"$caps"
done
t_eq "fi_info -p mrc: domain is the plane set" "$(grep -m1 -o 'name: .*+.*' "$T_TMP/info.msg")" \
	"name: $(ifs A | tr , +)"
on A fi_info -p "mrc;ofi_rxm" -t FI_EP_RDM -v >"$T_TMP/info.rdm" 2>&1
t_eq "fi_info -p mrc;ofi_rxm: provider" "$(grep -m1 -o 'prov_name: .*' "$T_TMP/info.rdm")" "prov_name: mrc;ofi_rxm"
t_eq "fi_info -p mrc;ofi_rxm: FI_EP_RDM" "$(grep -m1 -c 'type: FI_EP_RDM' "$T_TMP/info.rdm")" 1
t_check "fi_info -p mrc;ofi_rxm: caps have FI_TAGGED" grep -m1 -q '^    caps:.*FI_TAGGED' "$T_TMP/info.rdm"
# Without its plane list the provider offers nothing (and says why).
ip netns exec "$(t_ns A)" env FI_PROVIDER_PATH="$PROV_DIR" FI_LOG_LEVEL=info fi_info -p mrc \
	>"$T_TMP/info.none" 2>&1
t_check "fi_info without FI_MRC_IFACES: no provider" grep -q 'fi_getinfo: -61' "$T_TMP/info.none"
t_check "fi_info without FI_MRC_IFACES: the reason" grep -q 'FI_MRC_IFACES is not set' "$T_TMP/info.none"

rx0=()
for p in 0 1 2 3; do rx0[p]=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes); done

# pingpong NAME PROVIDER EP [SIZE]: every size (or SIZE alone), data checked
# (-c; -v would only print debug output), 10 round trips each.
pingpong() {
	local name=$1 prov=$2 ep=$3 size=${4:-all} spid src crc
	on B timeout 300 fi_pingpong -p "$prov" -e "$ep" -S "$size" -I 10 -c >"$T_TMP/$name.srv" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	sleep 0.5 # the server's control socket (fi_pingpong has no readiness signal; the client retries)
	on A timeout "${PP_TIMEOUT:-300}" ${PP_WRAP:-} fi_pingpong -p "$prov" -e "$ep" -S "$size" -I 10 -c \
		"$(t_port B 0 ipv4)" >"$T_TMP/$name.cli" 2>&1
	crc=$?
	[ "$crc" = 0 ] || kill "$spid" 2>/dev/null # a client that gave up leaves the server waiting
	wait "$spid"
	src=$?
	t_eq "$name: client exit status" "$crc" 0
	t_eq "$name: server exit status" "$src" 0
	if [ "$size" != all ]; then
		t_eq "$name: the client's row" "$(grep -cE '^[0-9.]+[kmg]? +10 +=10 ' "$T_TMP/$name.cli")" 1
		t_check "$name: no data mismatch" bash -c "! grep -q 'Error at iteration' '$T_TMP/$name.cli' '$T_TMP/$name.srv'"
		if [ "$T_FAILS" != 0 ]; then tail -n 20 "$T_TMP/$name".*; fi
		return
	fi
	# 46 sizes (0 B..6 MiB with RDM, 1 B..6 MiB with MSG), each "=10" acknowledged
	local want=46
	[ "$ep" = msg ] && want=45
	t_range "$name: sizes the client completed" "$(grep -cE '^[0-9.]+[kmg]? +10 +=10 ' "$T_TMP/$name.cli")" $want 46
	t_range "$name: sizes the server completed" "$(grep -cE '^[0-9.]+[kmg]? +10 +=10 ' "$T_TMP/$name.srv")" $want 46
	t_check "$name: 6 MiB row" grep -qE '^6m +10 +=10 ' "$T_TMP/$name.cli"
	t_check "$name: no data mismatch" bash -c "! grep -q 'Error at iteration' '$T_TMP/$name.cli' '$T_TMP/$name.srv'"
	if [ "$T_FAILS" != 0 ]; then tail -n 20 "$T_TMP/$name".*; fi
}
pingpong msg mrc msg
pingpong rdm "mrc;ofi_rxm" rdm

# Every plane carried the data (2 x 10 x ~20 MiB each way in total).
for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "bytes B received on plane $p" "$((rx - rx0[p]))" 10000000 100000000000
done

# Posts before the engine pass (libfabric.md, "Object model"): on one plane
# an 8 B MSG round trip costs each side one sendto, its ACK of the peer's
# message leaving with its answer. Until 2026-12-03 it cost two: fi_recv,
# which fi_pingpong calls between a message and its answer, ran a pass that
# sent the ACK alone. Counted with strace over 300 and 1300 round trips, so
# set-up and teardown (CM and fi_pingpong's own TCP socket) cancel out.
t_up direct planes=1
pp_sendto() { # NAME ITERS: client and server under strace -c (sendto only)
	local name=$1 it=$2 spid st=(strace -f -c --seccomp-bpf -e trace=sendto)
	on B timeout 60 "${st[@]}" -o "$T_TMP/$name.srv.st" fi_pingpong -p mrc -e msg -S 8 -I "$it" \
		>"$T_TMP/$name.srv" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	sleep 0.5
	on A timeout 60 "${st[@]}" -o "$T_TMP/$name.cli.st" fi_pingpong -p mrc -e msg -S 8 -I "$it" \
		"$(t_port B 0 ipv4)" >"$T_TMP/$name.cli" 2>&1
	t_eq "$name: client exit status" "$?" 0
	wait "$spid"
	t_eq "$name: server exit status" "$?" 0
}
sendtos() { awk '$NF == "sendto" { n = $4 } END { print n + 0 }' "$1"; }
pp_sendto post300 300
pp_sendto post1300 1300
for side in cli srv; do
	per_rt=$(awk -v a="$(sendtos "$T_TMP/post300.$side.st")" -v b="$(sendtos "$T_TMP/post1300.$side.st")" \
		'BEGIN { printf "%.2f", (b - a) / 1000 }')
	t_range "one plane, 8 B MSG: sendto per round trip ($side)" "$per_rt" 0.9 1.2
done

# Jumbo planes (MTU 9000): every size that fills a full packet hung before
# (the 8 B ones passed). A hang is cut at 60 s by the client's timeout.
t_up direct planes=4 mtu=9000
PP_TIMEOUT=60
for ep in msg rdm; do
	prov=mrc
	[ "$ep" = rdm ] && prov="mrc;ofi_rxm"
	for size in 8 65536 1048576; do pingpong "jumbo-$ep-$size" "$prov" "$ep" "$size"; done
done
# Those ran single-buffer: at most 3392 payload bytes per packet. With
# FI_MRC_FRAME_CHUNKS=3 (multi-buffer AF_XDP) a packet carries 8896 on these
# planes: 1 MiB with -c, and the average frame B received (data and ACKs)
# is above 4000 bytes, which single-buffer frames never reach.
rx_sum() {
	local p t=0
	for p in 0 1 2 3; do t=$((t + $(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" "$1"))); done
	echo "$t"
}
for ep in msg rdm; do
	prov=mrc
	[ "$ep" = rdm ] && prov="mrc;ofi_rxm"
	b0=$(rx_sum rx_bytes) p0=$(rx_sum rx_packets)
	FI_MRC_FRAME_CHUNKS=3 pingpong "chunks3-$ep-1m" "$prov" "$ep" 1048576
	b1=$(rx_sum rx_bytes) p1=$(rx_sum rx_packets)
	t_range "chunks3-$ep-1m: bytes per frame B received" "$(((b1 - b0) / (p1 - p0 + 1)))" 4000 9100
done
# A value out of range or not a number (libfabric reads "abc" as 0) leaves
# the provider unusable and says why.
for bad in 18 0 -1 abc; do
	FI_MRC_FRAME_CHUNKS=$bad FI_LOG_LEVEL=info on A fi_info -p mrc >"$T_TMP/info.chunks$bad" 2>&1
	t_check "FI_MRC_FRAME_CHUNKS=$bad: refused with its reason" \
		grep -q "FI_MRC_FRAME_CHUNKS must be 1..17" "$T_TMP/info.chunks$bad"
	t_check "FI_MRC_FRAME_CHUNKS=$bad: no provider listed" \
		bash -c "! grep -q 'prov_name: mrc' '$T_TMP/info.chunks$bad'"
done

# The TX backend (FI_MRC_TX, libfabric.md "Running"): the backend each end
# logs, and the system calls live frames go out by.
test_runs() { grep -c 'bpf(BPF_PROG_TEST_RUN' "$1"; }
for tx in xsk live; do
	for ep in msg rdm; do
		prov=mrc
		[ "$ep" = rdm ] && prov="mrc;ofi_rxm"
		PP_WRAP="strace -f --seccomp-bpf -e trace=bpf -o $T_TMP/$tx-$ep.st" FI_MRC_TX=$tx \
			FI_LOG_LEVEL=info FI_LOG_PROV=mrc pingpong "$tx-$ep-1m" "$prov" "$ep" 1048576
		for side in cli srv; do
			t_check "$tx-$ep-1m: the provider's backend ($side)" \
				grep -q "planes, path MTU [0-9]* (FI_MRC_FRAME_CHUNKS 1), TX $tx" "$T_TMP/$tx-$ep-1m.$side"
		done
	done
done
# 10 MiB each way in frames of at most 3264 bytes, up to 64 per run (79-104
# runs measured; engine passes of fewer than 16 frames use AF_XDP); AF_XDP
# TX makes none.
t_range "xsk: the client's BPF_PROG_TEST_RUN calls" "$(($(test_runs "$T_TMP/xsk-msg.st") + $(test_runs "$T_TMP/xsk-rdm.st")))" 0 0
for ep in msg rdm; do
	t_range "live-$ep-1m: the client's BPF_PROG_TEST_RUN calls" "$(test_runs "$T_TMP/live-$ep.st")" 20 1000000
done
FI_MRC_TX=auto FI_MRC_FRAME_CHUNKS=3 FI_LOG_LEVEL=info FI_LOG_PROV=mrc \
	pingpong "auto-chunks3-msg-8" mrc msg 8
t_check "FI_MRC_TX=auto with FI_MRC_FRAME_CHUNKS=3: AF_XDP, 8896 per packet" \
	grep -q "path MTU 8896 (FI_MRC_FRAME_CHUNKS 3), TX xsk" "$T_TMP/auto-chunks3-msg-8.cli"
# Direct messages (libfabric.md "Direct messages"): in the 1 MiB MSG runs
# above every message after the first few went straight into the peer's
# advertised receive (each end logs its counts at close); rxm's receives
# (16 KiB buffers) are never advertised, so RDM sent none. The all-size MSG
# run at the top covered the mix: its small messages took advertised
# receives through the ring (stale adverts). FI_MRC_DIRECT_MIN=0: the ring
# carries 1 MiB, data checked, nothing advertised.
direct_sent() { sed -n 's/.*direct messages sent \([0-9]*\), received \([0-9]*\);.*/\1 \2/p' "$1" | head -n 1; }
for tx in xsk live; do
	for side in cli srv; do
		read -r ds dr <<<"$(direct_sent "$T_TMP/$tx-msg-1m.$side")"
		t_range "$tx-msg-1m: direct messages sent ($side)" "${ds:-0}" 9 1000
		t_range "$tx-msg-1m: direct messages received ($side)" "${dr:-0}" 9 1000
		read -r ds dr <<<"$(direct_sent "$T_TMP/$tx-rdm-1m.$side")"
		t_eq "$tx-rdm-1m: rxm's messages never direct ($side)" "${ds:--} ${dr:--}" "0 0"
	done
done
FI_MRC_DIRECT_MIN=0 FI_LOG_LEVEL=info FI_LOG_PROV=mrc pingpong "ring-msg-1m" mrc msg 1048576
for side in cli srv; do
	t_check "FI_MRC_DIRECT_MIN=0: no direct message, no advert ($side)" \
		grep -q "direct messages sent 0, received 0; receives advertised 0 " "$T_TMP/ring-msg-1m.$side"
done
for bad in "FI_MRC_TX=bogus:FI_MRC_TX must be xsk, live or auto" \
	"FI_MRC_TX=live FI_MRC_FRAME_CHUNKS=3:FI_MRC_FRAME_CHUNKS > 1 needs xsk" \
	"FI_MRC_DIRECT_MIN=abc:FI_MRC_DIRECT_MIN must be 0" "FI_MRC_DIRECT_MIN=-1:FI_MRC_DIRECT_MIN must be 0" \
	"FI_MRC_DIRECT_MIN=2000000000:FI_MRC_DIRECT_MIN must be 0"; do
	why=${bad#*:} bad=${bad%%:*}
	(
		export $bad FI_LOG_LEVEL=info
		on A fi_info -p mrc >"$T_TMP/info.tx" 2>&1
	)
	t_check "$bad: refused with its reason" grep -q "$why" "$T_TMP/info.tx"
	t_check "$bad: no provider listed" bash -c "! grep -q 'prov_name: mrc' '$T_TMP/info.tx'"
done
t_done
