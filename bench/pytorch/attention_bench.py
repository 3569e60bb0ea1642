"""PyTorch's F.scaled_dot_product_attention timed like bench/attention_bench.cc,
for a side-by-side with Tandem's fused kernels.

Same sizes, same packed qkv [B, S, 3*H*Dh] (q|k|v, then heads), no padding
unless --real-fraction F < 1 (then every row's first ceil(F * S) keys are real
and the rest masked, as attention_bench.cc's option: SDPA gets a boolean
attn_mask, which rules out its flash kernel), same FLOP accounting (forward
4*B*H*S^2*Dh, backward 2.5x, the dense work), same table. The
backward is torch.autograd.grad of the output w.r.t. qkv (including the copy
that unpacks the heads, which Tandem's kernels fuse).

Run: python3 bench/pytorch/attention_bench.py [--device cuda|cpu] [--dtype bf16|f16|f32] [--real-fraction F]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def time_per_call(fn, device, min_seconds):
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        calls, ms = 0, 0.0
        while calls < 3 or ms < 1e3 * min_seconds:
            start.record()
            for _ in range(10):
                fn()
            stop.record()
            stop.synchronize()
            ms += start.elapsed_time(stop)
            calls += 10
        return ms / 1e3 / calls
    t0, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - t0 < min_seconds:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls


def run(args, b, s, h, dh):
    dtype = DTYPES[args.dtype]
    qkv = torch.randn(b, s, 3 * h * dh, device=args.device, dtype=dtype, requires_grad=True)
    dout = torch.randn(b, s, h * dh, device=args.device, dtype=dtype)
    mask = None
    if args.real_fraction < 1:  # True: attend; keys past each row's real prefix are padding
        real = math.ceil(args.real_fraction * s)
        mask = (torch.arange(s, device=args.device) < real).view(1, 1, 1, s).expand(b, 1, 1, s)

    def forward():
        q, k, v = qkv.view(b, s, 3, h, dh).permute(2, 0, 3, 1, 4)  # each [B, H, S, Dh]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=args.dropout)
        return out.transpose(1, 2).reshape(b, s, h * dh)

    with torch.no_grad():
        fwd = time_per_call(forward, args.device, args.min_seconds)
    out = forward()
    bwd = time_per_call(lambda: torch.autograd.grad(out, qkv, dout, retain_graph=True), args.device, args.min_seconds)
    flops = 4.0 * b * h * s * s * dh
    print(f"{args.device:>6} {'sdpa':>7} {'sdpa':>14} {'sdpa':>15} {args.dtype:>5} {b:>6} {s:>5} {h:>6} {dh:>8} {args.dropout:>8} "
          f"{('sdpa' if args.dropout > 0 else '-'):>10} {args.real_fraction:>5} {'-':>9} {'-':>11} {'-':>9} {1e3 * fwd:>11.3f} {flops / fwd / 1e12:>10.3f} {'-':>10} {1e3 * bwd:>11.3f} {2.5 * flops / bwd / 1e12:>10.3f} {'-':>10}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--min-seconds", type=float, default=0.5)
    p.add_argument("--real-fraction", type=float, default=1.0, help="each row's real keys (0, 1]; the rest padding")
    args = p.parse_args()
    if not 0 < args.real_fraction <= 1:
        p.error(f"--real-fraction must be in (0, 1], got {args.real_fraction}")
    sizes = [(32, 128, 12, 64), (16, 256, 12, 64), (8, 512, 12, 64), (8, 512, 16, 32), (8, 512, 6, 128)]
    if args.device == "cuda":
        sizes.append((64, 512, 12, 64))
    print(f"{'device':>6} {'backend':>7} {'fwd_kernel':>14} {'backward':>15} {'dtype':>5} {'batch':>6} {'seq':>5} {'heads':>6} {'head_dim':>8} {'dropout':>8} "
          f"{'rng':>10} {'real':>5} {'key_tiles':>9} {'order':>11} {'keep':>9} {'fwd_ms':>11} {'fwd_TFLOPs':>10} {'fwd_blk/SM':>10} {'bwd_ms':>11} {'bwd_TFLOPs':>10} {'bwd_blk/SM':>10}")
    for size in sizes:
        run(args, *size)


if __name__ == "__main__":
    main()
