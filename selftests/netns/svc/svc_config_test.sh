#!/usr/bin/env bash
# mrc-serviced's configuration file and metrics endpoint (Documentation/
# service.md, "Configuration" and "Metrics"):
#  1. a bad file is refused before anything starts: exit 2, FILE:LINE and
#     the reason, no socket;
#  2. a limit from the file ([limits] qps = 2) refuses mrc_perf -q 3 with
#     ENOMEM and the sentence naming the file's key; an option overrides it;
#  3. the metrics endpoint ([service] metrics) scraped during a verified
#     transfer: the client's pid, uid and comm, tx bytes > 0 and bracketed by
#     `mrcctl -j service clients` between two scrapes, QPs equal; the engine
#     thread's scheduling in the metrics equals mrcctl's; on B (metrics from
#     the option) the server's rx bytes bracketed the same way;
#  4. SIGHUP reloads the file into the running service: [limits] qps = 4
#     lets mrc_perf -q 3 through where qps = 2 refused it, the metrics show
#     the new limit, a changed [engine] key is named as waiting for a
#     restart; a file that no longer parses is refused with FILE:LINE and
#     the running limits stay (-q 3 still passes, -q 5 refused by 4).
. "$(dirname "$0")/svc_lib.sh"
t_require timeout jq
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
B_CTL=$MRC_BUILD_DIR/user/tools/mrcctl
svc_need "$B_PERF" "$SVCD" "$B_CTL"
t_up direct planes=4
PEER=$(t_port B 0 ipv4)
PORT=$((22700 + RANDOM % 1000))

# 1. A bad file: exit 2, FILE:LINE: reason, nothing started.
BAD=$T_TMP/bad.toml
printf '[limits]\nqps = 2\nqp = 3\n' >"$BAD"
ip netns exec "$(t_ns A)" timeout 10 "$SVCD" --no-mrcd --config "$BAD" --socket "$T_TMP/bad.sock" "$(ifs A)" \
	>"$T_TMP/bad.log" 2>&1
rc=$?
t_eq "bad file: exit status" "$rc" 2
if grep -q "$BAD:3: unknown key limits.qp" "$T_TMP/bad.log"; then
	t_ok "bad file: $(head -n 1 "$T_TMP/bad.log")"
else
	t_fail "bad file: no '$BAD:3: unknown key limits.qp'"
	cat "$T_TMP/bad.log"
fi
t_check "bad file: no socket created" test ! -e "$T_TMP/bad.sock"
printf '[limits]\nqps = 2\n' >"$T_TMP/good.toml"
t_check "good file: --check" "$SVCD" --config "$T_TMP/good.toml" --check eth0

# 2. The file's limit, then an option over it.
CONF=$T_TMP/mrc-serviced.toml
cat >"$CONF" <<EOT
[service]
metrics = "127.0.0.1:0"
[limits]
qps = 2
EOT
# B's service serves metrics from the option (its server's received bytes).
SVC_OPTS=(--metrics 127.0.0.1:0)
svc_start B || exit 1
# run NAME QPS: a verified pair through the services, the client's exit status.
run() {
	local name=$1 q=$2 port=$((PORT + n))
	n=$((n + 1))
	ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" timeout -s INT 20 "$B_PERF" server -d "$(ifs B)" -p "$port" \
		-q "$q" --verify >"$T_TMP/$name-server.log" 2>&1 &
	local spid=$!
	T_PIDS+=("$spid")
	svc_in A env MRC_MODE=service timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" \
		-D 1 -q "$q" --verify >"$T_TMP/$name-client.log" 2>&1
	local rc=$?
	kill -INT "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return $rc
}
n=0
SVC_OPTS=(--config "$CONF")
svc_start A || exit 1
run file 3
rc=$?
t_check "file limit: client failed (exit $rc)" test "$rc" != 0 -a "$rc" != 124
want="service limit: 2 QPs per process ($CONF [limits] qps)"
if grep -qF "$want" "$T_TMP/file-client.log"; then t_ok "file limit: $want"; else
	t_fail "file limit: no '$want' in the client's error"
	tail -n 3 "$T_TMP/file-client.log"
fi
svc_stop A
t_eq "service A (file): exit status" "$?" 0
SVC_OPTS=(--config "$CONF" --max-qps 1)
svc_start A || exit 1
run option 2
want="service limit: 1 QPs per process (--max-qps)"
if grep -qF "$want" "$T_TMP/option-client.log"; then t_ok "option over the file: $want"; else
	t_fail "option over the file: no '$want'"
	tail -n 3 "$T_TMP/option-client.log"
fi
svc_stop A

# 3. Metrics during a verified transfer.
SVC_OPTS=(--config "$CONF")
svc_start A || exit 1
MPORT=$(svc_metrics_port A)
BPORT=$(svc_metrics_port B)
t_check "metrics: the services name their ports (${MPORT:-none}, ${BPORT:-none})" test -n "$MPORT" -a -n "$BPORT"
# scrape FILE [HOST]: GET /metrics of A's service (or HOST's).
scrape() { svc_scrape "${2:-A}" "$1"; }
port=$((PORT + 10))
ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" timeout -s INT 30 "$B_PERF" server -d "$(ifs B)" -p "$port" \
	-q 2 --verify -j >"$T_TMP/m-server.log" 2>&1 &
spid=$!
T_PIDS+=("$spid")
ip netns exec "$(t_ns A)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/A.sock" timeout -s INT 30 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" \
	-D 8 -q 2 --verify -j >"$T_TMP/m-client.log" 2>&1 &
cpid=$!
T_PIDS+=("$cpid")
# Bounded wait (10 s) for data moving.
for ((i = 0; i < 1000; i++)); do
	grep -q "$SVC_MOVING" "$T_TMP/m-client.log" 2>/dev/null && break
	sleep 0.01
done
# The client's pid is mrc_perf's: timeout forks it. Its child of timeout.
ppid=$(pgrep -P "$cpid" -x mrc_perf | head -n 1)
ppid=${ppid:-$(pgrep -P "$(pgrep -P "$cpid" | head -n 1)" -x mrc_perf | head -n 1)}
# The server's, the same way and now, while both run: looked up after the
# scrapes it may have ended already (stop 34's rehearsal: "want ''").
srv_pid=$(pgrep -P "$spid" -x mrc_perf | head -n 1)
srv_pid=${srv_pid:-$(pgrep -P "$(pgrep -P "$spid" | head -n 1)" -x mrc_perf | head -n 1)}
scrape "$T_TMP/m1.txt"
scrape "$T_TMP/b1.txt" B
svc_in A "$B_CTL" -j service clients >"$T_TMP/ctl.json"
svc_in B "$B_CTL" -j service clients >"$T_TMP/ctlb.json"
scrape "$T_TMP/m2.txt"
scrape "$T_TMP/b2.txt" B
t_check "metrics: HTTP 200" grep -q '^HTTP/1.1 200' "$T_TMP/m1.txt"
cpid_ctl=$(jq -r '.clients[] | select(.comm == "mrc_perf") | .pid' "$T_TMP/ctl.json" | head -n 1)
t_eq "mrcctl: the client's pid" "${cpid_ctl:-none}" "${ppid:-no mrc_perf}"
# mval FILE FAMILY: the sample of the client's pid.
mval() { grep "^$2{" "$1" | grep "pid=\"$ppid\"" | awk '{print $2}' | head -n 1; }
t_check "metrics: the client's comm and uid" grep -q "^mrc_service_client_qps{client=\"[0-9]*\",pid=\"$ppid\",uid=\"0\",comm=\"mrc_perf\"} 2$" "$T_TMP/m1.txt"
ctl_tx=$(jq -r --argjson p "$ppid" '.clients[] | select(.pid == $p) | .tx_bytes' "$T_TMP/ctl.json")
ctl_qps=$(jq -r --argjson p "$ppid" '.clients[] | select(.pid == $p) | .qps' "$T_TMP/ctl.json")
m1=$(mval "$T_TMP/m1.txt" mrc_service_client_tx_bytes_total)
m2=$(mval "$T_TMP/m2.txt" mrc_service_client_tx_bytes_total)
t_check "metrics: tx bytes > 0 (${m1:-none})" test "${m1:-0}" -gt 0
if [ "${m1:-0}" -gt 0 ] && [ "$m1" -le "${ctl_tx:-0}" ] && [ "${ctl_tx:-0}" -le "${m2:-0}" ]; then
	t_ok "metrics and mrcctl agree: tx bytes $m1 <= $ctl_tx <= $m2"
else
	t_fail "metrics and mrcctl disagree: tx bytes $m1, mrcctl $ctl_tx, then $m2"
fi
# B: the server's received bytes, by its pid as mrcctl names it.
spid_ctl=$(jq -r '.clients[] | select(.comm == "mrc_perf") | .pid' "$T_TMP/ctlb.json" | head -n 1)
ctlb_rx=$(jq -r '.clients[] | select(.comm == "mrc_perf") | .rx_bytes' "$T_TMP/ctlb.json" | head -n 1)
t_eq "mrcctl on B: the server's pid" "${spid_ctl:-none}" "${srv_pid:-no mrc_perf}"
bval() { grep "^mrc_service_client_rx_bytes_total{" "$1" | grep "pid=\"${spid_ctl:-none}\"" | awk '{print $2}' | head -n 1; }
b1=$(bval "$T_TMP/b1.txt")
b2=$(bval "$T_TMP/b2.txt")
if [ "${b1:-0}" -gt 0 ] && [ "$b1" -le "${ctlb_rx:-0}" ] && [ "${ctlb_rx:-0}" -le "${b2:-0}" ]; then
	t_ok "B's metrics and mrcctl agree: server pid $spid_ctl, rx bytes $b1 <= $ctlb_rx <= $b2"
else
	t_fail "B's metrics and mrcctl disagree: server pid ${spid_ctl:-none}, rx bytes ${b1:-none}, mrcctl ${ctlb_rx:-none}, then ${b2:-none}"
fi
t_eq "metrics and mrcctl: QPs" "$(mval "$T_TMP/m2.txt" mrc_service_client_qps)" "${ctl_qps:-none}"
t_eq "metrics: clients" "$(grep '^mrc_service_clients ' "$T_TMP/m2.txt" | awk '{print $2}')" \
	"$(jq -r '.total' "$T_TMP/ctl.json")"
t_check "metrics: the file's limit and its source" grep -qF \
	"mrc_service_limit{limit=\"qps\",source=\"$CONF [limits] qps\"} 2" "$T_TMP/m1.txt"
if command -v promtool >/dev/null; then
	sed '1,/^\r$/d' "$T_TMP/m2.txt" >"$T_TMP/m2.body"
	t_eq "promtool check metrics" "$(promtool check metrics <"$T_TMP/m2.body" 2>&1)" ""
fi
msched=$(grep '^mrc_service_engine_sched{' "$T_TMP/m1.txt" | grep -o 'mode="[a-z]*"' | cut -d'"' -f2)
t_eq "engine scheduling: metrics and mrcctl" "$msched" "$(jq -r '.engine.sched' "$T_TMP/ctl.json")"
t_ok "engine thread: $(jq -r '.engine.sched_why' "$T_TMP/ctl.json")"
wait "$cpid"
crc=$?
wait "$spid"
src=$?
cv=$(grep '"summary"' "$T_TMP/m-client.log" | jq -r '.summary.verify' 2>/dev/null)
if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$cv" = ok ]; then t_ok "metrics: the transfer verified"; else
	t_fail "metrics: client exit $crc (verify ${cv:-none}), server exit $src"
	tail -n 3 "$T_TMP/m-client.log" "$T_TMP/m-server.log"
fi

# 4. Reload by SIGHUP. hup PATTERN: SIGHUP to A's service, then wait
# (bounded, 10 s) for its log to gain a line matching PATTERN.
hup() {
	local n0 i
	n0=$(grep -c -- "$1" "$T_TMP/svc.A.log")
	kill -HUP "${SVC_PID[A]}"
	for ((i = 0; i < 1000; i++)); do
		[ "$(grep -c -- "$1" "$T_TMP/svc.A.log")" -gt "$n0" ] && return 0
		sleep 0.01
	done
	return 1
}
sed -i 's/^qps = 2$/qps = 4/' "$CONF"
printf '[engine]\nnice = -5\n' >>"$CONF"
t_check "reload: the service logged it" hup "reloaded $CONF: .* qps 4,"
t_check "reload: the changed engine key waits for a restart" \
	grep -q "changed, but kept until a restart: engine.nice$" "$T_TMP/svc.A.log"
run reload 3
t_eq "reload: mrc_perf -q 3 after qps = 4" "$?" 0
scrape "$T_TMP/m3.txt"
t_check "reload: the metrics show the new limit" grep -qF \
	"mrc_service_limit{limit=\"qps\",source=\"$CONF [limits] qps\"} 4" "$T_TMP/m3.txt"
printf 'qps = \n' >>"$CONF"
bad_line=$(wc -l <"$CONF")
t_check "reload of a bad file: refused" hup "reload refused"
t_check "reload of a bad file: the refusal names $CONF:$bad_line" \
	grep -q "reload refused, the running configuration stays: $CONF:$bad_line: " "$T_TMP/svc.A.log"
run kept 3
t_eq "reload of a bad file: mrc_perf -q 3 still passes" "$?" 0
run kept5 5
t_check "reload of a bad file: mrc_perf -q 5 refused by the kept limit" grep -qF \
	"service limit: 4 QPs per process ($CONF [limits] qps)" "$T_TMP/kept5-client.log"
[ "$T_FAILS" = 0 ] || tail -n 5 "$T_TMP/svc.A.log"
svc_stop A
t_eq "service A: exit status" "$?" 0
svc_stop B
t_done
