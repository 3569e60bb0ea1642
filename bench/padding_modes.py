#!/usr/bin/env python3
r"""What padding to each batch's longest text and grouping by length do to a real training run:
time, the rows' mean length, accuracy and macro-F1, over several seeds, for each variant.

Variants (each `tandem train` with the config and these --set overrides):
  max_length  every row model.max_seq_len long (the default);
  longest     data.padding=longest (each batch cut to its longest text);
  grouped     data.padding=longest and group_by_length=true (Hugging Face's group_by_length:
              batches of similar length, data/length_grouping.h).
The runs go seed by seed, the variants interleaved, so that a change in the machine's load
touches all of them alike; the 1-minute load average before each run is kept. Accuracy and
macro-F1 are the final evaluation's (results.json), train time its train_seconds, and the mean
row length the mean of metrics.jsonl's mean_padded_length over the logging windows.

    python3 bench/padding_modes.py --config configs/fortunes_demo.yaml --seeds 1 2 3 4 5 \
        --json docs/results/padding/fortunes_demo.json

Needs only Python's standard library and a built `tandem`. Not run in CI.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = {
    "max_length": [],
    "longest": ["data.padding=longest"],
    "grouped": ["data.padding=longest", "group_by_length=true"],
}


def train(tandem, config, sets, out):
    cmd = [tandem, "train", "--config", config, "--quiet", "--set", f"output_dir={out}"]
    for s in sets:
        cmd += ["--set", s]
    load = os.getloadavg()[0]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    res = json.load(open(os.path.join(out, "results.json")))
    lengths = [json.loads(line)["mean_padded_length"] for line in open(os.path.join(out, "metrics.jsonl"))
               if '"kind":"train"' in line.replace(" ", "")]
    return {"accuracy": res["eval_accuracy"], "macro_f1": res["eval_macro_f1"], "train_seconds": res["train_seconds"],
            "mean_padded_length": statistics.mean(lengths), "load_1min_before": load}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--set", action="append", default=[], help="an override for every variant")
    ap.add_argument("--tandem", default=os.path.join(ROOT, "build", "apps", "tandem"))
    ap.add_argument("--json", help="write every run and the summary here")
    args = ap.parse_args()
    runs = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory() as work:
        for seed in args.seeds:
            for name, sets in VARIANTS.items():
                r = train(args.tandem, args.config, args.set + sets + [f"seed={seed}"],
                          os.path.join(work, f"{name}_{seed}"))
                r["seed"] = seed
                runs[name].append(r)
                print(f"seed {seed} {name}: accuracy {r['accuracy']:.4f} macro-F1 {r['macro_f1']:.4f} "
                      f"{r['train_seconds']:.1f} s, mean row {r['mean_padded_length']:.1f}", flush=True)
    lines = ["| variant | train s (median) | mean row length | accuracy (mean) | macro-F1 (mean) | accuracy per seed |",
             "|---|---:|---:|---:|---:|---|"]
    summary = {}
    for name, rs in runs.items():
        s = {"train_seconds_median": statistics.median(r["train_seconds"] for r in rs),
             "mean_padded_length": statistics.mean(r["mean_padded_length"] for r in rs),
             "accuracy_mean": statistics.mean(r["accuracy"] for r in rs),
             "macro_f1_mean": statistics.mean(r["macro_f1"] for r in rs)}
        summary[name] = s
        lines.append(f"| {name} | {s['train_seconds_median']:.1f} | {s['mean_padded_length']:.1f} | "
                     f"{s['accuracy_mean']:.4f} | {s['macro_f1_mean']:.4f} | "
                     f"{', '.join(format(r['accuracy'], '.3f') for r in rs)} |")
    print("\n" + "\n".join(lines))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "config": args.config, "sets": args.set, "seeds": args.seeds,
                       "summary": summary, "runs": runs}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
