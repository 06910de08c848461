"""The EAGLE-3 head as a drafter: it reads the target's fused hidden states of the committed text and
feeds its own state back while drafting deeper (see core/eagle3.py for the layout).

Head entry t pairs the target's fused state f_t with token x_{t+1} at position t, so with n committed
tokens the context entries are t = 0 .. n-2 and the last one's output state proposes x_n (the root's
children). A tree node at depth d sits at position n-1+d and pairs its token with its parent's output
state. The head's K/V over the context live in a one-layer cache of their own; tree entries are
scratch beyond it and are dropped after verification, because the context entries must read the
target's true states, which the verification forward has just produced for the accepted path.
"""
from __future__ import annotations

import torch

from core.drafters import node_mask
from core.eagle3 import EagleHead, feature_layers
from core.kv_cache import KVCache
from core.model import CausalLM, causal_mask
from core.trace import ROOT
from core.draft_tree import DraftTree


class EagleDrafter:
    name = "eagle3"

    def __init__(self, head: EagleHead, target: CausalLM) -> None:
        self.head, self.target = head, target
        self.taps = feature_layers(target.num_layers, head.config.eagle_aux_hidden_state_layer_ids)
        self.draft_ids = head.draft_ids()  # (Vd,) target id of each draft id
        self.cache: KVCache | None = None
        self.fused: torch.Tensor | None = None  # (max_len, H): fc(f_t) for known positions

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        c, t = self.head.config, self.target
        self.cache = KVCache(1, c.num_key_value_heads, c.hd, max_len, t.dtype, t.device)
        self.fused = torch.zeros(max_len, c.hidden_size, dtype=t.dtype, device=t.device)
        if feats is not None and len(feats):
            self.fused[: len(feats)] = self.head.fc(feats)  # (n-1, 3H) -> (n-1, H)

    def begin(self, ids: list[int]) -> None:
        self.ids = ids
        self.n = len(ids)
        self.states: dict[int, torch.Tensor] = {}  # node -> the head's output state (H,)
        self.slots: dict[int, int] = {}
        self.root_state: torch.Tensor | None = None

    def room(self) -> int:
        return self.cache.max_len - max(self.cache.length, self.n - 1)

    def _run(self, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One pass of the decoder layer over T entries written at the cache's end: (T, H) -> (T, H)."""
        start = self.cache.length
        q, k, v = self.head.qkv(emb[None], state[None], positions[None])  # (1, nh, T, D), (1, nkv, T, D)
        self.cache.write(0, start, k[0], v[0])
        self.cache.length = start + emb.shape[0]
        keys, values = self.cache.view(0, self.cache.length)  # (nkv, S, D)
        return self.head.attend(state[None], q, keys[None], values[None], mask)[0]

    def _logits(self, states: torch.Tensor) -> torch.Tensor:
        """(F, H) -> (F, V) logits over the target's vocabulary; ids outside the draft vocabulary get -inf."""
        z = self.head.logits(states).float()  # (F, Vd)
        out = torch.full((states.shape[0], self.target.vocab_size), float("-inf"), device=z.device)
        out[:, self.draft_ids] = z
        return out

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        dev = self.target.device
        if frontier == [ROOT]:
            start, end = self.cache.length, self.n - 1  # context entries [start, end) are missing
            if end <= 0:  # a one-token context has no target state to read
                return torch.full((1, self.target.vocab_size), float("-inf"), device=dev)
            if end > start:
                emb = self.target.embed(torch.tensor(self.ids[start + 1: end + 1], device=dev))  # x_{t+1}
                out = self._run(emb, self.fused[start:end], torch.arange(start, end, device=dev),
                                causal_mask(start, end - start, dev))
                self.root_state = out[-1]
            else:  # only after a step that drafted nothing: recompute the last entry's state
                self.cache.length = end - 1
                emb = self.target.embed(torch.tensor(self.ids[end: end + 1], device=dev))
                out = self._run(emb, self.fused[end - 1: end], torch.tensor([end - 1], device=dev),
                                causal_mask(end - 1, 1, dev))
                self.root_state = out[-1]
            return self._logits(self.root_state[None])
        parents = [self.root_state if tree.parents[f] == ROOT else self.states[tree.parents[f]] for f in frontier]
        start = self.cache.length
        mask = node_mask(frontier, tree, self.slots, self.n - 1, start, dev)
        positions = torch.tensor([self.n - 1 + tree.depths[f] for f in frontier], device=dev)
        emb = self.target.embed(torch.tensor([tree.tokens[f] for f in frontier], device=dev))
        out = self._run(emb, torch.stack(parents), positions, mask)  # (F, H)
        for row, node in enumerate(frontier):
            self.states[node] = out[row]
        return self._logits(out)

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        """feats: the target's states (P + len(path), 3H) of the pending tokens and the accepted path,
        i.e. positions n - P .. n - 1 + len(path)."""
        if feats is not None and len(feats):
            first = self.n - (len(feats) - len(path))
            self.fused[first: first + len(feats)] = self.head.fc(feats)
        self.cache.rollback(min(self.cache.length, max(0, self.n - 1)))

    def drop(self) -> None:
        self.cache = self.fused = None

    def fresh(self) -> "EagleDrafter":
        return EagleDrafter(self.head, self.target)
