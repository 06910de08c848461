"""The LayerSkip-style recipe (cli/train_layerskip.py): layer dropout rising with depth, a rotating
early-exit curriculum, and a layer-by-layer forward that is the model's own when nothing is skipped."""
import json
import shutil
from pathlib import Path

import numpy as np
import torch

import cli.train_layerskip as tl
from cli.model_card import legs_text
from cli.train_layerskip import ROTATION, drop_probs, exit_layers_of_step, run_with_exits
from tests.tiny_models import tiny_hf


def test_dropout_rises_from_zero_at_the_first_layer_to_p_max_at_the_last():
    p = drop_probs(12, 0.2)
    assert p[0] == 0 and abs(p[-1] - 0.2) < 1e-12 and all(a < b for a, b in zip(p, p[1:]))


def test_every_layer_below_the_last_gets_the_exit_loss_once_per_rotation():
    L = 12
    seen = [i for step in range(ROTATION) for i in exit_layers_of_step(step, L)]
    assert sorted(seen) == list(range(L - 1))
    assert all(L - 1 not in exit_layers_of_step(step, L) for step in range(ROTATION))


def test_the_layer_by_layer_forward_is_the_models_own_and_a_skipped_layer_passes_its_input_through():
    model = tiny_hf("llama", num_hidden_layers=4)
    x = torch.randint(0, 64, (2, 10))
    with torch.no_grad():
        final, early = run_with_exits(model, x, [True] * 4, [0, 2])
        assert torch.allclose(final, model(input_ids=x).logits, atol=1e-5)
        m = model.model
        assert torch.allclose(early[2], model.lm_head(m.norm(model(input_ids=x, output_hidden_states=True)
                                                             .hidden_states[3])), atol=1e-5)
        skipped, _ = run_with_exits(model, x, [True, False, True, True], [])
        del m.layers[1]  # the same model without layer 1 (its layer_idx gaps do not matter without a cache)
        model.config.num_hidden_layers = 3
        assert torch.allclose(skipped, model(input_ids=x, use_cache=False).logits, atol=1e-5)


def test_a_resumed_run_records_each_leg_and_the_card_says_so(tmp_path):
    """Two legs on a tiny Llama and a tiny cached corpus: the second resumes from the first's checkpoint on
    a cosine of its own; layerskip.json lists both, and the model card's LayerSkip note names them."""
    embedded = Path(__file__).resolve().parent.parent / "assets" / "models" / "target"
    start = tmp_path / "start"
    tiny_hf("llama", num_hidden_layers=3, vocab_size=8192, hidden_size=64, num_attention_heads=1,
            num_key_value_heads=1, intermediate_size=128).save_pretrained(start)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(embedded / name, start / name)
    work = tmp_path / "work"
    work.mkdir()
    rng = np.random.default_rng(0)
    np.save(work / "train_ids.npy", rng.integers(0, 8192, 4096).astype(np.uint16))
    np.save(work / "heldout_ids.npy", rng.integers(0, 8192, 512).astype(np.uint16))
    common = ["--model", str(start), "--out", str(tmp_path / "out"), "--work", str(work), "--seq-len", "32",
              "--batch-size", "1", "--eval-tokens", "64", "--device", "cpu"]
    tl.main(common + ["--steps", "50"])
    tl.main(common + ["--steps", "60", "--lr", "1e-4"])
    report = json.loads((tmp_path / "out" / "layerskip.json").read_text())
    assert [(g["start"], g["steps"], g["lr"]) for g in report["legs"]] == [(0, 50, 5e-4), (50, 60, 1e-4)]
    assert legs_text(report).startswith("in 2 legs (--steps 50, then resumed with --steps 60")
