"""SpecScope engine: models, caches, drafting policies and verification (torch only, never gradio or plotly).

Reading map. Entry point: engine.py (Session: prompt -> prefill -> step() -> StepTrace), then one package per
part of a step; the packages import each other in one direction (tests/test_import_graph.py):

    model/      the target: our forward over HF modules, kernels, compile, the KV cache, loading, exit heads
    drafters/   where q comes from behind one small contract: draft LM, prompt lookup, the target's own layers
    eagle3/     the EAGLE-3 head, its drafter, every publisher's layout, the head-fit readout
    auto/       the measured cost model and `auto`'s per-step budget
    trees/      the tree method (draft -> verify -> commit -> tell the drafter), how a tree grows, the μ schedule
    specbound/  SpecBound: the target drafts with its own shallow layers, then verifies exactly

At the top, in reading order: engine.py, methods.py (name -> method), ar.py, draft_tree.py (trees as parent
pointers: every package speaks it), verify.py, sampling.py, trace.py (+ trace_check.py), knobs.py, metrics.py,
drafter_registry.py (name -> drafter factory: wires drafters/, eagle3/ and the exit heads, so it sits above
them), snapshot.py, lossless_check.py, server_flags.py, prompts.py, paths.py.
"""
