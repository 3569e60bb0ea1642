#!/usr/bin/env bash
# Validates the step model (docs/step-model.md) against measured CPU runs and
# writes a run folder under docs/results/step_model_cpu/: all_reduce tables at
# 2-4 ranks, bucket sweeps (caps 0.25, 1, 4, one) at 2-4 ranks, a 1-4 rank
# scaling run (the config's 25 MB cap) and a separate 1-rank run, then two
# validations of every measured case, none predicted from its own samples:
#   per_world:    calibrated at each world size on the mean of the sweep's
#                 other cases (leave one out); 1 rank on the separate run;
#   extrapolated: calibrated at 1 and 2 ranks only; 3 and 4 ranks use the
#                 2-rank sweep's mean scaled by the CPU share (n/2 on 2 cores).
# About 4 minutes on a 2-core machine. PREDICT_ONLY=1 redoes the validations
# on a run folder's existing measurements.
#
#   bench/step_model_validation.sh [TANDEM_BINARY] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
tandem=${1:-build/apps/tandem}
out=${2:-docs/results/step_model_cpu/latest}
config=bench/step_model/model.yaml
common=(--config "$config" --synthetic --warmup 3 --steps 10 --rounds 4)
links=()
for n in 2 3 4; do links+=(--link "$out/allreduce_${n}ranks.txt"); done

if [[ "${PREDICT_ONLY:-0}" != 1 ]]; then
rm -rf "$out"
mkdir -p "$out"
uptime | tee "$out/load_before.txt"
for n in 2 3 4; do
  "$tandem" launch --nproc-per-node "$n" -- "$tandem" bench allreduce -b 4K -e 16M -f 2 -n 10 -w 3 -c 0 \
    > "$out/allreduce_${n}ranks.txt"
done
for n in 2 3 4; do
  "$tandem" bench buckets --nproc "$n" --caps 0.25,1,4,one "${common[@]}" --out "$out/buckets_${n}ranks" \
    | tee "$out/buckets_${n}ranks.txt"
done
"$tandem" bench scaling --world-sizes 1 "${common[@]}" --out "$out/calibration_1rank" | tee "$out/calibration_1rank.txt"
"$tandem" bench scaling --world-sizes 1,2,3,4 "${common[@]}" --out "$out/scaling" | tee "$out/scaling.txt"
uptime | tee "$out/load_after.txt"
rm -rf "$out"/*/buckets_run "$out"/*/scaling_run_*  # the ranks' raw files: in the profiles already
fi

measured=(--measured "$out/buckets_2ranks" --measured "$out/buckets_3ranks" --measured "$out/buckets_4ranks"
  --measured "$out/scaling")
"$tandem" bench predict --calibrate "$out/calibration_1rank" --calibrate "$out/buckets_2ranks" \
  --calibrate "$out/buckets_3ranks" --calibrate "$out/buckets_4ranks" \
  "${links[@]}" "${measured[@]}" --json "$out/per_world.json" | tee "$out/per_world.md"
"$tandem" bench predict --calibrate "$out/calibration_1rank" --calibrate "$out/buckets_2ranks" \
  "${links[@]}" "${measured[@]}" --json "$out/extrapolated.json" | tee "$out/extrapolated.md"

# One JSON with both validations and the machine they ran on, and one table side by side (summary.md).
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
meta = json.load(open(f"{out}/buckets_2ranks/buckets.json"))["meta"]
per_world = json.load(open(f"{out}/per_world.json"))
extrapolated = json.load(open(f"{out}/extrapolated.json"))
json.dump({"meta": meta, "per_world": per_world, "extrapolated": extrapolated}, open(f"{out}/validation.json", "w"),
          indent=1)
spread = {}  # (ranks, cap) -> (p10, p90) of the measured step
for f in ["buckets_2ranks/buckets.json", "buckets_3ranks/buckets.json", "buckets_4ranks/buckets.json",
          "scaling/scaling.json"]:
    for c in json.load(open(f"{out}/{f}"))["cases"]:
        cap = "one bucket" if c["facts"]["one_bucket"] else "%g" % c["facts"]["bucket_cap_mb"]
        spread[(c["facts"]["world_size"], cap)] = (c["step_ms"]["p10"], c["step_ms"]["p90"])
ext = {(r["world_size"], r["cap"]): r for r in extrapolated["rows"]}
lines = ["| ranks | cap MB | measured step ms (p10-p90) | measured exposed ms | predicted, calibrated at each "
         "world size | error | predicted exposed | predicted, 3-4 ranks scaled from 2 | error |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
rows = sorted(per_world["rows"], key=lambda r: (r["world_size"], r["cap"] == "one bucket",
                                                 float(r["cap"]) if r["cap"] != "one bucket" else 0))
for r in rows:
    k = (r["world_size"], r["cap"])
    e = ext[k]
    p10, p90 = spread[k]
    lines.append("| %d | %s | %.1f (%.0f-%.0f) | %.1f | %.1f | %+.1f %% | %.1f | %.1f | %+.1f %% |" % (
        k[0], k[1], r["measured_step_ms"], p10, p90, r["measured_exposed_ms"], r["predicted_step_ms"], r["error_pct"],
        r["predicted_exposed_ms"], e["predicted_step_ms"], e["error_pct"]))
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
