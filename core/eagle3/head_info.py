"""What a loaded EAGLE-3 head is, as plain data (no torch): whose layout it came in, which target hidden
states it reads and which rule chose them, its draft vocabulary and the variants it carries. The CLI
prints `line()` where it names the drafter; the page and the trace export take `to_dict()`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


class HeadLoadError(RuntimeError):
    """A draft head could not be loaded; the message says why in one line."""


# which rule chose the taps; the values say why, in the words the readout and docs/heads.md use
TAP_RULES = {
    "default": "no ids in the config: the inputs of layers 2, L//2, L-3 (SafeAILab's default)",
    "top-level": "top-level eagle_aux_hidden_state_layer_ids are hidden-state indices (layer inputs), used as "
                 "given (vLLM, speculators)",
    "eagle_config+1": "eagle_config ids count layer outputs (first id is 1): +1 each (SGLang's rule)",
    "eagle_config": "eagle_config ids whose first id is not 1 are layer inputs, used as given (SGLang's rule "
                    "since its PR #25454)",
}


@dataclass(frozen=True)
class HeadInfo:
    dialect: str  # whose layout the checkpoint is in: SafeAILab, SpecForge, speculators, ModelOpt, AngelSlim, NeMo
    tap_rule: str  # a key of TAP_RULES
    draft_vocab: int
    vocab: int
    layers: int = 1
    taps: tuple[int, ...] | None = None  # target hidden-state indices fc reads (0 = embeddings, k = input of
    # layer k); None until the target's depth is known
    config_ids: tuple[int, ...] | None = None  # the ids as the config wrote them, before the rule
    variants: tuple[str, ...] = ()  # what changes the head's function, under its publishers' names
    notes: tuple[str, ...] = ()  # what was accepted quietly, ignored or derived
    warnings: tuple[str, ...] = ()  # what was loaded but should be looked at (config keys ignored by name):
    # the CLI's line and the page's compatibility readout show these
    trained: str = ""  # for a head trained here: on what, and its held-out agreement (its metrics.json)
    scoring: str = ""  # how the drafter scores its LM head when not in the head's own dtype (int8 on a CPU)

    def to_dict(self) -> dict:
        """A small JSON-able dict (for the trace export and the page)."""
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def taps_text(self) -> str:
        taps = ",".join(map(str, self.taps)) if self.taps else "?"
        given = f" from {list(self.config_ids)}" if self.config_ids and tuple(self.config_ids) != self.taps else ""
        return f"taps {taps}{given} ({self.tap_rule})"

    def line(self) -> str:
        """One line for the CLI's stderr, where the drafter is named."""
        vocab = (f"draft vocab {self.draft_vocab} of {self.vocab}" if self.draft_vocab != self.vocab
                 else f"full vocab {self.vocab}")
        parts = [f"{self.dialect} layout", self.taps_text(), vocab, f"{self.layers} layer{'s' * (self.layers > 1)}"]
        if self.variants:
            parts.append("variants: " + ", ".join(self.variants))
        if self.trained:
            parts.append(self.trained)
        if self.scoring:
            parts.append(self.scoring)
        parts += [f"warning: {w}" for w in self.warnings]
        return "; ".join(parts)
