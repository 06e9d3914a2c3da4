#!/usr/bin/env bash
# mrcctl's command line without a daemon (issue 22): the errno it reports
# matches its message, objects and commands accept unique prefixes (as ip
# and bpftool do), an ambiguous prefix is refused, and "mrcctl OBJECT" alone
# prints that object's help. Needs no root: the socket is a path that does
# not exist.
set -u
M=${MRC_BUILD_DIR:?}/user/tools/mrcctl
sock=$(mktemp -u /tmp/mrcctl-cli.XXXXXX.sock)
fail=0
check() {  # name, condition result
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi
}
out=$("$M" -j -s "$sock" dev show 2>&1)
echo "$out" | grep -q '"errno":2' && echo "$out" | grep -q '"name":"ENOENT"' &&
  echo "$out" | grep -q 'No such file or directory'
check "no daemon: errno 2, ENOENT, and its message ($out)" $?
out=$("$M" -s "$sock" dev sh 2>&1)
echo "$out" | grep -q 'connecting to mrcd' && ! echo "$out" | grep -q 'unknown command'
check "'dev sh' is 'dev show' ($out)" $?
out=$("$M" -s "$sock" ev-p sh 1 2>&1)
echo "$out" | grep -q 'connecting to mrcd'
check "'ev-p sh' is 'ev-profile show' ($out)" $?
out=$("$M" -s "$sock" e show 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q 'ambiguous: ev-fmt, ev-profile, ev$'
check "'e' is ambiguous, exit 2 ($out)" $?
out=$("$M" -s "$sock" ev-fmt 2>/dev/null); rc=$?
[ $rc = 0 ] && echo "$out" | grep -q 'mrcctl ev-fmt create' && echo "$out" | grep -q 'mrcctl ev-fmt delete'
check "'mrcctl ev-fmt' prints its help, exit 0" $?
out=$("$M" -s "$sock" dev bogus 2>&1); rc=$?
[ $rc = 2 ] && echo "$out" | grep -q 'unknown command "bogus"'
check "an unknown command is refused, exit 2" $?
for hop in 12345 g1 '' 1:2; do
  out=$("$M" -s "$sock" ev deny 7 hop "$hop" 2>&1); rc=$?
  [ $rc = 2 ] && echo "$out" | grep -q 'is not a uSID (1-4 hex digits)' && ! echo "$out" | grep -q 'connecting to mrcd'
  check "ev deny 7 hop '$hop' is refused before asking mrcd, exit 2 ($out)" $?
done
out=$("$M" -s "$sock" ev deny 7 hop 0A3 2>&1)
echo "$out" | grep -q 'connecting to mrcd'
check "ev deny 7 hop 0A3 is a uSID: it asks mrcd ($out)" $?
[ $fail = 0 ] && echo "PASS mrcctl_cli" || echo "FAIL mrcctl_cli"
exit $fail
