"""Exit heads: logit-lens fallback, save/load, and the trainer end to end on a tiny model and text."""
import json
import random

import pytest
import torch

from cli.train_exit_heads import CARD_END, CARD_START, TrainConfig, main, train_heads
from core.model.exit_heads import LOGIT_LENS, TRAINED, ExitHeads, fingerprint, load_heads, logit_lens, save_heads
from tests.tiny_models import char_tokenizer, tiny_hf, tiny_lm


def tiny_text(n_words: int = 4000) -> str:
    r = random.Random(0)
    words = ["abc", "hello", "world", "def", "foo", "bar", "xyz", "Qq9", "(x)"]
    return "".join(r.choice(words) for _ in range(n_words))


def test_untrained_heads_are_the_logit_lens():
    lm = tiny_lm("llama", num_hidden_layers=4)
    h = torch.randn(5, 32)  # (T, d)
    fresh = ExitHeads(4, 32, rank=8)  # up projection starts at zero
    lens = logit_lens(lm)
    assert lens.kind == LOGIT_LENS and fresh.kind == TRAINED
    for layer in (1, 3, 4):
        torch.testing.assert_close(fresh.logits(lm, layer, h), lm.head(h))
        torch.testing.assert_close(lens.logits(lm, layer, h), lm.head(h))


def test_missing_heads_fall_back_and_mismatched_heads_are_refused(tmp_path):
    lm = tiny_lm("llama", num_hidden_layers=4)
    assert load_heads(lm, tmp_path).kind == LOGIT_LENS
    save_heads(ExitHeads(6, 32, rank=4), tmp_path, {})
    with pytest.raises(ValueError, match="6 layers"):
        load_heads(lm, tmp_path)


def test_save_load_round_trip(tmp_path):
    lm = tiny_lm("llama", num_hidden_layers=4)
    heads = ExitHeads(4, 32, rank=4)
    with torch.no_grad():
        heads.up.normal_()
    save_heads(heads, tmp_path, {"note": "x"})
    back = load_heads(lm, tmp_path)
    assert back.kind == TRAINED and back.rank == 4
    h = torch.randn(3, 32)
    torch.testing.assert_close(back.adapt(2, h), heads.adapt(2, h), atol=1e-2, rtol=1e-2)  # stored as fp16
    assert json.loads((tmp_path / "exit_heads.json").read_text())["note"] == "x"


def test_training_lowers_the_distillation_loss():
    lm = tiny_lm("llama", num_hidden_layers=4)
    ids = lm.tokenizer(tiny_text())["input_ids"]
    res = train_heads(lm, ids, TrainConfig(steps=40, batch=4, seq_len=32, rank=8, lr=1e-2), progress=False)
    first, last = sum(res.losses[:5]) / 5, sum(res.losses[-5:]) / 5
    assert last < 0.7 * first, (first, last)


def test_trainer_cli_end_to_end(tmp_path):
    model_dir, out = tmp_path / "model", tmp_path / "heads"
    tiny_hf("llama", num_hidden_layers=3).save_pretrained(model_dir)
    char_tokenizer().save_pretrained(model_dir)
    text = tmp_path / "text.txt"
    text.write_text(tiny_text(2000))
    card = tmp_path / "README.md"
    card.write_text("# Models\n\nthe lead's card\n")
    args = ["--model", str(model_dir), "--text", str(text), "--out", str(out), "--card", str(card),
            "--steps", "5", "--seq-len", "32", "--rank", "4", "--eval-tokens", "256"]
    main(args)
    main(args)  # a second run replaces its card section instead of appending another
    meta = json.loads((out / "exit_heads.json").read_text())
    assert len(meta["heldout"]["head"]) == 2 and meta["rank"] == 4
    body = card.read_text()
    assert body.startswith("# Models\n\nthe lead's card\n") and body.count(CARD_START) == 1 and CARD_END in body


def test_heads_trained_on_other_weights_fall_back_to_the_logit_lens(tmp_path):
    lm, other = tiny_lm("llama", seed=0, num_hidden_layers=4), tiny_lm("llama", seed=1, num_hidden_layers=4)
    save_heads(ExitHeads(4, 32, rank=4), tmp_path, {"base_fingerprint": fingerprint(lm)})
    assert load_heads(lm, tmp_path).kind == TRAINED
    with pytest.warns(UserWarning, match="other weights"):
        assert load_heads(other, tmp_path).kind == LOGIT_LENS


def test_a_check_over_the_exit_vocabulary_reads_what_the_whole_logits_say():
    """Drafting checks on `scores` (only the rows a token may exit to) and spreads to the whole vocabulary only
    for the token that exits: the confidence and the top token must be those of the whole −inf-filled logits."""
    from core.specbound.annealing import layer_confidence
    from core.model.layer_heads import LayerHeads, spread
    lm = tiny_lm("llama", num_hidden_layers=4)
    torch.manual_seed(0)
    ids = torch.randperm(lm.vocab_size)[:20]  # rows in "frequency" order, not sorted
    heads = LayerHeads.logit_lens(lm, ids)
    vocab = torch.sort(ids[:12]).values
    shared = ExitHeads(4, 32, rank=8)
    h = torch.randn(1, 32) * 3
    for kind, v in ((heads, None), (heads, vocab), (shared, vocab), (shared, None)):
        for layer in (1, 2, 4):
            z, rows = kind.scores(lm, layer, h, v)
            whole = kind.logits(lm, layer, h, v)
            torch.testing.assert_close(spread(z, rows, lm.vocab_size), whole)
            small = layer_confidence(z[0], layer, 4, 0.5, ids=rows)
            full = layer_confidence(whole[0], layer, 4, 0.5)
            assert small.top_id == full.top_id
            assert small.annealed == pytest.approx(full.annealed, rel=1e-6)
            assert small.raw == pytest.approx(full.raw, rel=1e-6)
            if layer < 4 and v is not None:
                assert z.shape == (1, len(v)) and rows is not None
