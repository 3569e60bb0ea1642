#!/usr/bin/env bash
# cmake/FindNCCL.cmake finds NCCL under NCCL_ROOT, NCCL_HOME and pip's wheel
# layout (site-packages/nvidia/nccl with only libnccl.so.2), reads its
# version from nccl.h, and never pairs a header from one root with a library
# from another. Fake installs: an nccl.h with version macros and an empty
# library file are all a search needs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=0 fails=0

fake_nccl() {  # fake_nccl ROOT MAJOR MINOR PATCH LIBNAME: include/nccl.h and lib/LIBNAME
  mkdir -p "$1/include" "$1/lib"
  printf '#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n' "$2" "$3" "$4" >"$1/include/nccl.h"
  : >"$1/lib/$5"
}
probe() {  # probe [ENV=VALUE...] -- [CMAKE_ARGS...]: the probe's "probe:" lines
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rm -rf "$tmp/build"
  env "${envs[@]}" cmake -S "$here/find_nccl" -B "$tmp/build" "$@" 2>&1 | grep "probe:" || true
}
expect() {  # expect NAME OUTPUT SUBSTRING
  if [[ "$2" == *"$3"* ]]; then echo "ok: $1"; passes=$((passes + 1)); else echo "FAIL: $1: expected '$3' in: $2"; fails=$((fails + 1)); fi
}
expect_not() {
  if [[ "$2" != *"$3"* ]]; then echo "ok: $1"; passes=$((passes + 1)); else echo "FAIL: $1: did not expect '$3' in: $2"; fails=$((fails + 1)); fi
}

fake_nccl "$tmp/root" 2 21 5 libnccl.so
out=$(probe -- -DNCCL_ROOT="$tmp/root")
expect "NCCL_ROOT (CMake variable) is searched first" "$out" "library=$tmp/root/lib/libnccl.so version=2.21.5"
expect "an imported target points at the library" "$out" "target location=$tmp/root/lib/libnccl.so"

out=$(probe NCCL_HOME="$tmp/root" --)
expect "NCCL_HOME (environment) is searched" "$out" "include=$tmp/root/include"

fake_nccl "$tmp/site/nvidia/nccl" 2 32 3 libnccl.so.2
# No system roots, so that a toolkit's NCCL on this machine cannot win.
out=$(probe PYTHONPATH="$tmp/site" -- -DTANDEM_NVIDIA_SYSTEM_ROOTS=)
expect "pip's wheel on the Python path, with only libnccl.so.2, is found" "$out" \
  "library=$tmp/site/nvidia/nccl/lib/libnccl.so.2 version=2.32.3"

# A Python whose sys.path holds no wheels: the machine's own Python may have pip's NCCL next to PyTorch.
mkdir -p "$tmp/bare_site"
printf '#!/bin/sh\necho "%s"\n' "$tmp/bare_site" >"$tmp/bare_python"
chmod +x "$tmp/bare_python"
out=$(probe -- -DTANDEM_NVIDIA_SYSTEM_ROOTS= -DTANDEM_PYTHON3="$tmp/bare_python")
expect "without any NCCL it is not found" "$out" "found=FALSE"

mkdir -p "$tmp/only_header/include" "$tmp/only_lib/lib"
cp "$tmp/root/include/nccl.h" "$tmp/only_header/include/"
: >"$tmp/only_lib/lib/libnccl.so"
out=$(probe NCCL_ROOT="$tmp/only_header" NCCL_HOME="$tmp/only_lib" --)
expect_not "a header without its library is not used" "$out" "include=$tmp/only_header"
expect_not "a library without its header is not used" "$out" "library=$tmp/only_lib"

out=$(probe -- -DNCCL_INCLUDE_DIR="$tmp/root/include" -DNCCL_LIBRARY="$tmp/root/lib/libnccl.so")
expect "explicit NCCL_INCLUDE_DIR and NCCL_LIBRARY skip the search" "$out" "found=TRUE include=$tmp/root/include"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
