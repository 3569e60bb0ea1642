#!/usr/bin/env python3
"""Where a run's GPU time goes, kernel by kernel, from Nsight Compute's CSV.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --log-file run.csv PROGRAM...
    tools/kernel_profile.py run.csv [--top 30] [--json out.json]

Groups the kernels by name (template arguments and parameter lists dropped:
`forward_kernel<bf16, 64>` and `forward_kernel<f16, 32>` are one row), sums
their durations and prints a Markdown table, largest first, with each row's
share of the total. ncu serialises kernels and times each alone, so the total
is the sum of kernel times, not a step's wall time: the shares say which
kernels to work on, not how long a step takes.

Reads the CSV by its header (the "Kernel Name" and "Metric Value" columns, the
unit from "Metric Unit"), ignores ncu's own "==PROF==" lines, and exits
non-zero naming the file when it holds no kernel rows.
"""
import argparse
import csv
import json
import sys

UNITS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0, "second": 1e3,
         "s": 1e3}


def base_name(kernel):
    """`void ns::f<int, 4>(float*, int)` -> `ns::f`: the function, without template arguments or parameters."""
    name = kernel.strip()
    if name.startswith("void "):
        name = name[5:]
    out, depth = [], 0
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    # "(anonymous namespace)" was dropped with the other parentheses: tidy the double colons it leaves.
    return "".join(out).replace("::::", "::").strip()


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    if not lines:
        return []
    reader = csv.DictReader(lines)
    missing = {"Kernel Name", "Metric Name", "Metric Value"} - set(reader.fieldnames or [])
    if missing:
        raise SystemExit(f"kernel_profile: {path}: the CSV has no column {', '.join(sorted(missing))} "
                         f"(columns: {', '.join(reader.fieldnames or [])})")
    rows = []
    for line_no, r in enumerate(reader, start=2):
        if r["Metric Name"] != "gpu__time_duration.sum":
            continue
        unit = (r.get("Metric Unit") or "nsecond").strip()
        if unit not in UNITS:
            raise SystemExit(f"kernel_profile: {path}: row {line_no}: unknown time unit '{unit}'")
        try:
            value = float(r["Metric Value"].replace(",", ""))
        except ValueError:
            raise SystemExit(f"kernel_profile: {path}: row {line_no}: '{r['Metric Value']}' is not a number")
        rows.append((r["Kernel Name"], value * UNITS[unit]))
    return rows


def summarize(rows):
    groups = {}
    for kernel, ms in rows:
        g = groups.setdefault(base_name(kernel), {"calls": 0, "ms": 0.0})
        g["calls"] += 1
        g["ms"] += ms
    total = sum(g["ms"] for g in groups.values())
    table = sorted(({"kernel": k, "calls": g["calls"], "ms": g["ms"], "share": g["ms"] / total if total else 0.0}
                    for k, g in groups.items()), key=lambda r: -r["ms"])
    return table, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --csv output (--log-file)")
    ap.add_argument("--top", type=int, default=30, help="rows to print (the rest are summed in one row)")
    ap.add_argument("--json", help="also write every row here")
    args = ap.parse_args()
    try:
        rows = read_rows(args.csv)
    except OSError as e:
        raise SystemExit(f"kernel_profile: cannot read {args.csv}: {e.strerror}")
    if not rows:
        raise SystemExit(f"kernel_profile: {args.csv} holds no gpu__time_duration.sum rows (did ncu profile anything?)")
    table, total = summarize(rows)
    print(f"{len(rows)} kernel launches, {total:.3f} ms of kernel time in all\n")
    print("| kernel | launches | ms | share |")
    print("|---|---:|---:|---:|")
    for r in table[:args.top]:
        print(f"| {r['kernel']} | {r['calls']} | {r['ms']:.3f} | {100 * r['share']:.1f} % |")
    rest = table[args.top:]
    if rest:
        ms = sum(r["ms"] for r in rest)
        print(f"| ({len(rest)} more) | {sum(r['calls'] for r in rest)} | {ms:.3f} | {100 * ms / total:.1f} % |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"total_ms": total, "launches": len(rows), "kernels": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
