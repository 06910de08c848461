"""Read EAGLE-3 heads in every published layout (core/eagle3/dialects.py says which and how) and write
them in SafeAILab/EAGLE's: a folder with `config.json` and `model.safetensors` or `pytorch_model.bin`.

A `.bin` is only ever read with `torch.load(weights_only=True)`: no pickled code runs. After the dialect's
names are mapped onto ours, the tensors must match the head exactly: one the head does not have is
refused by name, as is a missing one, a head whose width or vocabulary does not fit the target, and a
flag that changes the function in a way not implemented here. Accepted quietly (with a note in the
head's HeadInfo): an `embed_tokens` copy equal to the target's own, identity vocabulary maps.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.eagle3.dialects import HeadSpec, read_head
from core.eagle3.head import EagleHead, feature_layers
from core.eagle3.head_info import HeadInfo, HeadLoadError

__all__ = ["DEFAULT_HEAD", "HeadInfo", "HeadLoadError", "head_for", "load_head", "save_head"]


def _state_dict(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").exists():
        return load_file(folder / "model.safetensors")
    if (folder / "pytorch_model.bin").exists():
        try:
            return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as exc:  # a pickle with anything but tensors is refused by weights_only
            raise HeadLoadError(f"'{folder}/pytorch_model.bin' is not a plain tensor file ({type(exc).__name__})") from None
    raise HeadLoadError(f"'{folder}' has neither model.safetensors nor pytorch_model.bin")


def _config(folder: Path) -> dict:
    if not folder.is_dir():
        raise HeadLoadError(f"'{folder}' is not a folder holding an EAGLE-3 head")
    if not (folder / "config.json").exists():
        raise HeadLoadError(f"'{folder}' has no config.json (expected an EAGLE-3 head folder)")
    try:
        raw = json.loads((folder / "config.json").read_text())
    except ValueError as exc:
        raise HeadLoadError(f"'{folder}/config.json' is not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise HeadLoadError(f"'{folder}/config.json' is not an EAGLE-3 head config (not an object)")
    return raw


def _fit(spec: HeadSpec, where: str, target_hidden: int, target_vocab: int, target_layers: int | None) -> None:
    cfg = spec.config
    if cfg.width != target_hidden:
        raise HeadLoadError(f"the head in {where} reads hidden size {cfg.width}; the target's is {target_hidden}")
    if cfg.vocab_size != target_vocab:
        raise HeadLoadError(f"the head in {where} maps to a vocabulary of {cfg.vocab_size}; "
                            f"the target's has {target_vocab}")
    if cfg.draft_vocab_size > cfg.vocab_size:
        raise HeadLoadError(f"the head in {where} drafts over {cfg.draft_vocab_size} ids, more than the target's "
                            f"{cfg.vocab_size}")
    if target_layers is not None:
        try:
            taps = feature_layers(target_layers, cfg.eagle_aux_hidden_state_layer_ids)
        except ValueError as exc:
            raise HeadLoadError(f"the head in {where} does not fit a {target_layers}-layer target: {exc}") from None
        spec.info = dataclasses.replace(spec.info, taps=taps)


def _embedding(spec: HeadSpec, where: str, target_embedding: torch.Tensor | None) -> None:
    """Decide whose token embedding the head uses: the target's, unless the head is narrower than its target
    (it must then carry its own, as EAGLE uses it) or carries one that differs from the target's (EAGLE and
    vLLM load the head's own then)."""
    cfg, state = spec.config, spec.tensors.state
    emb = state.pop("embed_tokens.weight", None)
    cross = cfg.width != cfg.hidden_size
    note = None
    if emb is None and cross:
        raise HeadLoadError(f"the head in {where} is narrower ({cfg.hidden_size}) than its target ({cfg.width}) "
                            "and carries no embed_tokens of its own")
    if emb is None:
        return
    if not cross and target_embedding is None:
        note = "embed_tokens dropped: the target's embedding is used"
    elif not cross and emb.shape == target_embedding.shape and torch.equal(
            emb.to(device=target_embedding.device, dtype=target_embedding.dtype), target_embedding):
        note = "embed_tokens: a copy of the target's, which is used"
    if note:
        spec.info = dataclasses.replace(spec.info, notes=spec.info.notes + (note,))
        return
    state["embed_tokens.weight"] = emb
    spec.config = dataclasses.replace(cfg, own_embedding=True)
    why = "narrower than its target" if cross else "differs from the target's"
    spec.info = dataclasses.replace(spec.info, variants=spec.info.variants + (f"own embed_tokens ({why})",))


def _listed(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")


def _build(spec: HeadSpec, where: str) -> EagleHead:
    """Check names and shapes on a head without storage (a config's sizes allocate nothing until they match
    the tensors already read), then build it and load them."""
    with torch.device("meta"):
        wanted = {k: tuple(v.shape) for k, v in EagleHead(spec.config).state_dict().items()}
    state = spec.tensors.state
    unknown = sorted(set(state) - set(wanted))
    if unknown:
        raise HeadLoadError(f"the head in {where} carries tensors this loader does not understand: {_listed(unknown)}")
    missing = sorted(set(wanted) - set(state))
    if missing:
        raise HeadLoadError(f"the head in {where} lacks {_listed(missing)}")
    wrong = [f"{k} is {tuple(state[k].shape)}, its config makes it {wanted[k]}" for k in sorted(wanted)
             if tuple(state[k].shape) != wanted[k]]
    if wrong:
        raise HeadLoadError(f"the head in {where} does not match its config: {_listed(wrong)}")
    head = EagleHead(spec.config, spec.info)
    head.load_state_dict(state)
    return head


def load_head(folder: str | Path, target_hidden: int, target_vocab: int, device: torch.device,
              dtype: torch.dtype, target_layers: int | None = None,
              target_embedding: torch.Tensor | None = None) -> EagleHead:
    """Load a head in any published layout for a target of width `target_hidden`, vocabulary `target_vocab`,
    (when given) `target_layers` layers, which the taps must lie within, and token embedding
    `target_embedding`, against which an embedding the head carries is compared. Its HeadInfo is `head.info`."""
    folder = Path(folder).expanduser()
    where = f"'{folder}'"
    raw = _config(folder)
    state = _state_dict(folder)
    try:
        spec = read_head(raw, state)
    except HeadLoadError as exc:
        raise HeadLoadError(f"the head in {where} is refused: {exc}") from None
    _fit(spec, where, target_hidden, target_vocab, target_layers)
    _embedding(spec, where, target_embedding)
    head = _build(spec, where).to(device=device, dtype=dtype).eval()
    head.info = dataclasses.replace(head.info, trained=trained_text(folder)) if head.info is not None else None
    return head


def trained_text(folder: Path) -> str:
    """What a head trained here says of itself (its metrics.json, written by cli/train_eagle3.py): the data and the
    held-out top-1 agreement with the target by draft depth; "" for a published head."""
    try:
        m = json.loads((folder / "metrics.json").read_text())
        agree = ", ".join(f"{float(a):.0%}" for a in m["agreement"][:4])
        data = str(m.get("data_text", "the embedded target's training split (Python stdlib code)"))[:200]
        return f"trained here on {data}; held-out agreement by depth {agree}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def save_head(head: EagleHead, folder: str | Path, metrics: dict | None = None) -> None:
    """config.json + model.safetensors (fp16 weights; d2t/t2d kept in their own dtypes)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**head.config.to_dict(), "torch_dtype": "float16"}, indent=2))
    state = {k: (v.half() if v.is_floating_point() else v).contiguous().cpu() for k, v in head.state_dict().items()}
    save_file(state, folder / "model.safetensors")
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))


DEFAULT_HEAD = Path(__file__).resolve().parents[2] / "assets" / "models" / "eagle3"
_HEADS: dict[tuple[str, str, str, str], EagleHead] = {}


def head_for(target, folder: str | Path = DEFAULT_HEAD) -> EagleHead:
    """The head in `folder` for `target`, loaded once per (folder, target, its device and dtype: the same model loaded
    in fp32 and in bf16 gets a head in each) and shared read-only."""
    key = (str(Path(folder).expanduser().resolve()), target.name, str(target.device), str(target.dtype))
    if key not in _HEADS:
        _HEADS[key] = load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype,
                                target.num_layers, target.body.embed_tokens.weight)
        _HEADS[key].source = f"{key[0]}#{weights_stamp(Path(key[0]))}"  # its drafters' identity (cost curves)
    return _HEADS[key]


def weights_stamp(folder: Path) -> str:
    """Size and time of the folder's files: a head retrained into the same folder is another drafter to the
    kept cost curves (its draft vocabulary, and so its forward's cost, may have changed)."""
    files = [f.stat() for f in folder.iterdir() if f.is_file()] if folder.is_dir() else []
    return f"{sum(st.st_size for st in files)}-{max((st.st_mtime_ns for st in files), default=0)}"
