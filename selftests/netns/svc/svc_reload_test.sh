#!/usr/bin/env bash
# A storm of reloads under working clients (Documentation/service.md,
# "Configuration", reload): 200 SIGHUPs to host A's mrc-serviced, each after
# its configuration file was replaced (atomically) by one of two valid files
# ([limits] qps = 4 or 6) or, one time in ten, by a file that does not parse,
# while three workers run verified mrc_perf pairs one after another (2, 3
# and 5 QPs; the 5-QP pair is refused with the QP limit's sentence whenever
# it starts under qps = 4). Afterwards: the service is up, every reload was
# taken or refused (180 and 20, each waited for), the last file's limit is
# in force (metrics; -q 5 passes, -q 7 is refused naming 6), every pair
# verified or refused by that limit, no client dropped for anything else,
# and the metrics, scraped all along, always answered with qps 4 or 6.
. "$(dirname "$0")/svc_lib.sh"
t_require timeout jq
B_PERF=$MRC_BUILD_DIR/user/tools/mrc_perf
svc_need "$B_PERF" "$SVCD"
t_up direct planes=4
PEER=$(t_port B 0 ipv4)
PORT=$((23700 + RANDOM % 500))
HUPS=${SVC_RELOAD_HUPS:-200}

CONF=$T_TMP/mrc-serviced.toml
for q in 4 6; do
	printf '[service]\nmetrics = "127.0.0.1:0"\n[limits]\nqps = %s\nclients = 32\n' "$q" >"$T_TMP/q$q.toml"
done
printf '[service]\nmetrics = "127.0.0.1:0"\n[limits]\nqps = \n' >"$T_TMP/bad.toml"
# The first file differs from both in clients: the metrics after the storm
# show what the reloads put in force, not what the service started with.
sed 's/^clients = 32$/clients = 16/' "$T_TMP/q6.toml" >"$CONF"
svc_start B || exit 1
SVC_OPTS=(--config "$CONF")
svc_start A || exit 1
LOG=$T_TMP/svc.A.log

# pair NAME Q PORT: a verified pair of Q QPs through both services (-D 1);
# prints ok, limit (refused by A's QP limit) or "bad ..." (anything else).
pair() {
	local name=$1 q=$2 port=$3 spid cpid crc src v
	ip netns exec "$(t_ns B)" env MRC_MODE=service MRC_SERVICE_SOCKET="$T_TMP/B.sock" timeout -s INT 20 "$B_PERF" server -d "$(ifs B)" -p "$port" \
		-q "$q" --verify -j >"$T_TMP/$name-server.log" 2>&1 &
	spid=$!
	svc_in A env MRC_MODE=service timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p "$port" \
		-D 1 -q "$q" --verify -j >"$T_TMP/$name-client.log" 2>&1 &
	cpid=$!
	wait "$cpid"
	crc=$?
	if [ "$crc" != 0 ]; then kill -INT "$spid" 2>/dev/null; fi
	wait "$spid"
	src=$?
	v=$(grep '"summary"' "$T_TMP/$name-client.log" | jq -r '.summary.verify' 2>/dev/null)
	if [ "$crc" = 0 ] && [ "$src" = 0 ] && [ "$v" = ok ]; then
		echo ok
	elif [ "$crc" != 0 ] && [ "$crc" != 124 ] &&
		grep -qF "service limit: 4 QPs per process ($CONF [limits] qps" "$T_TMP/$name-client.log"; then
		echo limit
	else
		echo "bad: client exit $crc (verify ${v:-none}), server exit $src: $(tail -n 1 "$T_TMP/$name-client.log")"
	fi
}

# worker W Q: pairs of Q QPs one after another until the storm is over (at
# least one); each result a line of $T_TMP/w$W.runs.
worker() {
	local w=$1 q=$2 r=0
	while [ "$r" = 0 ] || [ ! -e "$T_TMP/storm.done" ]; do
		pair "w$w.$r" "$q" $((PORT + w * 100 + r)) >>"$T_TMP/w$w.runs"
		r=$((r + 1))
		[ "$r" -lt 100 ] || break
	done
}
WQ=([1]=2 [2]=3 [3]=5)
declare -A WPID
for w in 1 2 3; do
	worker "$w" "${WQ[$w]}" &
	WPID[$w]=$!
	T_PIDS+=("${WPID[$w]}")
done
# The storm starts once every worker's first pair moves data (bounded, 20 s).
for ((i = 0; i < 2000; i++)); do
	moving=0
	for w in 1 2 3; do
		grep -q "$SVC_MOVING" "$T_TMP/w$w.0-client.log" 2>/dev/null && moving=$((moving + 1))
	done
	[ "$moving" = 3 ] && break
	sleep 0.01
done
t_eq "every worker's first pair moves data before the storm" "$moving" 3

# scraper: GET /metrics of A's service again and again during the storm
# (the metrics thread reads the settings a reload writes); each scrape a
# line of $T_TMP/scrapes: ok (HTTP 200, qps 4 or 6 from the file) or bad.
scraper() {
	local k
	for ((k = 0; k < 2000; k++)); do
		[ -e "$T_TMP/storm.done" ] && break
		svc_scrape A "$T_TMP/scrape.txt"
		if grep -q '^HTTP/1.1 200' "$T_TMP/scrape.txt" && grep -qxF -e \
			"mrc_service_limit{limit=\"qps\",source=\"$CONF [limits] qps\"} 4" -e \
			"mrc_service_limit{limit=\"qps\",source=\"$CONF [limits] qps\"} 6" "$T_TMP/scrape.txt"; then
			echo ok
		else
			echo bad
			cp "$T_TMP/scrape.txt" "$T_TMP/scrape-bad.$k.txt"
		fi
	done >"$T_TMP/scrapes"
}
scraper &
SCRAPER=$!
T_PIDS+=("$SCRAPER")

# The storm: each SIGHUP waits (bounded, 10 s) for the service's answer in
# its log, reloaded or refused.
answers() { grep -c "reloaded $CONF: \|reload refused" "$LOG"; }
good=0
bad=0
t0=$(date +%s.%N)
for ((i = 1; i <= HUPS; i++)); do
	if ((i % 10 == 5)); then
		f=bad
		bad=$((bad + 1))
	else
		f=q$((i % 2 ? 4 : 6))
		good=$((good + 1))
	fi
	cp "$T_TMP/$f.toml" "$CONF.new" && mv -f "$CONF.new" "$CONF"
	n0=$(answers)
	kill -HUP "${SVC_PID[A]}" || break
	for ((j = 0; j < 1000; j++)); do
		[ "$(answers)" -gt "$n0" ] && break
		sleep 0.01
	done
	[ "$(answers)" -gt "$n0" ] || { t_fail "SIGHUP $i ($f): no answer in 10 s"; break; }
done
t_ok "storm: $((i - 1)) SIGHUPs in $(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN { printf \"%.1f\", b - a }") s, last file $f"
touch "$T_TMP/storm.done"
for w in 1 2 3; do wait "${WPID[$w]}"; done
wait "$SCRAPER"
n_scr=$(wc -l <"$T_TMP/scrapes")
t_check "metrics scraped during the storm: $n_scr scrapes, each HTTP 200 with qps 4 or 6" \
	test "$n_scr" -gt 0 -a "$(grep -c '^ok$' "$T_TMP/scrapes")" = "$n_scr"

t_check "the service is up after the storm" kill -0 "${SVC_PID[A]}"
t_eq "reloads taken" "$(grep -c "reloaded $CONF: " "$LOG")" "$good"
t_eq "reloads refused (the broken file, its line named)" \
	"$(grep -c "reload refused, the running configuration stays: $CONF:4: " "$LOG")" "$bad"
t_eq "reloads: nothing waits for a restart" "$(grep -c "kept until a restart" "$LOG")" 0
t_check "the last reload took qps 6" sh -c "grep 'reloaded $CONF: ' '$LOG' | tail -n 1 | grep -q 'qps 6,'"
for w in 1 2 3; do
	runs=$(wc -l <"$T_TMP/w$w.runs")
	ok=$(grep -c '^ok$' "$T_TMP/w$w.runs")
	lim=$(grep -c '^limit$' "$T_TMP/w$w.runs")
	if [ "$runs" -ge 1 ] && [ $((ok + lim)) = "$runs" ] && { [ "${WQ[$w]}" -gt 4 ] || [ "$lim" = 0 ]; }; then
		t_ok "worker $w (-q ${WQ[$w]}): $runs pairs, $ok verified, $lim refused by qps = 4"
	else
		t_fail "worker $w (-q ${WQ[$w]}): $runs pairs, $ok verified, $lim refused by qps = 4"
		grep -v '^ok$\|^limit$' "$T_TMP/w$w.runs"
	fi
done

# The last file's limits in force.
svc_scrape A "$T_TMP/m.txt"
t_check "metrics: qps 6 from the file" grep -qF \
	"mrc_service_limit{limit=\"qps\",source=\"$CONF [limits] qps\"} 6" "$T_TMP/m.txt"
t_check "metrics: clients 32 from the file" grep -qF \
	"mrc_service_limit{limit=\"clients\",source=\"$CONF [limits] clients\"} 32" "$T_TMP/m.txt"
t_eq "metrics: no client broke the protocol" \
	"$(grep '^mrc_service_clients_broken_total ' "$T_TMP/m.txt" | awk '{print $2}')" 0
t_eq "after the storm: a pair of 5 QPs" "$(pair last5 5 $((PORT + 400)))" ok
svc_in A env MRC_MODE=service timeout -s INT 20 "$B_PERF" client "$PEER" -d "$(ifs A)" -p $((PORT + 401)) \
	-D 1 -q 7 >"$T_TMP/last7-client.log" 2>&1
t_check "after the storm: -q 7 refused naming qps 6" grep -qF \
	"service limit: 6 QPs per process ($CONF [limits] qps)" "$T_TMP/last7-client.log"
t_eq "clients that left for anything but their own end (hang-up, close)" \
	"$(grep ' left (' "$LOG" | grep -vc ' left (hung up)\| left (closed its connection)')" 0
[ "$T_FAILS" = 0 ] || tail -n 5 "$LOG"
svc_stop A
t_eq "service A: exit status" "$?" 0
svc_stop B
t_done
