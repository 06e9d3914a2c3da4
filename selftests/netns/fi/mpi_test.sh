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
#   - mpi_check refuses a ROUNDS argument that is not wholly a number.
. "$(dirname "$0")/../../fabric/tests/lib.sh"
t_require mpirun unshare hostname
. "$(dirname "$0")/mpi_lib.sh"

t_up direct planes=4
rx0=()
for p in 0 1 2 3; do rx0[p]=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes); done
mpi_job mrc "mrc;ofi_rxm" 1 1 --mca mtl_base_verbose 10
ifsA=$(jq -r '[.hosts.A.ports[].ifname] | join("+")' "$ST")
ifsB=$(jq -r '[.hosts.B.ports[].ifname] | join("+")' "$ST")
t_check "mrc: a rank on host A's planes ($ifsA)" grep -q "mtl:ofi:provider: $ifsA\$" "$T_TMP/mrc.out"
t_check "mrc: a rank on host B's planes ($ifsB)" grep -q "mtl:ofi:provider: $ifsB\$" "$T_TMP/mrc.out"
for p in 0 1 2 3; do
	rx=$(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)
	t_range "mrc: bytes B received on plane $p" "$((rx - rx0[p]))" 5000000 100000000000
done

mpi_job tcp "tcp;ofi_rxm" 1 1
# A ROUNDS that is not wholly a number is refused (atoi read "5x" as 5).
mpi_launch badrounds 120 -np 1 --host A:1 --mca pml ob1 --mca btl self "$CHECK" 5x >"$T_TMP/badrounds.out" 2>&1
t_check "mpi_check 5x: refused, naming the argument" grep -q "ROUNDS (1-1000000) .*bad '5x'" "$T_TMP/badrounds.out"
t_eq "the same results over tcp" "$(grep -o 'rank . of 2: .*' "$T_TMP/tcp.out" | sort)" \
	"$(grep -o 'rank . of 2: .*' "$T_TMP/mrc.out" | sort)"

# Plane 1 blackholed (both directions) once the job is under way; the job
# goes on until the other planes carried 40 MB after it (mpi_lib.sh).
blackhole_midway "$T_TMP/stop" &
T_PIDS+=("$!")
STOP=$T_TMP/stop mpi_job blackhole "mrc;ofi_rxm" 100 1
t_check "blackhole: plane 1 was blackholed" test -e "$T_TMP/stop.blackholed"

if command -v hpcc >/dev/null && [ -f /usr/share/doc/hpcc/examples/_hpccinf.txt ]; then
	fabric_plane "$R" 1 heal >/dev/null
	mkdir -p "$T_TMP/hpcc"
	sed -e 's/^1000         Ns/500          Ns/' -e 's/^2            Ps/1            Ps/' \
		/usr/share/doc/hpcc/examples/_hpccinf.txt >"$T_TMP/hpcc/hpccinf.txt"
	O=$T_TMP/hpcc/hpccoutf.txt
	mpi_launch hpcc 900 -np 2 --host A,B --wdir "$T_TMP/hpcc" \
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
