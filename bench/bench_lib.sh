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
#   bench_svc_up NAME [BIN]   mrc-serviced (BIN, default $SVCD) on each host's
#                             planes, sockets OUT/A.sock and OUT/B.sock, logs
#                             OUT/svc.{A,B}.log; waits (bounded) until both
#                             serve, else prints the logs and exits 1.
#                             PIDs in SVA, SVB
#   bench_svc_down            stops both (SIGTERM, wait)
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

SVA= SVB=
bench_svc_down() {
  local p
  for p in $SVA $SVB; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SVA= SVB=
}
bench_svc_up() { # NAME [BIN [ARGS...]]: ARGS for both services
  local name=$1 bin=${2:-$SVCD} i nc=
  shift $(($# < 2 ? $# : 2))
  # no configuration file (an older binary, -A of svc_fair.sh, reads none)
  "$bin" --help 2>&1 | grep -q -- --no-config && nc=--no-config
  : >"$OUT/svc.A.log"; : >"$OUT/svc.B.log"
  ip netns exec "$NSA" "$bin" --no-mrcd $nc --socket "$OUT/A.sock" "$@" "$DEVA" >>"$OUT/svc.A.log" 2>&1 &
  SVA=$!
  ip netns exec "$NSB" "$bin" --no-mrcd $nc --socket "$OUT/B.sock" "$@" "$DEVB" >>"$OUT/svc.B.log" 2>&1 &
  SVB=$!
  for ((i = 0; i < 1000; i++)); do
    grep -q serving "$OUT/svc.A.log" && grep -q serving "$OUT/svc.B.log" && return 0
    sleep 0.01
  done
  echo "$name: the services did not start" >&2
  cat "$OUT"/svc.*.log >&2
  exit 1
}
