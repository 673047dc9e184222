#!/usr/bin/env python3
"""Writes the tokenizer benchmark text (deterministic, offline): the repository's prose and code (Markdown,
C++, Python, shell, YAML) as of a pinned commit (so the text does not change as the repo grows), twice, plus
the multilingual / emoji / digit lines of tests/text/corpus.jsonl repeated to about 10% of the bytes,
shuffled line by line with a fixed seed.
usage: make_tokenizer_bench_text.py OUT [MEGABYTES=3]"""
import json, pathlib, random, subprocess, sys

root = pathlib.Path(__file__).resolve().parents[1]
out, megabytes = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
PINNED = "6575fc8"  # the commit before text/ existed
def git(*args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, check=True).stdout
files = git("ls-tree", "-r", "--name-only", PINNED).decode().split()
lines = []
for name in files:
    if name.endswith((".md", ".cc", ".h", ".py", ".sh", ".yaml")):
        lines += git("show", f"{PINNED}:{name}").decode("utf-8", errors="replace").splitlines()
corpus = [json.loads(l)["text"] for l in (root / "tests/text/corpus.jsonl").read_text(encoding="utf-8").split("\n") if l]
special = [t for t in corpus[:100] if t.strip()]
target = int(megabytes * 1e6)
mixed = lines * 2
extra = 0
while extra < target // 10:
    for t in special:
        mixed.append(t.replace("\n", " "))
        extra += len(t.encode())
random.Random(20261123).shuffle(mixed)
text, size = [], 0
for line in mixed:
    if size >= target:
        break
    text.append(line)
    size += len(line.encode()) + 1
pathlib.Path(out).write_text("\n".join(text) + "\n", encoding="utf-8")
print(f"bench text: {size / 1e6:.2f} MB, {len(text)} lines -> {out}")
