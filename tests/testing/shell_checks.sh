# The bookkeeping of the shell tests (sourced): `check NAME STATUS` prints "ok: NAME" when STATUS is 0
# and "FAIL: NAME" otherwise, counting both; `finish` prints the counts and returns non-zero if any
# check failed, so a script that ends with it fails its ctest entry.
passes=0 fails=0
check() {  # check NAME CONDITION-RESULT
  if [ "$2" = 0 ]; then echo "ok: $1"; passes=$((passes + 1)); else echo "FAIL: $1"; fails=$((fails + 1)); fi
}
finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
