"""PyTorch gloo all_reduce timing for bench/allreduce_compare.py.

float32 sum, in place (gloo's only mode), sizes MINBYTES..MAXBYTES (x2),
ITERS timed calls after WARMUP untimed ones; prints "bytes time_us" per size
from rank 0, where time is the slowest rank's mean.
Usage: python gloo_allreduce.py NPROC MINBYTES MAXBYTES ITERS WARMUP
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, lo, hi, iters, warmup):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    base = (torch.arange(hi // 4, dtype=torch.float32) + rank) % 5
    size = lo
    while size <= hi:
        t = base[: size // 4].clone()
        for _ in range(warmup):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{size} {elapsed.item() * 1e6:.3f}", flush=True)
        size *= 2
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    nproc, lo, hi, iters, warmup = (int(x) for x in sys.argv[1:6])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(nproc, free_port(), lo, hi, iters, warmup), nprocs=nproc, join=True)
