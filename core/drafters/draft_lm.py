"""The `model` drafter: a separate small causal LM sharing the target's tokenizer (the embedded 1-layer draft).

It keeps its own KV cache of the committed text; each step feeds the pending committed tokens at the root, then
one forward per tree level over the frontier with a tree mask (node_mask), and on accept compacts the accepted
path's entries to the front (the rest of the tree's entries are dropped)."""
from __future__ import annotations

import torch

from core.draft_tree import DraftTree
from core.drafters.contract import BaseDrafter, node_mask
from core.model.causal_lm import CausalLM
from core.model.kv_cache import KVCache
from core.trace import ROOT


class ModelDrafter(BaseDrafter):
    """A draft LM as a drafter: the target's tree, drafted by a smaller model of its family."""

    def __init__(self, lm: CausalLM, name: str = "model") -> None:
        self.lm, self.name = lm, name
        self.cache: KVCache | None = None

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        self.cache = self.lm.new_cache(max_len)
        head = ids[:-1]
        if head:
            self.lm.forward(head, range(len(head)), self.cache)

    def begin(self, ids: list[int]) -> None:
        self.base = self.cache.length  # committed slots already cached
        self.pending = ids[self.base:]  # committed tokens the draft has not seen yet
        self.root_pos = len(ids) - 1
        self.slots: dict[int, int] = {}  # node -> cache slot, for nodes fed this step

    def room(self) -> int:
        return self.cache.max_len - max(self.cache.length, self.base + len(self.pending))

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        lm, cache = self.lm, self.cache
        if frontier == [ROOT]:
            n = len(self.pending)
            return lm.forward(self.pending, range(self.base, self.base + n), cache).logits[-1:]  # (1, V)
        start = cache.length
        mask = node_mask(frontier, tree, self.slots, self.base + len(self.pending), start, lm.device)
        positions = [self.root_pos + 1 + tree.depths[f] for f in frontier]
        return lm.forward([tree.tokens[f] for f in frontier], positions, cache, mask=mask).logits  # (F, V)

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        if self.cache.length <= self.base:  # the draft did not run this step
            return
        fed = [self.slots[i] for i in path if i in self.slots]  # the last accepted node may be unfed
        self.cache.compact(fed, start=self.base + len(self.pending))

    def drop(self) -> None:
        self.cache = None

    def fresh(self) -> "ModelDrafter":
        return ModelDrafter(self.lm, self.name)

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.lm.name}"

    def mark(self) -> int:
        return self.cache.length

    def rewind(self, mark: int) -> None:
        self.cache.length, self.slots = mark, {}
