# Shared by the Open MPI netns tests (mpi_test.sh, mpi_multi_test.sh); needs
# lib.sh's t_ns.
# shellcheck shell=bash
# ompi_settle: waits (bounded, 10 s) until no Open MPI daemon (orted) of an
# earlier job is left in the hosts' namespaces. Jobs that follow each other
# at once launched into a host whose daemon was still exiting, and one
# daemon never came up (mpirun then waited for it: 3 hangs on 2026-12-02).
# Each job also gets its own session directory (orte_tmpdir_base): both
# hosts are called "vm" and share /tmp.
ompi_settle() {
	local i h n
	for ((i = 0; i < 100; i++)); do
		n=0
		for h in A B; do
			for pid in $(ip netns pids "$(t_ns "$h")" 2>/dev/null); do
				[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = orted ] && n=$((n + 1))
			done
		done
		[ "$n" = 0 ] && return 0
		sleep 0.1
	done
}
