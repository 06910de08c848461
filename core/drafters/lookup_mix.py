"""`lookup_mix` (ours): a model drafter's q with prompt lookup's mixed in, so a tree also follows what the text
has already said.

Why: over a whole answer a small model's greedy text repeats itself (its list items, its own phrases, loops), and
there prompt lookup's continuation is accepted far more often than a head's guess. On SmolLM2's chat requests at
256 new tokens a chain on prompt lookup ran 1.67× our AR where TALON on the EAGLE-3 head ran 1.34×
(docs/bench/real_model.md, run 8). At a node whose path ends in an n-gram seen earlier in the text,

    q(w) = (1 − λ) · q_drafter(w) + λ · q_lookup(w),

elsewhere q_drafter; the tree policy shapes over this q as over any other, and the drafter still expands every
node (lookup needs no forward of its own). Trees are verified without q, and a chain draws its tokens from this
same q and its rejection rule reads it, so greedy output is AR's and sampling keeps the target's distribution.
"""
from __future__ import annotations

import torch

from core.draft_tree import DraftTree
from core.drafters.contract import BaseDrafter, Drafter, Shallow
from core.drafters.lookup import LookupDrafter


class LookupMix(BaseDrafter):
    """`inner` with prompt lookup's counts mixed into its rows at share λ where an n-gram matched. Scores inner's
    columns: a repeated token outside a reduced draft vocabulary cannot be proposed, as with inner alone (its share
    of λ is left out and the row renormalised), so trees keep being shaped over the head's own ids."""

    def __init__(self, inner: Drafter, vocab_size: int, mix: float) -> None:
        """mix: λ, checked where the knob enters (core/drafter_registry.py: knobs.LOOKUP_MIX)."""
        self.inner, self.vocab_size, self.mix = inner, vocab_size, mix
        self.lookup = LookupDrafter(vocab_size)
        self.name, self.taps, self.runs_model = inner.name, inner.taps, inner.runs_model
        self.columns = inner.columns
        self.column_of = None  # (V,): target id -> its column, -1 where the drafter has none
        if self.columns is not None:
            self.column_of = torch.full((vocab_size,), -1, dtype=torch.long)
            self.column_of[self.columns.cpu()] = torch.arange(len(self.columns))

    def __getattr__(self, attr: str):
        """What a particular drafter adds to the contract (a head's info, its draft vocabulary) is inner's."""
        if attr == "inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    @property
    def identity(self) -> str:
        return f"{self.inner.identity}|lookup{self.mix:g}"

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        self.inner.prefill(ids, feats, max_len)
        self.lookup.prefill(ids, feats, max_len)

    def begin(self, ids: list[int]) -> None:
        self.inner.begin(ids)
        self.lookup.begin(ids)

    def room(self) -> int:
        return self.inner.room()

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        z = self.inner.propose(frontier, tree)  # (F, C) over inner's columns, or (F, V)
        follows = self.lookup.follows(frontier, tree)
        rows = [r for r, f in enumerate(follows) if f]
        if not rows:
            return z
        matched = torch.tensor(rows, device=z.device)
        zf = z.float()  # a bf16 head's rows are converted once
        q = (1.0 - self.mix) * torch.softmax(zf[matched], -1)  # (M, C)
        for i, r in enumerate(rows):
            tokens = torch.tensor(list(follows[r].keys()))
            share = torch.tensor(list(follows[r].values()), dtype=torch.float32)
            share = self.mix * share / share.sum()
            cols = tokens if self.column_of is None else self.column_of[tokens]
            q[i].index_add_(0, cols[cols >= 0].to(q.device), share[cols >= 0].to(q.device))
        # a new tensor (inner's stays as it gave it); a token neither proposes stays -inf: it cannot be proposed
        return zf.index_copy(0, matched, q.log())

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        self.inner.accept(path, feats)

    def drop(self) -> None:
        self.inner.drop()
        self.lookup.drop()

    def fresh(self) -> "LookupMix":
        return LookupMix(self.inner.fresh(), self.vocab_size, self.mix)

    def shallow(self, target_base: int, pool_nodes: list[int]) -> Shallow | None:
        return self.inner.shallow(target_base, pool_nodes)

    def mark(self) -> object:
        return self.inner.mark()

    def rewind(self, mark: object) -> None:
        self.inner.rewind(mark)
