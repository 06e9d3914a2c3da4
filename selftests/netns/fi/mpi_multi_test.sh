#!/usr/bin/env bash
# Open MPI 4.1 over the mrc provider with several ranks per host through the
# host service (Documentation/libfabric.md, "Several ranks per host";
# service.md, milestone M6): one mrc-serviced per host namespace of a direct
# 4-plane fabric, RPH ranks (default 2, MRC_FI_RPH) on each of hosts A and B
# in service mode (MRC_MODE=service), pml cm + mtl ofi restricted to
# "mrc;ofi_rxm", ranks placed round-robin (A gets ranks 0, 2, ...):
#   - first, without MPI: an mrc_perf --verify pair within host A through its
#     service (the frames loop back in the service's engine; A's planes
#     carry almost nothing meanwhile);
#   - mpi_check (allreduce over every rank; point-to-point from rank 0 to
#     every other rank, on its own host and across; bcast) passes on every
#     rank with the number of checks its rank must make;
#   - while the job runs each service lists RPH clients, all mpi_check, and
#     afterwards has logged RPH clients leaving, none broken;
#   - every plane carried bytes;
#   - the same job over libfabric's tcp ("tcp;ofi_rxm") prints the same
#     results;
#   - a job completes, every check passed, with plane 1 blackholed in its
#     middle (once plane 1 carried 5 MB of it; told to stop once the other
#     planes carried 40 MB more: mpi_lib.sh).
# hpcc is not run here (fi_mpi_test runs it with one rank per host).
. "$(dirname "$0")/../svc/svc_lib.sh"
t_require mpirun timeout unshare hostname
MRCCTL=$MRC_BUILD_DIR/user/tools/mrcctl
. "$(dirname "$0")/mpi_lib.sh"
for b in "$SVCD" "$MRCCTL"; do
	[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
done
RPH=${MRC_FI_RPH:-2}
NP=$((2 * RPH))

t_up direct planes=4
svc_start A || exit 1
svc_start B || exit 1

# watch_clients NAME: until $T_TMP/NAME.done exists (bounded: 120 s), keeps
# each host's `mrcctl -j service clients` snapshot that lists the most
# clients, then the most QPs, then the most clients that sent, in
# $T_TMP/NAME.obs.HOST.json.
score() { jq '.total * 1000000 + ([.clients[].qps] | add // 0) * 100 + ([.clients[] | select(.tx_bytes > 0)] | length)' "$1" 2>/dev/null; }
watch_clients() {
	local name=$1 h i n best
	for h in A B; do echo '{"total":0,"clients":[]}' >"$T_TMP/$name.obs.$h.json"; done
	for ((i = 0; i < 1200; i++)); do
		[ -e "$T_TMP/$name.done" ] && break
		for h in A B; do
			svc_in "$h" "$MRCCTL" -j service clients >"$T_TMP/$name.snap.$h.json" 2>/dev/null || continue
			n=$(score "$T_TMP/$name.snap.$h.json")
			best=$(score "$T_TMP/$name.obs.$h.json")
			[ "${n:-0}" -gt "$best" ] && cp "$T_TMP/$name.snap.$h.json" "$T_TMP/$name.obs.$h.json"
		done
		sleep 0.1
	done
}

# job NAME PROVIDER ROUNDS [mpirun options]: mpi_job on RPH ranks per host
# (mpi_lib.sh), mrc jobs through the services, their clients watched.
job() {
	local name=$1 wpid
	watch_clients "$name" &
	wpid=$!
	T_PIDS+=("$wpid")
	SVC_DIR=$([ "$2" = "mrc;ofi_rxm" ] && echo "$T_TMP") mpi_job "$1" "$2" "$3" "$RPH" "${@:4}"
	touch "$T_TMP/$name.done"
	wait "$wpid"
}

# served NAME HOST: while NAME ran, HOST's service listed RPH clients, each
# an mpi_check process with QPs that sent and received; on host A, rank 0's
# process had a QP to each other rank (one of them on its own host).
served() {
	local o=$T_TMP/$1.obs.$2.json
	t_eq "$1: service $2 listed the host's ranks" "$(jq .total "$o")" "$RPH"
	t_eq "$1: service $2's clients: mpi_check with QPs that sent and received" \
		"$(jq '[.clients[] | select(.comm == "mpi_check" and .qps > 0 and .tx_bytes > 0 and .rx_bytes > 0) | .pid] | unique | length' "$o")" "$RPH"
	[ "$2" = A ] && t_range "$1: service A: QPs of rank 0's process" "$(jq '[.clients[].qps] | max' "$o")" $((NP - 1)) $((2 * NP))
	[ "$T_FAILS" = 0 ] || cat "$o"
}

# Two processes on host A through its service, without MPI: mrc_perf
# --verify from A to A (WRITE-with-immediate, 4 QPs). The frames loop inside
# the service's engine: A's plane ports carry almost nothing meanwhile.
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
if [ -x "$B_PERF" ]; then
	tx0=0
	for p in 0 1 2 3; do tx0=$((tx0 + $(t_cnt "$(t_ns A)" "$(t_port A "$p" ifname)" tx_bytes))); done
	svc_in A timeout -s INT 60 "$B_PERF" server -d "$(ifs A)" -p 20650 --verify -j -q 4 -i \
		>"$T_TMP/local-server.log" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	svc_in A timeout 60 "$B_PERF" client "$(t_port A 0 ipv4)" -d "$(ifs A)" -p 20650 --verify -j -q 4 -i \
		-D 3 >"$T_TMP/local-client.log" 2>&1
	t_eq "local pair: client exit status" "$?" 0
	wait "$spid"
	t_eq "local pair: server exit status" "$?" 0
	for side in client server; do
		t_eq "local pair: $side verified" \
			"$(grep '"summary"' "$T_TMP/local-$side.log" | jq -r .summary.verify 2>/dev/null)" ok
	done
	t_range "local pair: bytes moved" \
		"$(grep '"summary"' "$T_TMP/local-client.log" | jq -r .summary.bytes 2>/dev/null)" 10000000 1e15
	tx=0
	for p in 0 1 2 3; do tx=$((tx + $(t_cnt "$(t_ns A)" "$(t_port A "$p" ifname)" tx_bytes))); done
	t_range "local pair: bytes A's planes sent meanwhile" "$((tx - tx0))" 0 1000000
	[ "$T_FAILS" = 0 ] || tail -n 5 "$T_TMP"/local-*.log
fi

rx0=()
for p in 0 1 2 3; do rx0[p]=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes); done
t0=$(date +%s)
job mrc "mrc;ofi_rxm" 1 --mca mtl_base_verbose 10
echo "mrc job: $(($(date +%s) - t0)) s"
served mrc A
served mrc B
ifsA=$(ifs A | tr , +)
ifsB=$(ifs B | tr , +)
t_eq "mrc: ranks on host A's planes ($ifsA)" "$(grep -c "mtl:ofi:provider: $ifsA\$" "$T_TMP/mrc.out")" "$RPH"
t_eq "mrc: ranks on host B's planes ($ifsB)" "$(grep -c "mtl:ofi:provider: $ifsB\$" "$T_TMP/mrc.out")" "$RPH"
for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "mrc: bytes B received on plane $p" "$((rx - rx0[p]))" 5000000 100000000000
done

job tcp "tcp;ofi_rxm" 1
t_eq "the same results over tcp" "$(grep -o 'rank . of [0-9]*: .*' "$T_TMP/tcp.out" | sort)" \
	"$(grep -o 'rank . of [0-9]*: .*' "$T_TMP/mrc.out" | sort)"

# Plane 1 blackholed (both directions) once the job is under way; the job
# goes on until the other planes carried 40 MB after it (mpi_lib.sh).
blackhole_midway "$T_TMP/stop" &
T_PIDS+=("$!")
STOP=$T_TMP/stop job blackhole "mrc;ofi_rxm" 50
t_check "blackhole: plane 1 was blackholed" test -e "$T_TMP/stop.blackholed"
served blackhole A
served blackhole B

# Every rank left its service cleanly (2 mrc jobs), nothing broken.
for h in A B; do
	svc_stop "$h"
	t_eq "service $h: exit status" "$?" 0
	left=$((2 * RPH))
	[ "$h" = A ] && [ -x "$B_PERF" ] && left=$((left + 2))
	t_eq "service $h: clients that left" "$(grep -c 'left (' "$T_TMP/svc.$h.log")" "$left"
	t_check "service $h: no broken client" grep -q "broken 0," "$T_TMP/svc.$h.log"
done
t_done
