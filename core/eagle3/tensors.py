"""Published EAGLE-3 tensor names -> ours (core/eagle3/head.py), and what the names say about the head.

    NeMo               `model.layers.*` (and whatever else sits under `model.`) -> the prefix is dropped;
                       lm_head, d2t and t2d may sit beside it at the top level
    SafeAILab, SpecForge, older AngelSlim   `midlayer.*`          -> kept
    speculators, ModelOpt, newer AngelSlim  `layers.0.*`          -> `midlayer.*`
                                            `layers.{i}.*`, i ≥ 1 -> `extra_layers.{i-1}.*` (plain decoder layers)

How many layers, which linears carry a bias and whether q/k are normed per head are read off the names
present (some releases carry a stray num_hidden_layers). Names nobody reads at inference are dropped
with a note: speculators' training copies of the target's final norm and LM head, rotary caches. What
is left must match the head exactly; core/eagle3/loading.py refuses the rest by name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from core.eagle3.head_info import HeadLoadError
from core.eagle3.layers import ATTN, MLP_LINEARS

QUIET = ("verifier_norm.weight", "verifier_lm_head.weight")  # speculators' training-only copies of the target's
LAYER = re.compile(r"^layers\.(\d+)\.(.*)$")


@dataclass
class Tensors:
    """A checkpoint's tensors under our names, and the structure they imply."""
    state: dict[str, torch.Tensor]
    layers: int = 1
    biases: tuple[str, ...] = ()
    qk_norm: bool = False
    notes: list[str] = field(default_factory=list)


def nemo_names(names) -> bool:
    """NeMo's layout: its decoder layers under `model.`, whatever else sits at the top level (lm_head, and in
    some exports d2t / t2d)."""
    return any(k.startswith("model.layers.") for k in names)


def _strip_nemo(state: dict) -> tuple[dict, bool]:
    if not nemo_names(state):
        return state, False
    out: dict = {}
    for k, v in state.items():
        name = k[len("model."):] if k.startswith("model.") else k
        if name in out:
            raise HeadLoadError(f"it carries both model.{name} and {name}: which one the head uses is not clear")
        out[name] = v
    return out, True


def _rename_layers(state: dict) -> dict:
    if any(k.startswith("midlayer.") for k in state):
        return state  # `layers.*` beside `midlayer.*` is nobody's layout: left as is, refused by name later
    out = {}
    for k, v in state.items():
        m = LAYER.match(k)
        if m is None:
            out[k] = v
        else:
            i, rest = int(m.group(1)), m.group(2)
            out["midlayer." + rest if i == 0 else f"extra_layers.{i - 1}.{rest}"] = v
    return out


def _structure(state: dict) -> tuple[int, tuple[str, ...], bool]:
    extra = {int(k.split(".")[1]) for k in state if k.startswith("extra_layers.")}
    biases = tuple(n for n in ATTN if f"midlayer.self_attn.{n}.bias" in state)
    biases += tuple(n for n in MLP_LINEARS if f"midlayer.mlp.{n}.bias" in state)
    if "fc.bias" in state:
        biases += ("fc",)
    qk_norm = "midlayer.self_attn.q_norm.weight" in state or "midlayer.self_attn.k_norm.weight" in state
    return 1 + (max(extra) + 1 if extra else 0), biases, qk_norm


def canonical(state: dict[str, torch.Tensor]) -> Tensors:
    """Rename to our names; drop what nobody reads; read the structure off the names."""
    state, nemo = _strip_nemo(state)
    state = _rename_layers(state)
    notes = ["NeMo `model.` prefix dropped"] if nemo else []
    dropped = sorted(k for k in state if k in QUIET or k.endswith("rotary_emb.inv_freq"))
    if dropped:
        notes.append("ignored (training-only or recomputed): " + ", ".join(dropped))
    state = {k: v for k, v in state.items() if k not in dropped}
    layers, biases, qk_norm = _structure(state)
    return Tensors(state, layers, biases, qk_norm, notes)


def vocab_maps(t: Tensors, vocab: int, draft_vocab: int) -> None:
    """Bring d2t/t2d to what the head holds: both when the vocabularies differ (t2d derived from d2t when
    absent: ModelOpt does not write it), neither when they are equal (an identity d2t and a t2d are dropped)."""
    s = t.state
    if draft_vocab == vocab:
        if "d2t" in s and bool(s["d2t"].any()):
            raise HeadLoadError("its d2t remaps a draft vocabulary as large as the target's; not supported")
        if "d2t" in s or "t2d" in s:
            t.notes.append("identity d2t / t2d dropped (equal vocabularies)")
        s.pop("d2t", None)
        s.pop("t2d", None)
        return
    if "d2t" in s and tuple(s["d2t"].shape) != (draft_vocab,):
        raise HeadLoadError(f"its d2t has shape {tuple(s['d2t'].shape)}; the draft vocabulary has {draft_vocab} ids")
    if "d2t" in s and "t2d" not in s:
        ids = torch.arange(draft_vocab) + s["d2t"].long()
        if ids.min() < 0 or ids.max() >= vocab:
            raise HeadLoadError(f"its d2t maps draft ids outside the target's vocabulary of {vocab}")
        s["t2d"] = torch.zeros(vocab, dtype=torch.bool)
        s["t2d"][ids] = True
        t.notes.append("t2d derived from d2t")
