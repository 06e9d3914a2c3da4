#!/usr/bin/env bash
# The libfabric provider as installed (label install): `cmake --install` of
# the lib and fi components (the packages libmrc1 and libfabric-mrc) into a
# scratch root puts libmrc-fi.so in LIBDIR/libfabric, the directory Debian's
# libfabric scans for external providers when FI_PROVIDER_PATH is unset
# (checked with strace on fi_info), exporting fi_prov_ini only and without a
# build RUNPATH; libfabric then loads it from the scratch root.
set -uo pipefail
NAME=fi_install_test
: "${MRC_BUILD_DIR:?}" "${MRC_LIBDIR:?}"
command -v fi_info >/dev/null || { echo "SKIP $NAME: fi_info (libfabric-bin) is not installed"; exit 77; }
command -v strace >/dev/null || { echo "SKIP $NAME: strace is not installed"; exit 77; }
ROOT=$(mktemp -d /tmp/mrc-fi-install.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
FAILS=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; FAILS=$((FAILS + 1)); }
check() { local d=$1; shift; if "$@" >/dev/null 2>&1; then ok "$d"; else fail "$d"; fi; }

for c in lib fi; do
	DESTDIR=$ROOT cmake --install "$MRC_BUILD_DIR" --component "$c" >/dev/null || fail "install component $c"
done
SO=$ROOT$MRC_LIBDIR/libfabric/libmrc-fi.so
check "installed as $MRC_LIBDIR/libfabric/libmrc-fi.so" test -f "$SO"
exports=$(nm -D --defined-only "$SO" | awk '{print $3}' | tr '\n' ' ')
[ "$exports" = "fi_prov_ini " ] && ok "exports: $exports" || fail "exports: '$exports', want fi_prov_ini only"
if readelf -d "$SO" | grep -qE 'RPATH|RUNPATH'; then fail "no RUNPATH"; else ok "no RUNPATH"; fi
check "needs libmrc.so.1" sh -c "readelf -d '$SO' | grep -q 'NEEDED.*libmrc.so.1'"

# The directory the system's libfabric scans by default is where we install.
scanned=$(strace -f -e trace=openat fi_info -l 2>&1 >/dev/null |
	grep -o "\"[^\"]*/libfabric\", O_RDONLY[^)]*O_DIRECTORY" | head -n 1 | cut -d'"' -f2)
[ "$scanned" = "$MRC_LIBDIR/libfabric" ] && ok "libfabric scans $scanned by default" ||
	fail "libfabric scans '$scanned', we install into $MRC_LIBDIR/libfabric"

# Loaded from the scratch root: fi_info lists it.
list=$(FI_PROVIDER_PATH=$ROOT$MRC_LIBDIR/libfabric LD_LIBRARY_PATH=$ROOT$MRC_LIBDIR fi_info -l 2>&1)
check "fi_info -l lists mrc" grep -qx 'mrc:' <<<"$list"

if [ "$FAILS" = 0 ]; then echo "PASS $NAME"; exit 0; fi
echo "FAIL $NAME: $FAILS check(s) failed"
exit 1
