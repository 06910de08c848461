"""The tree or chain found best here, as the settings a serving engine takes (SGLang, vLLM).

Conventions, checked against the engines' code and docs: SGLang `python/sglang/srt/speculative/build_eagle_tree.py`
(the verified tree), `python/sglang/srt/server_args.py` (topk 1), https://docs.sglang.io/advanced_features/
speculative_decoding.html; vLLM https://docs.vllm.ai/en/latest/features/speculative_decoding/eagle/.
- **Our N counts drafted nodes, not the root**; SGLang's `--speculative-num-draft-tokens` counts the tokens
  it verifies, the root (the last committed token) included: it keeps the top (num_draft_tokens − 1) drafted
  candidates by path score and puts the verified token in front (`build_eagle_tree.py`). So draft tokens = N + 1.
- **Our static tree grows D + 1 levels** (the root's Top-K children, then D levels of K×K expansion keeping
  the Top-K frontier, δ = D + 1); SGLang's `--speculative-num-steps` is the number of levels drafted (the
  draft-extend forward plus num_steps − 1 decode forwards), so num_steps = D + 1 and eagle_topk = K. Both
  keep the Top-K frontier of the K×K pooled children by path score and rerank every candidate at the end,
  so the pool is K + D·K² candidates in both: N beyond it is clamped.
- With topk 1 SGLang sets draft tokens to num_steps + 1 itself, so a chain of γ is steps γ, topk 1, draft γ+1.
- SGLang ranks `topk + (num_steps − 1)·topk²` drafted candidates and keeps the best `num_draft_tokens − 1`
  (`eagle_worker.py`, `torch.topk(score_list, num_draft_tokens − 1)`): a setting asking for more cannot start,
  so `SGLangFlags.check` refuses it before anything is printed.
- SGLang's `--speculative-accept-threshold-single` / `-acc` accept a draft the target did not choose when set
  below 1: lossy, so never printed here (every method in this app is lossless).
- vLLM drafts chains: a chain of γ drafted tokens is `num_speculative_tokens: γ` in `--speculative-config`.
  Its tree drafting (`speculative_token_tree`, the TREE_ATTN backend of PR #20401, July 2025; experimental,
  e.g. in v0.11) was removed by PR #42121 (May 2026): `vllm/config/speculative.py` on main has no such field.
  So the export is a chain whatever the sweep, and says what it was checked against (`VLLM_CHECKED`); a
  version named by the user is echoed, with what that version is known to read.
- Our T_shape (trees ranked by softmax(z/T_shape)) has no engine equivalent; engines rank at T = 1.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from core import knobs

# where q comes from here -> (SGLang --speculative-algorithm, vLLM speculative_config "method")
ENGINE_METHODS = {"eagle3": ("EAGLE3", "eagle3"), "model": ("STANDALONE", "draft_model")}
PLACEHOLDERS = {"eagle3": "HEAD_ID", "model": "DRAFT_ID"}  # named when the run used the embedded weights
NEVER = ("--speculative-accept-threshold-single", "--speculative-accept-threshold-acc")  # lossy below 1
VLLM_CHECKED = ("vLLM main after PR #42121 (May 2026, tree attention removed): `--speculative-config` with "
                "method, model and num_speculative_tokens, a chain")
VLLM_TREE_RELEASES = ("0.11",)  # releases whose speculative_token_tree is known to exist (experimental)


@dataclass(frozen=True)
class SGLangFlags:
    algorithm: str
    num_steps: int  # --speculative-num-steps: drafted levels (our D + 1, or γ)
    eagle_topk: int  # --speculative-eagle-topk: K (1 for a chain)
    num_draft_tokens: int  # --speculative-num-draft-tokens: verified tokens, the root included (our N + 1)
    clamped: bool = False  # N was larger than the K + D·K² candidates a static tree can hold

    @property
    def candidates(self) -> int:
        """How many drafted candidates SGLang ranks: topk + (num_steps − 1)·topk²."""
        return self.eagle_topk + (self.num_steps - 1) * self.eagle_topk ** 2

    def check(self) -> None:
        """SGLang keeps the best num_draft_tokens − 1 of its candidates: more than there are cannot start."""
        if min(self.num_steps, self.eagle_topk, self.num_draft_tokens) < 1:
            raise ValueError(f"SGLang needs num-steps, eagle-topk and num-draft-tokens ≥ 1 (got {self.num_steps}, "
                             f"{self.eagle_topk}, {self.num_draft_tokens})")
        if self.num_draft_tokens - 1 > self.candidates:
            raise ValueError(f"--speculative-num-draft-tokens {self.num_draft_tokens} asks for "
                             f"{self.num_draft_tokens - 1} drafted tokens, more than the {self.candidates} "
                             f"(topk + (steps − 1)·topk²) SGLang drafts with topk {self.eagle_topk} and "
                             f"{self.num_steps} steps")

    def args(self, draft: str = "HEAD_ID") -> list[str]:
        """The flags, checked first; never an accept threshold (NEVER)."""
        self.check()
        return ["--speculative-algorithm", self.algorithm, "--speculative-draft-model-path", draft,
                "--speculative-num-steps", str(self.num_steps), "--speculative-eagle-topk", str(self.eagle_topk),
                "--speculative-num-draft-tokens", str(self.num_draft_tokens)]


@dataclass(frozen=True)
class VLLMConfig:
    method: str
    num_speculative_tokens: int  # a chain's γ

    def speculative_config(self, draft: str = "HEAD_ID") -> str:
        """The JSON that `vllm serve --speculative-config` takes."""
        return json.dumps({"method": self.method, "model": draft, "num_speculative_tokens": self.num_speculative_tokens})


def engine_methods(drafter: str) -> tuple[str, str]:
    """(SGLang algorithm, vLLM method) for one of our drafters; ValueError for one no engine runs (lookup)."""
    if drafter not in ENGINE_METHODS:
        raise ValueError(f"no serving-engine equivalent for the '{drafter}' drafter (have: {', '.join(ENGINE_METHODS)})")
    return ENGINE_METHODS[drafter]


def sglang_from_static(N: int, K: int, depth: int, drafter: str = "eagle3") -> SGLangFlags:
    """Our static tree (N drafted nodes, width K, D = depth) as SGLang's three EAGLE flags."""
    if min(N, K) < 1 or depth < 0:
        raise ValueError(f"a static tree needs N >= 1, K >= 1, D >= 0 (got N={N}, K={K}, D={depth})")
    algorithm = engine_methods(drafter)[0]
    if K == 1:  # a chain: SGLang verifies every drafted level, so the levels are the budget
        return sglang_from_chain(min(N, depth + 1), drafter)
    pool = K + depth * K * K
    return SGLangFlags(algorithm, depth + 1, K, min(N, pool) + 1, clamped=N > pool)


def sglang_from_chain(gamma: int, drafter: str = "eagle3") -> SGLangFlags:
    if gamma < 1:
        raise ValueError(f"a chain needs γ >= 1 (got {gamma})")
    return SGLangFlags(engine_methods(drafter)[0], gamma, 1, gamma + 1)


def vllm_from_chain(gamma: int, drafter: str = "eagle3") -> VLLMConfig:
    if gamma < 1:
        raise ValueError(f"a chain needs γ >= 1 (got {gamma})")
    return VLLMConfig(engine_methods(drafter)[1], gamma)


def static_lines(label: str, N: int, K: int, depth: int, drafter: str, draft: str) -> list[str]:
    """The printed form of the best static tree: the SGLang command-line flags and what they mean."""
    f = sglang_from_static(N, K, depth, drafter)
    lines = [f"best static tree ({label}: N={N} K={K} D={depth}) -> SGLang:", "    " + " ".join(f.args(draft)),
             f"    (--speculative-num-draft-tokens {f.num_draft_tokens} counts the root, the last committed token, "
             f"too: {f.num_draft_tokens - 1} drafted + 1; checked ≤ topk + (steps − 1)·topk² = {f.candidates})"]
    if f.clamped:
        lines.append(f"    (N={N} is more than the {K + depth * K * K} candidates this tree holds: clamped)")
    return lines


def chain_lines(label: str, gamma: int, drafter: str, draft: str, vllm_version: str = "") -> list[str]:
    """The printed form of the best chain: vLLM's speculative config (what it was checked against, and the
    version the user targets when named) and the same chain in SGLang."""
    return [f"best chain ({label}: γ={gamma}) -> vLLM: --speculative-config '{vllm_from_chain(gamma, drafter).speculative_config(draft)}'",
            "    " + vllm_checked(vllm_version),
            "    SGLang: " + " ".join(sglang_from_chain(gamma, drafter).args(draft))]


def vllm_checked(version: str = "") -> str:
    """Which vLLM the chain export was checked against; a named version is echoed with what it is known to
    read. ValueError for a version string that is not one (e.g. '0.11.2', 'v0.11')."""
    version = (version or "").strip().lstrip("v")
    if not version:
        return f"(checked against {VLLM_CHECKED}; name a vLLM version to target another)"
    if not re.fullmatch(r"\d+(\.\d+){0,2}(rc\d+)?", version):
        raise ValueError(f"vLLM version {version[:20]!r} is not a version number like 0.11.2")
    tree = any(version == r or version.startswith(r + ".") for r in VLLM_TREE_RELEASES)
    also = (" it also read speculative_token_tree (experimental tree attention), which this export does not write:"
            " SpecScope's trees are reranked every step, vLLM's is one fixed shape" if tree else "")
    return (f"(for vLLM {version}, as named: a chain, which every vLLM with EAGLE-3 reads;{also}; checked against "
            f"{VLLM_CHECKED})")


@dataclass(frozen=True)
class Measured:
    """One benchmarked configuration, as the bench ran it."""
    label: str
    method: str  # chain | static | talon | ...
    drafter: str
    knobs: dict
    speedup: float  # over AR, measured on the same prompts
    lossless: bool = True  # greedy output equal to AR's on every prompt


def _best(rows: list[Measured], method: str) -> Measured | None:
    fit = [r for r in rows if r.method == method and r.drafter in ENGINE_METHODS and r.lossless
           and not r.knobs.get("auto")]  # auto changes N per step: no fixed setting to take away
    return max(fit, key=lambda r: r.speedup, default=None)


def server_lines(rows: list[Measured], drafts: dict[str, str]) -> list[str]:
    """The fastest static tree and chain among `rows` as SGLang flags and vLLM's speculative config, with the
    conventions; empty when no row fits. drafts: drafter -> the weights to name (a Hub id or a folder)."""
    lines = []
    static, chain = _best(rows, "static"), _best(rows, "chain")
    if static:
        k = knobs.resolve("static", static.knobs)
        lines += static_lines(static.label, k["N"], k["K"], k["depth"], static.drafter,
                              drafts.get(static.drafter, PLACEHOLDERS[static.drafter]))
    if chain:
        k = knobs.resolve("chain", chain.knobs)
        lines += chain_lines(chain.label, k["gamma"], chain.drafter, drafts.get(chain.drafter, PLACEHOLDERS[chain.drafter]))
    return ["### Settings for a server", "", *lines, CONVENTIONS] if lines else []


CONVENTIONS = ("(our N counts drafted nodes, not the root; SGLang's num-draft-tokens counts the root too: N + 1; "
               "num-steps = D + 1 drafted levels; T_shape has no engine equivalent)")
