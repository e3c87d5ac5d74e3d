#!/bin/bash
# Builds the OCI image of kube-proxy-ts (`npm run image`) from Debian packages only: a
# Debian 12 root made by mmdebstrap from Debian's archive (the machine's own apt sources),
# holding our .deb (scripts/package.sh) and the libraries it depends on, nothing else, and
# turned into an OCI image layout and a tarball of it by Debian's umoci. No registry pull.
#
# Outputs, in OUT_DIR (default <repo>/out/image):
#   kube-proxy-ts_<version>_amd64.oci.tar   the layout as one tar (podman load, skopeo copy
#                                           oci-archive:, ctr import), tag <version>
#   oci/                                    the same layout, unpacked
#   packages.txt                            the Debian packages inside, name=version
#
# Reproducible: the same .deb and the same Debian package versions give the same bytes. All
# times are SOURCE_DATE_EPOCH (default: debian/changelog's date, as the .deb's files), umoci
# writes its layer in path order, and the tarball is made with sorted names and numeric
# root ownership. Small: the bundled Node runtime is most of it; no shell, no coreutils, no
# dpkg or apt (nor their lists), no docs beyond copyright files, no man pages, no locales.
#
# The result is cached in .cache/image/, keyed by everything it is made from (the .deb's
# checksum, this script and image-prune.sh, the epoch, the apt sources, the entry point); --if-stale reuses
# OUT_DIR when its key matches (what the tests use). Concurrent runs wait on a lock.
# Needs: mmdebstrap, umoci (scripts/package-deps.sh), and what scripts/package.sh needs.
# Usage: bash scripts/image.sh [--if-stale] [OUT_DIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if_stale=false
if [ "${1:-}" = "--if-stale" ]; then if_stale=true; shift; fi
out=${1:-$repo/out/image}
mkdir -p "$repo/out"
exec 9>"$repo/out/.image.lock"
flock -w 1200 9
for tool in /usr/bin/mmdebstrap /usr/bin/umoci /usr/bin/dpkg-parsechangelog; do
  [ -x "$tool" ] || { echo "image: $tool is missing: run scripts/package-deps.sh" >&2; exit 1; }
done
node=$repo/node_modules/node/bin/node
[ -x "$node" ] || { echo "image: $node is missing: run scripts/setup.sh" >&2; exit 1; }
version=$("$node" -p "require('$repo/package.json').version")
# The machine's own Debian sources (deb822 as Debian 12 installs them, or the one-line file).
sources=${KPTS_IMAGE_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
[ -r "$sources" ] || [ -n "${KPTS_IMAGE_APT_SOURCES:-}" ] || sources=/etc/apt/sources.list
[ -r "$sources" ] || { echo "image: no apt sources at $sources (set KPTS_IMAGE_APT_SOURCES)" >&2; exit 1; }

# 1. The .deb (rebuilt only when its inputs changed).
bash "$repo/scripts/package.sh" --if-stale >&2
deb=$repo/out/packages/kube-proxy-ts_${version}_amd64.deb
[ -f "$deb" ] || { echo "image: $deb is missing after scripts/package.sh" >&2; exit 1; }

# 2. What the image is made from, and its cache key.
epoch=${SOURCE_DATE_EPOCH:-$(/usr/bin/dpkg-parsechangelog -l "$repo/debian/changelog" -S Timestamp)}
lib=/usr/lib/kube-proxy-ts
# The entry point is the .deb's /usr/bin/kube-proxy-ts, the native launcher (no shell needed):
# it execs the bundled Node with the daemon's V8 flags, so `kubectl exec ... -- kube-proxy-ts
# explain` runs the same command in the pod.
entrypoint='["/usr/bin/kube-proxy-ts"]'
key=$( { sha256sum <"$deb"; cat "$repo/scripts/image.sh" "$repo/scripts/image-prune.sh" | sha256sum; echo "$epoch $entrypoint"; cat "$sources"; } | sha256sum | cut -c1-32)
name=kube-proxy-ts_${version}_amd64.oci.tar
cached=$repo/.cache/image/$key.tar

if $if_stale && [ -f "$out/$name" ] && [ "$(cat "$out/key" 2>/dev/null)" = "$key" ]; then
  echo "image: up to date: $out/$name"
  exit 0
fi

started=$(date +%s)
rm -rf "${out:?}/oci" "$out/$name" "$out/packages.txt" "$out/key"
mkdir -p "$out"
if [ -f "$cached" ] && [ -f "$cached.packages" ]; then
  cp "$cached" "$out/$name"
  cp "$cached.packages" "$out/packages.txt"
  echo "image: reused $cached"
else
  build=$repo/out/image-build
  rm -rf "$build"
  mkdir -p "$build"
  root=$build/root
  # 3. The root: our .deb and its dependencies' closure from Debian, unpacked (the extract
  # variant: no Essential set, no maintainer scripts, nothing run in the root). apt runs dpkg
  # on paths as given, so the .deb is copied to the same path inside, and removed below.
  staged=$build/deb/kube-proxy-ts.deb
  mkdir -p "$(dirname "$staged")"
  cp "$deb" "$staged"
  SOURCE_DATE_EPOCH=$epoch /usr/bin/mmdebstrap --mode=root --variant=extract --format=directory \
    --aptopt='Acquire::Check-Valid-Until "false"' --skip=cleanup/apt/cache \
    --include="$staged" \
    --setup-hook="mkdir -p \"\$1$(dirname "$staged")\" && cp '$staged' \"\$1$staged\"" \
    bookworm "$root" "$sources" >"$build/mmdebstrap.log" 2>&1 ||
    { echo "image: mmdebstrap failed; the end of $build/mmdebstrap.log:" >&2; tail -n 30 "$build/mmdebstrap.log" >&2; exit 1; }
  bash "$repo/scripts/image-prune.sh" "$root" "$staged" "$out/packages.txt"

  # 4. The OCI layout: one layer holding the root, the config, a tag. Every time is the epoch.
  created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
  layout=$build/oci
  # The layer is made by GNU tar (umoci 0.4.7's `insert` writes a truncated tar for a tree this
  # size; `raw add-layer` stores a given tar as it is): names sorted, only mtimes, root-owned.
  find "$root" -exec touch -h -d "@$epoch" {} +
  # shellcheck disable=SC2046 # the top-level names, sorted, none with spaces
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$root" -cf "$build/layer.tar" $(cd "$root" && LC_ALL=C ls -A)
  /usr/bin/umoci init --layout "$layout"
  /usr/bin/umoci new --image "$layout:$version"
  /usr/bin/umoci raw add-layer --image "$layout:$version" --history.created "$created" \
    --history.created_by "scripts/image.sh: mmdebstrap bookworm + kube-proxy-ts_${version}_amd64.deb" "$build/layer.tar"
  umoci_config=(--image "$layout:$version" --created "$created" --author "kube-proxy-ts" --no-history
    --os linux --architecture amd64 --config.workingdir / --clear=config.cmd
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    --config.exposedports 10249/tcp --config.exposedports 10256/tcp
    --config.label "org.opencontainers.image.title=kube-proxy-ts"
    --config.label "org.opencontainers.image.version=$version"
    --config.label "org.opencontainers.image.licenses=Apache-2.0")
  for arg in $(echo "$entrypoint" | "$node" -p "JSON.parse(require('fs').readFileSync(0, 'utf8')).join('\n')"); do
    umoci_config+=(--config.entrypoint "$arg")
  done
  /usr/bin/umoci config "${umoci_config[@]}"
  /usr/bin/umoci gc --layout "$layout"
  # The tarball: sorted, numeric root ownership, the epoch as every time, no extra headers;
  # readable by all (umoci writes blobs 0600).
  chmod -R a+rX "$layout"
  find "$layout" -exec touch -h -d "@$epoch" {} +
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    -C "$layout" -cf "$out/$name" .
  mkdir -p "$repo/.cache/image"
  rm -f "$repo"/.cache/image/*.tar "$repo"/.cache/image/*.tar.packages
  cp "$out/$name" "$cached.tmp" && mv "$cached.tmp" "$cached"
  cp "$out/packages.txt" "$cached.packages"
  rm -rf "$build"
fi
mkdir -p "$out/oci"
tar -C "$out/oci" -xf "$out/$name"
echo "$key" >"$out/key"

# Sizes: the tarball, the compressed layer(s) a node pulls, the unpacked root.
manifest=$("$node" -p "JSON.parse(require('fs').readFileSync('$out/oci/index.json','utf8')).manifests[0].digest.split(':')[1]")
layers=$("$node" -p "JSON.parse(require('fs').readFileSync('$out/oci/blobs/sha256/$manifest', 'utf8'))
  .layers.reduce((s, l) => s + l.size, 0)")
echo "image: built in $(( $(date +%s) - started )) s into $out:"
printf '  %-44s %4d MiB  (layers %d MiB compressed; manifest sha256:%s)\n' "$name" \
  "$(( $(stat -c %s "$out/$name") / 1048576 ))" "$(( layers / 1048576 ))" "$manifest"
