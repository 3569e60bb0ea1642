#!/usr/bin/env bash
# Puts cuobjdump (PyPI's nvidia-cuda-cuobjdump wheel: one static binary) into DIR/bin, for
# tools/kernel_resources.py's check that no CUDA kernel spills to local memory unbudgeted
# (tests/CMakeLists.txt: cuda_kernels_keep_to_their_local_memory_budget). Debian's CUDA toolkit
# here has nvcc and ptxas but no cuobjdump. Needs pip and PyPI; nothing is installed into any
# Python environment (pip download + unzip).
#
#     scripts/fetch-cuobjdump.sh .deps/cuobjdump
set -euo pipefail
dir=${1:?usage: scripts/fetch-cuobjdump.sh DIR}
version=13.5.37
if [ -x "$dir/bin/cuobjdump" ] && [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: "nvidia-cuda-cuobjdump==$version" -d "$tmp" >&2
wheel=$(ls "$tmp"/nvidia_cuda_cuobjdump-*.whl)
rm -rf "$dir.partial"
mkdir -p "$dir.partial/bin"
python3 - "$wheel" "$dir.partial/bin/cuobjdump" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith("/bin/cuobjdump")]
    if len(names) != 1:
        sys.exit(f"fetch-cuobjdump: {wheel} has {len(names)} bin/cuobjdump files, expected one")
    with z.open(names[0]) as src, open(out, "wb") as dst:
        dst.write(src.read())
os.chmod(out, 0o755)
PY
"$dir.partial/bin/cuobjdump" --version >/dev/null ||
  { echo "fetch-cuobjdump: the downloaded cuobjdump does not run" >&2; exit 1; }
echo "$version" >"$dir.partial/VERSION"
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "fetch-cuobjdump: cuobjdump $version in $dir/bin" >&2
