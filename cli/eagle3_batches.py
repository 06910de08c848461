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
    """The memory-mapped arrays of one features folder, split into train / held-out sequences."""

    def __init__(self, folder: Path) -> None:
        self.meta = json.loads((folder / "meta.json").read_text())
        self.feats = np.load(folder / "feats.npy", mmap_mode="r")
        self.final = np.load(folder / "final.npy", mmap_mode="r")
        self.tokens = np.load(folder / "tokens.npy")
        self.greedy = np.load(folder / "greedy.npy")
        self.offsets = np.asarray(self.meta["offsets"])
        held = np.asarray(self.meta["heldout"])
        self.train = np.flatnonzero(~held)
        self.heldout = np.flatnonzero(held)

    def answer_tokens(self, which: np.ndarray) -> np.ndarray:
        """The answers' token ids of these sequences (what the draft vocabulary is counted over)."""
        parts = [self.tokens[self.offsets[i] + self.meta["prompt_lens"][i]: self.offsets[i + 1]] for i in which]
        return np.concatenate(parts)

    def batch(self, which: np.ndarray) -> Batch:
        lens = [int(self.offsets[i + 1] - self.offsets[i]) for i in which]
        B, S, H = len(which), max(lens), self.final.shape[1]
        x = np.zeros((B, S), np.int64)
        top = np.zeros((B, S), np.int64)
        feats = np.zeros((B, S, 3 * H), np.float32)
        final = np.zeros((B, S, H), np.float32)
        scored = np.zeros((B, S), bool)
        for b, (i, m) in enumerate(zip(which, lens)):
            a = int(self.offsets[i])
            x[b, :m], top[b, :m] = self.tokens[a: a + m], self.greedy[a: a + m]
            feats[b, :m], final[b, :m] = self.feats[a: a + m], self.final[a: a + m]
            scored[b, self.meta["prompt_lens"][i] - 1: m - 1] = True
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
