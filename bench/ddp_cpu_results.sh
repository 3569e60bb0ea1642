#!/usr/bin/env bash
# Reproduces docs/results/ddp_cpu/: the DDP benchmarks and report for the
# fortunes demo config on this machine's CPU with the ring backend, and the
# Tandem vs PyTorch comparison. About 8 minutes on a 2-core machine.
#
#   bench/ddp_cpu_results.sh [TANDEM_BINARY] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${1:-build/apps/tandem}
out=${2:-docs/results/ddp_cpu}
config=configs/fortunes_demo.yaml
rm -rf "$out"
mkdir -p "$out"
common=(--config "$config" --backend ring --warmup 5 --steps 20 --rounds 3 --out "$out")

"$tandem" bench buckets --nproc 2 "${common[@]}" | tee "$out/buckets.txt"
"$tandem" bench scaling --max-ranks 2 --train "${common[@]}" | tee "$out/scaling.txt"
"$tandem" bench step --precisions fp32,bf16,fp16 "${common[@]}" | tee "$out/step.txt"
"$tandem" find-batch-size --config "$config" --memory-limit 512M --max-batch 8192 --out "$out" | tee "$out/find_batch_size.txt"
rm -rf "$out"/train_*ranks/checkpoint-*  # model weights: not results
"$tandem" report --bench "$out" --out "$out/report" --quiet

for n in 1 2; do
  python3 bench/pytorch/compare.py --tandem "$tandem" --config "$config" --nproc "$n" --modes eager,compile \
    --warmup 5 --steps 20 --out "/tmp/tandem_compare_$n"
  mkdir -p "$out/pytorch"
  cp "/tmp/tandem_compare_$n/compare.md" "$out/pytorch/compare_${n}rank.md"
  cp "/tmp/tandem_compare_$n/compare.json" "$out/pytorch/compare_${n}rank.json"
done

# The same model with a 100 000-token vocabulary on synthetic data: 25 MB of
# gradients for the same compute, the communication-bound case.
big=${out}_large_vocab
rm -rf "$big"
mkdir -p "$big"
large=(--config "$config" --synthetic --set data.vocab_max_size=100000 --backend ring --warmup 5 --steps 20 --rounds 2
       --out "$big")
"$tandem" bench buckets --nproc 2 "${large[@]}" | tee "$big/buckets.txt"
"$tandem" bench scaling --max-ranks 2 "${large[@]}" | tee "$big/scaling.txt"
"$tandem" report --bench "$big" --out "$big/report" --quiet
