"""Training batches for an EAGLE-3 head from features computed once (cli/eagle3_features.py), and the
unrolled draft steps over them ("training-time test"), for a real chat model.

The unrolling is the same as cli/train_eagle3.py's over a live target: entry t pairs the fused state f_t with
token x_{t+1} and predicts x_{t+2}; step k reads the head's own state from step k-1, one token further on.
Only the answer's positions are scored (the request and the chat template are context, as in EAGLE's own
loss mask), and the teacher at position j is lm_head(final_j) restricted to the draft vocabulary.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass
class Batch:
    x: torch.Tensor  # (B, S) token ids, right-padded with 0
    feats: torch.Tensor  # (B, S, 3H) tapped target states
    final: torch.Tensor  # (B, S, H) the state the target's lm_head reads
    top: torch.Tensor  # (B, S) the target's greedy choice after each position
    scored: torch.Tensor  # (B, S) bool: position j predicts a token of the answer


class Features:
    """The memory-mapped arrays of one or more features folders (training legs may add data), as one set of
    sequences split into train / held-out. Sequence g of the set is sequence g - first[f] of folder f."""

    def __init__(self, *folders: Path) -> None:
        self.metas = [json.loads((f / "meta.json").read_text()) for f in folders]
        if len({tuple(m["taps"]) for m in self.metas}) != 1:
            raise ValueError("features folders tapped different layers; compute them with the same --feature-layers")
        self.meta = self.metas[0]
        self.feats = [np.load(f / "feats.npy", mmap_mode="r") for f in folders]
        self.final = [np.load(f / "final.npy", mmap_mode="r") for f in folders]
        self.tokens = [np.load(f / "tokens.npy") for f in folders]
        self.greedy = [np.load(f / "greedy.npy") for f in folders]
        self.first = np.cumsum([0] + [len(m["ids"]) for m in self.metas])
        held = np.concatenate([np.asarray(m["heldout"], bool) for m in self.metas])
        self.train = np.flatnonzero(~held)
        self.heldout = np.flatnonzero(held)

    def _where(self, g: int) -> tuple[int, int, int, int]:
        """(folder, first token, length, prompt length) of sequence g."""
        f = int(np.searchsorted(self.first, g, side="right") - 1)
        i, m = g - int(self.first[f]), self.metas[f]
        return f, int(m["offsets"][i]), int(m["offsets"][i + 1] - m["offsets"][i]), int(m["prompt_lens"][i])

    def answer_tokens(self, which: np.ndarray) -> np.ndarray:
        """The answers' token ids of these sequences (what the draft vocabulary is counted over)."""
        parts = []
        for g in which:
            f, a, m, p = self._where(int(g))
            parts.append(self.tokens[f][a + p: a + m])
        return np.concatenate(parts)

    def batch(self, which: np.ndarray) -> Batch:
        where = [self._where(int(g)) for g in which]
        B, S, H = len(which), max(w[2] for w in where), self.final[0].shape[1]
        x = np.zeros((B, S), np.int64)
        top = np.zeros((B, S), np.int64)
        feats = np.zeros((B, S, 3 * H), np.float32)
        final = np.zeros((B, S, H), np.float32)
        scored = np.zeros((B, S), bool)
        for b, (f, a, m, p) in enumerate(where):
            x[b, :m], top[b, :m] = self.tokens[f][a: a + m], self.greedy[f][a: a + m]
            feats[b, :m], final[b, :m] = self.feats[f][a: a + m], self.final[f][a: a + m]
            scored[b, p - 1: m - 1] = True
        return Batch(*(torch.from_numpy(v) for v in (x, feats, final, top, scored)))

    def sample(self, seed: int, step: int, batch_size: int) -> Batch:
        rng = np.random.default_rng([seed, step])
        return self.batch(rng.choice(self.train, size=batch_size, replace=False))

    def heldout_batches(self, batch_size: int) -> Iterator[Batch]:
        for s in range(0, len(self.heldout), batch_size):
            yield self.batch(self.heldout[s: s + batch_size])


def ttt_mask(T: int, k: int, device: torch.device) -> torch.Tensor:
    """(T, (k+1)T) bool for unrolled step k: causal over the step-0 entries, then, for each later step, only
    the entry at the query's own position (its ancestors in a drafted chain)."""
    blocks = [torch.ones(T, T, dtype=torch.bool, device=device).tril()]
    blocks += [torch.eye(T, dtype=torch.bool, device=device)] * k
    return torch.cat(blocks, dim=1)


def unrolled(head, emb_table: torch.nn.Embedding, lm_draft: torch.Tensor, b: Batch, steps: int):
    """Yields per unrolled step k: (head logits (B, T, Vd), teacher logits (B, T, Vd), the target's greedy
    choice (B, T), scored (B, T)), T = S - steps. lm_draft: (Vd, H), the target's lm_head rows of the draft
    vocabulary."""
    B, S = b.x.shape
    T = S - steps
    pos0 = torch.arange(T).expand(B, T)
    state = head.fuse(b.feats[:, :T])  # (B, T, H)
    keys, values = [], []
    for k in range(steps):
        emb = emb_table(b.x[:, 1 + k: 1 + k + T]).detach()  # token x_{t+1+k}
        q, kk, vv = head.qkv(emb, state, pos0 + k)
        keys.append(kk)
        values.append(vv)
        state = head.attend(state, q, torch.cat(keys, 2), torch.cat(values, 2), ttt_mask(T, k, b.x.device))
        j = slice(1 + k, 1 + k + T)  # the teacher's position: it predicts x_{t+2+k}
        yield head.logits(state), b.final[:, j] @ lm_draft.T, b.top[:, j], b.scored[:, j]
