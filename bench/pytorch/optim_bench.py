"""PyTorch reference for bench/optim_bench.cc: the same parameter layouts, the same table.

    python3 bench/pytorch/optim_bench.py [--device cpu|cuda] [--params 1e5,1e6,1e7,1e8]
                                         [--impl fused,foreach] [--threads N] [--min-seconds T]

Times optimizer.step() of torch.optim.AdamW (lr 1e-4) over a 4-layer
encoder-shaped parameter list of about N parameters (width d = floor(sqrt(N/48)),
12 tensors per layer), fused=True and/or foreach=True, and reports GB/s
against the 28 bytes per parameter AdamW must move, as a percentage of the
measured bandwidth of a 1 GiB dst.copy_(src) on the same device (read + write
bytes). Each case runs 3 warm-up steps, then at least 5 timed steps and at
least --min-seconds; the median is reported. CUDA times come from CUDA events.
On the CPU, --threads sets torch's intra-op threads (default 1, to compare
with Tandem's single-threaded CPU loop).
"""
import argparse
import math
import statistics
import time

import torch


def timer(device):
    if device.type == "cuda":
        def run(f):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / 1e3
    else:
        def run(f):
            t0 = time.perf_counter()
            f()
            return time.perf_counter() - t0
    return run


def median_seconds(device, f, min_seconds):
    run = timer(device)
    for _ in range(3):
        run(f)
    times = []
    while len(times) < 5 or sum(times) < min_seconds:
        times.append(run(f))
    return statistics.median(times)


def copy_bandwidth(device, min_seconds):
    src = torch.ones(1 << 28, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    s = median_seconds(device, lambda: dst.copy_(src), min_seconds)
    return 2 * src.numel() * 4 / s


def encoder_shapes(n):
    d = int(math.floor(math.sqrt(n / 48.0)))
    per_layer = [(3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,)]
    return per_layer * 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--params", default="1e5,1e6,1e7,1e8")
    ap.add_argument("--impl", default="fused,foreach")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    ceiling = copy_bandwidth(device, args.min_seconds)
    print(f"device {device}: torch {torch.__version__}, copy bandwidth {ceiling / 1e9:.1f} GB/s (read + write)"
          + (f", {torch.get_num_threads()} thread(s)" if device.type == "cpu" else "") + "\n")
    print("| optimizer | params | tensors | MB moved/step | median ms | GB/s | % of copy |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    gen = torch.Generator(device=device).manual_seed(0)
    for target in (float(x) for x in args.params.split(",")):
        params = []
        for s in encoder_shapes(target):
            p = (torch.randn(s, generator=gen, device=device) * 0.02).requires_grad_(True)
            p.grad = torch.randn(s, generator=gen, device=device) * 1e-3
            params.append(p)
        count = sum(p.numel() for p in params)
        for impl in args.impl.split(","):
            opt = torch.optim.AdamW(params, lr=1e-4, **{impl: True})
            s = median_seconds(device, opt.step, args.min_seconds)
            moved = 28.0 * count
            print(f"| AdamW({impl}=True) | {count} | {len(params)} | {moved / 1e6:.1f} | {s * 1e3:.3f} | "
                  f"{moved / s / 1e9:.1f} | {100 * moved / s / ceiling:.0f}% |")
            del opt


if __name__ == "__main__":
    with torch.no_grad():
        main()
