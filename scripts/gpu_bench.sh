#!/usr/bin/env bash
# Figures for README on a machine with a GPU (or any machine), in two sections:
#  embedded  the embedded pair: lossless in fp32 and bf16, every method side by side, the cost curves;
#  real      a curated public (target, EAGLE-3 head) pair, only when both are in the local Hugging Face cache
#            (nothing is downloaded: HF_HUB_OFFLINE=1 for the whole section; otherwise one "skipped" line):
#            greedy equality with AR in fp32 and bf16 with the near-tie share (scripts/dtype_equality.py),
#            raw and chat-templated prompts; the cost curve; MAT and speed-up of chain / static / TALON / auto
#            over AR, raw (--chat off) and chat-templated (--chat on), with the server settings bench prints.
#
#   bash scripts/gpu_bench.sh [--device cuda] [--limit 12] [--real-only | --embedded-only] [--small] [--dry-run]
#
# embedded: greedy equality with AR in fp32 and bf16 (chain, static, TALON, SpecBound; exits 1 on a real
# difference), then every method's tok/s beside AR, TALON vs static vs chain (cli.bench --fail-on-mismatch), the
# same on the compiled layers (--compile), then the cost curves. Sized for one call of at most 8 minutes on one
# GPU; --small shrinks it (2 prompts, 16 tokens, no compiled run, no curves) so a CPU runs it in a minute or two
# (tests/test_device_check.py).
# --dry-run prints every command instead of running it (and whether the pair is cached), so the script can be
# checked on a CPU machine. The pair: SPECSCOPE_REAL_TARGET / SPECSCOPE_REAL_HEAD (default Qwen/Qwen3-1.7B with
# AngelSlim/Qwen3-1.7B_eagle3, listed for that target in AngelSlim's and SafeAILab/EAGLE's READMEs; another:
# meta-llama/Llama-3.1-8B-Instruct with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, gated: HF_TOKEN to download it),
# prompts SPECSCOPE_REAL_PROMPTS (default assets/prompts/chat.jsonl). Fetch a pair beforehand with
# `huggingface-cli download ID`. Exit status: 0 when every command passed, 1 when one failed.
set -uo pipefail
cd "$(dirname "$0")/.."
DRY="" ONLY="" SMALL="" DEVICE=auto LIMIT=12
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --real-only) ONLY=real ;;
    --embedded-only) ONLY=embedded ;;
    --small) SMALL=1; LIMIT=2; extra+=(--limit 2) ;;
    --device) DEVICE="${2:?--device needs a value}"; extra+=("$1" "$2"); shift ;;
    --limit) LIMIT="${2:?--limit needs a value}"; extra+=("$1" "$2"); shift ;;
    *) extra+=("$1") ;;
  esac
  shift
done
status=0
run() {  # one command, or its printed form under --dry-run; a failure is remembered, the rest still runs
  if [ -n "$DRY" ]; then printf '+'; printf ' %q' "$@"; printf '\n'; return 0; fi
  "$@" || status=1
}

embedded() {  # 1. lossless in fp32 and bf16; 2. tok/s of every method side by side (exits 1 on a mismatch); 3. curves
  local dtype eps n_eq=40 tokens=64
  [ -n "$SMALL" ] && { n_eq=2; tokens=16; }
  for dtype in fp32 bf16; do
    eps=1e-4; [ "$dtype" = bf16 ] && eps=0.0625
    run python scripts/dtype_equality.py --device "$DEVICE" --dtype "$dtype" --eps "$eps" --drafter eagle3 \
        --prompts "$n_eq" --max-new-tokens "$tokens" --methods chain,static,talon,specbound
  done
  local specs="ar,chain@eagle3,static@eagle3:preset=embedded,talon@eagle3:preset=embedded,talon@eagle3"
  specs+=",talon@eagle3:preset=embedded:mu_schedule=adaptive,talon@self:preset=embedded,specbound,specbound:preset=fast"
  [ -n "$SMALL" ] || specs+=",talon@eagle3:auto=1:N=96,talon@model:preset=embedded,talon@lookup:preset=embedded"
  run python -m cli.bench --prompts assets/prompts/heldout.jsonl --max-new-tokens "$tokens" --fail-on-mismatch \
      --methods "$specs" ${extra[@]+"${extra[@]}"}
  [ -n "$SMALL" ] && return 0
  run python -m cli.bench --prompts assets/prompts/heldout.jsonl --max-new-tokens "$tokens" --fail-on-mismatch --compile \
      --methods ar,talon@eagle3:preset=embedded,chain@eagle3,specbound:preset=fast ${extra[@]+"${extra[@]}"}
  for d in eagle3 self; do run python -m cli.cost_curve --drafter "$d" --device "$DEVICE"; echo; done
}

cached() {  # prints one line and fails when a repository's config and weights are not all in the local cache
  python - "$@" <<'PY'
import json, sys
from huggingface_hub import try_to_load_from_cache

def have(repo, name):
    return isinstance(try_to_load_from_cache(repo, name), str)

def weights(repo):
    index = try_to_load_from_cache(repo, "model.safetensors.index.json")
    if isinstance(index, str):
        shards = set(json.load(open(index))["weight_map"].values())
        return all(have(repo, s) for s in shards)
    return have(repo, "model.safetensors") or have(repo, "pytorch_model.bin")

missing = [r for r in sys.argv[1:] if not (have(r, "config.json") and weights(r))]
if missing:
    sys.exit(f"real-model section skipped: {', '.join(missing)} not in the local Hugging Face cache "
             f"(fetch with huggingface-cli download ID)")
print(f"real-model section: {', '.join(sys.argv[1:])} found in the local Hugging Face cache")
PY
}

real() {
  local target="${SPECSCOPE_REAL_TARGET:-Qwen/Qwen3-1.7B}" head="${SPECSCOPE_REAL_HEAD:-AngelSlim/Qwen3-1.7B_eagle3}"
  local prompts="${SPECSCOPE_REAL_PROMPTS:-assets/prompts/chat.jsonl}" dtype chat eps
  if ! cached "$target" "$head" 2>&1; then
    [ -n "$DRY" ] || return 0
    echo "(dry run: the commands it would run follow)"
  fi
  export HF_HUB_OFFLINE=1
  local pair=(--model "$target" --drafter eagle3 --draft "$head")
  for dtype in fp32 bf16; do  # 1. lossless on this GPU: equality with AR, and how often only at a near-tie
    eps=1e-4; [ "$dtype" = bf16 ] && eps=0.0625
    for chat in off on; do
      run python scripts/dtype_equality.py --device "$DEVICE" --dtype "$dtype" --eps "$eps" "${pair[@]}" \
          --chat "$chat" --prompt-file "$prompts" --prompts "$LIMIT" --max-new-tokens 128 --methods chain,static,talon
    done
  done
  run python -m cli.cost_curve "${pair[@]}" --device "$DEVICE"  # 2. t_verify(n) and t_draft(width) here
  local specs="ar,chain@eagle3,chain@eagle3:gamma=3,chain@eagle3:gamma=8,static@eagle3"
  specs+=",static@eagle3:N=16:K=4:depth=4,static@eagle3:N=32:K=8:depth=6,talon@eagle3,talon@eagle3:N=32"
  specs+=",talon@eagle3:N=96,talon@eagle3:auto=1:N=96"
  for chat in off on; do  # 3. MAT and speed-up over AR, raw and chat-templated prompts (paper preset)
    run python -m cli.bench "${pair[@]}" --device "$DEVICE" --prompts "$prompts" --limit "$LIMIT" \
        --max-new-tokens 128 --preset paper --chat "$chat" --methods "$specs"
  done
}

[ "$ONLY" = real ] || embedded
[ "$ONLY" = embedded ] || real
exit $status
