#!/usr/bin/env bash
# mrc-serviced's command line (issue 23): a garbage value of a --max-* (or
# other numeric) option -- negative, not a number, past its range, beyond
# 64 bits, empty, with blanks or a sign -- is refused before anything starts:
# exit status 2, a sentence naming the option, no socket file. A good value
# passes the parse (the run then fails opening an interface that does not
# exist: exit 1, no "bad value"). A bad configuration file: exit 2 with
# FILE:LINE. Needs no root.
set -u
S=${MRC_BUILD_DIR:?}/user/svc/mrc-serviced
sock=$(mktemp -u /tmp/serviced-cli.XXXXXX.sock)
fail=0
check() { # name, condition result
	if [ "$2" = 0 ]; then echo "ok   $1"; else
		echo "FAIL $1"
		fail=1
	fi
}
for opt in --max-qps --max-cqs --max-mrs --max-mr-mib --max-clients --max-clients-per-uid --max-wr --max-cqe \
	--area-mib --queues --udp-port --cpu --idle-spin-us --coalesce-us --socket-mode --tomb-linger-ms \
	--max-tombstones; do
	for v in -1 -18446744073709551615 abc 12abc '' ' 5' +5 1e3 99999999999999999999 18446744073709551616 \
		4294967296; do
		out=$(timeout 10 "$S" --socket "$sock" "$opt" "$v" nosuchif0 2>&1)
		rc=$?
		[ $rc = 2 ] && echo "$out" | grep -qF -- "bad value for $opt: '$v'" && [ ! -e "$sock" ]
		check "$opt '$v': exit 2 naming the option, nothing started (exit $rc: $out)" $?
	done
done
out=$(timeout 10 "$S" --socket "$sock" --max-qps 2>&1)
rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF -- "--max-qps needs a value"
check "--max-qps without a value: exit 2 ($out)" $?
out=$(timeout 10 "$S" --socket "$sock" --area-mib 0 nosuchif0 2>&1)
rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF -- "--area-mib must be at least 1"
check "--area-mib 0: exit 2 ($out)" $?
# The scheduling options (item 8): a mode that is not one of the five, and a
# nice value outside -20..19 or not a whole number, are refused the same way.
for v in bogus '' FIFO 'nice ' fifo,nice; do
	out=$(timeout 10 "$S" --socket "$sock" --sched "$v" nosuchif0 2>&1)
	rc=$?
	[ $rc = 2 ] && echo "$out" | grep -qF -- "--sched: engine scheduling mode '$v' is not one of" && [ ! -e "$sock" ]
	check "--sched '$v': exit 2 naming the modes (exit $rc: $out)" $?
done
for v in 20 -21 abc '' 5x ' 5' 1.5 99999999999999999999 -9223372036854775809; do
	out=$(timeout 10 "$S" --socket "$sock" --nice "$v" nosuchif0 2>&1)
	rc=$?
	[ $rc = 2 ] && echo "$out" | grep -qF -- "--nice takes -20..19, not $v" && [ ! -e "$sock" ]
	check "--nice '$v': exit 2 (exit $rc: $out)" $?
done
for v in xdp '' LIVE; do
	out=$(timeout 10 "$S" --socket "$sock" --tx "$v" nosuchif0 2>&1)
	rc=$?
	[ $rc = 2 ] && echo "$out" | grep -qF -- "--tx takes xsk, live or auto" && [ ! -e "$sock" ]
	check "--tx '$v': exit 2 (exit $rc: $out)" $?
done
for a in "--sched normal" "--sched nice --nice -20" "--sched fifo --nice 19" "--nice 0" "--tx live"; do
	# shellcheck disable=SC2086 # two words each, on purpose
	out=$(timeout 10 "$S" --socket "$sock" $a nosuchif0 2>&1)
	rc=$?
	[ $rc = 1 ] && ! echo "$out" | grep -q 'takes\|is not one of'
	check "$a passes the parse (exit $rc: $out)" $?
done
out=$(timeout 10 "$S" --socket "$sock" --max-qps 7 --max-mr-mib 0x10 --socket-mode 0600 nosuchif0 2>&1)
rc=$?
[ $rc = 1 ] && ! echo "$out" | grep -q 'bad value'
check "good values pass the parse (exit $rc: $out)" $?
# The configuration file: a bad one is refused the same way, naming FILE:LINE.
conf=$(mktemp /tmp/serviced-cli.XXXXXX.toml)
printf '[limits]\nqps = -3\n' >"$conf"
out=$(timeout 10 "$S" --socket "$sock" --config "$conf" nosuchif0 2>&1)
rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF -- "$conf:2: limits.qps = -3 is outside" && [ ! -e "$sock" ]
check "bad file: exit 2 naming FILE:LINE, nothing started (exit $rc: $out)" $?
out=$(timeout 10 "$S" --socket "$sock" --config /nonexistent/mrc-serviced.toml nosuchif0 2>&1)
rc=$?
[ $rc = 2 ] && echo "$out" | grep -qF -- "/nonexistent/mrc-serviced.toml"
check "missing file: exit 2 naming it (exit $rc: $out)" $?
printf '[limits]\nqps = 3\n' >"$conf"
out=$(timeout 10 "$S" --config "$conf" --check nosuchif0 2>&1)
check "--check of a good file: exit 0 ($out)" $?
rm -f "$sock" "$conf"
exit $fail
