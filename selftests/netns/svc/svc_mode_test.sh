#!/usr/bin/env bash
# Mode selection of libmrc (Documentation/service.md, "How libmrc finds the
# service"), through the C API on a 4-plane fabric:
#  - no service at the socket: exclusive mode, and the reason names the path (ENOENT);
#  - MRC_MODE=service without a service: the open fails (ENOENT), no fallback;
#  - a service runs: service mode, the reason names its pid and socket;
#  - MRC_MODE=exclusive, or the MRC_DEVICE_EXCLUSIVE flag, while it runs: EBUSY
#    naming mrc-serviced and its pid;
#  - the service up, a device on other interfaces than it serves: refused with
#    the service's sentence, no fallback;
#  - MRC_MODE=bogus: EINVAL;
#  - after the service stops: exclusive again (it left the planes free).
. "$(dirname "$0")/svc_lib.sh"
t_require
H=$MRC_BUILD_DIR/selftests/netns/svc/svc_mode_helper
[ -x "$H" ] || { echo "FAIL $T_NAME: $H is not built"; exit 1; }
t_up direct planes=4
IFS_A=$(ifs A)
TWO=$(jq -r '[.hosts.A.ports[0:2][].ifname] | join(",")' "$ST")

# mode [env...] -- args: the helper's output line
mode() {
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	svc_in A env "${envs[@]}" "$H" "$@" 2>/dev/null
}
match() { # DESC TEXT REGEX
	if [[ $2 =~ $3 ]]; then t_ok "$1: $2"; else t_fail "$1: got '$2', want /$3/"; fi
}

match "no service" "$(mode -- "$IFS_A")" "^mode exclusive: exclusive mode: no service at $T_TMP/A.sock \(ENOENT\)$"
match "service required, none" "$(mode MRC_MODE=service -- "$IFS_A")" \
	"^open failed errno ENOENT: .*service mode required \(MRC_MODE=service\): no service at $T_TMP/A.sock"
svc_start A || exit 1
P=${SVC_PID[A]}
# ip netns exec runs the service as its own child: the pid in the reason is
# the service's own, which pgrep finds under the one we started.
SP=$(pgrep -P "$P" -x mrc-serviced || echo "$P")
match "service up" "$(mode -- "$IFS_A")" "^mode service: service mode: mrc-serviced pid $SP at $T_TMP/A.sock$"
match "MRC_MODE=exclusive with the service" "$(mode MRC_MODE=exclusive -- "$IFS_A")" \
	"^open failed errno EBUSY: .*the planes are held by mrc-serviced \(pid $SP at $T_TMP/A.sock\)"
match "exclusive flag with the service" "$(mode -- -x "$IFS_A")" \
	"^open failed errno EBUSY: .*the planes are held by mrc-serviced \(pid $SP at $T_TMP/A.sock\)"
match "other interfaces" "$(mode -- "$TWO")" "^open failed errno EINVAL: .*mrc-serviced serves the planes $IFS_A"
match "MRC_MODE=bogus" "$(mode MRC_MODE=bogus -- "$IFS_A")" "^open failed errno EINVAL: .*MRC_MODE=bogus"
svc_stop A
t_eq "service exit status" "$?" 0
t_eq "service: clients served, broken" "$(grep -o 'clients served [0-9]*, broken [0-9]*' "$T_TMP/svc.A.log")" \
	"clients served 4, broken 0" # the open, two EBUSY probes, the refused open
match "service stopped" "$(mode -- "$IFS_A")" "^mode exclusive: exclusive mode: no service at"
t_done
