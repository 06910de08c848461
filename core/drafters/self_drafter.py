"""The target drafts its own tree (`--drafter self`): its first ℓ layers and the exit head after layer ℓ
propose each level, so every model the app loads can draft, with no head or draft model of its own.

q comes from the per-layer head at ℓ (core/model/layer_heads.py) when the model has trained ones, else from the
model's own final norm + LM head read after layer ℓ (the logit lens: a Hub model with no published head).
The drafter keeps the K/V of layers 0..ℓ−1 for the committed text and this step's fed nodes in a cache of
its own (ℓ layers), and `shallow()` hands the verification what it computed: the target then runs only
layers ℓ..L−1 for those rows (core/drafters/shallow_verify.py), LayerSkip's reuse of the draft's early layers. A fed
row is the same function of the same inputs as the target's own first ℓ layers (the same mask and
positions), so the verification stays exact.
"""
from __future__ import annotations

import math

import torch

from core.draft_tree import DraftTree
from core.drafters.contract import BaseDrafter, Shallow, node_mask
from core.model.causal_lm import CausalLM, causal_mask
from core.model.exit_heads import ExitHeads
from core.model.kv_cache import KVCache
from core.model.layer_heads import LayerHeads
from core.trace import ROOT


def check_self_layer(layer: object, num_layers: int) -> int:
    """ℓ must leave at least one layer for the verification to add: a whole number with 1 ≤ ℓ ≤ L − 1."""
    try:
        value = float(layer)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(layer, bool) or not value.is_integer() or not 1 <= value <= num_layers - 1:
        raise ValueError(f"self_layer (ℓ_self, the layers the target drafts with) must be a whole number from 1 to "
                         f"L − 1 = {num_layers - 1} for this model (got {value:g})" if math.isfinite(value) else
                         f"self_layer (ℓ_self) must be a whole number from 1 to L − 1 = {num_layers - 1} (got {layer!r})")
    return int(value)


class SelfDrafter(BaseDrafter):
    name = "self"

    def __init__(self, target: CausalLM, heads: "ExitHeads | LayerHeads", layer: int) -> None:
        self.target, self.heads = target, heads
        self.layer = check_self_layer(layer, target.num_layers)
        self.cache: KVCache | None = None

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.target.name}:{self.layer}:{self.heads.kind}"

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        """(F, d) after layer ℓ -> (F, V) fp32: a per-layer head's rows, −inf elsewhere (the lens: every token)."""
        return self.heads.logits(self.target, self.layer, h)

    def _run(self, tokens: list[int], positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Layers 0..ℓ−1 over tokens written at the cache's end: (T,) -> (T, d) after layer ℓ."""
        start = self.cache.length
        h = self.target.embed(torch.tensor(tokens, device=self.target.device))  # (T, d)
        h = self.target.forward_layers(h, positions, self.cache, start, mask, 0, self.layer)
        self.cache.length = start + len(tokens)
        return h

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        t = self.target
        self.cache = t.new_cache(max_len, layers=self.layer)
        head = ids[:-1]
        if head:
            self._run(head, torch.arange(len(head), device=t.device), causal_mask(0, len(head), t.device))

    def begin(self, ids: list[int]) -> None:
        self.base = self.cache.length  # committed slots already cached (= positions)
        self.pending = ids[self.base:]
        self.root_pos = len(ids) - 1
        self.slots: dict[int, int] = {}  # node -> cache slot, for nodes fed this step
        self.states: dict[int, torch.Tensor] = {}  # node -> (d,) its state after layer ℓ
        self.pending_h: torch.Tensor | None = None  # (P_d, d)

    def room(self) -> int:
        return self.cache.max_len - max(self.cache.length, self.base + len(self.pending))

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        dev = self.target.device
        if frontier == [ROOT]:
            n = len(self.pending)
            positions = torch.arange(self.base, self.base + n, device=dev)
            self.pending_h = self._run(self.pending, positions, causal_mask(self.base, n, dev))
            return self._logits(self.pending_h[-1:])  # (1, V)
        start = self.cache.length
        mask = node_mask(frontier, tree, self.slots, self.base + len(self.pending), start, dev)
        positions = torch.tensor([self.root_pos + 1 + tree.depths[f] for f in frontier], device=dev)
        h = self._run([tree.tokens[f] for f in frontier], positions, mask)  # (F, d)
        for row, node in enumerate(frontier):
            self.states[node] = h[row]
        return self._logits(h)

    def shallow(self, target_base: int, pool_nodes: list[int]) -> Shallow | None:
        """The rows of the target's verification [pending from slot `target_base`, tree nodes] this step fed:
        pending rows by position, node i by its pool id pool_nodes[i]. None when the drafter did not run."""
        if self.pending_h is None:
            return None
        P = self.base + len(self.pending) - target_base  # the target's pending rows (it may have cached more)
        rows = list(range(P))
        slots = [target_base + r for r in rows]  # a pending token's slot is its position
        states = [self.pending_h[target_base - self.base + r] for r in rows]
        for i, node in enumerate(pool_nodes):
            if node in self.slots:
                rows.append(P + i)
                slots.append(self.slots[node])
                states.append(self.states[node])
        index = torch.tensor(slots, device=self.target.device)
        return Shallow(self.layer, rows, torch.stack(states), self.cache.k[:, :, index], self.cache.v[:, :, index])

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        if self.cache.length <= self.base:  # the drafter did not run this step
            return
        fed = [self.slots[i] for i in path if i in self.slots]  # the last accepted node may be unfed
        self.cache.compact(fed, start=self.base + len(self.pending))

    def drop(self) -> None:
        self.cache = None

    def fresh(self) -> "SelfDrafter":
        return SelfDrafter(self.target, self.heads, self.layer)

    def mark(self) -> int:
        return self.cache.length

    def rewind(self, mark: int) -> None:
        self.cache.length, self.slots, self.states = mark, {}, {}
