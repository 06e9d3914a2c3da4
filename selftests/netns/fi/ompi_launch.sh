# shellcheck shell=bash
# Open MPI jobs across the hosts of a fabric run (sourced by mpi_lib.sh and
# bench/fi_hpcc.sh).
#
# ompi_launch NS_A STATE TMPDIR NAME TIMEOUT_S [mpirun options] PROGRAM [ARGS]:
# mpirun in host A's namespace NS_A, its daemons started in the hosts of the
# fabric's state file STATE by netns_agent.sh (through the services whose
# sockets are SVC_DIR/HOST.sock when SVC_DIR is set), the provider found in
# PROV_DIR (OMPI_ENV: more VAR=VALUE settings for every rank). Each job has its own Open MPI session tree, TMPDIR/ompi.NAME
# (orte_tmpdir_base); orte_leave_session_attached keeps each orted attached
# to its agent, so a daemon that fails to start fails the job at once with
# its message (by default it has daemonized first: nothing is printed and
# mpirun waits for it; Documentation/libfabric.md, "Open MPI launch hang").
OMPI_AGENT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_agent.sh
ompi_launch() {
	local ns=$1 state=$2 tmp=$3 name=$4 t=$5
	shift 5
	mkdir -p "$tmp/ompi.$name"
	ip netns exec "$ns" env MRC_AGENT_STATE="$state" MRC_AGENT_SVC_DIR="${SVC_DIR:-}" \
		MRC_AGENT_ENV="FI_PROVIDER_PATH=$PROV_DIR FI_OFI_RXM_USE_RNDV_WRITE=1${OMPI_ENV:+ $OMPI_ENV}" \
		timeout "$t" mpirun --allow-run-as-root --mca orte_tmpdir_base "$tmp/ompi.$name" \
		--mca plm_rsh_agent "$OMPI_AGENT" --mca plm_rsh_no_tree_spawn 1 --mca orte_leave_session_attached 1 \
		--mca oob_tcp_if_include 198.18.0.0/24 "$@"
}
