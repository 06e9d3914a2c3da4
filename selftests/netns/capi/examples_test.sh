#!/usr/bin/env bash
# examples/write_imm_server and write_imm_client end to end, run as
# examples/README.md runs them: a direct veth fabric with 4 planes, the server
# in host B, the client in host A. Both must exit 0, the server must report
# every immediate in send order with its message verified byte for byte, and
# the client must receive the server's verdict.
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require
SRV=$MRC_BUILD_DIR/examples/write_imm_server
CLI=$MRC_BUILD_DIR/examples/write_imm_client
for b in "$SRV" "$CLI"; do
	[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
done

t_up direct planes=4
ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
PORT=$((20000 + RANDOM % 10000))

# run NAME N SIZE: one server/client pair; N messages of SIZE bytes (0: defaults).
run() {
	local name=$1 n=$2 size=$3 args=() spid crc src i want
	[ "$n" = 0 ] || args=(-n "$n" -s "$size")
	[ "$n" = 0 ] && n=4
	PORT=$((PORT + 1))
	ip netns exec "$(t_ns B)" timeout 120 "$SRV" -p "$PORT" "${args[@]}" "$(ifs B)" \
		>"$T_TMP/$name.srv" 2>"$T_TMP/$name.srv.err" &
	spid=$!
	T_PIDS+=("$spid")
	ip netns exec "$(t_ns A)" timeout 120 "$CLI" -p "$PORT" "${args[@]}" "$(t_port B 0 ipv4)" "$(ifs A)" \
		>"$T_TMP/$name.cli" 2>"$T_TMP/$name.cli.err"
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
		cat "$T_TMP/$name".*
	fi
}

run defaults 0 0
run large 16 1000003   # ~1 MB messages of an odd size: ~300 packets each over 4 planes

# The packets went over every plane (the wire counts what B received).
for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "bytes B received on plane $p" "$rx" 1000000 100000000000
done
t_done
