#!/usr/bin/env bash
# The install workflow of a new user (README "Using it", Documentation/
# deployment.md "Installing"), on the packages of this build directory:
#
#   1. cpack -G DEB builds libmrc1, libmrc-dev and mrc-tools (into a scratch
#      directory); their control data (names, Depends, the conffile) and file
#      lists are checked;
#   2. the packages are unpacked into a scratch root (dpkg -x);
#   3. libmrc.so.N: SONAME, exports exactly the functions of the installed
#      <mrc/mrc.h>, with symbol version MRC_1, and MRC_2 / MRC_3 for exactly the
#      functions added after it (nm -D --defined-only);
#   4. examples/ (the installed copies) compiled with
#      `pkg-config --cflags --libs mrc` (PKG_CONFIG_SYSROOT_DIR into the root),
#      once against libmrc.a (pkg-config --static), and with a CMake project
#      using find_package(mrc) + mrc::mrc (CMAKE_PREFIX_PATH into the root);
#   5. the pkg-config server and the find_package client run between two
#      network namespaces (LD_LIBRARY_PATH into the root);
#   6. every installed man page renders without warnings, `man mrc_perf`
#      works, and the tools' pages name every option of their --help;
#   7. the installed systemd unit: paths of the install prefix, man:
#      documentation installed, `systemd-analyze verify`; mrcd started with
#      the unit's ExecStartPre and ExecStart lines (paths mapped into the
#      root) in a network namespace with a plane named as the default
#      /etc/mrc/mrcd.toml names it, answering mrcctl, stopped with the unit's
#      KillSignal.
#
# Root only (namespaces, XDP); exit 77 otherwise. Needs the build directory
# built (ninja), MRC_BUILD_DIR and the install paths CMake passes (CTest).
. "$(dirname "$0")/../fabric/tests/lib.sh"
t_require cpack dpkg-deb pkg-config nm readelf man col cc cmake ninja nsenter systemd-analyze
: "${MRC_VERSION:?}" "${MRC_SOVERSION:?}" "${MRC_PREFIX:?}" "${MRC_LIBDIR:?}" "${MRC_SBINDIR:?}"
: "${MRC_BINDIR:?}" "${MRC_SYSCONFDIR:?}" "${MRC_MANDIR:?}" "${MRC_DOCDIR:?}" "${MRC_INCLUDEDIR:?}"
ROOT=$T_TMP/root
NS=mrcpkg$$$RANDOM
MRCD_PID=
cleanup() {
	[ -n "$MRCD_PID" ] && kill -9 "$MRCD_PID" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
	t_cleanup
}
trap cleanup EXIT
t0=$(date +%s)
step() { echo "# [$(($(date +%s) - t0))s] $*"; }

# ---- 1. the packages --------------------------------------------------------
step "cpack -G DEB"
if ! (cd "$T_TMP" && cpack -G DEB -B "$T_TMP/pkgs" --config "$MRC_BUILD_DIR/CPackConfig.cmake") \
	>"$T_TMP/cpack.log" 2>&1; then
	cat "$T_TMP/cpack.log"
	t_fail "cpack -G DEB"
	t_done
fi
arch=$(dpkg --print-architecture)
ver=$MRC_VERSION-1
LIBPKG=libmrc$MRC_SOVERSION
declare -A DEB
for p in "$LIBPKG" libmrc-dev mrc-tools; do
	DEB[$p]=$T_TMP/pkgs/${p}_${ver}_$arch.deb
	t_check "package $p built" test -f "${DEB[$p]}"
done
[ "$T_FAILS" = 0 ] || { ls -l "$T_TMP/pkgs"; t_done; }
for p in "$LIBPKG" libmrc-dev mrc-tools; do
	t_eq "$p: Package" "$(dpkg-deb -f "${DEB[$p]}" Package)" "$p"
	t_eq "$p: Version" "$(dpkg-deb -f "${DEB[$p]}" Version)" "$ver"
	dpkg-deb -c "${DEB[$p]}" | awk '{print $6}' | sed 's|^\./|/|' >"$T_TMP/$p.files"
	echo "# $p: $(grep -cv '/$' "$T_TMP/$p.files") files, Depends: $(dpkg-deb -f "${DEB[$p]}" Depends)"
done
has() { grep -qxF "$2" "$T_TMP/$1.files"; }
so=$MRC_LIBDIR/libmrc.so.$MRC_SOVERSION
t_check "$LIBPKG ships $so" has "$LIBPKG" "$so"
t_eq "$LIBPKG ships only the library" "$(grep -v '/$' "$T_TMP/$LIBPKG.files" | grep -cv "^$MRC_LIBDIR/libmrc\.so\.")" 0
for f in "$MRC_INCLUDEDIR/mrc/mrc.h" "$MRC_LIBDIR/libmrc.so" "$MRC_LIBDIR/libmrc.a" \
	"$MRC_LIBDIR/pkgconfig/mrc.pc" "$MRC_LIBDIR/cmake/mrc/mrcConfig.cmake" \
	"$MRC_LIBDIR/cmake/mrc/mrcConfigVersion.cmake" "$MRC_LIBDIR/cmake/mrc/mrcTargets.cmake" \
	"$MRC_MANDIR/man3/libmrc.3" "$MRC_DOCDIR/examples/write_imm_server.c" \
	"$MRC_DOCDIR/examples/write_imm_client.c" "$MRC_DOCDIR/examples/write_imm_client_cpp.cc" \
	"$MRC_INCLUDEDIR/mrc/mrc.hpp" "$MRC_INCLUDEDIR/mrc/types.hpp" "$MRC_INCLUDEDIR/mrc/config.hpp" \
	"$MRC_INCLUDEDIR/mrc/result.hpp" "$MRC_INCLUDEDIR/mrc/uapi/wire.h" \
	"$MRC_INCLUDEDIR/mrc/uapi/maps.h" "$MRC_LIBDIR/pkgconfig/mrc-cxx.pc"; do
	t_check "libmrc-dev ships $f" has libmrc-dev "$f"
done
UNIT=$MRC_PREFIX/lib/systemd/system/mrcd.service
CONF=$MRC_SYSCONFDIR/mrc/mrcd.toml
SCONF=$MRC_SYSCONFDIR/mrc/mrc-serviced.toml
for f in "$MRC_BINDIR/mrc_perf" "$MRC_SBINDIR/mrcctl" "$MRC_SBINDIR/mrcd" "$UNIT" "$CONF" \
	"$MRC_SBINDIR/mrc-serviced" "$MRC_PREFIX/lib/systemd/system/mrc-serviced.service" \
	"$MRC_MANDIR/man1/mrc_perf.1" "$MRC_MANDIR/man8/mrcctl.8" "$MRC_MANDIR/man8/mrcd.8" \
	"$MRC_MANDIR/man5/mrcd.toml.5" "$MRC_DOCDIR/mrcd.toml.sample" "$SCONF" \
	"$MRC_MANDIR/man5/mrc-serviced.toml.5" "$MRC_DOCDIR/mrc-serviced.toml.sample"; do
	t_check "mrc-tools ships $f" has mrc-tools "$f"
done
t_check "libmrc-dev depends on $LIBPKG (= $ver)" \
	grep -q "$LIBPKG (= $ver)" <<<"$(dpkg-deb -f "${DEB[libmrc-dev]}" Depends)"
for p in "$LIBPKG" mrc-tools; do # dpkg-shlibdeps found the shared libraries
	for d in libbpf1 libxdp1 libc6 libstdc++6; do
		t_check "$p depends on $d" grep -qw "$d" <<<"$(dpkg-deb -f "${DEB[$p]}" Depends)"
	done
done
dpkg-deb -e "${DEB[$LIBPKG]}" "$T_TMP/lib.ctrl"
t_eq "$LIBPKG shlibs" "$(cat "$T_TMP/lib.ctrl/shlibs" 2>/dev/null)" "libmrc $MRC_SOVERSION $LIBPKG (>= $ver)"
t_eq "$LIBPKG triggers" "$(cat "$T_TMP/lib.ctrl/triggers" 2>/dev/null)" "activate-noawait ldconfig"
dpkg-deb -e "${DEB[mrc-tools]}" "$T_TMP/tools.ctrl"
t_eq "mrc-tools conffiles" "$(cat "$T_TMP/tools.ctrl/conffiles" 2>/dev/null)" "$CONF
$SCONF"

# ---- 2. unpacked into a scratch root ------------------------------------------
step "dpkg -x into $ROOT"
for p in "$LIBPKG" libmrc-dev mrc-tools; do dpkg -x "${DEB[$p]}" "$ROOT"; done
LIB=$ROOT$MRC_LIBDIR
export LD_LIBRARY_PATH=$LIB

# ---- 3. the shared library: SONAME and exported symbols -----------------------
step "libmrc.so exports"
t_eq "SONAME" "$(readelf -d "$ROOT$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" "libmrc.so.$MRC_SOVERSION"
t_eq "libmrc.so -> SONAME" "$(readlink "$LIB/libmrc.so")" "libmrc.so.$MRC_SOVERSION"
nm -D --defined-only --with-symbol-versions "$ROOT$so" | awk '{print $NF}' | sort >"$T_TMP/exports"
bad=$(grep -Ev '^(mrc_[a-z0-9_]+@@MRC_[123]|MRC_[123])$' "$T_TMP/exports")
t_eq "symbols outside mrc_*@@MRC_1, MRC_2 and MRC_3 (nm -D --defined-only)" "$(head -5 <<<"$bad" | paste -sd' ')" ""
# The node of a symbol never changes (user/lib/mrc.map): MRC_2 holds exactly
# what was added after MRC_1, MRC_3 what was added after MRC_2.
t_eq "symbols of MRC_2" "$(sed -n 's/@@MRC_2$//p' "$T_TMP/exports" | paste -sd' ')" "mrc_alloc_buf mrc_free_buf mrc_query_path_mtu"
t_eq "symbols of MRC_3" "$(sed -n 's/@@MRC_3$//p' "$T_TMP/exports" | paste -sd' ')" "mrc_device_tx"
[ -z "$bad" ] || echo "# $(wc -l <<<"$bad") symbols leak"
# Exactly the functions of the installed header: no more, no fewer.
grep -oE '\bmrc_[a-z0-9_]+ *\(' "$ROOT$MRC_INCLUDEDIR/mrc/mrc.h" | tr -d ' (' | sort -u >"$T_TMP/declared"
sed -n 's/@@MRC_[123]$//p' "$T_TMP/exports" | sort >"$T_TMP/exported"
t_eq "exported = declared in mrc.h ($(wc -l <"$T_TMP/declared") functions)" \
	"$(comm -3 "$T_TMP/declared" "$T_TMP/exported" | tr -d '\t' | tr '\n' ' ')" ""
t_eq "libmrc.so resolves every library it needs" "$(ldd "$ROOT$so" | grep -c 'not found')" 0
echo "# libmrc.so.$MRC_SOVERSION: $(stat -L -c %s "$ROOT$so") bytes (stripped); libmrc.a: $(stat -c %s "$LIB/libmrc.a") bytes"

# ---- 4. examples/ against the installed files ---------------------------------
EX=$ROOT$MRC_DOCDIR/examples
step "examples with pkg-config"
pc() {
	PKG_CONFIG_SYSROOT_DIR=$ROOT PKG_CONFIG_LIBDIR=$LIB/pkgconfig PKG_CONFIG_PATH="" \
		PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 pkg-config "$@"
}
t_eq "pkg-config --modversion mrc" "$(pc --modversion mrc)" "$MRC_VERSION"
t_eq "pkg-config --cflags mrc" "$(pc --cflags mrc | xargs)" "-I$ROOT$MRC_INCLUDEDIR"
mkdir -p "$T_TMP/pc"
for ex in write_imm_server write_imm_client; do
	# shellcheck disable=SC2046
	if cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -o "$T_TMP/pc/$ex" "$EX/$ex.c" \
		$(pc --cflags --libs mrc) 2>"$T_TMP/pc/$ex.err"; then
		t_ok "$ex built with pkg-config --cflags --libs mrc"
	else
		t_fail "$ex built with pkg-config: $(head -5 "$T_TMP/pc/$ex.err")"
	fi
	t_check "$ex needs libmrc.so.$MRC_SOVERSION" grep -q "NEEDED.*\[libmrc.so.$MRC_SOVERSION\]" \
		<<<"$(readelf -d "$T_TMP/pc/$ex" 2>&1)"
	t_check "$ex loads the root's libmrc" grep -q "libmrc.so.$MRC_SOVERSION => $LIB/" <<<"$(ldd "$T_TMP/pc/$ex")"
	sz=$(stat -c %s "$T_TMP/pc/$ex" 2>/dev/null || echo 0)
	t_range "$ex size in bytes (dynamic)" "$sz" 1 200000
done
# libmrc.a: the same server, linked statically against libmrc.
# shellcheck disable=SC2046
if cc -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -o "$T_TMP/pc/server_static" "$EX/write_imm_server.c" \
	$(pc --cflags mrc) $(pc --static --libs mrc | sed 's/-lmrc\b/-l:libmrc.a/') 2>"$T_TMP/pc/static.err"; then
	t_ok "write_imm_server built with libmrc.a (pkg-config --static)"
	t_eq "static server needs no libmrc.so" "$(readelf -d "$T_TMP/pc/server_static" | grep -c 'libmrc')" 0
	echo "# write_imm_server with libmrc.a: $(stat -c %s "$T_TMP/pc/server_static") bytes"
else
	t_fail "static link: $(head -5 "$T_TMP/pc/static.err")"
fi

# The C++ API: write_imm_client_cpp against the installed <mrc/mrc.hpp>
# (which must not reach outside the root's include/) and libmrc.a.
# shellcheck disable=SC2046
if c++ -Wall -Wextra -Werror -O2 -o "$T_TMP/pc/write_imm_client_cpp" "$EX/write_imm_client_cpp.cc" \
	$(pc --cflags --libs mrc-cxx) 2>"$T_TMP/pc/cpp.err"; then
	t_ok "write_imm_client_cpp built with pkg-config --cflags --libs mrc-cxx"
	t_eq "C++ client needs no libmrc.so" "$(readelf -d "$T_TMP/pc/write_imm_client_cpp" | grep -c 'libmrc')" 0
else
	t_fail "C++ build with mrc-cxx: $(head -5 "$T_TMP/pc/cpp.err")"
fi
t_eq "pkg-config --cflags mrc-cxx" "$(pc --cflags mrc-cxx | xargs)" "-I$ROOT$MRC_INCLUDEDIR -std=c++20"

step "examples with find_package(mrc)"
mkdir -p "$T_TMP/cm"
cat >"$T_TMP/cm/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.22)
project(mrc_examples C CXX)
find_package(mrc $MRC_VERSION REQUIRED)
foreach(ex write_imm_server write_imm_client)
  add_executable(\${ex} $EX/\${ex}.c)
  set_target_properties(\${ex} PROPERTIES C_STANDARD 11 C_EXTENSIONS OFF)
  target_compile_definitions(\${ex} PRIVATE _POSIX_C_SOURCE=200809L)
  target_compile_options(\${ex} PRIVATE -Wall -Wextra -Werror)
  target_link_libraries(\${ex} PRIVATE mrc::mrc)
endforeach()
add_executable(write_imm_client_cpp $EX/write_imm_client_cpp.cc)
target_compile_options(write_imm_client_cpp PRIVATE -Wall -Wextra -Werror)
target_link_libraries(write_imm_client_cpp PRIVATE mrc::mrc_static)
EOF
if cmake -S "$T_TMP/cm" -B "$T_TMP/cm/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_PREFIX_PATH="$ROOT$MRC_PREFIX" >"$T_TMP/cm/log" 2>&1 &&
	ninja -C "$T_TMP/cm/build" >>"$T_TMP/cm/log" 2>&1; then
	t_ok "examples built with find_package(mrc) + mrc::mrc"
else
	t_fail "find_package build: $(tail -15 "$T_TMP/cm/log")"
fi
t_eq "mrc_DIR" "$(sed -n 's/^mrc_DIR:PATH=//p' "$T_TMP/cm/build/CMakeCache.txt")" "$LIB/cmake/mrc"
t_check "find_package client links the root's libmrc.so" grep -q "$LIB/libmrc.so" \
	<<<"$(ninja -C "$T_TMP/cm/build" -t commands write_imm_client)"

# ---- 5. run between two namespaces ---------------------------------------------
step "pkg-config server and find_package client between two namespaces"
t_up direct planes=4
ifs() { jq -r --arg h "$1" '[.hosts[$h].ports[].ifname] | join(",")' "$ST"; }
PORT=$((20000 + RANDOM % 10000))
ip netns exec "$(t_ns B)" env LD_LIBRARY_PATH="$LIB" timeout 60 "$T_TMP/pc/write_imm_server" -p "$PORT" \
	"$(ifs B)" >"$T_TMP/srv.out" 2>&1 &
spid=$!
T_PIDS+=("$spid")
ip netns exec "$(t_ns A)" env LD_LIBRARY_PATH="$LIB" timeout 60 "$T_TMP/cm/build/write_imm_client" -p "$PORT" \
	"$(t_port B 0 ipv4)" "$(ifs A)" >"$T_TMP/cli.out" 2>&1
t_eq "client exit status" "$?" 0
wait "$spid"
t_eq "server exit status" "$?" 0
t_eq "server verified" "$(grep -o 'verified [0-9]* of [0-9]*' "$T_TMP/srv.out" | tail -1)" "verified 4 of 4"
t_eq "client got the verdict" "$(grep -o 'server says: .*' "$T_TMP/cli.out")" "server says: verified 4 of 4"
[ "$T_FAILS" = 0 ] || cat "$T_TMP/srv.out" "$T_TMP/cli.out"

step "C server and the C++ client (pkg-config mrc-cxx, then find_package mrc::mrc_static)"
for cli in "$T_TMP/pc/write_imm_client_cpp" "$T_TMP/cm/build/write_imm_client_cpp"; do
	PORT=$((20000 + RANDOM % 10000))
	ip netns exec "$(t_ns B)" env LD_LIBRARY_PATH="$LIB" timeout 60 "$T_TMP/pc/write_imm_server" -p "$PORT" \
		-n 6 -s 100000 "$(ifs B)" >"$T_TMP/srv.out" 2>&1 &
	spid=$!
	T_PIDS+=("$spid")
	ip netns exec "$(t_ns A)" timeout 60 "$cli" -p "$PORT" -n 6 -s 100000 \
		"$(t_port B 0 ipv4)" "$(ifs A)" >"$T_TMP/cli.out" 2>&1
	t_eq "${cli#"$T_TMP"/}: exit status" "$?" 0
	wait "$spid"
	t_eq "server exit status" "$?" 0
	t_eq "server verified the C++ client's writes" \
		"$(grep -o 'verified [0-9]* of [0-9]*' "$T_TMP/srv.out" | tail -1)" "verified 6 of 6"
	[ "$T_FAILS" = 0 ] || cat "$T_TMP/srv.out" "$T_TMP/cli.out"
done

# ---- 6. man pages --------------------------------------------------------------
step "man pages"
MAN=$ROOT$MRC_MANDIR
for page in man1/mrc_perf.1 man8/mrcctl.8 man8/mrcd.8 man5/mrcd.toml.5 man5/mrc-serviced.toml.5 man3/libmrc.3; do
	out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "$MAN/$page" 2>"$T_TMP/man.err" | wc -l)
	t_eq "man -l $page: warnings" "$(head -3 "$T_TMP/man.err")" ""
	t_range "man -l $page: lines" "$out" 20 100000
done
t_check "man mrc_perf (MANPATH into the root)" grep -q "mrc_perf - bandwidth and latency" \
	<<<"$(MANPATH=$MAN MANWIDTH=200 man -E ascii mrc_perf 2>&1)"
# The tools' pages come from their --help: every option of --help is in the page.
for spec in "mrc_perf 1 $MRC_BINDIR" "mrcctl 8 $MRC_SBINDIR" "mrcd 8 $MRC_SBINDIR"; do
	read -r tool sec dir <<<"$spec"
	page=$(MANWIDTH=1000 man -E ascii -l "$MAN/man$sec/$tool.$sec" 2>/dev/null | col -bx)
	missing=
	for o in $("$ROOT$dir/$tool" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
		grep -qF -- "$o" <<<"$page" || missing+=" $o"
	done
	t_eq "$tool($sec) names every option of $tool --help" "$missing" ""
	t_check "$tool($sec) has the version" grep -qF "$MRC_VERSION" <<<"$page"
done

# ---- 7. the systemd unit and mrcd started as it starts it ------------------------
step "systemd unit"
U=$ROOT$UNIT
t_eq "ExecStartPre" "$(sed -n 's/^ExecStartPre=//p' "$U")" "$MRC_SBINDIR/mrcd --config $CONF --check"
t_eq "ExecStart" "$(sed -n 's/^ExecStart=//p' "$U")" "$MRC_SBINDIR/mrcd --config $CONF"
SUNIT=$MRC_PREFIX/lib/systemd/system/mrc-serviced.service
SU=$ROOT$SUNIT
# mrc-serviced's: its planes from the file or /etc/default (optional), no
# restart after a refused configuration, SIGHUP for reload.
t_eq "mrc-serviced: ExecStart" "$(sed -n 's/^ExecStart=//p' "$SU")" "$MRC_SBINDIR/mrc-serviced \$MRC_SERVICED_ARGS"
t_eq "mrc-serviced: ExecReload" "$(sed -n 's/^ExecReload=//p' "$SU")" "/bin/kill -HUP \$MAINPID"
t_eq "mrc-serviced: EnvironmentFile" "$(sed -n 's/^EnvironmentFile=//p' "$SU")" "-/etc/default/mrc-serviced"
t_eq "mrc-serviced: RestartPreventExitStatus" "$(sed -n 's/^RestartPreventExitStatus=//p' "$SU")" 2
for d in $(sed -n 's/^Documentation=//p' "$U" "$SU"); do # man:NAME(SEC)
	n=${d#man:}
	t_check "Documentation=$d is installed" test -f "$MAN/man${n//[^0-9]/}/${n%(*}.${n//[^0-9]/}"
done
# --root: the unit's ExecStart binaries are looked up in the root, its man:
# pages with man(1) on MANPATH; the units it depends on (sysinit.target, ...)
# are the host's systemd's, copied into the root as the systemd package would
# have installed them there.
mkdir -p "$ROOT/usr/lib/systemd/system"
cp -an /usr/lib/systemd/system/. "$ROOT/usr/lib/systemd/system/"
# ExecReload's /bin/kill: procps's, on a real host.
install -D -m 0755 /bin/kill "$ROOT/bin/kill"
if SYSTEMD_LOG_LEVEL=notice MANPATH=$MAN systemd-analyze verify --root="$ROOT" "$UNIT" "$SUNIT" \
	>"$T_TMP/verify.log" 2>&1 && ! grep -q . "$T_TMP/verify.log"; then
	t_ok "systemd-analyze verify --root (no findings)"
else
	t_fail "systemd-analyze verify: $(head -10 "$T_TMP/verify.log")"
fi
# mrcd as the unit starts it: the command lines of the installed unit with
# their absolute paths mapped into the root, in a network namespace with the
# plane of the default configuration (eth1). The mount namespace of
# `ip netns exec` gets what systemd and the boot provide: a bpffs on
# /sys/fs/bpf and the unit's RuntimeDirectory (/run/mrc).
map() { sed -e "s|$MRC_SBINDIR/|$ROOT$MRC_SBINDIR/|g" -e "s|$CONF|$ROOT$CONF|g"; }
read -ra PRE <<<"$(sed -n 's/^ExecStartPre=//p' "$U" | map)"
read -ra START <<<"$(sed -n 's/^ExecStart=//p' "$U" | map)"
rundir=$(sed -n 's/^RuntimeDirectory=//p' "$U")
sig=$(sed -n 's/^KillSignal=//p' "$U")
ip netns add "$NS" || t_skip "cannot create a network namespace"
ip -n "$NS" link set lo up
ip -n "$NS" link add eth1 type veth peer name eth1p
ip -n "$NS" addr add 198.18.240.1/24 dev eth1
ip -n "$NS" addr add 198.18.240.2/24 dev eth1p
ip -n "$NS" link set eth1 up
ip -n "$NS" link set eth1p up
pre=$(ip netns exec "$NS" "${PRE[@]}" 2>&1)
t_eq "ExecStartPre ($(basename "${PRE[0]}") --check of the default $CONF): status" "$?" 0
t_eq "ExecStartPre output" "$pre" "mrcd: configuration ok (1 planes)"
ip netns exec "$NS" bash -c 'mount -t bpf bpf /sys/fs/bpf && mount -t tmpfs tmpfs /run &&
	mkdir -m 0755 "/run/$1" && echo $$ >"$2" && shift 2 && exec "$@"' mrcd "$rundir" "$T_TMP/mrcd.pid" \
	"${START[@]}" >"$T_TMP/mrcd.log" 2>&1 &
T_PIDS+=($!)
t_wait_file "$T_TMP/mrcd.pid" 10 && MRCD_PID=$(cat "$T_TMP/mrcd.pid")
ctl() { nsenter -t "$MRCD_PID" -m -n "$ROOT$MRC_SBINDIR/mrcctl" "$@"; }
ok=0
for _ in $(seq 1 100); do
	if [ -z "$MRCD_PID" ] || ! kill -0 "$MRCD_PID" 2>/dev/null; then break; fi
	if ctl -j dev show >"$T_TMP/dev.json" 2>/dev/null; then ok=1; break; fi
	sleep 0.1
done
t_eq "mrcd (ExecStart) answers mrcctl on /run/$rundir/mrcd.sock" "$ok" 1
if [ $ok = 1 ]; then
	t_eq "mrcctl port show: the configured plane" \
		"$(ctl -j port show | jq -r '[.[] | "\(.port):\(.ifname)"] | join(",")')" "1:eth1"
	kill -"${sig#SIG}" "$MRCD_PID"
	for _ in $(seq 1 100); do kill -0 "$MRCD_PID" 2>/dev/null || break; sleep 0.1; done
	t_check "mrcd stopped on $sig" bash -c "! kill -0 $MRCD_PID 2>/dev/null"
fi
[ "$T_FAILS" = 0 ] || tail -20 "$T_TMP/mrcd.log"
step "done"
t_done
