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
    "sft.jsonl": [{"text": "The cat sat."}, {"prompt": "12+7=", "completion": "19"}, {"messages": [U, A]},
                  {"prompt": [U], "completion": [A]}, {"prompt_ids": [5, 9], "completion_ids": [4, 10]},
                  {"completion_ids": [7]}],
}
for name, objs in lines.items():
    write("preference_jsonl", name, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs))
write("preference_jsonl", "mixed_errors.jsonl", "\n".join([
    json.dumps({"prompt": "a" * 100, "chosen": "b" * 70, "rejected": "c"}), "", "  \t",
    json.dumps({"prompt_ids": [1, 300], "chosen_ids": [-1], "rejected_ids": [4.5]}),
    json.dumps({"chosen": [U], "rejected": [U]}), "[1, 2]", '{"prompt": "cut']))

# Issue 19: the job spec, DeepSpeed JSON, config.json, safetensors files and checkpoint manifests.
for spec in sorted((root / "examples" / "jobs").glob("*.yaml")):
    write("job_spec", spec.name, spec.read_bytes())
# The objectives' sections (jobspec/objective_spec.h).
write("job_spec", "sft_section.yaml",
      "task: sft\nmodel: m\ndata: {train: t.jsonl, test: v.jsonl}\nsft: {completion_only_loss: false, assistant_only_loss: true}\n")
write("job_spec", "reward_section.yaml",
      "task: reward\nmodel: m\ndata: d\nreward: {center_rewards_coefficient: 0.01}\n")
write("job_spec", "grpo_rloo.yaml",
      "task: grpo\nmodel: m\ndata: d\ngrpo: {loss_type: rloo, beta: 0.05, normalize_advantages: true, "
      "reward_clip_range: [-1, 2]}\n"
      "rewards: [{type: answer}]\n")
write("job_spec", "optim_8bit.yaml",
      "task: reward\nmodel: m\ndata: d\ntraining: {optim: adamw_bnb_8bit, min_8bit_size: 1024, steps: 5}\n")
write("job_spec", "optim_8bit_offload.yaml",
      "task: dpo\nmodel: m\ndata: d\ntraining: {optim: adamw_8bit, offload: true, delayed_update_from: 10, "
      "steps: 20}\n")
write("job_spec", "dpo_objectives.yaml",
      "task: dpo\nmodel: /models/qwen2.5-0.5b\ndata: /data/prefs\ntraining: {steps: 10, global_batch: 8}\n"
      "dpo: {beta: 0.1, loss_type: discopop, discopop_tau: 0.1, rpo_alpha: 1.0, reference_free: true}\n")
write("job_spec", "full.yaml", """name: rm
task: reward
model: /models/m
data: {train: t.jsonl, test: v.jsonl, tokenizer: /tok, max_prompt_length: 64, add_bos: auto}
eval: {every: 50, max_samples: 512}
world_size: 2
training:
  steps: 100
  global_batch: 8
  micro_batch: 2
  gradient_accumulation: 2
  lr: 1.0e-5
  lr_schedule: cosine
  warmup_steps: 10
  min_lr: 1.0e-6
  weight_decay: 0.01
  max_grad_norm: 1.0
  zero_stage: 2
  offload: false
  bf16: true
  max_length: 1024
checkpoint: {dir: /ckpt, every: 10, keep: 2}
metrics: {tensorboard: tb, jsonl: m.jsonl}
slurm: {nodes: 1, gpus_per_node: 2, extra: [--exclusive]}
""")
write("job_spec", "complex_key.yaml", "task: sft\nmodel: m\ndata: d\n? {a: 1}\n: x\n")
write("job_spec", "nan.yaml", "task: sft\nmodel: m\ndata: d\ntraining: {weight_decay: .nan, max_grad_norm: -.inf}\n")
write("job_spec", "deepspeed.yaml", "task: dpo\nmodel: m\ndata: d\ndeepspeed: ds.json\ntraining: {steps: 5}\n")
write("job_spec", "watchdog.yaml",
      "task: reward\nmodel: /m\ndata: /d\nworld_size: 2\nwatchdog: {step_time_factor: 2.5, floor_s: 30}\n")
write("job_spec", "watchdog_off.yaml", "task: reward\nmodel: /m\ndata: /d\nwatchdog: off\n")

DS = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 32,
      "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True},
      "gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "weight_decay": 0.01}},
      "activation_checkpointing": {}}
write("deepspeed", "full.json", json.dumps(DS, indent=1))
for kind, params in (("WarmupLR", {"warmup_min_lr": 0, "warmup_max_lr": 1e-4, "warmup_num_steps": 10,
                                    "warmup_type": "linear"}),
                     ("WarmupDecayLR", {"warmup_min_lr": 0, "warmup_max_lr": 1e-4, "warmup_num_steps": 10,
                                         "total_num_steps": 100, "warmup_type": "linear"}),
                     ("WarmupCosineLR", {"warmup_min_ratio": 0, "cos_min_ratio": 0.1, "warmup_num_steps": 10,
                                          "total_num_steps": 100, "warmup_type": "linear"})):
    write("deepspeed", f"{kind}.json", json.dumps({**DS, "scheduler": {"type": kind, "params": params}}))
write("deepspeed", "wrap.json", json.dumps({"train_micro_batch_size_per_gpu": 4611686018427387904,
                                            "gradient_accumulation_steps": 4}))

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 100, "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "bos_token_id": 1,
         "eos_token_id": [2, 3], "pad_token_id": 0, "tie_word_embeddings": False, "initializer_range": 0.02,
         "torch_dtype": "bfloat16", "use_cache": True,
         "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 128}}
write("hf_config", "llama.json", json.dumps(LLAMA, indent=2))
write("hf_config", "mistral.json", json.dumps({**LLAMA, "architectures": ["MistralForCausalLM"],
                                               "model_type": "mistral", "sliding_window": 128,
                                               "rope_scaling": None}))
write("hf_config", "qwen2_cls.json", json.dumps({**LLAMA, "architectures": ["Qwen2ForSequenceClassification"],
                                                 "model_type": "qwen2", "use_sliding_window": True,
                                                 "id2label": {"0": "LABEL_0"}, "rope_scaling": None}))


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    return len(h).to_bytes(8, "little") + h + data


write("safetensors", "small.safetensors", safetensors(
    [("w", "F32", [2, 2], bytes(range(16))), ("b", "BF16", [3], bytes(6)), ("e", "I64", [0], b"")],
    {"format": "pt"}))
write("safetensors", "scalar.safetensors", safetensors([("step", "I64", [], bytes(8))]))

MANIFEST = {"format": "zerofit-zero2-checkpoint", "version": 1, "step": 120, "world_size": 2,
            "loss_scaler": {"scale": 65536.0, "good_steps": 3, "skipped": 0},
            "params": [{"name": "w", "numel": 6}],
            "files": [{"file": "rank-00000.safetensors", "runs": [[0, 0, 3, 0]]},
                      {"file": "rank-00001.safetensors", "runs": [[0, 3, 3, 0]]}],
            "extra": {"job": "job-000001", "request": "req-1", "sampler": {"epoch": 0, "position": 12}}}
write("checkpoint_manifest", "manifest.json", json.dumps(MANIFEST, indent=1))
write("checkpoint_manifest", "types.json", json.dumps({**MANIFEST, "format": 1, "version": "1"}))
write("preference_jsonl", "deep.jsonl", json.dumps({"prompt": "a", "rejected": "b"})[:-1] + ', "chosen": '
      + "[" * 100 + "]" * 100 + "}\n")
