"""Where a session stands, as plain data, and how to continue from it: the page keeps its runs this way, so
an engine session can be rebuilt in another process (a ZeroGPU worker) or after it was dropped to bound memory."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.engine import Session, SessionError


@dataclass(frozen=True)
class Snapshot:
    """Where a session stands, as plain data: its committed text, how many steps made it, the sampler's state
    and why it stopped. Enough to rebuild the session anywhere (another process, after its caches or the
    whole session were dropped) and continue exactly: caches are rebuilt from the text by the next step.
    What a method learned across steps (`auto`'s history) is not carried: a rebuilt `auto` starts afresh,
    which changes which trees it drafts but never the output's exactness."""
    ids: tuple[int, ...]
    prompt_len: int
    steps: int
    rng: bytes
    stop_reason: str | None = None

    @property
    def output_ids(self) -> list[int]:
        return list(self.ids[self.prompt_len:])


def take_snapshot(s: Session) -> Snapshot:
    state = s.gen.get_state()  # (n,) uint8 on the CPU, whatever the generator's device
    return Snapshot(tuple(s.ids), len(s.prompt_ids), s.steps_before + len(s.traces), bytes(state.tolist()),
                    s.stop_reason)


def restore(s: Session, snap: Snapshot) -> None:
    """Continue `s` (a fresh session of the same model, method, prompt and sampling) from `snap`: the committed
    text, step count, sampler state and stop reason; the caches are rebuilt by the next step."""
    if list(snap.ids[:snap.prompt_len]) != s.prompt_ids:
        raise SessionError("the snapshot belongs to another prompt")
    s.ids, s.traces, s.steps_before = list(snap.ids), [], snap.steps
    s.stop_reason = snap.stop_reason
    s.gen.set_state(torch.tensor(list(snap.rng), dtype=torch.uint8))
    s.drop_caches()
