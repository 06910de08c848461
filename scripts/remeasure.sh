#!/usr/bin/env bash
# Re-run the commands behind README's tables on this machine, one after another (give it the machine to
# itself: OMP_NUM_THREADS=1, nothing else running), each section's output in OUT/<section>.txt.
# Use it after anything that moves the numbers: new embedded models, a faster engine, another machine.
#   bash scripts/remeasure.sh OUT [section ...]
# Sections (all when none is named), roughly in minutes on the 2-core Intel Xeon VM (27 in all in session 11):
#   drafters (15)  methods × drafters with SpecBound and the self drafter, 2 repeats (README "Methods × drafters",
#                  docs/bench/drafters.md; about 15 min on the AMD EPYC VM of 2026-12-03)
#   acceptance (1) the drafters' first-token acceptance in decoding (chain γ = 1, 40 prompts)
#   cost (1)       the cost curves auto uses (README "What a step costs here")
#   shape (7)      the tree-shape sweeps on the head, the draft LM and lookup (docs/bench/shape.md)
#   n60 (2)        TALON vs the static tree at N = 60 on the head (docs/bench/n60_head.md)
#   auto (13)      auto beside fixed budgets, two runs of --repeat 2 (docs/bench/auto.md)
#   contract (1)   AR vs chain through cli.generate + cli.summarize
#   specbound (8)  cli.exit_probe (agreement and calibration per layer, check costs, layers verified again), then
#                  the fast preset's exit layer re-chosen (writes layer_heads.json; README "SpecBound")
#   mu (20)        adaptive μ beside a fixed-μ sweep on three drafters (docs/bench/mu_schedule.md)
#   profile (1)    one TALON step phase by phase (scripts/step_profile.py)
#   rows (1)       the target's products for 1..8 rows, in cache and streamed, five layouts (scripts/row_cost.py)
#   kernels (1)    the kernel × row-count table behind the CPU plan, measured anew (scripts/kernel_plan.py)
# The real model (python -m cli.get_model smollm2 first; not in the default set), on held-out requests no head
# was trained on (assets/prompts/real.jsonl, chat template), docs/bench/real_model.md:
#   real-cost (3)  SmolLM2's t_verify(n) through our own forward in fp32 and in bf16
#   real-exit (8)  the fast preset's exit layer chosen on SmolLM2 (writes assets/models/smollm2/layer_heads.json)
#   real (20)      methods × drafters on SmolLM2 in the precision auto picks here, with transformers' peers
#   real-fp32 (12) every method and drafter against AR in fp32 (the ≠AR column must read 0)
#   real-code (5)  the held-out code requests (rows 13–24 of real.jsonl): AR, TALON at auto, chains, SpecBound fast,
#                  two repeats
#   real-long (16) whole answers: 256 new tokens on the chat requests (rows 1–12), then the code ones (13–24): AR,
#                  TALON at auto with and without prompt lookup mixed into the head's q (lookup_mix), chain@lookup
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/remeasure.sh OUT [section ...]}
shift
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(drafters acceptance cost shape n60 auto contract specbound mu profile rows kernels)
mkdir -p "$out"
export OMP_NUM_THREADS=1
P=(--prompts assets/prompts/heldout.jsonl --max-new-tokens 64)
bench() { python -m cli.bench "${P[@]}" "$@"; }
REAL_METHODS=ar,talon@eagle3,static@eagle3,chain@eagle3,talon@eagle3:preset=auto,talon@lookup:preset=embedded,chain@lookup,talon@self:preset=embedded:N=4,specbound,specbound:alpha=0,specbound:preset=fast,specbound:preset=fast:alpha=0

for s in "${sections[@]}"; do
  echo "== $s ($(date -u +%H:%M:%S))"
  case $s in
    drafters)
      bench --limit 12 --repeat 2 --methods ar,chain@model,chain@eagle3,chain@lookup,chain@self,static@eagle3:preset=embedded,talon@model:preset=embedded,talon@eagle3:preset=embedded,talon@lookup:preset=embedded,talon@self:preset=embedded,talon@self:preset=embedded:N=4,talon@eagle3,specbound,specbound:alpha=0,specbound:preset=fast,specbound:preset=fast:alpha=0,specbound:exit_heads=shared,specbound:preset=fast:exit_heads=shared ;;
    acceptance)
      bench --limit 40 --methods ar,chain@eagle3:gamma=1,chain@model:gamma=1 ;;
    cost)
      for d in eagle3 model; do python -m cli.cost_curve --drafter "$d"; done ;;
    shape)
      M=ar,chain@eagle3
      for T in 0.5 0.7; do for K in 2 3 4; do for mu in 0.03 0.1 0.2; do for N in 12 16 24; do
        M=$M,talon@eagle3:N=$N:K=$K:mu=$mu:shape_temperature=$T; done; done; done; done
      bench --limit 12 --methods "$M"
      M=ar,chain@model,chain@lookup
      for T in 0.5 1.0; do for K in 2 3 4; do for mu in 0.03 0.1; do for N in 8 12 16; do
        M=$M,talon@model:N=$N:K=$K:mu=$mu:shape_temperature=$T; done; done; done; done
      for K in 2 3 10; do for mu in 0.03 0.1; do for N in 4 8 12; do M=$M,talon@lookup:N=$N:K=$K:mu=$mu; done; done; done
      bench --limit 12 --methods "$M" ;;
    n60)
      M=ar
      for T in 0.5 0.7; do for K in 4 10; do
        for mu in 0.03 0.1 0.2; do M=$M,talon@eagle3:N=60:K=$K:mu=$mu:shape_temperature=$T; done
        M=$M,static@eagle3:N=60:K=$K:shape_temperature=$T
      done; done
      M=$M,static@eagle3:N=60:K=4,static@eagle3:N=60:K=6:shape_temperature=0.5,talon@eagle3:N=60:K=6:mu=0.1:shape_temperature=0.5,talon@eagle3:N=60:K=10:mu=0.1:k_init=2:shape_temperature=0.5
      bench --limit 12 --methods "$M" ;;
    auto)
      M=ar
      for D in model eagle3 lookup; do
        for N in 4 6 8 12 16; do M=$M,talon@$D:N=$N; done
        M=$M,talon@$D:N=6:mu=0.03,talon@$D:N=8:mu=0.03,talon@$D:N=6:mu=0.2,talon@$D:N=8:mu=0.2,talon@$D:N=96:auto=1,talon@$D:N=60:K=10:mu=0.03:shape_temperature=1
      done
      M=$M,static@eagle3:N=8,static@eagle3:N=12,static@eagle3:N=96:auto=1,static@eagle3:N=60:K=10:shape_temperature=0.5
      for run in A B; do echo "-- run $run"; bench --limit 12 --preset embedded --repeat 2 --methods "$M"; done ;;
    contract)
      tmp=$(mktemp -d)
      for m in ar chain; do python -m cli.generate --method $m --drafter model --prompts assets/prompts/heldout.jsonl > "$tmp/$m.jsonl"; done
      python -m cli.summarize "$tmp/ar.jsonl" "$tmp/chain.jsonl" ;;
    specbound)
      python -m cli.exit_probe --n 40 --runs paper,preset=paper:alpha=0,fast,preset=paper:exit_heads=shared,preset=fast:exit_heads=shared
      python -m cli.tune_specbound --n 12 --max-new-tokens 64 --choose-exit-layers --repeat 2 --grid alpha=0.5 tau_exit=0.3 d_max=4 w_max=3 ;;
    mu)
      M=ar; for D in eagle3 model lookup; do for mu in 0.03 0.05 0.1 0.2 0.3; do M=$M,talon@$D:mu=$mu; done; M=$M,talon@$D:mu_schedule=adaptive; done
      bench --limit 12 --preset embedded --repeat 2 --methods "$M" ;;
    real-cost)
      for dt in fp32 bf16; do python -m cli.cost_curve --model smollm2 --drafter eagle3 --dtype "$dt"; done ;;
    real-exit)
      python -m cli.tune_specbound --model smollm2 --prompts assets/prompts/real.jsonl --n 6 --max-new-tokens 48 \
        --choose-exit-layers --grid alpha=0.5 tau_exit=0.3 d_max=4 w_max=3 ;;
    real)
      python -m cli.bench --model smollm2 --prompts assets/prompts/real.jsonl --limit 12 --max-new-tokens 64 --peers \
        --peer-exit-layers 8,15 --methods "$REAL_METHODS" ;;
    real-fp32)
      python -m cli.bench --model smollm2 --dtype fp32 --prompts assets/prompts/real.jsonl --limit 12 \
        --max-new-tokens 32 --methods "$REAL_METHODS" ;;
    real-code)
      code=$(mktemp --suffix=.jsonl)
      sed -n 13,24p assets/prompts/real.jsonl > "$code"
      python -m cli.bench --model smollm2 --prompts "$code" --limit 12 --max-new-tokens 64 --repeat 2 \
        --methods ar,talon@eagle3:preset=auto,chain@eagle3,chain@lookup,specbound:preset=fast ;;
    real-long)
      long=ar,talon@eagle3:preset=auto,talon@eagle3:preset=auto:lookup_mix=0.6,chain@lookup
      for rows in 1,12 13,24; do
        part=$(mktemp --suffix=.jsonl)
        sed -n "${rows}p" assets/prompts/real.jsonl > "$part"
        python -m cli.bench --model smollm2 --prompts "$part" --limit 12 --max-new-tokens 256 --methods "$long"
      done ;;
    profile)
      python scripts/step_profile.py ;;
    rows)
      python scripts/row_cost.py --rows 1,2,3,4,8,13 ;;
    kernels)
      python scripts/kernel_plan.py ;;
    *) echo "unknown section: $s" >&2; exit 2 ;;
  esac > "$out/$s.txt" 2>&1
  tail -n 3 "$out/$s.txt"
done
