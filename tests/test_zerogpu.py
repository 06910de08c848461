"""ZeroGPU's rules, imposed on a CPU (ui/gpu.py `forked`): every engine call pickles its arguments and result
and runs in a freshly forked process, nothing it changes there survives, and a tensor may not cross. The
engine calls of the page (ui/worker.py) keep to them: a run rebuilt from its plain snapshot in every call
continues exactly as a run whose session stayed alive."""
import pickle

import pytest
import torch

from ui.gpu import forked

SEEN: list[int] = []


def remember(x: int) -> int:
    SEEN.append(x)
    return len(SEEN)


def give_tensor() -> torch.Tensor:
    return torch.zeros(2)


def fail() -> None:
    raise ValueError("a one-line problem")


def matmul_sum(n: int) -> float:
    a = torch.ones(n, n)
    return float((a @ a).sum())


def nap(seconds: float) -> None:
    import time
    time.sleep(seconds)


def test_a_child_computes_after_the_parent_used_its_thread_pool():
    """GNU OpenMP hangs a forked child that enters the pool its parent started; the worker runs single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for _ in range(5):
            matmul_sum(256)  # the parent's OpenMP team now exists
        assert forked(matmul_sum, 10)(256) == 256.0 ** 3
    finally:
        torch.set_num_threads(before)


def test_a_call_past_its_reservation_is_stopped(monkeypatch):
    import ui.gpu
    monkeypatch.setattr(ui.gpu, "EMULATE_FLOOR_S", 0.5)
    monkeypatch.setattr(ui.gpu, "EMULATE_SLACK", 1)
    with pytest.raises(TimeoutError, match="ran past its reservation"):
        forked(nap, 0.5)(30)


def test_a_forked_call_returns_plain_data_and_changes_nothing_here():
    call = forked(remember, 10)
    assert call(1) == 1 and call(2) == 1  # each call starts from this process's state ...
    assert SEEN == []  # ... and what it changed died with it


def test_what_crosses_must_be_plain():
    with pytest.raises(TypeError, match="tensor crossed"):
        forked(give_tensor, 10)()
    with pytest.raises(TypeError, match="tensor crossed"):
        forked(remember, 10)(torch.ones(1))
    with pytest.raises((TypeError, AttributeError, pickle.PicklingError)):
        forked(remember, 10)(lambda: 1)  # a closure cannot be pickled: nor can it reach a GPU worker
    with pytest.raises(ValueError, match="a one-line problem"):
        forked(fail, 10)()  # the worker's exception comes back as itself


def test_a_duration_may_depend_on_the_call():
    seen = []
    call = forked(remember, lambda x: seen.append(x) or 5.0)
    call(7)
    assert seen == [7]
    with pytest.raises(ValueError, match="duration must be positive"):
        forked(remember, lambda x: 0)(1)


@pytest.mark.parametrize("method,knobs", [("talon", (("N", 16), ("K", 4), ("mu", 0.05))),
                                          ("specbound", (("tau_exit", 0.1), ("d_max", 4))),
                                          ("chain", (("gamma", 4),))])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_a_run_rebuilt_in_every_call_continues_exactly(method, knobs, temperature, heldout_prompts):
    from ui.config import RunConfig
    from ui.run import Run
    from ui.worker import run_steps
    import ui.run
    cfg = RunConfig(method, heldout_prompts[0], knobs, temperature, 3, 24)
    alive = Run(cfg).to_end()
    real = ui.run.run_steps
    try:
        ui.run.run_steps = forked(run_steps, 30)  # as on a Space: a fresh worker per call
        rebuilt = Run(cfg)
        while not rebuilt.done:
            rebuilt.step(2)
    finally:
        ui.run.run_steps = real
    assert rebuilt.output_ids == alive.output_ids  # greedy and sampled alike: the RNG state travels as bytes
    assert [t.index for t in rebuilt.traces] == list(range(len(rebuilt.traces)))
    assert pickle.loads(pickle.dumps(rebuilt)).output_ids == alive.output_ids  # the page's state pickles
