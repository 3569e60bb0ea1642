#!/usr/bin/env bash
# Puts cuobjdump (PyPI's nvidia-cuda-cuobjdump wheel: one static binary) into DIR/bin, for
# tools/kernel_resources.py's check that no CUDA kernel spills to local memory unbudgeted
# (tests/CMakeLists.txt: cuda_kernels_keep_to_their_local_memory_budget). Debian's CUDA toolkit
# here has nvcc and ptxas but no cuobjdump.
#
#     scripts/fetch-cuobjdump.sh .deps/cuobjdump
set -euo pipefail
dir=${1:?usage: scripts/fetch-cuobjdump.sh DIR}
"$(dirname "$0")/fetch-wheel.sh" "$dir" nvidia-cuda-cuobjdump 13.5.37 '/bin/cuobjdump$' nvidia/cu13/ bin/cuobjdump
"$dir/bin/cuobjdump" --version >/dev/null ||
  { echo "fetch-cuobjdump: $dir/bin/cuobjdump does not run" >&2; exit 1; }
