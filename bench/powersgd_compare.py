"""PowerSGD against the plain all-reduce on one config, same seed, same ranks.

Runs `tandem launch --nproc-per-node N -- tandem train` once per hook setting and
writes, per run: test accuracy, macro-F1, test loss, gradient elements handed to
the hook and elements sent (results.json's comm_hook_elements; for the plain
all-reduce both are the elements of every synchronised step), and training
time. Not run in CI.

  python3 bench/powersgd_compare.py --config configs/fortunes_demo.yaml --ranks 2 \
      --start-iter 100 --ranks-to-try 1 4 --json docs/results/powersgd_cpu.json
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run(args, out_dir, sets):
    cmd = [args.tandem, "launch", "--nproc-per-node", str(args.ranks), "--", args.tandem, "train", "--config",
           args.config, "--quiet", "--set", f"output_dir={out_dir}", "--set", "save_steps=0"]
    for s in sets:
        cmd += ["--set", s]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    r = json.load(open(os.path.join(out_dir, "results.json")))
    row = {"accuracy": r["eval_accuracy"], "macro_f1": r["eval_macro_f1"], "test_loss": r["eval_loss"],
           "steps": r["steps"], "train_seconds": r["train_seconds"], "wall_seconds": wall,
           "samples_per_second": r["samples_per_second"]}
    if "comm_hook_elements" in r:
        row["elements_before"] = r["comm_hook_elements"]["before"]
        row["elements_sent"] = r["comm_hook_elements"]["sent"]
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tandem", default="build/apps/tandem")
    p.add_argument("--config", default="configs/fortunes_demo.yaml")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--start-iter", type=int, default=100)
    p.add_argument("--ranks-to-try", type=int, nargs="+", default=[1, 4])
    p.add_argument("--json", required=True)
    args = p.parse_args()
    runs = {}
    with tempfile.TemporaryDirectory(prefix="tandem_powersgd_") as work:
        runs["allreduce"] = run(args, os.path.join(work, "plain"), [])
        for r in args.ranks_to_try:
            runs[f"powersgd_rank{r}"] = run(args, os.path.join(work, f"p{r}"), [
                "ddp_comm_hook=powersgd", f"powersgd_rank={r}", f"powersgd_start_iter={args.start_iter}"])
            print(json.dumps({f"powersgd_rank{r}": runs[f"powersgd_rank{r}"]}), flush=True)
    report = {"config": args.config, "ranks": args.ranks, "start_iter": args.start_iter, "command": " ".join(sys.argv),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": runs}
    tmp = args.json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(tmp, args.json)
    print("| hook | accuracy | macro-F1 | test loss | elements sent / handed | time (s) |\n|---|---:|---:|---:|---:|---:|")
    for name, r in runs.items():
        ratio = f"{r['elements_sent'] / r['elements_before']:.4f}" if "elements_sent" in r else "1 (all)"
        print(f"| {name} | {r['accuracy']:.4f} | {r['macro_f1']:.4f} | {r['test_loss']:.4f} | {ratio} | "
              f"{r['train_seconds']:.1f} |")


if __name__ == "__main__":
    main()
