#!/usr/bin/env python3
"""Issue #15's goals, read from one GPU check's results (the same machine, one run).

    tools/gpu_goals.py DIR [--out FILE]

DIR is a GPU check's results folder (gpu-check.tar.gz unpacked, or docs/results/gpu/<run>/). Prints
a markdown table: each goal, what the run measured, and met / not met / not measured (its files are
missing: a phase cut or not run). The figures and where they come from:

- ag_news_small, ag_news_optimized: compare.json (the compare phase: Tandem with one CUDA graph per
  step against PyTorch eager and torch.compile, bf16, synthetic full-length batches): samples/s
  ratios, and peak device memory against PyTorch's. Beside each ratio, the same ratio for the
  phase's fastest eager variant re-run as a graph step (compare_graph_<config>_fastest.txt, its
  name in .variant): what that variant's switches would give as defaults.
- imdb: classifier_bench's bf16 forward + backward model FLOP rate over kernels_bench's measured
  bf16 GEMM ceiling (8192^3) of the same run; where compare ran imdb too (COMPARE_CONFIGS), the
  whole step against PyTorch's beside it.
- Memory-bound kernels: kernels_bench's two default runs (bench_kernels_bench, bench_kernels_training)
  at the copy ceiling they measured: rows at 80 % or more, of the rows that move at least 1 MB (the
  smaller ones, the 64 x 4 cross-entropy, are launch-bound by construction). AdamW: optim_bench's
  largest and second-largest parameter counts.
- Attention at head dim 64, sequence 512, both batch sizes the bench times (8 and 64, 12 heads):
  Tandem's default pair (the pipelined forward, and split_pipelined, `auto`'s backward in 16 bits
  without dropout: bench_attention_bf16_split_pipelined) and the fastest of Tandem's dropout-free
  bf16 rows, forward + backward, against PyTorch's SDPA in peers_attention (the peers phase).
"""
import sys

import gpu_results

MIN_BYTES = 1e6
# The files the goals are read from (tools/gpu-check.sh's names; its rehearsal test checks them).
KERNELS_RUNS = ("bench_kernels_bench.txt", "bench_kernels_training.txt")
CLASSIFIER = "bench_classifier_bench.txt"
OPTIM = "bench_optim_bench.txt"
SDPA = "peers_attention.txt"
DEFAULT_ATTENTION = "bench_attention_bf16_split_pipelined"
READS = KERNELS_RUNS + (CLASSIFIER, OPTIM, SDPA, DEFAULT_ATTENTION + ".txt")
COMPARE = ("compare.json", "compare/compare.json")  # as kept in docs/results/gpu/<run>/, as the phase writes it


def load(folder, name, reader):
    path = folder / name
    return reader(path) if path.exists() else None


def ratio_goal(compare, config, other, at_least):
    a, b = compare.get((config, "Tandem")), compare.get((config, other))
    if not a or not b:
        return f"not in compare.json ({config}: Tandem, {other})", None
    r = a["samples_per_second_median"] / b["samples_per_second_median"]
    return (f"{r:.2f}x {other} ({a['samples_per_second_median']:.0f} against {b['samples_per_second_median']:.0f} "
            f"samples/s)"), r >= at_least


def fastest_variant_goal(folder, compare, config, other, at_least):
    """The ratio for the compare phase's fastest eager variant as a graph step, or None without its files."""
    step, name = folder / f"compare_graph_{config}_fastest.txt", folder / f"compare_graph_{config}_fastest.variant"
    if not step.exists() or not name.exists():
        return None
    variant = name.read_text().strip() or "unnamed"
    rate, b = gpu_results.read_step(step, rate=True).get("bf16"), (compare or {}).get((config, other))
    label = f"{config} at least {at_least}x {other}, graph step with the fastest eager variant ({variant})"
    if not rate or not b:
        return label, f"no bf16 line in {step.name}" if not rate else f"not in compare.json ({config}: {other})", None
    r = rate / b["samples_per_second_median"]
    return label, f"{r:.2f}x {other} ({rate:.0f} against {b['samples_per_second_median']:.0f} samples/s)", r >= at_least


def step_goals(folder, compare):
    goals = []
    for config, targets in (("ag_news_small", (("PyTorch eager", 3.0),)),
                            ("ag_news_optimized", (("PyTorch eager", 1.5), ("PyTorch compile", 1.2)))):
        for other, at_least in targets:
            text, met = ratio_goal(compare, config, other, at_least) if compare else ("compare.json missing", None)
            goals.append((f"{config} at least {at_least}x {other}, graph step", text, met))
            fastest = fastest_variant_goal(folder, compare, config, other, at_least)
            if fastest:
                goals.append(fastest)
    # Peak memory: device bytes, the same way for both (compare.py), against every PyTorch mode of each config.
    if compare:
        worst = None
        for (config, impl), e in compare.items():
            t = compare.get((config, "Tandem"))
            if impl == "Tandem" or not t or not e.get("peak_device_bytes_median") or not t.get("peak_device_bytes_median"):
                continue
            r = t["peak_device_bytes_median"] / e["peak_device_bytes_median"]
            if worst is None or r > worst[0]:
                worst = (r, config, impl)
        if worst:
            goals.append(("peak memory no more than PyTorch's",
                          f"at most {worst[0]:.2f}x PyTorch's device peak ({worst[1]}, {worst[2]})", worst[0] <= 1.0))
        else:
            goals.append(("peak memory no more than PyTorch's", "no device peaks in compare.json", None))
    else:
        goals.append(("peak memory no more than PyTorch's", "compare.json missing", None))
    return goals


def imdb_goal(folder, compare):
    name = "imdb at least 30 % of the bf16 GEMM peak (model FLOPs)"
    # Where compare ran imdb too (COMPARE_CONFIGS), the same step's PyTorch rates: the yardstick.
    peers = "".join(f"; whole step {ratio_goal(compare, 'imdb', other, 0)[0]}" for other in ("PyTorch eager", "PyTorch compile")
                    if compare and ("imdb", other) in compare and ("imdb", "Tandem") in compare)
    ceilings = load(folder, KERNELS_RUNS[0], gpu_results.read_ceilings)
    rows = load(folder, CLASSIFIER, gpu_results.read_classifier)
    if not ceilings or rows is None:
        return name, f"{KERNELS_RUNS[0]}'s ceilings or {CLASSIFIER} missing", None
    for r in rows:
        if r["config"] == "imdb" and r["device"].startswith("cuda") and r["dtype"] == "bf16":
            peak = ceilings["bf16_gemm_tflops"]
            share = r["fb_gflops"] / 1e3 / peak
            return (name, f"{100 * share:.1f} % ({r['fb_gflops'] / 1e3:.1f} of {peak:.1f} TFLOP/s; forward + backward "
                          f"{r['fb_ms']:.2f} ms at {r['batch']} x {r['seq']}){peers}", share >= 0.30)
    return name, f"no imdb bf16 cuda row in {CLASSIFIER}", None


def memory_goals(folder):
    goals = []
    for f in KERNELS_RUNS:
        rows = load(folder, f, gpu_results.read_kernels)
        name = f"memory-bound kernels at least 80 % of copy ({f[:-4]})"
        if rows is None:
            goals.append((name, f"{f} missing", None))
            continue
        big = [r for r in rows if r["unit"] == "GB/s" and r["achieved"] * r["us"] * 1e3 >= MIN_BYTES]
        at = [r for r in big if r["percent"] >= 80]
        worst = min(big, key=lambda r: r["percent"]) if big else None
        text = f"{len(at)} of {len(big)} rows"
        if worst:
            text += f"; the lowest {worst['op']} {worst['dtype']} {worst['shape']} {worst['dir']} at {worst['percent']:.0f} %"
        goals.append((name, text, bool(big) and len(at) == len(big)))
    optim = load(folder, OPTIM, gpu_results.read_optim)
    adamw = sorted((r for r in optim or [] if r["optimizer"] == "adamw"), key=lambda r: -r["params"])
    if adamw:
        text = ", ".join(f"{r['percent']:.0f} % at {r['params'] / 1e6:.1f} M parameters" for r in adamw[:2])
        goals.append(("AdamW at least 85 % of copy", text, adamw[0]["percent"] >= 85))
    else:
        goals.append(("AdamW at least 85 % of copy", f"{OPTIM} missing or without AdamW rows", None))
    return goals


def attention_goals(folder):
    sdpa = load(folder, SDPA, gpu_results.read_attention)
    ours = {}
    for path in sorted(folder.glob("bench_attention_*.txt")):
        ours[path.stem] = gpu_results.read_attention(path)
    goals = []
    for batch in ("8", "64"):
        name = f"attention forward + backward at least as fast as SDPA, {batch} x 512 x 12 x 64"

        def at_shape(r):
            return (r["dtype"], r["batch"], r["seq"], r["heads"], r["head_dim"]) == ("bf16", batch, "512", "12", "64") \
                and float(r.get("dropout", "0")) == 0 and float(r.get("real", "1")) == 1

        peer = [r for r in sdpa or [] if at_shape(r)]
        if not peer:
            goals.append((name, f"{SDPA} missing or without this shape", None))
            continue
        p = peer[0]["fwd_ms"] + peer[0]["bwd_ms"]
        default = [r for r in ours.get(DEFAULT_ATTENTION, []) if at_shape(r)]
        candidates = [(r["fwd_ms"] + r["bwd_ms"], stem, r) for stem, rows in ours.items() for r in rows
                      if at_shape(r) and r.get("backend") == "tandem"]
        if not default and not candidates:
            goals.append((name, "no Tandem rows at this shape", None))
            continue
        parts = [f"SDPA {p:.3f} ms"]
        if default:
            d = default[0]["fwd_ms"] + default[0]["bwd_ms"]
            parts.append(f"default pair {d:.3f} ms ({d / p:.2f}x)")
        best = min(candidates, key=lambda c: c[0]) if candidates else None
        if best:
            parts.append(f"fastest {best[0]:.3f} ms ({best[0] / p:.2f}x: {best[2].get('fwd_kernel')} + "
                         f"{best[2].get('backward')}, {best[1]})")
        # The default pair decides; without its row, the fastest one can only say "not met".
        met = d <= p if default else (False if best and best[0] > p else None)
        goals.append((name, "; ".join(parts), met))
    return goals


def main():
    args = gpu_results.folder_arguments("gpu_goals", __doc__, "table")
    compare = next((c for c in (load(args.folder, f, gpu_results.read_compare) for f in COMPARE) if c), None)
    goals = step_goals(args.folder, compare) + [imdb_goal(args.folder, compare)] + memory_goals(args.folder) + \
        attention_goals(args.folder)
    if all(met is None for _, _, met in goals):
        sys.exit(f"gpu_goals: {args.folder} has none of the files the goals are read from")
    lines = [f"# Issue #15's goals: {args.folder}", "", "| goal | measured | |", "|---|---|---|"]
    lines += [f"| {g} | {text} | {'not measured' if met is None else 'met' if met else 'not met'} |"
              for g, text, met in goals]
    gpu_results.write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
