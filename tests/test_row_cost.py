"""scripts/row_cost.py prints both of its tables for the embedded target: every product, every layout."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_row_cost_prints_each_product_and_each_layout(capsys):
    spec = importlib.util.spec_from_file_location("row_cost", ROOT / "scripts" / "row_cost.py")
    row_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(row_cost)
    row_cost.main(["--rows", "1,3"])
    out = capsys.readouterr().out
    for row in ("| q/k/v/o projection | 256×256 |", "| MLP gate/up | 768×256 |", "| LM head (whole vocabulary) | 8192×256 |",
                *(f"| {label} |" for label in row_cost.LAYOUTS)):
        assert row in out, row
    assert out.count(" ms |") >= 2 * len(row_cost.LAYOUTS) and "| T = 1 | T = 3 |" in out
