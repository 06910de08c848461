"""scripts/hf_forward_cost.py times transformers' own forward for each n on a fixed prefix: every n gets a time,
and the ratios are read against n = 1."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_hf_forward_cost_prints_a_time_and_a_ratio_per_n(capsys):
    spec = importlib.util.spec_from_file_location("hf_forward_cost", ROOT / "scripts" / "hf_forward_cost.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--model", str(ROOT / "assets" / "models" / "target"), "--dtype", "fp32", "--context", "16",
                 "--reps", "1"])
    lines = capsys.readouterr().out.splitlines()
    ms = next(line for line in lines if line.startswith("| ms |")).strip("| ").split(" | ")[1:]
    ratios = next(line for line in lines if line.startswith("| ratio to n = 1 |")).strip("| ").split(" | ")[1:]
    assert len(ms) == len(ratios) == len(script.NEW) and all(float(x) > 0 for x in ms) and ratios[0] == "1.00"
