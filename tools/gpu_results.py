"""Reading the GPU check's result files (tools/gpu-check.sh writes them; docs/results/gpu/<run>/ keeps
them): kernels_bench's and optim_bench's markdown tables, attention_bench's columns (and its PyTorch
twin's), classifier_bench's columns, `tandem bench step`'s lines and compare.py's compare.json. Each reader takes a path and
returns plain rows; a line that is not a row is skipped, so a cut or failed run gives fewer rows, not
an error. tools/gpu_verdicts.py and tools/gpu_goals.py read through these, and take their command
line (folder_arguments) and write their reports (write_report) here.
"""
import argparse
import json
import pathlib
import re
import sys

CEILINGS = re.compile(r"copy (?P<copy>[\d.]+) GB/s.*bf16 GEMM 8192\^3 (?P<gemm>[\d.]+) TFLOP/s")
STEP_LINE = re.compile(r"^\s+(fp32|bf16|fp16)\s+([\d.]+)\s+([\d.]+)\s")


def table_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_kernels(path):
    """kernels_bench's cuda rows: [{op, dtype, shape, dir, us, achieved, unit, percent}]."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        cells = table_cells(line)
        if len(cells) != 8 or cells[0] != "cuda":
            continue
        try:
            achieved, unit = cells[6].split()
            rows.append({"op": cells[1], "dtype": cells[2], "shape": cells[3], "dir": cells[4], "us": float(cells[5]),
                         "achieved": float(achieved), "unit": unit, "percent": float(cells[7].rstrip("%"))})
        except ValueError:
            pass
    return rows


def read_ceilings(path):
    """kernels_bench's measured ceilings: {copy_gbs, bf16_gemm_tflops}, or None."""
    m = CEILINGS.search(path.read_text(errors="replace"))
    return {"copy_gbs": float(m["copy"]), "bf16_gemm_tflops": float(m["gemm"])} if m else None


def read_optim(path):
    """optim_bench's rows: [{optimizer, params, ms, gbs, percent}]."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        cells = table_cells(line)
        if len(cells) == 7 and cells[0] in ("adamw", "sgd"):
            try:
                rows.append({"optimizer": cells[0], "params": int(cells[1]), "ms": float(cells[4]),
                             "gbs": float(cells[5]), "percent": float(cells[6].rstrip("%"))})
            except ValueError:
                pass
    return rows


def read_attention(path):
    """attention_bench's (or bench/pytorch/attention_bench.py's) rows: dicts of its columns, the times as floats."""
    rows, header = [], None
    for line in path.read_text(errors="replace").splitlines():
        words = line.split()
        if words[:2] == ["device", "backend"]:
            header = words
        elif header and len(words) == len(header) and words[0].startswith("cuda"):
            r = dict(zip(header, words))
            try:
                for c in ("fwd_ms", "bwd_ms"):
                    r[c] = float(r[c])
            except (KeyError, ValueError):
                continue
            rows.append(r)
    return rows


def attention_key(r):
    """A row's shape and settings, for pairing rows of two runs of the same bench."""
    return tuple(r.get(k, "") for k in ("dtype", "batch", "seq", "heads", "head_dim", "dropout", "real"))


def read_step(path, rate=False):
    """tandem bench step's lines: {precision: step ms}, or {precision: samples/s} with rate."""
    rows = {}
    for line in path.read_text(errors="replace").splitlines():
        m = STEP_LINE.match(line)
        if m:
            rows[m.group(1)] = float(m.group(2 if rate else 3))
    return rows


def read_classifier(path):
    """classifier_bench's rows: [{config, device, dtype, batch, seq, fb_ms, fb_gflops}] (forward + backward)."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        w = line.split()
        if len(w) == 11 and w[1] != "device":
            try:
                rows.append({"config": w[0], "device": w[1], "dtype": w[2], "batch": int(w[3]), "seq": int(w[4]),
                             "fb_ms": float(w[6]), "fb_gflops": float(w[10])})
            except ValueError:
                pass
    return rows


def read_compare(path):
    """compare.json: {(config, implementation): its entry} (implementation: Tandem, PyTorch eager, ...).
    Unlike the tables, a file that is not compare.py's JSON (cut off mid-write) stops with its name."""
    try:
        return {(e["config"], e["implementation"]): e for e in json.loads(path.read_text())}
    except (ValueError, KeyError, TypeError) as e:
        sys.exit(f"{path}: not compare.py's JSON ({type(e).__name__}: {e})")


def folder_arguments(prog, doc, writes):
    """The command line of a reader of one results folder: FOLDER [--out FILE]; exits naming a missing folder."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path, help=f"also write the {writes} here")
    args = ap.parse_args()
    if not args.folder.is_dir():
        sys.exit(f"{prog}: {args.folder} is not a folder")
    return args


def write_report(report, out):
    """Prints the report and, if out (a path) is given, writes it there whole or not at all."""
    sys.stdout.write(report)
    if out:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(report)
        tmp.replace(out)
