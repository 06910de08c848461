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


def answers_file(path: Path, prefix: str, vocab: int, n: int, seed: int) -> Path:
    """cli.distill_data's format: one request's chat ids and the target's answer ids per line."""
    rng = np.random.default_rng(seed)
    rows = [{"id": f"{prefix}-{i}", "prompt_ids": rng.integers(0, vocab, 6).tolist(),
             "response_ids": rng.integers(0, vocab, 20).tolist()} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_leg_adds_a_features_folder_and_widens_the_draft_vocabulary(tmp_path):
    """A later leg trains on two features folders (the first leg's data and new data, each computed once) and
    grows the draft vocabulary: every token the saved head could draft keeps its trained lm_head row."""
    from cli.eagle3_features import main as features

    target = tiny_target(tmp_path / "target")
    vocab = json.loads((target / "config.json").read_text())["vocab_size"]
    answers = [answers_file(tmp_path / "a.jsonl", "train", vocab, 60, 0),
               answers_file(tmp_path / "b.jsonl", "wide", vocab, 60, 1)]
    for name, ids in (("fa", "train-"), ("fb", "wide-")):
        features(["--model", str(target), "--answers", *map(str, answers), "--out", str(tmp_path / name),
                  "--ids", ids, "--feature-layers", "1,2,4"])
        assert all(i.startswith(ids) for i in json.loads((tmp_path / name / "meta.json").read_text())["ids"])
    common = ["--target", str(target), "--batch-size", "2", "--ttt", "2", "--device", "cpu"]
    main(common + ["--features", str(tmp_path / "fa"), "--draft-vocab", "32", "--steps", "2",
                   "--out", str(tmp_path / "h1"), "--work", str(tmp_path / "w1")])
    main(common + ["--features", f"{tmp_path / 'fa'},{tmp_path / 'fb'}", "--draft-vocab", "48", "--steps", "4",
                   "--init", str(tmp_path / "h1"), "--out", str(tmp_path / "h2"), "--work", str(tmp_path / "w2")])
    first = load_head(tmp_path / "h1", 32, vocab, torch.device("cpu"), torch.float32, 4)
    second = json.loads((tmp_path / "h2" / "config.json").read_text())
    assert second["draft_vocab_size"] == 48
    m = json.loads((tmp_path / "h2" / "metrics.json").read_text())
    assert m["legs"][-1]["draft_vocab"] == 48 and "," in m["legs"][-1]["features"]
    before = json.loads((tmp_path / "h1" / "metrics.json").read_text())["train_tokens"]
    assert m["train_tokens"] > before > 0  # the tokens of every leg, the warm start's included
    old_ids = first.d2t + torch.arange(len(first.d2t))
    from safetensors.torch import load_file
    d2t = load_file(str(tmp_path / "h2" / "model.safetensors"))["d2t"]
    assert set(old_ids.tolist()) <= set((d2t.long() + torch.arange(len(d2t))).tolist())
    from transformers import AutoModelForCausalLM

    from cli.train_eagle3 import new_head, saved_vocabulary, warm_start
    ids = saved_vocabulary(first, np.ones(vocab), 48)
    assert len(ids) == 48 and len(saved_vocabulary(first, np.zeros(vocab), 48)) == 32  # only tokens seen
    head = new_head(AutoModelForCausalLM.from_pretrained(target), ids, 16, [1, 2, 4])
    assert warm_start(head, first, tmp_path / "h1", ids)[3] == before
    at = {int(t): r for r, t in enumerate(old_ids)}
    for r, t in enumerate(ids.tolist()):
        if t in at:
            assert torch.equal(head.lm_head.weight[r], first.lm_head.weight[at[t]].float())
