#!/usr/bin/env bash
# libfabric's fi_pingpong (Debian libfabric-bin) over the mrc provider against
# the same program over libfabric's own tcp provider, on the same 4-plane veth
# fabric, interleaved (mrc, then tcp, in every round; "mrc" runs with
# FI_MRC_PROGRESS=thread, the engine thread; -a adds "mrc-app" between them,
# FI_MRC_PROGRESS=app, the provider's default since 2026-12-02):
#
#   rdm: "mrc;ofi_rxm" against "tcp;ofi_rxm" (FI_EP_RDM, what MPI uses; rxm's
#        default rendezvous by RMA read for both: its write rendezvous loses
#        the data under fi_pingpong in 1.17, see fi_pingpong_test.sh)
#   msg: "mrc" against "tcp" (FI_EP_MSG)
#
# per round and pair: bandwidth at 1 MiB (-S 1048576) and the mean time per
# transfer at 8 B (-S 8; fi_pingpong prints the mean, no percentiles). Prints
# a table of every round and the medians; raw outputs stay in OUT.
# -L adds "live-app" after them: application progress with FI_MRC_TX=live
# (XDP live frames, Documentation/xdp-tx.md; path MTU at most ~3.2 KB).
# -x 'NAME VAR=VALUE...' adds variant NAME (at most 8 characters) the same
# way: application progress with these environment variables (-L and -x
# variants run in the order given; a NAME given again replaces it), e.g.
# -x 'noqa FI_MRC_TX=live MRC_ENGINE=cc_qa=0' (libmrc's engine tunables,
# Documentation/api.md "Device options"); repeatable.
# -B DIR adds the provider DIR/libmrc-fi.so (another build, e.g. the one
# before a change) as variant "base" between mrc and tcp in every round (a
# second -B as "base2"); it runs on BUILD's libmrc (LD_LIBRARY_PATH), so only
# the provider differs. -I BW,LAT: round trips at 1 MiB and at 8 B.
# -s: instead of timing, count system calls: every run under `strace -f -c`
# (all threads: libmrc's engine thread too), each size twice (I and 2I round
# trips), and prints per side the calls per round trip (the difference of
# the two runs over I, so setup and teardown cancel out): in all, without
# the calls that wait (sched_yield, poll, ppoll, epoll_wait, futex,
# clock_nanosleep: their count is how long a side waited, and strace slows
# every call, so they are higher than untraced and vary between runs), and
# each syscall above 0.05 per round trip.
#
#   bench/fi_pingpong.sh [-b BUILD] [-r ROUNDS] [-o DIR] [-e rdm,msg] [-a] [-L] [-x 'NAME ENV...']
#                        [-B DIR [-B DIR]]
#                        [-I BW,LAT] [-z 8,1m] [-m MTU] [-s]
#
# Defaults: 3 rounds, both endpoint types, both sizes (-z 8 or -z 1m: one),
# 1000 round trips at 1 MiB and 5000 at 8 B (until 2026-12-03 100 and 500:
# fi_pingpong's mean then held its first round trips, at 8 B 44 us per
# transfer over mrc;ofi_rxm against 13 us at 5000, tcp 26 against 8),
# planes of MTU 1500 (-m MTU: e.g. 9000, jumbo frames; the provider's
# settings, e.g. FI_MRC_FRAME_CHUNKS=3 there, pass through the
# environment). Needs root, libfabric-bin; builds nothing (default BUILD
# ./build).
# Documentation/performance.md, "libfabric: fi_pingpong".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=3 OUT= EPS=rdm,msg VARIANTS="mrc tcp"
BASE_DIR= BASE2_DIR= APP= XNAMES= BW_IT=1000 LAT_IT=5000 MTU=1500 STRACE= SIZES=8,1m
declare -A XENV=()
while getopts b:r:o:e:aLx:B:I:z:m:sh o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; o) OUT=$OPTARG ;; e) EPS=$OPTARG ;;
    a) APP=1 ;;
    L) [ -n "${XENV[live-app]:-}" ] || XNAMES+=" live-app"
       XENV[live-app]=FI_MRC_TX=live ;;
    x) n=${OPTARG%% *}
       [[ $n =~ ^[a-z0-9_]{1,8}$ && $OPTARG =~ ^[a-z0-9_]+(\ +[A-Za-z_][A-Za-z0-9_]*=[^ ]*)+\ *$ ]] ||
         { echo "-x: 'NAME VAR=VALUE...' (NAME: 1-8 of a-z0-9_)" >&2; exit 2; }
       [ -n "${XENV[$n]:-}" ] || XNAMES+=" $n"
       XENV[$n]=${OPTARG#* } ;;
    I) BW_IT=${OPTARG%,*} LAT_IT=${OPTARG#*,} ;; z) SIZES=$OPTARG ;;
    m) MTU=$OPTARG ;; s) STRACE=1 ;;
    B) if [ -z "$BASE_DIR" ]; then BASE_DIR=$(cd "$OPTARG" && pwd); else BASE2_DIR=$(cd "$OPTARG" && pwd); fi ;;
    *) sed -n '2,48p' "$0"; exit 2 ;;
  esac
done
case $SIZES in
  8 | 1m | 8,1m | 1m,8) ;;
  *) echo "-z: 8, 1m or 8,1m" >&2; exit 2 ;;
esac
want() { [[ ",$SIZES," == *",$1,"* ]]; }
VARIANTS="mrc${APP:+ mrc-app}${XNAMES}${BASE_DIR:+ base}${APP:+${BASE_DIR:+ base-app}}${BASE2_DIR:+ base2} tcp"
for d in $BASE_DIR $BASE2_DIR; do
  [ -f "$d/libmrc-fi.so" ] || { echo "-B: no $d/libmrc-fi.so" >&2; exit 2; }
done
command -v fi_pingpong >/dev/null || { echo "fi_pingpong: install libfabric-bin (scripts/deps.sh)" >&2; exit 77; }
[ -z "$STRACE" ] || command -v strace >/dev/null || { echo "-s: install strace (scripts/deps.sh)" >&2; exit 77; }
PROV_DIR=$BUILD/lib/libfabric
. "$ROOT/bench/bench_lib.sh"
bench_setup fi_pingpong "$PROV_DIR/libmrc-fi.so"
bench_fabric_up planes=4 mtu="$MTU"

# side HOSTNS DEVS PROVIDER EP SIZE ITERS [SERVER]: one fi_pingpong side
# (PROGRESS: FI_MRC_PROGRESS; XE: the variant's environment (-L, -x); PDIR: the provider directory; WRAP: a command
# fi_pingpong runs under, e.g. strace).
WRAP=()
side() {
  local ns=$1 devs=$2 prov=$3 ep=$4 size=$5 iters=$6
  shift 6
  ip netns exec "$ns" env FI_PROVIDER_PATH="$PDIR" LD_LIBRARY_PATH="$BUILD/lib" \
    FI_MRC_IFACES="$devs" FI_MRC_PROGRESS="$PROGRESS" "${XE[@]}" \
    FI_TCP_IFACE="${devs%%,*}" \
    timeout 300 "${WRAP[@]}" fi_pingpong -p "$prov" -e "$ep" -S "$size" -I "$iters" "$@"
}
# one NAME PROVIDER EP SIZE ITERS: prints the client's last line (with -s
# each side's strace summary in OUT/NAME.{srv,cli}.strace).
one() {
  local name=$1 prov=$2 ep=$3 size=$4 iters=$5
  [ -n "$STRACE" ] && WRAP=(strace -f -c -o "$OUT/$name.srv.strace")
  side "$NSB" "$DEVB" "$prov" "$ep" "$size" "$iters" >"$OUT/$name.srv" 2>&1 &
  SPID=$!
  sleep 0.5
  local rc=0
  [ -n "$STRACE" ] && WRAP=(strace -f -c -o "$OUT/$name.cli.strace")
  side "$NSA" "$DEVA" "$prov" "$ep" "$size" "$iters" "$B0" >"$OUT/$name.cli" 2>&1 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "$name: client exit $rc (see $OUT/$name.cli)" >&2; wait "$SPID" || true; SPID=; return 1
  fi
  wait "$SPID" || { rc=$?; echo "$name: server exit $rc (see $OUT/$name.srv)" >&2; SPID=; return 1; }
  SPID=
  tail -n 1 "$OUT/$name.cli"
}
# 'variant' sets t (provider), PROGRESS and PDIR for variant $v
variant() {
  t=${v%-app} PROGRESS=thread PDIR=$PROV_DIR XE=()
  [ "$v" != "$t" ] && PROGRESS=app
  if [ -n "${XENV[$v]:-}" ]; then read -ra XE <<<"${XENV[$v]}"; t=mrc PROGRESS=app; fi
  [ "$t" = base ] && t=mrc PDIR=$BASE_DIR
  [ "$t" = base2 ] && t=mrc PDIR=$BASE2_DIR
  prov=$t
  [ "$ep" = rdm ] && prov="$t;ofi_rxm"
  return 0
}
# per_rt SMALL BIG N: calls per round trip from two strace -c summaries (runs
# of I and I+N round trips): "ALL NOWAIT name=calls ..." (>= 0.05), most first.
per_rt() {
  awk -v n="$3" 'FNR == 1 { f++ }
    $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { c[$NF] += (f == 1 ? -$4 : $4) }
    END { for (k in c) {
            t += c[k]
            if (k !~ /^(sched_yield|poll|ppoll|epoll_wait|epoll_pwait|futex|clock_nanosleep|nanosleep)$/) w += c[k]
            if (c[k] / n >= 0.05) printf "%.2f %s\n", c[k] / n, k }
          printf "%.2f ~ALL\n%.2f ~NOWAIT\n", t / n, w / n }' "$1" "$2" |
    sort -rn | awk '$2 == "~ALL" { t = $1; next } $2 == "~NOWAIT" { w = $1; next }
      { l = l sprintf(" %s=%s", $2, $1) } END { printf "%s %s%s\n", t, w, l }'
}

if [ -n "$STRACE" ]; then
  printf '%-5s %-5s %-8s %-4s %-5s %9s %9s  %s\n' round ep variant side size calls/rt no-wait "per round trip" | tee "$OUT/table"
  for ((r = 1; r <= ROUNDS; r++)); do
    for ep in ${EPS//,/ }; do
      for v in $VARIANTS; do
        variant
        for z in 8 1m; do
          want "$z" || continue
          size=8 n=$LAT_IT label=8B
          [ "$z" = 1m ] && size=1048576 n=$BW_IT label=1MiB
          ok=1
          one "r$r-$ep-$v-$label-1x" "$prov" "$ep" "$size" "$n" >/dev/null || ok=
          one "r$r-$ep-$v-$label-2x" "$prov" "$ep" "$size" $((2 * n)) >/dev/null || ok=
          for s in cli srv; do
            res="- -"
            [ -n "$ok" ] && res=$(per_rt "$OUT/r$r-$ep-$v-$label-1x.$s.strace" "$OUT/r$r-$ep-$v-$label-2x.$s.strace" "$n")
            read -r all nowait rest <<<"$res"
            printf '%-5s %-5s %-8s %-4s %-5s %9s %9s %s\n' "$r" "$ep" "$v" "$s" "$label" "$all" "$nowait" "${rest:-}" | tee -a "$OUT/table"
          done
        done
      done
    done
  done
  WRAP=()
  echo "outputs in $OUT"
  exit 0
fi

printf '%-5s %-5s %-8s %-14s %14s %16s\n' round ep variant provider "1MiB MB/s" "8B usec/xfer" | tee "$OUT/table"
for ((r = 1; r <= ROUNDS; r++)); do
  for ep in ${EPS//,/ }; do
    for v in $VARIANTS; do
      variant
      # a failed run is "-" in the table (its outputs name the cause), not the end
      bw=- lat=-
      if want 1m; then bw=$(one "r$r-$ep-$v-bw" "$prov" "$ep" 1048576 "$BW_IT" | awk '{print $6}') || bw=-; fi
      if want 8; then lat=$(one "r$r-$ep-$v-lat" "$prov" "$ep" 8 "$LAT_IT" | awk '{print $7}') || lat=-; fi
      printf '%-5s %-5s %-8s %-14s %14s %16s\n' "$r" "$ep" "$v" "$prov" "$bw" "$lat" | tee -a "$OUT/table"
    done
  done
done
echo "medians:"
for ep in ${EPS//,/ }; do
  for t in $VARIANTS; do
    awk -v ep="$ep" -v t="$t" 'BEGIN { n = m = 0 } NR > 1 && $2 == ep && $3 == t {
        if ($5 ~ /^[0-9.]+$/) bw[n++] = $5 + 0; if ($6 ~ /^[0-9.]+$/) lat[m++] = $6 + 0 }
      function med(a, n,   i, j, x) { if (!n) return -1; for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) { x = a[j]; a[j] = a[j-1]; a[j-1] = x }
        return n % 2 ? a[int(n/2)] : (a[n/2-1] + a[n/2]) / 2 }
      function fmt(a, n, w) { return n ? sprintf("%" w ".2f", med(a, n)) : sprintf("%" w "s", "-") }
      END { printf "  %-4s %-8s 1MiB %s MB/s (%d runs)   8B %s usec/xfer (%d runs)\n", ep, t, fmt(bw, n, 8), n, fmt(lat, m, 9), m }' "$OUT/table"
  done
done | tee -a "$OUT/table"
echo "outputs in $OUT"
