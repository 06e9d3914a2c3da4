#!/usr/bin/env bash
# The README's test command: installs missing packages, builds, and runs
# every test layer through CTest, then an ASan/UBSan build of the unit layer
# and a bounded libFuzzer run on Engine::rx() (CTest label fuzz).
#
#   scripts/test.sh                 everything (what CI runs)
#   scripts/test.sh -L unit         only some CTest labels (unit|bpf|netns|install|vm)
#   scripts/test.sh --no-sanitize   skip the ASan/UBSan pass (and the fuzz tests)
#   MRC_JOBS=N                      parallel build jobs (default: nproc)
#   MRC_CCACHE=0                    no compiler cache (default: ccache in
#                                   $CCACHE_DIR, else /var/cache/mrc/ccache)
#
# Exits non-zero if anything fails. Layers that need root (bpf, netns, install, vm)
# report "skipped" when run unprivileged.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

labels=()
sanitize=1
while [ $# -gt 0 ]; do
  case "$1" in
    -L) labels+=("$2"); shift 2 ;;
    --no-sanitize) sanitize=0; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ ${#labels[@]} -eq 0 ] && labels=(unit bpf netns install vm)
jobs=${MRC_JOBS:-$(nproc)}
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start ))s] $*"; }

stamp "dependencies"
if printf '%s\n' "${labels[@]}" | grep -qx vm; then
  scripts/deps.sh --vm   # qemu and busybox for the VM layer
else
  scripts/deps.sh
fi

# A compiler cache shared by every clone on this machine: paths are taken
# relative to the checkout (CCACHE_BASEDIR), so a fresh clone of a commit
# already built compiles only what changed. It never changes what is built.
if [ "${MRC_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-/var/cache/mrc/ccache} CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  mkdir -p "$CCACHE_DIR"
fi

stamp "configure + build (g++, release)"
# Prefix /usr: the packages the install test builds (cpack) are the Debian
# packages of README "Using it".
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
ninja -C build -j "$jobs"

fail=0
regex=$(IFS='|'; echo "^(${labels[*]})\$")
stamp "ctest -L '$regex'"
if ! (cd build && ctest -L "$regex" --output-on-failure --no-tests=ignore -j 1); then
  fail=1
fi

if [ $sanitize -eq 1 ] && printf '%s\n' "${labels[@]}" | grep -qx unit; then
  stamp "configure + build (clang++, ASan+UBSan, unit layer, fuzz targets)"
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DMRC_SANITIZE=ON -DMRC_BUILD_BENCH=OFF -DMRC_FUZZ=ON -DMRC_FUZZ_GHOST_PROPERTY=ON >/dev/null
  ninja -C build-asan -j "$jobs"
  stamp "ctest -L unit (ASan+UBSan)"
  if ! (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest -L '^unit$' --output-on-failure -j "$jobs"); then
    fail=1
  fi
  stamp "ctest -L fuzz (libFuzzer on Engine::rx(), ASan+UBSan)"
  if ! (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest -L '^fuzz$' --output-on-failure -j "$jobs"); then
    fail=1
  fi
fi

stamp "done: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
