"""The best static tree / chain as serving-engine settings (core/server_flags.py): the conventions hold (our N
omits the root, SGLang's draft tokens include it; D + 1 levels), and cli.bench prints them after its table."""
import json

import pytest

from cli import bench
from core.server_flags import (Measured, server_lines, sglang_from_chain, sglang_from_static, static_lines,
                               vllm_from_chain)
from core.trees.policies import StaticPolicy


def test_static_tree_maps_to_sglang_with_the_root_counted():
    f = sglang_from_static(N=60, K=10, depth=8)  # the paper's static tree
    assert (f.algorithm, f.num_steps, f.eagle_topk, f.num_draft_tokens, f.clamped) == ("EAGLE3", 9, 10, 61, False)
    args = f.args("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert args[args.index("--speculative-num-draft-tokens") + 1] == "61"
    assert args[args.index("--speculative-draft-model-path") + 1] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
    assert sglang_from_static(12, 2, 8, drafter="model").algorithm == "STANDALONE"


def test_a_budget_beyond_the_trees_candidates_is_clamped_to_them():
    f = sglang_from_static(N=60, K=2, depth=3)  # 2 + 3·4 = 14 candidates
    assert f.num_draft_tokens == 15 and f.clamped
    assert any("clamped" in line for line in static_lines("static", 60, 2, 3, "eagle3", "HEAD_ID"))


def expand_uniform(K: int):
    """A drafter whose q is flat over K + 1 tokens: every candidate exists, so the pool is full."""
    import torch

    def expand(frontier, tree):
        q = torch.zeros(len(frontier), 32)
        q[:, : K + 1] = 1.0 / (K + 1)
        return q
    return expand


@pytest.mark.parametrize("N, K, D", [(60, 10, 8), (12, 2, 8), (60, 2, 3), (5, 3, 1)])
def test_the_conventions_match_our_static_policy(N, K, D):
    """num_steps = the levels our static tree grows (δ = D + 1) and draft tokens = the nodes it verifies + root."""
    grown = StaticPolicy(N=N, K=K, depth=D).grow(expand_uniform(K), max_depth=100)
    f = sglang_from_static(N, K, D)
    assert f.num_steps == grown.forwards == D + 1
    assert f.num_draft_tokens == len(grown.tree) + 1 and len(grown.pool) == K + D * K * K
    assert max(grown.tree.depths) + 1 <= f.num_steps


def test_chains_map_to_vllm_and_to_sglang_with_topk_1():
    assert vllm_from_chain(5).num_speculative_tokens == 5
    cfg = json.loads(vllm_from_chain(5, "model").speculative_config("Qwen/Qwen3-0.6B"))
    assert cfg == {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 5}
    f = sglang_from_chain(4)
    assert (f.num_steps, f.eagle_topk, f.num_draft_tokens) == (4, 1, 5)  # SGLang forces steps + 1 at topk 1
    assert sglang_from_static(N=3, K=1, depth=8) == sglang_from_chain(3)  # a K = 1 tree is a chain of min(N, D+1)


@pytest.mark.parametrize("call", [lambda: sglang_from_static(0, 2, 3), lambda: sglang_from_chain(0),
                                  lambda: vllm_from_chain(3, "lookup")])
def test_settings_that_cannot_exist_are_one_line_errors(call):
    with pytest.raises(ValueError) as exc:
        call()
    assert "\n" not in str(exc.value)


def test_server_lines_pick_the_fastest_lossless_fixed_rows():
    rows = [Measured("static@eagle3", "static", "eagle3", {"N": 60, "K": 10, "depth": 8}, 1.4),
            Measured("static@eagle3:N=12:K=2", "static", "eagle3", {"N": 12, "K": 2, "depth": 8}, 2.1),
            Measured("static@eagle3:N=8", "static", "eagle3", {"N": 8, "K": 2, "depth": 3}, 3.0, lossless=False),
            Measured("static@eagle3:auto", "static", "eagle3", {"N": 96, "K": 2, "depth": 8, "auto": 1}, 5.0),
            Measured("static@lookup", "static", "lookup", {"N": 8, "K": 2, "depth": 3}, 4.0),
            Measured("chain@eagle3", "chain", "eagle3", {"gamma": 5}, 1.5),
            Measured("chain@eagle3:gamma=3", "chain", "eagle3", {"gamma": 3}, 1.7),
            Measured("talon@eagle3", "talon", "eagle3", {"N": 60}, 9.0)]
    text = "\n".join(server_lines(rows, {"eagle3": "org/head"}))
    assert "static@eagle3:N=12:K=2" in text and "--speculative-num-steps 9 --speculative-eagle-topk 2 " \
        "--speculative-num-draft-tokens 13" in text and "org/head" in text
    assert '"num_speculative_tokens": 3' in text and "N + 1" in text
    assert server_lines(rows[-1:], {}) == []  # TALON alone: no engine takes a dynamic tree


def test_bench_prints_the_settings_after_its_table(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "def add(a, b):"}) + "\n")
    bench.main(["--prompts", str(prompts), "--methods", "ar,chain@model:gamma=3,static@model:N=6:K=2:depth=2",
                "--max-new-tokens", "4", "--limit", "1"])
    text = capsys.readouterr().out
    assert text.index("### Settings for a server") > text.index("| static@model")
    assert "--speculative-algorithm STANDALONE" in text and "--speculative-num-draft-tokens 7" in text
    assert '"method": "draft_model"' in text and '"num_speculative_tokens": 3' in text


def test_sglang_flags_are_checked_against_the_candidates_sglang_drafts_before_printing():
    """Issue 34, item 10: num-draft-tokens − 1 ≤ topk + (steps − 1)·topk², else no flags are printed."""
    from core.server_flags import SGLangFlags
    ok = SGLangFlags("EAGLE3", num_steps=3, eagle_topk=2, num_draft_tokens=11)  # 10 ≤ 2 + 2·4
    assert ok.candidates == 10 and "--speculative-num-draft-tokens" in ok.args()
    with pytest.raises(ValueError, match="more than the 10"):
        SGLangFlags("EAGLE3", num_steps=3, eagle_topk=2, num_draft_tokens=12).args()
    with pytest.raises(ValueError, match="≥ 1"):
        SGLangFlags("EAGLE3", num_steps=0, eagle_topk=2, num_draft_tokens=2).args()
    for N, K, D in [(60, 10, 8), (12, 2, 8), (60, 2, 3), (5, 3, 1), (3, 1, 8)]:
        f = sglang_from_static(N, K, D)
        f.check()  # every static tree we map fits
        assert f.num_draft_tokens - 1 <= f.eagle_topk + (f.num_steps - 1) * f.eagle_topk ** 2


def test_the_printed_settings_say_the_root_is_counted_and_never_set_an_accept_threshold():
    from core.server_flags import NEVER, chain_lines
    lines = static_lines("static", 12, 2, 8, "eagle3", "HEAD_ID") + chain_lines("chain", 3, "eagle3", "HEAD_ID")
    text = "\n".join(lines)
    assert "counts the root" in text and "12 drafted + 1" in text
    assert not any(flag in text for flag in NEVER) and "accept-threshold" not in text


def test_vllm_gets_a_chain_and_is_told_which_version_it_was_checked_against():
    """Issue 34, item 11: vLLM dropped tree drafting (speculative_token_tree): a chain, with the version the
    export was checked against; a version the user names is echoed, and a bad one is one line."""
    from core.server_flags import VLLM_CHECKED, chain_lines
    lines = chain_lines("chain", 3, "eagle3", "org/head")
    cfg = json.loads(lines[0].split("--speculative-config ", 1)[1].strip("'"))
    assert cfg == {"method": "eagle3", "model": "org/head", "num_speculative_tokens": 3}
    assert "speculative_token_tree" not in lines[0] and VLLM_CHECKED in lines[1] and "PR #42121" in lines[1]
    named = chain_lines("chain", 3, "eagle3", "org/head", vllm_version="v0.11.2")
    assert "for vLLM 0.11.2" in named[1] and "speculative_token_tree" in named[1] and named[0] == lines[0]
    assert "for vLLM 0.21.0" in chain_lines("chain", 3, "eagle3", "h", "0.21.0")[1]
    with pytest.raises(ValueError, match="not a version number"):
        chain_lines("chain", 3, "eagle3", "h", "latest; rm -rf")
