"""The embedded models' card states what was shipped: its numbers come from metrics.json and the weights on disk."""
import json

from transformers import AutoConfig

from core.loading import ASSETS
from cli.model_card import render

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
    total = sum(p.stat().st_size for p in MODELS.rglob("*.safetensors"))
    assert total <= 40e6
