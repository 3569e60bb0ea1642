#!/usr/bin/env python3
"""What a GPU check's rows say about each switch against the default it would replace.

    tools/gpu_verdicts.py DIR [--out FILE]

DIR is a GPU check's results folder (gpu-check.tar.gz unpacked, or docs/results/gpu/<run>/). For each
comparison the bench and compare phases set up (PAIRS below, in tools/gpu-check.sh's file names; the
compare phase's eager variants are found by name), it matches the rows of the two files (an op, dtype,
shape and direction; an attention shape; a precision) and prints the default's time, the switch's,
and their ratio (the switch's time over the default's: below 1 is faster), then one line: faster in k
of n rows, and the geometric mean of the ratios. A comparison whose files are missing (a phase cut or
not run, or a run before the switch existed) says so. The comparisons are those of today's
tools/gpu-check.sh: in a run made before a default changed, a row may hold other kernels than its
name says (docs/device.md says when each default changed). It decides nothing: docs/device.md says what
each switch needs to become the default (often the same bits, faster in every row); this is the
table to read that from, made the same way for every run.
"""
import math
import sys

import gpu_results


def read_kernel_times(path):
    return {(r["op"], r["dtype"], r["shape"], r["dir"]): r["us"] for r in gpu_results.read_kernels(path)}


def read_attention_times(path):
    return {gpu_results.attention_key(r): r for r in gpu_results.read_attention(path)}


def kernels(name, opt, default, ops):
    """A kernels_bench comparison; ops: (the switch's op, the default's op) pairs, or op names for both."""
    return ("kernels", name, opt, default, [o if isinstance(o, tuple) else (o, o) for o in ops])


def attention(name, opt, default, cols=("fwd_ms", "bwd_ms")):
    return ("attention", name, opt, default, cols)


def step(name, opt, default):
    return ("step", name, opt, default, None)


A = "bench_attention_"
PAIRS = [
    # The forward's grid tiles first (the backward columns run the same kernels).
    *[attention(f"TANDEM_ATTENTION_BLOCK_ORDER=tiles_first ({k})", f"{A}{k}_tiles_first", f"{A}{k}", ("fwd_ms",))
      for k in ("bf16", "bf16_split_pipelined", "bf16_wide", "bf16_dropout_fused")],
    attention("TANDEM_ATTENTION_FUSED_CHUNKS=waves (fused, dropout 0.1)", f"{A}bf16_dropout_fused_waves",
              f"{A}bf16_dropout_fused", ("bwd_ms",)),
    # The backward paths against the one auto picks: split_pipelined without dropout (16 bits), fused with.
    *[attention(f"{path} backward against split_pipelined (bf16)", f"{A}{file}", f"{A}bf16_split_pipelined", ("bwd_ms",))
      for path, file in (("split", "bf16"), ("fused", "bf16_pipelined_fused"), ("fused_ordered", "bf16_fused_ordered"),
                         ("fused_ordered_pipelined", "bf16_fused_ordered_pipelined"))],
    *[attention(f"{path} backward against fused (bf16, dropout 0.1)", f"{A}bf16_dropout_{path}", f"{A}bf16_dropout_fused",
                ("bwd_ms",)) for path in ("split", "split_pipelined", "fused_ordered", "fused_ordered_pipelined")],
    attention("fused backward against split (f32)", f"{A}f32_fused", f"{A}f32", ("bwd_ms",)),
    attention("pipelined_wide forward against pipelined (bf16)", f"{A}bf16_wide", f"{A}bf16_pipelined_fused",
              ("fwd_ms",)),
    # Dropout's keep bits saved by the forward, and the philox7x16 rule, against recomputing philox10x8.
    *[attention(f"TANDEM_ATTENTION_DROPOUT_KEEP=saved ({k}, dropout 0.1)", f"{A}bf16_dropout_{k}_saved",
                f"{A}bf16_dropout_{k}") for k in ("split", "split_pipelined", "fused")],
    *[attention(f"TANDEM_ATTENTION_DROPOUT_RNG=philox7x16 ({k}, dropout 0.1)", f"{A}bf16_dropout_{k}_philox7",
                f"{A}bf16_dropout_{k}") for k in ("split", "split_pipelined", "fused")],
    attention("TANDEM_ATTENTION_DROPOUT_RNG=philox7x16 (split_pipelined, saved bits, dropout 0.1)",
              f"{A}bf16_dropout_split_pipelined_saved_philox7", f"{A}bf16_dropout_split_pipelined_saved"),
    # More blocks per SM at head dim 32 (only the 8 x 512 x 16 x 32 row runs other kernels).
    attention("TANDEM_ATTENTION_OCCUPANCY=high (split_pipelined)", f"{A}bf16_split_pipelined_high",
              f"{A}bf16_split_pipelined"),
    attention("TANDEM_ATTENTION_OCCUPANCY=high (fused, dropout 0.1)", f"{A}bf16_dropout_fused_high",
              f"{A}bf16_dropout_fused"),
    attention("TANDEM_ATTENTION_OCCUPANCY=high (split_pipelined, saved bits, dropout 0.1)",
              f"{A}bf16_dropout_split_pipelined_saved_high", f"{A}bf16_dropout_split_pipelined_saved"),
    # Padded rows (25 % real): trimmed key tiles against every tile; cuDNN, the peer, against every tile.
    attention("TANDEM_ATTENTION_KEY_TILES=trimmed (25 % real)", f"{A}padded_trimmed", f"{A}padded_all"),
    attention("TANDEM_ATTENTION_KEY_TILES=trimmed (25 % real, dropout 0.1)", f"{A}padded_dropout_trimmed",
              f"{A}padded_dropout_all"),
    attention("cuDNN (peer) against Tandem's every-tile kernels (25 % real)", f"{A}padded_cudnn", f"{A}padded_all"),
    attention("cuDNN (peer) against Tandem's split_pipelined (bf16)", f"{A}cudnn", f"{A}bf16_split_pipelined"),
    # The row kernels' switches, against the default run at the same shape: one comparison per switch,
    # though a run sets several (each reaches other ops).
    *[kernels(f"{switch} (32768 x 256)", "bench_kernels_rows_32768_block_slots", "bench_kernels_training", ops)
      for switch, ops in (("TANDEM_LAYER_NORM=lanes", ["layer_norm", "bias_dropout_add_layer_norm_fused"]),
                          ("TANDEM_COLUMN_SUM=block", ["bias_gelu_tanh", "bias_gelu_dropout_fused", "bias_dropout_add",
                                                       "linear"]))],
    *[kernels(f"{switch} ({shape})", f"bench_kernels_rows_{rows}_opt_in", default, [op])
      for rows, shape, default in (("16384", "16384 x 768", "bench_kernels_bench"),
                                   ("32768", "32768 x 256", "bench_kernels_training"))
      for switch, op in (("TANDEM_LAYER_NORM=multi_row", "layer_norm"), ("TANDEM_MASKED_MEAN=lane_groups", "masked_mean_pool"),
                         ("TANDEM_DROPOUT_BACKWARD=batched", "dropout"), ("TANDEM_EMBEDDING_BACKWARD=pieces", "embedding"))],
    kernels("TANDEM_BIAS_GRADIENT=gemm: GELU + dropout backward without the bias gradient (32768 x 256)",
            "bench_kernels_rows_32768_bias_gemm", "bench_kernels_training",
            [("bias_gelu_dropout_fused_no_db", "bias_gelu_dropout_fused"),
             ("bias_gelu_dropout_fused_saved_no_db", "bias_gelu_dropout_fused_saved")]),
    kernels("TANDEM_DROPOUT_KEEP=saved: fused GELU + dropout (32768 x 256)", "bench_kernels_training",
            "bench_kernels_training", [("bias_gelu_dropout_fused_saved", "bias_gelu_dropout_fused")]),
    kernels("the linear's bias gradient in dw's GEMM (BGRADB) against linear (32768 x 256)", "bench_kernels_training",
            "bench_kernels_training", [("linear_db_in_gemm", "linear")]),
    kernels("TANDEM_LINEAR_GRADIENTS=master: dw and db in f32 against linear (32768 x 256)", "bench_kernels_training",
            "bench_kernels_training", [("linear_master_grads", "linear")]),
    *[kernels(f"TANDEM_CUBLASLT_EPILOGUES={lt} against the default (forward)", f"bench_kernels_lt{lt}",
              "bench_kernels_bench", ["linear"]) for lt in ("1", "0")],
    # Whole steps.
    step("cuda_graph=true against eager (fortunes_demo)", "bench_step_graph_true", "bench_step_graph_false"),
    step("TANDEM_PARAMETER_CASTS=batched (fortunes_demo, graph)", "bench_step_graph_batched_casts",
         "bench_step_graph_true"),
    *[step(f"TANDEM_ATTENTION_KEY_TILES=trimmed (ag_news_optimized, 25 % real, cuda_graph={g})",
           f"bench_step_padded_trimmed_graph_{g}", f"bench_step_padded_all_graph_{g}") for g in ("false", "true")],
    *[step(f"data.padding=longest (ag_news_optimized, 25 % real, cuda_graph={g})",
           f"bench_step_padded_longest_graph_{g}", f"bench_step_padded_all_graph_{g}") for g in ("false", "true")],
]


def rows_of(kind, path):
    return {"kernels": read_kernel_times, "attention": read_attention_times, "step": gpu_results.read_step}[kind](path)


def compare_pairs(folder):
    """The compare phase's eager variants, each against its config's default run."""
    out = []
    for f in sorted(folder.glob("compare_eager_*_default.txt")):
        config = f.name[len("compare_eager_"):-len("_default.txt")]
        for v in sorted(folder.glob(f"compare_eager_{config}_*.txt")):
            variant = v.name[len(f"compare_eager_{config}_"):-len(".txt")]
            if variant != "default":
                out.append(step(f"compare's {variant} variant ({config}, eager)", v.stem, f.stem))
    return out


def verdict(ratios):
    if not ratios:
        return "no rows in common"
    faster = sum(r < 1 for r in ratios)
    mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    return f"faster in {faster} of {len(ratios)} rows, geometric mean {mean:.3f}x the time"


def compare(folder, pair):
    """(table lines, summary line) for one comparison."""
    kind, name, opt, default, spec = pair
    paths = [folder / f"{f}.txt" for f in (opt, default)]
    missing = [p.name for p in paths if not p.exists()]
    if missing:
        return [], f"{name}: not run ({', '.join(missing)} missing)"
    a, b = (rows_of(kind, p) for p in paths)
    lines, ratios = [], []
    if kind == "kernels":
        lines += ["| op | dtype | shape | dir | default us | switch us | ratio |", "|---|---|---|---|---:|---:|---:|"]
        for opt_op, def_op in spec:
            for (op, dtype, shape, d), t in sorted(b.items()):
                s = a.get((opt_op, dtype, shape, d)) if op == def_op else None
                if s is not None and t > 0:
                    ratios.append(s / t)
                    label = opt_op if opt_op == def_op else f"{opt_op} / {def_op}"
                    lines.append(f"| {label} | {dtype} | {shape} | {d} | {t:.2f} | {s:.2f} | {s / t:.3f} |")
    elif kind == "attention":
        lines += ["| dtype | B x S x H x Dh | dropout | real | pass | default ms | switch ms | ratio |",
                  "|---|---|---|---|---|---:|---:|---:|"]
        for key, t in b.items():
            if key not in a:
                continue
            dtype, batch, seq, heads, dh, dropout, real = key
            for col in spec:
                if col in t and col in a[key] and t[col] > 0:
                    ratios.append(a[key][col] / t[col])
                    lines.append(f"| {dtype} | {batch} x {seq} x {heads} x {dh} | {dropout} | {real} | {col[:3]} | "
                                 f"{t[col]:.3f} | {a[key][col]:.3f} | {a[key][col] / t[col]:.3f} |")
    else:
        lines += ["| precision | default step ms | switch step ms | ratio |", "|---|---:|---:|---:|"]
        for p, t in b.items():
            if p in a and t > 0:
                ratios.append(a[p] / t)
                lines.append(f"| {p} | {t:.2f} | {a[p]:.2f} | {a[p] / t:.3f} |")
    return lines, f"{name}: {verdict(ratios)}"


def main():
    args = gpu_results.folder_arguments("gpu_verdicts", __doc__, "report")
    results = [compare(args.folder, p) for p in PAIRS + compare_pairs(args.folder)]
    ran = [r for r in results if r[0]]
    if not ran:
        sys.exit(f"gpu_verdicts: {args.folder} has none of the bench or compare files these comparisons read")
    text = [f"# Switches against the defaults: {args.folder}", "",
            "Ratio: the switch's time over the default's (below 1 is faster).", ""]
    text += [f"- {s}" for _, s in results]
    for lines, s in ran:
        text += ["", f"## {s}", ""] + lines
    gpu_results.write_report("\n".join(text) + "\n", args.out)


if __name__ == "__main__":
    main()
