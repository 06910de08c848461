"""Drafters: where q comes from. One seam for every way of drafting a tree (or a chain, a K = 1 tree).

A drafter owns its own state (caches) for one session and speaks four verbs, in the spirit of
transformers' CandidateGenerator but for trees:

- `prefill(ids, feats, max_len)`: the target has cached ids[:-1]; `feats` are its hidden states there
  (only for drafters that read them: `taps` names the target layers whose inputs they want);
- `begin(ids)`: a step starts from the committed ids;
- `propose(frontier, tree)`: one batched forward over the frontier nodes ([ROOT] first) -> (F, V) logits
  over the target's vocabulary (-inf = cannot propose);
- `accept(path, feats)`: the verified path (the drafter's own node ids, root downwards) and, when asked
  for, the target's hidden states of the pending tokens and that path; the drafter brings its cache
  up to date with what was committed;
- `shallow(target_base, pool_nodes)`: what the drafter computed of the verification's rows, for a drafter that
  runs the target's own first layers (core/self_drafter.py); None for every other drafter.

`drop()` forgets every cache (the session rebuilds from its committed text on the next step). For the cost
model (core/cost_model.py), which times one frontier's forward over and over: `runs_model` (a drafter that
runs no model costs nothing), `mark()` / `rewind(mark)` (back to where a step's proposals started) and
`identity` (kind and weights: two draft LMs never share a cached cost curve). The tree policies
(core/tree_policies.py), the step loop (core/tree_method.py) and the cost model know nothing else.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Protocol

import torch

from core.kv_cache import KVCache
from core.model import CausalLM
from core.trace import ROOT
from core.draft_tree import DraftTree, path_to

if TYPE_CHECKING:
    from core.self_drafter import Shallow


class Drafter(Protocol):
    name: str  # its kind: model | eagle3 | lookup (core/drafter_loading.py)
    taps: tuple[int, ...]  # target hidden-state indices (0 = embeddings) the drafter reads; () = none
    runs_model: bool  # its proposals cost a forward (lookup's do not)

    @property
    def identity(self) -> str: ...  # kind and weights, e.g. "model:assets/models/draft"

    def mark(self) -> object: ...  # where this step's proposals begin (after begin and the root proposal)

    def rewind(self, mark: object) -> None: ...  # forget the proposals made since `mark`

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None: ...

    def begin(self, ids: list[int]) -> None: ...

    def room(self) -> int: ...

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor: ...

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None: ...

    def shallow(self, target_base: int, pool_nodes: list[int]) -> "Shallow | None": ...

    def drop(self) -> None: ...

    def fresh(self) -> "Drafter": ...  # a new drafter of the same kind on the same weights (no caches)


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


class ModelDrafter:
    """A separate small causal LM sharing the target's tokenizer (the embedded 1-layer draft)."""
    taps: tuple[int, ...] = ()
    runs_model = True

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

    def shallow(self, target_base: int, pool_nodes: list[int]) -> None:
        """A separate model computes nothing of the target's verification."""

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


class LookupDrafter:
    """Prompt-lookup drafting (no model): q(w | context) is proportional to how often w followed the
    longest suffix of the context (up to `max_ngram` tokens) that occurred earlier in the committed text."""
    taps: tuple[int, ...] = ()
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

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        out = torch.full((len(frontier), self.vocab_size), float("-inf"))
        for row, node in enumerate(frontier):
            context = self.ids + ([] if node == ROOT else [tree.tokens[i] for i in path_to(tree.parents, node)])
            for n in range(min(self.max_ngram, len(context)), 0, -1):
                follow = self.index.get(tuple(context[-n:]))
                if follow:
                    toks = torch.tensor(list(follow.keys()))
                    out[row, toks] = torch.tensor(list(follow.values()), dtype=torch.float32).log()
                    break
        return out  # (F, V)

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        pass

    def shallow(self, target_base: int, pool_nodes: list[int]) -> None:
        """Lookup computes nothing of the target's verification."""

    def drop(self) -> None:
        self.index, self.ids, self.indexed = {}, [], 0

    def fresh(self) -> "LookupDrafter":
        return LookupDrafter(self.vocab_size, self.max_ngram, self.name)

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.max_ngram}-gram"

    def mark(self) -> None:
        return None

    def rewind(self, mark: None) -> None:
        """Proposals change nothing here."""

