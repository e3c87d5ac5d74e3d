#!/bin/bash
# Builds /usr/bin/kube-proxy-ts for the packages: native/launcher/kube-proxy-ts.c with the
# argument list scripts/launcher-args.ts prints. Compiler and flags come from the
# environment (CC, CPPFLAGS, CFLAGS, LDFLAGS): dpkg-buildflags' under debhelper, %optflags
# under rpmbuild. NODE: a Node 24 to run launcher-args.ts (default: the repository's).
# Usage: bash scripts/build-launcher.sh OUT
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: build-launcher.sh OUT}
node=${NODE:-$src/node_modules/node/bin/node}
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$node" "$src/scripts/launcher-args.ts" >"$gen/launcher-args.h"
mkdir -p "$(dirname "$out")"
# shellcheck disable=SC2086 # the flags are word lists
${CC:-cc} ${CPPFLAGS:-} ${CFLAGS:--O2} -std=c11 -Wall -Wextra -Werror -I"$gen" \
  -o "$out" "$src/native/launcher/kube-proxy-ts.c" ${LDFLAGS:-}
