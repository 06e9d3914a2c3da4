#!/usr/bin/env bash
# Runs the project's CTest labels as root inside qemu on another kernel.
#
#   vm-tests/run.sh [--kernel NAME|IMAGE] [--interactive] [--timeout S] [options] [-- CTEST-ARGS]
#
#   --kernel NAME|IMAGE  a name from vm-tests/KERNELS (default debian12), or the path of
#                        a bzImage (then --modules gives its lib/modules/<release> tree)
#   --modules DIR        lib/modules/<release> tree of an IMAGE (default none: virtio,
#                        9p and overlay must then be built into it)
#   --build-dir DIR      the CTest tree (default $MRC_BUILD_DIR, else <repo>/build)
#   --cache DIR          kernel cache and run directories
#                        (default $MRC_VM_CACHE, else <build-dir>/vm-cache)
#   --interactive        a shell on the VM's serial console (stdio) instead of ctest
#   --exec CMD           run CMD (bash -c, in the build directory) instead of ctest;
#                        its exit status is returned
#   --timeout S          overall limit in seconds (default 3600; none when interactive)
#   --timeout-scale N    multiply the tests' CTest TIMEOUTs in the VM by N
#                        (default 1 with KVM, 5 with TCG)
#   --no-probe           skip vm-tests/probe.sh (it runs before the tests by default)
#   --probe-only         run the probe and no tests
#   --accel auto|kvm|tcg KVM when /dev/kvm is usable and the CPU has vmx/svm, else
#                        TCG (default auto)
#   --smp N              vCPUs, 1 or 2 (default 2); --mem MiB (default 2048)
#   --no-deps            never call scripts/deps.sh --vm: exit 77 if a tool is missing
#                        (also MRC_VM_NO_DEPS=1)
#   --log FILE           also copy the guest console log to FILE
#   --denylist FILE      instead of vm-tests/DENYLIST
#   --dry-run            resolve the kernel, print the ctest arguments and the
#                        qemu command, boot nothing
#   --list               print the kernels of vm-tests/KERNELS and exit
#   MRC_SKIP_VM=1        exit 77 at once (lets CI opt out of the vm label)
#
# CTEST-ARGS default to: -L '^(bpf|netns)$'. --output-on-failure is always added,
# and the tests vm-tests/DENYLIST lists for the kernel are excluded with -E.
# The host root is shared read-only over 9p with a tmpfs overlay on top, so the
# build tree, ctest and every tool are the host's; the VM has no network device.
#
# Exit status: ctest's (or CMD's) inside the VM; 77 when the VM cannot run here (qemu,
# busybox-static or the kernel missing); 124 on timeout; 125 when the guest
# left no status (boot failure: the console log is printed).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)

kernel=debian12
modules_arg=
build_dir=${MRC_BUILD_DIR:-$SRC/build}
cache=${MRC_VM_CACHE:-}
interactive=0
timeout=
timeout_scale=
probe=1
run_tests=1
accel=auto
smp=2
mem=2048
no_deps=${MRC_VM_NO_DEPS:-0}
log_copy=
list=0
dry_run=0
exec_cmd=
denylist=$HERE/DENYLIST
ctest_args=()
user_ctest_args=0

log() { echo "vm-tests: $*" >&2; }
die() { log "$*"; exit 2; }
skip() { log "cannot run the VM: $*"; exit 77; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel=$2; shift 2 ;;
    --modules) modules_arg=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --interactive) interactive=1; shift ;;
    --timeout) timeout=$2; shift 2 ;;
    --timeout-scale) timeout_scale=$2; shift 2 ;;
    --no-probe) probe=0; shift ;;
    --probe-only) probe=1; run_tests=0; shift ;;
    --accel) accel=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --no-deps) no_deps=1; shift ;;
    --log) log_copy=$2; shift 2 ;;
    --list) list=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    --exec) exec_cmd=$2; shift 2 ;;
    --denylist) denylist=$2; shift 2 ;;
    --) shift; ctest_args=("$@"); user_ctest_args=1; break ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
case "$smp" in 1|2) ;; *) die "--smp must be 1 or 2 (the host has 2 shared cores)" ;; esac
case "$accel" in auto|kvm|tcg) ;; *) die "--accel must be auto, kvm or tcg" ;; esac
[[ "$mem" =~ ^[0-9]+$ ]] || die "--mem takes MiB"
if [ -z "$timeout" ]; then
  if [ $interactive -eq 1 ]; then timeout=0; else timeout=3600; fi
fi
[[ "$timeout" =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
[[ "$timeout_scale" =~ ^([1-9][0-9]*)?$ ]] || die "--timeout-scale takes a whole number >= 1"

# --- the kernels of vm-tests/KERNELS ------------------------------------------
# Each line: NAME SOURCE RELEASE-GLOB DESCRIPTION...
#   SOURCE deb:PACKAGE  Debian (meta) package, apt-get download + dpkg-deb -x
#   SOURCE host         the running kernel, /boot/vmlinuz-$(uname -r)
kernels_file=$HERE/KERNELS
kernel_line() { awk -v n="$1" '$1 == n && $1 !~ /^#/ { print; exit }' "$kernels_file"; }

if [ $list -eq 1 ]; then
  printf '%-10s %-24s %-8s %s\n' NAME SOURCE RELEASE DESCRIPTION
  grep -v '^[[:space:]]*\(#\|$\)' "$kernels_file" |
    while read -r n s r d; do printf '%-10s %-24s %-8s %s\n' "$n" "$s" "$r" "$d"; done
  exit 0
fi

if [ "${MRC_SKIP_VM:-0}" = 1 ]; then
  log "MRC_SKIP_VM=1: not booting a VM"
  exit 77
fi
if [ "${MRC_IN_VM:-0}" = 1 ]; then
  log "already inside a vm-tests VM: not nesting qemu"
  exit 77
fi
build_dir=$(cd "$build_dir" 2>/dev/null && pwd) || die "build directory not found (set --build-dir or MRC_BUILD_DIR)"
cache=${cache:-$build_dir/vm-cache}

# --- tools ----------------------------------------------------------------------
tools_missing() {
  local t miss=()
  for t in qemu-system-x86_64 cpio gzip dpkg-deb depmod modprobe flock; do
    command -v "$t" >/dev/null || miss+=("$t")
  done
  # The initramfs needs the static busybox (busybox-static), not the dynamic one.
  if [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
    miss+=("static /bin/busybox")
  fi
  echo "${miss[*]}"
}
missing=$(tools_missing)
if [ -n "$missing" ]; then
  if [ "$no_deps" = 1 ]; then
    skip "missing $missing (install them with: scripts/deps.sh --vm)"
  fi
  log "missing $missing: running scripts/deps.sh --vm"
  "$SRC/scripts/deps.sh" --vm >&2 || skip "scripts/deps.sh --vm failed"
  missing=$(tools_missing)
  [ -z "$missing" ] || skip "still missing $missing after scripts/deps.sh --vm"
fi

# --- kernel resolution: sets kname, kimage, krel, kmoddir ------------------------
# Release string of a bzImage, from its setup header (kernel_version field).
image_release() {
  local img=$1 off
  [ "$(dd if="$img" bs=1 skip=$((0x202)) count=4 2>/dev/null)" = HdrS ] || return 1
  off=$(od -An -tu2 -j $((0x20e)) -N2 "$img" | tr -d ' ')
  dd if="$img" bs=1 skip=$((off + 0x200)) count=256 2>/dev/null | tr '\0' '\n' | head -1 | awk '{print $1}'
}

apt_opts=(-q)
[ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)

# The dependency linux-image-<abi> of a Debian meta package, from the apt lists.
deb_dependency() {
  apt-cache depends --no-recommends --no-suggests "$1" 2>/dev/null |
    awk '/^ *Depends: linux-image-/ { print $2; exit }'
}

# fetch_deb NAME META-PACKAGE RELEASE-GLOB: downloads (once) and extracts the
# kernel into $cache/kernels/NAME/<release>/{boot,lib/modules}.
fetch_deb() {
  local meta=$2 glob=$3 dir=$cache/kernels/$1 dep rel tmp
  mkdir -p "$dir"
  exec 9>"$dir/.lock"
  flock 9
  dep=$(deb_dependency "$meta")
  if [ -z "$dep" ] && [ "$(id -u)" -eq 0 ]; then
    log "apt lists know no $meta: apt-get update"
    apt-get update -qq >&2 || true
    dep=$(deb_dependency "$meta")
  fi
  if [ -z "$dep" ]; then
    if [ -f "$dir/current" ] && [ -f "$dir/$(cat "$dir/current")/.complete" ]; then
      rel=$(cat "$dir/current")
      log "apt cannot resolve $meta; using the cached $rel"
      echo "$rel"
      exec 9>&-
      return 0
    fi
    skip "apt cannot resolve the Debian package $meta (no apt lists, or not a Debian host)"
  fi
  rel=${dep#linux-image-}
  # shellcheck disable=SC2053
  [[ "$rel" == $glob ]] || skip "$meta resolves to $dep, not a $glob kernel (KERNELS wants $glob)"
  if [ ! -f "$dir/$rel/.complete" ]; then
    log "downloading $meta and $dep into $dir"
    tmp=$(mktemp -d "$dir/dl.XXXXXX")
    if ! (cd "$tmp" && apt-get download "${apt_opts[@]}" "$meta" "$dep") >"$tmp/apt.log" 2>&1; then
      cat "$tmp/apt.log" >&2
      rm -rf "$tmp"
      skip "apt-get download $meta $dep failed"
    fi
    # The meta package must really depend on what apt-cache said.
    dpkg-deb -f "$tmp/${meta}"_*.deb Depends | grep -q "^$dep\b" ||
      { rm -rf "$tmp"; die "$meta does not depend on $dep"; }
    mkdir "$tmp/x"
    dpkg-deb -x "$tmp/${dep}"_*.deb "$tmp/x"
    [ -f "$tmp/x/boot/vmlinuz-$rel" ] || { rm -rf "$tmp"; die "$dep has no /boot/vmlinuz-$rel"; }
    rm -rf "$tmp/x/usr" "${dir:?}/${rel:?}"
    depmod -b "$tmp/x" "$rel"
    mv "$tmp/x" "$dir/$rel"
    rm -rf "$tmp"
    touch "$dir/$rel/.complete"
    # Older ABIs of the same package (about 400 MB each) go.
    for old in "$dir"/*/; do
      old=${old%/}
      [ "${old##*/}" = "$rel" ] || { log "removing the older ${old##*/}"; rm -rf "$old"; }
    done
  fi
  echo "$rel" >"$dir/current"
  exec 9>&-
  echo "$rel"
}

kmoddir=
if [ -f "$kernel" ]; then
  kimage=$(cd "$(dirname "$kernel")" && pwd)/$(basename "$kernel")
  krel=$(image_release "$kimage") || die "$kernel is not a bzImage"
  kname=$krel
  if [ -n "$modules_arg" ]; then
    kmoddir=$(cd "$modules_arg" && pwd) || die "--modules $modules_arg not found"
    [[ "$kmoddir" == */lib/modules/* ]] || die "--modules wants a .../lib/modules/<release> directory"
    [ -f "$kmoddir/modules.dep" ] || die "$kmoddir has no modules.dep (run depmod -b for it)"
    [ "$(basename "$kmoddir")" = "$krel" ] || log "warning: $kmoddir is not named after the image's release $krel"
  fi
else
  line=$(kernel_line "$kernel")
  [ -n "$line" ] || die "unknown kernel '$kernel': neither a file nor a name in vm-tests/KERNELS"
  read -r kname ksource kglob _ <<<"$line"
  case "$ksource" in
    deb:*)
      krel=$(fetch_deb "$kname" "${ksource#deb:}" "$kglob")
      kimage=$cache/kernels/$kname/$krel/boot/vmlinuz-$krel
      kmoddir=$cache/kernels/$kname/$krel/lib/modules/$krel
      ;;
    host)
      krel=$(uname -r)
      kimage=/boot/vmlinuz-$krel
      [ -r "$kimage" ] || skip "the host kernel's image $kimage is not readable (this host boots its kernel from outside its root file system)"
      [ -f "/lib/modules/$krel/modules.dep" ] && kmoddir=/lib/modules/$krel
      ;;
    *) die "KERNELS: unknown source '$ksource' for $kname" ;;
  esac
fi

# --- ctest arguments and the DENYLIST ------------------------------------------
[ $user_ctest_args -eq 1 ] || ctest_args=(-L '^(bpf|netns)$')
[ -f "$denylist" ] || die "denylist $denylist not found"
deny=$(awk -v n="$kname" -v r="$krel" '
  /^[[:space:]]*(#|$)/ { next }
  NF < 3 { printf "%s:%d: KERNEL TEST-REGEX REASON expected\n", FILENAME, FNR > "/dev/stderr"; bad = 1; next }
  { g = $1; gsub(/\./, "\\.", g); gsub(/\*/, ".*", g); gsub(/\?/, ".", g); g = "^" g "$" }
  n ~ g || r ~ g { printf "%s%s", sep, $2; sep = "|" }
  END { exit bad }' "$denylist") || die "fix $denylist"
if [ -n "$deny" ] && [ ${#ctest_args[@]} -gt 0 ]; then
  merged=0
  for i in "${!ctest_args[@]}"; do
    case "${ctest_args[$i]}" in
      -E|--exclude-regex)
        ctest_args[i + 1]="(${ctest_args[i + 1]})|$deny"
        merged=1 ;;
    esac
  done
  [ $merged -eq 1 ] || ctest_args+=(-E "$deny")
  log "DENYLIST excludes on $kname: $deny"
fi
if [ $run_tests -eq 0 ] || [ -n "$exec_cmd" ]; then ctest_args=(); fi
[ ${#ctest_args[@]} -eq 0 ] || ctest_args=(--output-on-failure "${ctest_args[@]}")
if [ ${#ctest_args[@]} -gt 0 ] || [ -n "$exec_cmd" ] || [ $interactive -eq 1 ]; then
  [ -f "$build_dir/CTestTestfile.cmake" ] || die "$build_dir is not a configured CTest tree"
fi

# --- modules: MODULES lists them by stage (boot: needed to mount the root;
# test: wanted by the tests); both go into the initramfs
modules_of() { awk -v s="$1" '$1 == s { print $2 }' "$HERE/MODULES"; }

# --- the run directory (the guest's writable share) ---------------------------
mkdir -p "$cache/runs"
# keep the newest 20 runs
# shellcheck disable=SC2012
{ ls -1dt "$cache/runs"/*/ 2>/dev/null || true; } | tail -n +21 | xargs -r rm -rf
run=$(mktemp -d "$cache/runs/$kname-$(date +%Y%m%d-%H%M%S)-XXXX")
console=$run/console.log

initrd=$run/initramfs.cpio.gz
stage=$run/initramfs
mkdir -p "$stage"/{bin,dev,proc,sys,modules}
cp /bin/busybox "$stage/bin/busybox"
install -m 0755 "$HERE/initramfs-init.sh" "$stage/init"
[ "$(id -u)" -eq 0 ] && mknod -m 600 "$stage/dev/console" c 5 1
: >"$stage/modules/order"
if [ -n "$kmoddir" ]; then
  echo "$kmoddir" >"$stage/modules/dir"
  # modprobe -d wants the directory that holds lib/modules/<release>
  base=${kmoddir%/lib/modules/*}
  base=${base:-/}
  n=0
  for st in boot test; do
    for m in $(modules_of $st); do
      deps=$(modprobe -d "$base" -S "${kmoddir##*/}" --show-depends "$m" 2>/dev/null) ||
        { log "module $m not found for $krel (tests that need it skip)"; continue; }
      while read -r kind path _; do
        [ "$kind" = insmod ] || continue
        ko=$(basename "$path")
        grep -q " [0-9]*-$ko\$" "$stage/modules/order" && continue
        n=$((n + 1))
        cp "$path" "$stage/modules/$(printf %02d $n)-$ko"
        echo "$st $(printf %02d $n)-$ko" >>"$stage/modules/order"
      done <<<"$deps"
    done
  done
fi
(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd"
rm -rf "$stage"

install -m 0755 "$HERE/guest-init.sh" "$run/guest-init.sh"
# /dev/kvm can exist without working (no vmx/svm: a KVM guest never starts).
if [ "$accel" = auto ]; then
  accel=tcg
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
    accel=kvm
  fi
fi
if [ -z "$timeout_scale" ]; then
  if [ "$accel" = kvm ]; then timeout_scale=1; else timeout_scale=5; fi
fi
MRC_VM_KERNEL=$kname
MRC_BUILD_DIR=$build_dir
MRC_SOURCE_DIR=$SRC
MRC_VM_INTERACTIVE=$interactive
MRC_VM_PROBE=$probe
MRC_VM_EXEC=$exec_cmd
MRC_VM_TIMEOUT_SCALE=$timeout_scale
MRC_VM_TERM=${TERM:-linux}
MRC_VM_TTY_SIZE=$( { [ -t 0 ] && stty size; } 2>/dev/null || true)
CTEST_ARGS=("${ctest_args[@]}")
declare -p MRC_VM_KERNEL MRC_BUILD_DIR MRC_SOURCE_DIR \
  MRC_VM_INTERACTIVE MRC_VM_PROBE MRC_VM_EXEC MRC_VM_TIMEOUT_SCALE MRC_VM_TERM MRC_VM_TTY_SIZE CTEST_ARGS >"$run/params.sh"

# --- qemu ---------------------------------------------------------------------
if [ "$accel" = kvm ]; then cpu=host; else cpu=max; fi
cmdline="console=ttyS0,115200 panic=-1 loglevel=4 mitigations=off rdinit=/init"
# A tmpfs on the guest's /tmp would hide a source or build tree that lives
# under the host's /tmp (CI clones there): then /tmp stays the overlay.
for d in "$build_dir" "$SRC"; do
  case "$d" in /tmp | /tmp/*) cmdline+=" mrc.keep_tmp=1"; break ;; esac
done
# shellcheck disable=SC2054 # commas belong to qemu's option syntax
qemu=(nice -n "${MRC_VM_NICE:-10}" qemu-system-x86_64 -name "mrc-vm-$kname" -machine pc -accel "$accel" -cpu "$cpu"
  -smp "$smp" -m "$mem" -nodefaults -no-user-config -display none -vga none -nic none -no-reboot
  -kernel "$kimage" -initrd "$initrd" -append "$cmdline"
  -fsdev local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap
  -device virtio-9p-pci,fsdev=fsroot,mount_tag=mrcroot
  -fsdev "local,id=fsout,path=$run,security_model=none"
  -device virtio-9p-pci,fsdev=fsout,mount_tag=mrcout
  -pidfile "$run/qemu.pid")
if [ $interactive -eq 1 ]; then
  # shellcheck disable=SC2054
  qemu+=(-chardev "stdio,id=con,mux=on,signal=off,logfile=$console"
    -serial chardev:con -mon chardev=con,mode=readline)
else
  qemu+=(-chardev "file,id=con,path=$console" -serial chardev:con -monitor none)
fi

log "kernel $kname ($krel), $accel, $smp vCPU, $mem MiB, test timeouts x$timeout_scale, run directory $run"
[ ${#ctest_args[@]} -eq 0 ] || log "ctest ${ctest_args[*]} in $build_dir"
if [ $dry_run -eq 1 ]; then
  echo "initramfs modules: $(gzip -dc "$initrd" | cpio -i --quiet --to-stdout modules/order | awk '{ print $2 }' | paste -sd' ')"
  printf 'ctest'; printf ' %q' "${ctest_args[@]}"; echo
  printf '%q ' "${qemu[@]}"; echo
  rm -rf "$run"
  exit 0
fi

qpid=
stty_saved=
cleanup() {
  if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
    kill -TERM "$qpid" 2>/dev/null || true
    for _ in 1 2 3 4 5; do kill -0 "$qpid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$qpid" 2>/dev/null || true
  fi
  [ -z "$stty_saved" ] || stty "$stty_saved" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A guest that wrote nothing at all to its console within boot_wait seconds
# did not boot (the kernel prints within a second of guest time, the
# initramfs within ~20 s under TCG; seen once: qemu under TCG printing
# nothing for 600 s, and the same run passing when started again). It is
# killed and booted once more, within the same overall timeout.
boot_wait=${MRC_VM_BOOT_WAIT:-180}
start=$(date +%s)
attempt=1
while :; do
  : >"$console"
  booted_at=$(date +%s)
  if [ $interactive -eq 1 ]; then
    [ -t 0 ] && stty_saved=$(stty -g)
    exec 3<&0
    "${qemu[@]}" <&3 &
  else
    "${qemu[@]}" </dev/null >"$run/qemu.out" 2>&1 &
  fi
  qpid=$!
  timed_out=0
  no_boot=0
  while kill -0 "$qpid" 2>/dev/null; do
    now=$(date +%s)
    if [ "$timeout" -gt 0 ] && [ $((now - start)) -ge "$timeout" ]; then
      timed_out=1
      log "timeout after ${timeout}s: killing qemu (pid $qpid)"
      cleanup
      break
    fi
    if [ $interactive -eq 0 ] && [ $attempt -eq 1 ] && [ ! -s "$console" ] &&
      [ $((now - booted_at)) -ge "$boot_wait" ]; then
      no_boot=1
      log "the guest wrote nothing to its console in ${boot_wait}s: it did not boot; killing qemu (pid $qpid) and booting again"
      cleanup
      break
    fi
    sleep 1
  done
  wait "$qpid" 2>/dev/null && qrc=0 || qrc=$?
  qpid=
  [ $no_boot -eq 1 ] || break
  attempt=2
done
elapsed=$(($(date +%s) - start))

[ -z "$log_copy" ] || cp "$console" "$log_copy"
if [ -f "$run/rc" ]; then
  rc=$(cat "$run/rc")
elif [ $timed_out -eq 1 ]; then
  rc=124
else
  rc=125
  log "the guest left no exit status (qemu exited with $qrc)"
  [ ! -s "$run/qemu.out" ] || cat "$run/qemu.out" >&2
fi
if [ $interactive -eq 0 ]; then
  [ ! -f "$run/probe.txt" ] || { echo "----- probe ($kname, $krel) -----"; cat "$run/probe.txt"; }
  if [ "$rc" != 0 ]; then
    echo "----- guest console ($console) -----"
    cat "$console"
    echo "----- end of guest console -----"
  elif [ ${#ctest_args[@]} -gt 0 ]; then
    echo "----- ctest in the VM ($kname, $krel) -----"
    awk '/tests passed, .* tests failed out of/ { p = 1 } /^mrc-vm: .* ctest exited/ { p = 0 } p' "$console"
  fi
fi
log "exit status $rc after ${elapsed}s ($kname $krel, $accel); console log $console"
exit "$rc"
