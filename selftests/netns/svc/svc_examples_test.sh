#!/usr/bin/env bash
# M1 of the host service (Documentation/service.md): examples/write_imm_server
# and write_imm_client (and write_imm_client_cpp, the C++ API's), unmodified,
# through an mrc-serviced on each host (4 planes, MRC_MODE=service so a
# fallback cannot pass), every message verified
# byte for byte by the server; then the same with a ~1 MB message size; the
# services count one client per example process, no broken client and no bad
# request, and exit 0 on SIGTERM.
. "$(dirname "$0")/svc_lib.sh"
t_require
SRV=$MRC_BUILD_DIR/examples/write_imm_server
CLI=$MRC_BUILD_DIR/examples/write_imm_client
CLI_CPP=$MRC_BUILD_DIR/examples/write_imm_client_cpp
svc_need "$SRV" "$CLI" "$CLI_CPP" "$SVCD"

svc_fabric_up
PORT=$((20000 + RANDOM % 10000))

# run NAME N SIZE [CLIENT]: one server/client pair; N messages of SIZE bytes
# (0: defaults); CLIENT defaults to the C client.
run() {
	local name=$1 n=$2 size=$3 cli=${4:-$CLI} args=() spid crc src i want
	[ "$n" = 0 ] || args=(-n "$n" -s "$size")
	[ "$n" = 0 ] && n=4
	PORT=$((PORT + 1))
	svc_in B env MRC_MODE=service timeout 120 "$SRV" -p "$PORT" "${args[@]}" "$(ifs B)" \
		>"$T_TMP/$name.srv" 2>"$T_TMP/$name.srv.err" &
	spid=$!
	T_PIDS+=("$spid")
	svc_in A env MRC_MODE=service timeout 120 "$cli" -p "$PORT" "${args[@]}" \
		"$(t_port B 0 ipv4)" "$(ifs A)" >"$T_TMP/$name.cli" 2>"$T_TMP/$name.cli.err"
	crc=$?
	wait "$spid"
	src=$?
	t_eq "$name: client exit status" "$crc" 0
	t_eq "$name: server exit status" "$src" 0
	want=""
	for ((i = 0; i < n; i++)); do want+=$(printf '0x%08x ' $((0x1000 + i))); done
	t_eq "$name: immediates in send order" "$(grep -o 'immediate 0x[0-9a-f]*' "$T_TMP/$name.srv" | cut -d' ' -f2 | tr '\n' ' ')" "$want"
	t_eq "$name: messages verified" "$(grep -c ': verified$' "$T_TMP/$name.srv")" "$n"
	t_eq "$name: no mismatch" "$(grep -c MISMATCH "$T_TMP/$name.srv")" 0
	t_eq "$name: client got the verdict" "$(grep -o 'server says: .*' "$T_TMP/$name.cli")" "server says: verified $n of $n"
	if [ "$T_FAILS" != 0 ]; then
		tail -n 20 "$T_TMP/$name".*
	fi
}

run defaults 0 0
run large 16 1000003 # ~1 MB messages of an odd size: ~300 packets each over 4 planes
run cpp 8 65537 "$CLI_CPP" # the C++ API's client (<mrc/mrc.hpp>)

for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "bytes B received on plane $p" "$rx" 1000000 100000000000
done
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
	t_eq "service $h: clients served" "$(grep -o 'clients served [0-9]*' "$T_TMP/svc.$h.log")" "clients served 3"
	t_eq "service $h: broken clients, bad requests" \
		"$(grep -o 'broken [0-9]*, bad requests [0-9]*' "$T_TMP/svc.$h.log")" "broken 0, bad requests 0"
done
t_done
