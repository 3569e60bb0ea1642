#!/usr/bin/env python3
"""Every CUDA kernel's registers, stack frame and static shared memory, as nvcc built them, read from
the built libraries with `cuobjdump --dump-resource-usage` (no GPU needed), and a check that no kernel
uses local memory unless a budget file allows it.

Why the check: a kernel's stack frame is local memory, which lives in DRAM behind L1. ptxas puts
values there silently: spilled registers (often where __launch_bounds__ caps them), arrays indexed at
run time, registers saved around a call; where those loads and stores sit in a kernel's inner loop,
they cost every iteration. The hand-written kernels are written to keep their values in registers;
this makes that a checked promise, so a change that starts a spill fails CI on a machine without a
GPU instead of showing up as a slower row in the next GPU run.

    tools/kernel_resources.py LIBRARY... [--allow kernels/cuda/local_memory_budget.txt]
        [--markdown OUT.md] [--json OUT.json] [--since OLD.json] [--cuobjdump PATH]

--json keeps every kernel's figures; --since OLD.json, with a --json file of an earlier build,
prints what a change did to them: each kernel whose registers, frame or static shared memory moved,
and the kernels added and gone (what docs/results/*_ptxas.md were written from by hand).

The budget file has a line per allowed kernel: `BYTES REGEX  # why`: a kernel whose demangled name
matches REGEX (Python re.search) may have a stack frame of at most BYTES. A line that matches no
kernel with a frame is an error too (a stale allowance hides the next regression). A line
`# nvcc: X.Y` says which nvcc release the budget was read with; with --nvcc naming another, the
differences are printed but do not fail (a new compiler spills differently). Exit status: 0 when
every stack frame is allowed, 1 when one is not (each named), 2 on bad input (a file, the budget's
line).
"""
import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function (\S+):\s*$")
USAGE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
ARCH = re.compile(r"^arch = (sm_\d+a?)\s*$")
BUDGET_LINE = re.compile(r"^(\d+)\s+(.+?)\s*(?:#\s*(.*))?$")


def fail(message, status=2):
    print(f"kernel_resources: {message}", file=sys.stderr)
    sys.exit(status)


def find_cuobjdump(given):
    """The cuobjdump to run: --cuobjdump, then PATH, then the CUDA toolkit's, then the one
    scripts/fetch-cuobjdump.sh puts into .deps/ (PyPI's nvidia-cuda-cuobjdump wheel)."""
    if given:
        return given
    here = pathlib.Path(__file__).resolve().parent.parent
    for candidate in (shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump", here / ".deps/cuobjdump/bin/cuobjdump"):
        if candidate and pathlib.Path(candidate).is_file():
            return str(candidate)
    fail("no cuobjdump (PATH, /usr/local/cuda/bin, .deps/cuobjdump: scripts/fetch-cuobjdump.sh .deps/cuobjdump)")


def read_usage(cuobjdump, path):
    """[(arch, mangled name, registers, stack, shared, local)] of the SASS in one library or object."""
    run = subprocess.run([cuobjdump, "--dump-resource-usage", str(path)], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"{path}: cuobjdump failed: {run.stderr.strip() or run.stdout.strip()}")
    kernels, arch, name = [], None, None
    for line in run.stdout.splitlines():
        if m := ARCH.match(line):
            arch = m[1]
        elif m := FUNCTION.match(line):
            name = m[1]
        elif name and (m := USAGE.search(line)):
            kernels.append((arch, name) + tuple(int(v) for v in m.groups()))
            name = None
    return kernels


def demangle(names):
    if not names:
        return {}
    try:
        run = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    except FileNotFoundError:
        fail("no c++filt (binutils) to demangle the kernels' names, which the budget's lines match")
    plain = run.stdout.splitlines()
    if run.returncode != 0 or len(plain) != len(names):
        fail(f"c++filt failed on the kernels' names: {run.stderr.strip()}")
    return dict(zip(names, plain))


NVCC_LINE = re.compile(r"^#\s*nvcc:\s*(\d+\.\d+)\s*$")


def read_budget(path):
    """([(max bytes, compiled regex, why, line number)], the nvcc release it was read with or None)."""
    try:
        lines = pathlib.Path(path).read_text().splitlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    budget, release = [], None
    for number, line in enumerate(lines, 1):
        if m := NVCC_LINE.match(line.strip()):
            release = m[1]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = BUDGET_LINE.match(line.strip())
        if not m or not m[3]:
            fail(f"{path}:{number}: expected 'BYTES REGEX  # why', got: {line.strip()}")
        try:
            budget.append((int(m[1]), re.compile(m[2]), m[3], number))
        except re.error as e:
            fail(f"{path}:{number}: bad regular expression {m[2]!r}: {e}")
    return budget, release


def check(kernels, budget, budget_path):
    """The kernels with a stack frame the budget does not allow, and the budget lines that allow none."""
    offenders, matched = [], set()
    for k in kernels:
        if k["stack"] == 0:
            continue
        matches = [b for b in budget if b[1].search(k["name"])]
        matched.update(b[3] for b in matches)
        if not any(k["stack"] <= b[0] for b in matches):
            offenders.append((k, matches[0] if matches else None))
    stale = [b for b in budget if b[3] not in matched]
    for k, line in offenders:
        allowed = f"{budget_path}:{line[3]} allows {line[0]}" if line else "not in the budget"
        print(f"kernel_resources: {k['name']} ({k['arch']}, {k['file']}): a {k['stack']}-byte stack frame, "
              f"{allowed} (registers {k['reg']})", file=sys.stderr)
    for b in stale:
        print(f"kernel_resources: {budget_path}:{b[3]}: '{b[1].pattern}' matches no kernel with a stack frame "
              f"(remove the line)", file=sys.stderr)
    return not offenders and not stale


def markdown(kernels):
    rows = ["| kernel | arch | registers | stack bytes | static shared bytes | library |", "|---|---|---:|---:|---:|---|"]
    for k in sorted(kernels, key=lambda k: (k["file"], k["name"])):
        rows.append(f"| `{k['name']}` | {k['arch']} | {k['reg']} | {k['stack']} | {k['shared']} | {k['file']} |")
    return "\n".join(rows) + "\n"


def changes(kernels, old):
    """Lines saying how kernels differ from old (the --json of an earlier build), by arch and mangled name."""
    key = lambda k: (k["arch"], k["mangled"])  # noqa: E731
    before, after = {key(k): k for k in old}, {key(k): k for k in kernels}
    lines = []
    for k in sorted(after.values(), key=lambda k: k["name"]):
        o = before.get(key(k))
        if o is None:
            lines.append(f"  new: {k['name']} ({k['arch']}): registers {k['reg']}, stack {k['stack']}, shared {k['shared']}")
            continue
        moved = [f"{label} {o[f]} -> {k[f]}" for f, label in (("reg", "registers"), ("stack", "stack"), ("shared", "shared"))
                 if o[f] != k[f]]
        if moved:
            lines.append(f"  {', '.join(moved)}: {k['name']} ({k['arch']})")
    lines += [f"  gone: {o['name']} ({o['arch']})" for o in sorted(before.values(), key=lambda k: k["name"])
              if key(o) not in after]
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="libraries or objects with CUDA code")
    p.add_argument("--allow", help="the budget file: which kernels may have a stack frame, and how large")
    p.add_argument("--markdown", help="write the table of every kernel here")
    p.add_argument("--json", help="write every kernel's figures here (for a later --since)")
    p.add_argument("--since", help="an earlier build's --json: print what changed")
    p.add_argument("--cuobjdump")
    p.add_argument("--nvcc", help="the nvcc version that built the files (CMake's CMAKE_CUDA_COMPILER_VERSION): "
                                  "a budget read with another release (its '# nvcc: X.Y' line) is reported, not enforced")
    a = p.parse_args()
    tool = find_cuobjdump(a.cuobjdump)
    kernels = []
    for f in a.files:
        if not pathlib.Path(f).is_file():
            fail(f"{f}: no such file")
        for arch, name, reg, stack, shared, local in read_usage(tool, f):
            # cuobjdump's LOCAL (local memory outside the frame; none here on 2026-12-04) counts as frame.
            kernels.append({"file": pathlib.Path(f).name, "arch": arch, "mangled": name, "reg": reg,
                            "stack": stack + local, "shared": shared})
    if not kernels:
        fail(f"no kernels in {', '.join(a.files)} (built without CUDA?)")
    names = demangle(sorted({k["mangled"] for k in kernels}))
    for k in kernels:
        k["name"] = names[k["mangled"]]
    with_stack = [k for k in kernels if k["stack"]]
    print(f"kernel_resources: {len(kernels)} kernels in {len(a.files)} files; {len(with_stack)} with a stack frame; "
          f"registers at most {max(k['reg'] for k in kernels)}")
    if a.markdown:
        pathlib.Path(a.markdown).write_text(markdown(kernels))
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(kernels, indent=1) + "\n")
    if a.since:
        try:
            old = json.loads(pathlib.Path(a.since).read_text())
            lines = changes(kernels, old)
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail(f"{a.since}: not a --json file of this tool ({type(e).__name__}: {e})")
        print(f"kernel_resources: since {a.since}: {len(lines)} changes" + (":" if lines else ""))
        for line in lines:
            print(line)
    ok = True
    if a.allow is not None:
        budget, release = read_budget(a.allow)
        ok = check(kernels, budget, a.allow)
        built = ".".join(a.nvcc.split(".")[:2]) if a.nvcc else None
        if not ok and release and built and built != release:
            # Another compiler spills differently: a newer nvcc must not fail every build until someone
            # reads its frames again; the lines above say what to read.
            print(f"kernel_resources: {a.allow} was read with nvcc {release}, these files were built by nvcc {a.nvcc}: "
                  f"the differences above are reported, not enforced (read them and update the budget)")
            ok = True
    else:
        for k in with_stack:
            print(f"  {k['stack']:6d} bytes  {k['reg']:3d} registers  {k['name']}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
