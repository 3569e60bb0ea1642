#!/usr/bin/env python3
"""PyTorch side of bench/kernels_bench.cc: the same ops, sizes and byte counts, timed the same way.

Forward is the op's eager call; backward is torch.autograd.grad of the forward output with a fixed
gradient (retain_graph, so only the backward kernels run). CPU: median of >= 3 runs (~1 s) after a
warm-up, on --threads threads (default 1: Tandem's CPU reference is single-threaded). CUDA: CUDA
events around each run after 5 warm-ups, median of 50.

    python3 bench/pytorch/ops_bench.py [--device cpu|cuda|all] [--rows N] [--d-model D] [--threads N]

--rows and --d-model as in kernels_bench (rows: a multiple of the sequence, 128 on the CPU and 512 on
a GPU; d-model 768 by default, the feed-forward 4x that).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def time_cpu_ms(f):
    f()
    times, total = [], 0.0
    while len(times) < 3 or (total < 1000.0 and len(times) < 50):
        t0 = time.perf_counter()
        f()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        total += ms
    return statistics.median(times)


def time_cuda_ms(f, reps=50):
    for _ in range(5):
        f()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in events:
        a.record()
        f()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events)


def cases(device, dtype, rows, d):
    gpu = device.type == "cuda"
    es = torch.tensor([], dtype=dtype).element_size()
    seq = 512 if gpu else 128
    batch, ffn, vocab, classes = rows // seq, 4 * d, 30522, 4
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape, dt=dtype, grad=True):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dt).requires_grad_(grad)

    def fwd_bwd(name, shape, fwd, inputs, fwd_bytes, bwd_bytes):
        out = fwd()
        dy = torch.randn(out.shape, generator=g).to(device=device, dtype=out.dtype)
        yield name, shape, "fwd", fwd_bytes, 0.0, lambda: fwd()
        yield name, shape, "bwd", bwd_bytes, 0.0, lambda: torch.autograd.grad(out, inputs, dy, retain_graph=True)

    ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
    tok, pos = rand(vocab, d), rand(seq, d)
    yield from fwd_bwd("embedding", f"{batch}x{seq} V={vocab} D={d}", lambda: F.embedding(ids, tok) + pos,
                       (tok, pos), (2 * rows * d + seq * d) * es + rows * 8, (rows * d + vocab * d + seq * d) * es + rows * 8)
    # kernels_bench's padded row: the last 85 % of every sequence id 0; backward only.
    padded = ids.clone()
    padded[:, seq * 15 // 100:] = 0
    for case in fwd_bwd("embedding", f"{batch}x{seq} V={vocab} D={d} 85% id 0", lambda: F.embedding(padded, tok) + pos,
                        (tok, pos), 0, (rows * d + vocab * d + seq * d) * es + rows * 8):
        if case[2] == "bwd":
            yield case

    x, w, b = rand(rows, d), rand(d, dt=torch.float32), rand(d, dt=torch.float32)
    # PyTorch's layer_norm needs parameters of the input's dtype: cast them inside the timed op.
    yield from fwd_bwd("layer_norm", f"{rows}x{d}", lambda: F.layer_norm(x, (d,), w.to(dtype), b.to(dtype)),
                       (x, w, b), 2 * rows * d * es + 2 * d * 4 + rows * 8, 3 * rows * d * es + 4 * d * 4 + rows * 8)

    xf, bf = rand(rows, ffn), rand(ffn)
    n = rows * ffn
    for name, mode in (("gelu_erf", "none"), ("gelu_tanh", "tanh")):
        yield from fwd_bwd(name, f"{rows}x{ffn}", lambda mode=mode: F.gelu(xf, approximate=mode), (xf,),
                           2 * n * es, 3 * n * es)
    yield from fwd_bwd("bias_gelu_tanh", f"{rows}x{ffn}", lambda: F.gelu(xf + bf, approximate="tanh"), (xf, bf),
                       2 * n * es + ffn * es, 3 * n * es + 2 * ffn * es)

    xd, bd, rd = rand(rows, d), rand(d), rand(rows, d)
    n = rows * d
    yield from fwd_bwd("bias_dropout_add", f"{rows}x{d}", lambda: F.dropout(xd + bd, 0.1) + rd, (xd, bd, rd),
                       3 * n * es + d * es, 2 * n * es + d * es)
    yield from fwd_bwd("dropout", f"{rows}x{d}", lambda: F.dropout(xd, 0.1), (xd,), 2 * n * es, 2 * n * es)

    xp = rand(batch, seq, d)
    m = (torch.arange(seq) < seq * 9 // 10).to(device=device, dtype=dtype).expand(batch, seq).unsqueeze(-1)
    yield from fwd_bwd("masked_mean_pool", f"{batch}x{seq}x{d}", lambda: (xp * m).sum(1) / m.sum(1).clamp(min=1),
                       (xp,), 0.9 * rows * d * es + rows + batch * d * es, rows * d * es + rows + batch * d * es)

    for nr, c in ((batch, classes), (rows // 4, 1000)):
        z = rand(nr, c)
        labels = (torch.arange(nr) * 7 % c).to(device)
        yield from fwd_bwd("cross_entropy", f"{nr}x{c}", lambda z=z, labels=labels: F.cross_entropy(
            z, labels, label_smoothing=0.1), (z,), 2 * nr * c * es + nr * 12, 2 * nr * c * es)

    xl, wl, bl = rand(rows, d), rand(ffn, d), rand(ffn)
    mnk = rows * ffn * d
    out = F.linear(xl, wl, bl)
    dy = torch.randn(out.shape, generator=g).to(device=device, dtype=dtype)
    yield "linear", f"{rows}x{ffn}x{d}", "fwd", 0.0, 2.0 * mnk, lambda: F.linear(xl, wl, bl)
    yield "linear", f"{rows}x{ffn}x{d}", "bwd", 0.0, 4.0 * mnk, lambda: torch.autograd.grad(
        out, (xl, wl, bl), dy, retain_graph=True)


def run(device, rows, d, dtypes):
    gpu = device.type == "cuda"
    timer = time_cuda_ms if gpu else time_cpu_ms
    print(f"\n| device | op | dtype | shape | dir | time (us) | achieved |")
    print("|---|---|---|---|---|---:|---:|")
    for dtype in dtypes:
        for name, shape, direction, nbytes, flops, f in cases(device, dtype, rows, d):
            ms = timer(f)
            if flops:
                rate = flops / (ms * 1e9)
                achieved = f"{rate:.1f} TFLOP/s" if gpu else f"{rate * 1e3:.1f} GFLOP/s"
            else:
                achieved = f"{nbytes / (ms * 1e6):.1f} GB/s"
            dt = str(dtype).replace("torch.", "").replace("float32", "f32").replace("bfloat16", "bf16")
            print(f"| torch-{device.type} | {name} | {dt} | {shape} | {direction} | {ms * 1e3:.2f} | {achieved} |",
                  flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="all", choices=["cpu", "cuda", "all"])
    p.add_argument("--rows", type=int, default=0, help="tokens per batch (default: CPU 8192, CUDA 16384)")
    p.add_argument("--d-model", type=int, default=768, help="row width (the feed-forward is 4x)")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    if a.rows < 0 or a.d_model < 1 or a.threads < 1:
        p.error("--rows must be >= 0, --d-model and --threads >= 1")
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)")
    if a.device in ("cpu", "all"):
        run(torch.device("cpu"), a.rows or 8192, a.d_model, [torch.float32])
    if a.device in ("cuda", "all"):
        if torch.cuda.is_available():
            run(torch.device("cuda"), a.rows or 16384, a.d_model, [torch.float32, torch.bfloat16])
        else:
            print("\n(no CUDA device: CUDA not measured)")


if __name__ == "__main__":
    main()
