#!/usr/bin/env python3
"""Writes the tokenizer benchmark text (deterministic, offline): the repository's own tracked prose and code
(Markdown, C++, Python, shell, YAML) twice, plus the multilingual / emoji / digit lines of
tests/text/corpus.jsonl repeated to about 10% of the bytes, shuffled line by line with a fixed seed.
usage: make_tokenizer_bench_text.py OUT [MEGABYTES=3]"""
import json, pathlib, random, subprocess, sys

root = pathlib.Path(__file__).resolve().parents[1]
out, megabytes = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
files = subprocess.run(["git", "ls-files", "*.md", "*.cc", "*.h", "*.py", "*.sh", "*.yaml"], cwd=root,
                       capture_output=True, text=True, check=True).stdout.split()
lines = []
for name in files:
    lines += (root / name).read_text(encoding="utf-8", errors="replace").splitlines()
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
