#!/usr/bin/env python3
"""Static instruction counts of CUDA kernels' main loops, from SASS.

  cuobjdump -sass attention.cubin > attention.sass   # CUDA's cuobjdump (or triton's copy)
  python3 tools/sass_loops.py attention.sass [--match forward_pipelined] [--before old.sass] [--mix]

For each kernel (demangled with c++filt): all its instructions, and the longest
backward branch's body that holds a tensor-core instruction (HMMA): the main
loop, with the number of HMMAs in it. The counts are static (every branch of the
loop body counted once, dropout and fallback paths included), a profile of what
the compiler emitted, not of what runs; with --before, the same for an older
build beside it. --mix adds the loops nested in the main loop (a rolled inner
loop runs its body once per trip, which a static count shows once: a reader
who knows the trip count adds the rest) and the main loop's instructions by
opcode, without modifiers or predicates. Used for docs/results/attention_sass.md
and docs/results/attention_vs_flashattention2_sass.md.
"""
import argparse
import collections
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


PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def loops(instructions):
    """Every backward branch's body: [(first address, branch address, instruction texts)], in address order."""
    out = []
    for address, text in instructions:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            start = int(m.group(1), 16)
            out.append((start, address, [t for a, t in instructions if start <= a <= address]))
    return out


def hmmas(body):
    return sum("HMMA" in t for t in body)


def main_loop(instructions):
    """(first address, branch address, body) of the longest loop holding an HMMA, or None."""
    held = [loop for loop in loops(instructions) if hmmas(loop[2])]
    return max(held, key=lambda loop: len(loop[2])) if held else None


def opcode(text):
    """An instruction's opcode without predicate or modifiers: '@!P0 HMMA.16816.F32.BF16 R4, ...' -> 'HMMA'."""
    return PREDICATE.sub("", text).split()[0].split(".")[0]


def describe(instructions, mix=False):
    loop = main_loop(instructions)
    line = f"{len(instructions)} total, main loop " + (f"{len(loop[2])} ({hmmas(loop[2])} HMMA)" if loop else "-")
    if not (mix and loop):
        return line
    inner = [f"{len(body)} ({hmmas(body)} HMMA)" for start, end, body in loops(instructions)
             if loop[0] <= start and end <= loop[1] and (start, end) != loop[:2]]
    counts = collections.Counter(opcode(t) for t in loop[2])
    line += "; inner loops: " + (", ".join(inner) if inner else "none")
    return line + "; mix: " + " ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sass")
    p.add_argument("--match", default="", help="only kernels whose demangled name contains this")
    p.add_argument("--before", help="an older listing to print beside")
    p.add_argument("--mix", action="store_true", help="also the main loop's inner loops and its opcodes")
    a = p.parse_args()
    now = kernels(a.sass)
    before = kernels(a.before) if a.before else {}
    for name in sorted(now):
        if a.match not in name:
            continue
        short = re.sub(r"\(.*", "", re.sub(r"tandem::(kernels::attention_detail::)?", "", name))
        line = f"{short}: {describe(now[name], a.mix)}"
        if name in before:
            line += f"; before: {describe(before[name], a.mix)}"
        print(line)


if __name__ == "__main__":
    main()
