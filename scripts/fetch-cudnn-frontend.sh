#!/usr/bin/env bash
# Puts the cuDNN frontend's headers (header-only C++; PyPI's nvidia-cudnn-frontend
# wheel carries them under include/) into DIR/include, for the cuDNN attention
# cross-check back-end (kernels/cuda/attention_cudnn.h). Needs pip and PyPI;
# nothing is installed into any Python environment (pip download + unzip).
#
#     scripts/fetch-cudnn-frontend.sh .deps/cudnn-frontend
set -euo pipefail
dir=${1:?usage: scripts/fetch-cudnn-frontend.sh DIR}
version=1.32.0
if [ -f "$dir/include/cudnn_frontend.h" ] && [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: "nvidia-cudnn-frontend==$version" -d "$tmp" >&2
wheel=$(ls "$tmp"/nvidia_cudnn_frontend-*.whl)
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
python3 - "$wheel" "$dir.partial" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    headers = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if not any(n == "include/cudnn_frontend.h" for n in headers):
        sys.exit(f"fetch-cudnn-frontend: {wheel} has no include/cudnn_frontend.h")
    for n in headers:
        z.extract(n, out)
PY
echo "$version" >"$dir.partial/VERSION"
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "fetch-cudnn-frontend: cuDNN frontend $version headers in $dir/include" >&2
