"""The drafter contract: where q comes from, behind one seam for every way of drafting a tree (or a chain, a
K = 1 tree), in the spirit of transformers' CandidateGenerator but for trees.

A drafter owns its own state (caches) for one session. What every drafter writes:

- `prefill(ids, feats, max_len)`: the target has cached ids[:-1]; `feats` are its hidden states there
  (only for drafters that read them: `taps` names the target layers whose inputs they want);
- `begin(ids)`: a step starts from the committed ids;
- `room()`: how many more slots its caches hold this step;
- `propose(frontier, tree)`: one batched forward over the frontier nodes ([ROOT] first) -> (F, C) logits
  over the target ids `columns` (C,), or over the whole target vocabulary (F, V) where `columns` is None
  (-inf = cannot propose); `columns` never changes for a drafter. A drafter with a reduced vocabulary scores
  only its own ids, so the softmax and Top-m over them cost a fraction of V's (`widen` makes the (F, V) row);
- `accept(path, feats)`: the verified path (the drafter's own node ids, root downwards) and, when asked
  for, the target's hidden states of the pending tokens and that path; the drafter brings its cache
  up to date with what was committed;
- `drop()`: forget every cache (the session rebuilds from its committed text on the next step);
- `fresh()`: a new drafter of the same kind on the same weights (no caches).

What BaseDrafter supplies, for the drafters that need nothing else:

- `shallow(target_base, pool_nodes)`: what the drafter computed of the verification's rows, for a drafter that
  runs the target's own first layers (core/drafters/self_drafter.py); None for every other drafter;
- for the cost model (core/auto/cost_model.py), which times one frontier's forward over and over: `runs_model`
  (a drafter that runs no model costs nothing), `mark()` / `rewind(mark)` (back to where a step's proposals
  started: a drafter whose proposals leave nothing behind keeps the no-op default) and `identity` (kind and
  weights: two draft LMs never share a cached cost curve).

The tree policies (core/trees/policies.py), the step loop (core/trees/method.py) and the cost model know
nothing else of a drafter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from core.draft_tree import DraftTree, path_to


@dataclass
class Shallow:
    """What a self-drafting drafter computed of this step's verification rows ([pending tokens, tree nodes])."""
    layer: int  # ℓ: these rows have their K/V of layers 0..ℓ−1 below and their state after layer ℓ
    rows: list[int]  # row indices, ascending
    h: torch.Tensor  # (len(rows), d)
    k: torch.Tensor  # (ℓ, H_kv, len(rows), D)
    v: torch.Tensor  # (ℓ, H_kv, len(rows), D)


class Drafter(Protocol):
    name: str  # its kind: model | eagle3 | lookup | self (core/drafter_registry.py)
    taps: tuple[int, ...]  # target hidden-state indices (0 = embeddings) the drafter reads; () = none
    runs_model: bool  # its proposals cost a forward (lookup's do not)
    columns: torch.Tensor | None  # (C,) target id of each column `propose` scores; None = all V, in order

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None: ...

    def begin(self, ids: list[int]) -> None: ...

    def room(self) -> int: ...

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor: ...

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None: ...

    def drop(self) -> None: ...

    def fresh(self) -> "Drafter": ...

    def shallow(self, target_base: int, pool_nodes: list[int]) -> Shallow | None: ...

    @property
    def identity(self) -> str: ...  # kind and weights, e.g. "model:assets/models/draft"

    def mark(self) -> object: ...  # where this step's proposals begin (after begin and the root proposal)

    def rewind(self, mark: object) -> None: ...  # forget the proposals made since `mark`


class BaseDrafter:
    """The contract's defaults: no taps, a model that runs, nothing computed for the verification, proposals
    that leave nothing to rewind, and the kind as the identity. A drafter overrides what it does differently."""
    name = "drafter"
    taps: tuple[int, ...] = ()
    runs_model = True
    columns: torch.Tensor | None = None

    @property
    def identity(self) -> str:
        return self.name

    def shallow(self, target_base: int, pool_nodes: list[int]) -> Shallow | None:
        """Only a drafter that runs the target's own first layers computes any of the verification."""
        return None

    def mark(self) -> object:
        return None

    def rewind(self, mark: object) -> None:
        """Proposals that change nothing have nothing to forget."""


def widen(z: torch.Tensor, columns: torch.Tensor | None, vocab_size: int) -> torch.Tensor:
    """A proposal's (F, C) logits over `columns` -> (F, V) over the target's vocabulary, -inf elsewhere."""
    if columns is None:
        return z
    out = torch.full((z.shape[0], vocab_size), float("-inf"), dtype=z.dtype, device=z.device)
    out[:, columns] = z
    return out


def node_mask(frontier: list[int], tree: DraftTree, slots: dict[int, int], context: int, start: int,
              device: torch.device) -> torch.Tensor:
    """(F, start + F) bool for a forward over frontier nodes written at slots [start, start + F): the
    committed context [0, context), each node's ancestors (at `slots`) and itself. Records the new slots."""
    mask = torch.zeros(len(frontier), start + len(frontier), dtype=torch.bool, device=device)
    mask[:, :context] = True
    rows, cols = [], []
    for row, node in enumerate(frontier):
        for anc in path_to(tree.parents, node)[:-1]:
            rows.append(row)
            cols.append(slots[anc])
        rows.append(row)
        cols.append(start + row)
        slots[node] = start + row
    mask[rows, cols] = True
    return mask
