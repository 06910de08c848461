"""cli/chat_prompts.py: the training requests the SmolLM2 heads learn from are reproducible, wide, and never a
held-out request."""
import json
import random
from pathlib import Path

from cli.chat_prompts import vocabulary_words, wide_requests, word_requests


def test_word_requests_draw_whole_words_of_the_vocabulary(tmp_path):
    vocab = {"\u0120garden": 1, "\u0120Garden": 2, "\u0120ab": 3, "garden": 4, "\u0120volcano": 5, "\u0120x1y2z3": 6}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"vocab": vocab}}))
    words = vocabulary_words(path)
    assert words == ["garden", "volcano"]  # a leading space, 6-12 lowercase letters: whole words only
    a, b = word_requests(random.Random(4), words, 2), word_requests(random.Random(4), words, 2)
    assert a == b and all(("garden" in r) or ("volcano" in r) for r in a)  # seeded: the same requests each time


def test_wide_requests_are_many_shapes_and_none_is_held_out():
    wide = wide_requests(random.Random(2))
    assert len(wide) > 1000 and len(set(wide)) > 0.95 * len(wide)
    starts = {r.split()[0] for r in wide}
    assert {"Write", "Explain", "Translate", "Given", "List", "How", "A"} <= starts
    held = [json.loads(line)["prompt"] for line in (Path(__file__).resolve().parent.parent / "assets/prompts/real.jsonl").open()]
    assert not set(held) & set(wide)
