#!/bin/bash
# One short device check after the 2026-11-28 fixes: build ops_tests and train_tests, then run the
# layer norm / residual / embedding GPU tests and the graph step with the new embedding default.
set -o pipefail
B=build-gpu; t0=$SECONDS
TANDEM_CONFIGURE_ONLY=1 scripts/offline-build.sh .dev/bundle $B -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1 &&
  cmake --build $B -j16 --target ops_tests train_tests >>"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "built in $((SECONDS - t0)) s"
export TANDEM_REQUIRE_GPU=1
ctest --test-dir $B -R 'NewRowKernels|OpsParity\.(Embedding|LayerNorm|BiasDropoutAdd)|GraphStep\.' -j8 --timeout 120 \
  --output-on-failure >"$OUT/test.log" 2>&1
rc=$?
grep -E "tests passed|\*\*\*|Failure|Actual|element|result [0-9]" "$OUT/test.log" | head -60
echo "ran $(grep -c ' Passed ' "$OUT/test.log") passed; total $((SECONDS - t0)) s; rc $rc"
exit $rc
