"""Every knob, declared once: its name, type, range, default, the paper's symbol and a one-line help.

The CLI's flags (cli/common.py), the app's sliders and their validation (ui/knobs.py), the presets below,
the method builders and the tree policies all read these declarations, so a range or a default cannot
drift between them. Plain Python (no torch): the app's renderers may read a default from here."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Knob:
    """One knob, everything about it in one place: what the engine accepts, what the page offers, the
    share link's name. The CLI's flags, the page's sliders and their checks, the link and the presets all
    read this."""
    name: str  # keyword for the method builder; the CLI flag is --name with '-' for '_'
    label: str  # the paper's symbol first, then a few words: "N (node budget)"
    kind: type  # int, float or str
    default: Any
    help: str  # one line: CLI help, and the page's tooltip unless page_help says otherwise
    minimum: float | None = None
    maximum: float | None = None
    open_low: bool = False  # the minimum itself is excluded (μ > 0)
    step: float = 1.0  # the app's slider step
    ui_min: float | None = None  # the app's slider range when the engine allows more than a page should offer
    ui_max: float | None = None
    on_cli: bool = True  # `auto` is a preset, not a flag
    link: str | None = None  # the share link's parameter (the paper's symbol where it is short); None: not linked
    page_label: str | None = None  # the slider's label where it says more than `label`
    page_help: str | None = None  # the slider's tooltip where it says more than `help`
    slider: bool = True  # a slider on its method's view (auto and the exit-layer list are controls of their own)

    @property
    def symbol(self) -> str:
        return self.label.split(" ")[0]

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def integer(self) -> bool:
        return self.kind is int

    @property
    def page_min(self) -> float | None:
        return self.ui_min if self.ui_min is not None else self.minimum

    @property
    def page_max(self) -> float | None:
        return self.ui_max if self.ui_max is not None else self.maximum

    @property
    def page_text(self) -> str:
        return self.page_label or self.label

    @property
    def info(self) -> str:
        """The page's tooltip: a sentence."""
        return self.page_help or self.help[0].upper() + self.help[1:] + "."

    def range_text(self) -> str:
        lo = "-∞" if self.minimum is None else f"{self.minimum:g}"
        hi = "∞" if self.maximum is None else f"{self.maximum:g}"
        return f"{'(' if self.open_low else '['}{lo}, {hi}{')' if self.maximum is None else ']'}"

    def check(self, value: Any, page: bool = False) -> Any:
        """The value as this knob's type, or a ValueError naming the knob and its range. page=True holds it to
        the range the page offers (a visitor's input, the API) rather than the engine's."""
        if self.kind is str:
            return None if value is None else str(value)
        if page and value is None:
            raise ValueError(f"{self.page_text} is missing")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"{self.page_text if page else self.label} must be a number (got {value!r})") from None
        if not math.isfinite(value):
            raise ValueError(f"{self.label} must be a finite number in {self.range_text()} (got {value})")
        if self.kind is int and value != int(value):
            raise ValueError(f"{self.label} must be a whole number in {self.range_text()} (got {value:g})")
        lo, hi = (self.page_min, self.page_max) if page else (self.minimum, self.maximum)
        low_ok = lo is None or (value > lo if self.open_low and lo == self.minimum else value >= lo)
        if not low_ok or (hi is not None and value > hi):
            where = f"between {lo:g} and {hi:g}" if page and hi is not None else f"in {self.range_text()}"
            raise ValueError(f"{self.page_text if page else self.label} must be {where} (got {value:g})")
        return self.kind(value)


MAX_N = 1024  # node budgets beyond this build (N, N) masks for no gain on any model we run

N = Knob("N", "N (node budget)", int, 60, "drafted nodes per step, the root not counted", 1, MAX_N, ui_max=128,
         link="N", page_help="Drafted nodes per step, root not counted; the same budget is given to the static tree.")
K = Knob("K", "K (width)", int, 10, "Top-K children (TALON: at the root and the first k levels)", 1, MAX_N, ui_max=20,
         link="K", page_label="K (root width)",
         page_help="Top-K children kept at the first k levels, however confident the draft is.")
MU = Knob("mu", "μ (gate ratio)", float, 0.03, "TALON gate: keep a candidate when p(u) ≥ μ·m_d", 0, 1, open_low=True,
          step=0.001, ui_min=0.001, link="mu", page_label="μ (gate)",
          page_help="Keep a candidate when p(u) ≥ μ·m_d; larger μ gives deeper, narrower trees.")
K_INIT = Knob("k_init", "k (Top-K levels)", int, 1, "TALON: leading levels forced to Top-K before the gate", 0, 64,
              ui_max=4, link="k",
              page_help="Leading levels forced to Top-K before the gate takes over (k = 0: pure gating).")
DEPTH = Knob("depth", "D (depth)", int, 8, "static tree: depth D (δ = D + 1)", 0, MAX_N, ui_max=16, link="D")
GAMMA = Knob("gamma", "γ (chain length)", int, 5, "chain: drafted tokens per step", 1, MAX_N, ui_max=32, link="gamma")
SHAPE_T = Knob("shape_temperature", "T_shape (shaping temperature)", float, 1.0,
               "trees see softmax(z / T_shape) of the drafter's logits (ours, not the papers'; verification is "
               "untouched, so still lossless)", 0, 100, open_low=True, step=0.05, ui_min=0.1, ui_max=2.0, link="T",
               page_label="T_shape (sharpen q)", page_help="The trees see softmax(z / T_shape) of the drafter's "
               "logits: below 1 sharpens a flat q so the gate goes deeper. Ours, not the paper's; verification is "
               "untouched.")
MU_SCHEDULE = Knob("mu_schedule", "μ schedule", str, "fixed", "fixed: μ as set; adaptive: μ moved after every "
                   "verification by what it returned (core/trees/mu_schedule.py; " + "ours, not the paper's" + ")",
                   slider=False)
AUTO = Knob("auto", "auto", int, 0, "choose N per step from the measured cost curve (core/auto/budget.py)", 0, 1,
            on_cli=False, slider=False)

OURS = "ours, not the paper's"
ALPHA = Knob("alpha", "α (annealing)", float, 0.5, "ACT: T_ℓ = 1 + α(1 − ℓ/L); α = 0 turns annealing off (the paper "
             "gives no value: ours)", 0, None, step=0.05, ui_max=4.0, link="alpha",
             page_help="T_ℓ = 1 + α(1 − ℓ/L): shallow layers' confidences are deflated more; α = 0 turns ACT off. "
             "The paper gives no value: 0.5 is ours.")
TAU_EXIT = Knob("tau_exit", "τ_exit (exit threshold)", float, 0.3,
                "a drafted token exits at the first checked layer whose annealed confidence reaches τ_exit", 0, 1,
                step=0.01, ui_min=0.05, link="tau")
D_MAX = Knob("d_max", "d_max (depth bound)", int, 6, "a token that reaches d_max layers without exiting ends the "
             "block (a check always happens at d_max); above L means L, where a token always exits (" + OURS + ")",
             1, None, ui_max=64, link="dmax", page_help="A token that reaches d_max layers without exiting ends the "
             f"block: a check always happens at d_max. Above L it is L, where a token always exits ({OURS}).")
W_MAX = Knob("w_max", "w_max (width bound)", int, 3, "at most w_max tokens drafted before verification (0: unbounded)",
             0, None, ui_min=1, ui_max=32, link="wmax",
             page_help="At most w_max tokens are drafted before the target verifies them.")
MIN_EXIT = Knob("min_exit_layer", "ℓ_min (lowest exit layer)", int, 1, "no exit check below this layer (" + OURS
                + "; the paper checks from the first layer)", 1, None, ui_max=64, link="lmin",
                page_help=f"No exit check below this layer ({OURS}: the paper checks from layer 1).")
EXIT_VOCAB = Knob("exit_vocab", "V_exit (exit vocabulary)", int, 0, "exit checks score only the V_exit most "
                  "frequent tokens of the heads' training text, renormalised over them, when the heads come with "
                  "that order (0: every token, as the paper; " + OURS + "); a token outside them cannot exit "
                  "early, and the output is unchanged", 0, None, step=256, ui_max=8192, link="vexit",
                  page_help="Checks score only the V_exit most frequent tokens and renormalise over them "
                  f"({OURS}: 0 = the whole vocabulary, as the paper); the output is unchanged.")
EXIT_LAYERS = Knob("exit_layers", "exit layers", str, "all", "layers with an exit check besides d_max, e.g. 2,4 ("
                   + OURS + "); all: every layer from ℓ_min (the paper); stored: the set stored with the heads, "
                   "measured fastest on held-out prompts (every layer where there is none)", slider=False)

EXIT_HEADS = Knob("exit_heads", "exit heads", str, "paper", "what a check reads: paper, a light LM head of its own "
                  "per layer over its most frequent tokens (the paper's kind; the shared heads where a model has none); "
                  "shared, adapters over the model's own final norm and LM head; lens, the logit lens", slider=False,
                  link="heads")

SELF_LAYER = Knob("self_layer", "ℓ_self (self-draft layer)", int, 4, "drafter self: the target drafts with its first "
                  "ℓ_self layers and the exit head after that layer; 1 ≤ ℓ_self ≤ L − 1 (" + OURS + ")", 1, None,
                  ui_max=64, page_help="The target drafts with its own first ℓ_self layers and the exit "
                  f"head there; its verification reuses those layers' K/V ({OURS}).")

TEMPERATURE = Knob("temperature", "temperature", float, 0.0, "0 = greedy (the output must equal plain decoding); > 0 "
                   "samples, still exactly the target's distribution", 0, None, step=0.05, ui_max=2.0, link="temp")
TOP_P = Knob("top_p", "top-p", float, 1.0, "nucleus sampling mass", 0, 1, open_low=True, step=0.01, slider=False)
SEED = Knob("seed", "seed", int, 0, "seed of the sampler, so a sampling run can be replayed", 0, 2**31 - 1, link="seed")
MAX_NEW = Knob("max_new_tokens", "max new tokens", int, 64, "generation stops after this many tokens (or at "
               "end-of-text)", 1, None, ui_max=256, link="new")

METHOD_KNOBS: dict[str, tuple[Knob, ...]] = {
    "ar": (),
    "chain": (GAMMA,),
    "static": (N, K, DEPTH, SHAPE_T, AUTO),
    "talon": (N, K, MU, K_INIT, SHAPE_T, AUTO, MU_SCHEDULE),
    "specbound": (ALPHA, TAU_EXIT, D_MAX, W_MAX, MIN_EXIT, EXIT_LAYERS, EXIT_VOCAB, EXIT_HEADS),
}
HEAD_INT8 = Knob("head_int8", "int8 head scores", str, "auto", "drafter eagle3: the head's LM head in int8 (weights "
                 "per row, inputs per call) on a CPU; auto: for heads with at least 4 M LM-head weights (the real "
                 "models'); q changes, verification does not, so the output is unchanged (" + OURS + ")",
                 slider=False)

LOOKUP_MIX = Knob("lookup_mix", "λ_lookup (prompt lookup's share of q)", float, 0.0, "a model drafter's q mixed with "
                  "prompt lookup's where the path ends in an n-gram seen earlier in the text: (1 − λ)·q + λ·q_lookup; "
                  "0 = off (" + OURS + ", core/drafters/lookup_mix.py)", 0, 1, step=0.05, slider=False, link="lam",
                  page_help="Prompt lookup's share of the drafter's q where the drafted path ends in words the text "
                  "has already said: (1 − λ)·q + λ·q_lookup, so trees follow what an answer repeats; 0 = off. The "
                  f"output is unchanged ({OURS}).")

DRAFTER_KNOBS: dict[str, tuple[Knob, ...]] = {  # knobs a drafter reads (core/drafter_registry.py)
    "self": (SELF_LAYER, LOOKUP_MIX), "eagle3": (HEAD_INT8, LOOKUP_MIX), "model": (LOOKUP_MIX,)}
SAMPLING_KNOBS = (TEMPERATURE, TOP_P, SEED, MAX_NEW)
ALL_KNOBS: dict[str, Knob] = {k.name: k for ks in (*METHOD_KNOBS.values(), *DRAFTER_KNOBS.values()) for k in ks}

# Named settings. paper: the papers' (= the declared defaults; SpecBound checks at every layer from the first over
# the heads' whole vocabulary; its α, τ_exit, d_max and w_max are ours, since the paper gives none: they are
# tuned per task, here by a sweep on the per-layer heads). embedded: the best tree measured on the embedded pair:
# on a CPU a tree's verification costs about linearly in its size, so the fastest tree is small, and a small
# budget pays only when it goes deep. auto: that shape with N chosen per step for this machine
# (core/auto/budget.py), N here only its cap. fast: SpecBound with the exit-layer set stored with the heads
# (measured fastest) over a reduced exit vocabulary, a higher τ_exit and a shallower d_max. A preset sets the
# knobs it names; the others keep their defaults. The runs that chose each: docs/bench/ (Presets, SpecBound).
_TREE = (N, K, MU, K_INIT, DEPTH, SHAPE_T)
_SB = tuple(k for k in METHOD_KNOBS["specbound"] if k is not EXIT_HEADS)  # both presets exit through the default heads
_PAPER = {k.name: k.default for k in _TREE + _SB}
_SMALL_DEEP = {**{k.name: k.default for k in _TREE}, "K": 2, "mu": 0.1, "shape_temperature": 0.5}
_FAST = {**{k.name: k.default for k in _SB}, "tau_exit": 0.3, "d_max": 4, "min_exit_layer": 2, "exit_layers": "stored",
         "exit_vocab": 1024}
PRESETS: dict[str, dict[str, float | int | str]] = {
    "paper": _PAPER,
    "embedded": {**_SMALL_DEEP, "N": 12},
    "auto": {**_SMALL_DEEP, "N": 96, "auto": 1},
    "fast": _FAST,
}


def page_knobs(method: str) -> list[Knob]:
    """The sliders of a method's view, in declaration order (the page, its checks and its link read these)."""
    return [k for k in METHOD_KNOBS[method] if k.slider]


def page_sampling() -> list[Knob]:
    """The sampling sliders every view shows (top-p is the CLI's only)."""
    return [k for k in SAMPLING_KNOBS if k.slider]


def presets_for(method: str) -> list[str]:
    """The presets that set some of this method's knobs."""
    names = {k.name for k in METHOD_KNOBS[method]}
    return [p for p, values in PRESETS.items() if names & set(values)]


def preset_text(name: str) -> str:
    """'N=12 K=2 mu=0.1 k=1 D=8 T_shape=0.5': a preset in one line for help texts."""
    p = PRESETS[name]
    if "N" not in p:
        return " ".join(f"{k}={v:g}" if not isinstance(v, str) else f"{k}={v}" for k, v in p.items())
    n = f"N<={p['N']} (auto)" if p.get("auto") else f"N={p['N']}"
    return f"{n} K={p['K']} mu={p['mu']:g} k={p['k_init']} D={p['depth']} T_shape={p['shape_temperature']:g}"


def preset_knobs(name: str) -> dict:
    if name not in PRESETS:
        raise ValueError(f"unknown preset '{name}' (choose from {', '.join(PRESETS)})")
    return dict(PRESETS[name])


def drafter_options(drafter: str, given: dict[str, Any]) -> dict[str, Any]:
    """The knobs a drafter reads as given, the declared default where not: the drafter checks them against the
    model it drafts for (e.g. ℓ_self against the target's L, core/drafters/self_drafter.py)."""
    return {k.name: given[k.name] if given.get(k.name) is not None else k.default for k in DRAFTER_KNOBS.get(drafter, ())}


def defaults(method: str) -> dict[str, Any]:
    return {k.name: k.default for k in METHOD_KNOBS[method]}


def resolve(method: str, given: dict[str, Any]) -> dict[str, Any]:
    """The method's knobs: its declared defaults, then the named `preset`'s, then the given values (each
    checked; `None` means unset). Knobs of other methods are ignored, so one namespace of knobs can build any
    method."""
    out = defaults(method)
    if given.get("preset"):
        out.update({k: v for k, v in preset_knobs(given["preset"]).items() if k in out})
    for k in METHOD_KNOBS[method]:
        if given.get(k.name) is not None:
            out[k.name] = k.check(given[k.name])
    return out
