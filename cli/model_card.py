"""Write assets/models/README.md (the model card) from metrics.json and the training logs.

    python -m cli.model_card

Sections that other trainers append (from a line starting with "## Exit heads") are kept.
"""
from __future__ import annotations

import json
import math
import platform
from pathlib import Path

from cli.common import run_main
from core.model.loading import ASSETS

KEEP_FROM = "## Exit heads"


def last_losses(log: Path, window: int = 50) -> float | None:
    """Mean training loss over the last `window` logged steps (a resumed run may log a step twice)."""
    if not log.exists():
        return None
    by_step = {}
    for line in log.read_text().splitlines():
        row = json.loads(line)
        by_step[row["step"]] = row["ce"]
    tail = [by_step[s] for s in sorted(by_step)[-window:]]
    return sum(tail) / len(tail)


def history_note(m: dict) -> str:
    """Say honestly when a stage was resumed with a different schedule length (the cosine changed there)."""
    notes = []
    for stage, runs in m.get("schedule_history", {}).items():
        if len(runs) > 1:
            parts = "; ".join(f"from step {r['start']} with --{stage}-steps {r['total_steps']} "
                              f"--batch-size {r['batch_size']} --seq-len {r['seq_len']}" for r in runs)
            notes.append(f"The shipped {stage} was trained in {len(runs)} legs: {parts}; rerun those legs in order "
                         "(stop each at the next leg's start step) to reproduce it exactly.")
    return " ".join(notes)


def train_minutes(log: Path) -> float | None:
    """Wall minutes over every leg: the log's clock restarts at each (re)start."""
    if not log.exists():
        return None
    total, last = 0.0, 0.0
    for line in log.read_text().splitlines():
        t = json.loads(line)["s"]
        if t < last:
            total += last
        last = t
    return (total + last) / 60


def tokens_seen(m: dict, stage: str) -> int:
    """Training tokens of a stage, leg by leg (legs may differ in batch shape)."""
    a = m["args"]
    runs = m.get("schedule_history", {}).get(stage) or [{"start": 0, "batch_size": a["batch_size"], "seq_len": a["seq_len"]}]
    ends = [r["start"] for r in runs[1:]] + [a[f"{stage}_steps"]]
    return sum((end - r["start"]) * r["batch_size"] * r["seq_len"] for r, end in zip(runs, ends))


def bpb_row(m: dict) -> str:
    """Bits per byte of held-out source: comparable across tokenizers, unlike nats per token."""
    if "heldout_bytes" not in m:
        return ""
    per = m["heldout_tokens"] / m["heldout_bytes"] / math.log(2)
    return (f"| held-out bits per byte (any tokenizer) | {m['target_heldout_ce'] * per:.3f} | "
            f"{m['draft_heldout_ce'] * per:.3f} |\n")


def legs_text(ls: dict) -> str:
    """'in 2 legs (--steps 1200, then resumed with --steps 3000, each on a cosine of its own) ' when resumed."""
    legs = ls.get("legs", [])
    if len(legs) < 2:
        return ""
    steps = ", then resumed with ".join(f"--steps {g['steps']}" for g in legs)
    return f"in {len(legs)} legs ({steps}, each on a cosine of its own) "


def layerskip_note(ls: dict, base_cmd: str, out: str) -> str:
    """The target's second stage (cli/train_layerskip.py), from the layerskip.json it wrote beside the model."""
    b, a, g = ls["before"], ls["after"], ls["args"]
    depth = min(4, len(a["lens_agreement"])) - 1
    return (f"- Target: trained by `{base_cmd}` (whose draft is not shipped), then continued by "
            f"`python -m cli.train_layerskip --model OUT/target --out {out} --steps {g['steps']} "
            f"--p-max {g['p_max']} --exit-weight {g['exit_weight']} --lr {g['lr']} --seed {g['seed']}` "
            f"{legs_text(ls)}({ls['train_s'] / 60:.1f} min): layer dropout rising with depth to p_max at the last layer and an early-exit "
            f"cross-entropy through the final norm and tied LM head, so that SpecBound's shallow layers are worth exiting "
            f"from. Held-out ({b['heldout_tokens']:,} tokens): final-layer CE {b['final_ce']:.3f} → {a['final_ce']:.3f}; "
            f"logit-lens top-1 agreement with the last layer after layer {depth + 1} "
            f"{b['lens_agreement'][depth]:.2f} → {a['lens_agreement'][depth]:.2f}. "
            f"Every step in order, with times: `docs/bench/layerskip.md`.\n")


def render(m: dict, work: Path, layerskip: dict | None = None) -> str:
    """The card's head; `layerskip` (the target's layerskip.json) when the draft was distilled from a target
    trained further by cli/train_layerskip.py (`--target-from`)."""
    a = m["args"]
    train_target = last_losses(work / "target.log.jsonl")
    train_draft = last_losses(work / "draft.log.jsonl")
    cmd = (f"python -m cli.train_embedded --out assets/models --work {a['work']} --target-steps {a['target_steps']} "
           f"--draft-steps {a['draft_steps']} --batch-size {a['batch_size']} --seq-len {a['seq_len']} "
           f"--hidden {a['hidden']} --ffn {a['ffn']} --target-layers {a['target_layers']} --lr {a['lr']} --seed {a['seed']}")
    fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    note = history_note(m)
    legs = f"\n  {note}" if note else ""
    target_training = f"{a['target_steps']} steps, {tokens_seen(m, 'target') / 1e6:.1f} M tokens, next-token CE"
    target_minutes = fmt(train_minutes(work / 'target.log.jsonl')) + " min"
    target_note = ""
    if a.get("target_from") and layerskip is not None:
        base_cmd = cmd.replace("--out assets/models", "--out OUT").replace(f"--work {a['work']}", "--work .cache/train_base")
        cmd = (f"python -m cli.train_embedded --target-from {a['target_from']} --out assets/models --work {a['work']} "
               f"--draft-steps {a['draft_steps']} --batch-size {a['batch_size']} --seq-len {a['seq_len']} --lr {a['lr']} "
               f"--seed {a['seed']}")
        target_training += f", then {layerskip['args']['steps']} steps of LayerSkip training (below)"
        target_minutes = f"{layerskip['train_s'] / 60:.1f} min (LayerSkip stage)"
        target_note = layerskip_note(layerskip, base_cmd, a['target_from'])
    return f"""# Embedded models of SpecScope

Two causal LMs on one byte-level BPE tokenizer, trained on this repository's machine by
`cli/train_embedded.py`, stored as fp16 safetensors in Hugging Face format (Llama architecture):

| | target (`target/`) | draft (`draft/`) |
|---|---|---|
| layers | {a['target_layers']} | {a['draft_layers']} |
| hidden / FFN / heads | {a['hidden']} / {a['ffn']} / {a['hidden'] // 64} | {a['hidden']} / {a['ffn']} / {a['hidden'] // 64} |
| parameters | {m['target_params'] / 1e6:.2f} M | {m['draft_params'] / 1e6:.2f} M |
| weights on disk | {m['target_mb']:.1f} MB | {m['draft_mb']:.1f} MB |
| context | {a['ctx']} tokens | {a['ctx']} tokens |
| training | {target_training} | {a['draft_steps']} steps, {tokens_seen(m, 'draft') / 1e6:.1f} M tokens, distilled from the target (KL + 0.1·CE), embedding initialised from the target |
| train loss (last 50 steps, nats/token) | {fmt(train_target)} | {fmt(train_draft)} |
| **held-out cross-entropy** (nats/token) | **{m['target_heldout_ce']:.3f}** | **{m['draft_heldout_ce']:.3f}** |
{bpb_row(m)}| training wall time (all legs, 2 CPU cores) | {target_minutes} | {fmt(train_minutes(work / 'draft.log.jsonl'))} min |

- **Draft–target greedy agreement on held-out text: {m['draft_greedy_agreement'] * 100:.1f}%** of
  {m['heldout_tokens']:,} positions (the draft's argmax equals the target's).
- Tokenizer: byte-level BPE, {a['vocab_size']} tokens, `<|endoftext|>` separates files (and starts every prompt).
- Data: the `.py` files of the standard library of Python {platform.python_version()} ({m['train_files']} files,
  {m['train_tokens']:,} tokens; `encodings/`, `pydoc_data/` and files over 400 kB skipped). Held out: every file
  whose SHA-1 of its relative path is 0 mod 25 (`cli/corpus.py`), test suites excluded from the held-out set:
  {len(m['heldout_files'])} files — {', '.join(m['heldout_files'])}.
{target_note}- Machine: 2 CPU cores (AVX-512-BF16), bf16 autocast for the matmuls, fp32 master weights, AdamW
  (β = 0.9, 0.95, weight decay 0.1), cosine schedule to 10% with warm-up, gradient clipping at 1.
- Reproduce: `{cmd}` (checkpoints in `--work` make it resumable; the data order depends only on seed and step).{legs}
  The prompts in `assets/prompts/heldout.jsonl` come from `python -m cli.make_prompts`.
"""


def main() -> None:
    models = ASSETS / "models"
    m = json.loads((models / "metrics.json").read_text())
    card = models / "README.md"
    kept = ""
    if card.exists() and KEEP_FROM in card.read_text():
        text = card.read_text()
        kept = "\n" + text[text.index(KEEP_FROM):]
    ls_path = models / "target" / "layerskip.json"
    layerskip = json.loads(ls_path.read_text()) if ls_path.exists() else None
    card.write_text(render(m, Path(m["args"]["work"]), layerskip) + kept)
    print(f"wrote {card}")


if __name__ == "__main__":
    run_main(main)
