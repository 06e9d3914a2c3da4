#!/usr/bin/env bash
# Open MPI 4.1 (Debian openmpi-bin) over the mrc provider: one rank per host
# of a direct 4-plane fabric, mpirun in host A launching its daemons into both
# namespaces through netns_agent.sh, pml cm + mtl ofi restricted to
# "mrc;ofi_rxm" (Documentation/libfabric.md, "Running"):
#   - mpi_check (allreduce, point-to-point 1 B..4 MiB, bcast; every result
#     checked) passes on both ranks, each rank's provider domain is its own
#     host's plane set, and every plane carried bytes;
#   - the same job over libfabric's tcp provider ("tcp;ofi_rxm") prints the
#     same results;
#   - a job completes with plane 1 blackholed in its middle (blackholed once
#     plane 1 carried 5 MB of it, told to stop once the other planes carried
#     40 MB more: mpi_lib.sh);
#   - hpcc (Debian's HPC Challenge, unmodified; N=500 on a 1x2 grid) over
#     "mrc;ofi_rxm" reports Success=1, every HPL/PTRANS residual check PASSED
#     and no FAILED one, RandomAccess without errors (skipped, said so,
#     without the hpcc package).
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require mpirun unshare hostname
CHECK=$MRC_BUILD_DIR/selftests/netns/fi/mpi_check
PROV_DIR=$MRC_BUILD_DIR/lib/libfabric
AGENT=$(cd "$(dirname "$0")" && pwd)/netns_agent.sh
. "$(dirname "$0")/mpi_lib.sh"
[ -x "$CHECK" ] || { echo "FAIL $T_NAME: $CHECK is not built"; exit 1; }
[ -f "$PROV_DIR/libmrc-fi.so" ] || { echo "FAIL $T_NAME: libmrc-fi.so is not built"; exit 1; }

t_up direct planes=4
# job NAME PROVIDER ROUNDS [mpirun options]: mpi_check on hosts A and B;
# with STOP=FILE in the environment ROUNDS is a bound (mpi_check's STOPFILE).
# Each job has its own Open MPI session tree in T_TMP (orte_tmpdir_base);
# orte_leave_session_attached keeps each orted attached to its agent, so a
# daemon that fails to start fails the job at once with its message (by
# default it has daemonized first: nothing is printed and mpirun waits for
# it; Documentation/libfabric.md, "Open MPI launch hang").
job() {
	local name=$1 prov=$2 rounds=$3 args=("$3")
	shift 3
	[ -n "${STOP:-}" ] && args+=("$STOP")
	mkdir -p "$T_TMP/ompi.$name"
	ip netns exec "$(t_ns A)" env MRC_AGENT_STATE="$ST" \
		MRC_AGENT_ENV="FI_PROVIDER_PATH=$PROV_DIR FI_OFI_RXM_USE_RNDV_WRITE=1" \
		timeout 600 mpirun --allow-run-as-root -np 2 --host A,B \
		--mca orte_tmpdir_base "$T_TMP/ompi.$name" \
		--mca plm_rsh_agent "$AGENT" --mca plm_rsh_no_tree_spawn 1 --mca orte_leave_session_attached 1 \
		--mca oob_tcp_if_include 198.18.0.0/24 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" "$@" \
		"$CHECK" "${args[@]}" >"$T_TMP/$name.out" 2>&1
	t_eq "$name: mpirun exit status" "$?" 0
	if [ -n "${STOP:-}" ]; then
		t_range "$name: rounds (ended by $STOP, before the bound)" "$(rounds_of "$T_TMP/$name.out")" 1 $((rounds - 1))
		rounds=$(rounds_of "$T_TMP/$name.out")
	fi
	t_eq "$name: rank 0" "$(grep -o 'rank 0 of 2: .*' "$T_TMP/$name.out")" "rank 0 of 2: $((68 * rounds + 1)) checks passed"
	t_eq "$name: rank 1" "$(grep -o 'rank 1 of 2: .*' "$T_TMP/$name.out")" "rank 1 of 2: $((68 * rounds + 1)) checks passed"
	[ "$T_FAILS" = 0 ] || tail -n 30 "$T_TMP/$name.out"
}

rx0=()
for p in 0 1 2 3; do rx0[p]=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes); done
job mrc "mrc;ofi_rxm" 1 --mca mtl_base_verbose 10
ifsA=$(jq -r '[.hosts.A.ports[].ifname] | join("+")' "$ST")
ifsB=$(jq -r '[.hosts.B.ports[].ifname] | join("+")' "$ST")
t_check "mrc: a rank on host A's planes ($ifsA)" grep -q "mtl:ofi:provider: $ifsA\$" "$T_TMP/mrc.out"
t_check "mrc: a rank on host B's planes ($ifsB)" grep -q "mtl:ofi:provider: $ifsB\$" "$T_TMP/mrc.out"
for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "mrc: bytes B received on plane $p" "$((rx - rx0[p]))" 5000000 100000000000
done

job tcp "tcp;ofi_rxm" 1
t_eq "the same results over tcp" "$(grep -o 'rank . of 2: .*' "$T_TMP/tcp.out" | sort)" \
	"$(grep -o 'rank . of 2: .*' "$T_TMP/mrc.out" | sort)"

# Plane 1 blackholed (both directions) once the job is under way; the job
# goes on until the other planes carried 40 MB after it (mpi_lib.sh).
blackhole_midway "$T_TMP/stop" &
T_PIDS+=("$!")
STOP=$T_TMP/stop job blackhole "mrc;ofi_rxm" 100
t_check "blackhole: plane 1 was blackholed" test -e "$T_TMP/stop.blackholed"

if command -v hpcc >/dev/null && [ -f /usr/share/doc/hpcc/examples/_hpccinf.txt ]; then
	fabric_plane "$R" 1 heal >/dev/null
	mkdir -p "$T_TMP/hpcc"
	sed -e 's/^1000         Ns/500          Ns/' -e 's/^2            Ps/1            Ps/' \
		/usr/share/doc/hpcc/examples/_hpccinf.txt >"$T_TMP/hpcc/hpccinf.txt"
	O=$T_TMP/hpcc/hpccoutf.txt
	mkdir -p "$T_TMP/ompi.hpcc"
	ip netns exec "$(t_ns A)" env MRC_AGENT_STATE="$ST" \
		MRC_AGENT_ENV="FI_PROVIDER_PATH=$PROV_DIR FI_OFI_RXM_USE_RNDV_WRITE=1" \
		timeout 900 mpirun --allow-run-as-root -np 2 --host A,B --wdir "$T_TMP/hpcc" \
		--mca orte_tmpdir_base "$T_TMP/ompi.hpcc" \
		--mca plm_rsh_agent "$AGENT" --mca plm_rsh_no_tree_spawn 1 --mca orte_leave_session_attached 1 \
		--mca oob_tcp_if_include 198.18.0.0/24 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "mrc;ofi_rxm" \
		hpcc >"$T_TMP/hpcc/run.out" 2>&1
	rc=$?
	t_eq "hpcc: mpirun exit status" "$rc" 0
	t_eq "hpcc: Success" "$(grep -m1 '^Success=' "$O" 2>/dev/null)" "Success=1"
	t_eq "hpcc: CommWorldProcs" "$(grep -m1 '^CommWorldProcs=' "$O" 2>/dev/null)" "CommWorldProcs=2"
	t_range "hpcc: residual checks PASSED" "$(grep -c 'PASSED' "$O" 2>/dev/null)" 1 1000
	t_eq "hpcc: checks FAILED" "$(grep -c 'FAILED' "$O" 2>/dev/null)" 0
	t_eq "hpcc: MPIRandomAccess errors" "$(grep -m1 '^MPIRandomAccess_Errors=' "$O" 2>/dev/null)" \
		"MPIRandomAccess_Errors=0"
else
	echo "skip hpcc: the hpcc package is not installed (scripts/deps.sh installs it)"
fi
t_done
