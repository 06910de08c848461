"""A head retrained into the same folder is another drafter to the kept cost curves: the third SmolLM2 leg widened
the draft vocabulary (a dearer draft forward) in place, and a curve keyed by the folder alone would have priced it
as the old head for a day."""
import os

from core.eagle3.loading import weights_stamp


def test_a_head_rewritten_in_place_gets_a_new_stamp(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    (tmp_path / "config.json").write_text("{}")
    first = weights_stamp(tmp_path)
    assert weights_stamp(tmp_path) == first  # stable while nothing changes
    (tmp_path / "model.safetensors").write_bytes(b"y" * 12)
    os.utime(tmp_path / "model.safetensors", ns=(1, 2))
    assert weights_stamp(tmp_path) != first
    assert weights_stamp(tmp_path / "missing") == "0-0"
