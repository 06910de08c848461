"""Chat and code requests assembled from what any machine with Python has, for training heads on a chat model.

    python -m cli.chat_prompts --out assets/prompts/train_chat.jsonl --heldout-out assets/prompts/real.jsonl

Training requests (deterministic, seeded):
- code: "Write a Python function `sig` that <its docstring's first sentence>" and "Explain what this function
  does" over functions of the standard library's *training* files (cli/corpus.py's split);
- chat: request templates crossed with a list of everyday topics, and arithmetic word problems with drawn numbers.
Held-out requests (what the real-model tables are measured on; no head is trained on them): the hand-written
`assets/prompts/chat.jsonl` and code requests built the same way from the *held-out* stdlib files.
"""
from __future__ import annotations

import argparse
import ast
import json
import random
from pathlib import Path

from cli.common import run_main
from cli.corpus import source_files, split

TOPICS = (
    "the water cycle", "black holes", "the French Revolution", "machine learning", "climate change", "the immune system",
    "compound interest", "photosynthesis in desert plants", "the history of the internet", "volcanoes", "sleep hygiene",
    "learning a second language", "time management", "electric cars", "the Roman Empire", "healthy breakfasts",
    "public speaking", "recycling plastics", "how vaccines work", "the stock market", "quantum computing", "gardening",
    "the Moon landing", "coral reefs", "renewable energy", "how a bicycle works", "job interviews", "budgeting",
    "the human heart", "earthquakes", "chess openings", "meditation", "the printing press", "honey bees", "rainbows",
    "how computers store numbers", "the Great Wall of China", "running a marathon", "making bread", "tides",
    "the solar system", "password security", "remote work", "dinosaurs", "the Olympic Games", "jazz music",
    "how airplanes fly", "saving for retirement", "dog training", "the theory of evolution", "recursion",
    "sorting algorithms", "databases", "version control with git", "unit testing", "HTTP requests", "binary search",
    "hash tables", "object-oriented programming", "regular expressions", "the Linux command line", "spreadsheets",
    "writing a CV", "negotiating a salary", "first aid for burns", "houseplants", "the Renaissance", "glaciers",
    "the metric system", "nutrition labels", "caffeine", "friendship", "team sports", "climbing mountains",
    "photography", "the piano", "origami", "solar panels", "wind turbines", "the Amazon rainforest", "penguins",
    "antibiotics", "blood types", "the periodic table", "magnets", "the speed of light", "supply and demand",
    "inflation", "democracy", "libraries", "museums", "coffee brewing", "tea ceremonies", "camping", "bird migration",
)
TEMPLATES = (
    "Explain {t} in simple terms.",
    "Give me three interesting facts about {t}.",
    "Write a short paragraph about {t} for a school newsletter.",
    "What are the pros and cons of {t}?",
    "Summarise {t} in five bullet points.",
    "Write a short poem about {t}.",
    "How would you explain {t} to a ten-year-old?",
    "What is a common misconception about {t}?",
    "Write a friendly email inviting a colleague to a talk about {t}.",
    "List some questions a beginner might ask about {t}, with short answers.",
    "Why does {t} matter in everyday life?",
    "Write a tweet about {t}.",
    "Give me a step-by-step guide to getting started with {t}.",
    "Compare {t} with {u}.",
    "Tell a short story in which {t} plays a part.",
)
ITEMS = ("apples", "books", "pencils", "tickets", "marbles", "stickers", "cookies", "chairs")


def functions(source: str) -> list[tuple[str, str, str]]:
    """(signature, docstring's first sentence, source) of top-level and method definitions with a docstring."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or node.name.startswith(("_", "test")):
            continue
        doc = ast.get_docstring(node)
        if not doc or len(node.body) < 2:
            continue
        first = doc.strip().split("\n\n")[0].replace("\n", " ").split(". ")[0].strip().rstrip(".")
        if not 15 <= len(first) <= 200:
            continue
        args = ", ".join(a.arg for a in node.args.args)
        code = "\n".join(lines[node.lineno - 1: node.end_lineno])
        out.append((f"{node.name}({args})", first, code if len(code) <= 900 else ""))
    return out


def code_requests(files, rng: random.Random, per_file: int) -> list[str]:
    out = []
    for f in files:
        found = functions(f.read())
        rng.shuffle(found)
        for sig, first, code in found[:per_file]:
            what = first[0].lower() + first[1:]
            if code and rng.random() < 0.3:
                out.append(f"Explain what this Python function does:\n```python\n{code}\n```")
            else:
                out.append(f"Write a Python function `{sig}` that does the following: {what}.")
    return out


def chat_requests(rng: random.Random) -> list[str]:
    out = []
    for t in TOPICS:
        for tpl in rng.sample(TEMPLATES, 9):
            out.append(tpl.format(t=t, u=rng.choice(TOPICS)))
    for _ in range(200):
        a, b, c = rng.randint(2, 60), rng.randint(2, 30), rng.randint(2, 9)
        item = rng.choice(ITEMS)
        out.append(f"Sam has {a} {item}, buys {b} more and then shares them equally among {c} friends. "
                   f"How many does each friend get, and how many are left over? Show your steps.")
    return out


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="assets/prompts/train_chat.jsonl")
    ap.add_argument("--heldout-out", default="assets/prompts/real.jsonl")
    ap.add_argument("--per-file", type=int, default=3)
    ap.add_argument("--heldout-code", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    train_files, heldout_files = split(source_files())
    train = code_requests(train_files, rng, args.per_file) + chat_requests(rng)
    rng.shuffle(train)
    write(Path(args.out), [{"id": f"train-{i}", "prompt": p} for i, p in enumerate(train)])
    chat = [json.loads(line) for line in Path("assets/prompts/chat.jsonl").read_text().splitlines() if line.strip()]
    code = [p for p in code_requests(heldout_files, random.Random(args.seed + 1), 1) if p.startswith("Write")]
    held = chat + [{"id": f"code-{i}", "prompt": p} for i, p in enumerate(code[: args.heldout_code])]
    write(Path(args.heldout_out), held)
    print(f"wrote {len(train)} training requests to {args.out} and {len(held)} held-out ones to {args.heldout_out}")


if __name__ == "__main__":
    run_main(main)
