#!/bin/busybox sh
# shellcheck shell=dash
# /init of the initramfs that vm-tests/run.sh builds: busybox-static, the
# kernel modules of vm-tests/MODULES (boot and test stages, with their
# dependencies, in load order) and modules/dir, the host path of the kernel's
# lib/modules/<release> tree.
#
# It loads the modules, mounts the host root read-only over 9p (tag mrcroot)
# with a tmpfs-backed overlay on top, the run's writable share (tag mrcout) at
# /mrc-vm, and the kernel file systems the tests use, brings up lo, and hands
# over to /mrc-vm/guest-init.sh on the new root. Everything is done here, from
# RAM, because every program started from the 9p root is slow under TCG.
# A failure powers the VM off; run.sh then finds no exit status and prints
# the console log.
/bin/busybox mkdir -p /proc /sys /dev /bin
/bin/busybox --install -s /bin
export PATH=/bin
mount -t devtmpfs devtmpfs /dev
exec 0<>/dev/console 1>&0 2>&0
mount -t proc proc /proc
mount -t sysfs sysfs /sys

say() { echo "mrc-vm: [$(cut -d' ' -f1 /proc/uptime)s] $*"; }
fail() {
  say "initramfs: $*"
  poweroff -f
  sleep 60
}

say "initramfs on $(uname -r), loading modules"
if [ -f /modules/order ]; then
  while read -r stage ko; do
    if ! insmod "/modules/$ko"; then
      [ "$stage" = boot ] && fail "insmod $ko failed"
      say "insmod $ko failed (tests that need it skip)"
    fi
  done </modules/order
fi

opts=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /lower /upper /newroot
mount -t 9p -o "$opts,cache=loose,ro" mrcroot /lower || fail "cannot mount the host root (9p tag mrcroot)"
mount -t tmpfs -o mode=0755 tmpfs /upper || fail "cannot mount the overlay's tmpfs"
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot ||
  fail "cannot mount the overlay on the host root"
mkdir -p /newroot/mrc-vm
mount -t 9p -o "$opts,cache=none" mrcout /newroot/mrc-vm || fail "cannot mount the result share (9p tag mrcout)"
[ -f /newroot/mrc-vm/guest-init.sh ] || fail "guest-init.sh missing from the result share"

mnt() { # mnt TYPE DIR OPTIONS
  mkdir -p "$2"
  mount -t "$1" -o "$3" "$1" "$2" || say "initramfs: cannot mount $1 on $2"
}
mnt devpts /dev/pts gid=5,mode=620,ptmxmode=666
mnt tmpfs /dev/shm mode=1777
mnt bpf /sys/fs/bpf mode=0700
mnt debugfs /sys/kernel/debug mode=0700
mnt tracefs /sys/kernel/tracing mode=0700
mnt cgroup2 /sys/fs/cgroup nsdelegate
mnt tmpfs /newroot/run mode=0755
# /tmp: a fresh tmpfs, unless the trees under test live in the host's /tmp.
grep -q 'mrc.keep_tmp=1' /proc/cmdline || mnt tmpfs /newroot/tmp mode=1777
mkdir -p /newroot/run/netns
if [ -s /modules/dir ] && [ -d "/newroot$(cat /modules/dir)" ]; then
  # The kernel's own modules where modprobe and the kernel's auto-loading look.
  kmods=/newroot/lib/modules/$(uname -r)
  mkdir -p "$kmods"
  mount -o bind "/newroot$(cat /modules/dir)" "$kmods" || say "initramfs: cannot bind the modules tree"
fi
echo mrc-vm >/proc/sys/kernel/hostname
ip link set dev lo up || say "initramfs: cannot bring up lo"
say "host root mounted, switching to it"
for d in dev proc sys; do # with the file systems mounted below them
  mkdir -p "/newroot/$d"
  mount -o move "/$d" "/newroot/$d" || fail "cannot move /$d to the new root"
done
exec switch_root /newroot /bin/bash /mrc-vm/guest-init.sh
