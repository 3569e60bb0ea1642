#!/usr/bin/env bash
# Unpacks some files of one PyPI wheel into DIR, for the build's optional helpers
# (scripts/fetch-cudnn-frontend.sh, scripts/fetch-cuobjdump.sh). Needs pip and PyPI; nothing is
# installed into any Python environment (pip download + unzip). The wheel's members whose path
# matches REGEX (Python re.search) are written under DIR with PREFIX taken off their path, keeping
# their mode; REQUIRED, a path under DIR, must be among them. Safe to run again: DIR/VERSION says
# which version is there, and DIR is replaced whole or not at all.
#
#     scripts/fetch-wheel.sh DIR PACKAGE VERSION REGEX PREFIX REQUIRED
set -euo pipefail
[ $# -eq 6 ] || { echo "usage: scripts/fetch-wheel.sh DIR PACKAGE VERSION REGEX PREFIX REQUIRED" >&2; exit 2; }
dir=$1 package=$2 version=$3 regex=$4 prefix=$5 required=$6
if [ -e "$dir/$required" ] && [ "$(cat "$dir/VERSION" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: "$package==$version" -d "$tmp" >&2
wheel=$(ls "$tmp"/*.whl)
rm -rf "$dir.partial"
mkdir -p "$dir.partial"
python3 - "$wheel" "$dir.partial" "$regex" "$prefix" "$required" <<'PY'
import os, re, sys, zipfile
wheel, out, regex, prefix, required = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    members = [i for i in z.infolist() if re.search(regex, i.filename) and not i.is_dir()]
    names = {m.filename.removeprefix(prefix) for m in members}
    if required not in names:
        sys.exit(f"fetch-wheel: {wheel} has no {prefix}{required}")
    for m in members:
        path = os.path.join(out, m.filename.removeprefix(prefix))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(m) as src, open(path, "wb") as dst:
            dst.write(src.read())
        mode = (m.external_attr >> 16) & 0o777
        if mode:
            os.chmod(path, mode)
PY
echo "$version" >"$dir.partial/VERSION"
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "fetch-wheel: $package $version in $dir" >&2
