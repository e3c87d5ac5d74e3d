#!/bin/bash
# Installs what kube-proxy-ts needs on a fresh Debian 12 machine, as root. Idempotent: a
# second run installs nothing new.
#   bash scripts/setup.sh          what the daemon and `npm run demo` need, nothing more
#   bash scripts/setup.sh --test   that, plus the test lab `npm test` needs: the independent
#                                  readers, QEMU with Debian's kernel, the packaging tools, a
#                                  newer nft, and the npm devDependencies (ava, eslint, tsc...)
# Needs npm on PATH (Node.js 20 or later with its own npm: it only installs the lockfile's
# pinned Node 24 runtime). Not Debian 12's npm package: its node-gyp links native addons against
# Debian's Node 18 library (libnode108), and such an addon crashes the pinned Node 24.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
test_lab=false
case "${1:-}" in
  --test) test_lab=true ;;
  '') ;;
  *) echo "usage: bash scripts/setup.sh [--test]" >&2; exit 2 ;;
esac

# System packages for the daemon and the demo:
# - libsystemd-dev, g++, make, python3: build the sd-notify addon and our netlink socket
#   addon (native/netlink-socket, C; npm ci runs its node-gyp build);
# - iproute2, procps (sysctl), nftables: the demo's namespace "cluster" and the ruleset it
#   prints (the daemon itself never runs them).
apt_packages=(libsystemd-dev g++ make python3 iproute2 procps nftables)
# The test lab: independent readers used by the tests only (nftables above, ipset, ipvsadm,
# conntrack, iptables, strace, nfacct), python3 also runs the kernel tests' SCTP client and backend
# (test/kernel/scenarios/sctp.py); qemu-system-x86, busybox-static, cpio, kmod boot Debian's
# stock kernel for the VM tests.
if $test_lab; then
  apt_packages+=(ipset ipvsadm conntrack iptables strace qemu-system-x86 busybox-static cpio kmod netcat-openbsd nfacct)
fi
npm_bin=$(command -v npm || true)
if [ -z "$npm_bin" ]; then
  echo "setup: npm is missing: install Node.js 20 or later with its own npm first" >&2
  exit 1
fi
if [[ $(readlink -f "$npm_bin") == /usr/share/nodejs/* ]]; then
  echo "setup: $npm_bin is Debian 12's npm package, whose addons crash Node 24: install Node.js 20 or later with its own npm first" >&2
  exit 1
fi

# Node dependencies, including the pinned Node 24 runtime itself. Native addons are built
# against that runtime's headers (see node-headers.sh). Without --test, only the production
# closure (what the daemon and the demo import); the stamp records which was installed.
want=$($test_lab && echo all || echo production)
stamp=node_modules/.setup-stamp
have=$(cat "$stamp" 2>/dev/null || true)
# An empty stamp is an earlier setup.sh's, which always installed everything.
[ -f "$stamp" ] && [ -z "$have" ] && have=all
npm_needed=false
# Also when our addons' sources changed since (npm ci builds them).
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ] || { [ "$want" = all ] && [ "$have" != all ]; } ||
  [ -n "$(find native -newer "$stamp" -type f -not -path '*/build/*' -print -quit 2>/dev/null)" ]; then
  npm_needed=true
fi
# The headers come from the npm registry: fetched while apt works.
headers=$(mktemp)
trap 'rm -f "$headers"' EXIT
headers_pid=
if $npm_needed; then
  bash scripts/node-headers.sh >"$headers" &
  headers_pid=$!
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if $npm_needed; then
  wait "$headers_pid" || { echo "setup: scripts/node-headers.sh failed" >&2; exit 1; }
  npm_config_nodedir=$(cat "$headers")
  export npm_config_nodedir
  omit=()
  [ "$want" = production ] && omit=(--omit=dev)
  npm ci --no-audit --no-fund --loglevel=error "${omit[@]}"
  echo "$want" >"$stamp"
fi

if $test_lab; then
  # What building the .deb/.rpm and booting systemd in the VM need (debhelper, lintian, rpm,
  # debootstrap ...), and Node's LICENSE for the packages.
  PATH="$PWD/node_modules/.bin:$PATH" bash scripts/package-deps.sh

  # Debian's stock kernel and an initramfs for the QEMU tests (test/vm), cached in .cache/vm.
  bash test/vm/prepare.sh

  # A newer nft than Debian 12's (1.1.3, Debian 13's, with its own glibc), cached in .cache/nft:
  # the kernel tests check that our rulesets print and round-trip with both
  # (test/kernel/nft-binaries.ts).
  bash scripts/newer-nft.sh
fi

# Fail here, with a clear message, rather than deep inside a test.
PATH="$PWD/node_modules/.bin:$PATH" node scripts/check-runtime.ts
