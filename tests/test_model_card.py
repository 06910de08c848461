"""The embedded models' card states what was shipped: its numbers come from metrics.json and the weights on disk."""
import json

from transformers import AutoConfig

from cli.model_card import render
from core.model.loading import ASSETS
from core.model.real_models import REAL_MODELS

MODELS = ASSETS / "models"


def test_card_matches_the_shipped_metrics_and_config():
    metrics = json.loads((MODELS / "metrics.json").read_text())
    card = (MODELS / "README.md").read_text()
    assert f"**{metrics['target_heldout_ce']:.3f}**" in card
    assert f"**{metrics['draft_heldout_ce']:.3f}**" in card
    assert f"{metrics['draft_greedy_agreement'] * 100:.1f}%" in card
    cfg = AutoConfig.from_pretrained(MODELS / "target")
    assert cfg.num_hidden_layers >= 12 and cfg.max_position_embeddings >= 1024
    assert cfg.num_hidden_layers == metrics["args"]["target_layers"]
    assert cfg.hidden_size == metrics["args"]["hidden"]


def test_reproduce_command_carries_every_shape_knob(tmp_path):
    metrics = json.loads((MODELS / "metrics.json").read_text())
    text = render(metrics, tmp_path)
    a = metrics["args"]
    for flag in (f"--target-steps {a['target_steps']}", f"--batch-size {a['batch_size']}", f"--seq-len {a['seq_len']}",
                 f"--hidden {a['hidden']}", f"--lr {a['lr']}", f"--seed {a['seed']}"):
        assert flag in text


def test_weights_fit_the_budget():
    """45 MB: the pair, the EAGLE-3 head and both kinds of exit heads (the per-layer heads add 5.8 MB); the heads
    trained here for a real model (assets/models/<name>/) 50 MB together."""
    real = {MODELS / name for name in REAL_MODELS}
    embedded = sum(p.stat().st_size for p in MODELS.rglob("*.safetensors") if not real & set(p.parents))
    assert embedded <= 45e6
    for folder in real:
        assert sum(p.stat().st_size for p in folder.rglob("*.safetensors")) <= 50e6


def test_card_of_a_layerskip_target_says_both_stages(tmp_path):
    """A draft distilled from a LayerSkip-trained target (`--target-from`): the card gives the base target's
    command, the LayerSkip stage with its legs and held-out effect, and the draft's own command."""
    metrics = json.loads((MODELS / "metrics.json").read_text())
    metrics["args"]["target_from"] = ".cache/ls_target3000"
    ls = {"before": {"heldout_tokens": 32768, "final_ce": 4.6, "lens_agreement": [0.1, 0.15, 0.18, 0.2, 1.0]},
          "after": {"heldout_tokens": 32768, "final_ce": 4.4, "lens_agreement": [0.2, 0.3, 0.4, 0.47, 1.0]},
          "train_s": 600.0, "legs": [{"start": 0, "steps": 1200}, {"start": 1200, "steps": 3000}],
          "args": {"steps": 3000, "p_max": 0.1, "exit_weight": 1.0, "lr": 0.0005, "seed": 0}}
    text = render(metrics, tmp_path, ls)
    assert "python -m cli.train_layerskip --model OUT/target" in text and "--p-max 0.1" in text
    assert "in 2 legs (--steps 1200, then resumed with --steps 3000" in text
    assert "final-layer CE 4.600 → 4.400" in text and "after layer 4 0.20 → 0.47" in text
    assert "--target-from .cache/ls_target3000 --out assets/models" in text
    assert f"--target-steps {metrics['args']['target_steps']}" in text
