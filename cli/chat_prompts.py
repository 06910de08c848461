"""Chat and code requests assembled from what any machine with Python has, for training heads on a chat model.

    python -m cli.chat_prompts --out assets/prompts/train_chat.jsonl --heldout-out assets/prompts/real.jsonl

Training requests (deterministic, seeded):
- code: "Write a Python function `sig` that <its docstring's first sentence>" and "Explain what this function
  does" over functions of the standard library's *training* files (cli/corpus.py's split);
- chat: request templates crossed with a list of everyday topics, and arithmetic word problems with drawn numbers;
- wide (`wide-*`, appended so the earlier ids and their answers stay valid): requests of many shapes an assistant
  gets (`wide_requests`), for a head that must draft on requests unlike any template;
- words (`words-*`, appended after them): requests about words of the target's own vocabulary (`word_requests`),
  so needs the target's tokenizer (python -m cli.get_model smollm2).
Held-out requests (what the real-model tables are measured on; no head is trained on them): the hand-written
`assets/prompts/chat.jsonl` and code requests built the same way from the *held-out* stdlib files.
"""
from __future__ import annotations

import argparse
import ast
import json
import random
import re
from pathlib import Path

from cli.common import fail, run_main
from cli.corpus import source_files, split
from core.model.real_models import resolve

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

WIDE_TOPICS = (
    "the causes of the First World War", "how rainbows form", "the life cycle of a butterfly", "the rules of cricket",
    "how a refrigerator works", "the history of chocolate", "why the sky is blue", "how credit scores work",
    "the Silk Road", "how elections are counted", "the human skeleton", "how plants drink water", "the Industrial Revolution",
    "how noise-cancelling headphones work", "the Apollo programme", "how batteries store energy", "the water footprint of food",
    "how search engines rank pages", "the ancient Egyptians", "how the stock of a shop is managed", "the Great Barrier Reef",
    "how hurricanes form", "the invention of the telephone", "how the heart pumps blood", "the history of football",
    "how GPS finds your position", "the benefits of walking", "how a loan's interest is calculated", "the Vikings",
    "how cheese is made", "the northern lights", "how 3D printers work", "the history of jeans", "how bees make honey",
    "how a compiler works", "cloud computing", "open-source software", "artificial neural networks", "how email is delivered",
    "the carbon cycle", "plate tectonics", "how wind forms", "how a camera lens focuses", "the Aztec empire",
    "how insurance works", "how a startup raises money", "how recycling of paper works", "how memory works in the brain",
)
PAIRS = (
    ("RAM", "disk storage"), ("weather", "climate"), ("a virus", "a bacterium"), ("HTTP", "HTTPS"), ("stocks", "bonds"),
    ("a compiler", "an interpreter"), ("speed", "velocity"), ("mass", "weight"), ("a democracy", "a monarchy"),
    ("a latte", "a cappuccino"), ("an atom", "a molecule"), ("a debit card", "a credit card"), ("AC", "DC current"),
    ("a process", "a thread"), ("SQL", "NoSQL databases"), ("a list", "a linked list"), ("git merge", "git rebase"),
    ("a meteor", "a meteorite"), ("a hurricane", "a tornado"), ("renting", "buying a home"), ("a CPU", "a GPU"),
    ("machine learning", "traditional programming"), ("an alligator", "a crocodile"), ("baking soda", "baking powder"),
    ("a simile", "a metaphor"), ("affect", "effect"), ("a stack", "a queue"), ("IPv4", "IPv6"), ("JSON", "XML"),
    ("a class", "an object"), ("static", "dynamic typing"), ("frontend", "backend development"),
)
AUDIENCES = ("", " to a beginner", " to a first-year student", " in two short paragraphs", ", with an example of each",
             " in plain English", " to a twelve-year-old")
LANGS = ("Python", "Python", "Python", "JavaScript", "Java", "C", "Go", "Rust", "a Bash script")
TASKS = (
    "reverses a string", "counts the vowels in a sentence", "checks whether a number is prime", "merges two sorted lists",
    "flattens a nested list", "computes the factorial of n", "finds the second largest number in a list",
    "checks whether a word is a palindrome", "returns the n-th Fibonacci number", "counts how often each word appears in a text",
    "converts Celsius to Fahrenheit", "finds the longest word in a sentence", "sums the digits of an integer",
    "checks whether two strings are anagrams", "rotates a list by k positions", "returns the common elements of two lists",
    "reads a CSV file and prints the average of one column", "validates a simple email address",
    "capitalises the first letter of every word", "finds the greatest common divisor of two numbers",
    "generates a random password of a given length", "groups a list of words by their first letter",
    "transposes a matrix", "computes a running average", "splits a list into chunks of size n",
    "counts the lines in a file", "finds the missing number in a list of 1..n", "implements binary search",
    "sorts a list of dictionaries by a key", "converts a Roman numeral to an integer",
)
EXTRAS = ("", " and explain how it works", ", with a docstring and two examples", " and give its time complexity",
          ", then show how to call it")
PURPOSES = (
    "thanking them for helping with a project", "asking for a day off next Monday", "apologising for a late reply",
    "inviting them to a birthday dinner", "requesting a refund for a broken kettle", "asking for feedback on a report",
    "announcing that the office will close early on Friday", "asking to borrow a ladder", "welcoming a new team member",
    "following up after a job interview", "complaining politely about noise late at night", "confirming a dentist appointment",
    "asking for an extension on an assignment", "sharing the notes from today's meeting", "congratulating them on a promotion",
    "declining an invitation to a conference", "asking about the status of an order", "reminding them about an unpaid invoice",
)
WHOM = ("a colleague", "my manager", "a neighbour", "a customer", "a teacher", "my landlord", "the team", "a friend", "a supplier")
TONES = ("short", "formal", "friendly", "polite", "brief", "warm")
GENRES = ("science-fiction", "fantasy", "detective", "adventure", "ghost", "comedy", "historical", "romance")
PLACES = ("on a night train", "in a desert town", "on a space station", "in a busy market", "in a mountain village",
          "at a school reunion", "in an abandoned factory", "on a fishing boat", "in a museum after closing time",
          "at an airport during a snowstorm", "in a small bakery", "on the first day of a new job")
DISHES = ("pancakes", "a tomato pasta sauce", "fried rice", "a chickpea curry", "banana bread", "guacamole", "an omelette",
          "a lentil salad", "oatmeal cookies", "a stir-fry with tofu", "roasted potatoes", "a fruit smoothie", "hummus",
          "a mushroom risotto", "chicken tacos", "a simple pizza dough", "a Greek salad", "garlic bread")
REGEX = ("email addresses", "UK postcodes", "hexadecimal colour codes like #1a2b3c", "times like 14:05",
         "US phone numbers", "IPv4 addresses", "words that start with a capital letter", "numbers with two decimal places",
         "URLs that start with https", "hashtags in a tweet")
SENTENCES = ("Where is the nearest train station?", "I would like a cup of coffee, please.", "The weather is lovely today.",
             "My brother works in a hospital.", "We are going to the beach this weekend.", "Can you help me carry this box?",
             "The shop closes at eight in the evening.", "I have been learning to play the guitar.",
             "Please send me the report by Friday.", "The children are playing in the garden.")
TARGET_LANGS = ("French", "Spanish", "German", "Italian", "Portuguese")
GOALS = ("studying for exams", "saving money on groceries", "staying focused while working from home", "learning to cook",
         "keeping a houseplant alive", "writing clearer emails", "preparing for a job interview", "running your first 5 km",
         "reducing screen time", "keeping a tidy desk", "reading more books", "making new friends in a new city",
         "travelling on a budget", "giving a good presentation", "drinking more water", "learning to code")
SCHEMAS = (("employees(id, name, department, salary)", ("lists the three highest-paid employees",
            "shows the average salary per department", "counts the employees in each department")),
           ("books(id, title, author, year)", ("lists the books published after 2000, newest first",
            "counts the books by each author", "finds the oldest book")),
           ("students(id, name) and grades(student_id, course, grade)", ("lists each student's average grade",
            "finds the students with no grades", "shows the best grade in each course")),
           ("products(id, name, price, stock)", ("lists the products that are out of stock",
            "shows the total value of the stock", "finds the five cheapest products")))
CONCEPTS = (("sets", "lists"), ("dictionaries", "lists"), ("for", "while loops"), ("classes", "functions"),
            ("'is'", "'=='"), ("append", "extend"), ("deep", "shallow copies"), ("generators", "lists"),
            ("*args", "**kwargs"), ("modules", "packages"), ("exceptions", "return codes"), ("threads", "processes"))
HOWTO = ("undo the last commit in git", "freeze the top row in a spreadsheet", "find large files on Linux",
         "read a JSON file in Python", "make a virtual environment in Python", "rename many files at once on Linux",
         "center a div in CSS", "sort a dictionary by value in Python", "schedule a task with cron",
         "check which process uses a port", "create a pivot table", "remove a file from git but keep it locally")


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


def wide_requests(rng) -> list[str]:
    """Everyday assistant requests of many shapes (emails, differences, code in several languages, stories, recipes,
    SQL, regular expressions, translations, tips, how-tos, word problems): breadth, so a head learns the target's
    chat style rather than a handful of templates."""
    out = []
    for t in WIDE_TOPICS:
        out += [tpl.format(t=t, u=rng.choice(WIDE_TOPICS)) for tpl in rng.sample(TEMPLATES, 8)]
    for a, b in PAIRS:
        out += [f"Explain the difference between {a} and {b}{aud}." for aud in rng.sample(AUDIENCES, 4)]
    for task in TASKS:
        out += [f"Write a {lang} function that {task}{rng.choice(EXTRAS)}." if not lang.startswith("a ")
                else f"Write {lang} that {task}." for lang in rng.sample(LANGS, 5)]
    for p in PURPOSES:
        out += [f"Write a {rng.choice(TONES)} email to {w} {p}." for w in rng.sample(WHOM, 4)]
    for g in GENRES:
        out += [f"Write the opening paragraph of a {g} story set {p}." for p in rng.sample(PLACES, 6)]
    out += [f"Give me a simple recipe for {d}{rng.choice(('', ' that takes under 20 minutes', ' for four people'))}."
            for d in DISHES]
    out += [f"Write a regular expression that matches {r} and explain each part." for r in REGEX]
    out += [f"Translate into {lang}: '{s}'" for s in SENTENCES for lang in rng.sample(TARGET_LANGS, 4)]
    out += [f"List {rng.randint(4, 8)} practical tips for {g}, each with a one-sentence reason." for g in GOALS]
    for schema, tasks in SCHEMAS:
        out += [f"Given the table{'s' if ' and ' in schema else ''} {schema}, write an SQL query that {t}." for t in tasks]
    out += [f"What are the main differences between Python {a} and {b}? When should I use each?" for a, b in CONCEPTS]
    out += [f"How do I {h}? Give the steps." for h in HOWTO]
    for _ in range(100):
        v, d = rng.choice((("cyclist", 18), ("bus", 60), ("runner", 12), ("ship", 30))), rng.randint(3, 40) * 5
        out.append(f"A {v[0]} travels {d} km at an average of {v[1]} km/h. How long does the trip take? Show your steps.")
        price, off = rng.randint(8, 120), rng.choice((10, 15, 20, 25, 30))
        out.append(f"A jacket costs ${price} and is on sale for {off}% off. What is the sale price? Explain.")
    return out


WORD_TEMPLATES = (
    "What does the word '{w}' mean? Use it in two example sentences.",
    "Write a short paragraph that uses the word '{w}' naturally.",
    "Write a very short story that includes the word '{w}'.",
    "Explain the idea of {w} to a beginner.",
    "Give me three interesting facts related to {w}.",
    "Write a haiku about {w}.",
    "What are some synonyms and antonyms of '{w}'?",
    "Write a tweet that mentions {w}.",
    "Write a question a student might ask about {w}, and answer it.",
    "How would you explain {w} to a ten-year-old?",
    "Translate the word '{w}' into French and Spanish, with an example sentence in each.",
    "Write a short dialogue between two friends in which one of them says '{w}'.",
    "Write a short paragraph that connects {w} and {v}.",
)


def word_requests(rng: random.Random, words: list[str], n: int) -> list[str]:
    """Requests about n words of the target's own vocabulary (whole lowercase words of 6 to 12 letters): the
    widest spread of subjects this machine can draw without a corpus, so answers reach tokens no template does."""
    picked = rng.sample(words, n)
    return [rng.choice(WORD_TEMPLATES).format(w=w, v=rng.choice(words)) for w in picked]


def vocabulary_words(tokenizer_json: Path) -> list[str]:
    """The tokenizer's whole-word tokens (a leading space, then 6 to 12 lowercase letters), sorted."""
    vocab = json.loads(tokenizer_json.read_text())["model"]["vocab"]
    return sorted(w[1:] for w in vocab if re.fullmatch(r"\u0120[a-z]{6,12}", w))


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
    ap.add_argument("--model", default="smollm2", help="whose vocabulary the word requests draw from")
    ap.add_argument("--word-requests", type=int, default=2400)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    train_files, heldout_files = split(source_files())
    train = code_requests(train_files, rng, args.per_file) + chat_requests(rng)
    rng.shuffle(train)
    rows = [{"id": f"train-{i}", "prompt": p} for i, p in enumerate(train)]
    wide = wide_requests(random.Random(args.seed + 2))  # appended: the first set's ids and answers stay valid
    random.Random(args.seed + 3).shuffle(wide)
    rows += [{"id": f"wide-{i}", "prompt": p} for i, p in enumerate(wide)]
    tokenizer = Path(resolve(args.model)) / "tokenizer.json"
    if not tokenizer.is_file():
        fail(f"no tokenizer at '{tokenizer}' (run: python -m cli.get_model {args.model})")
    words = word_requests(random.Random(args.seed + 4), vocabulary_words(tokenizer), args.word_requests)
    rows += [{"id": f"words-{i}", "prompt": p} for i, p in enumerate(words)]
    chat = [json.loads(line) for line in Path("assets/prompts/chat.jsonl").read_text().splitlines() if line.strip()]
    code = [p for p in code_requests(heldout_files, random.Random(args.seed + 1), 1) if p.startswith("Write")]
    held = chat + [{"id": f"code-{i}", "prompt": p} for i, p in enumerate(code[: args.heldout_code])]
    if {r["prompt"] for r in held} & {r["prompt"] for r in rows}:
        raise SystemExit("error: a held-out request is among the training requests")
    write(Path(args.out), rows)
    write(Path(args.heldout_out), held)
    print(f"wrote {len(rows)} training requests to {args.out} and {len(held)} held-out ones to {args.heldout_out}")


if __name__ == "__main__":
    run_main(main)
