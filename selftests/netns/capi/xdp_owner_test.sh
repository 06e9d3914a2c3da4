#!/usr/bin/env bash
# Who owns mrc_xdp on the plane interfaces in libmrc's in-process mode
# (Documentation/xdp.md, "Ownership in libmrc"), with examples/write_imm_server
# and write_imm_client on a direct veth fabric of 2 planes:
#  (a) a server holding the device is killed with SIGKILL (and one with
#      SIGTERM, no handler): its planes are free at once; a new server opens
#      them and a client's messages arrive verified byte for byte; after both
#      exit no XDP program is left on any plane;
#  (b) an mrc_xdp attached through netlink by a process that exited without
#      detaching (the code path of libmrc before BPF links) is replaced, with
#      a warning naming the interface;
#  (c) a live holder is not replaced: opening the device fails with EBUSY and
#      the message names it (a running server: its pid and its BPF link; a
#      live process that attached through netlink: its pid);
#  (d) a program that is not mrc_xdp is never replaced, even with no process
#      holding it: EBUSY naming it;
#  (e) mrcd's mrc_xdp (its maps pinned in the pin directory, kept attached
#      while mrcd is stopped) is never replaced by a device opened without
#      mrcd on that pin directory: EBUSY naming mrcd's program.
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require
SRV=$MRC_BUILD_DIR/examples/write_imm_server
CLI=$MRC_BUILD_DIR/examples/write_imm_client
HLP=$MRC_BUILD_DIR/selftests/netns/capi/xdp_owner_helper
for b in "$SRV" "$CLI" "$HLP"; do
	[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
done

t_up direct planes=2
ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
NSA=$(t_ns A)
NSB=$(t_ns B)
PORT=$((20000 + RANDOM % 10000))

# who NS IF: who holds IF's XDP hook ("nothing" when free)
who() { ip netns exec "$1" "$HLP" who "$2"; }

# Waits (bounded) until IF of B is held by pid PID; prints the holder.
wait_held_by() { # IF PID
	local i w
	for ((i = 0; i < 500; i++)); do
		w=$(who "$NSB" "$1")
		case "$w" in *" of pid $2 "*) echo "$w"; return 0 ;; esac
		sleep 0.02
	done
	echo "$w"
	return 1
}

# Every plane of both hosts is free.
all_free() { # DESC
	local h p w
	for h in A B; do
		for p in 0 1; do
			w=$(who "$(t_ns $h)" "$(t_port $h $p ifname)")
			t_eq "$1: host $h plane $p carries no XDP program" "$w" nothing
		done
	done
}

# pair NAME: a server in B and a client in A, 8 messages of 100003 bytes.
pair() {
	local name=$1 spid crc src
	PORT=$((PORT + 1))
	ip netns exec "$NSB" timeout 120 "$SRV" -p "$PORT" -n 8 -s 100003 "$(ifs B)" \
		>"$T_TMP/$name.srv" 2>"$T_TMP/$name.srv.err" &
	spid=$!
	T_PIDS+=("$spid")
	ip netns exec "$NSA" timeout 120 "$CLI" -p "$PORT" -n 8 -s 100003 "$(t_port B 0 ipv4)" "$(ifs A)" \
		>"$T_TMP/$name.cli" 2>"$T_TMP/$name.cli.err"
	crc=$?
	wait "$spid"
	src=$?
	t_eq "$name: client exit status" "$crc" 0
	t_eq "$name: server exit status" "$src" 0
	t_eq "$name: messages verified byte for byte" "$(grep -c ': verified$' "$T_TMP/$name.srv")" 8
	t_eq "$name: no mismatch" "$(grep -c MISMATCH "$T_TMP/$name.srv")" 0
	t_eq "$name: client got the verdict" "$(grep -o 'server says: .*' "$T_TMP/$name.cli")" "server says: verified 8 of 8"
}

IFB0=$(t_port B 0 ifname)
IFB1=$(t_port B 1 ifname)

# (a) SIGKILL, and SIGTERM without a handler (what `timeout` sends). `ip netns
# exec` execs the server: $! is the server itself.
for sig in KILL TERM; do
	ip netns exec "$NSB" "$SRV" -p 1 "$(ifs B)" >"$T_TMP/killed-$sig.srv" 2>&1 &
	kpid=$!
	T_PIDS+=("$kpid")
	w=$(wait_held_by "$IFB0" "$kpid")
	t_check "(a) the first server holds $IFB0 through a BPF link ($w)" grep -q "of pid $kpid (write_imm_serv.*BPF link" <<<"$w"
	w=$(wait_held_by "$IFB1" "$kpid")
	t_check "(a) the first server holds $IFB1 through a BPF link" grep -q "BPF link" <<<"$w"
	kill -"$sig" "$kpid"
	wait "$kpid" 2>/dev/null
	t_eq "(a) $IFB0 is free once the SIG$sig server is gone" "$(who "$NSB" "$IFB0")" nothing
	t_eq "(a) $IFB1 is free once the SIG$sig server is gone" "$(who "$NSB" "$IFB1")" nothing
done
pair "(a) after SIGKILL"
all_free "(a) after a clean exit"

# (b) a stale mrc_xdp attached through netlink by a process that exited.
ip netns exec "$NSB" "$HLP" stale "$(ifs B)" >"$T_TMP/stale.out" 2>&1
t_eq "(b) the helper attached and exited" "$?" 0
w=$(who "$NSB" "$IFB0")
t_check "(b) $IFB0 carries a stale mrc_xdp ($w)" grep -Eq '^mrc_xdp \(program [0-9]+\), attached through netlink$' <<<"$w"
pair "(b) stale"
for i in "$IFB0" "$IFB1"; do
	t_check "(b) the server warned that it replaced the stale mrc_xdp on $i" \
		grep -q "$i: replaced a stale mrc_xdp (program [0-9]*) left attached through netlink" "$T_TMP/(b) stale.srv.err"
done
all_free "(b) after a clean exit"

# (c1) a live server holds the planes: a second one fails and names it.
ip netns exec "$NSB" "$SRV" -p 1 "$(ifs B)" >"$T_TMP/holder.srv" 2>&1 &
hpid=$!
T_PIDS+=("$hpid")
wait_held_by "$IFB0" "$hpid" >/dev/null
wait_held_by "$IFB1" "$hpid" >/dev/null
ip netns exec "$NSB" timeout 60 "$SRV" -p 2 "$(ifs B)" >"$T_TMP/second.srv" 2>&1
t_eq "(c1) the second server exits 1" "$?" 1
t_check "(c1) its error names the holder: $(head -c 300 "$T_TMP/second.srv")" \
	grep -Eq "attaching mrc_xdp to $IFB0: held by mrc_xdp \(program [0-9]+\) of pid $hpid \(write_imm_serv[a-z]*\), attached through a BPF link: Device or resource busy" "$T_TMP/second.srv"
t_eq "(c1) the holder is still attached" "$(who "$NSB" "$IFB0" | grep -c "of pid $hpid ")" 1
kill -9 "$hpid"
wait "$hpid" 2>/dev/null
all_free "(c1) after killing the holder"

# (c2) a live process that attached mrc_xdp through netlink (an old libmrc).
ip netns exec "$NSB" "$HLP" hold "$(ifs B)" >"$T_TMP/hold.out" 2>&1 &
gpid=$!
T_PIDS+=("$gpid")
wait_held_by "$IFB1" "$gpid" >/dev/null
ip netns exec "$NSB" timeout 60 "$SRV" -p 2 "$(ifs B)" >"$T_TMP/third.srv" 2>&1
t_eq "(c2) the server exits 1" "$?" 1
t_check "(c2) its error names the holder: $(head -c 300 "$T_TMP/third.srv")" \
	grep -Eq "held by mrc_xdp \(program [0-9]+\) of pid $gpid \(xdp_owner_helpe[a-z]*\), attached through netlink: Device or resource busy" "$T_TMP/third.srv"
w=$(who "$NSB" "$IFB0")
t_check "(c2) the holder's program is still attached ($w)" grep -q "of pid $gpid " <<<"$w"
kill -9 "$gpid"
wait "$gpid" 2>/dev/null
# Its program is stale now: the next server replaces it.
pair "(c2) after the holder died"
t_check "(c2) the server warned that it replaced the dead holder's mrc_xdp" \
	grep -q "$IFB0: replaced a stale mrc_xdp" "$T_TMP/(c2) after the holder died.srv.err"
all_free "(c2) after a clean exit"

# (d) another program, attached through netlink by a process that exited.
ip netns exec "$NSB" "$HLP" other "$IFB0" >"$T_TMP/other.out" 2>&1
t_eq "(d) the helper attached other_xdp and exited" "$?" 0
ip netns exec "$NSB" timeout 60 "$SRV" -p 2 "$(ifs B)" >"$T_TMP/fourth.srv" 2>&1
t_eq "(d) the server exits 1" "$?" 1
t_check "(d) its error names the program: $(head -c 300 "$T_TMP/fourth.srv")" \
	grep -Eq "attaching mrc_xdp to $IFB0: held by another XDP program \(other_xdp, id [0-9]+\), attached through netlink \(libxdp native: .*\): Device or resource busy$" "$T_TMP/fourth.srv"
w=$(who "$NSB" "$IFB0")
t_check "(d) other_xdp is still attached ($w)" grep -q "other_xdp" <<<"$w"
t_eq "(d) $IFB1 was released by the failed open" "$(who "$NSB" "$IFB1")" nothing
ip -n "$NSB" link set dev "$IFB0" xdp off

# (e) mrcd's program: maps pinned in a private bpffs.
mkdir -p "$T_TMP/bpf"
if mount -t bpf bpf "$T_TMP/bpf" 2>/dev/null; then
	trap 'umount "$T_TMP/bpf" 2>/dev/null; t_cleanup' EXIT
	PIN=$T_TMP/bpf/mrc
	ip netns exec "$NSB" "$HLP" pinned "$PIN" "$(ifs B)" >"$T_TMP/pinned.out" 2>&1
	t_eq "(e) the helper attached mrc_xdp with maps pinned in $PIN and exited" "$?" 0
	ip netns exec "$NSB" "$HLP" open "$PIN" "$(ifs B)" >"$T_TMP/open-pinned.out" 2>&1
	t_eq "(e) opening without mrcd fails" "$?" 1
	t_check "(e) the error names mrcd's program: $(head -c 300 "$T_TMP/open-pinned.out")" \
		grep -Eq "attaching mrc_xdp to $IFB0: held by mrcd's mrc_xdp \(program [0-9]+, maps pinned in $PIN; open the device through mrcd\), attached through netlink: Device or resource busy" "$T_TMP/open-pinned.out"
	w=$(who "$NSB" "$IFB0")
	t_check "(e) mrcd's program is still attached ($w)" grep -q "^mrc_xdp (program" <<<"$w"
	# Without the pins it is an ordinary stale mrc_xdp: the device replaces it.
	rm -r "$PIN"
	ip netns exec "$NSB" "$HLP" open "$PIN" "$(ifs B)" >"$T_TMP/open-unpinned.out" 2>&1
	t_eq "(e) once unpinned, the open succeeds" "$?" 0
	t_check "(e) it replaced the program with the warning" \
		grep -q "$IFB0: replaced a stale mrc_xdp" "$T_TMP/open-unpinned.out"
	all_free "(e) after the device closed"
else
	echo "skip (e): cannot mount a bpffs"
fi

if [ "$T_FAILS" != 0 ]; then
	for f in "$T_TMP"/*; do
		echo "== $f"
		head -c 2000 "$f"
	done
fi
t_done
