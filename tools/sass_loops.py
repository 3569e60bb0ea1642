#!/usr/bin/env python3
"""Static instruction counts of CUDA kernels' main loops, from SASS.

  cuobjdump -sass attention.cubin > attention.sass   # CUDA's cuobjdump (or triton's copy)
  python3 tools/sass_loops.py attention.sass [--match forward_pipelined] [--before old.sass]

For each kernel (demangled with c++filt): all its instructions, and the longest
backward branch's body that holds a tensor-core instruction (HMMA): the main
loop, with the number of HMMAs in it. The counts are static (every branch of the
loop body counted once, dropout and fallback paths included), a profile of what
the compiler emitted, not of what runs; with --before, the same for an older
build beside it. Used for docs/results/attention_sass.md.
"""
import argparse
import re
import subprocess

INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRANCH = re.compile(r"BRA .*?(0x[0-9a-f]+)")


def kernels(path):
    """{demangled name: [(address, instruction)]} of a cuobjdump -sass listing."""
    parts = re.split(r"\n\s*Function : (\S+)\n", open(path).read())
    names = subprocess.run(["c++filt"], input="\n".join(parts[1::2]), capture_output=True, text=True,
                           check=True).stdout.split("\n")
    out = {}
    for name, body in zip(names, parts[2::2]):
        out[name] = [(int(m.group(1), 16), m.group(2)) for m in map(INSTRUCTION.match, body.split("\n")) if m]
    return out


def main_loop(instructions):
    """(instructions, HMMAs) of the longest loop holding an HMMA, or None."""
    best = None
    for address, text in instructions:
        m = BRANCH.search(text)
        if not m or int(m.group(1), 16) >= address:
            continue
        start = int(m.group(1), 16)
        body = [t for a, t in instructions if start <= a <= address]
        hmma = sum("HMMA" in t for t in body)
        if hmma and (best is None or len(body) > best[0]):
            best = (len(body), hmma)
    return best


def describe(instructions):
    loop = main_loop(instructions)
    return f"{len(instructions)} total, main loop " + (f"{loop[0]} ({loop[1]} HMMA)" if loop else "-")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sass")
    p.add_argument("--match", default="", help="only kernels whose demangled name contains this")
    p.add_argument("--before", help="an older listing to print beside")
    a = p.parse_args()
    now = kernels(a.sass)
    before = kernels(a.before) if a.before else {}
    for name in sorted(now):
        if a.match not in name:
            continue
        short = re.sub(r"\(.*", "", re.sub(r"tandem::(kernels::attention_detail::)?", "", name))
        line = f"{short}: {describe(now[name])}"
        if name in before:
            line += f"; before: {describe(before[name])}"
        print(line)


if __name__ == "__main__":
    main()
