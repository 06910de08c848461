"""Every method on every drafter stops cleanly at the context edge with AR's output, and a step that fails
midway leaves the session as it was (the next step works and the text still equals AR's)."""
import pytest

from core.ar import ARMethod
from core.drafter_registry import drafter_factory
from core.engine import Session
from core.methods import build_method

METHODS = [("chain", {}), ("static", dict(N=60, K=10, depth=8)), ("talon", dict(N=60, K=10, mu=0.03))]


pytestmark = pytest.mark.slow  # long prompts to the context's edge, every method × drafter


@pytest.fixture(scope="module")
def long_ids(target):
    from cli.corpus import source_files, split
    text = "".join(f.read() for f in split(source_files())[1][:6])
    ids = target.tokenizer(text)["input_ids"]
    assert len(ids) > 1100
    return ids


@pytest.fixture(scope="module")
def factories(target):
    return {d: drafter_factory(d, target) for d in ("model", "eagle3", "lookup")}


def runs(target, factories):
    yield "specbound", build_method("specbound"), None
    for name, knobs in METHODS:
        for drafter, make in factories.items():
            yield f"{name}@{drafter}", build_method(name, **knobs), make


@pytest.mark.parametrize("n", [1000, 1017, 1022, 1023])
def test_every_method_stops_at_the_context_with_ar_output(target, factories, long_ids, n):
    prompt = long_ids[:n]
    ar = Session(target, ARMethod(), prompt, max_new_tokens=64).generate()
    assert ar.stop_reason == "context" and len(ar.output_ids) == target.max_context - n
    for label, method, make in runs(target, factories):
        res = Session(target, method, prompt, max_new_tokens=64, draft=make() if make else None).generate()
        assert res.stop_reason == "context", label
        assert res.output_ids == ar.output_ids, label


def test_max_new_tokens_past_the_context(target, factories, long_ids):
    prompt = long_ids[:940]
    ar = Session(target, ARMethod(), prompt, max_new_tokens=2000).generate()
    assert ar.stop_reason == "context"
    for label, method, make in runs(target, factories):
        res = Session(target, method, prompt, max_new_tokens=2000, draft=make() if make else None).generate()
        assert (res.stop_reason, res.output_ids) == ("context", ar.output_ids), label


def test_a_budget_past_the_context_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"N \(node budget\) must be in \[1, 1024\]"):
        build_method("talon", N=2000)


@pytest.mark.parametrize("where", ["drafter", "target"])
def test_a_failed_step_leaves_the_session_as_before(target, factories, heldout_prompts, monkeypatch, where,
                                                    ar_reference):
    prompt = heldout_prompts[3]
    _, ar_ids = ar_reference(target, prompt, 40)
    for drafter in ("model", "eagle3"):
        s = Session(target, build_method("talon", N=16), prompt, max_new_tokens=40, draft=factories[drafter]())
        s.step()
        s.step()
        before = (list(s.ids), len(s.traces))
        boom = {"armed": True}
        obj = s.drafter if where == "drafter" else s.target
        name = "accept" if where == "drafter" else "forward"
        real = getattr(obj, name)

        def failing(*a, **kw):
            if boom.pop("armed", False):
                real(*a, **kw)  # the work is half done (caches moved) when it fails
                raise RuntimeError("injected failure")
            return real(*a, **kw)
        monkeypatch.setattr(obj, name, failing)
        with pytest.raises(RuntimeError, match="injected"):
            s.step()
        assert (s.ids, len(s.traces)) == before and not s.done
        monkeypatch.undo()
        res = s.generate()
        assert res.output_ids == ar_ids, drafter
