#!/bin/bash
# Prepares what the QEMU harness (test/vm/harness.ts) boots, once, into a cache directory:
#   CACHE/root/            the files of Debian's stock kernel package (dpkg -x), depmod'ed
#   CACHE/initrd.gz        busybox-static + the virtio/9p modules + an /init that mounts the
#                          host's / over 9p and switch_roots to the script named by VMINIT=
#   CACHE/kernel.env       KVER=... VMLINUZ=... (what the harness reads)
# Idempotent: a second run with the same kernel version does nothing. Safe to run twice at
# once (flock). Needs: apt-get, dpkg, kmod (depmod), busybox-static, cpio, gzip.
# Usage: bash test/vm/prepare.sh [CACHE_DIR]   (default: <repo>/.cache/vm)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cache=${1:-$repo/.cache/vm}
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 600 9

# The kernel Debian 12 nodes run: the version linux-image-amd64 depends on.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | grep -o 'linux-image-6\.1\.0-[0-9]*-amd64' | head -n1 || true)
if [ -z "$pkg" ]; then
  echo "vm-prepare: apt-cache knows no linux-image-amd64; running apt-get update" >&2
  apt-get update -qq
  pkg=$(apt-cache depends linux-image-amd64 | grep -o 'linux-image-6\.1\.0-[0-9]*-amd64' | head -n1)
fi
kver=${pkg#linux-image-}
if [ -f "$cache/kernel.env" ] && grep -qx "KVER=$kver" "$cache/kernel.env" && [ -f "$cache/initrd.gz" ]; then
  exit 0
fi
echo "vm-prepare: preparing kernel $kver in $cache" >&2

rm -rf "$cache/root" "$cache/dl" "$cache/initramfs" "$cache/initrd.gz" "$cache/kernel.env"
mkdir -p "$cache/dl" "$cache/root"
# apt-get download writes into the current directory; _apt cannot always write there.
(cd "$cache/dl" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
deb=$(ls "$cache"/dl/"$pkg"_*.deb)
dpkg -x "$deb" "$cache/root"
rm -rf "$cache/dl"
depmod -b "$cache/root" "$kver"
mods=$cache/root/lib/modules/$kver

# The initramfs: just enough to reach the host's root over virtio-9p.
ir=$cache/initramfs
mkdir -p "$ir/bin" "$ir/lib/modules" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/newroot"
cp /bin/busybox "$ir/bin/busybox"
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p; do
  f=$(modprobe -d "$cache/root" -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1 == "insmod" { print $2 }' | tail -n1)
  [ -n "$f" ] || f=$(find "$mods" -name "$m.ko*" | head -n1)
  [ -n "$f" ] || { echo "vm-prepare: module $m not found" >&2; exit 1; }
  cp "$f" "$ir/lib/modules/$m.ko"
  echo "$m" >>"$ir/lib/modules/order"
done
cat >"$ir/init" <<'EOF'
#!/bin/busybox sh
# PID 1 of the initramfs: load virtio + 9p, mount the host's / and hand over to $VMINIT
# (the kernel passes VMINIT=... from its command line in our environment).
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /lib/modules/order); do
  /bin/busybox insmod /lib/modules/$m.ko || echo "initramfs: insmod $m failed"
done
if ! /bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none hostroot /newroot; then
  echo "initramfs: cannot mount the host root over 9p"; /bin/busybox poweroff -f
fi
/bin/busybox mount --move /proc /newroot/proc
/bin/busybox mount --move /sys /newroot/sys
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot /bin/sh "$VMINIT"
EOF
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1 >"$cache/initrd.gz.tmp")
mv "$cache/initrd.gz.tmp" "$cache/initrd.gz"
rm -rf "$ir"
printf 'KVER=%s\nVMLINUZ=%s\n' "$kver" "$cache/root/boot/vmlinuz-$kver" >"$cache/kernel.env.tmp"
mv "$cache/kernel.env.tmp" "$cache/kernel.env"
echo "vm-prepare: done ($kver)" >&2
