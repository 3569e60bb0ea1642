#!/usr/bin/env bash
# Sets up, builds and runs every test: the Release build (with CUDA where nvcc
# exists; GPU tests skip without a GPU), then the CPU tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, built from the offline bundle
# with the system packages hidden (docs/device.md). TANDEM_SANITIZE=0 skips the
# second pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere reuses the cache.
export CCACHE_BASEDIR="$PWD"
jobs=$(nproc)
# Each phase's end, in seconds from the start: the CI run has 90 minutes in all.
phase() { echo "test: $1 done at ${SECONDS} s"; }

scripts/setup.sh
phase "setup and the Release build"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600
phase "the Release tests"

# Tandem as a CMake package: install it, build examples/ddp_fortunes against the
# install (find_package(Tandem)) and train it on 2 ranks; it must beat the
# majority-class baseline.
rm -rf build/install build/example
cmake --install build --prefix build/install >/dev/null
cmake -S examples/ddp_fortunes -B build/example -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/example
example=$(build/install/bin/tandem launch --nproc-per-node 2 -- build/example/ddp_fortunes)
echo "example: $example"
awk '/test accuracy/ { found = 1; b = $10; sub(/\)/, "", b); ok = $7 + 0 > b + 0 } END { exit !(found && ok) }' <<<"$example" ||
  { echo "example: the installed-package example did not beat the majority-class baseline"; exit 1; }
phase "the installed-package example"

if [ "${TANDEM_SANITIZE:-1}" != "0" ]; then
  # The sanitizer build is also the offline-build check: it is built from an
  # offline bundle (scripts/offline-bundle.sh, what the lent GPU machine gets,
  # having no apt) with the system's copies of those packages hidden, so the
  # bundle alone must be enough, and the binaries must load the bundle's
  # libraries and read the bundle's fortunes data.
  scripts/offline-bundle.sh build-offline-bundle
  hide=(tests/offline/hide_system_packages.sh build-offline-bundle)
  if [ "$(id -u)" -ne 0 ]; then
    echo "test: not root, so the offline build runs with the system packages visible (hiding them needs unshare)"
    hide=()
  fi
  # The sanitizer build is -O1 -g1, not RelWithDebInfo's -O2 -g: at -O2 -g it took 44 of the CI
  # run's 90 minutes on 2 cores (cold ccache, 2026-12-01). -O1 is what ASan's documentation
  # advises, and -g1 keeps the line tables its reports print; the largest file compiles in
  # 67 s instead of 128 s.
  "${hide[@]}" env jobs="$jobs" start="$SECONDS" bash -c '
    set -euo pipefail
    SECONDS=$start
    TANDEM_CONFIGURE_ONLY=1 scripts/offline-build.sh build-offline-bundle build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DTANDEM_CUDA=OFF -DTANDEM_SANITIZE=ON -DTANDEM_BUILD_BENCH=OFF >/dev/null
    cmake --build build-asan -j"$jobs"
    echo "test: the sanitizer build done at ${SECONDS} s"
    bundle_lib=$(cd build-offline-bundle/root && pwd)
    # grep without -q: -q exits at the first match, and a writer still writing then dies of SIGPIPE,
    # which pipefail turns into a failed check (seen in a CI rehearsal on 2026-11-27).
    ldd build-asan/tests/report_tests | grep "libxml2.so.2 => $bundle_lib" >/dev/null ||
      { echo "offline build: report_tests does not load the bundle'"'"'s libxml2"; ldd build-asan/tests/report_tests; exit 1; }
    build-asan/apps/tandem data fortunes | grep startrek >/dev/null ||
      { echo "offline build: the fortunes data of the bundle is not found"; exit 1; }
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
      ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900
    echo "test: the sanitizer tests done at ${SECONDS} s"'
fi
