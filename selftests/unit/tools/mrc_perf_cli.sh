#!/usr/bin/env bash
# mrc_perf's command line (issue 22): --version prints "mrc_perf VERSION"
# (the project's version), and a bad numeric value names its option and
# exits 2 before any device is opened (no root, no network needed).
set -uo pipefail
: "${MRC_BUILD_DIR:?MRC_BUILD_DIR must name the build directory}"
PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
[ -x "$PERF" ] || { echo "FAIL: $PERF is not built"; exit 1; }
VERSION=$(sed -n 's/^project(mrc VERSION \([0-9.]*\).*/\1/p' "${MRC_SOURCE_DIR:-$(dirname "$0")/../../..}/CMakeLists.txt")
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

for args in "--version" "-V" "server -d x --version"; do
	# shellcheck disable=SC2086
	out=$("$PERF" $args 2>&1)
	rc=$?
	if [ "$rc" = 0 ] && [ "$out" = "mrc_perf $VERSION" ]; then ok "mrc_perf $args: $out"; else fail "mrc_perf $args: rc $rc, '$out' (want 'mrc_perf $VERSION')"; fi
done

# ARGS | expected stderr (exactly)
CASES=(
	"-s abc|mrc_perf: -s/--size: 'abc' is not a number"
	"--size 12x|mrc_perf: -s/--size: '12x' is not a number"
	"-s -1|mrc_perf: -s/--size: '-1' is not a number"
	"-s 99999999999|mrc_perf: -s/--size: '99999999999' is out of range (0..4294967295)"
	"-p 70000|mrc_perf: -p/--port: '70000' is out of range (0..65535)"
	"-D 1s|mrc_perf: -D/--duration: '1s' is not a number"
	"-t 0|mrc_perf: -t/--inflight: '0' is out of range (1..1048576)"
	"-q ''|mrc_perf: -q/--qps: '' is not a number"
	"-m 3k|mrc_perf: -m/--mtu: '3k' is not a number"
	"-n 1e3|mrc_perf: -n/--iters: '1e3' is not a number"
	"--retry 7,x|mrc_perf: --retry: 'x' is not a number"
	"--timeout 32|mrc_perf: --timeout: '32' is out of range (0..31)"
	"--slots abc|mrc_perf: --slots: 'abc' is not a number"
	"--cpu -2|mrc_perf: --cpu: '-2' is out of range (-1..4095)"
	"--frame-chunks 18|mrc_perf: --frame-chunks: '18' is out of range (1..17)"
	"--coalesce 1001|mrc_perf: --coalesce: '1001' is out of range (0..1000)"
	"--coalesce 30us|mrc_perf: --coalesce: '30us' is not a number"
	"--coalesce -1|mrc_perf: --coalesce: '-1' is not a number"
	"--tx live/x|mrc_perf: --tx live/N: 'x' is not a number"
	"--progress-idle-us 0|mrc_perf: --progress-idle-us: '0' is out of range (1..4294967295)"
	"--sched rt|mrc_perf: --sched: engine scheduling mode 'rt' is not one of default, normal, nice, fifo, dedicated"
	"--engine cc_init_window=-1|mrc_perf: --engine cc_init_window: '-1' is not a number"
	"--engine 'cc_init_window= 5'|mrc_perf: --engine cc_init_window: ' 5' is not a number"
	"--engine cc_queue_target_us=1e3|mrc_perf: --engine cc_queue_target_us: '1e3' is not a number"
	"--engine cc_init_window=|mrc_perf: --engine cc_init_window: '' is not a number"
	"--engine cc_delay_md=2|mrc_perf: --engine cc_delay_md: '2' is out of range (0..1)"
	"--engine probe_max_us=3600000001|mrc_perf: --engine probe_max_us: '3600000001' is out of range (0..3600000000)"
	"--engine cc_max_cwnd=4294967296|mrc_perf: --engine cc_max_cwnd: '4294967296' is out of range (0..4294967295)"
	"--engine cc_target_delay_us=4294968|mrc_perf: --engine cc_target_delay_us: '4294968' is out of range (0..4294967)"
	"--engine nosuch=1|mrc_perf: unknown --engine key 'nosuch' (mrc_perf --help lists them)"
)
for c in "${CASES[@]}"; do
	args=${c%%|*}
	want=${c#*|}
	eval "set -- $args"
	err=$("$PERF" client 198.18.0.1 -d x "$@" 2>&1 >/dev/null)
	rc=$?
	if [ "$rc" = 2 ] && [ "$err" = "$want" ]; then ok "$args: $err"; else fail "$args: rc $rc, '$err' (want rc 2, '$want')"; fi
done
# --srv6 FILE is read while parsing: a missing, garbage or empty file is a
# usage error naming the file and line.
d=$(mktemp -d /tmp/mrc-perf-cli.XXXXXX)
trap 'rm -rf "$d"' EXIT
printf '1 fd00:1:101:201:102:402::\n2 not-an-address\n' >"$d/bad"
printf '17 fd00:1:101:201:102:402::\n' >"$d/port"
printf '1\n' >"$d/short"
printf '# only a comment\n\n' >"$d/empty"
SRV6=(
	"$d/missing|mrc_perf: --srv6: cannot read $d/missing: No such file or directory"
	"$d/bad|mrc_perf: --srv6: $d/bad:2: not \"PORT CONTAINER\": Invalid argument"
	"$d/port|mrc_perf: --srv6: $d/port:1: not \"PORT CONTAINER\": Invalid argument"
	"$d/short|mrc_perf: --srv6: $d/short:1: not \"PORT CONTAINER\": Invalid argument"
	"$d/empty|mrc_perf: --srv6: $d/empty lists no EV: Invalid argument"
)
for c in "${SRV6[@]}"; do
	file=${c%%|*}
	want=${c#*|}
	err=$("$PERF" client 198.18.0.1 -d x --srv6 "$file" 2>&1 >/dev/null)
	rc=$?
	if [ "$rc" = 2 ] && [ "$err" = "$want" ]; then ok "--srv6 ${file##*/}: $err"; else fail "--srv6 ${file##*/}: rc $rc, '$err' (want rc 2, '$want')"; fi
done
err=$("$PERF" client 198.18.0.1 -d x --srv6-qps x 2>&1 >/dev/null)
if [ "$err" = "mrc_perf: --srv6-qps: 'x' is not a number" ]; then ok "--srv6-qps x: $err"; else fail "--srv6-qps x: '$err'"; fi

# Good values still parse (the run then fails later, opening the device 'x').
err=$("$PERF" client 198.18.0.1 -d x -s 10001 -t 8 -D 0.5 --retry 7,7 --cpu -1 2>&1 >/dev/null)
if [[ "$err" != *"is not a number"* && "$err" != *"out of range"* ]]; then ok "valid values accepted"; else fail "valid values: $err"; fi

[ "$fails" = 0 ] && { echo "PASS mrc_perf_cli"; exit 0; }
echo "FAIL mrc_perf_cli: $fails check(s) failed"
exit 1
