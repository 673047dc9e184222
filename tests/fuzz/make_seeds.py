#!/usr/bin/env python3
"""Writes the fuzz seed corpora under tests/fuzz/corpus/ (deterministic, offline).

tokenizer/: each shared Hugging Face tokenizer (../shared/hf-tokenizers) shrunk to its first 300 vocabulary
  entries and the merges among them, keeping its normalizer, pre-tokenizer, post-processor, decoder and added
  tokens; then a NUL byte and a text to encode. Plus hand-written files for byte fallback and Split.
chat_template/: the templates of tests/text/golden/chat_synthetic.jsonl and the real models' templates.
preference_jsonl/: small files of each line kind, blank lines and errors.
usage: make_seeds.py [HF_TOKENIZERS_DIR]"""
import json, pathlib, sys

here = pathlib.Path(__file__).resolve().parent
root = here.parents[1]
hf = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root.parent / "shared" / "hf-tokenizers"
out = here / "corpus"
TEXT = "Hello wörld, it's 2024! 中文 😀 <s>ab  \n\tend"


def write(kind, name, data):
    d = out / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def shrink(tok):
    model = dict(tok["model"])
    vocab = {k: v for k, v in model["vocab"].items() if v < 300}
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model["vocab"], model["merges"] = vocab, merges[:200]
    tok = dict(tok)
    tok["model"] = model
    tok["added_tokens"] = tok.get("added_tokens", [])[:8]
    return tok


for name in ("qwen2.5", "mistral-v0.3", "tinyllama", "gpt2", "smollm2"):
    path = hf / name / "tokenizer.json"
    if not path.exists():
        continue
    small = json.dumps(shrink(json.loads(path.read_text(encoding="utf-8"))), ensure_ascii=False)
    write("tokenizer", f"{name}.bin", small + "\0" + TEXT)

BASE = {"type": "BPE", "unk_token": "<unk>", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "bc": 5,
        "<unk>": 6, "<0x78>": 7, "_": 8}, "merges": [["b", "c"], ["a", "b"], ["ab", "c"]]}
def small_file(model_extra, pre=None, added=None, normalizer=None, decoder=None):
    return json.dumps({"added_tokens": added or [], "normalizer": normalizer, "pre_tokenizer": pre,
                       "post_processor": None, "decoder": decoder, "model": {**BASE, **model_extra}})
write("tokenizer", "byte_fallback.bin", small_file({"byte_fallback": True, "fuse_unk": True},
      decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}) + "\0abcxzx_")
write("tokenizer", "split.bin", small_file({}, pre={"type": "Split", "pattern": {"Regex": "_+|\\p{L}+"},
      "behavior": "Isolated", "invert": False}) + "\0ab_c__abc")
write("tokenizer", "added.bin", small_file({"ignore_merges": True}, added=[{"id": 9, "content": "<s>",
      "single_word": False, "lstrip": True, "rstrip": False, "normalized": False, "special": True}],
      normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace",
      "pattern": {"String": " "}, "content": "_"}]}) + "\0a <s> bc")

golden = root / "tests/text/golden/chat_synthetic.jsonl"
for i, line in enumerate(golden.read_text(encoding="utf-8").splitlines()):
    row = json.loads(line)
    write("chat_template", f"synthetic_{i:03d}_{row['case']}.jinja", row["template"])
for name in ("qwen2.5", "mistral-v0.3", "tinyllama", "smollm2"):
    path = hf / name / "tokenizer_config.json"
    if not path.exists():
        continue
    t = json.loads(path.read_text(encoding="utf-8")).get("chat_template")
    for k, entry in enumerate(t if isinstance(t, list) else [{"template": t}]):
        write("chat_template", f"{name}_{k}.jinja", entry["template"])

U = {"role": "user", "content": "2+2?"}
A = {"role": "assistant", "content": "4"}
B = {"role": "assistant", "content": "5"}
lines = {
    "text.jsonl": [{"prompt": "12+7=", "chosen": "19", "rejected": "18"}, {"prompt": "", "chosen": "é", "rejected": "😀"}],
    "ids.jsonl": [{"prompt_ids": [5, 9], "chosen_ids": [4, 10], "rejected_ids": [4, 12]}],
    "chat.jsonl": [{"prompt": [U], "chosen": [A], "rejected": [B]}, {"chosen": [U, A], "rejected": [U, B]}],
}
for name, objs in lines.items():
    write("preference_jsonl", name, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))
write("preference_jsonl", "mixed_errors.jsonl", "\n".join([
    json.dumps({"prompt": "a" * 100, "chosen": "b" * 70, "rejected": "c"}), "", "  \t",
    json.dumps({"prompt_ids": [1, 300], "chosen_ids": [-1], "rejected_ids": [4.5]}),
    json.dumps({"chosen": [U], "rejected": [U]}), "[1, 2]", '{"prompt": "cut']))
