#!/usr/bin/env bash
# On a machine with a GPU (or any machine): this machine's cost curves, then `auto` beside fixed budgets
# for each drafter on held-out prompts. Prints markdown tables for README.
#   bash scripts/gpu_bench.sh [--device cuda] [--limit 12]
set -euo pipefail
cd "$(dirname "$0")/.."
extra=("$@")
for d in eagle3 model; do python -m cli.cost_curve --drafter "$d" "${extra[@]:0:2}"; echo; done
specs=ar
for d in eagle3 model lookup; do  # the embedded shape (K=2, mu=0.1, T_shape=0.5) over N, auto, the paper preset
  for n in 8 16 32 60 96; do specs+=",talon@$d:N=$n"; done
  specs+=",talon@$d:auto=1:N=96,talon@$d:N=60:K=10:mu=0.03:shape_temperature=1"
done
python -m cli.bench --prompts assets/prompts/heldout.jsonl --max-new-tokens 64 --preset embedded --methods "$specs" "${extra[@]}"
