#!/bin/bash
# Installs what kube-proxy-ts needs to build, test and run its demo on a fresh Debian 12
# machine, as root. Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

# System packages:
# - libsystemd-dev, g++, make, python3: build the sd-notify addon and our netlink socket
#   addon (native/netlink-socket, C; npm ci runs its node-gyp build); python3 also runs the
#   kernel tests' SCTP client and backend, test/kernel/scenarios/sctp.py;
# - iproute2: test namespaces; nftables, ipset, ipvsadm, conntrack, iptables: independent
#   readers used by the tests only (the daemon never runs them);
# - qemu-system-x86, busybox-static, cpio, kmod: boot Debian's stock kernel for VM tests.
apt_packages=(libsystemd-dev g++ make python3 iproute2 nftables ipset ipvsadm conntrack
  iptables strace qemu-system-x86 busybox-static cpio kmod netcat-openbsd)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node dependencies, including the pinned Node 24 runtime itself. Native addons are built
# against that runtime's headers (see node-headers.sh).
stamp=node_modules/.setup-stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  npm_config_nodedir=$(bash scripts/node-headers.sh)
  export npm_config_nodedir
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi
# What building the .deb/.rpm and booting systemd in the VM need (debhelper, lintian, rpm,
# debootstrap ...), and Node's LICENSE for the packages.
PATH="$PWD/node_modules/.bin:$PATH" bash scripts/package-deps.sh

# Debian's stock kernel and an initramfs for the QEMU tests (test/vm), cached in .cache/vm.
bash test/vm/prepare.sh

# A newer nft than Debian 12's (1.1.3, Debian 13's, with its own glibc), cached in .cache/nft:
# the kernel tests check that our rulesets print and round-trip with both (issue 4,
# test/kernel/nft-binaries.ts).
bash scripts/newer-nft.sh

# Fail here, with a clear message, rather than deep inside a test.
PATH="$PWD/node_modules/.bin:$PATH" node scripts/check-runtime.ts
