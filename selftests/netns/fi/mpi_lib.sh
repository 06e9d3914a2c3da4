# shellcheck shell=bash
# Shared by mpi_test.sh and mpi_multi_test.sh (sourced after lib.sh, before
# t_up): Open MPI jobs launched from host A into both host namespaces.
CHECK=$MRC_BUILD_DIR/selftests/netns/fi/mpi_check
PROV_DIR=$MRC_BUILD_DIR/lib/libfabric
. "$(dirname "${BASH_SOURCE[0]}")/ompi_launch.sh"
[ -x "$CHECK" ] || { echo "FAIL $T_NAME: $CHECK is not built"; exit 1; }
[ -f "$PROV_DIR/libmrc-fi.so" ] || { echo "FAIL $T_NAME: libmrc-fi.so is not built"; exit 1; }

# mpi_launch NAME TIMEOUT_S [mpirun options] PROGRAM [ARGS]: ompi_launch
# (ompi_launch.sh) from this test's host A, session trees in T_TMP.
mpi_launch() { ompi_launch "$(t_ns A)" "$ST" "$T_TMP" "$@"; }

# mpi_job NAME PROVIDER ROUNDS RPH [mpirun options]: mpi_check ROUNDS on RPH
# ranks on each of hosts A and B (placed round-robin: A gets ranks 0, 2, ...),
# pml cm + mtl ofi restricted to PROVIDER, output in T_TMP/NAME.out; checks
# the exit status and every rank's number of checks. With STOP=FILE in the
# environment ROUNDS is a bound: mpi_check ends after the round in which FILE
# appeared, and the checks are counted for the rounds it ran.
mpi_job() {
	local name=$1 prov=$2 rounds=$3 np=$(($4 * 2)) rph=$4 args=("$3") r want
	shift 4
	[ -n "${STOP:-}" ] && args+=("$STOP")
	mpi_launch "$name" 600 -np "$np" --host "A:$rph,B:$rph" --map-by node \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" "$@" \
		"$CHECK" "${args[@]}" >"$T_TMP/$name.out" 2>&1
	t_eq "$name: mpirun exit status" "$?" 0
	if [ -n "${STOP:-}" ]; then
		t_range "$name: rounds (ended by $STOP, before the bound)" "$(rounds_of "$T_TMP/$name.out")" 1 $((rounds - 1))
		rounds=$(rounds_of "$T_TMP/$name.out")
	fi
	# Rank 0 echoes with each of the others (46 sizes a round), every rank
	# checks 22 allreduces a round, and the bcast once.
	for ((r = 0; r < np; r++)); do
		want=$((rounds * (22 + 46 * (r == 0 ? np - 1 : 1)) + 1))
		t_eq "$name: rank $r" "$(grep -o "rank $r of $np: .*" "$T_TMP/$name.out")" \
			"rank $r of $np: $want checks passed"
	done
	[ "$T_FAILS" = 0 ] || tail -n 30 "$T_TMP/$name.out"
}

# Bytes host B has received on the planes named: b_rx PLANE...
b_rx() {
	local p sum=0
	for p in "$@"; do
		sum=$((sum + $(t_cnt "$(t_ns B)" "$(t_port B "$p" ifname)" rx_bytes)))
	done
	echo "$sum"
}

# blackhole_midway STOPFILE: run in the background beside a job started with
# mpi_check ROUNDS STOPFILE. Once host B has received 5 MB on plane 1 since
# the call (the job is under way), blackholes plane 1 in both directions and
# creates STOPFILE.blackholed; once planes 0, 2 and 3 together have carried
# 40 MB more (the job went on without the plane), creates STOPFILE, on which
# mpi_check ends after its current round. Counters, not times, decide; it
# gives up after 300 s, leaving the job to end at its round bound.
blackhole_midway() {
	local stop=$1 i base
	base=$(b_rx 1)
	for ((i = 0; i < 3000; i++)); do
		[ $(($(b_rx 1) - base)) -ge 5000000 ] && break
		sleep 0.1
	done
	fabric_plane "$R" 1 blackhole >/dev/null && touch "$stop.blackholed" || return 1
	base=$(b_rx 0 2 3)
	for (( ; i < 3000; i++)); do
		if [ $(($(b_rx 0 2 3) - base)) -ge 40000000 ]; then
			touch "$stop"
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# rounds_of OUT: the rounds a STOPFILE job ran (mpi_check's "K rounds").
rounds_of() { sed -n 's/^mpi_check: \([0-9]*\) rounds$/\1/p' "$1"; }
