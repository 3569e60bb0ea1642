#!/usr/bin/env bash
# Builds Tandem on a machine with no package access from a folder made by
# scripts/offline-bundle.sh (a compiler, CMake, Ninja and, for the GPU
# backend, the CUDA toolkit must be there; NCCL and cuDNN are looked for under
# NCCL_ROOT/CUDNN_ROOT, the toolkit and pip's nvidia-* wheels).
#
#     scripts/offline-build.sh BUNDLE BUILD_DIR [CMAKE_ARGS...]
#
# Unpacks the bundle's .deb files into BUNDLE/root (once), configures BUILD_DIR
# against it and builds everything; TANDEM_CONFIGURE_ONLY=1 stops after
# configuring (tools/gpu-check.sh builds per phase). The binaries find the
# bundle's shared libraries through their RPATH (DT_RPATH, which also covers
# libraries' own dependencies such as libxml2's ICU), so they run without any
# environment set; the fortunes data comes from the bundle too.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: scripts/offline-build.sh BUNDLE BUILD_DIR [CMAKE_ARGS...]" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
build=$2
shift 2
cd "$(dirname "$0")/.."

shopt -s nullglob
debs=("$bundle"/debs/*.deb)
if [ ${#debs[@]} -eq 0 ]; then
  echo "offline-build: $bundle/debs holds no .deb files; make the bundle with scripts/offline-bundle.sh" >&2
  exit 2
fi
root="$bundle/root"
if [ ! -f "$root/.unpacked" ] || [ "$bundle/MANIFEST" -nt "$root/.unpacked" ]; then
  rm -rf "$root"
  mkdir -p "$root"
  for deb in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$root"
    else  # a .deb is an ar archive whose data.tar.* holds the files
      tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$root")
      rm -rf "$tmp"
    fi
  done
  touch "$root/.unpacked"
fi

arch=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
libdir="$root/usr/lib/$arch"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
frontend=()
[ -d "$bundle/cudnn-frontend" ] && frontend=(-DCUDNN_FRONTEND_ROOT="$bundle/cudnn-frontend")
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_RPATH="$libdir" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags" \
  -DTANDEM_FORTUNES_DIR="$root/usr/share/games/fortunes" \
  "${frontend[@]}" \
  "${launcher[@]}" "$@"
if [ "${TANDEM_CONFIGURE_ONLY:-0}" != "1" ]; then
  cmake --build "$build" -j"$(nproc)"
fi
