#!/usr/bin/env bash
# Downloads Debian 13's CUDA build of LibTorch 2.6, headers and CMake files only (`libtorch-cuda-dev`, contrib,
# about 2.4 MB; its libraries, `libtorch-cuda-2.6`, 480 MB, are not needed), and unpacks it with `dpkg -x` into
# a git-ignored folder: the torch 2.x CUDA compile tier (scripts/torch_cuda_compile_check.sh, CMake option
# ZEROFIT_TORCH_CUDA_COMPILE_CHECK) compiles worker/torch against it. Nothing is installed, and this system's
# apt sources are untouched: apt runs with a configuration of its own (sources list, package lists, cache) in
# $OUT/apt/.
#   scripts/fetch_torch_cuda_headers.sh [--out DIR]     prints the include root (DIR/root/usr/include)
# Idempotent: when DIR/root holds the pinned versions (DIR/root/.zerofit-packages), it does nothing and needs
# no network. When the archive cannot be reached, or no longer has the pinned version, it fails loudly.
#
# Why a pin: the check is then the same on every machine and every day. Debian drops superseded versions
# from the archive's pool (a trixie point release, a binNMU): the download then fails and names the version
# the archive has now; update PACKAGES below to it.
# Header-only packages: the headers that worker/torch includes from this LibTorch reach no third-party
# header beyond libc, the C++ library and the CUDA toolkit (torch_cuda_compile_check.sh checks that no
# header of Debian 12's LibTorch 1.13 in /usr/include slips in), so `libtorch-cuda-dev` is the only package;
# its Depends (libtorch-cuda-2.6, python3-dev, libprotobuf-dev) are for linking and Python bindings.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=third_party/torch-cuda-headers
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "fetch_torch_cuda_headers: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# package=version, as `apt-get download` takes them.
PACKAGES=(libtorch-cuda-dev=2.6.0+dfsg-7+b1)
MIRROR=${ZEROFIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-trixie-automatic.gpg

ROOT=$OUT/root
STAMP=$ROOT/.zerofit-packages
want=$(printf '%s\n' "${PACKAGES[@]}")
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  echo "$ROOT/usr/include"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "fetch_torch_cuda_headers: '$tool' not found (Debian's apt)" >&2; exit 1; }
done
[[ -r "$KEYRING" ]] || {
  echo "fetch_torch_cuda_headers: $KEYRING missing: install debian-archive-keyring (Debian 12's has trixie's key)" >&2
  exit 1
}

# A private apt: its own sources (trixie's contrib alone: 54 kB of package lists instead of main's 9.7 MB; add
# main here if a header-only package from it is ever needed), lists, cache and an empty dpkg status, so that
# neither this system's sources nor its installed packages take part.
APT=$(realpath -m "$OUT/apt")  # apt reads relative Dir:: paths against /etc/apt
mkdir -p "$APT/sources.list.d" "$APT/preferences.d" "$APT/lists/partial" "$APT/cache/archives/partial" "$OUT/debs"
cat >"$APT/sources.list.d/trixie.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: trixie
Components: contrib
Architectures: amd64
Signed-By: $KEYRING
EOF
: >"$APT/status"
: >"$APT/sources.list"
: >"$APT/preferences"
apt_opts=(
  -o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=$APT/sources.list.d"
  -o "Dir::Etc::Preferences=$APT/preferences" -o "Dir::Etc::PreferencesParts=$APT/preferences.d"
  -o "Dir::State::Lists=$APT/lists" -o "Dir::State::status=$APT/status" -o "Dir::Cache=$APT/cache"
  -o "APT::Architecture=amd64" -o "APT::Architectures=amd64"
  # The files are written by this user (root in CI) into a folder apt's sandbox user may not reach.
  -o "APT::Sandbox::User=$(id -un)"
  -o "Acquire::Retries=3" -o "Debug::NoLocking=1"
)
echo "fetch_torch_cuda_headers: apt-get update (Debian 13 trixie from $MIRROR, private lists in $APT)" >&2
if ! apt-get "${apt_opts[@]}" -q update >"$APT/update.log" 2>&1 || grep -q '^\(W\|E\): ' "$APT/update.log"; then
  cat "$APT/update.log" >&2
  echo "fetch_torch_cuda_headers: FAILED: could not read Debian 13's package lists from $MIRROR" >&2
  exit 1
fi
for spec in "${PACKAGES[@]}"; do
  name=${spec%%=*}
  have=$(apt-cache "${apt_opts[@]}" policy "$name" | awk '/Candidate:/ {print $2}')
  if [[ "$have" != "${spec#*=}" ]]; then
    echo "fetch_torch_cuda_headers: FAILED: the archive has $name ${have:-(none)}, pinned is ${spec#*=}:" \
      "update PACKAGES in $0" >&2
    exit 1
  fi
done
rm -f "$OUT"/debs/*.deb
(cd "$OUT/debs" && apt-get "${apt_opts[@]}" -q download "${PACKAGES[@]}" >&2)

# Unpack into a fresh folder, then move it in place: an interrupted run never leaves a stamp on a partial tree.
rm -rf "$ROOT.new"
mkdir -p "$ROOT.new"
for deb in "$OUT"/debs/*.deb; do
  dpkg-deb -x "$deb" "$ROOT.new"
done
[[ -f "$ROOT.new/usr/include/torch/csrc/api/include/torch/version.h" ]] || {
  echo "fetch_torch_cuda_headers: FAILED: no torch/version.h in the unpacked packages" >&2
  exit 1
}
printf '%s\n' "$want" >"$ROOT.new/.zerofit-packages"
rm -rf "$ROOT"
mv "$ROOT.new" "$ROOT"
echo "fetch_torch_cuda_headers: unpacked ${PACKAGES[*]} ($(du -sh "$ROOT" | cut -f1)) into $ROOT" >&2
echo "$ROOT/usr/include"
