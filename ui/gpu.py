"""Where engine calls run. Three modes, one decorator:

- local (default): the call runs in the server's own process; the worker-side caches persist between calls.
- spaces: on a ZeroGPU Space (the `spaces` package importable and SPACES_ZERO_GPU set by the platform; off
  ZeroGPU the decorator returns the function unchanged, so that is "local"), `@spaces.GPU(duration=…)` runs
  each call in a GPU worker process: its arguments and result are pickled, and nothing it changes in
  that process can be relied on afterwards. Only the documented decorator is used.
- emulate (SPECSCOPE_ZEROGPU_EMULATE=1): the same rules imposed on a CPU machine, so tests can hold us to
  them: every call pickles its arguments and result and runs in a freshly forked process, whatever it changes
  there is lost, a tensor in the result is refused (returning CUDA tensors hangs a ZeroGPU call), and a call
  that outlives its reservation (by a CPU's margin, EMULATE_SLACK×) is killed, as ZeroGPU aborts it.

So every decorated function takes and returns plain data (config, committed ids, traces, timings, RNG state
as bytes) and keeps anything live (models, sessions, caches) in caches it can rebuild from that data."""
from __future__ import annotations

import functools
import io
import multiprocessing
import os
import pickle
import sys
from typing import Any, Callable

try:
    import spaces
except ImportError:
    spaces = None

Duration = float | Callable[..., float]
CHUNK = 16  # steps per engine call when calls are remote: fewer calls, each well within its duration
EMULATE_SLACK = 20  # a CPU runs a GPU's reservation this many times slower, at most, before the call is killed
EMULATE_FLOOR_S = 120.0


def mode() -> str:
    """spaces | emulate | local; read when a function is decorated (at import)."""
    if spaces is not None and os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true"):
        return "spaces"
    return "emulate" if os.environ.get("SPECSCOPE_ZEROGPU_EMULATE", "").strip() in ("1", "true", "yes") else "local"


def remote() -> bool:
    """Calls run in another process: per-step callbacks (Cancel, priority) cannot reach inside a call."""
    return mode() != "local"


def gpu(duration: Duration = 60) -> Callable[[Callable], Callable]:
    """Decorate an engine call. `duration`: the seconds ZeroGPU reserves for one call, or a callable of the
    call's own arguments returning them (a chunk of steps takes longer than one step)."""
    def decorate(fn: Callable) -> Callable:
        if mode() == "spaces":
            return spaces.GPU(duration=duration)(in_fork(fn))
        if mode() == "emulate":
            return forked(fn, duration)
        return fn
    return decorate


def in_fork(fn: Callable) -> Callable:
    """`fn` as a ZeroGPU worker (a fork of this server) should run it: without the parent's OpenMP pool."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        single_threaded_after_fork()
        return fn(*args, **kwargs)
    return call


class TensorPickler(pickle.Pickler):
    """Refuses tensors: what crosses the boundary must be plain data."""

    def reducer_override(self, obj: Any):
        if type(obj).__module__.startswith("torch") and type(obj).__name__ in ("Tensor", "Parameter"):
            raise TypeError("a tensor crossed the GPU call boundary; return plain data")
        return NotImplemented


def plain_dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    TensorPickler(buf).dump(obj)
    return buf.getvalue()


def forked(fn: Callable, duration: Duration) -> Callable:
    """ZeroGPU's rules on a CPU: pickle in, fork, run, pickle out; the child's changes die with it."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # its thread pool does not survive a fork

    @functools.wraps(fn)
    def call(*args, **kwargs):
        seconds = duration(*args, **kwargs) if callable(duration) else duration
        if not seconds > 0:
            raise ValueError(f"{fn.__name__}: its duration must be positive (got {seconds!r})")
        payload = plain_dumps((args, kwargs))
        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=run_child, args=(fn, payload, send), daemon=True)
        child.start()
        send.close()
        limit = max(EMULATE_FLOOR_S, EMULATE_SLACK * seconds)
        try:
            if not receive.poll(limit):
                child.kill()
                raise TimeoutError(f"{fn.__name__}: the GPU call ran past its reservation ({seconds:g} s, "
                                   f"{limit:g} s allowed on this CPU) and was stopped")
            data = receive.recv_bytes()
        except EOFError:
            raise RuntimeError(f"{fn.__name__}: the GPU worker died without an answer") from None
        finally:
            child.join()
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value
    return call


def run_child(fn: Callable, payload: bytes, send) -> None:
    single_threaded_after_fork()
    try:
        args, kwargs = pickle.loads(payload)
        out = plain_dumps((True, fn(*args, **kwargs)))
    except BaseException as exc:  # noqa: BLE001 - the parent re-raises it
        try:
            out = pickle.dumps((False, exc))
        except Exception:  # noqa: BLE001 - an exception that does not pickle still says what it was
            out = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
    send.send_bytes(out)
    send.close()
    os._exit(0)  # no atexit handlers or thread joins of the forked server copy


def single_threaded_after_fork() -> None:
    """A forked child must not enter the OpenMP pool its parent started: GNU OpenMP waits forever for threads
    the fork did not copy (any CPU op after a parent that computed). One thread runs ops inline."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
