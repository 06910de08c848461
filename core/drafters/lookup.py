"""The `lookup` drafter: prompt lookup, no model. q(w | context) is proportional to how often w followed the
longest suffix of the context (up to `max_ngram` tokens) that occurred earlier in the committed text."""
from __future__ import annotations

from collections import Counter

import torch

from core.draft_tree import DraftTree, path_to
from core.drafters.contract import BaseDrafter
from core.trace import ROOT


class LookupDrafter(BaseDrafter):
    """An n-gram index of the committed text, grown at every begin(); its proposals cost no forward."""
    runs_model = False

    def __init__(self, vocab_size: int, max_ngram: int = 3, name: str = "lookup") -> None:
        self.vocab_size, self.max_ngram, self.name = vocab_size, max_ngram, name
        self.index: dict[tuple[int, ...], Counter] = {}
        self.ids: list[int] = []
        self.indexed = 0  # continuations ids[1:indexed] are in the index

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        self.drop()

    def begin(self, ids: list[int]) -> None:
        self.ids = list(ids)
        for j in range(max(1, self.indexed), len(ids)):  # ids[j] continues every n-gram ending at j - 1
            for n in range(1, self.max_ngram + 1):
                if j - n >= 0:
                    self.index.setdefault(tuple(ids[j - n: j]), Counter())[ids[j]] += 1
        self.indexed = len(ids)

    def room(self) -> int:
        return 1 << 30

    def follows(self, frontier: list[int], tree: DraftTree) -> list[Counter | None]:
        """Per frontier node: how often each token followed the longest suffix of its context (committed text, then
        its path) seen earlier in the text; None where no suffix was."""
        out: list[Counter | None] = []
        for node in frontier:
            path = [] if node == ROOT else [tree.tokens[i] for i in path_to(tree.parents, node)]
            context = (self.ids[-self.max_ngram:] + path)[-self.max_ngram:]  # only the last n tokens are matched
            found = None
            for n in range(len(context), 0, -1):
                found = self.index.get(tuple(context[-n:]))
                if found:
                    break
            out.append(found or None)
        return out

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        out = torch.full((len(frontier), self.vocab_size), float("-inf"))
        for row, follow in enumerate(self.follows(frontier, tree)):
            if follow:
                toks = torch.tensor(list(follow.keys()))
                out[row, toks] = torch.tensor(list(follow.values()), dtype=torch.float32).log()
        return out  # (F, V)

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        """Lookup reads the committed text at the next begin(); nothing to bring up to date."""

    def drop(self) -> None:
        self.index, self.ids, self.indexed = {}, [], 0

    def fresh(self) -> "LookupDrafter":
        return LookupDrafter(self.vocab_size, self.max_ngram, self.name)

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.max_ngram}-gram"
