#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (with CUDA where nvcc
# exists; GPU tests skip without a GPU), then the CPU tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer. TANDEM_SANITIZE=0 skips the
# second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$PWD"
jobs=$(nproc)

scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

if [ "${TANDEM_SANITIZE:-1}" != "0" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTANDEM_CUDA=OFF -DTANDEM_SANITIZE=ON \
    -DTANDEM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900
fi
