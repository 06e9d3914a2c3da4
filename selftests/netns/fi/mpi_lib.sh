# Shared by mpi_test.sh and mpi_multi_test.sh (sourced after lib.sh and t_up).

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
