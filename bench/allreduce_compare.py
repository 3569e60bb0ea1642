"""Side-by-side all_reduce bandwidth on this machine: Tandem's ring vs Open
MPI's MPI_Allreduce (Debian's openmpi: its default shared-memory transport,
and TCP over loopback like ours) vs PyTorch's gloo all_reduce, float32 sum.
Also measures the two ceilings a TCP ring on one host runs into: memcpy
bandwidth and single-stream loopback TCP throughput. Writes a markdown
report. Not run in CI.

  python3 bench/allreduce_compare.py --tandem build/apps/tandem \
      --out docs/results/allreduce_ring_vs_mpi_gloo.md

With --transports, compares the ring's same-host paths instead: Tandem's
default (auto: the ring over shared memory, all_reduce by single copy from
its threshold), --ring-single-copy on (every size read straight from the
peers' buffers), off (every byte through the shared-memory ring), and
--ring-transport tcp, side by side with gloo; checks the goals of the
same-host transport on the default (busbw >= 50 % of single-core memcpy from
1 MiB, >= 1.5x gloo from 64 KiB) per size, and writes the report and a .json
next to it:

  /opt/torchvenv/bin/python bench/allreduce_compare.py --tandem build/apps/tandem \
      --transports --min 64K --max 64M --out docs/results/allreduce_shm_cpu.md
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def run(cmd, env=None, timeout=1800):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"command failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    return out.stdout


def pairs(text):
    """'bytes time_us' lines -> {bytes: time_us}."""
    return {int(b): float(t) for b, t in (l.split() for l in text.splitlines() if l.strip() and l[0].isdigit())}


def tandem_times(args, n, transport="tcp", single_copy=None, huge_pages=True, shared="auto"):
    cmd = [args.tandem, "launch", "--nproc-per-node", str(n), "--", args.tandem, "bench", "allreduce",
           "-b", args.min, "-e", args.max, "-f", "2", "-n", str(args.iters), "-w", str(args.warmup),
           "--ring-transport", transport, "--ring-shared-buffers", shared]
    if single_copy:
        cmd += ["--ring-single-copy", single_copy]
    env = dict(os.environ, TANDEM_HOST_HUGE_PAGES="1" if huge_pages else "0")
    text = run(cmd, env=env)
    assert f"(transport {transport})" in text, f"the ring did not report transport {transport}:\n{text}"
    # auto: single copy from its threshold on huge pages, else off (the header says which)
    expect = {"on": "(single copy from 0 bytes)", "off": "(single copy off: asked for)",
              "auto": "(single copy from " if huge_pages else "(single copy off: host tensors are not on huge pages"
              }.get(single_copy, "")
    assert expect in text, f"the ring did not report single copy '{single_copy}':\n{text}"
    # the bench's buffers are shared buffers (as DDP's buckets) unless asked off, or over TCP
    expect = ("(shared buffers off: asked for)" if shared == "off" else
              "(shared buffers off: the ranks are not all" if transport == "tcp" else "(shared buffers from 0 bytes)")
    assert expect in text, f"the ring did not report shared buffers '{shared}':\n{text}"
    oop, ip = {}, {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            oop[int(f[0])], ip[int(f[0])] = float(f[5]), float(f[9])
            assert f[8] == "0" and f[12] == "0", f"wrong results reported: {line}"
    return oop, ip, text


def mpi_times(args, n, exe, transport):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), "--bind-to", "none"]
    if transport == "tcp":
        cmd += ["--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "--mca", "pml", "ob1"]
    cmd += [exe, str(parse_size(args.min)), str(parse_size(args.max)), str(args.iters), str(args.warmup)]
    return pairs(run(cmd))


def gloo_times(args, n):
    cmd = [sys.executable, os.path.join(HERE, "gloo_allreduce.py"), str(n), str(parse_size(args.min)),
           str(parse_size(args.max)), str(args.iters), str(args.warmup)]
    return pairs(run(cmd))


def memcpy_gbps(nbytes=256 << 20, reps=10):
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    np.copyto(b, a)
    t0 = time.perf_counter()
    for _ in range(reps):
        np.copyto(b, a)
    return nbytes * reps / (time.perf_counter() - t0) / 1e9


def loopback_gbps(nbytes=2 << 30, chunk=4 << 20):
    """One TCP stream over 127.0.0.1 between two threads (the copies happen in the kernel, outside the GIL)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    def sink():
        conn, _ = srv.accept()
        buf = bytearray(chunk)
        view = memoryview(buf)
        left = nbytes
        while left > 0:
            left -= conn.recv_into(view, min(chunk, left))
        conn.close()
    t = threading.Thread(target=sink)
    t.start()
    c = socket.create_connection(srv.getsockname())
    data = bytes(chunk)
    t0 = time.perf_counter()
    for _ in range(nbytes // chunk):
        c.sendall(data)
    t.join()
    elapsed = time.perf_counter() - t0
    c.close()
    srv.close()
    return nbytes / elapsed / 1e9


def loopback_ring_gbps(n, nbytes=512 << 20, chunk=4 << 20):
    """Aggregate throughput of n TCP streams over 127.0.0.1 running at once in a
    ring (stream i: sender thread i -> receiver thread i+1), like a ring
    collective's traffic with no arithmetic: the transport's ceiling."""
    servers = [socket.socket() for _ in range(n)]
    for s in servers:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
    senders = [socket.create_connection(s.getsockname()) for s in servers]
    receivers = [s.accept()[0] for s in servers]
    data = bytes(chunk)

    def send(sock):
        for _ in range(nbytes // chunk):
            sock.sendall(data)

    def recv(sock):
        view = memoryview(bytearray(chunk))
        left = nbytes
        while left > 0:
            left -= sock.recv_into(view, min(chunk, left))

    threads = [threading.Thread(target=send, args=(s,)) for s in senders]
    threads += [threading.Thread(target=recv, args=(r,)) for r in receivers]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for s in senders + receivers + servers:
        s.close()
    return n * nbytes / elapsed / 1e9


def busbw(nbytes, us, n):
    return nbytes / (us * 1e-6) / 1e9 * 2 * (n - 1) / n


def best_of(runs):
    out = {}
    for r in runs:
        for k, v in r.items():
            out[k] = min(v, out.get(k, v))
    return out


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def transports_report(args):
    """Tandem's ring over shared memory and over TCP, and gloo, at each world size."""
    lscpu = run(["lscpu"])
    model = re.search(r"Model name:\s*(.*)", lscpu).group(1).strip()
    load_before = load_average()
    mem_bw = max(memcpy_gbps() for _ in range(3))
    import torch
    record = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
              "machine": f"{model}, {os.cpu_count()} CPUs, {platform.platform()}",
              "command": f"python bench/allreduce_compare.py {' '.join(sys.argv[1:])}",
              "torch": torch.__version__, "memcpy_gbps": mem_bw, "iters": args.iters, "warmup": args.warmup,
              "repeat": args.repeat, "load_average_before": load_before, "worlds": []}
    raw = {}  # world size -> the default's last output
    # column -> (transport, single copy, huge pages, shared buffers); "auto" is what DDP's buckets get by
    # default, "plain" what an all_reduce of ordinary tensors gets.
    tandem_columns = {"auto": ("shm", "auto", True, "auto"), "plain": ("shm", "auto", True, "off"),
                      "single": ("shm", "on", True, "off"), "shm": ("shm", "off", True, "off"),
                      "tcp": ("tcp", None, True, "auto")}
    for n in args.nprocs:
        runs = {k: [] for k in list(tandem_columns) + ["gloo"]}
        for _ in range(args.repeat):  # interleaved, so that a disturbance hits every column alike
            for col, (t, single_copy, huge, shared) in tandem_columns.items():
                _, ip_t, text = tandem_times(args, n, t, single_copy, huge, shared)
                runs[col].append(ip_t)
                if col == "auto":
                    raw[n] = text
            runs["gloo"].append(gloo_times(args, n))
        best = {k: best_of(v) for k, v in runs.items()}
        gloo = best["gloo"]
        rows = []
        for size in sorted(best["auto"]):
            b = {k: busbw(size, best[k][size], n) for k in tandem_columns}
            b_gloo = busbw(size, gloo[size], n) if size in gloo else None
            rows.append({"bytes": size, "auto_busbw": b["auto"], "plain_busbw": b["plain"],
                         "plain_over_memcpy": b["plain"] / mem_bw,
                         "single_copy_busbw": b["single"],
                         "shm_ring_busbw": b["shm"], "tcp_busbw": b["tcp"], "gloo_busbw": b_gloo,
                         "auto_over_memcpy": b["auto"] / mem_bw,
                         "auto_over_gloo": b["auto"] / b_gloo if b_gloo else None,
                         "goal_memcpy": (b["auto"] >= 0.5 * mem_bw) if size >= (1 << 20) else None,
                         "goal_gloo": (b["auto"] >= 1.5 * b_gloo) if b_gloo and size >= (64 << 10) else None})
        record["worlds"].append({"ranks": n, "rows": rows})
    record["load_average_after"] = load_average()

    def mark(v):
        return "-" if v is None else ("met" if v else "**not met**")

    lines = ["# all_reduce on one host: shared buffers vs single copy vs the ring over shared memory vs over TCP vs gloo",
             "",
             f"- date: {record['date']}",
             f"- machine: {record['machine']}",
             f"- software: torch {torch.__version__} (gloo); Tandem Release build",
             f"- command: `{record['command']}`",
             f"- float32 sum, in place (gloo's only mode); {args.warmup} warm-up + {args.iters} timed calls per size;"
             " time = slowest rank's mean; busbw = bytes/time x 2(n-1)/n in GB/s",
             "- columns: tandem default (`--ring-transport shm`: the buffers are shared buffers, as DDP's buckets,"
             " reduced in place), ordinary tensors (`--ring-shared-buffers off`: single copy auto, from 2 MiB on"
             " transparent huge pages), single copy at every size (`--ring-single-copy on`), the ring over shared"
             " memory (both off), the ring over TCP, gloo; host tensors on huge pages (the default)",
             f"- each of the six ran {args.repeat} times, interleaved; the table keeps each one's best time per size",
             f"- single-core memcpy bandwidth measured here: {mem_bw:.2f} GB/s (numpy copy of 256 MiB, best of 3)",
             f"- load average (1, 5, 15 min) before: {load_before}, after: {record['load_average_after']}"
             f" on {os.cpu_count()} CPUs",
             "- goals (issue #14), checked on the default: busbw >= 50 % of single-core memcpy from 1 MiB;"
             " busbw >= 1.5x gloo from 64 KiB", ""]
    for w in record["worlds"]:
        n = w["ranks"]
        lines += [f"## {n} ranks (busbw, GB/s)", "",
                  "| size | tandem default | ordinary tensors | single copy | ring shm | ring tcp | gloo |"
                  " default / memcpy | ordinary / memcpy | default / gloo | >= 50 % memcpy | >= 1.5x gloo |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|"]
        for r in w["rows"]:
            g = r["gloo_busbw"]
            gloo_cell = "-" if g is None else f"{g:.3f}"
            ratio_cell = "-" if g is None else f"{r['auto_over_gloo']:.2f}x"
            lines.append(f"| {r['bytes']} | {r['auto_busbw']:.3f} | {r['plain_busbw']:.3f} | "
                         f"{r['single_copy_busbw']:.3f} | "
                         f"{r['shm_ring_busbw']:.3f} | {r['tcp_busbw']:.3f} | {gloo_cell} | "
                         f"{100 * r['auto_over_memcpy']:.0f} % | {100 * r['plain_over_memcpy']:.0f} % | "
                         f"{ratio_cell} | {mark(r['goal_memcpy'])} | "
                         f"{mark(r['goal_gloo'])} |")
        lines.append("")
    lines += ["## Raw `tandem bench allreduce --ring-transport shm` output (the default, last run)", ""]
    for n, text in raw.items():
        lines += [f"{n} ranks:", "", "```", text.rstrip(), "```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(record, f, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--nprocs", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min", default="1K")
    p.add_argument("--max", default="64M")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--ceilings-only", action="store_true", help="only measure memcpy and loopback TCP")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs of each implementation, interleaved; the best time per size is kept")
    p.add_argument("--transports", action="store_true",
                   help="single copy vs the ring over shared memory vs TCP vs gloo, with the same-host goals (no MPI)")
    args = p.parse_args()
    if args.transports:
        return transports_report(args)

    if args.ceilings_only:
        print(f"memcpy {memcpy_gbps():.2f} GB/s, loopback TCP one stream {loopback_gbps():.2f} GB/s")
        for n in args.nprocs:
            print(f"loopback TCP, {n} streams in a ring at once: {loopback_ring_gbps(n):.2f} GB/s aggregate")
        return

    tmp = tempfile.mkdtemp()
    mpi_exe = os.path.join(tmp, "mpi_allreduce")
    run(["mpicc", "-O2", "-o", mpi_exe, os.path.join(HERE, "mpi_allreduce.c")])

    lscpu = run(["lscpu"])
    model = re.search(r"Model name:\s*(.*)", lscpu).group(1).strip()
    mem_bw, tcp_bw = memcpy_gbps(), loopback_gbps()
    ring_bw = {n: loopback_ring_gbps(n) for n in args.nprocs}
    ompi = run(["mpirun", "--allow-run-as-root", "--version"]).splitlines()[0]
    import torch
    lines = [
        "# all_reduce: Tandem ring vs Open MPI vs PyTorch gloo",
        "",
        f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
        f"- machine: {model}, {os.cpu_count()} CPUs (`nproc` = {os.cpu_count()}), {platform.platform()}",
        f"- software: {ompi}; torch {torch.__version__} (gloo); Tandem Release build",
        f"- command: `python3 bench/allreduce_compare.py {' '.join(sys.argv[1:])}`",
        f"- float32 sum, {args.warmup} warm-up + {args.iters} timed calls per size; time = slowest rank's mean;"
        " busbw = bytes/time x 2(n-1)/n in GB/s",
        f"- each implementation ran {args.repeat} times, interleaved (the machine is shared, so runs are noisy); "
        "the table keeps each one's best time per size",
        f"- ceilings measured here: memcpy {mem_bw:.1f} GB/s (one thread, 256 MiB), "
        f"loopback TCP {tcp_bw:.1f} GB/s (one stream, 2 GiB); "
        + ", ".join(f"{n} streams in a ring at once {bw:.1f} GB/s aggregate" for n, bw in ring_bw.items()),
        "",
    ]
    raw = []
    for n in args.nprocs:
        runs = {"oop": [], "ip": [], "gloo": [], "sm": [], "tcp": []}
        for _ in range(args.repeat):
            oop_r, ip_r, text = tandem_times(args, n)
            runs["oop"].append(oop_r)
            runs["ip"].append(ip_r)
            runs["gloo"].append(gloo_times(args, n))
            runs["sm"].append(mpi_times(args, n, mpi_exe, "default"))
            runs["tcp"].append(mpi_times(args, n, mpi_exe, "tcp"))
        raw.append((n, text))
        oop, ip, gloo, mpi_sm, mpi_tcp = (best_of(runs[k]) for k in ("oop", "ip", "gloo", "sm", "tcp"))
        lines += [f"## {n} ranks (busbw, GB/s)", "",
                  "| size | tandem ring (out of place) | tandem ring (in place) | gloo (in place) | ring / gloo |"
                  " Open MPI (shared memory) | Open MPI (TCP loopback) |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for size in sorted(oop):
            g = busbw(size, gloo[size], n) if size in gloo else float("nan")
            cells = [f"{size}", f"{busbw(size, oop[size], n):.3f}", f"{busbw(size, ip[size], n):.3f}", f"{g:.3f}",
                     f"{busbw(size, ip[size], n) / g:.2f}x" if g == g else "-",
                     f"{busbw(size, mpi_sm[size], n):.3f}" if size in mpi_sm else "-",
                     f"{busbw(size, mpi_tcp[size], n):.3f}" if size in mpi_tcp else "-"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Raw `tandem bench allreduce` output (last run)", ""]
    for n, text in raw:
        lines += [f"{n} ranks:", "", "```", text.rstrip(), "```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    shutil.rmtree(tmp)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
