#!/usr/bin/env bash
# Gathers, on a connected Debian machine, everything Tandem's build and tests
# need beyond a C++ compiler, CMake, Ninja and the CUDA toolkit (NCCL and cuDNN
# are found where they are: docs/device.md), into one folder, so that a node
# with no package access (the lent GPU machine, a cluster's compute node) builds
# from that folder alone:
#
#     scripts/offline-bundle.sh offline-bundle        # here, with apt
#     scripts/offline-build.sh offline-bundle build   # there, no network
#
# The folder holds the Debian packages as .deb files (their headers, CMake
# package files, libraries and the fortunes data), the cuDNN frontend's headers
# (cudnn-frontend/, from PyPI; optional: without them the cuDNN attention
# cross-check is not built there) and MANIFEST (package, version, sha256);
# about 33 MiB. Runtime libraries that a GPU image already has (libc,
# libstdc++, zlib, liblzma) are not bundled.
set -euo pipefail
dir=${1:-offline-bundle}

# The Debian packages scripts/setup.sh installs for building and testing, with
# the libraries they link at run time. Metapackages (libboost-dev, libicu-dev's
# versioned library) are resolved to the package that holds the files.
packages=(libeigen3-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev googletest libxml2-dev libxml2 libicu-dev fortunes fortunes-min)
resolve() {  # the packages a metapackage depends on
  apt-cache depends --no-recommends --no-suggests "$1" | awk '/^ *Depends:/ && $2 !~ /^</ {print $2}'
}

if ! apt-cache show libyaml-cpp-dev >/dev/null 2>&1; then
  apt-get update -qq
fi
packages+=($(resolve libboost-dev))          # libboost1.NN-dev: the headers
packages+=($(resolve libyaml-cpp-dev | grep -v '^lib.*-dev$' || true))   # libyaml-cpp0.N
packages+=($(resolve libfmt-dev | grep -v '^lib.*-dev$' || true))        # libfmtN
packages+=($(resolve libicu-dev | grep -E '^libicu[0-9]+$' || true))    # libicuNN

mkdir -p "$dir/debs"
rm -f "$dir"/debs/*.deb
(cd "$dir/debs" && apt-get download -q -o APT::Sandbox::User=root "${packages[@]}" >/dev/null)
: > "$dir/MANIFEST"
for deb in "$dir"/debs/*.deb; do
  printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
    "$(sha256sum "$deb" | cut -d' ' -f1)" >>"$dir/MANIFEST"
done
# The cuDNN frontend's headers (PyPI), for the cuDNN attention cross-check back-end.
if "$(dirname "$0")/fetch-cudnn-frontend.sh" "$dir/cudnn-frontend"; then
  printf 'nvidia-cudnn-frontend %s (headers, PyPI)\n' "$(cat "$dir/cudnn-frontend/VERSION")" >>"$dir/MANIFEST"
else
  echo "offline-bundle: no cuDNN frontend (pip or PyPI unavailable): the bundle builds without the cuDNN attention back-end" >&2
fi
echo "offline-bundle: $(wc -l <"$dir/MANIFEST") packages, $(du -sh "$dir" | cut -f1) in $dir"
