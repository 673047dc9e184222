#!/usr/bin/env python3
"""Writes tests/text/corpus.jsonl: hand-written edge cases plus realistic lines (the repo's own prose and
code). Deterministic; run from anywhere. Each output line is {"text": ...}."""
import json, os, pathlib, unicodedata

root = pathlib.Path(__file__).resolve().parents[3]
cases = [
    "", "a", " ", "  ", "\n", "\t", "7", "é", "中", "😀", "\u00a0", "<s>", "</s>",
    "Hello world", "Hello, world! How's it going? I'm fine; they've gone, we'll see, he'd say.",
    "HELLO'S THEY'RE I'M", "don't can't won't",
    "1234567890", "3.14159265358979323846264338327950288419716939937510", "Price: $1,234,567.89 (+12.5%)",
    "٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits", "０１２３４５６７８９ fullwidth digits", "² ½ ③ Ⅳ superscripts and fractions",
    "०१२३ देवनागरी अंक", "year 2026, phone 555-0199, id 000123",
    "a  b   c    d     e", "   leading and trailing   ", "line1\nline2\n\nline4\n\n\n",
    "line one\r\nline two\r\n\r\nline four", "tabs\tbetween\t\twords", "\t\t\tindented",
    "def f(x):\n\tif x > 0:\n\t\treturn x * 2\n\treturn -x\n",
    "for (int i = 0; i < n; ++i) {\n    sum += a[i];  // accumulate\n}\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }",
    "我爱自然语言处理。今天天气很好！", "日本語のテキストです。カタカナとひらがな。", "한국어 문장입니다.",
    "नमस्ते दुनिया, यह एक परीक्षण है।", "தமிழ் ஒரு செம்மொழி ஆகும்.", "مرحبا بالعالم، هذا اختبار.",
    "שלום עולם", "Привет, мир! Съешь же ещё этих мягких французских булок.", "Γειά σου Κόσμε",
    "emoji 😀😃😄 👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷", "👨🏿‍💻 coding", "family: 👨‍👩‍👧",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9", "cafe\u0301 nai\u0308ve re\u0301sume\u0301",
    unicodedata.normalize("NFD", "Ångström Éclair Ñandú"), "Å vs A\u030a vs \u212b",
    "non\u00a0breaking\u00a0space", "thin\u2009space", "ideographic\u3000space", "em\u2003space en\u2002space",
    "zero\u200bwidth", "next\u0085line", "line\u2028sep para\u2029sep", "vertical\x0btab form\x0cfeed",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "text<|endoftext|>more",
    "<s>[INST] What is 2+2? [/INST] 4</s>", "</s><s>", "< s>", "<s >", "<unk>", "[INST]", "[/INST]",
    "<|user|>\nhi</s>\n<|assistant|>\n", "x<s>y</s>z", " <s> ", "<|im_start|><|im_start|>",
    "<0x41>", "▁already▁metaspace▁", "ĠĊ byte-level glyphs ġ",
    "https://example.com/path?query=1&b=2#frag", "user@example.org", "C:\\Users\\name\\file.txt",
    "!!!???...,,,;;;", "---===+++***", "'''\"\"\"```", "A.B.C. U.S.A. e.g. i.e.",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ab" * 60,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Mixed 中文 and English with 123 numbers and émojis 🎉 together.",
    "\ud7ff\ue000\uffff edge code points", "\U0001F9D1\u200d\U0001F91D\u200d\U0001F9D1",
    "ﬁ ﬂ ligatures ①②③ ＡＢＣ", "ℌ𝔢𝔩𝔩𝔬 math letters 𝟏𝟐𝟑",
]
lines = []
for name in ["README.md", "BENCHMARKS.md"] + sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md")):
    for line in (root / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and len(line) < 600:
            lines.append(line)
for name in ["core/thread_pool.h", "core/lr_schedule.cc"]:
    text = (root / name).read_text(encoding="utf-8")
    lines += [text[i:i + 400] for i in range(0, min(len(text), 2400), 400)]
seen, out = set(), []
for t in cases + lines[:320]:
    if t not in seen:
        seen.add(t)
        out.append(t)
with open(root / "tests/text/corpus.jsonl", "w", encoding="utf-8") as f:
    for t in out:
        f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print(f"corpus: {len(out)} strings")
