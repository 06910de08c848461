"""The generate / bench CLI contract: output fields, and one-line errors (exit 2, no traceback) on bad input."""
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cli import bench, generate, summarize
from core.engine import Session

FIELDS = {"id", "method", "output_ids", "text", "steps", "mat", "mean_delta", "target_forwards", "draft_forwards",
          "wall_s"}


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "f", "prompt": "def add(a, b):"}) + "\n" + json.dumps({"prompt": "import os"}) + "\n")
    return path


def run_main(main, args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    return exc.value.code, err


@pytest.mark.parametrize("method", ["ar", "chain", "static", "talon"])
def test_generate_prints_one_json_line_per_prompt(method, prompts, capsys):
    generate.main(["--method", method, "--prompts", str(prompts), "--max-new-tokens", "6", "--N", "8"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    rows = [json.loads(line) for line in lines]
    assert FIELDS <= set(rows[0]) and rows[0]["id"] == "f" and rows[1]["id"] == 2
    assert all(r["method"] == method and 1 <= len(r["output_ids"]) <= 6 for r in rows)
    assert all(r["mat"] == pytest.approx(len(r["output_ids"]) / r["steps"]) for r in rows)
    assert all(r["target_forwards"] == r["steps"] for r in rows)


def bad_file(tmp_path, name, text):
    path = tmp_path / f"{name}.jsonl"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case, expect", [
    ("missing", "not found"),
    ("bad-json", "not valid JSON"),
    ("empty-prompt", "empty"),
    ("too-long", "context"),
    ("gamma", "γ (chain length) must be in [1, 1024]"),
    ("temperature", "temperature"),
    ("top-p-high", "top-p"),
    ("top-p-zero", "top-p"),
    ("mu", "μ"),
    ("N", "N"),
    ("temperature-inf", "finite"),
    ("temperature-nan", "finite"),
    ("device-tpu", "unknown device 'tpu'"),
    ("device-mps", "not supported"),
    ("prompts-folder", "is a folder"),
    ("model-file", "is a file"),
    ("too-many-chars", "characters"),
])
def test_bad_input_exits_2_with_one_line(case, expect, tmp_path, prompts, capsys):
    args = {"missing": ["--prompts", str(tmp_path / "nope.jsonl")],
            "bad-json": ["--prompts", bad_file(tmp_path, "json", '{"prompt": "x"}\n{oops\n')],
            "empty-prompt": ["--prompts", bad_file(tmp_path, "empty", '{"prompt": "   "}\n')],
            "too-long": ["--prompts", bad_file(tmp_path, "long", json.dumps({"prompt": "x = 1\n" * 1200}) + "\n")],
            "gamma": ["--prompts", str(prompts), "--gamma", "0"],
            "temperature": ["--prompts", str(prompts), "--temperature", "-1"],
            "top-p-high": ["--prompts", str(prompts), "--top-p", "1.5"],
            "top-p-zero": ["--prompts", str(prompts), "--top-p", "0"],
            "mu": ["--prompts", str(prompts), "--method", "talon", "--mu", "0"],
            "N": ["--prompts", str(prompts), "--method", "talon", "--N", "0"],
            "temperature-inf": ["--prompts", str(prompts), "--temperature", "inf"],
            "temperature-nan": ["--prompts", str(prompts), "--temperature", "nan"],
            "device-tpu": ["--prompts", str(prompts), "--device", "tpu"],
            "device-mps": ["--prompts", str(prompts), "--device", "mps"],
            "prompts-folder": ["--prompts", str(tmp_path)],
            "model-file": ["--prompts", str(prompts), "--model", str(prompts)],
            "too-many-chars": ["--prompts", bad_file(tmp_path, "chars", json.dumps({"prompt": "x" * 40_000}) + "\n")]}[case]
    if "--method" not in args:
        args = ["--method", "chain", *args]
    code, err = run_main(generate.main, args, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and expect in err and "Traceback" not in err


@pytest.mark.slow
def test_bad_input_in_a_real_process_prints_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cli.generate", "--method", "chain", "--prompts",
                           str(tmp_path / "missing.jsonl")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: prompts file not found: {tmp_path / 'missing.jsonl'}"]


@pytest.mark.slow
def test_cli_generate_keeps_its_output_contract(prompts):
    """`python -m cli.generate` in a real process prints one JSON line per prompt."""
    proc = subprocess.run([sys.executable, "-m", "cli.generate", "--method", "ar", "--prompts", str(prompts),
                           "--max-new-tokens", "3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(lines) == len(prompts.read_text().splitlines())
    assert all({"id", "method", "output_ids", "text", "steps", "mat"} <= set(row) for row in lines)


def test_offline_hub_id_fails_fast_with_a_clear_message(prompts, capsys):
    code, err = run_main(generate.main, ["--method", "ar", "--prompts", str(prompts), "--model", "nobody/no-such-model"],
                         capsys)
    assert code == 2 and "nobody/no-such-model" in err and len(err.strip().splitlines()) == 1


def test_bench_prints_a_table_with_every_method(prompts, capsys):
    bench.main(["--prompts", str(prompts), "--methods", "ar,chain@model,talon@lookup:mu=0.1:N=8", "--max-new-tokens",
                "6", "--limit", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    labels = [r["label"] for r in out["rows"]]
    assert labels == ["ar", "chain@model", "talon@lookup:mu=0.1:N=8"]
    assert all(r["mismatches"] == 0 for r in out["rows"])
    assert 0 < out["c"]["model"] < 1 and out["c"]["lookup"] == 0


def test_bench_peers_are_timed_beside_an_ar_pass_of_their_own(prompts, capsys):
    """The peers' speed-ups are over our AR run again, prompt by prompt, in the same pass (not over the
    methods' AR row, timed earlier), and the early-exit peer runs at each exit layer asked for."""
    bench.main(["--prompts", str(prompts), "--methods", "ar", "--max-new-tokens", "4", "--limit", "1", "--peers",
                "--peer-exit-layers", "2,4", "--json"])
    peers = json.loads(capsys.readouterr().out)["peers"]
    assert [p["peer"] for p in peers] == ["ar (ours, this pass)", "hf-greedy", "hf-assisted", "hf-prompt-lookup",
                                          "hf-early-exit@2", "hf-early-exit@4"]
    assert peers[0]["speedup"] == 1.0 and all(p["tok_s"] > 0 and p["speedup"] > 0 for p in peers)


def test_summarize_reads_generate_outputs(prompts, tmp_path, capsys):
    files = []
    for method in ("ar", "chain"):
        generate.main(["--method", method, "--prompts", str(prompts), "--max-new-tokens", "6"])
        files.append(tmp_path / f"{method}.jsonl")
        files[-1].write_text(capsys.readouterr().out)
    summarize.main([str(f) for f in files])
    rows = capsys.readouterr().out.strip().splitlines()
    ar, chain = (r.split("|")[1:-1] for r in rows[2:])
    assert ar[0].strip() == "ar" and chain[0].strip() == "chain"
    assert ar[5].strip() == "1.00×" and chain[6].strip() == "0"  # chain reproduces AR's ids
    assert float(chain[2]) >= 1.0 and float(chain[3]) > 0
    code, err = run_main(summarize.main, [str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_says_so_in_one_line(prompts, capsys):
    code, err = run_main(generate.main, ["--method", "ar", "--prompts", str(prompts), "--device", "cuda"], capsys)
    assert code == 2 and "cuda requested but not available" in err and len(err.strip().splitlines()) == 1


def test_a_failing_prompt_writes_an_error_line_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    path = tmp_path / "three.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": p}) + "\n"
                            for i, p in enumerate(["def add(a, b):", "import os", "class A:"])))
    real = Session.generate

    def generate_or_fail(self):
        if self.target.tokenizer.decode(self.prompt_ids).endswith("import os"):
            raise RuntimeError("injected failure\nsecond line of detail")
        return real(self)

    monkeypatch.setattr(Session, "generate", generate_or_fail)
    with pytest.raises(SystemExit) as exc:
        generate.main(["--method", "chain", "--prompts", str(path), "--max-new-tokens", "4"])
    out, err = capsys.readouterr()
    *named, last = err.strip().splitlines()  # the drafter's line, then the one error line
    assert exc.value.code == 1 and "1 of 3 prompts failed" in last and all(n.startswith("drafter ") for n in named)
    rows = [json.loads(line) for line in out.splitlines()]  # every line is whole JSON
    assert [r["id"] for r in rows] == [0, 1, 2]
    assert rows[1] == {"id": 1, "method": "chain", "error": "RuntimeError: injected failure"}
    assert all(len(rows[i]["output_ids"]) == 4 and "error" not in rows[i] for i in (0, 2))


def test_N_2000_either_works_or_exits_2_with_one_line(prompts, capsys):
    try:
        generate.main(["--method", "talon", "--prompts", str(prompts), "--max-new-tokens", "4", "--N", "2000"])
    except SystemExit as exc:
        err = capsys.readouterr().err
        assert exc.code == 2 and len(err.strip().splitlines()) == 1, err
        return
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert len(rows) == 2 and all("error" not in r and len(r["output_ids"]) == 4 for r in rows)


def test_bench_repeats_the_run_and_shows_each_repeat(prompts, capsys):
    bench.main(["--prompts", str(prompts), "--methods", "ar,chain@lookup,talon@lookup:N=4", "--max-new-tokens", "6",
                "--limit", "2", "--repeat", "2"])
    text = capsys.readouterr().out
    assert "2 repeats" in text and "tok/s per repeat" in text
    bench.main(["--prompts", str(prompts), "--methods", "ar,talon@lookup:N=4", "--max-new-tokens", "6", "--limit", "2",
                "--repeat", "2", "--json"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert all(len(r["tok_s_per_repeat"]) == 2 and r["mismatches"] == 0 for r in rows)
    assert rows[0]["tokens"] % 2 == 0 and rows[1]["tokens"] == rows[0]["tokens"]  # both repeats, same text as AR


def test_auto_variants_script_runs_patched_constants_beside_fixed_budgets(prompts):
    """scripts/auto_variants.py (how auto's thresholds were chosen): every row decodes, the fixed row is the
    reference, and a name that is not one of auto's constants is one line, not a traceback."""
    cmd = [sys.executable, "scripts/auto_variants.py", "--drafter", "lookup", "--repeat", "1", "--limit", "2",
           "--max-new-tokens", "6", "--prompts", str(prompts)]
    proc = subprocess.run(cmd + ["--variants", "auto;NUDGE_EVERY=4;N=4"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert [r.split(" | ")[0] for r in rows] == ["| auto", "| NUDGE_EVERY=4", "| N=4"]
    assert rows[-1].split(" | ")[2] == "1.000"
    bad = subprocess.run(cmd + ["--variants", "auto;NO_SUCH=1"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and "NO_SUCH=1" in bad.stderr


CLI_MAINS = sorted(p.stem for p in Path("cli").glob("*.py") if "def main(argv" in p.read_text())


@pytest.mark.parametrize("name", CLI_MAINS)
def test_every_cli_builds_its_parser(name, capsys):
    """--help builds the whole parser: a flag declared twice (a knob several drafters share) fails here, not on
    a user's first run."""
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(f"cli.{name}").main(["--help"])
    assert exc.value.code == 0 and "usage:" in capsys.readouterr().out
