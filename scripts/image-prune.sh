#!/bin/bash
# Turns the root mmdebstrap unpacked (scripts/image.sh) into the image's root: records the
# packages in /var/lib/dpkg/status (what image scanners read to match Debian's security
# advisories), then removes what a container never uses.
# Usage: bash scripts/image-prune.sh ROOT STAGED_DEB PACKAGES_TXT
set -euo pipefail
root=$1 staged=$2 list=$3
[ -d "$root/usr/lib/kube-proxy-ts" ] || { echo "image-prune: $root has no kube-proxy-ts" >&2; exit 1; }

# The dpkg database as dpkg would have written it: one paragraph per package, sorted by
# name. The extract variant ran no dpkg, so it is made from the .debs' control files.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The staged .deb is read outside the root: mmdebstrap empties the root's /tmp, which holds the
# copy when the repository itself lives under /tmp.
for f in "$root"/var/cache/apt/archives/*.deb "$staged"; do
  pkg=$(/usr/bin/dpkg-deb -f "$f" Package)
  /usr/bin/dpkg-deb -f "$f" | awk 'NR == 1 { print; print "Status: install ok installed"; next } { print }' >"$tmp/$pkg"
  echo "$pkg=$(/usr/bin/dpkg-deb -f "$f" Version)" >>"$tmp/list"
done
LC_ALL=C sort "$tmp/list" >"$list"
rm -rf "$root/var/lib/dpkg" "$root/var/lib/apt" "$root/var/cache" "$root/var/log" "$root/etc/apt" "$root/etc/dpkg"
mkdir -p "$root/var/lib/dpkg"
for f in $(LC_ALL=C ls "$tmp" | grep -vx list); do
  cat "$tmp/$f"
  echo
done >"$root/var/lib/dpkg/status"

# The staged .deb and the directories made for it.
rm -f "$root$staged"
if [ -d "$root$(dirname "$staged")" ]; then
  (cd "$root" && rmdir -p --ignore-fail-on-non-empty "$(dirname "${staged#/}")")
fi

# The runtime provides /dev, /etc/hostname, /etc/resolv.conf, /etc/hosts; no fstab in a container.
find "$root/dev" -mindepth 1 -delete
rm -f "$root/etc/fstab" "$root/etc/hostname" "$root/etc/resolv.conf"

# No docs but the copyright files, no man pages, locales, lintian overrides, gdb scripts.
find "$root/usr/share" -mindepth 1 -maxdepth 1 ! -name doc -exec rm -rf {} +
find "$root/usr/share/doc" -type f ! -name copyright -delete
# (Debian links some packages' doc directories to their source's: those links stay.)
find "$root/usr/share/doc" -type l ! -xtype d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
# glibc's iconv modules: Node converts with ICU, never iconv.
rm -rf "$root/usr/lib/x86_64-linux-gnu/gconv"
# The .deb's systemd integration and host configuration: the image has no systemd, and the
# pod takes its flags and ConfigMap. /usr/bin/kube-proxy-ts (the native launcher,
# the entry point) stays.
rm -f "$root/etc/default/kube-proxy-ts"
rm -rf "$root/lib/systemd"
find "$root" -mindepth 1 -type d -empty ! -path "$root/tmp" ! -path "$root/var/lib/dpkg" -delete
mkdir -p "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/etc"
chmod 1777 "$root/tmp"
