"""Short explanations shown beside the views they explain, written for someone meeting speculative
decoding for the first time. Notation follows SPEC.md."""
from __future__ import annotations

from ui.models import EMBEDDED, default_model, model_label

EMBEDDED_NOTE = (" It learned from Python library code, so it writes Python-shaped text that often loops — that "
                 "is the small model, not speculative decoding, which always yields exactly what the target alone "
                 "would.")


def intro(model: str) -> str:
    """The page's first paragraph, naming the model it opens on (ui/models.default_model) and only that one, so
    a page opened on another target never describes the embedded pair as its own."""
    return ("**SpecScope** runs speculative decoding for real, one step at a time. A cheap drafter guesses several "
            "tokens; the target model p checks all of them in a single forward pass and keeps the longest run it "
            "agrees with, plus one token of its own. Every number on this page is measured on this machine. The "
            f"page opens on **{model_label(model)}**; the target every view runs is the one named under *Model*, "
            "and the line above each view names it." + (EMBEDDED_NOTE if model == EMBEDDED else ""))


INTRO = intro(default_model())

STEP = """**What a step is.** One draft phase, then one verification forward of the target. The step commits
τ tokens: the accepted drafted tokens plus the target's *bonus* token (so τ ≥ 1 always). The draft spent
δ forward passes getting there. Over a run, the mean of τ is **MAT**."""

TREE = """**The tree.** Instead of one guess per position, a tree drafts several alternatives, so one miss does
not end the step. The target verifies the whole tree at once (each node only sees its own ancestors) and
walks down while its choice is one of the drafted children. Blue dots (●) were accepted, vermillion crosses
(✕) were judged and lost, grey rings (○) were never reached because their parent lost; the gold star (★) is
the bonus token. Depths are numbered from d = 0, the first drafted token, everywhere on the page. Node size
is the path score p(u), the product of the draft's q along the path."""

GATE = """**TALON's gate.** The first k levels keep the draft's Top-K, whatever it believes, so an
over-confident draft cannot collapse the tree. After that, all children of the whole frontier compete
in one pool: the best score m_d sets the anchor and everything with p(u) ≥ μ·m_d survives. A sure context
gives a high m_d and a strict gate (a deep, narrow tree); an uncertain one gives a loose gate (shallow,
wide). The node budget N caps the total, so hard contexts stop early and spend few draft forwards.
The static EAGLE-style tree beside it always grows D levels of K, whatever the context."""

ACT = """**ACT: annealed confidence.** SpecBound drafts with the target's own shallow layers through small
exit heads. Shallow heads are often sure and wrong, so their logits are divided by a temperature
T_ℓ = 1 + α(1 − ℓ/L) that is large for shallow layers and 1 at the top: a temperature above 1 *flattens* the
distribution, lowering its peak, so a shallow layer needs a clearer lead to exit. A token exits at the first layer
whose annealed confidence max softmax(z/T_ℓ) reaches τ_exit. Toggle raw vs annealed to see which early
exits the annealing prevented."""

BSCS = """**BSCS: bounded drafting.** Drafting stops, and the target verifies, when a token reaches d_max
layers without exiting (a hard token: drafting further would waste work; a check always happens at d_max)
or after w_max drafted tokens in a row (longer blocks are rarely all accepted). Verification runs the
drafted tokens through the layers they skipped, so every committed token saw all L layers and the output is
the target's own. The *paper* preset checks every layer from the first over the whole vocabulary; *fast*
checks only the layers stored with the heads over the most frequent tokens (ours, not the paper's).
SpecBound's δ counts layers, not draft models: the layers run while drafting (and the exit checks, at their
measured cost) divided by L, so δ = 0.5 means half a target forward's worth of drafting."""

SPEEDUP = """**Is it faster? R = τ / (1 + c·δ).** The papers' model: a step costs one target forward plus δ draft
forwards, each c times as expensive as a target forward, and yields τ tokens; plain decoding yields one token
per target forward. It assumes verifying the whole tree costs what one token's forward costs — true on a GPU
for small trees, far from true on a CPU, where a 60-node check costs several one-token forwards. So the stats
panel puts R beside **R with this machine's measured costs**, the same model with the measured cost of verifying
this many tokens and drafting these frontiers, and beside the speed-up actually measured against a plain run
of the same prompt. When R and the measured speed-up disagree, the curve-aware one says why. For SpecBound
the measured costs are in layers: its verification resumes where drafting stopped, so it runs fewer than L
layers, and the model's final LM head (on a small model with a big vocabulary, the price of several layers) is
paid once per verification here and once per token by plain decoding. In the (δ, τ)
scatter the Oracle line τ = δ marks steps where every draft forward paid for exactly one token: points above
it are good."""

LOSSLESS = """**Lossless.** With temperature 0 the output must equal plain greedy decoding token for token; the
page checks this against a real plain run. With sampling, each token is distributed exactly as if the
target had sampled it alone (the test suite checks this statistically)."""

FEATURES = """**Feature-level drafting (EAGLE-3).** A separate draft model only sees tokens, so it must guess
what the target is thinking; the *eagle3* drafter instead reads the target's own hidden states at three
depths (the inputs of an early, a middle and a late layer), fuses them into one vector and runs a single
decoder layer on it together with the token's embedding. To draft deeper it feeds its own output state
back in place of the target's, which it does not have yet for drafted tokens. *model* is a separate
1-layer draft LM and *lookup* copies what followed the longest earlier match in the text (no weights);
**λ_lookup** mixes lookup's guess into a model drafter's q wherever the drafted path repeats the text, which
pays once an answer starts repeating itself (lists, its own phrases). The tree panel says which one proposed
each tree, and Σp(u) beside τ is the drafter's own estimate of how many of its tokens the target accepts:
compare it with the accepted count to see how calibrated it is."""

HARDWARE = """**Why the best tree is small on a CPU and large on a GPU.** Verifying a tree is one target forward
over all its nodes. On a CPU that forward costs about linearly in the number of tokens (see the cost curve
in Tune: a 60-node tree costs several one-token forwards), so each extra node must pay for itself and
small budgets win. On a GPU the forward is nearly flat in n until the GPU saturates, so a tree of 60
costs about what one token costs and large trees are free tokens. A small budget pays only if it goes deep:
the **embedded** preset spends 12 nodes on two root children, a gate of μ = 0.1 and q sharpened by
T_shape = 0.5, rather than on the paper's ten root children. The **auto** preset measures this
machine's curve and chooses N each step to maximise predicted tokens per second (the N above is then only
the cap); it also fits T_shape to the drafter: the T under which the target's own choices were most
likely, times 0.87 (the fastest trees were that much sharper: the separate draft LM ends near 0.35, the
head near 0.5); each step shows the N and T_shape it picked and why."""

KEYS = ("**Keyboard.** s Step, p Play/Pause, ← / → replay the previous / next step (not while typing in a box); "
        "while a walk (*Walk me through this step*) is open, ← / → go to its previous / next stage and Esc closes "
        "it.\n\n"
        "**Share and replay.** *Copy link* (under the knobs) gives a URL with this view's prompt and knobs, and the "
        "step shown from step 2 on; opening it runs those settings to that step. *Import* (beside Export) replays "
        "an exported trace JSON, labelled as imported.")

WALK = ("**Walk me through this step.** The button above the pictures replays the step shown stage by stage — the "
        "drafter growing the tree level by level, the gate cutting, the budget running out, the one verification "
        "pass, the walk down the accepted path and the bonus token — each stage a sentence with this step's own "
        "numbers. Every section has a longer *Learn* panel at its foot.")
