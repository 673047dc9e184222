#!/usr/bin/env bash
# Downloads (never installs) the Debian 12 packages a GPU machine lacks to build zerofit's C++: gRPC++,
# protobuf + protoc + the gRPC plugin, absl, Open MPI, SQLite, yaml-cpp, nlohmann-json, CLI11, spdlog,
# GoogleTest/gmock, Google Benchmark, SentencePiece, PCRE2, ICU, RE2, pkg-config, and the closure of their
# dependencies minus what every Debian/Ubuntu with a compiler already has (libc, the GCC runtime and
# toolchain, dpkg, perl, ...).
# Run it HERE (a Debian 12 machine where apt works); copy the repository, third_party/gpu-debs/ included,
# to the GPU machine (no package registry there) and run scripts/gpu_check.sh. See docs/gpu.md.
#   scripts/fetch_gpu_debs.sh [--out DIR] [--list] [--roots "PKG ..."]
#     --list   print the package list and stop
#     --roots  other root packages instead of zerofit's (same exclusions; scripts/gpu_clean_root_build.sh
#              fetches Debian's libtorch-dev this way as the stand-in for pip's torch)
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=third_party/gpu-debs
LIST_ONLY=0
ROOTS_ARG=()
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --list) LIST_ONLY=1; shift ;;
    --roots) read -ra ROOTS_ARG <<<"$2"; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fetch_gpu_debs: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

for tool in apt-get apt-cache dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "fetch_gpu_debs: '$tool' not found: run this on Debian 12" >&2; exit 1; }
done
if [[ -r /etc/os-release ]] && ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release; then
  echo "fetch_gpu_debs: warning: this is not Debian 12 (bookworm); the packages will be this system's" >&2
fi

# What zerofit's CMake finds: every find_package / find_library / pkg_check_modules of the CMake files and
# the packages gRPC's CMake config looks up in turn (scripts/setup.sh lists the same -dev packages; LibTorch,
# CUDA and NCCL come from pip on the GPU machine). The closure brings most of them anyway; naming them keeps
# them if a dependency changes: libre2-dev and libc-ares-dev (gRPCConfig.cmake's find_package(re2/c-ares),
# through pkg-config), zlib1g-dev and libssl-dev (its ZLIB/OpenSSL), libicu-dev (text/: ICU uc), pkgconf
# (text/'s PCRE2 and gRPC's re2 are found with pkg-config; gpu_check.sh wraps this one so that only the
# prefix's .pc files are read).
ROOTS=(
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libabsl-dev
  libre2-dev libc-ares-dev zlib1g-dev libssl-dev
  libopenmpi-dev openmpi-bin
  libsqlite3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsentencepiece-dev libpcre2-dev libicu-dev pkgconf
)
if ((${#ROOTS_ARG[@]})); then ROOTS=("${ROOTS_ARG[@]}"); fi
# Never shipped: the C library, the GCC runtime and toolchain (the GPU machine builds with its own), the
# package manager and perl, Fortran/LLVM compilers that Open MPI's -dev package lists as alternatives, and
# autotools. Everything else in the closure is downloaded, so the prefix is self-consistent.
EXCLUDE='^(libc6|libc6-dev|libc-dev-bin|linux-libc-dev|libcrypt-dev|libnsl-dev|rpcsvc-proto|libgcc-s1|libstdc\+\+6'
EXCLUDE+='|libstdc\+\+-[0-9]+-dev|libgcc-[0-9]+-dev|gcc|g\+\+|cpp|gcc-[0-9]+(-base)?|g\+\+-[0-9]+|cpp-[0-9]+'
EXCLUDE+='|gfortran(-[0-9]+)?|libgfortran-[0-9]+-dev|flang-[0-9]+|libflang-[0-9]+-dev|libllvm[0-9]+'
EXCLUDE+='|libclang-cpp[0-9]+|libmlir-[0-9]+|libz3-4|binutils.*|libbinutils|libctf0|libctf-nobfd0|libgprofng0'
EXCLUDE+='|libasan[0-9]+|libtsan[0-9]+|liblsan0|libubsan1|libitm1|libatomic1|libquadmath0|libgomp1|libcc1-0'
EXCLUDE+='|libisl[0-9]+|libmpc3|libmpfr6|libgmp10|debconf|cdebconf|dpkg|perl|perl-base|perl-modules-.*'
EXCLUDE+='|libperl.*|tar|adduser|passwd|debianutils|install-info|autoconf|automake|autotools-dev|m4|libpam.*'
EXCLUDE+='|libselinux1|libsemanage.*|libsepol2|libaudit.*|libacl1|libcap-ng0|libcrypt1|libdb5\.3|libgdbm.*'
EXCLUDE+='|libdebian-installer4|libnewt0\.52|libslang2|libtextwrap1|libtinfo6|readline-common|libreadline8'
EXCLUDE+='|catch2|openssh-client|libedit2|libfido2-1|libcbor0\.8)$'

# The closure is what apt itself would install on a system with nothing installed (a simulated install
# against an empty package status): one package for each alternative (`a | b`, virtual packages), so no two
# packages unpack different copies of one file over each other. (`apt-cache depends --recurse` lists every
# alternative: Debian's libtorch-dev then brought both libqt5gui5 and libqt5gui5-gles, whose libQt5Gui.so.5
# differ, and linking LibTorch failed; here it only added libffi8.)
closure=$(apt-get -s -q -o Dir::State::status=/dev/null install --no-install-recommends "${ROOTS[@]}" |
  awk '/^Inst / {print $2}' | sort -u)
mapfile -t packages < <(grep -Ev "$EXCLUDE" <<<"$closure")
for root in "${ROOTS[@]}"; do
  grep -qx "$root" <<<"$(printf '%s\n' "${packages[@]}")" || { echo "fetch_gpu_debs: '$root' missing" >&2; exit 1; }
done
echo "fetch_gpu_debs: ${#packages[@]} packages (closure of ${#ROOTS[@]} roots, $(wc -l <<<"$closure") before exclusions)"
if ((LIST_ONLY)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

mkdir -p "$OUT"
# apt-get download writes into the current directory and skips nothing: fetch only what is not there yet.
# One apt-cache call for every candidate version (one call per package took minutes).
declare -A candidate
while read -r p ver; do candidate[$p]=$ver; done < <(apt-cache policy "${packages[@]}" |
  awk '/^[^ ].*:$/ {name = substr($0, 1, length($0) - 1)} /^  Candidate:/ {print name, $2}')
todo=()
for p in "${packages[@]}"; do
  ver=${candidate[$p]:-}
  [[ -n "$ver" && "$ver" != "(none)" ]] || { echo "fetch_gpu_debs: no candidate for $p" >&2; exit 1; }
  ver=${ver//:/%3a}  # apt-get download escapes the epoch colon in file names
  compgen -G "$OUT/${p}_${ver}_*.deb" >/dev/null || todo+=("$p")
done
if ((${#todo[@]})); then
  echo "fetch_gpu_debs: downloading ${#todo[@]} packages into $OUT"
  (cd "$OUT" && apt-get download -q "${todo[@]}")
else
  echo "fetch_gpu_debs: every package already in $OUT"
fi

# Slimming: the device tool carries at most 64 MiB (the tree and these packages together), and the packages as
# downloaded are 60 MB, mostly static archives nothing links. A package holding any is rebuilt without them as
# <name>_<version>_<arch>+slim.deb (the original is removed; the manifest lists the slim file and its sha256):
# a static archive `lib<x>.a` goes when `lib<x>.so` sits beside it and no CMake file of the package names it
# (GoogleTest and Google Benchmark ship and import static archives only: they stay), and so do manual pages and
# documentation other than the copyright files.
slim_deb() {  # slim_deb <deb>: rebuilds it slim when it holds anything removable
  local deb=$1 tmp root removed=0 f base
  [[ "$deb" == *+slim.deb ]] && return 0
  tmp=$(mktemp -d)
  root=$tmp/root
  dpkg-deb -R "$deb" "$root"
  while IFS= read -r -d '' f; do
    base=$(basename "$f" .a)
    [[ -e "${f%.a}.so" || -L "${f%.a}.so" ]] || continue
    if grep -rqF --include='*.cmake' "$base.a" "$root"; then continue; fi
    rm -f "$f"; removed=$((removed + 1))
  done < <(find "$root" -name 'lib*.a' -print0)
  while IFS= read -r -d '' f; do rm -f "$f"; removed=$((removed + 1)); done < \
    <(find "$root/usr/share/man" "$root/usr/share/doc" -type f ! -name copyright -print0 2>/dev/null)
  if ((removed > 0)); then
    # md5sums lists every file: keep the lines of what stayed
    if [[ -f "$root/DEBIAN/md5sums" ]]; then
      (cd "$root" && while read -r sum path; do
        if [[ -e "$path" ]]; then echo "$sum  $path"; fi
      done <DEBIAN/md5sums) >"$tmp/md5sums"
      mv "$tmp/md5sums" "$root/DEBIAN/md5sums"
    fi
    dpkg-deb --root-owner-group -Zxz -b "$root" "${deb%.deb}+slim.deb" >/dev/null
    rm -f "$deb"
  fi
  rm -rf "$tmp"
}
for f in "$OUT"/*.deb; do slim_deb "$f"; done

# The manifest: one line per package (name, version, architecture, file, sha256), plus what was asked for;
# gpu_check.sh unpacks exactly the files it lists.
# Rewritten only when a line other than the date changed: gpu_check.sh unpacks again when the file changes.
manifest="$OUT/MANIFEST.tsv"
{
  echo "# zerofit GPU-machine packages, $(date -u +%Y-%m-%dT%H:%M:%SZ), from $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "# roots: ${ROOTS[*]}"
  printf '# package\tversion\tarch\tfile\tsha256\n'
  for p in "${packages[@]}"; do
    f=$(compgen -G "$OUT/${p}_*.deb" | head -n 1)
    [[ -n "$f" ]] || { echo "fetch_gpu_debs: $p was not downloaded" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$(dpkg-deb -f "$f" Version)" "$(dpkg-deb -f "$f" Architecture)" \
      "$(basename "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
  done
} >"$manifest.new"
if [[ -f "$manifest" ]] && cmp -s <(tail -n +2 "$manifest") <(tail -n +2 "$manifest.new"); then
  rm "$manifest.new"
else
  mv "$manifest.new" "$manifest"
fi
# What an earlier package list downloaded and this one does not name would only travel along: removed.
declare -A listed
while IFS=$'\t' read -r _ _ _ file _; do listed[$file]=1; done < <(grep -v '^#' "$manifest")
stale=0
for f in "$OUT"/*.deb; do
  if [[ -z "${listed[$(basename "$f")]:-}" ]]; then rm -f -- "$f"; stale=$((stale + 1)); fi
done
((stale == 0)) || echo "fetch_gpu_debs: removed $stale .deb files the manifest does not list"
echo "fetch_gpu_debs: $(grep -vc '^#' "$manifest") packages, $(du -sh "$OUT" | cut -f1), manifest $manifest"
