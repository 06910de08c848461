"""How far any tree drawn from this head can go on this machine: the best N-node tree, priced at measured costs.

Why: when no setting of TALON's knobs moves the tokens a step or the speed-up (docs/bench/real_model.md), is it the
policy or the head? For a budget N, the N nodes of highest path probability p(u) form the tree with the most
expected accepted tokens (Σ p(u), where the head is calibrated), and a static tree as wide as the budget and as
deep (K = N, D = N − 1) holds every one of them, so its final rerank keeps exactly that tree (N = 60 is grown 16
levels deep; the table says how often a verified tree reached that depth). Its MAT is the most tokens a step
this head gives at N, up to calibration. Three prices per row, each off this machine's cost curve
(core/auto/cost_model.py) with the verification at the tree's size: "priced" grows only the levels the tree uses
(one draft forward per level, at that level's width); "one draft forward" charges a single forward over one node
a step, the least any drafter that runs a forward pays, so on the best tree it bounds every N-node tree drawn
from this head; "free drafting" charges none. Other method specs are priced the same way beside them.

    OMP_NUM_THREADS=1 python scripts/tree_ceiling.py --model smollm2 --prompts assets/prompts/real.jsonl \\
        --limit 12 --N 1,2,3,4,6,8,12,16,60 --methods talon@eagle3:preset=auto,talon@eagle3:N=60,static@eagle3:N=60

Counts (MAT, levels) do not depend on timing; the priced columns read the cost curve measured at start-up.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli.bench import parse_spec  # noqa: E402
from core.auto.budget import AutoMemory  # noqa: E402
from core.auto.cost_model import measure_costs  # noqa: E402
from core.drafter_registry import drafter_factory  # noqa: E402
from core.engine import Session  # noqa: E402
from core.methods import build_method  # noqa: E402
from core.model.chat import prepare_prompt  # noqa: E402
from core.model.loading import DTYPE_CHOICES, load_model  # noqa: E402
from core.prompts import read_prompts  # noqa: E402
from core.trace import StepTrace  # noqa: E402

DEEPEST = 16  # levels grown for the N = 60 best tree: deeper top-60 nodes need a chain this head never drafts


def level_widths(t: StepTrace) -> list[int]:
    """Frontier widths of the draft forwards that grow exactly the verified tree: level l expands the distinct
    parents of the nodes at depth l (the root for l = 0)."""
    parents: dict[int, set[int]] = {}
    for node in t.nodes:
        parents.setdefault(node.depth, set()).add(node.parent)  # the root is one parent, whatever its index
    return [len(parents[d]) for d in sorted(parents)]


@dataclass
class Priced:
    """One row's steps: tokens committed, draft levels, and what AR and the steps cost in ms."""
    label: str
    cap: int | None = None  # levels its grower stopped at, where that could cut the tree
    steps: int = 0
    tokens: int = 0
    levels: int = 0
    deepest_hits: int = 0
    ar_ms: float = 0.0
    verify_ms: float = 0.0
    draft_ms: float = 0.0
    one_level_ms: float = 0.0  # one draft forward over one node a step: the least any drafter with a forward pays
    nodes: int = 0

    def add(self, traces: list[StepTrace], cost) -> None:
        for t in traces:
            widths = level_widths(t)
            self.steps += 1
            self.tokens += t.tau
            self.levels += len(widths)
            self.deepest_hits += int(self.cap is not None and len(widths) >= self.cap)
            self.ar_ms += t.tau * cost.t_verify(1)
            self.verify_ms += cost.t_verify(len(t.nodes) + 1)
            self.draft_ms += sum(cost.t_draft(w) for w in widths)
            self.one_level_ms += cost.t_draft(1)
            self.nodes += len(t.nodes)

    def line(self) -> str:
        n = max(self.steps, 1)
        priced = self.ar_ms / max(self.verify_ms + self.draft_ms, 1e-9)
        free = self.ar_ms / max(self.verify_ms, 1e-9)
        one = self.ar_ms / max(self.verify_ms + self.one_level_ms, 1e-9)
        deep = f" ({self.deepest_hits} at {self.cap})" if self.deepest_hits else ""
        return (f"| {self.label} | {self.steps} | {self.tokens / n:.2f} | {self.nodes / n:.1f} | "
                f"{self.levels / n:.2f}{deep} | {priced:.2f}× | {one:.2f}× | {free:.2f}× |")


def best_spec(n: int, drafter: str) -> tuple[str, int | None]:
    """The static tree that holds the best n-node tree, and its depth cap where one could cut that tree (an
    n-node tree is at most n levels deep)."""
    depth = min(n, DEEPEST)
    return f"static@{drafter}:N={n}:K={n}:depth={depth - 1}", depth if depth < n else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES)
    ap.add_argument("--drafter", default="eagle3")
    ap.add_argument("--prompts", default="assets/prompts/real.jsonl")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--N", default="1,2,3,4,6,8,12,16,60", help="budgets of the best trees")
    ap.add_argument("--methods", default="", help="other method specs, priced the same way")
    args = ap.parse_args(argv)
    target = load_model(args.model, "auto", args.dtype)
    make = drafter_factory(args.drafter, target)
    texts = [r["prompt"] for r in read_prompts(args.prompts)][: args.limit]
    prompts = [prepare_prompt(target.tokenizer, p, "auto").ids for p in texts]
    Session(target, build_method("talon"), prompts[0], max_new_tokens=8, draft=make()).generate()
    cost = measure_costs(target, make(), reps=21, use_disk=False, progress=lambda m: print(m, file=sys.stderr))
    rows = [(*best_spec(int(n), args.drafter), f"best {n}-node tree") for n in args.N.split(",") if n]
    rows += [(spec, None, spec) for spec in filter(None, args.methods.split(","))]
    print(f"{len(prompts)} prompts of {args.prompts}, {args.max_new_tokens} new tokens, {target.name} "
          f"{str(target.dtype).removeprefix('torch.')}; a one-token forward {cost.t_verify(1):.1f} ms, a draft "
          f"forward over 1 node {cost.t_draft(1):.1f} ms\n")
    print("| row | steps | MAT | nodes a step | draft levels | priced speed-up | one draft forward | free drafting |")
    print("|---|---|---|---|---|---|---|---|")
    base = {"auto_memory": AutoMemory()}  # as the bench: `auto` rests where the last prompt left it
    for spec, cap, label in rows:
        _, name, _, kn = parse_spec(spec, base, args.drafter)
        row = Priced(label, cap)
        for ids in prompts:
            res = Session(target, build_method(name, **kn), ids, max_new_tokens=args.max_new_tokens,
                          draft=make()).generate()
            row.add(res.traces, cost)
        print(row.line(), flush=True)


if __name__ == "__main__":
    main()
