#!/usr/bin/env bash
# Installs every Debian package mrc needs. Idempotent: only missing packages
# are installed. This is the one place the project's packages are listed.
#
#   scripts/deps.sh            build + test + demo packages
#   scripts/deps.sh --vm       also the packages of vm-tests/ (qemu, busybox)
#   scripts/deps.sh --print    print the package list and exit
set -euo pipefail

BUILD_PKGS=(
  build-essential cmake ninja-build pkg-config git
  clang llvm lld libclang-rt-14-dev        # BPF objects, clang++ builds, libFuzzer/sanitizers
  libbpf-dev libxdp-dev bpftool xdp-tools  # BPF loading, AF_XDP, skeletons
  libelf-dev zlib1g-dev linux-libc-dev libcap-dev
  libisal-dev                              # ICRC (PCLMUL CRC-32)
  libtomlplusplus-dev                      # mrcd configuration file
  nlohmann-json3-dev                       # JSON parsing in tests and mrcctl
  libgtest-dev libgmock-dev libbenchmark-dev
  help2man scdoc                           # man pages (from --help, and Documentation/man/*.scd)
  dpkg-dev file                            # CPack DEB: dpkg-shlibdeps, dpkg-deb, file
  libfabric-dev                            # the libfabric provider (user/fi, libmrc-fi.so)
  ccache                                   # scripts/test.sh: compiler cache across runs (MRC_CCACHE=0: off)
)
RUN_PKGS=(
  iproute2 iputils-ping ethtool tcpdump    # fabric, diagnostics, pcaps of failing tests
  iperf3                                   # TCP peer in bench/ and the resilience suite
  gnuplot-nox                              # plots of the scenario runner and demo
  procps psmisc kmod util-linux jq
  linux-perf                               # bench/profile.sh, bench/latcost.sh
  python3                                  # fabric scenario runner (standard library only)
  man-db groff-base bsdextrautils          # the install test renders the installed man pages (col)
  systemd                                  # systemd-analyze verify of the installed unit
  prometheus                               # promtool: mrcd_netns_promtool checks a live /metrics scrape
  libfabric-bin strace                     # fi_info / fi_pingpong against the provider; fi_install_test
  openmpi-bin libopenmpi-dev hpcc          # fi_mpi_test: Open MPI (and HPC Challenge) over mrc;ofi_rxm
)
VM_PKGS=(
  qemu-system-x86 qemu-utils busybox-static cpio
)

want=("${BUILD_PKGS[@]}" "${RUN_PKGS[@]}")
case "${1:-}" in
  --vm) want+=("${VM_PKGS[@]}") ;;
  --print) printf '%s\n' "${BUILD_PKGS[@]}" "${RUN_PKGS[@]}" "${VM_PKGS[@]}"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--vm|--print]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#want[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages here are for their tools: no service they bring is started while
# installing (policy-rc.d), and prometheus (wanted for promtool alone) is not
# enabled either, so a host with systemd runs no Prometheus server afterwards.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
if printf '%s\n' "${missing[@]}" | grep -qx prometheus && command -v deb-systemd-helper >/dev/null; then
  deb-systemd-helper disable prometheus.service >/dev/null 2>&1 || true
fi
