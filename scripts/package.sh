#!/bin/bash
# Builds the .deb and the .rpm of kube-proxy-ts into out/packages/ (`npm run package`).
#
# Both are built from a copy of the source tree under out/build/ (so dpkg-buildpackage's
# debian/ scratch files and its ../*.deb never land in the repository); the production
# node_modules, with the Node 24 runtime and the built addons, come from the repository's
# installed node_modules (scripts/setup.sh). The two builds run in parallel.
# Needs: scripts/package-deps.sh (debhelper, dpkg-dev, rpm); prints the package sizes.
# Usage: bash scripts/package.sh [--if-stale] [OUT_DIR]   (default <repo>/out/packages)
#   --if-stale: do nothing when both packages exist and are newer than every input (what
#               the tests use, so one run builds once). Concurrent runs wait on a lock.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if_stale=false
if [ "${1:-}" = "--if-stale" ]; then if_stale=true; shift; fi
out=${1:-$repo/out/packages}
mkdir -p "$repo/out"
exec 8>"$repo/out/.package.lock"
flock -w 1200 8
build=$repo/out/build
node=$repo/node_modules/node/bin/node
for tool in /usr/bin/dpkg-buildpackage /usr/bin/dh /usr/bin/rpmbuild; do
  [ -x "$tool" ] || { echo "package: $tool is missing: run scripts/package-deps.sh" >&2; exit 1; }
done
[ -x "$node" ] || { echo "package: $node is missing: run scripts/setup.sh" >&2; exit 1; }
version=$("$node" -p "require('$repo/package.json').version")

if $if_stale; then
  deb=$(ls "$out"/kube-proxy-ts_"$version"_*.deb 2>/dev/null | head -n1 || true)
  rpm=$(ls "$out"/kube-proxy-ts-"$version"-*.rpm 2>/dev/null | head -n1 || true)
  if [ -n "$deb" ] && [ -n "$rpm" ]; then
    oldest=$deb; [ "$rpm" -ot "$deb" ] && oldest=$rpm
    newer=$(cd "$repo" && find bin src native/netlink-socket/src native/netlink-socket/binding.gyp native/launcher debian systemd packaging scripts \
      docs README.md BENCHMARKS.md package.json package-lock.json \
      node_modules/.package-lock.json -newer "$oldest" -print -quit 2>/dev/null || true)
    if [ -z "$newer" ]; then
      echo "package: up to date: $deb $rpm"
      exit 0
    fi
    echo "package: rebuilding ($newer is newer than $oldest)"
  fi
fi

started=$(date +%s)
rm -rf "$build"
src=$build/src/kube-proxy-ts-$version
mkdir -p "$src" "$build/rpm" "$out"
# What the packages are made from (never node_modules, caches or earlier outputs).
(cd "$repo" && cp -a --parents bin src native/launcher debian systemd packaging scripts docs README.md BENCHMARKS.md \
  package.json package-lock.json "$src/")
# debian/rules' clean target must not see stale staging from a copied tree.
rm -rf "$src/debian/kube-proxy-ts" "$src/debian/.debhelper" "$src/debian/files"

deb_log=$build/deb.log rpm_log=$build/rpm.log
(
  cd "$src"
  KPTS_MODULES_ROOT=$repo /usr/bin/dpkg-buildpackage -us -uc -b >"$deb_log" 2>&1
) &
deb_pid=$!
(
  /usr/bin/rpmbuild -bb "$src/packaging/kube-proxy-ts.spec" \
    --define "_topdir $build/rpm" --define "_sourcedir $src" --define "kpts_modules_root $repo" \
    >"$rpm_log" 2>&1
) &
rpm_pid=$!
status=0
wait $deb_pid || { echo "package: dpkg-buildpackage failed; the end of $deb_log:" >&2; tail -n 40 "$deb_log" >&2; status=1; }
wait $rpm_pid || { echo "package: rpmbuild failed; the end of $rpm_log:" >&2; tail -n 40 "$rpm_log" >&2; status=1; }
[ $status -eq 0 ] || exit $status

rm -f "$out"/kube-proxy-ts_*.deb "$out"/kube-proxy-ts-*.rpm
mv "$build"/src/kube-proxy-ts_"$version"_*.deb "$out/"
mv "$build"/rpm/RPMS/*/kube-proxy-ts-"$version"-*.rpm "$out/"
echo "package: built in $(( $(date +%s) - started )) s into $out:"
for f in "$out"/kube-proxy-ts_*.deb "$out"/kube-proxy-ts-*.rpm; do
  installed=""
  case $f in
    *.deb) installed=$(/usr/bin/dpkg-deb -f "$f" Installed-Size) && installed="$(( installed / 1024 )) MiB installed" ;;
    *.rpm) installed=$(/usr/bin/rpm -qp --qf '%{SIZE}' "$f" 2>/dev/null) && installed="$(( installed / 1048576 )) MiB installed" ;;
  esac
  printf '  %-48s %4d MiB  (%s)\n' "$(basename "$f")" "$(( $(stat -c %s "$f") / 1048576 ))" "$installed"
done
