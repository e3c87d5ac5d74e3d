#!/bin/bash
# Builds, once, the Debian 12 tree the systemd boot test boots as its root (over 9p):
#   debootstrap --variant=minbase with systemd as PID 1, iproute2, dbus, kmod (modprobe for
#   the kernel's module autoloader) and nftables (an independent reader of the rules).
# Then makes it boot quietly under QEMU: no serial getty (it would wait 90 s for the
# console device), an empty fstab, a hostname, and no network configuration to wait for.
# Idempotent (a complete tree is reused), flock'ed, and built into a temporary directory
# that is renamed only when complete, so an interrupted run leaves no half tree.
# Needs: debootstrap, and apt access to a Debian mirror (about 35 s to 4 min).
# Usage: bash test/vm/systemd/prepare-tree.sh [CACHE_DIR]   (default <repo>/.cache/systemd-vm)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
cache=${1:-$repo/.cache/systemd-vm}
tree=$cache/bookworm
version=2   # bump when what follows changes, to rebuild cached trees
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 900 9
if [ -f "$tree/.kpts-tree-version" ] && [ "$(cat "$tree/.kpts-tree-version")" = "$version" ]; then
  exit 0
fi
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
mirror=${mirror:-http://deb.debian.org/debian}
tmp=$cache/bookworm.tmp
rm -rf "$tmp"
echo "systemd-vm: debootstrap bookworm from $mirror into $tmp" >&2
/usr/sbin/debootstrap --variant=minbase --include=systemd,systemd-sysv,iproute2,dbus,kmod,nftables \
  bookworm "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
  tail -n 30 "$cache/debootstrap.log" >&2
  exit 1
}
echo kpts-vm >"$tmp/etc/hostname"
: >"$tmp/etc/fstab"
ln -sf /dev/null "$tmp/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$tmp/etc/systemd/system/getty@tty1.service"
ln -sf /dev/null "$tmp/etc/systemd/system/systemd-timesyncd.service"
# Apt's package lists are not needed inside (dpkg -i only): keep the tree small.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
echo "$version" >"$tmp/.kpts-tree-version"
rm -rf "$tree"
mv "$tmp" "$tree"
echo "systemd-vm: tree ready in $tree" >&2
