#!/usr/bin/env bash
# Debian's hpcc (HPC Challenge 1.5, unmodified) under Open MPI 4.1 over the
# mrc provider against the same job over libfabric's own tcp provider, on the
# same 4-plane veth fabric, interleaved in every round (what an MPI user
# would otherwise run: pml cm + mtl ofi with "tcp;ofi_rxm"):
#
#   mrc      "mrc;ofi_rxm", one rank per host, each rank's own planes
#            (exclusive mode, application progress: the provider's default)
#   tcp      "tcp;ofi_rxm", one rank per host (plane 0, FI_TCP_IFACE)
#   mrc-svc  with -s N: N ranks per host through one mrc-serviced per host
#   tcp-N    with -s N: the same N ranks per host over tcp
#   base     with -B DIR: as mrc, with the provider DIR/libmrc-fi.so (another
#            build, e.g. the one before a change; BUILD's libmrc), between
#            mrc and tcp in every round
#
# hpcc's input: its example file with N (-n, default 500) and a 1 x ranks
# process grid. Per round and variant: the job's wall time and hpcc's summary
# figures (HPL, PTRANS, MPI RandomAccess, ping-pong latency and bandwidth,
# randomly ordered ring latency and bandwidth); then the medians and each
# variant's median ratio to tcp of the same ranks. Every job must end with
# Success=1 and no FAILED residual check, else the script says so and exits 1.
#
#   bench/fi_hpcc.sh [-b BUILD] [-r ROUNDS] [-o DIR] [-n N] [-s RANKS_PER_HOST]
#                    [-E "VAR=VALUE ..."] [-B DIR] [-k]
#
# -E: settings for the ranks of the mrc variants (e.g. FI_MRC_YIELD=0; base too).
# Ranks run unbound (mpirun --bind-to none), as on separate hosts. -k keeps
# Open MPI's default binding: each host's orted binds its rank to core 0, so
# on this one machine the ranks of both "hosts" share core 0 and the other
# core idles; every message then waits until the other rank gives up the CPU
# (tcp's ping-pong latency is 4 ms there: performance.md, "libfabric: hpcc").
#
# Needs root, hpcc, openmpi-bin (scripts/deps.sh); builds nothing (default
# BUILD ./build). Documentation/performance.md, "libfabric: hpcc".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build ROUNDS=3 OUT= HPCC_N=500 RPH= MRC_ENV= BASE_DIR= BIND=(--bind-to none)
while getopts b:r:o:n:s:E:B:kuh o; do
  case $o in
    b) BUILD=$(cd "$OPTARG" && pwd) ;; r) ROUNDS=$OPTARG ;; o) OUT=$OPTARG ;;
    n) HPCC_N=$OPTARG ;; s) RPH=$OPTARG ;; E) MRC_ENV=$OPTARG ;;
    B) BASE_DIR=$(cd "$OPTARG" && pwd) ;; k) BIND=() ;; u) ;; # -u: the default since 2026-12-03
    *) sed -n '2,34p' "$0"; exit 2 ;;
  esac
done
for v in "$ROUNDS" "$HPCC_N" ${RPH:+"$RPH"}; do
  [[ $v =~ ^[1-9][0-9]*$ ]] || { echo "fi_hpcc: $v is not a positive whole number" >&2; exit 2; }
done
INF=/usr/share/doc/hpcc/examples/_hpccinf.txt
command -v hpcc >/dev/null && [ -f "$INF" ] || { echo "fi_hpcc: install hpcc (scripts/deps.sh)" >&2; exit 77; }
command -v mpirun >/dev/null || { echo "fi_hpcc: install openmpi-bin (scripts/deps.sh)" >&2; exit 77; }
PROV_DIR=$BUILD/lib/libfabric
SVCD=$BUILD/user/svc/mrc-serviced
. "$ROOT/bench/bench_lib.sh"
. "$ROOT/selftests/netns/fi/ompi_launch.sh"
bench_setup fi_hpcc "$PROV_DIR/libmrc-fi.so" ${RPH:+"$SVCD"} ${BASE_DIR:+"$BASE_DIR/libmrc-fi.so"}
bench_fabric_up planes=4
VARIANTS="mrc${BASE_DIR:+ base} tcp${RPH:+ mrc-svc tcp-$RPH}"
[ -n "$RPH" ] && bench_svc_up fi_hpcc

# The summary keys and their column names.
KEYS=(HPL_Tflops PTRANS_GBs MPIRandomAccess_GUPs AvgPingPongLatency_usec AvgPingPongBandwidth_GBytes
  RandomlyOrderedRingLatency_usec RandomlyOrderedRingBandwidth_GBytes)
COLS=(HPL_Gflops PTRANS_GB/s RA_GUPs pp_lat_us pp_bw_GB/s ring_lat_us ring_bw_GB/s)

# job VARIANT ROUND: one hpcc run, its figures as "wall key=value ..." in
# OUT/VARIANT.ROUND.fig.
job() {
  local v=$1 r=$2 rph=1 prov="mrc;ofi_rxm" dir=$OUT/$1.$2 t0 t1 rc env=$MRC_ENV PROV_DIR=$PROV_DIR
  case $v in
    tcp*) prov="tcp;ofi_rxm" env= ;;
    base) PROV_DIR=$BASE_DIR env="LD_LIBRARY_PATH=$BUILD/lib${env:+ $env}" ;;
  esac
  case $v in
    mrc-svc | tcp-*) rph=$RPH ;;
  esac
  mkdir -p "$dir"
  sed -e "s/^1000         Ns/$(printf '%-13s' "$HPCC_N")Ns/" -e 's/^2            Ps/1            Ps/' \
    -e "s/^2            Qs/$(printf '%-13s' $((2 * rph)))Qs/" "$INF" >"$dir/hpccinf.txt"
  t0=$(date +%s%N)
  set +e
  OMPI_ENV=$env SVC_DIR=$([ "$v" = mrc-svc ] && echo "$OUT") ompi_launch "$NSA" "$STATE" "$OUT" "$v.$r" 900 \
    -np $((2 * rph)) --host "A:$rph,B:$rph" --map-by node ${BIND[@]+"${BIND[@]}"} --wdir "$dir" \
    --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "$prov" hpcc >"$dir/run.out" 2>&1
  rc=$?
  set -e
  t1=$(date +%s%N)
  local o=$dir/hpccoutf.txt
  if [ "$rc" != 0 ] || ! grep -q '^Success=1' "$o" 2>/dev/null || grep -q FAILED "$o"; then
    echo "fi_hpcc: $v round $r: mpirun exit $rc, $(grep -m1 '^Success=' "$o" 2>/dev/null || echo 'no Success line'), $(grep -c FAILED "$o" 2>/dev/null || echo 0) FAILED; logs in $dir" >&2
    tail -n 5 "$dir/run.out" >&2
    exit 1
  fi
  {
    printf 'wall=%s' "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
    for k in "${KEYS[@]}"; do printf ' %s=%s' "$k" "$(sed -n "s/^$k=//p" "$o" | head -n 1)"; done
    echo
  } >"$OUT/$v.$r.fig"
}

for ((r = 1; r <= ROUNDS; r++)); do
  for v in $VARIANTS; do
    job "$v" "$r"
    echo "round $r $v: $(cat "$OUT/$v.$r.fig")"
  done
done

# The table: every round, the medians, and each mrc variant's median ratio
# to the tcp job of the same ranks (per round, then the median).
python3 - "$OUT" "$ROUNDS" "$VARIANTS" "${KEYS[*]}" "${COLS[*]}" "${RPH:-}" <<'EOF'
import statistics, sys
out, rounds, variants, keys, cols, rph = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split(), sys.argv[6]
keys, cols = ["wall"] + keys, ["wall_s"] + cols
scale = {"HPL_Tflops": 1000.0}  # shown in Gflops
def fig(v, r):
    d = dict(kv.split("=", 1) for kv in open(f"{out}/{v}.{r}.fig").read().split())
    return [float(d[k]) * scale.get(k, 1.0) if d.get(k) else float("nan") for k in keys]
data = {v: [fig(v, r) for r in range(1, rounds + 1)] for v in variants}
print("| round | variant | " + " | ".join(cols) + " |")
print("|" + " --- |" * (len(cols) + 2))
for r in range(rounds):
    for v in variants:
        print(f"| {r + 1} | {v} | " + " | ".join(f"{x:.4g}" for x in data[v][r]) + " |")
for v in variants:
    med = [statistics.median(data[v][r][i] for r in range(rounds)) for i in range(len(keys))]
    print(f"| median | {v} | " + " | ".join(f"{x:.4g}" for x in med) + " |")
for v, t in [("mrc", "tcp"), ("base", "tcp"), ("mrc-svc", f"tcp-{rph}"), ("mrc", "base")]:
    if v not in data or t not in data:
        continue
    rat = [statistics.median(data[v][r][i] / data[t][r][i] if data[t][r][i] else float("nan") for r in range(rounds)) for i in range(len(keys))]
    print(f"| {v} / {t} | median ratio | " + " | ".join(f"{x:.3g}x" for x in rat) + " |")
EOF
echo "raw outputs in $OUT"
