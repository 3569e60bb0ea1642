#!/usr/bin/env bash
# The main job: set up, build, and train a transformer classifier on the
# Debian `fortunes` package's fortune cookies (category = label) with 2 DDP
# ranks (the ring backend on a CPU machine; on a GPU where there is one), then
# print test accuracy next to the majority-class baseline. Extra arguments go to
# `tandem train` (e.g. --set num_train_epochs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/apps/tandem launch --nproc-per-node "${TANDEM_NPROC:-2}" -- \
  build/apps/tandem train --config configs/fortunes_demo.yaml "$@"
