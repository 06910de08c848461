"""The cost curves `auto` and the Tune tab rely on: kept a day and only on the machine that measured them,
measured again on request, outliers timed again, and a curve that does not rise with n flagged, never kept."""
import json

import pytest

import core.auto.cost_model as cm
from core.drafters.lookup import LookupDrafter
from core.model import cost_cache
import core.model.exit_heads
from core.paths import cache_home
from tests.tiny_models import tiny_lm


@pytest.fixture
def target():
    return tiny_lm("llama", seed=0)


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """A clean cache (memory and a temporary folder); counts the measurements."""
    monkeypatch.setattr(cm, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(cm, "_MEMO", {})
    events = []
    real = cm._verify_curve
    monkeypatch.setattr(cm, "_verify_curve", lambda *a: (events.append("measure"), real(*a))[1])
    return events


def drafter(target):
    return LookupDrafter(target.vocab_size)


def stored(tmp_path) -> dict:
    (path,) = tmp_path.glob("cost-*.json")
    return json.loads(path.read_text())


def test_a_kept_curve_serves_until_it_is_a_day_old(target, counted, tmp_path, monkeypatch):
    first = cm.measure_costs(target, drafter(target))
    assert counted == ["measure"] and first.measured_at > 0 and first.fingerprint
    assert cm.measure_costs(target, drafter(target)) is first and counted == ["measure"]  # from memory
    monkeypatch.setattr(cm, "_MEMO", {})
    assert cm.measure_costs(target, drafter(target)).verify_ms == first.verify_ms and counted == ["measure"]  # from disk
    data = stored(tmp_path)
    data["measured_at"] -= cost_cache.DEFAULT_MAX_AGE_S + 1  # a day and a second ago
    next(tmp_path.glob("cost-*.json")).write_text(json.dumps(data))
    monkeypatch.setattr(cm, "_MEMO", {})
    cm.measure_costs(target, drafter(target))
    assert counted == ["measure", "measure"]  # expired on disk: measured again
    monkeypatch.setenv("SPECSCOPE_COST_MAX_AGE_S", "0")
    cm.measure_costs(target, drafter(target))
    assert counted == ["measure"] * 3  # and in memory too


def test_a_curve_from_another_machine_is_measured_again(target, counted, tmp_path, monkeypatch):
    cm.measure_costs(target, drafter(target))
    data = stored(tmp_path)
    data["fingerprint"] = "another CPU · 64 cpus · 64 threads · torch 0.0"
    next(tmp_path.glob("cost-*.json")).write_text(json.dumps(data))
    monkeypatch.setattr(cm, "_MEMO", {})
    fresh = cm.measure_costs(target, drafter(target))
    assert counted == ["measure", "measure"] and fresh.fingerprint == cost_cache.fingerprint(str(target.device))
    assert stored(tmp_path)["fingerprint"] == fresh.fingerprint  # the file now describes this machine


def test_fresh_measures_whatever_is_kept(target, counted):
    cm.measure_costs(target, drafter(target))
    cm.measure_costs(target, drafter(target), fresh=True)
    assert counted == ["measure", "measure"]


def scripted(monkeypatch, script: list[float]) -> list[float]:
    """median_ms returns the script's timings in order, whatever it times."""
    left = list(script)
    monkeypatch.setattr(cm, "median_ms", lambda fn, reps: left.pop(0))
    return left


def test_an_outlier_is_timed_again_and_the_fastest_kept(target, counted, monkeypatch, tmp_path):
    sizes = cm._fitting(target)[1]
    curve = [5.0 + i for i in range(len(sizes))]
    spiked = list(curve)
    spiked[2] = 68.0  # a busy moment: above every larger forward
    draft_calls = len(cm.DRAFT_WIDTHS) if hasattr(drafter(target), "cache") else 0
    left = scripted(monkeypatch, [1.0] * draft_calls + spiked + [curve[2]])
    model = cm.measure_costs(target, drafter(target))
    assert not left and model.verify_ms == curve and model.retimed == [sizes[2]] and not model.flag
    assert stored(tmp_path)["retimed"] == [sizes[2]]


def test_a_curve_that_does_not_rise_is_flagged_and_not_kept(target, counted, monkeypatch, tmp_path):
    sizes = cm._fitting(target)[1]
    spiked = [5.0 + i for i in range(len(sizes))]
    spiked[1] = 90.0
    scripted(monkeypatch, spiked + [80.0, 85.0])  # still high each time it is timed again
    model = cm.measure_costs(target, drafter(target))
    assert model.verify_ms[1] == 80.0 and model.retimed == [sizes[1]]
    assert f"t_verify({sizes[1]}) = 80.0 ms is above" in model.flag
    assert not list(tmp_path.glob("cost-*.json"))  # a flagged curve is never kept on disk


def test_outlier_rules():
    assert cm.outliers([1, 2, 4, 8], [5.0, 5.2, 6.0, 7.0]) == []  # a quiet CPU's curve
    assert cm.outliers([1, 2, 4, 8], [5.0, 30.0, 6.0, 7.0]) == [1]  # above a larger forward
    assert cm.outliers([1, 2, 4, 8], [5.0, 5.5, 6.0, 40.0]) == [3]  # faster than linear in n
    assert cm.not_rising([1, 2], [5.0, 5.5]) == "" and cm.not_rising([1, 2], [9.0, 5.0]).startswith("t_verify(1)")


def test_one_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECSCOPE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_home() == tmp_path / "mine"
    monkeypatch.delenv("SPECSCOPE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_home() == tmp_path / "specscope"
    assert cm.CACHE_DIR == core.model.exit_heads.CACHE_ROOT.parent  # curves and Hub models' exit heads: one home
