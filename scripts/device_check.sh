#!/usr/bin/env bash
# Lossless on a GPU too: the greedy equivalence and sampling tests on CUDA in fp32 and bf16, and the share of
# greedy runs that part from AR only at a near-tie (target top-2 logit gap <= EPS); then, per dtype,
# scripts/dtype_equality.py: chain / TALON / SpecBound vs AR on 40 held-out prompts x 64 tokens.
#
#   scripts/device_check.sh                       # CUDA, fp32 then bf16
#   SPECSCOPE_CHECK_DEVICE=cpu SPECSCOPE_CHECK_DTYPES=bf16 scripts/device_check.sh -x   # extra args go to pytest
#
# EPS is 1e-4 in fp32 (the tests' own) and SPECSCOPE_CHECK_BF16_EPS (default 0.0625: one bf16 step at a
# logit of about 10) in bf16, where batched and one-token matmuls round differently far more often.
# Exit status: 0 when every run passed, 1 otherwise, 2 when the check cannot start (a bad
# SPECSCOPE_CHECK_DEVICE, torch missing). On a machine without CUDA (the default device is cuda) it prints
# the one line "no CUDA device: nothing to check" and exits 0, so CPU-only CI can call it; set
# SPECSCOPE_CHECK_REQUIRE_CUDA=1 on a GPU runner to make a missing GPU exit 2 instead.
# tests/test_device_check.py runs this script on CPU machines, so it cannot silently stop starting again.
set -u
cd "$(dirname "$0")/.."
DEVICE="${SPECSCOPE_CHECK_DEVICE:-cuda}"
DTYPES="${SPECSCOPE_CHECK_DTYPES:-fp32 bf16}"
BF16_EPS="${SPECSCOPE_CHECK_BF16_EPS:-0.0625}"
FILES=(tests/test_chain_equivalence.py tests/test_tree_equivalence.py tests/test_sampling_lossless.py
       tests/test_tree_sampling.py)

if [[ "$DEVICE" == cuda* ]]; then
  cuda="$(python -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null)" || {
    echo "error: python cannot import torch" >&2; exit 2; }
  if [ "$cuda" != 1 ]; then
    if [ -n "${SPECSCOPE_CHECK_REQUIRE_CUDA:-}" ]; then echo "error: no CUDA device" >&2; exit 2; fi
    echo "no CUDA device: nothing to check"
    exit 0
  fi
fi
python - "$DEVICE" <<'PY' || exit 2
import sys
from core.model.device import pick_device
try:
    print("device:", pick_device(sys.argv[1]))
except ValueError as exc:
    sys.exit(f"error: {exc}")
PY
python -c "import torch; print('gpu:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none')"

status=0
for dtype in $DTYPES; do
  eps=1e-4
  [ "$dtype" = bf16 ] && eps="$BF16_EPS"
  log="$(mktemp -t specscope-device-check-XXXX.log)"
  ties=0.05
  [ "$dtype" = bf16 ] && ties=0.5  # the near-tie share is what this check reports; it must not fail on it
  export SPECSCOPE_TEST_DEVICE="$DEVICE" SPECSCOPE_TEST_DTYPE="$dtype" SPECSCOPE_TEST_EPS="$eps" SPECSCOPE_TEST_MAX_NEAR_TIES="$ties"
  python -m pytest -q -s -p no:cacheprovider "${FILES[@]}" "$@" >"$log" 2>&1; rc1=$?
  python -m pytest -q -s -p no:cacheprovider tests/test_specbound.py -k greedy "$@" >>"$log" 2>&1; rc2=$?
  python -m pytest -q -s -p no:cacheprovider tests/test_chat.py -k equals_ar "$@" >>"$log" 2>&1 || rc2=1
  [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || status=1
  python - "$log" "$dtype" "$DEVICE" "$eps" "$rc1" "$rc2" <<'PY'
import re, sys
log, dtype, device, eps, rc1, rc2 = sys.argv[1:]
text = open(log, encoding="utf-8", errors="replace").read()
runs = ties = 0
for m in re.finditer(r"compared (\d+) runs; near-ties \(gap <= [^)]*\): (\d+)", text):
    runs, ties = runs + int(m.group(1)), ties + int(m.group(2))
summaries = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)\s*=*$", text, re.M)
ok = rc1 == rc2 == "0"
share = f"{ties / runs:.1%}" if runs else "n/a"
print(f"{dtype} on {device}: {'PASS' if ok else 'FAIL'} | greedy runs compared {runs}, near-ties {ties} "
      f"(share {share}, eps {eps}) | pytest: {' + '.join(summaries) or 'no summary (see log)'} | log {log}")
for line in text.splitlines():
    if line.startswith(("FAILED", "ERROR")) or "near-tie:" in line:
        print("   ", line[:200])
PY
  python scripts/dtype_equality.py --device "$DEVICE" --dtype "$dtype" --eps "$eps" || status=1
done
exit $status
