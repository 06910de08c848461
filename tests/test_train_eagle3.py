"""cli/train_eagle3.py end to end on a tiny Llama: a head that names the target depths it reads saves them
in the published config field and loads with them, and a warm start (--init) runs a leg on a schedule of
its own, recorded for the model card."""
import json
import shutil
from pathlib import Path

import numpy as np
import torch

from cli.train_eagle3 import legs_note, main
from core.eagle3.loading import load_head
from tests.tiny_models import tiny_hf

EMBEDDED = Path(__file__).resolve().parent.parent / "assets" / "models" / "target"


def tiny_target(folder: Path) -> Path:
    """A 4-layer tiny Llama saved with the embedded tokenizer (only read for the corpus, cached below)."""
    tiny_hf("llama", num_hidden_layers=4).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EMBEDDED / name, folder / name)
    return folder


def tiny_work(folder: Path, vocab: int) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.save(folder / "train_ids.npy", rng.integers(0, vocab, 4000).astype(np.int32))
    np.save(folder / "heldout_ids.npy", rng.integers(0, vocab, 400).astype(np.int32))
    return folder


def test_feature_layers_are_saved_and_a_warm_start_runs_its_own_schedule(tmp_path):
    target = tiny_target(tmp_path / "target")
    vocab = json.loads((target / "config.json").read_text())["vocab_size"]
    common = ["--target", str(target), "--batch-size", "1", "--seq-len", "16", "--ttt", "2", "--draft-vocab", "32",
              "--eval-tokens", "32", "--device", "cpu"]
    main(common + ["--out", str(tmp_path / "a"), "--work", str(tiny_work(tmp_path / "wa", vocab)), "--steps", "3",
                   "--feature-layers", "1,2,4"])
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2, 4]
    head = load_head(tmp_path / "a", 32, vocab, torch.device("cpu"), torch.float32, 4)
    assert head.config.eagle_aux_hidden_state_layer_ids == [1, 2, 4]

    main(common + ["--out", str(tmp_path / "b"), "--work", str(tiny_work(tmp_path / "wb", vocab)), "--steps", "5",
                   "--init", str(tmp_path / "a"), "--feature-layers", "1,2,4"])
    m = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert [g["start"] for g in m["legs"]] == [0, 3]
    assert m["legs"][1]["schedule_from"] == 3 and m["legs"][1]["init"] == str(tmp_path / "a")
    assert "--feature-layers 1,2,4, on a schedule of its own" in legs_note(m)
    assert sum(1 for _ in (tmp_path / "wb" / "head.log.jsonl").open()) == 2  # steps 3 and 4 only
