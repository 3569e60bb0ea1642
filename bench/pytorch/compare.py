#!/usr/bin/env python3
"""Tandem against PyTorch (eager and torch.compile) on the same config, data and ranks.

For each config: `tandem bench export-data` tokenizes the data once (so PyTorch trains on Tandem's
token ids), `tandem bench step` times Tandem's training step in the config's precision, and
train_classifier.py times the PyTorch twin (under torchrun for several ranks: gloo on CPU, nccl on
GPUs), eager and compiled. Prints samples/s, step time, peak memory and the ratios, and writes
OUT/compare.json and OUT/compare.md.

    python3 bench/pytorch/compare.py --config configs/fortunes_demo.yaml --nproc 2 --out /tmp/cmp
    # on a GPU machine (the AG News CSVs under data/ag_news/):
    python3 bench/pytorch/compare.py --config configs/ag_news_small.yaml --config configs/ag_news_optimized.yaml \
        --nproc 1 --out /tmp/cmp

What differs: Tandem feeds batches through its DataLoader (worker threads, as configured);
the PyTorch twin indexes tensors already in memory. On the CPU both use one thread per rank
(--threads). CPU peak memory is not comparable (Tandem: tensor bytes; PyTorch: process RSS).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, **kw):
    print("$", " ".join(cmd), flush=True)
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}")
    print(f"  ({time.time() - t0:.0f} s)", flush=True)
    return r.stdout


def torch_cmd(nproc, port, args):
    script = os.path.join(HERE, "train_classifier.py")
    if nproc == 1:
        return [sys.executable, script] + args
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port", str(port),
            script] + args


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", required=True, help="a Tandem YAML config (repeatable)")
    ap.add_argument("--set", action="append", default=[], help="override for every config: key=value")
    ap.add_argument("--nproc", type=int, default=1, help="ranks on this machine")
    ap.add_argument("--modes", default="eager,compile", help="PyTorch modes: eager, compile")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="PyTorch CPU threads per rank")
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "apps", "tandem"), help="the tandem binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29731)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    sets = [x for s in args.set for x in ("--set", s)]
    rows = []
    for config in args.config:
        name = os.path.splitext(os.path.basename(config))[0]
        work = os.path.join(args.out, name)
        data = os.path.join(work, "data")
        run([args.tandem, "bench", "export-data", "--config", config, "--out", data] + sets)
        meta = json.load(open(os.path.join(data, "meta.json")))
        precision = "bf16" if meta["training"]["bf16"] else ("fp16" if meta["training"]["fp16"] else "fp32")
        run([args.tandem, "bench", "step", "--config", config, "--nproc", str(args.nproc), "--precisions", precision,
             "--warmup", str(args.warmup), "--steps", str(args.steps), "--rounds", "1", "--out", work] + sets)
        t = json.load(open(os.path.join(work, "step.json")))["cases"][0]
        tandem = {"framework": "tandem", "mode": "-", "samples_per_second": t["samples_per_second"],
                  "step_ms_median": t["median"]["step_ms"], "step_ms_p10": t["step_ms"]["p10"],
                  "step_ms_p90": t["step_ms"]["p90"], "peak_memory_bytes": t["peak_memory_bytes"],
                  "device": t["facts"]["device"], "num_parameters": t["facts"]["num_parameters"]}
        results = [tandem]
        for mode in args.modes.split(","):
            out = os.path.join(work, f"pytorch_{mode}.json")
            run(torch_cmd(args.nproc, args.port, ["--data", data, "--mode", mode, "--warmup", str(args.warmup),
                                                  "--steps", str(args.steps), "--threads", str(args.threads),
                                                  "--out", out]))
            results.append(json.load(open(out)))
        for r in results:
            rows.append({"config": name, "nproc": args.nproc, "precision": precision, **r,
                         "tandem_speedup": tandem["samples_per_second"] and r["samples_per_second"] and
                         tandem["samples_per_second"] / r["samples_per_second"]})
    lines = ["| config | ranks | precision | implementation | samples/s | step ms (p10-p90) | peak MiB | "
             "Tandem samples/s ÷ this |", "|---|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        impl = "Tandem" if r["framework"] == "tandem" else f"PyTorch {r['mode']}"
        lines.append(f"| {r['config']} | {r['nproc']} | {r['precision']} | {impl} | {r['samples_per_second']:.1f} | "
                     f"{r['step_ms_median']:.1f} ({r['step_ms_p10']:.1f}-{r['step_ms_p90']:.1f}) | "
                     f"{r['peak_memory_bytes'] / 2**20:.1f} | {r['tandem_speedup']:.2f} |")
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
