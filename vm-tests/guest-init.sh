#!/bin/bash
# PID 1 inside the VM of vm-tests/run.sh, started by the initramfs
# (initramfs-init.sh, which already mounted everything and loaded the modules)
# on the overlay of the host root. /mrc-vm is the run's writable 9p share:
# run.sh wrote params.sh there; this script leaves rc (the exit status run.sh
# returns), probe.txt and dmesg.txt there, then powers the VM off.
# Bash builtins where possible: every program started from 9p is slow on TCG.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
OUT=/mrc-vm
cd /

say() {
  local up _
  read -r up _ </proc/uptime
  echo "mrc-vm: [${up}s] $*"
}
finish() {
  dmesg >"$OUT/dmesg.txt" 2>&1
  echo "$1" >"$OUT/rc"
  sync
  say "exit status $1, powering off"
  busybox poweroff -f
  echo o >/proc/sysrq-trigger
  sleep 60
}

# shellcheck source=/dev/null
if ! . "$OUT/params.sh"; then
  say "cannot read $OUT/params.sh"
  finish 125
fi
ulimit -l unlimited
ulimit -n 65536 2>/dev/null

read -r _ memkb _ </proc/meminfo
cpus=0
while read -r key _; do [ "$key" = processor ] && cpus=$((cpus + 1)); done </proc/cpuinfo
say "guest-init: kernel $(</proc/sys/kernel/osrelease) ($MRC_VM_KERNEL), $cpus CPUs, $((memkb / 1024)) MiB"

if [ "${MRC_VM_PROBE:-0}" = 1 ]; then
  say "feature probe"
  MRC_BUILD_DIR=$MRC_BUILD_DIR bash "$MRC_SOURCE_DIR/vm-tests/probe.sh" --out "$OUT/probe.txt" ||
    say "probe.sh failed"
fi

if [ "${MRC_VM_INTERACTIVE:-0}" = 1 ]; then
  # Not a login shell: the host's dot files are not meant for this VM.
  export TERM=${MRC_VM_TERM:-linux} MRC_BUILD_DIR MRC_SOURCE_DIR MRC_IN_VM=1
  {
    echo "PS1='mrc-vm:\\w# '"
    echo "HISTFILE=/tmp/.bash_history"
    printf 'history -s %q' ctest
    printf ' %q' "${CTEST_ARGS[@]}"
    echo
    [ -z "${MRC_VM_TTY_SIZE:-}" ] || echo "stty rows ${MRC_VM_TTY_SIZE% *} cols ${MRC_VM_TTY_SIZE#* }"
  } >/tmp/mrc-vm.bashrc
  cd "$MRC_BUILD_DIR" 2>/dev/null || cd /
  say "interactive shell in $PWD; the tests run with: ctest ${CTEST_ARGS[*]} (Up arrow)"
  say "leave the shell (exit or Ctrl-D) to power the VM off; Ctrl-A x kills qemu"
  setsid -c bash --noprofile --rcfile /tmp/mrc-vm.bashrc -i </dev/ttyS0 >/dev/ttyS0 2>&1
  finish $?
fi

rc=0
if [ "${#CTEST_ARGS[@]}" -gt 0 ] || [ -n "${MRC_VM_EXEC:-}" ]; then
  if ! cd "$MRC_BUILD_DIR"; then
    say "build directory $MRC_BUILD_DIR not visible in the VM"
    finish 125
  fi
  # Files written in the build tree stay in the overlay; $MRC_VM_OUT is kept.
  export MRC_BUILD_DIR MRC_SOURCE_DIR MRC_IN_VM=1 MRC_VM_OUT=$OUT
  if [ -n "${MRC_VM_EXEC:-}" ]; then
    say "bash -c '$MRC_VM_EXEC'"
    bash -c "$MRC_VM_EXEC"
    rc=$?
    say "command exited with $rc"
  else
    scale=${MRC_VM_TIMEOUT_SCALE:-1}
    if [ "$scale" != 1 ]; then
      # CTest has no timeout multiplier: scale the TIMEOUT properties in the
      # overlay's copy of the CTest files (the host's stay as they are).
      say "scaling the tests' CTest TIMEOUTs by $scale (--timeout-scale)"
      # shellcheck disable=SC2016 # perl's variables
      find . \( -name CTestTestfile.cmake -o -name '*_tests.cmake' \) -type f -print0 |
        S=$scale xargs -0 -r perl -pi -e 's/\bTIMEOUT "?(\d+)"?/"TIMEOUT \"" . ($1 * $ENV{S}) . "\""/ge'
    fi
    say "ctest ${CTEST_ARGS[*]}"
    ctest "${CTEST_ARGS[@]}"
    rc=$?
    say "ctest exited with $rc"
  fi
  if [ "$rc" != 0 ] && mountpoint -q /tmp && [ -n "$(ls -A /tmp)" ]; then
    # What failing tests left in /tmp (their kept logs) would die with the VM.
    if [ "$(du -sm /tmp | cut -f1)" -le 100 ]; then
      tar -C /tmp -czf "$OUT/tmp.tar.gz" . && say "the VM's /tmp is saved as tmp.tar.gz in the run directory"
    else
      say "the VM's /tmp is over 100 MB: not saved"
    fi
  fi
  if dmesg | grep -E 'WARNING:|BUG:|Oops|Call Trace|general protection'; then
    say "the kernel logged the warnings or oopses above (full log: dmesg.txt)"
  fi
fi
finish "$rc"
