"""The GPU scripts on a CPU machine: scripts/device_check.sh starts and says in one line that there is nothing to
check (it once imported a function that had moved, and nothing ran it without a GPU), and scripts/gpu_bench.sh
parses, skips its real-model section in one line when the pair is not cached, and dry-runs every command."""
import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour of a machine without CUDA")


def bash(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SPECSCOPE_CHECK_", "SPECSCOPE_REAL_"))}
    return subprocess.run(["bash", f"scripts/{script}", *args], cwd=ROOT, env={**base, **env}, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("script", ["device_check.sh", "gpu_bench.sh"])
def test_the_scripts_parse(script):
    assert subprocess.run(["bash", "-n", f"scripts/{script}"], cwd=ROOT).returncode == 0


@no_cuda
def test_device_check_without_cuda_is_one_line_and_status_0():
    res = bash("device_check.sh")
    assert (res.returncode, res.stdout, res.stderr) == (0, "no CUDA device: nothing to check\n", "")


@no_cuda
def test_device_check_can_be_told_a_gpu_is_required():
    res = bash("device_check.sh", SPECSCOPE_CHECK_REQUIRE_CUDA="1")
    assert res.returncode == 2 and res.stderr == "error: no CUDA device\n" and res.stdout == ""


def test_device_check_names_a_bad_device_in_one_line():
    res = bash("device_check.sh", SPECSCOPE_CHECK_DEVICE="tpu")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == ["error: unknown device 'tpu'; use auto, cpu, "
                                                                       "cuda or cuda:N"]


def test_gpu_bench_skips_the_real_pair_in_one_line_when_it_is_not_cached(tmp_path):
    res = bash("gpu_bench.sh", "--real-only", HF_HOME=str(tmp_path), HF_HUB_CACHE=str(tmp_path / "hub"))
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.splitlines() == ["real-model section skipped: Qwen/Qwen3-1.7B, AngelSlim/Qwen3-1.7B_eagle3 not "
                                       "in the local Hugging Face cache (fetch with huggingface-cli download ID)"]


def fake_cache(hub: Path, repo: str, files: list[str]) -> None:
    """The local Hugging Face cache's layout (models--org--name/{refs/main, snapshots/REV/...})."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    snap = folder / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    for name in files:
        (snap / name).write_text("{}")


def test_gpu_bench_dry_run_lists_the_real_sections_commands(tmp_path):
    hub = tmp_path / "hub"
    fake_cache(hub, "org/target", ["config.json", "model.safetensors"])
    fake_cache(hub, "org/head", ["config.json", "pytorch_model.bin"])
    res = bash("gpu_bench.sh", "--real-only", "--dry-run", "--device", "cuda", "--limit", "3", HF_HOME=str(tmp_path),
               HF_HUB_CACHE=str(hub), SPECSCOPE_REAL_TARGET="org/target", SPECSCOPE_REAL_HEAD="org/head")
    lines = res.stdout.splitlines()
    assert res.returncode == 0 and lines[0].startswith("real-model section: org/target, org/head found")
    commands = [line for line in lines if line.startswith("+ ")]
    equality = [c for c in commands if "dtype_equality.py" in c]
    assert len(equality) == 4 and {("bf16" in c, "--chat on" in c) for c in equality} == {
        (False, False), (False, True), (True, False), (True, True)}
    benches = [c for c in commands if "cli.bench" in c]
    assert len(benches) == 2 and "--chat off" in benches[0] and "--chat on" in benches[1]
    assert all("--model org/target --drafter eagle3 --draft org/head" in c for c in equality + benches)
    assert all(m in benches[0] for m in ("chain@eagle3", "static@eagle3", "talon@eagle3", "auto=1"))
    assert sum("cli.cost_curve" in c for c in commands) == 1


def test_gpu_bench_needs_every_shard_of_a_sharded_target(tmp_path):
    hub = tmp_path / "hub"
    fake_cache(hub, "org/target", ["config.json"])
    snap = next((hub / "models--org--target" / "snapshots").iterdir())
    (snap / "model.safetensors.index.json").write_text('{"weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors"}}')
    (snap / "m-1.safetensors").write_text("")
    fake_cache(hub, "org/head", ["config.json", "model.safetensors"])
    res = bash("gpu_bench.sh", "--real-only", HF_HOME=str(tmp_path), HF_HUB_CACHE=str(hub),
               SPECSCOPE_REAL_TARGET="org/target", SPECSCOPE_REAL_HEAD="org/head")
    assert res.returncode == 0 and res.stdout.startswith("real-model section skipped: org/target not in")


@pytest.mark.slow
def test_gpu_bench_small_runs_on_a_cpu_checks_equality_and_prints_the_table():
    res = subprocess.run(["bash", "scripts/gpu_bench.sh", "--embedded-only", "--small", "--device", "cpu"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.count("identical to AR") == 2 and "failures: 0" in res.stdout  # fp32 and bf16
    for row in ("| ar |", "| chain@eagle3 |", "| talon@eagle3:preset=embedded |", "| talon@self:preset=embedded |",
                "| specbound:preset=fast |"):
        assert row in res.stdout


def test_the_bench_fails_when_an_output_differs_from_ar(monkeypatch, capsys):
    import core.trees.method
    from cli.bench import main as bench_main
    from tests.test_drafters import drafted_first
    monkeypatch.setattr(core.trees.method, "verify_tree", drafted_first)  # lossy: takes a drafted child when it can
    with pytest.raises(SystemExit) as exc:
        bench_main(["--prompts", "assets/prompts/heldout.jsonl", "--limit", "2", "--max-new-tokens", "16",
                    "--methods", "ar,talon@model:N=16:K=4", "--fail-on-mismatch"])
    assert exc.value.code == 1 and "output differs from AR: talon@model" in capsys.readouterr().err
