"""Read and write EAGLE-3 heads in the layout SafeAILab/EAGLE publishes: a folder with `config.json`
(a one-layer Llama config plus `draft_vocab_size`) and `model.safetensors` or `pytorch_model.bin`.

A `.bin` is only ever read with `torch.load(weights_only=True)`: no pickled code runs. Tensor names the
head does not have (e.g. an `embed_tokens.weight` some releases carry) are ignored; missing ones are an
error, as is a head whose width does not match the target's.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from core.eagle3 import EagleConfig, EagleHead, feature_layers


class HeadLoadError(RuntimeError):
    """A draft head could not be loaded; the message says why in one line."""


def _state_dict(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / "model.safetensors").exists():
        return load_file(folder / "model.safetensors")
    if (folder / "pytorch_model.bin").exists():
        try:
            return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        except Exception as exc:  # a pickle with anything but tensors is refused by weights_only
            raise HeadLoadError(f"'{folder}/pytorch_model.bin' is not a plain tensor file ({type(exc).__name__})") from None
    raise HeadLoadError(f"'{folder}' has neither model.safetensors nor pytorch_model.bin")


def load_head(folder: str | Path, target_hidden: int, target_vocab: int, device: torch.device,
              dtype: torch.dtype, target_layers: int | None = None) -> EagleHead:
    """Load a head for a target of width `target_hidden`, vocabulary `target_vocab` and (when given)
    `target_layers` layers, which the depths the head reads must lie within."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise HeadLoadError(f"'{folder}' is not a folder holding an EAGLE-3 head")
    if not (folder / "config.json").exists():
        raise HeadLoadError(f"'{folder}' has no config.json (expected an EAGLE-3 head folder)")
    try:
        cfg = EagleConfig.from_dict(json.loads((folder / "config.json").read_text()))
    except (TypeError, KeyError, ValueError) as exc:
        raise HeadLoadError(f"'{folder}/config.json' is not an EAGLE-3 head config ({exc})") from None
    width = cfg.target_hidden_size or cfg.hidden_size
    if width != target_hidden:
        raise HeadLoadError(f"the head in '{folder}' reads hidden size {width}; the target's is {target_hidden}")
    if cfg.vocab_size != target_vocab:
        raise HeadLoadError(f"the head in '{folder}' maps to a vocabulary of {cfg.vocab_size}; "
                            f"the target's has {target_vocab}")
    if target_layers is not None:
        try:
            feature_layers(target_layers, cfg.eagle_aux_hidden_state_layer_ids)
        except ValueError as exc:
            raise HeadLoadError(f"the head in '{folder}' does not fit a {target_layers}-layer target: {exc}") from None
    head = EagleHead(cfg)
    state = _state_dict(folder)
    wanted = head.state_dict()
    missing = [k for k in wanted if k not in state]
    if missing:
        raise HeadLoadError(f"the head in '{folder}' lacks {', '.join(missing[:3])}")
    try:
        head.load_state_dict({k: state[k] for k in wanted})
    except RuntimeError as exc:
        raise HeadLoadError(f"the head in '{folder}' does not match its config: {str(exc).splitlines()[-1].strip()}") from None
    return head.to(device=device, dtype=dtype).eval()


def save_head(head: EagleHead, folder: str | Path, metrics: dict | None = None) -> None:
    """config.json + model.safetensors (fp16 weights; d2t/t2d kept in their own dtypes)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({**head.config.to_dict(), "torch_dtype": "float16"}, indent=2))
    state = {k: (v.half() if v.is_floating_point() else v).contiguous().cpu() for k, v in head.state_dict().items()}
    save_file(state, folder / "model.safetensors")
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))


DEFAULT_HEAD = Path(__file__).resolve().parent.parent / "assets" / "models" / "eagle3"
_HEADS: dict[tuple[str, str], EagleHead] = {}


def head_for(target, folder: str | Path = DEFAULT_HEAD) -> EagleHead:
    """The head in `folder` for `target`, loaded once per (folder, target) and shared read-only."""
    key = (str(Path(folder).expanduser().resolve()), target.name)
    if key not in _HEADS:
        _HEADS[key] = load_head(folder, target.config.hidden_size, target.vocab_size, target.device, target.dtype,
                                target.num_layers)
    return _HEADS[key]
