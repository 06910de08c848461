"""Does this head fit this target? A readout computed from step traces, the check vLLM and SGLang users
make by hand when a published head drafts badly (wrong taps, another chat template, another revision of
the target all fail silently: the output stays exact, only acceptance drops).

- Acceptance by draft position d (0 = the first drafted token): of the steps that reached position d (the
  tree had a node at depth d and the target accepted every position before it, so it judged one there),
  the share whose accepted path went through depth d. Later positions count fewer steps, so each share
  comes with its count; positions no step reached are left out (`drafted` still counts the steps whose
  tree had them), never shown as 0% of the steps that drafted them.
- The head's dialect, taps and the rule that chose them, its draft vocabulary (core.eagle3.head_info.HeadInfo),
  and the share of the committed text the draft vocabulary holds: a token outside it can never be drafted.
- A warning when position-0 acceptance is implausibly low for a head (< 30% over ≥ 20 steps).

Plain Python (no torch): the bench, the page and the export read the same numbers. A running tally lets a
long run or a bench over many prompts add steps without keeping them.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field

from core.trace import StepTrace

WARN_BELOW = 0.30  # position-0 acceptance under which a head is suspect
WARN_MIN_STEPS = 20  # ... once this many steps have drafted
WARNING = "this head may not match this target: check the taps, the chat template, or the target revision"


@dataclass
class PositionTally:
    """Running sums over steps."""
    reached: list[int] = field(default_factory=list)  # [d]: steps whose tree had a node at depth d
    accepted: list[int] = field(default_factory=list)  # [d]: of those, steps that accepted a token at depth d
    judged: list[int] = field(default_factory=list)  # [d]: steps the target reached position d in (a node at
    # depth d, and positions 0..d-1 accepted): what acceptance at d is a share of
    committed: int = 0  # tokens the counted steps committed
    in_vocab: int = 0  # of the tokens committed by steps counted with a draft vocabulary, those inside it
    vocab_committed: int = 0  # tokens committed by steps counted with a draft vocabulary
    vocab_known: bool = False  # a draft vocabulary was given with the steps

    def add(self, traces: Iterable[StepTrace], draft_vocab: Collection[int] | None = None) -> None:
        """Count the steps; `draft_vocab` (target ids the drafter can propose) for the coverage."""
        for t in traces:
            depth = max((n.depth for n in t.nodes), default=-1)
            for d in range(depth + 1):
                self._grow(d + 1)
                self.reached[d] += 1
                self.judged[d] += len(t.accepted_path) >= d
                self.accepted[d] += len(t.accepted_path) > d
            self.committed += len(t.committed_ids)
            if draft_vocab is not None:
                self.vocab_known = True
                self.vocab_committed += len(t.committed_ids)
                self.in_vocab += sum(tok in draft_vocab for tok in t.committed_ids)

    def _grow(self, n: int) -> None:
        for counts in (self.reached, self.accepted, self.judged):
            counts += [0] * (n - len(counts))

    def merge(self, other: "PositionTally") -> None:
        """Add another tally's counts (the page adds each engine call's steps to its run's tally)."""
        self._grow(len(other.reached))
        for d in range(len(other.reached)):
            self.reached[d] += other.reached[d]
            self.accepted[d] += other.accepted[d]
            self.judged[d] += other.judged[d]
        self.committed += other.committed
        self.in_vocab += other.in_vocab
        self.vocab_committed += other.vocab_committed
        self.vocab_known = self.vocab_known or other.vocab_known


@dataclass
class CompatReadout:
    steps: int  # steps that drafted (a tree reached position 0)
    acceptance: list[float]  # [d]: of the steps that reached position d, the share that accepted it
    reached: list[int]  # [d]: how many steps that share is over: the target judged position d in them (> 0;
    # the positions after the first that no step reached are left out)
    coverage: float | None  # share of the committed text inside the draft vocabulary (None: not known)
    head: dict | None = None  # HeadInfo.to_dict() of an EAGLE-3 head: dialect, taps, tap_rule, draft_vocab, ...
    warning: str | None = None
    drafted: list[int] = field(default_factory=list)  # [d]: steps whose tree had a node at depth d

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self, positions: int = 4) -> str:
        """One line: acceptance by position, coverage, the warning."""
        accs = [f"{d}: {a:.0%} of {n}" for d, (a, n) in enumerate(zip(self.acceptance, self.reached))][:positions]
        parts = ["acceptance by draft position " + (", ".join(accs) if accs else "(nothing drafted)")]
        if self.coverage is not None:
            parts.append(f"draft vocabulary holds {self.coverage:.0%} of the committed text")
        if self.warning:
            parts.append(self.warning)
        return "; ".join(parts)


def readout(tally: PositionTally, head: dict | None = None, coverage: float | None = None) -> CompatReadout:
    """The readout of a tally; `head` (an EAGLE-3 drafter's head_info()) enables the warning; `coverage`: the
    share recorded elsewhere (an exported run's readout) when the tally saw no draft vocabulary."""
    judged = [n for n in tally.judged if n]  # non-increasing in d: the positions some step reached
    acceptance = [a / n for a, n in zip(tally.accepted, judged)]
    steps = tally.reached[0] if tally.reached else 0
    if tally.vocab_known and tally.vocab_committed:
        coverage = tally.in_vocab / tally.vocab_committed
    low = head is not None and steps >= WARN_MIN_STEPS and bool(acceptance) and acceptance[0] < WARN_BELOW
    return CompatReadout(steps, acceptance, judged, coverage, head, WARNING if low else None, list(tally.reached))


def compat_readout(traces: Iterable[StepTrace], head: dict | None = None,
                   draft_vocab: Collection[int] | None = None, coverage: float | None = None) -> CompatReadout:
    """The readout of a run so far (its traces), for a drafter with `head` info and `draft_vocab` (or, for an
    imported run, the `coverage` its export recorded)."""
    tally = PositionTally()
    tally.add(traces, draft_vocab)
    return readout(tally, head, coverage)


def drafter_context(drafter) -> tuple[dict | None, Collection[int] | None]:
    """(head info, draft vocabulary) of a drafter that has them (EAGLE-3), else (None, None)."""
    if drafter is None or not hasattr(drafter, "head_info"):
        return None, None
    return drafter.head_info(), drafter.draft_vocab
