#!/usr/bin/env python3
"""Which kernels two PTX listings compile the same: a check that a refactor left the verified path alone.

  git show REV:kernels/cuda/gelu.cu > kernels/cuda/gelu_before.cu      # inside the tree: same includes
  NVCC="nvcc -I. -O3 -DNDEBUG -arch=sm_90 --expt-relaxed-constexpr -std=c++20 -DTANDEM_WITH_CUDA=1 -ptx"
  $NVCC kernels/cuda/gelu_before.cu -o before.ptx && $NVCC kernels/cuda/gelu.cu -o after.ptx
  rm kernels/cuda/gelu_before.cu
  python3 tools/ptx_same.py before.ptx after.ptx [--match bias_gelu] [--rename Mask=DropoutMask]

Without a GPU (and without cuobjdump), the PTX is the closest look at what a
kernel runs; ptxas then turns equal PTX into equal SASS. Kernels are paired by
their demangled signatures with namespaces dropped, so moving a kernel into
another namespace or file still pairs it; the bodies are compared after
renaming what only names differ in: branch labels, local stack arrays, virtual registers
(renumbered by first use), mangled symbols (the kernel's own, its
parameters', its callees'), and where a function-scope __shared__ array is
declared (in whichever kernel the file defines first).
--rename OLD=NEW pairs kernels whose signatures differ by a renamed type.
Prints "same", "DIFFERENT" (with the first differing lines) or "missing" for
each kernel of the first listing, and exits 1 unless all are the same.
"""
import argparse
import difflib
import re
import subprocess
import sys

ENTRY = re.compile(r"^(?:\.visible )?\.entry (\S+)\((.*?)^\}$", re.S | re.M)


def demangle(names):
    return subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                          check=True).stdout.split("\n")


def key(signature):
    """A kernel's signature without namespaces: tandem::kernels::x_detail::k<float, 4> -> k<float, 4>."""
    signature = signature.replace("(anonymous namespace)::", "")
    return re.sub(r"\b[A-Za-z_]\w*::", "", signature)


def canonical_registers(body):
    """Virtual registers renumbered by first use within each class (%f, %r, %rd, %p, ...), their
    declarations dropped: the numbering follows the front end's order of creation, not the code."""
    body = re.sub(r"[ \t]*\.reg [^\n]*\n", "", body)
    names = {}

    def rename(m):
        cls = m.group(1)
        return names.setdefault(m.group(0), f"%{cls}#{sum(1 for k in names if k[1:1 + len(cls)] == cls and k[1 + len(cls)].isdigit())}")

    return re.sub(r"%([a-z]+)(\d+)", rename, body)


def bodies(path):
    """{key: normalised body} of every kernel in a PTX file."""
    text = open(path).read()
    found = [(m.group(1), m.group(2)) for m in ENTRY.finditer(text)]
    out = {}
    for (mangled, body), signature in zip(found, demangle([m for m, _ in found])):
        body = body.replace(mangled, "KERNEL")
        body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
        body = re.sub(r"__local_depot\d+", "__local_depot", body)  # numbered by the kernel's place in the file
        body = re.sub(r"[ \t]*// demoted variable\n[ \t]*\.shared[^\n]*\n", "", body)
        body = re.sub(r"_Z\w+", "SYMBOL", body)
        body = re.sub(r"\n\s*\n", "\n", body)
        out[key(signature)] = canonical_registers(body)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--match", default="", help="only kernels whose signature contains this regex")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                    help="a type or function renamed between the two (a whole word of the signature)")
    args = ap.parse_args()
    before, after = bodies(args.before), bodies(args.after)
    for rename in args.rename:
        old, _, new = rename.partition("=")
        before = {re.sub(rf"\b{re.escape(old)}\b", new, k): v for k, v in before.items()}
    pattern = re.compile(args.match)
    differ = 0
    for k, body in before.items():
        if not pattern.search(k):
            continue
        if k not in after:
            print(f"missing    {k}")
            differ += 1
        elif after[k] == body:
            print(f"same       {k}")
        else:
            differ += 1
            print(f"DIFFERENT  {k}")
            lines = [l for l in difflib.unified_diff(body.split("\n"), after[k].split("\n"), lineterm="", n=0)
                     if l[:1] in "+-" and l[:3] not in ("+++", "---")]
            for line in lines[:6]:
                print(f"    {line.strip()}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
