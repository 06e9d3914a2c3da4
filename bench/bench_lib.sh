# Shared by the bench/*.sh scripts (sourced, after ROOT is set): a veth fabric
# of two hosts for this run, torn down on exit with the server left running.
#
#   bench_fabric_up ARGS...   `fabric.sh up direct ARGS...`; sets RUN, STATE
#                             (its state file), NSA and NSB (the hosts'
#                             namespaces), DEVA and DEVB (their plane
#                             interfaces, comma-separated) and B0 (host B's
#                             first plane address)
#   SPID                      a background server to stop on exit (its PID)
#   bench_setup NAME BIN...   root or exit 77, every BIN built or exit 1,
#                             MRC_BUILD_DIR=$BUILD exported, OUT (default a
#                             new /tmp/mrc-NAME.XXXXXX) made
FABRIC=$ROOT/selftests/fabric/fabric.sh
RUN= SPID=
bench_cleanup() {
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
  [ -n "$RUN" ] && "$FABRIC" down "$RUN" >/dev/null 2>&1 || true
}
trap bench_cleanup EXIT INT TERM

bench_setup() {
  local name=$1 b
  shift
  [ "$(id -u)" -eq 0 ] || { echo "$name: needs root" >&2; exit 77; }
  for b in "$@"; do [ -x "$b" ] || { echo "$name: $b not built" >&2; exit 1; }; done
  export MRC_BUILD_DIR=$BUILD
  OUT=${OUT:-$(mktemp -d "/tmp/mrc-$name.XXXXXX")}
  mkdir -p "$OUT"
}

bench_fabric_up() {
  RUN=$("$FABRIC" up direct "$@" | tail -1)
  STATE=$("$FABRIC" state "$RUN")
  read -r NSA NSB DEVA DEVB B0 < <(python3 -c "import json,sys
h = json.load(open(sys.argv[1]))['hosts']
devs = lambda n: ','.join(p['ifname'] for p in h[n]['ports'])
print(h['A']['ns'], h['B']['ns'], devs('A'), devs('B'), h['B']['ports'][0]['ipv4'])" "$STATE")
}
