"""cli/train_embedded.py --target-from: a draft distilled from a target trained elsewhere, which is copied
whole (its extra files too), on a tiny corpus and a tiny target with the embedded tokenizer."""
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import cli.train_embedded as te
from tests.tiny_models import tiny_hf

EMBEDDED = Path(__file__).resolve().parent.parent / "assets" / "models" / "target"


@dataclass(frozen=True)
class Text:
    relpath: str
    text: str

    def read(self) -> str:
        return self.text


def test_a_draft_is_distilled_from_a_given_target(tmp_path, monkeypatch):
    target = tmp_path / "ls_target"
    tiny_hf("llama", num_hidden_layers=2, vocab_size=8192, hidden_size=64, num_attention_heads=1,
            num_key_value_heads=1, intermediate_size=128).save_pretrained(target)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(EMBEDDED / name, target / name)
    (target / "layerskip.json").write_text("{}")
    files = [Text(f"m{i}.py", f"def f{i}(x):\n    return x + {i}\n" * 20) for i in range(4)]
    monkeypatch.setattr(te, "source_files", lambda: files)
    monkeypatch.setattr(te, "split", lambda fs: (fs[:3], fs[3:]))
    out = tmp_path / "out"
    te.main(["--target-from", str(target), "--out", str(out), "--work", str(tmp_path / "work"), "--draft-steps", "2",
             "--hidden", "64", "--ffn", "128", "--seq-len", "32", "--batch-size", "1", "--device", "cpu"])
    assert (out / "target" / "layerskip.json").exists()  # the given target, whole
    assert not (tmp_path / "work" / "target.ckpt").exists()  # no target was trained
    m = json.loads((out / "metrics.json").read_text())
    assert m["heldout_tokens"] > 0 and 0 <= m["draft_greedy_agreement"] <= 1
    assert m["args"]["target_from"] == str(target) and len(m["schedule_history"]["draft"]) == 1
