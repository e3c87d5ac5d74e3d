#!/bin/bash
# Installs a newer nft than Debian 12's 1.0.6, privately, for the kernel tests' interop checks
# (test/kernel/nft-binaries.ts): the rulesets our daemon writes must print cleanly and
# round-trip with it too. It is nft 1.1.3 with libnftnl 1.2.9, Debian 13 (trixie)'s.
#
# Why Debian 13's binary packages, run by Debian 13's own glibc: this machine reaches Debian's
# binary packages but not its source packages (pool/.../*.orig.tar.xz answer 404), and
# trixie's nft needs glibc >= 2.38 where Debian 12 has 2.36. So the packages (nft, its
# libraries and trixie's libc6) are unpacked under PREFIX/root and PREFIX/sbin/nft is a
# wrapper that runs the binary through trixie's dynamic loader with PREFIX/root's libraries
# first; nothing is installed into the system, and the system's /usr/sbin/nft is untouched.
#
#   PREFIX = <repo>/.cache/nft/1.1.3     PREFIX/sbin/nft   the newer nft
#
# Idempotent: does nothing when PREFIX/sbin/nft exists and reports 1.1.3. Uses only apt-get
# (with private sources, lists and state under .cache/nft/apt: the machine's own are neither
# read nor changed; its apt.conf.d is read, for how to reach the mirror), dpkg-deb, sha256sum.
# Takes about 5 s (a 10 MB index and 5 MB of packages; nothing is compiled).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=1.1.3
cache=$repo/.cache/nft
prefix=$cache/$version
nft=$prefix/sbin/nft
mirror=${NEWER_NFT_MIRROR:-http://deb.debian.org/debian}
suite=trixie

reports_version() { [ -x "$nft" ] && "$nft" --version 2>/dev/null | grep -q "^nftables v$version "; }
if reports_version; then exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock -w 600 9
if reports_version; then exit 0; fi # another run finished while we waited
echo "newer-nft: installing nft $version (Debian $suite's) into $prefix" >&2
start=$(date +%s)

# What is under test, pinned: package=version and the .deb's sha256. apt-get checks every
# download against the signed index anyway; these pins make sure it is this exact build.
pinned=(
  "nftables=1.1.3-1 2ddfa61baaf3a76e2c499db9e521ba6affb226f85af0b6fef739f346ac5f0c39"
  "libnftables1=1.1.3-1 c7cbee3dce8452ae5c3c4269f6f52e96b896d36a46ea3c490e0e11e8ff359896"
  "libnftnl11=1.2.9-1 1b3eae46bfb9c6ab44e404797fb45278045f926d73974a84097ad47a3e27d983"
)
# What they need to run (see the check at the end): trixie's current versions, whatever the
# point release, checked by apt against the signed index. libc6 brings the dynamic loader.
runtime=(libc6 libgcc-s1 libmnl0 libjansson4 libgmp10 libxtables12 libedit2 libbsd0 libmd0 libtinfo6)

apt_dir=$cache/apt
rm -rf "$apt_dir" "$prefix"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/preferences.d" "$apt_dir/debs"
: >"$apt_dir/status"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$apt_dir/sources.list"
# Read after the machine's own configuration (so its settings for reaching the mirror hold),
# it points apt at the private files and clears the hooks that refresh the machine's caches
# after an update.
cat >"$apt_dir/apt.conf" <<EOF
Dir::Etc::SourceList "$apt_dir/sources.list";
Dir::Etc::SourceParts "/dev/null";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$apt_dir/preferences.d";
Dir::State::Lists "$apt_dir/lists";
Dir::State::status "$apt_dir/status";
Dir::Cache "$apt_dir";
Dir::Cache::Archives "$apt_dir/archives";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
Acquire::http::Timeout "60";
Acquire::Retries "2";
APT::Sandbox::User "root";
#clear APT::Update::Post-Invoke-Success;
#clear APT::Update::Post-Invoke;
EOF
apt_opts=(-c "$apt_dir/apt.conf")
fail() { echo "newer-nft: $*" >&2; exit 1; }

# Only the trixie main index for amd64 (about 10 MB), bounded in time.
timeout 300 apt-get "${apt_opts[@]}" update -qq ||
  fail "could not fetch Debian $suite's package index from $mirror (network, or the mirror is down)"

specs=()
for p in "${pinned[@]}"; do specs+=("${p%% *}"); done
(cd "$apt_dir/debs" && timeout 300 apt-get "${apt_opts[@]}" download -qq "${specs[@]}" "${runtime[@]}") ||
  fail "could not download ${specs[*]} ${runtime[*]} from Debian $suite at $mirror. If apt says a
  pinned version is not found, Debian replaced it in a point release: update the pins in $0
  (apt-cache -c $apt_dir/apt.conf show nftables libnftables1 libnftnl11 gives the new
  versions and SHA256 sums)"

for p in "${pinned[@]}"; do
  spec=${p%% *} sum=${p##* }
  name=${spec%%=*} ver=${spec#*=}
  deb=$(ls "$apt_dir/debs/${name}_${ver//:/%3a}_amd64.deb")
  echo "$sum  $deb" | sha256sum -c --quiet - || fail "$deb: sha256 is not the pinned $sum"
done

mkdir -p "$prefix/root" "$prefix/sbin"
for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix/root"; done
root=$prefix/root
loader=
for l in "$root"/usr/lib64/ld-linux-x86-64.so.2 "$root"/lib64/ld-linux-x86-64.so.2; do
  if [ -x "$l" ]; then loader=$l; break; fi
done
[ -n "$loader" ] || fail "no ld-linux-x86-64.so.2 in the unpacked libc6"
libdir=$root/usr/lib/x86_64-linux-gnu
if [ -d "$root/lib/x86_64-linux-gnu" ]; then libdir=$libdir:$root/lib/x86_64-linux-gnu; fi

# The wrapper: trixie's loader, trixie's libraries first, then the binary. Paths are taken
# relative to the wrapper, so a moved checkout keeps working.
rel_loader=${loader/"$root"/'$p/root'} rel_libdir=${libdir//"$root"/'$p/root'}
cat >"$nft" <<EOF
#!/bin/sh
# nft $version from Debian $suite, run by its own glibc (written by scripts/newer-nft.sh).
p=\$(dirname "\$(readlink -f "\$0")")/..
exec "$rel_loader" --argv0 nft --library-path "$rel_libdir" "\$p/root/usr/sbin/nft" "\$@"
EOF
chmod +x "$nft"

# Every library nft loads must come from the private root, with libnftables and libnftnl the
# pinned ones (the loader's --list is ldd for a binary run this way).
listing=$("$loader" --library-path "$libdir" --list "$root/usr/sbin/nft")
echo "$listing" | grep -Eq "libnftables\.so\.1 => $root/" || fail "nft does not load the private libnftables: $listing"
echo "$listing" | grep -Eq "libnftnl\.so\.11 => $root/" || fail "nft does not load the private libnftnl: $listing"
if echo "$listing" | grep '=>' | grep -v "=> $root/" | grep -q .; then
  fail "nft loads libraries from outside $root (add their packages to runtime=): $listing"
fi
reports_version || fail "$nft does not report nftables v$version: $("$nft" --version 2>&1 || true)"
rm -rf "$apt_dir"
echo "newer-nft: $("$nft" --version) ready in $(($(date +%s) - start)) s" >&2
