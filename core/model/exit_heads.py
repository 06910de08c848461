"""Exit heads: next-token logits z^(ℓ) from the hidden state after layer ℓ (1 ≤ ℓ < L), base frozen.

Three kinds (SpecBound's knob `exit_heads`, `heads_for`): `paper`, a light LM head of its own per layer
(core/model/layer_heads.py, the default where a model has them); `shared`, the adapters below; `lens`, the logit lens.

A shared head is a small residual adapter, h + U·D·rmsnorm(h) with D: (r, d), U: (d, r), feeding
the model's own final norm and LM head, so a head costs 2·d·r parameters and shares the big
vocabulary matrix with the model. U starts at zero: an untrained head is exactly the "logit
lens" (final norm + LM head applied to the intermediate state), which is also the fallback
when a model has no trained heads. At ℓ = L the "head" is the model's own head.

Files: `exit_heads.safetensors` (+ `exit_heads.json`: rank, layers, metrics) in the model's
folder, or under `exit_heads/<model id>/` in the cache home (core/paths.py) for Hub models, and
`exit_vocab.safetensors`: the vocabulary in order of frequency in the heads' training text. With it an exit
check can score only the V_exit most frequent tokens (`logits(..., vocab=)`, as EAGLE-3 does for its draft
vocabulary): on a small model the LM head is a large share of a layer's weights, so a full-vocabulary check costs
most of a decoder layer and a reduced one a fraction of it (docs/app.md, "Measurements behind the code").
"""
from __future__ import annotations

import json
import math
import warnings
import weakref
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.model.causal_lm import CausalLM
from core.model.layer_heads import META as LAYER_META, PAPER, LayerHeads, load_layer_heads, read_layer_meta, WholeLogits
from core.model.real_models import heads_dir as real_heads_dir, real_model_of
from core.paths import cache_home

WEIGHTS = "exit_heads.safetensors"
VOCAB = "exit_vocab.safetensors"
META = "exit_heads.json"
CACHE_ROOT = cache_home() / "exit_heads"  # heads trained for Hub models (core/paths.py)
TRAINED, LOGIT_LENS = "trained", "logit-lens"


class ExitHeads(WholeLogits, torch.nn.Module):
    """Adapters for layers ℓ = 1..L-1 (index ℓ-1), stacked; rank 0 means the logit lens."""

    def __init__(self, num_layers: int, hidden: int, rank: int, eps: float = 1e-6) -> None:
        super().__init__()
        n = num_layers - 1
        self.num_layers, self.rank, self.eps = num_layers, rank, eps
        self.norm = torch.nn.Parameter(torch.ones(n, hidden))  # (L-1, d)
        self.down = torch.nn.Parameter(torch.randn(n, rank, hidden) / hidden ** 0.5)  # (L-1, r, d)
        self.up = torch.nn.Parameter(torch.zeros(n, hidden, rank))  # (L-1, d, r)
        self.kind = TRAINED if rank > 0 else LOGIT_LENS
        self.exit_layers: tuple[int, ...] | None = None  # the check set measured best for these heads (META)
        self.agreement: list[float] | None = None  # held-out top-1 agreement with the final layer, per ℓ (META)
        # V_exit -> the LM head's rows (and bias); exit_vocab gives one vocabulary per size
        self._rows: dict[int, tuple] = {}

    def adapt(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """h: (..., d) after layer `layer` (1-based) -> the state the final norm + LM head read."""
        if self.rank == 0 or layer >= self.num_layers:
            return h
        i = layer - 1
        x = h.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm[i]  # (..., d)
        delta = (x @ self.down[i].T) @ self.up[i].T  # (..., r) -> (..., d)
        return h + delta.to(h.dtype)

    def scores(self, lm: CausalLM, layer: int, h: torch.Tensor,
               vocab: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What a check reads: (T, V_exit) fp32 logits over `vocab` (sorted token ids) and those ids, only those
        rows of the LM head computed (the other tokens cannot exit here); the whole (T, V) and None without a
        vocab or at the final layer, which is always whole."""
        if vocab is None or layer >= self.num_layers:
            return lm.head(self.adapt(layer, h)), None
        rows = self._rows.get(len(vocab))
        if rows is None:  # the kept rows of the LM head, gathered once (a gather per check would cost more)
            head = lm.hf.lm_head
            rows = (head.weight[vocab].contiguous(), None if head.bias is None else head.bias[vocab].contiguous())
            self._rows[len(vocab)] = rows
        return torch.nn.functional.linear(lm.body.norm(self.adapt(layer, h)), *rows).float(), vocab  # (T, V_exit)

    @property
    def megabytes(self) -> float:
        return sum(p.numel() * p.element_size() for p in self.parameters()) / 1e6


AnyHeads = ExitHeads | LayerHeads  # what SpecBound and the self drafter exit through


def logit_lens(lm: CausalLM) -> ExitHeads:
    return ExitHeads(lm.num_layers, lm.config.hidden_size, rank=0).to(lm.device)


def heads_dir(model_name: str) -> Path:
    """Where a model's heads live: a real model's in the repository (assets/models/<name>: trained here, shipped),
    another local model's in its own folder, a Hub model's in a cache folder named after its id."""
    real = real_model_of(model_name)
    if real is not None:
        return real_heads_dir(real.name)
    path = Path(model_name).expanduser()
    if path.is_dir():
        return path
    return CACHE_ROOT / model_name.replace("/", "--")


def save_heads(heads: ExitHeads, folder: Path, meta: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(torch.float16).contiguous().cpu() for k, v in heads.state_dict().items()}
    save_file(tensors, str(folder / WEIGHTS))
    meta = {"rank": heads.rank, "num_layers": heads.num_layers, **meta}
    (folder / META).write_text(json.dumps(meta, indent=2) + "\n")


def read_meta(folder: Path) -> dict:
    path = folder / META
    return json.loads(path.read_text()) if path.is_file() else {}


def fingerprint(lm: CausalLM) -> list[float]:
    """Mean |w| of a few base weights: ties heads to the weights they were trained on (dtype-robust),
    so heads left over from an earlier training of the same architecture are not used by mistake."""
    weights = [lm.body.embed_tokens.weight, lm.body.norm.weight, lm.layers[0].self_attn.q_proj.weight,
               lm.layers[-1].mlp.down_proj.weight]
    return [float(w.detach().float().abs().mean()) for w in weights]


def matches(lm: CausalLM, meta: dict) -> bool:
    stored = meta.get("base_fingerprint")
    return stored is None or all(math.isclose(a, b, rel_tol=1e-3) for a, b in zip(stored, fingerprint(lm)))


def load_heads(lm: CausalLM, folder: Path | None = None) -> ExitHeads:
    """Trained heads for `lm` if its folder has them (and they were trained on these weights),
    else the logit lens (kind == "logit-lens")."""
    folder = folder or heads_dir(lm.name)
    if not (folder / WEIGHTS).is_file():
        return logit_lens(lm)
    if not matches(lm, read_meta(folder)):
        warnings.warn(f"{folder / WEIGHTS} was trained on other weights than {lm.name}'s; using the logit lens "
                      f"(retrain with python -m cli.train_exit_heads)")
        return logit_lens(lm)
    tensors = load_file(str(folder / WEIGHTS))
    n, d, r = tensors["up"].shape
    if n != lm.num_layers - 1 or d != lm.config.hidden_size:
        raise ValueError(f"{folder / WEIGHTS} holds heads for {n + 1} layers of width {d}, "
                         f"but the model has {lm.num_layers} layers of width {lm.config.hidden_size}")
    heads = ExitHeads(lm.num_layers, d, r)
    heads.load_state_dict({k: v.float() for k, v in tensors.items()})
    meta = read_meta(folder)
    heads.exit_layers = tuple(int(x) for x in meta["exit_layers"]) if meta.get("exit_layers") else None
    agreement = meta.get("heldout", {}).get("head")
    heads.agreement = [float(a) for a in agreement] if agreement else None
    return heads.to(lm.device).eval().requires_grad_(False)


def store_exit_layers(lm: CausalLM, layers: list[int], measured: dict, kind: str = "paper") -> Path:
    """Write the chosen exit-layer set (and what it was chosen from) into the META of the heads `kind` loads,
    where SpecBound reads its default; the heads in memory use it from now on."""
    heads = heads_for(lm, kind)
    folder = heads_dir(lm.name)
    meta_file = folder / (LAYER_META if heads.kind == PAPER else META)
    if heads.kind == LOGIT_LENS or not meta_file.is_file():
        raise ValueError(f"{folder} has no trained exit heads to store an exit-layer set with "
                         f"(train them with python -m cli.train_layer_heads)")
    meta = json.loads(meta_file.read_text())
    meta.update(exit_layers=sorted(layers), exit_layers_measured=measured)
    meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    heads.exit_layers = tuple(sorted(layers))
    return meta_file


def token_order(ids: list[int], vocab_size: int) -> torch.Tensor:
    """(V,) the vocabulary by descending frequency in `ids` (ties by id)."""
    counts = torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=vocab_size)  # (V,)
    return torch.tensor(sorted(range(vocab_size), key=lambda t: (-int(counts[t]), t)), dtype=torch.int64)


def save_token_order(ids: list[int], vocab_size: int, folder: Path) -> None:
    """The order of `token_order`, for exit vocabularies of any size."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"order": token_order(ids, vocab_size)}, str(folder / VOCAB))


def exit_vocab(lm: CausalLM, size: int) -> torch.Tensor | None:
    """The `size` most frequent token ids of the heads' training text, sorted; None (every token) for size 0,
    a size ≥ the vocabulary, or heads without a stored order (`cli.train_exit_heads` writes it; any model's
    logit lens has none), so the knob's default works on every model."""
    if size <= 0 or size >= lm.config.vocab_size:
        return None
    known = _VOCABS.setdefault(lm, {})
    if size not in known:
        path = heads_dir(lm.name) / VOCAB
        order = load_file(str(path))["order"] if path.is_file() else None
        known[size] = None if order is None else torch.sort(order[:size]).values.to(lm.device)
    return known[size]


_VOCABS: "weakref.WeakKeyDictionary[CausalLM, dict[int, torch.Tensor]]" = weakref.WeakKeyDictionary()
_LOADED: "weakref.WeakKeyDictionary[CausalLM, dict[str, ExitHeads | LayerHeads]]" = weakref.WeakKeyDictionary()
HEAD_KINDS = (PAPER, "shared", "lens")  # the SpecBound knob `exit_heads`


def check_head_kind(kind: str) -> str:
    """The kind, or a ValueError naming the choices (the CLI, the page and Tune's fixed knobs say the same)."""
    if kind not in HEAD_KINDS:
        raise ValueError(f"exit heads must be one of {', '.join(HEAD_KINDS)} (got {kind!r})")
    return kind


def heads_for(lm: CausalLM, kind: str = PAPER) -> AnyHeads:
    """Load once per model object and kind; heads are shared read-only like the model's weights. paper: the
    per-layer heads (core/model/layer_heads.py) when this model has them, else as shared; shared: the adapters
    over the model's own final norm and LM head when trained, else the logit lens; lens: the logit lens."""
    check_head_kind(kind)
    known = _LOADED.setdefault(lm, {})
    if kind not in known:
        folder = heads_dir(lm.name)
        paper = load_layer_heads(lm, folder) if kind == PAPER and matches(lm, read_layer_meta(folder)) else None
        known[kind] = paper or (logit_lens(lm) if kind == "lens" else load_heads(lm))
    return known[kind]
