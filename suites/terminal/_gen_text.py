"""Generated inputs and expected answers of the files-and-text tasks (see _make.py)."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable

__all__ = ["TEXT"]

VOCAB = ["river", "stone", "lantern", "harbor", "quiet", "amber", "signal", "orchard", "meadow", "copper", "whistle",
         "tide", "ember", "falcon", "willow", "granite", "beacon", "thistle", "cedar", "compass", "marble", "hollow",
         "summit", "drift", "ferry", "glacier"]
STOP = ["the", "and", "of", "a", "to", "in", "was", "it", "he", "she", "that", "with"]


def _json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def unique_words() -> dict[str, str]:
    rng = random.Random(301)
    lines = []
    for _ in range(700):
        word = rng.choice(VOCAB + [f"{w}s" for w in VOCAB[:8]] + ["Zebra", "apple", "Apple", "éclair", "éCLAIR"])
        word = rng.choice([word, word.upper(), word.capitalize()]) if word.isascii() else word
        lines.append(rng.choice(["", " ", "\t"]) + word + rng.choice(["", "", "  "]))
        if rng.random() < 0.05:
            lines.append(rng.choice(["", "   "]))
    uniq = sorted({line.strip().lower() for line in lines if line.strip()}, key=lambda w: w.encode())
    return {"environment/words.txt": "\n".join(lines) + "\n", "tests/expected.json": _json({"lines": uniq})}


def find_large_files() -> dict[str, str]:
    rng = random.Random(302)
    files, large = {}, []
    dirs = ["", "src/", "src/lib/", "assets/", "assets/fonts/", ".cache/", "out/.cache/", "docs/old/"]
    for i in range(50):
        d = rng.choice(dirs)
        size = rng.choice([rng.randint(10, 3000), rng.randint(4000, 4200), rng.randint(5000, 12000)])
        if i in (3, 4):
            size = 4096 + (i == 4)  # 4096 is not larger than 4096; 4097 is
        name = f"{d}file{i:02d}.{rng.choice(['txt', 'log', 'dat', 'md'])}"
        body = "".join(rng.choice("abcdefghij ") for _ in range(size - 1)) + "\n"
        files[f"environment/tree/{name}"] = body
        if size > 4096 and ".cache/" not in f"/{d}":
            large.append(name)
    large.append("spaced dir/big report.txt")
    files["environment/tree/spaced dir/big report.txt"] = "x" * 6000 + "\n"
    return {**files, "tests/expected.json": _json({"lines": sorted(large, key=lambda p: p.encode())})}


def normalize_line_endings() -> dict[str, str]:
    rng = random.Random(303)
    files, expected = {}, {}
    for i in range(12):
        rel = f"{rng.choice(['', 'guide/', 'notes/2024/'])}doc{i:02d}.txt"
        body = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 9))) for _ in range(rng.randint(3, 20))]
        clean = "\n".join(b.rstrip() for b in body).rstrip("\n") + "\n"
        messy_lines = [b + rng.choice(["", "", " ", "\t", "  \t "]) for b in body]
        sep = "\r\n" if i % 3 else "\n"
        messy = sep.join(messy_lines) + ("" if i % 4 == 1 else sep)
        files[f"environment/docs/{rel}"] = messy
        expected[rel] = _sha(clean)
    # raw/ must stay byte for byte as it is (CRLF and trailing spaces included)
    raw = {"raw/fixture.txt": "keep  \r\nme\t\r\n", "raw/nested/sample.txt": "as is \r\n"}
    for rel, text in raw.items():
        files[f"environment/docs/{rel}"] = text
        expected[rel] = _sha(text)
    return {**files, "tests/expected.json": _json({"sha256": expected})}


def organize_photos() -> dict[str, str]:
    rng = random.Random(304)
    files, expected = {}, {}
    for i in range(30):
        y, m, d = rng.choice([2022, 2023, 2024]), rng.randint(1, 12), rng.randint(1, 28)
        hms = f"{rng.randint(0, 23):02d}{rng.randint(0, 59):02d}{rng.randint(0, 59):02d}"
        content = f"fake jpeg #{i} taken {y}-{m:02d}-{d:02d} {hms}\n"
        files[f"environment/incoming/IMG_{y}{m:02d}{d:02d}_{hms}.jpg"] = content
        expected[f"{y}/{m:02d}/{d:02d}_{hms}.jpg"] = _sha(content)
    keep = {"notes.txt": "not a photo\n", "IMG_README.md": "naming rules for the camera\n",
            "IMG_2023_bad.jpg": "a name that does not match\n"}
    for name, text in keep.items():
        files[f"environment/incoming/{name}"] = text
    return {**files, "tests/expected.json": _json({"moved": expected, "kept": sorted(keep)})}


def word_frequency() -> dict[str, str]:
    rng = random.Random(305)
    weights = {w: 1 + (i * 37) % 23 for i, w in enumerate(VOCAB)}
    out_lines = []
    for _ in range(220):
        words = []
        for _ in range(rng.randint(4, 14)):
            w = rng.choice(STOP) if rng.random() < 0.4 else rng.choices(list(weights), list(weights.values()))[0]
            words.append(rng.choice([w, w.capitalize(), w.upper()]) + rng.choice(["", "", ",", ".", ";", "'s"]))
        out_lines.append(" ".join(words))
    text = "\n".join(out_lines) + "\n"
    counts = Counter(w for w in re.findall(r"[a-z]+", text.lower()) if w not in STOP)
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    return {"environment/book.txt": text, "environment/stopwords.txt": "\n".join(STOP) + "\n",
            "tests/expected.json": _json({"lines": [f"{c} {w}" for w, c in top]})}


def render_template() -> dict[str, str]:
    values = {"APP_NAME": "Tide & Stone", "DB_URL": "postgres://app:p@ss/w0rd@db:5432/main",
              "GREETING": "Hello, \"friend\" \\o/", "PRICE": "$5 & up", "REGEX": "^a.*[b|c]+$",
              "EMPTY": "", "PATH_HINT": "C:\\tools\\bin;/usr/bin"}
    env = ["# variables for the release notes", ""] + [f"{k}={v}" for k, v in values.items()] + ["# end"]
    template = ("Welcome to {{APP_NAME}}!\n{{GREETING}}\n\nConnection: {{DB_URL}}\nPricing: {{PRICE}} "
                "(was {{PRICE}})\nPattern: {{REGEX}}\nEmpty: [{{EMPTY}}]\nHint: {{PATH_HINT}}\n"
                "Unknown: {{NOT_DEFINED}} and { {APP_NAME} } stay as they are.\n")
    rendered = re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: values.get(m[1], m[0]), template)
    return {"environment/template.txt": template, "environment/vars.env": "\n".join(env) + "\n",
            "tests/expected.json": _json({"sha256": _sha(rendered), "text": rendered})}


def collect_todos() -> dict[str, str]:
    rng = random.Random(307)
    files, rows = {}, []
    owners = ["ana", "bo", "chen", "dee"]
    for rel, mark in [("main.py", "#"), ("util/strings.py", "#"), ("net/client.c", "//"), ("net/server.c", "//"),
                      ("scripts/deploy.sh", "#"), ("README.txt", None)]:
        lines = []
        for n in range(1, rng.randint(25, 60)):
            if mark and rng.random() < 0.12:
                owner, task = rng.choice(owners), " ".join(rng.choice(VOCAB) for _ in range(rng.randint(2, 6)))
                code = rng.choice(["", "x = 1  ", "return y;  "])
                lines.append(f"{code}{mark} TODO({owner}): {task}  ")
                rows.append(f"{rel}\t{n}\t{owner}\t{task}")
            elif mark and rng.random() < 0.05:
                lines.append(f"{mark} TODO: no owner here, not collected")
            else:
                lines.append(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 6))))
        if mark is None:
            lines.append("Write TODO(owner): text in code comments; this file is prose, not code.")
        files[f"environment/src/{rel}"] = "\n".join(lines) + "\n"
    rows.sort(key=lambda r: (r.split("\t")[0].encode(), int(r.split("\t")[1])))
    return {**files, "tests/expected.json": _json({"lines": rows})}


def _roman(n: int) -> str:
    out = ""
    for value, sym in [(10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]:
        while n >= value:
            out, n = out + sym, n - value
    return out


def split_chapters() -> dict[str, str]:
    rng = random.Random(308)
    lines = ["THE LANTERN KEEPER", "", "A novel", "", "PREFACE", "", "Written for the ferry crews.", ""]
    chapters = {}
    for c in range(1, 15):
        body = []
        for _ in range(rng.randint(3, 8)):
            body.append(" ".join(rng.choice(VOCAB) for _ in range(rng.randint(5, 12))).capitalize() + ".")
            if rng.random() < 0.4:
                body.append("")
        if rng.random() < 0.3:
            body.append("He read CHAPTER V of the logbook again.")  # not a heading: not alone on its line
        lines += [f"CHAPTER {_roman(c)}", *([""] * rng.randint(0, 2)), *body, *([""] * rng.randint(1, 3))]
        while body and body[-1] == "":
            body.pop()
        chapters[f"chapter-{c:02d}.txt"] = _sha("\n".join(body) + "\n")
    return {"environment/novel.txt": "\n".join(lines) + "\n", "tests/expected.json": _json({"sha256": chapters})}


TEXT: dict[str, Callable[[], dict[str, str]]] = {
    "unique-words": unique_words, "find-large-files": find_large_files,
    "normalize-line-endings": normalize_line_endings, "organize-photos": organize_photos,
    "word-frequency": word_frequency, "render-template": render_template, "collect-todos": collect_todos,
    "split-chapters": split_chapters,
}
