"""The EAGLE-3 head as a drafter: it reads the target's fused hidden states of the committed text and
feeds its own state back while drafting deeper (see core/eagle3/head.py for the layout).

Head entry t pairs the target's fused state f_t with token x_{t+1} at position t, so with n committed
tokens the context entries are t = 0 .. n-2 and the last one's output state proposes x_n (the root's
children). A tree node at depth d sits at position n-1+d and pairs its token with its parent's output
state. The head's K/V over the context live in a one-layer cache of their own; tree entries are
scratch beyond it and are dropped after verification, because the context entries must read the
target's true states, which the verification forward has just produced for the accepted path. A head
with several layers keeps one cache layer per decoder layer; one narrower than its target embeds tokens
with its own table.
"""
from __future__ import annotations

import dataclasses

import torch

from core.draft_tree import DraftTree
from core.drafters.contract import BaseDrafter, node_mask
from core.eagle3.head import EagleHead, feature_layers
from core.eagle3.fused_head import fusable, fused_head
from core.eagle3.head_info import HeadInfo
from core.eagle3.int8_scores import int8_scores, use_int8
from core.model.causal_lm import CausalLM, causal_mask
from core.model.kv_cache import KVCache
from core.model.linear_kernels import install
from core.trace import ROOT


class EagleDrafter(BaseDrafter):
    name = "eagle3"

    def __init__(self, head: EagleHead, target: CausalLM, head_int8: str = "auto") -> None:
        self.head, self.target, self.head_int8 = head, target, head_int8
        # the LM head's scores in int8 on a CPU (core/eagle3/int8_scores.py): q changes, verification does not
        self.int8 = int8_scores(head.lm_head) if use_int8(head_int8, head.lm_head) else None
        # its products through the target's CPU kernels (core/model/linear_kernels.py): a head is called between the
        # target's forwards, which push its weights out of the cache, so the kernels a plan timed on the head alone
        # (in cache) prefers are not the fastest while drafting (docs/app.md, "Measurements behind the code")
        install(head, target.plan)
        self.taps = feature_layers(target.num_layers, head.config.eagle_aux_hidden_state_layer_ids)
        self.draft_ids = head.draft_ids()  # (Vd,) target id of each draft id
        self.columns = self.draft_ids if head.reduced else None  # propose scores the draft vocabulary only
        self.cache: KVCache | None = None
        self.fused: torch.Tensor | None = None  # (max_len, H): fc(f_t) for known positions

    @property
    def info(self) -> HeadInfo:
        """What the head is (dialect, taps and the rule that chose them, draft vocabulary, variants)."""
        c = self.head.config
        info = self.head.info or HeadInfo(dialect="in memory", tap_rule="top-level" if c.eagle_aux_hidden_state_layer_ids
                                          else "default", draft_vocab=c.draft_vocab_size, vocab=c.vocab_size,
                                          layers=c.num_hidden_layers)
        scoring = "LM head scored in int8 on this CPU (head_int8; the output is unchanged)" if self.int8 else ""
        return dataclasses.replace(info, taps=self.taps, scoring=scoring)

    @property
    def identity(self) -> str:
        how = ("|fused" if fusable(self.head) else "") + ("|int8" if self.int8 else "")  # what its cost depends on
        return f"{self.name}:{getattr(self.head, 'source', 'in memory')}{how}"

    def mark(self) -> int:
        return self.cache.length

    def rewind(self, mark: int) -> None:
        self.cache.length, self.slots = mark, {}

    def head_info(self) -> dict:
        """The plain dict the trace export and the page attach where the drafter is named."""
        return self.info.to_dict()

    @property
    def draft_vocab(self) -> frozenset[int]:
        return self.head.draft_vocab

    def embed(self, tokens: list[int]) -> torch.Tensor:
        """(T,) token ids -> (T, H): the head's own table when it has one, else the target's."""
        ids = torch.tensor(tokens, device=self.target.device)
        own = getattr(self.head, "embed_tokens", None)
        return own(ids) if own is not None else self.target.embed(ids)

    def prefill(self, ids: list[int], feats: torch.Tensor | None, max_len: int) -> None:
        c, t = self.head.config, self.target
        # keys and values in the target's cache dtype: fp32 for bf16 on a CPU, whose bf16 attention over one query
        # cost 155 µs against fp32's 32 at the head's shapes (core/model/kv_cache.py)
        self.cache = KVCache(c.num_hidden_layers, c.num_key_value_heads, c.hd, max_len, t.cache_dtype, t.device)
        self.fused = torch.zeros(max_len, c.hidden_size, dtype=t.dtype, device=t.device)
        if feats is not None and len(feats):
            self.fused[: len(feats)] = self.head.fuse(feats)  # (n-1, 3H_t) -> (n-1, H)

    def begin(self, ids: list[int]) -> None:
        self.ids = ids
        self.n = len(ids)
        self.states: dict[int, torch.Tensor] = {}  # node -> the head's output state (H,)
        self.slots: dict[int, int] = {}
        self.root_state: torch.Tensor | None = None

    def room(self) -> int:
        return self.cache.max_len - max(self.cache.length, self.n - 1)

    def _run(self, emb: torch.Tensor, state: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One pass of the head's layers over T entries written at the cache's end: (T, H) -> (T, H)."""
        start, end = self.cache.length, self.cache.length + emb.shape[0]

        def kv(i: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.cache.write(i, start, k, v)  # k, v (nkv, T, D)
            return self.cache.view(i, end)  # (nkv, S, D)

        fused = fused_head(self.head, self.target.plan)  # stacked products; None for a head with variants
        if fused is not None:
            out = fused.forward(self.head, emb, state, positions, kv, mask)
        else:
            out = self.head(emb[None], state[None], positions[None],
                            lambda i, k, v: tuple(t[None] for t in kv(i, k[0], v[0])), mask)[0]
        self.cache.length = end
        return out

    def _logits(self, states: torch.Tensor) -> torch.Tensor:
        """(F, H) -> (F, Vd) logits over the draft vocabulary, whose target ids are `columns`."""
        return self.head.logits(states).float() if self.int8 is None else self.int8(self.head.norm(states))

    def propose(self, frontier: list[int], tree: DraftTree) -> torch.Tensor:
        dev = self.target.device
        if frontier == [ROOT]:
            start, end = self.cache.length, self.n - 1  # context entries [start, end) are missing
            if end <= 0:  # a one-token context has no target state to read
                return torch.full((1, self.head.config.draft_vocab_size), float("-inf"), device=dev)
            if end > start:
                emb = self.embed(self.ids[start + 1: end + 1])  # x_{t+1}
                out = self._run(emb, self.fused[start:end], torch.arange(start, end, device=dev),
                                causal_mask(start, end - start, dev))
                self.root_state = out[-1]
            else:  # only after a step that drafted nothing: recompute the last entry's state
                self.cache.length = end - 1
                emb = self.embed(self.ids[end: end + 1])
                out = self._run(emb, self.fused[end - 1: end], torch.tensor([end - 1], device=dev),
                                causal_mask(end - 1, 1, dev))
                self.root_state = out[-1]
            return self._logits(self.root_state[None])
        parents = [self.root_state if tree.parents[f] == ROOT else self.states[tree.parents[f]] for f in frontier]
        start = self.cache.length
        mask = node_mask(frontier, tree, self.slots, self.n - 1, start, dev)
        positions = torch.tensor([self.n - 1 + tree.depths[f] for f in frontier], device=dev)
        emb = self.embed([tree.tokens[f] for f in frontier])
        out = self._run(emb, torch.stack(parents), positions, mask)  # (F, H)
        for row, node in enumerate(frontier):
            self.states[node] = out[row]
        return self._logits(out)

    def accept(self, path: list[int], feats: torch.Tensor | None) -> None:
        """feats: the target's states (P + len(path), 3H) of the pending tokens and the accepted path,
        i.e. positions n - P .. n - 1 + len(path)."""
        if feats is not None and len(feats):
            first = self.n - (len(feats) - len(path))
            self.fused[first: first + len(feats)] = self.head.fuse(feats)
        self.cache.rollback(min(self.cache.length, max(0, self.n - 1)))

    def drop(self) -> None:
        self.cache = self.fused = None

    def fresh(self) -> "EagleDrafter":
        return EagleDrafter(self.head, self.target, self.head_int8)
