#!/usr/bin/env bash
# Reports the kernel features mrc's bpf and netns test layers rely on, one
# line each: FEATURE  yes|no|n/a  DETAIL. run.sh runs it inside the VM before
# the tests; it runs the same on the host (as root), which gives the host
# kernel's column of the matrix in Documentation/testing.md.
#
#   vm-tests/probe.sh [--out FILE] [--helper PATH]
#
# The BPF, XDP and AF_XDP checks are mrc-vm-probe's (built from
# vm-tests/probe_helper.cc into $MRC_BUILD_DIR/vm-tests/). Everything happens
# in a network namespace created here (mrcprobe-<pid>-<random>, deleted on
# exit) on a veth pair inside it; the only frames are the helper's two test
# frames (198.18.0.1 -> 198.18.0.2) between the two ends.
# Exit status: 0 when the probe ran (whatever it found), 77 when not root.
set -u
build_dir=${MRC_BUILD_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build}
helper=${MRC_VM_PROBE_HELPER:-$build_dir/vm-tests/mrc-vm-probe}
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --helper) helper=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--out FILE] [--helper PATH]" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "probe.sh: needs root (BPF, network namespaces)" >&2
  exit 77
fi

res=$(mktemp)
ns=mrcprobe-$$-$RANDOM
# shellcheck disable=SC2317 # called through the trap
cleanup() {
  ip netns del "$ns" 2>/dev/null
  rm -f "$res"
}
trap cleanup EXIT
add() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$res"; }
first_line() { head -1 | tr '\t' ' ' | cut -c1-120; }

add kernel info "$(uname -r) $(uname -v | cut -c1-60)"
if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" = bpf_fs ]; then
  add bpffs yes "mounted at /sys/fs/bpf"
else
  add bpffs no "/sys/fs/bpf is not a bpf file system"
fi
if [ -r /sys/kernel/btf/vmlinux ]; then
  add btf_sysfs yes "/sys/kernel/btf/vmlinux, $(stat -c %s /sys/kernel/btf/vmlinux) bytes"
else
  add btf_sysfs no "/sys/kernel/btf/vmlinux missing (CONFIG_DEBUG_INFO_BTF)"
fi

if e=$(ip netns add "$ns" 2>&1); then
  add netns yes "ip netns add"
else
  add netns no "$(echo "$e" | first_line)"
fi
nsx() { ip netns exec "$ns" "$@"; }
veth=0
if [ -e "/run/netns/$ns" ]; then
  if e=$(ip -n "$ns" link add va numtxqueues 1 numrxqueues 1 type veth \
         peer name vb numtxqueues 1 numrxqueues 1 2>&1); then
    veth=1
    add veth yes "veth pair in the namespace"
    for d in va vb; do
      nsx sysctl -qw "net.ipv6.conf.$d.disable_ipv6=1" 2>/dev/null
      ip -n "$ns" link set dev "$d" up
    done
  else
    add veth no "$(echo "$e" | first_line)"
  fi
  if v=$(nsx sysctl -n net.mptcp.enabled 2>/dev/null); then
    add mptcp yes "net.mptcp.enabled=$v"
  else
    add mptcp no "no net.mptcp sysctls"
  fi
fi

if [ $veth -eq 1 ]; then
  qdisc() { # qdisc NAME TC-ARGS...: add on vb, report, delete
    local name=$1 e
    shift
    if e=$(ip netns exec "$ns" tc qdisc add dev vb "$@" 2>&1); then
      add "qdisc_$name" yes "tc qdisc add dev vb $*"
      ip netns exec "$ns" tc qdisc del dev vb "$1" 2>/dev/null  # "clsact" or "root"
    else
      add "qdisc_$name" no "$(echo "$e" | first_line)"
    fi
  }
  qdisc clsact clsact
  qdisc tbf root tbf rate 1gbit burst 64k latency 10ms
  qdisc netem root netem delay 1ms loss 1%
  qdisc fq root fq
  qdisc fq_codel root fq_codel
  qdisc prio root prio
  qdisc red root red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 bandwidth 1gbit probability 0.1 ecn
fi

if [ -x "$helper" ]; then
  if [ $veth -eq 1 ]; then
    nsx "$helper" va vb >>"$res" 2>&1
  else
    "$helper" >>"$res" 2>&1
  fi
else
  add bpf_checks n/a "$helper not built (cmake target mrc-vm-probe)"
fi

{
  printf '%-20s %-5s %s\n' FEATURE STATE DETAIL
  while IFS=$'\t' read -r f s d; do printf '%-20s %-5s %s\n' "$f" "$s" "$d"; done <"$res"
} | tee ${out:+"$out"}
exit 0
