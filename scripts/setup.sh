#!/usr/bin/env bash
# Installs the Debian packages Tandem builds with (only those missing) and
# builds it in Release into build/. Safe to run again. CUDA is used when
# /usr/local/cuda (or nvcc on PATH) is present; set TANDEM_CUDA=OFF to skip it.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$PWD"

packages=(build-essential cmake ninja-build ccache pkg-config
          libeigen3-dev libboost-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libbenchmark-dev libxml2-dev iproute2
          fortunes fortunes-min)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The cuDNN frontend's headers for the cuDNN attention cross-check, and cuobjdump for the kernels'
# local-memory check (only with CUDA; optional: without them that back-end and check are not
# built). pip comes from Debian when Python has none.
if [ "${TANDEM_CUDA:-AUTO}" != "OFF" ] && { [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; }; then
  if ! python3 -m pip --version >/dev/null 2>&1; then
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
  scripts/fetch-cudnn-frontend.sh .deps/cudnn-frontend ||
    echo "setup: could not fetch the cuDNN frontend; the cuDNN attention back-end is not built" >&2
  scripts/fetch-cuobjdump.sh .deps/cuobjdump ||
    echo "setup: could not fetch cuobjdump; the CUDA kernels' local-memory check is not built" >&2
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "${TANDEM_BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DTANDEM_CUDA="${TANDEM_CUDA:-AUTO}" "${launcher[@]}" >/dev/null
cmake --build "${TANDEM_BUILD_DIR:-build}" -j"$(nproc)"
