"""Which models a visitor may pick, decided by the operator: the embedded default always; Hub ids only
when SPECSCOPE_ALLOW_HUB allows them (default: on for a loopback bind, off for any other address, so a
public server never opens a connection on a visitor's word), only ids on the allow-list, and only up to a
size cap. Local paths typed into the page are refused; operators point the embedded choice elsewhere with
SPECSCOPE_TARGET / SPECSCOPE_DRAFT. Every check here runs before anything touches the network."""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core import knobs
from core.drafter_registry import DEFAULT_DRAFTER, DRAFTERS, DrafterFactory, drafter_factory  # noqa: F401 - the page's default
from core.drafters.contract import Drafter
from core.eagle3.loading import HeadLoadError
from core.model.causal_lm import CausalLM
from core.model.real_models import REAL_MODELS, complete, model_dir
from core.model.loading import DEFAULT_DRAFT, DEFAULT_TARGET, ModelLoadError, hub_offline, hub_reachable, load_model

EMBEDDED = "embedded"
REAL = "smollm2"  # the real model fetched at install time (python -m cli.get_model smollm2), heads trained here


def real_fetched(name: str = REAL) -> bool:
    return complete(model_dir(name))


def default_model() -> str:
    """The model the page opens on: the real model when it was fetched at install time, else the embedded pair;
    SPECSCOPE_MODEL=embedded keeps the embedded pair (the test suite's fast workhorse)."""
    want = os.environ.get("SPECSCOPE_MODEL", REAL).strip() or REAL
    if want == EMBEDDED or want not in REAL_MODELS or not real_fetched(want):
        return EMBEDDED
    return want


def model_label(name: str) -> str:
    """How the page names the loaded model (never a server path)."""
    real = REAL_MODELS.get(name)
    if real is not None:
        return f"{real.title} (a real pretrained model, Q4_1 weights dequantized; heads trained here)"
    if name in ("", EMBEDDED):
        return "the embedded 12 M-parameter model trained here"
    return name
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Small models of the supported families, in pairs that share a tokenizer (a target and its draft), and the
# published EAGLE-3 head of the smallest curated pair below.
DEFAULT_ALLOW = ("Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B",
                 "AngelSlim/Qwen3-1.7B_eagle3")


@dataclass(frozen=True)
class Pair:
    """A target with an EAGLE-3 head published for it (ids as their publishers' READMEs and vLLM's own tests
    name them). `target_gb`: the target's bf16 weights from its parameter count, approximate; a one-layer head
    is well under 1 GB. Gated targets need HF_TOKEN."""
    target: str
    head: str
    target_gb: float
    gated: bool = False

    def label(self) -> str:
        gated = ", gated: needs HF_TOKEN" if self.gated else ""
        return f"{self.target} + {self.head} (≈{self.target_gb:g} GB + head < 1 GB{gated})"


PAIRS = (
    Pair("Qwen/Qwen3-1.7B", "AngelSlim/Qwen3-1.7B_eagle3", 4.1),
    Pair("Qwen/Qwen3-4B", "AngelSlim/Qwen3-4B_eagle3", 8.0),
    Pair("Qwen/Qwen3-8B", "AngelSlim/Qwen3-8B_eagle3", 16.4),
    Pair("meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", 16.1, gated=True),
)
DEFAULT_MAX_MB = 5000  # the smallest curated pair's target (Qwen3-1.7B, ≈4.1 GB) fits
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def device() -> str:
    return os.environ.get("SPECSCOPE_DEVICE", "auto")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and 'localhost'; anything else (0.0.0.0, a LAN or public address) may be reached by others."""
    host = (host or "").strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HubPolicy:
    enabled: bool
    allow: tuple[str, ...]  # ("*",) = any id of a supported family
    max_mb: int
    why: str  # how `enabled` was decided, for the page and the logs

    def allows(self, name: str) -> bool:
        return "*" in self.allow or name in self.allow


def hub_policy() -> HubPolicy:
    """Read at every call, so an operator's environment is the only source of truth."""
    flag = os.environ.get("SPECSCOPE_ALLOW_HUB", "").strip().lower()
    bind = os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")
    if flag in TRUE:
        enabled, why = True, "SPECSCOPE_ALLOW_HUB is on"
    elif flag in FALSE:
        enabled, why = False, "SPECSCOPE_ALLOW_HUB is off"
    elif is_loopback(bind):
        enabled, why = True, f"the server binds to {bind} (loopback)"
    else:
        enabled, why = False, f"the server binds to {bind} (not loopback); set SPECSCOPE_ALLOW_HUB=1 to allow"
    allow_env = os.environ.get("SPECSCOPE_HUB_MODELS", "").strip()
    allow = tuple(x.strip() for x in allow_env.split(",") if x.strip()) if allow_env else DEFAULT_ALLOW
    mb = os.environ.get("SPECSCOPE_HUB_MAX_MB", "").strip()
    return HubPolicy(enabled, allow, int(mb) if mb.isdigit() else DEFAULT_MAX_MB, why)


def offered_pairs(policy: HubPolicy | None = None) -> list[Pair]:
    """The curated pairs this server lets visitors load: Hub on, both ids allowed, under the size cap."""
    p = policy or hub_policy()
    return [pair for pair in PAIRS if p.enabled and p.allows(pair.target) and p.allows(pair.head)
            and pair.target_gb * 1000 <= p.max_mb]


def pair_choices() -> list[tuple[str, str]]:
    """The model menu: the real model fetched at install time (when it was), the embedded pair, then the curated
    pairs this server allows, by target id."""
    real = [(f"{m.title}: real model, EAGLE-3 head and exit heads trained here (offline)", m.name)
            for m in REAL_MODELS.values() if real_fetched(m.name)]
    return real + [("embedded: the 12 M model trained here (offline)", EMBEDDED)] + \
        [(p.label(), p.target) for p in offered_pairs()]


def pair_of(target: str) -> Pair | None:
    return next((p for p in PAIRS if p.target == target), None)


def model_box_info() -> str:
    """What the page says it may load (shown under the model box)."""
    p = hub_policy()
    real = "".join(f"'{m}', " for m in REAL_MODELS if real_fetched(m))
    if not p.enabled:
        return f"{real}'embedded' only: Hub models are off on this server ({p.why})"
    ids = "any Llama / Qwen2 / Qwen3 / Mistral id" if "*" in p.allow else ", ".join(p.allow)
    offline = "; HF_HUB_OFFLINE is set, so only models already in the local cache" if hub_offline() else ""
    return f"{real}'embedded' or a Hub id: {ids} (safetensors up to {p.max_mb:,} MB){offline}"


def hub_size_mb(name: str) -> float:
    """Total size of the repository's safetensors files, asked of the Hub before anything is downloaded."""
    from huggingface_hub import HfApi  # imported here: only an enabled, allowed, online load gets this far

    info = HfApi().model_info(name, files_metadata=True, timeout=10)
    return sum((s.size or 0) for s in info.siblings or [] if s.rfilename.endswith(".safetensors")) / 1e6


def check_hub(name: str, policy: HubPolicy) -> None:
    """Raises ValueError unless the operator allows visitors to load this Hub id (no network involved)."""
    if not policy.enabled:
        raise ValueError(f"'{name}': loading Hub models is off on this server ({policy.why}); use 'embedded'")
    if not policy.allows(name):
        raise ValueError(f"'{name}' is not on this server's list of models: {', '.join(policy.allow)}")


def check_size(name: str, policy: HubPolicy) -> None:
    """Raises ValueError when the Hub says the repository's weights exceed the cap, or cannot say. Offline or
    unreachable, load_model can only read the local cache, so nothing would be downloaded."""
    if hub_offline() or not hub_reachable():
        return
    try:
        mb = hub_size_mb(name)
    except Exception as exc:  # noqa: BLE001 - any failure to learn the size refuses the load
        raise ValueError(f"'{name}': could not read its size from the Hub ({type(exc).__name__})") from None
    if mb > policy.max_mb:
        raise ValueError(f"'{name}' is {mb:,.0f} MB of weights; this server loads at most {policy.max_mb:,} MB")


def resolve_model(name: str, role: str) -> str:
    """What load_model gets for the name typed in the model box; raises ValueError for anything else."""
    name = (name or "").strip()
    if name in ("", EMBEDDED):
        env = "SPECSCOPE_TARGET" if role == "target" else "SPECSCOPE_DRAFT"
        return os.environ.get(env, DEFAULT_TARGET if role == "target" else DEFAULT_DRAFT)
    if name in REAL_MODELS:
        if not real_fetched(name):
            raise ValueError(f"'{name}' was not fetched on this server (python -m cli.get_model {name}); use 'embedded'")
        return name
    if not HUB_ID.match(name) or ".." in name or Path(name).expanduser().exists():
        raise ValueError(f"'{name}' is not a Hub id like 'Qwen/Qwen2.5-0.5B'; local paths cannot be loaded from the page")
    check_hub(name, hub_policy())
    return name


def resolve_head(name: str) -> str | None:
    """The EAGLE-3 head typed in the draft box: None for the embedded head (it fits the embedded target
    only), else an allowed Hub id (ValueError otherwise)."""
    name = (name or "").strip()
    if name in ("", EMBEDDED):
        return None
    return resolve_model(name, "draft")


def drafter_weights(drafter: str, draft_name: str) -> str | None:
    """What the draft box names for this drafter: a draft LM (model), a head (eagle3, None = the embedded one),
    nothing (lookup); allowed and size-checked like a target when a visitor typed a Hub id."""
    if drafter == "lookup":
        return None
    src = resolve_model(draft_name, "draft") if drafter == "model" else resolve_head(draft_name)
    if src is not None and (draft_name or "").strip() not in ("", EMBEDDED):  # a visitor's Hub id
        check_size(src, hub_policy())
    return src


def get_models(target_name: str, draft_name: str, needs_draft: bool, drafter: str = "model",
               options: dict | None = None) -> tuple[CausalLM, Drafter | None]:
    """The target (shared read-only weights: load_model caches them) and, when the method drafts, a fresh
    drafter of the chosen kind for one session (`options`: its own knobs, e.g. ℓ_self); raises ValueError with a
    one-line reason."""
    if drafter not in DRAFTERS:
        raise ValueError(f"unknown drafter '{drafter}' (choose from {', '.join(DRAFTERS)})")
    target_src = resolve_model(target_name, "target")
    if (target_name or "").strip() not in ("", EMBEDDED, *REAL_MODELS):  # a visitor's Hub id, not the operator's
        check_size(target_src, hub_policy())
    try:
        target = load_model(target_src, device())  # load_model serialises loads itself
    except ModelLoadError as exc:
        raise ValueError(str(exc)) from None
    if not needs_draft:
        return target, None
    return target, new_drafter(drafter, target, drafter_weights(drafter, draft_name), options)


_FACTORIES: dict[tuple, DrafterFactory] = {}


def new_drafter(name: str, target: CausalLM, weights: str | None = None, options: dict | None = None) -> Drafter:
    """A fresh drafter (its own caches) for one session; the weights behind it (a draft LM, or an EAGLE-3 head:
    the embedded one fits the embedded target only) are loaded once per target and shared. Weights that do
    not fit the target, or a drafter knob out of its range, say why in one line."""
    opts = knobs.drafter_options(name, options or {})
    key = (name, id(target), weights, tuple(sorted(opts.items())))  # load_model caches targets: the id is stable
    if key not in _FACTORIES:
        try:
            _FACTORIES[key] = drafter_factory(name, target, weights, device(), opts)
        except (HeadLoadError, ModelLoadError) as exc:
            raise ValueError(f"drafter '{name}' cannot be used with this target: {exc}") from None
    return _FACTORIES[key]()


def preload() -> None:
    """Load the embedded pair, its EAGLE-3 head and its exit heads now, the real model the page opens on (with the
    heads trained here for it), and the Hub targets (with their curated heads) named in SPECSCOPE_PRELOAD. On a ZeroGPU Space (and under its emulation) every engine call runs in a
    fresh worker: weights loaded at import are there already (Spaces packs them for the GPU); anything loaded
    inside a call is loaded again by the next one."""
    from core.model.exit_heads import heads_for
    target, _ = get_models(EMBEDDED, EMBEDDED, needs_draft=True, drafter="model")
    heads_for(target)
    if DEFAULT_DRAFTER != "model":
        new_drafter(DEFAULT_DRAFTER, target)
    if default_model() != EMBEDDED:
        real, _ = get_models(default_model(), EMBEDDED, needs_draft=True, drafter="eagle3")
        heads_for(real)
    for name in [x.strip() for x in os.environ.get("SPECSCOPE_PRELOAD", "").split(",") if x.strip()]:
        pair = pair_of(name)  # an operator's curated pair (its target and head), loaded with the rest
        get_models(name, pair.head if pair else EMBEDDED, needs_draft=pair is not None, drafter="eagle3")
