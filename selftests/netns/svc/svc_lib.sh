# Helpers of the host-service netns tests (Documentation/service.md): one
# mrc-serviced per host namespace, each with its own socket (path sockets are
# not per namespace), stopped in the trap with the fabric.
# shellcheck shell=bash
. "$(dirname "${BASH_SOURCE[0]}")/../../fabric/tests/lib.sh"

SVCD=$MRC_BUILD_DIR/user/svc/mrc-serviced
ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
declare -A SVC_PID
SVC_OPTS=()  # extra mrc-serviced options of the next svc_start
# A line of mrc_perf's JSON with a goodput above zero ("gbps":1.0 and
# "gbps":0.004 match, "gbps":0.0 does not); grep basic regex.
# shellcheck disable=SC2034  # used by the scripts that source this file
SVC_MOVING='"gbps":"\?0*\([1-9]\|\.[0-9]*[1-9]\)'

# How many times HOST's service log says it serves (0 without a log).
svc_serving() {
	local n
	n=$(grep -c "serving" "$T_TMP/svc.$1.log" 2>/dev/null)
	echo "${n:-0}"
}

# svc_start HOST: mrc-serviced in HOST's namespace on its planes; waits
# (bounded) until it accepts connections. Socket: $T_TMP/HOST.sock.
svc_start() {
	local h=$1 i n0 cfg=(--no-config)
	# A test's service reads no configuration file unless the test names
	# one: an /etc/mrc/mrc-serviced.toml on the host must not change it.
	[[ " ${SVC_OPTS[*]} " == *" --config "* ]] && cfg=()
	n0=$(svc_serving "$h")
	ip netns exec "$(t_ns "$h")" "$SVCD" --no-mrcd "${cfg[@]}" --socket "$T_TMP/$h.sock" "${SVC_OPTS[@]}" "$(ifs "$h")" \
		>>"$T_TMP/svc.$h.log" 2>&1 &
	SVC_PID[$h]=$!
	T_PIDS+=("${SVC_PID[$h]}")
	for ((i = 0; i < 1000; i++)); do
		[ "$(svc_serving "$h")" -gt "$n0" ] && return 0
		kill -0 "${SVC_PID[$h]}" 2>/dev/null || break
		sleep 0.01
	done
	echo "mrc-serviced on $h did not start:"
	cat "$T_TMP/svc.$h.log"
	return 1
}

# svc_stop HOST: SIGTERM, wait; its exit status is the result.
svc_stop() {
	local h=$1
	kill -TERM "${SVC_PID[$h]}" 2>/dev/null
	wait "${SVC_PID[$h]}"
}

# svc_wait_log PID FILE REGEX: until FILE has a line matching REGEX (grep
# -q), PID ended, or 10 s passed. Then the caller checks the file.
svc_wait_log() {
	local pid=$1 file=$2 re=$3 i
	for ((i = 0; i < 1000; i++)); do
		grep -q "$re" "$file" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.01
	done
	return 1
}

# In HOST's namespace, with HOST's service socket: svc_in HOST cmd...
svc_in() {
	local h=$1
	shift
	ip netns exec "$(t_ns "$h")" env MRC_SERVICE_SOCKET="$T_TMP/$h.sock" "$@"
}

# svc_metrics_port HOST: the metrics port HOST's service logged last (it
# was started with --metrics 127.0.0.1:0 or a file's metrics key).
svc_metrics_port() {
	grep -o 'metrics at .* (port [0-9]*)' "$T_TMP/svc.$1.log" | tail -n 1 | grep -o '[0-9]*)$' | tr -d ')'
}

# svc_scrape HOST FILE: GET /metrics of HOST's service into FILE (headers
# included); brings the namespace's lo up first.
svc_scrape() {
	ip netns exec "$(t_ns "$1")" ip link set lo up
	ip netns exec "$(t_ns "$1")" timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$(svc_metrics_port "$1") &&
		printf 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' >&3 && cat <&3" >"$2"
}

# svc_need BIN...: fails the test (exit 1) naming the first that is not built.
svc_need() {
	local b
	for b in "$@"; do
		[ -x "$b" ] || { echo "FAIL $T_NAME: $b is not built"; exit 1; }
	done
}

# svc_fabric_up [fabric.sh up parameters]: the 4-plane direct fabric (or the
# one asked for) and a service on each host; exits the test if either fails.
svc_fabric_up() {
	t_up direct "${@:-planes=4}"
	svc_start A || exit 1
	svc_start B || exit 1
}
