#!/usr/bin/env bash
# The whole GPU check in one command, for a machine with an NVIDIA GPU, nvcc and
# CMake (no apt needed if the build dependencies are already there; see
# docs/device.md for what the lent H100/H200 machines lack and how to carry it).
#
# Builds Tandem with CUDA (sm_90 unless CUDA_ARCH is set), runs every test
# (GPU tests included: they must run, not skip), then the benchmarks that exist,
# and prints a summary. Results go to ${OUT:-gpu-results}/.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-results}
mkdir -p "$out"
arch=${CUDA_ARCH:-90}

{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"
  nvcc --version 2>/dev/null | tail -1
} | tee "$out/machine.txt"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  >"$out/configure.log" 2>&1 || { echo "configure failed"; tail -20 "$out/configure.log"; exit 1; }
cmake --build build-gpu -j"$(nproc)" >"$out/build.log" 2>&1 || { echo "build failed"; grep -m20 error "$out/build.log"; exit 1; }

ctest --test-dir build-gpu --output-on-failure -j4 --timeout 900 >"$out/ctest.log" 2>&1
status=$?
skipped=$(grep -c "Skipped" "$out/ctest.log" || true)

for b in build-gpu/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")" | tee -a "$out/bench.txt"
  "$b" --device cuda 2>&1 | tee -a "$out/bench.txt" || true
done

echo "== summary"
grep -E "tests passed|tests failed" "$out/ctest.log"
echo "skipped tests: $skipped (on a GPU machine this should be 0)"
grep -E "\(Failed\)|\(SEGFAULT\)|\(Timeout\)" "$out/ctest.log" | head -20
exit $status
