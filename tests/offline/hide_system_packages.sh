#!/usr/bin/env bash
# Runs a command in a private mount namespace where the system copies of the
# packages in an offline bundle (scripts/offline-bundle.sh) are hidden, so
# that it can only build and run from the bundle: a proof, on a machine that
# has the packages, that the bundle alone is enough.
#
#     tests/offline/hide_system_packages.sh BUNDLE COMMAND [ARGS...]
#
# Every file and folder the bundle's packages install under /usr is covered
# (folders by an empty folder, files by /dev/null, which no build accepts as a
# header or library; a symbolic link through its target), at the shallowest
# level that holds only bundle files:
# /usr/include/boost whole, the shared /usr/lib/<arch>/cmake entry by entry.
# Kept visible: the shared libraries that CMake, Ninja and the compiler load
# themselves (Debian's cmake links libxml2 and ICU); the bundle's own copies
# are found first through the build's RPATH, which the test checks with ldd.
# Needs root (unshare); changes nothing outside the namespace.
set -euo pipefail
bundle=$(cd "$1" && pwd)
shift
list="$bundle/hidden.txt"

# Libraries the build tools themselves load must stay (their names and the files the names link to).
tool_libs=$(for t in cmake ninja "$(gcc -print-prog-name=cc1plus)" ld; do
  p=$(command -v "$t" || echo "$t"); [ -e "$p" ] && ldd "$p" 2>/dev/null | awk '/=>/ {print $3}'
done | sort -u | while read -r l; do basename "$l"; basename "$(readlink -f "$l")"; done | sort -u)

: >"$list"
for deb in "$bundle"/debs/*.deb; do
  dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./|/|; s|/$||'
done | sort -u >"$list.raw"
while read -r path; do
  [ -n "$path" ] && [ "$path" != "/usr" ] || continue
  [ -e "$path" ] || continue                                   # not installed here: nothing to hide
  [ -L "$path" ] && continue                                   # a link: its target is hidden (or outside /usr)
  case "$path" in /usr/share/doc*|/usr/share/man*|/usr/share/lintian*) continue ;; esac
  base=$(basename "$path")
  if grep -qxF "$base" <<<"$tool_libs"; then continue; fi
  echo "$path"
done <"$list.raw" >"$list.all"

# Hide the shallowest paths: a folder whose every entry came from the bundle
# (so hiding it hides nothing else) replaces the entries below it.
python3 - "$list.all" "$list" "$list.raw" <<'PY'
import os, sys
candidates = [l.rstrip("\n") for l in open(sys.argv[1]) if l.strip()]
from_bundle = set(l.rstrip("\n") for l in open(sys.argv[3]))

def only_bundle_files(folder):
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if path not in from_bundle:
            return False
        if os.path.isdir(path) and not os.path.islink(path) and not only_bundle_files(path):
            return False
    return True

chosen = []
for p in sorted(candidates):  # a folder sorts before its entries
    if any(p.startswith(c + "/") for c in chosen):
        continue  # already hidden with its folder
    if not os.path.isdir(p) or only_bundle_files(p):
        chosen.append(p)
open(sys.argv[2], "w").write("".join(c + "\n" for c in chosen))
PY

exec unshare --mount --propagation private bash -c '
  set -euo pipefail
  empty=$(mktemp -d)
  while read -r p; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then mount --bind "$empty" "$p"; else mount --bind /dev/null "$p"; fi
  done <"$1"
  shift
  exec "$@"' hide "$list" "$@"
