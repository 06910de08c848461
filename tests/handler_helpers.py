"""What the handler tests share: the prompt, the knobs, and a TALON / SpecBound step called by name."""
from ui import handlers as h
from ui.examples import default_prompt
from ui.view_specs import VIEWS

PROMPT = default_prompt()
TALON = dict(N=16, K=4, mu=0.05, k_init=1, shape_temperature=1.0, temperature=0.0, seed=0, max_new_tokens=12)
SPECBOUND = dict(alpha=1.0, tau_exit=0.6, d_max=6, w_max=4, min_exit_layer=1, exit_vocab=0, temperature=0.0, seed=0,
                 max_new_tokens=8)


def step(run, prompt=PROMPT, **kw) -> dict:
    """One TALON step through the handler, every value by name; the view's outputs come back by name."""
    return h.step(VIEWS["talon"], run=run, prompt=prompt, **{**TALON, **kw})


def sb_step(run, prompt=PROMPT, **kw) -> dict:
    return h.step(VIEWS["specbound"], run=run, prompt=prompt, **{**SPECBOUND, **kw})


def n_nodes(fig):
    return sum(len(t.x) for t in fig.data if t.meta in ("accepted", "rejected", "unreached"))


def api_args(view: str, prompt: str = PROMPT, **values) -> list:
    """A stepping view's API inputs in order (its spec's step_inputs after the state), from the declared
    defaults overridden by `values`: API tests need not track where a new knob was inserted."""
    from ui.knobs import SAMPLING_KNOBS
    from ui.models import DEFAULT_DRAFTER
    spec = VIEWS[view]
    from core.knobs import ALL_KNOBS
    defaults = {k.name: k.default for k in (*ALL_KNOBS.values(), *spec.knobs, *SAMPLING_KNOBS)}
    defaults.update(target="embedded", draft="embedded", show_pruned=True, drafter=DEFAULT_DRAFTER, auto=False,
                    chat="auto", annealed=True, exit_layers="", prompt=prompt, **values)
    return [defaults[name] for name in spec.step_inputs[1:]]
