#!/usr/bin/env python3
"""PyTorch twin of a Tandem training step: the same classifier, data and hyper-parameters, timed
the way `tandem bench step` times Tandem.

The data and settings come from `tandem bench export-data --config C --out DIR`: the token ids
Tandem's tokenizer made (so both frameworks see identical batches' shapes and ids) and meta.json
with the model and training keys of the config. The model has the parameter names of
tests/fixtures/make_model_fixtures.py's TorchTextClassifier (embed.token, embed.position,
encoder = nn.TransformerEncoder, head). AdamW with weight decay on matrices only, gradient clipping,
bf16 autocast (or fp16 with GradScaler on CUDA) as the config says, gradient accumulation with
no_sync, DDP (gloo on CPU, nccl on CUDA) with the config's bucket size when started by torchrun.

Timing: --warmup untimed steps, then --steps timed optimizer steps; each step ends with a device
synchronisation on CUDA (as in Tandem's bench); the median step time over the slowest rank gives
samples/s = world x batch x accumulation / step. Peak memory: torch.cuda.max_memory_allocated on
CUDA; on the CPU the process's peak RSS (ru_maxrss), which counts everything the process holds,
not only tensors (Tandem's CPU figure counts tensors only; they are not comparable).

    python3 bench/pytorch/train_classifier.py --data DIR [--mode eager|compile] [--device cpu|cuda]
    torchrun --nproc_per_node 2 bench/pytorch/train_classifier.py --data DIR --out result.json
"""
import argparse
import json
import math
import os
import resource
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from length_grouping import group_by_length


class TorchTextClassifier(nn.Module):
    """Tandem's nn::TextClassifier in PyTorch (same names as the test fixtures' twin)."""

    def __init__(self, vocab, d, heads, layers, ff, max_len, classes, dropout, activation, norm_first, pooling):
        super().__init__()
        self.embed = nn.Module()
        self.embed.token = nn.Embedding(vocab, d)
        self.embed.position = nn.Embedding(max_len, d)
        self.drop = nn.Dropout(dropout)
        act = {"gelu": "gelu", "relu": "relu", "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}[activation]
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout, activation=act, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d) if norm_first else None,
                                             enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)
        self.pooling = pooling

    def forward(self, ids, mask):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.drop(self.embed.token(ids) + self.embed.position(pos)[None])
        h = self.encoder(x, src_key_padding_mask=~mask.bool())
        if self.pooling == "mean":
            m = mask.to(h.dtype)[..., None]
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
        else:
            pooled = h[:, 0]
        return self.head(pooled)


def decay_groups(model, weight_decay):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def shard(n, world, rank, epoch, seed, batch, lengths=None):
    """This rank's batches of an epoch: a seeded permutation (grouped by length when `lengths` is
    given, before sharding, as Hugging Face and Tandem do), rank::world, whole batches only."""
    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    if lengths is not None:
        order = group_by_length(order, lengths, batch * world)
    order = torch.tensor(order[: n - n % world][rank::world], dtype=torch.int64)
    usable = len(order) - len(order) % batch
    return [order[i: i + batch] for i in range(0, usable, batch)]


def row_lengths(mask):
    """One past each row's last real (nonzero-mask) position, on the host."""
    real = mask.cpu() != 0
    return (real * torch.arange(1, real.shape[1] + 1)).amax(dim=1)


def padded_length(longest, multiple, seq):
    """Hugging Face's padding="longest" with pad_to_multiple_of: the batch's longest row (at
    least 1) rounded up, at most seq."""
    return min(seq, -(-max(longest, 1) // multiple) * multiple)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="folder written by tandem bench export-data")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads per rank; 0 (default) leaves PyTorch's own choice (all cores, or "
                         "OMP_NUM_THREADS, which torchrun sets to 1 when it starts several ranks)")
    ap.add_argument("--synthetic", metavar="VOCAB,EXAMPLES",
                    help="train on random full-length sequences (ids in [3, VOCAB), [CLS] first, 4 classes) "
                         "instead of --data's ids, like `tandem bench step --synthetic`; --data still gives "
                         "meta.json")
    ap.add_argument("--out", help="write the result as JSON here (rank 0)")
    args = ap.parse_args()

    meta = json.load(open(os.path.join(args.data, "meta.json")))
    mc, tc = meta["model"], meta["training"]
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", local_rank % max(1, torch.cuda.device_count())) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    elif args.threads > 0:
        torch.set_num_threads(args.threads)
    if world > 1:
        dist.init_process_group("nccl" if use_cuda else "gloo")
    torch.manual_seed(tc["seed"])

    num_classes, vocab_size = meta["num_classes"], meta["vocab_size"]
    if args.synthetic:
        vocab_size, n = (int(v) for v in args.synthetic.split(","))
        num_classes, seq = 4, mc["max_seq_len"]
        g = torch.Generator().manual_seed(tc["seed"])
        ids = torch.randint(3, vocab_size, (n, seq), generator=g)
        ids[:, 0] = 2  # [CLS], as Tandem's synthetic rows
        mask = torch.ones(n, seq, dtype=torch.uint8)
        labels = torch.arange(n) % num_classes
    else:
        ids = torch.from_numpy(np.load(os.path.join(args.data, "train_ids.npy")).astype(np.int64))
        mask = torch.from_numpy(np.load(os.path.join(args.data, "train_mask.npy")))
        labels = torch.from_numpy(np.load(os.path.join(args.data, "train_labels.npy")))
    if use_cuda:
        ids, mask, labels = ids.to(device), mask.to(device), labels.to(device)

    model = TorchTextClassifier(vocab_size, mc["d_model"], mc["n_heads"], mc["num_layers"],
                                mc["dim_feedforward"], mc["max_seq_len"], num_classes, mc["dropout"],
                                mc["activation"], mc["norm_first"], mc["pooling"]).to(device)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if use_cuda else None, bucket_cap_mb=tc["ddp_bucket_cap_mb"],
            static_graph=tc["ddp_static_graph"], gradient_as_bucket_view=tc["ddp_gradient_as_bucket_view"],
            find_unused_parameters=tc["ddp_find_unused_parameters"])
    if args.mode == "compile":
        net = torch.compile(net)
    if tc["optim"] == "sgd":
        opt = torch.optim.SGD(decay_groups(model, tc["weight_decay"]), lr=tc["learning_rate"], momentum=tc["momentum"])
    else:
        opt = torch.optim.AdamW(decay_groups(model, tc["weight_decay"]), lr=tc["learning_rate"],
                                betas=(tc["adam_beta1"], tc["adam_beta2"]), eps=tc["adam_epsilon"],
                                fused=use_cuda or None)
    amp_dtype = torch.bfloat16 if tc["bf16"] else (torch.float16 if tc["fp16"] else None)
    scaler = torch.amp.GradScaler("cuda", enabled=use_cuda and amp_dtype == torch.float16)
    batch, accum = tc["per_device_train_batch_size"], tc["gradient_accumulation_steps"]
    # data.padding and group_by_length (absent from meta.json files written before them: max_length).
    longest = tc.get("padding", "max_length") == "longest"
    multiple = tc.get("pad_to_multiple_of", 1)
    row_len = row_lengths(mask) if longest or tc.get("group_by_length", False) else None
    lengths = row_len.tolist() if tc.get("group_by_length", False) else None

    epoch, batches = 0, []

    def next_batch():
        nonlocal epoch, batches
        if not batches:
            batches = shard(len(labels), world, rank, epoch, tc["seed"], batch, lengths)
            epoch += 1
            if not batches:
                raise SystemExit(f"rank {rank}: no full batch of {batch} in {len(labels)} examples")
        idx = batches.pop(0)
        # A batch's rows cut to its longest text, decided on the host as a padding collator does.
        n = padded_length(int(row_len[idx].max()), multiple, ids.shape[1]) if longest else ids.shape[1]
        if use_cuda:
            idx = idx.to(device)
        return ids[idx, :n], mask[idx, :n], labels[idx]

    def step(index):
        for micro in range(accum):
            x, m, y = next_batch()
            sync_ctx = net.no_sync() if world > 1 and micro + 1 < accum and hasattr(net, "no_sync") else _null()
            with sync_ctx:
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
                    loss = F.cross_entropy(net(x, m).float(), y, label_smoothing=tc["label_smoothing_factor"])
                scaler.scale(loss / accum if accum > 1 else loss).backward()
        scaler.unscale_(opt)
        if tc["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc["max_grad_norm"])
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if tc["logging_steps"] > 0 and (index + 1) % tc["logging_steps"] == 0:
            loss.item()  # a logging step reads the loss, as Tandem's does
        if use_cuda:
            torch.cuda.synchronize()

    for i in range(args.warmup):
        step(i)
    if use_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(args.warmup, args.warmup + args.steps):
        t0 = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - t0) * 1e3)
    if world > 1:  # the slowest rank's time per step
        t = torch.tensor(times, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times = t.cpu().tolist()
    peak = (torch.cuda.max_memory_allocated(device) if use_cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    if world > 1:
        p = torch.tensor([float(peak)], dtype=torch.float64, device=device)
        dist.all_reduce(p, op=dist.ReduceOp.MAX)
        peak = int(p.item())
    median = statistics.median(times)
    q = statistics.quantiles(times, n=10) if len(times) >= 2 else [median] * 9
    result = {
        "framework": "pytorch", "mode": args.mode, "torch_version": torch.__version__,
        "device": device.type, "world_size": world, "per_device_batch": batch, "gradient_accumulation_steps": accum,
        "precision": "bf16" if tc["bf16"] else ("fp16" if tc["fp16"] else "fp32"), "threads_per_rank": torch.get_num_threads(),
        "synthetic_data": bool(args.synthetic), "padding": "longest" if longest else "max_length",
        "pad_to_multiple_of": multiple, "group_by_length": lengths is not None,
        "num_parameters": params, "warmup": args.warmup, "steps": args.steps,
        "step_ms_median": median, "step_ms_p10": q[0], "step_ms_p90": q[-1],
        "samples_per_second": world * batch * accum / (median / 1e3),
        "peak_memory_bytes": peak, "peak_memory_kind": "cuda_max_allocated" if use_cuda else "cpu_max_rss",
    }
    if rank == 0:
        print(json.dumps(result))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=2)
    if world > 1:
        dist.destroy_process_group()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
