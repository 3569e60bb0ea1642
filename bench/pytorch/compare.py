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

    # issue 14's CPU comparison: both shapes, 1 and 2 ranks, interleaved and repeated
    python3 bench/pytorch/compare.py --config configs/ag_news_small.yaml --synthetic ag_news_small \
        --set ag_news_small:per_device_train_batch_size=32 --config configs/fortunes_demo.yaml \
        --nproc 1,2 --modes eager --repeats 3 --out /tmp/cmp

What differs: Tandem feeds batches through its DataLoader (worker threads, as configured);
the PyTorch twin indexes tensors already in memory. Threads: each framework's own default
unless --threads is given (PyTorch: all cores, or OMP_NUM_THREADS=1 per rank under torchrun
with several ranks; Tandem: the cores divided among the local ranks, core/thread_pool.h).
Every case runs --repeats times, Tandem and PyTorch interleaved, with the 1-minute load
average recorded before each run, and the medians are reported. With --synthetic NAME both
train on random full-length sequences (Tandem's `bench step --synthetic`; the same shape in
train_classifier.py). `--set data.padding=longest` (and `data.pad_to_multiple_of`,
`group_by_length=true`) reach both sides: export-data writes them to meta.json and the twin
cuts each batch to its longest row (and groups its order by length) as Tandem's loader does. Peak memory, the same way for both: each run's peak resident set of its
largest process (the command itself, or a rank it or its launcher waited for), from wait4; the
JSON also keeps each framework's own figure (Tandem: tensor bytes in use; PyTorch: RSS or CUDA
bytes allocated).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd, attempts=2, **kw):
    """Runs cmd; returns its output and the peak resident set, in bytes, of its largest process.

    wait4's ru_maxrss covers the process and every descendant it waited for (Linux), so the
    ranks that a launcher (tandem's, torchrun) starts and reaps are counted; it is in KiB.

    A run that fails is run once more before the comparison stops (attempts): one crash must not
    lose a whole comparison (a PyTorch 2.15 gloo rank aborted at exit in one of six two-rank runs on
    2026-12-04, after writing its result). Only failures are retried, never slow runs, and the
    retry is printed with the failure's output."""
    for attempt in range(1, attempts + 1):
        print("$", " ".join(cmd), flush=True)
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
        out = p.stdout.read()
        p.stdout.close()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        if p.returncode == 0:
            print(f"  ({time.time() - t0:.0f} s)", flush=True)
            return out, usage.ru_maxrss * 1024
        sys.stdout.write(out)
        if attempt < attempts:
            print(f"failed ({p.returncode}), running it once more: {' '.join(cmd)}", flush=True)
    raise SystemExit(f"failed ({p.returncode}) {attempts} times: {' '.join(cmd)}")


def torch_cmd(nproc, port, args):
    script = os.path.join(HERE, "train_classifier.py")
    if nproc == 1:
        return [sys.executable, script] + args
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port", str(port),
            script] + args


def data_format(config, sets):
    """The config's data.format: the last --set data.format=..., else the `format:` key of its `data:` block
    (the configs are plain block YAML, and PyYAML is not a dependency), else ag_news."""
    for i in range(len(sets) - 1, 0, -1):
        if sets[i - 1] == "--set" and sets[i].startswith("data.format="):
            return sets[i].split("=", 1)[1]
    in_data = False
    with open(config) as f:
        for line in f:
            if re.match(r"^data:\s*(#.*)?$", line):
                in_data = True
            elif in_data and re.match(r"^\S", line):
                break
            elif in_data and (m := re.match(r"^\s+format:\s*([\w-]+)", line)):
                return m.group(1)
    return "ag_news"


def standin_data(folder, fmt):
    """A few texts in the config's data format (AG News CSV, or aclImdb's folders): only for export-data's
    meta.json (classes, sequence length) when the data is synthetic. Returns the --set overrides."""
    if fmt == "ag_news":
        os.makedirs(folder, exist_ok=True)
        for split in ("train", "test"):
            with open(os.path.join(folder, f"{split}.csv"), "w") as f:
                for i in range(8):
                    f.write(f'"{i % 4 + 1}","stand-in title {i}","stand-in text number {i} for the tokenizer"\n')
        return ["--set", f"data.train_path={folder}/train.csv", "--set", f"data.test_path={folder}/test.csv"]
    if fmt == "imdb":
        for split in ("train", "test"):
            for label in ("pos", "neg"):
                os.makedirs(os.path.join(folder, split, label), exist_ok=True)
                for i in range(4):
                    with open(os.path.join(folder, split, label, f"{i}_{7 if label == 'pos' else 2}.txt"), "w") as f:
                        f.write(f"stand-in {label} review number {i} for the tokenizer\n")
        return ["--set", f"data.train_path={folder}", "--set", f"data.test_path={folder}"]
    raise SystemExit(f"compare: --synthetic needs stand-in data in the config's format, and data.format {fmt} "
                     "has none here (ag_news, imdb)")


def load_1min():
    return os.getloadavg()[0]


def measure_tandem(args, config, nproc, work, sets, precision, synthetic):
    out = os.path.join(work, f"tandem_{nproc}ranks")
    load = load_1min()
    _, rss = run([args.tandem, "bench", "step", "--config", config, "--nproc", str(nproc), "--precisions", precision,
                  "--warmup", str(args.warmup), "--steps", str(args.steps), "--rounds", "1", "--out", out] + sets +
                 (["--synthetic"] if synthetic else []))
    t = json.load(open(os.path.join(out, "step.json")))["cases"][0]
    return {"framework": "tandem", "mode": "-", "samples_per_second": t["samples_per_second"],
            "step_ms_median": t["median"]["step_ms"], "step_ms_p10": t["step_ms"]["p10"],
            "step_ms_p90": t["step_ms"]["p90"], "peak_memory_bytes": t["peak_memory_bytes"],
            "device": t["facts"]["device"], "num_parameters": t["facts"]["num_parameters"],
            "vocab_size": t["facts"]["vocab_size"], "train_examples": t["facts"]["train_examples"],
            "peak_rss_bytes": rss, "load_1min_before": load}


def measure_torch(args, nproc, mode, data, work, synthetic_spec):
    out = os.path.join(work, f"pytorch_{mode}_{nproc}ranks.json")
    load = load_1min()
    extra = ["--threads", str(args.threads)] if args.threads else []
    if synthetic_spec:
        extra += ["--synthetic", synthetic_spec]
    _, rss = run(torch_cmd(nproc, args.port, ["--data", data, "--mode", mode, "--warmup", str(args.warmup),
                                              "--steps", str(args.steps), "--out", out] + extra))
    r = json.load(open(out))
    r["peak_rss_bytes"] = rss
    r["load_1min_before"] = load
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", action="append", required=True, help="a Tandem YAML config (repeatable)")
    ap.add_argument("--set", action="append", default=[],
                    help="override: key=value for every config, NAME:key=value for the config NAME.yaml only")
    ap.add_argument("--synthetic", action="append", default=[], metavar="NAME",
                    help="train this config (file name without .yaml) on synthetic full-length sequences; its "
                         "data format must be ag_news or imdb (stand-in files give meta.json) (repeatable)")
    ap.add_argument("--nproc", default="1", help="ranks on this machine, or a list: 1,2")
    ap.add_argument("--modes", default="eager,compile", help="PyTorch modes: eager, compile")
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure every case this many times, Tandem and PyTorch interleaved; report medians")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0,
                    help="PyTorch CPU threads per rank; 0 (default): each framework's own default")
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "apps", "tandem"), help="the tandem binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--port", type=int, default=29731)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    nprocs = [int(n) for n in str(args.nproc).split(",")]

    def sets_for(name):
        out = []
        for s in args.set:
            target, colon, rest = s.partition(":")
            if colon and "=" not in target:
                if target == name:
                    out += ["--set", rest]
            else:
                out += ["--set", s]
        return out
    cases = []  # (name, config, sets, data, precision, synthetic)
    shapes = {}  # name -> the data column: real or synthetic, and the padding
    for config in args.config:
        name = os.path.splitext(os.path.basename(config))[0]
        work = os.path.join(args.out, name)
        data = os.path.join(work, "data")
        synthetic = name in args.synthetic
        sets = sets_for(name)
        csets = sets + (standin_data(os.path.join(work, "standin"), data_format(config, sets)) if synthetic else [])
        run([args.tandem, "bench", "export-data", "--config", config, "--out", data] + csets)
        meta = json.load(open(os.path.join(data, "meta.json")))
        precision = "bf16" if meta["training"]["bf16"] else ("fp16" if meta["training"]["fp16"] else "fp32")
        tm = meta["training"]
        shape = ("synthetic" if synthetic else "real") + (
            f", longest/{tm['pad_to_multiple_of']}" if tm.get("padding") == "longest" else "") + (
            ", grouped by length" if tm.get("group_by_length") else "")
        shapes[name] = shape
        cases.append((name, config, sets, data, precision, synthetic, work))
    samples = {}  # (config, nproc, impl) -> list of results
    for rep in range(args.repeats):
        for name, config, csets, data, precision, synthetic, work in cases:
            for nproc in nprocs:
                t = measure_tandem(args, config, nproc, work, csets, precision, synthetic)
                samples.setdefault((name, nproc, "Tandem", precision), []).append(t)
                spec = f"{t['vocab_size']},{t['train_examples']}" if synthetic else None
                for mode in args.modes.split(","):
                    r = measure_torch(args, nproc, mode, data, work, spec)
                    samples.setdefault((name, nproc, f"PyTorch {mode}", precision), []).append(r)
                print(f"repeat {rep + 1}/{args.repeats} {name} {nproc} ranks: " + ", ".join(
                    f"{impl} {v[-1]['samples_per_second']:.1f}" for (n, p, impl, _), v in samples.items()
                    if n == name and p == nproc), flush=True)
    rows = []
    for (name, nproc, impl, precision), results in samples.items():
        sps = [r["samples_per_second"] for r in results]
        med = statistics.median(sps)
        tandem_med = statistics.median(r["samples_per_second"] for r in samples[(name, nproc, "Tandem", precision)])
        rows.append({"config": name, "nproc": nproc, "precision": precision, "implementation": impl,
                     "synthetic_data": name in args.synthetic, "data": shapes[name],
                     "samples_per_second_median": med,
                     "samples_per_second_all": sps,
                     "step_ms_median": statistics.median(r["step_ms_median"] for r in results),
                     "peak_rss_bytes_median": statistics.median(r["peak_rss_bytes"] for r in results),
                     # On a GPU, each side's own count of device memory (Tandem's pool and graphs;
                     # torch.cuda.max_memory_allocated): what RSS cannot see.
                     "peak_device_bytes_median": (statistics.median(r["peak_memory_bytes"] for r in results)
                                                  if all(r.get("device") == "cuda" for r in results) else None),
                     "threads_per_rank": results[0].get("threads_per_rank"),
                     "load_1min_before": [r["load_1min_before"] for r in results],
                     "tandem_speedup": tandem_med / med if med else None, "runs": results})
    lines = ["| config | data | ranks | implementation | samples/s (median) | all repeats | step ms | "
             "peak RSS MB (largest process) | peak device MiB | load before each | Tandem ÷ this |",
             "|---|---|---:|---|---:|---|---:|---:|---:|---|---:|"]
    for r in rows:
        dev = r["peak_device_bytes_median"]
        lines.append(f"| {r['config']} | {r['data']} | {r['nproc']} | "
                     f"{r['implementation']} | {r['samples_per_second_median']:.1f} | "
                     f"{', '.join(f'{x:.0f}' for x in r['samples_per_second_all'])} | {r['step_ms_median']:.1f} | "
                     f"{r['peak_rss_bytes_median'] / 2**20:.0f} | {'-' if dev is None else f'{dev / 2**20:.1f}'} | "
                     f"{', '.join(f'{x:.1f}' for x in r['load_1min_before'])} | {r['tandem_speedup']:.2f} |")
    table = "\n".join(lines)
    print("\n" + table)
    with open(os.path.join(args.out, "compare.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
