#!/usr/bin/env bash
# mpirun's launch agent (--mca plm_rsh_agent) for hosts that are network
# namespaces of a fabric run: `netns_agent.sh HOST COMMAND...` runs COMMAND
# (Open MPI's orted) in HOST's namespace with that host's plane interfaces
# for the mrc provider (FI_MRC_IFACES; FI_TCP_IFACE, plane 0, for the tcp one). MRC_AGENT_STATE names the fabric's state file (the
# hosts and their namespaces); MRC_AGENT_ENV is passed through as the
# provider's other settings (FI_PROVIDER_PATH, ...). MRC_AGENT_SVC_DIR, when
# set, puts the ranks in service mode through HOST's mrc-serviced, whose socket
# is MRC_AGENT_SVC_DIR/HOST.sock (svc_lib.sh's svc_start).
set -euo pipefail
host=$1
shift
ns=$(jq -r --arg h "$host" '.hosts[$h].ns' "$MRC_AGENT_STATE")
ifs=$(jq -r --arg h "$host" '[.hosts[$h].ports[].ifname] | join(",")' "$MRC_AGENT_STATE")
[ -n "$ns" ] && [ "$ns" != null ] || { echo "netns_agent: no host $host" >&2; exit 1; }
svc=""
[ -z "${MRC_AGENT_SVC_DIR:-}" ] || svc="MRC_MODE=service MRC_SERVICE_SOCKET=$MRC_AGENT_SVC_DIR/$host.sock"
# Each host also gets its own UTS namespace named after the host (A, B, ...):
# the namespaces share the machine's hostname and /tmp, and Open MPI names a
# daemon's session directory after its hostname (ompi.HOST.UID/jf.JOBFAM), so
# two daemons called "vm" shared one directory, and a daemon that starts
# removes a session directory it finds for its job family as stale: one
# daemon deleted the other's new directory, that one's orte_init failed after
# it had daemonized (nothing printed, the agent had exited 0) and mpirun
# waited for it without end (1 launch in 10-40; Documentation/libfabric.md,
# "Open MPI launch hang").
# shellcheck disable=SC2086
exec ip netns exec "$ns" unshare --uts env FI_MRC_IFACES="$ifs" FI_TCP_IFACE="${ifs%%,*}" $svc ${MRC_AGENT_ENV:-} \
	sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
