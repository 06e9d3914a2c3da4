#!/usr/bin/env bash
# Isolation between the clients of one mrc-serviced (issue 23 item 4; svc_iso
# has the roles). On host A, processes A (owner) and B (intruder) through one
# service; on host B a peer through its service. B names A's handles, QPN and
# lkey on its own connection (EINVAL each, as for objects that do not exist),
# and posts a WRITE from A's lkey (an error completion, nothing sent). The
# peer writes through a QP connected to B's QP (B's protection domain): with
# B's rkey it succeeds, with A's rkey and address it fails with a remote
# access error and A's memory stays unchanged (ReDMArk's forged rkey); A's own
# transfer through A's QP is verified. The service's per-client view
# (mrcctl service clients) charges the refused write to B, none to A.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout jq
ISO=$MRC_BUILD_DIR/selftests/netns/svc/svc_iso
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl
svc_need "$SVCD" "$ISO" "$MRCCTL"
svc_fabric_up
addrs() { # HOST: its plane addresses, in order
	local p out=
	for p in 0 1 2 3; do out+="${out:+,}$(t_port "$1" "$p" ipv4)"; done
	echo "$out"
}
X=$T_TMP/iso
mkdir -p "$X"
run() { # ROLE HOST PEER_HOST
	svc_in "$2" env MRC_MODE=service timeout -s KILL 40 "$ISO" "$1" "$X" "$(ifs "$2")" "$(addrs "$3")" \
		>"$T_TMP/$1.log" 2>&1 &
	T_PIDS+=("$!")
	PID[$1]=$!
}
declare -A PID
run owner A B
run intruder A B
run peer B A
if ! t_wait_file "$X/peer.done" 30; then
	t_fail "the peer did not finish within 30 s"
fi
# While A and B still hold their QPs: the per-client view on host A.
svc_in A "$MRCCTL" -j service clients >"$T_TMP/clients.json" 2>&1
apid=$(awk '{print $1}' "$X/owner" 2>/dev/null)
bpid=$(awk '{print $1}' "$X/intruder" 2>/dev/null)
aerr=$(jq --argjson p "${apid:-0}" '[.clients[] | select(.pid == $p) | .errors][0]' "$T_TMP/clients.json")
berr=$(jq --argjson p "${bpid:-0}" '[.clients[] | select(.pid == $p) | .errors][0]' "$T_TMP/clients.json")
t_eq "service A: errors of client A (pid $apid)" "$aerr" 0
# B's: its refused requests (9 named handles, 1 dereg), its error completion
# and its QP's rem_access_errors; at least the forged write.
t_range "service A: errors of client B (pid $bpid)" "${berr:-0}" 1 1e9
touch "$X/end"
for r in owner intruder peer; do
	wait "${PID[$r]}"
	rc=$?
	cat "$T_TMP/$r.log"
	t_eq "$r: exit status" "$rc" 0
done
t_eq "checks that failed" "$(cat "$T_TMP"/{owner,intruder,peer}.log | grep -c '^FAIL')" 0
t_range "checks that passed" "$(cat "$T_TMP"/{owner,intruder,peer}.log | grep -c '^ok')" 20 100
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
done
tail -n 1 "$T_TMP/svc.A.log"
broken=$(grep -o 'broken [0-9]*' "$T_TMP/svc.A.log" | grep -o '[0-9]*$')
t_eq "service A: broken clients" "${broken:-none}" 0
t_done
