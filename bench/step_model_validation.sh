#!/usr/bin/env bash
# Validates the step model (docs/step-model.md) against measured CPU runs and
# writes docs/results/step_model_cpu/: all_reduce tables at 2-4 ranks, bucket
# sweeps at 2-4 ranks, a 1-4 rank scaling run, and two validations:
#   per_world:    calibrated at every world size from the sweep's cap-1 case
#                 (and a separate 1-rank run), predicting every other case;
#   extrapolated: calibrated at 1 and 2 ranks only; 3 and 4 ranks use the
#                 2-rank calibration scaled by the CPU share (n/2 on 2 cores).
# About 4 minutes on a 2-core machine.
#
#   bench/step_model_validation.sh [TANDEM_BINARY] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${1:-build/apps/tandem}
out=${2:-docs/results/step_model_cpu}
config=bench/step_model/model.yaml
rm -rf "$out"
mkdir -p "$out"
common=(--config "$config" --synthetic --warmup 3 --steps 10 --rounds 4)

uptime | tee "$out/load_before.txt"
links=()
for n in 2 3 4; do
  "$tandem" launch --nproc-per-node "$n" -- "$tandem" bench allreduce -b 4K -e 16M -f 2 -n 10 -w 3 -c 0 \
    > "$out/allreduce_${n}ranks.txt"
  links+=(--link "$out/allreduce_${n}ranks.txt")
done
for n in 2 3 4; do
  "$tandem" bench buckets --nproc "$n" --caps 0.25,1,4,one "${common[@]}" --out "$out/buckets_${n}ranks" \
    | tee "$out/buckets_${n}ranks.txt"
done
"$tandem" bench scaling --world-sizes 1 "${common[@]}" --out "$out/calibration_1rank" | tee "$out/calibration_1rank.txt"
"$tandem" bench scaling --world-sizes 1,2,3,4 "${common[@]}" --out "$out/scaling" | tee "$out/scaling.txt"
uptime | tee "$out/load_after.txt"
rm -rf "$out"/*/buckets_run "$out"/*/scaling_run_*  # the ranks' raw files: in the profiles already

measured=(--measured "$out/buckets_2ranks" --measured "$out/buckets_3ranks" --measured "$out/buckets_4ranks"
  --measured "$out/scaling")
"$tandem" bench predict --calibrate "$out/calibration_1rank" --calibrate "$out/buckets_2ranks/buckets.json:1" \
  --calibrate "$out/buckets_3ranks/buckets.json:1" --calibrate "$out/buckets_4ranks/buckets.json:1" \
  "${links[@]}" "${measured[@]}" --json "$out/per_world.json" | tee "$out/per_world.md"
"$tandem" bench predict --calibrate "$out/calibration_1rank" --calibrate "$out/buckets_2ranks/buckets.json:1" \
  "${links[@]}" "${measured[@]}" --json "$out/extrapolated.json" | tee "$out/extrapolated.md"

# One JSON with both validations and the machine they ran on.
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
meta = json.load(open(f"{out}/buckets_2ranks/buckets.json"))["meta"]
merged = {"meta": meta,
          "per_world": json.load(open(f"{out}/per_world.json")),
          "extrapolated": json.load(open(f"{out}/extrapolated.json"))}
json.dump(merged, open(f"{out}.json", "w"), indent=1)
PY
