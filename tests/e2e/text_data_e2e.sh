#!/bin/bash
# Text preference data end to end (issues 17, 18): `zerofit run` on a job whose spec points `data:` at text
# JSONL files and whose model directory holds a Hugging Face tokenizer.json (character level, written here:
# the ids of every text are known). The workers tokenize the text themselves; the log shows the data report
# before training and the held-out evaluation during training (eval.every); `zerofit metrics` holds the
# eval/ values at exactly the evaluated steps; the trained reward model equals the one trained from the same
# pairs as token ids (same seed: identical checkpoints). A malformed line fails the job naming file and line.
# SFT from TRL's prompt-completion formats (text, and prompt_ids/completion_ids) trains exactly as from the
# pair file's chosen answers: three byte-identical checkpoints; its log counts examples and reports perplexity.
# And with the spec's sft.assistant_only_loss, the same examples as one-turn `messages` conversations (a chat
# template that writes the contents and ends the assistant's turn with eos_token; no EOS is appended to a
# chat rendering, as in TRL) train a fourth identical checkpoint: spec -> plan -> worker -> the assistant's
# turn cut from the rendering; a fifth comes from a model directory without that template, the spec naming it
# and the EOS (data.chat_template, data.eos_token), and its export carries both. The SFT export holds the
# tokenizer, and DPO reads text from it.
# usage: text_data_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
Z="$1"
GEN="$2"
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$GEN" --out "$D/ids" --train 200 --test 40 --ids --pad > /dev/null || fail "data"
# The model directory: the generator's config.json (vocabulary: pad 0, unk 1, <s> 2, </s> 3, then the
# pieces) with a tokenizer.json of one token per character: 0-9 are 4..13, + is 14, = is 15.
mkdir -p "$D/model"
cp "$D/ids/config.json" "$D/model/"
grep -q '"vocab_size": 16' "$D/model/config.json" || fail "the generator's vocabulary changed: $(cat "$D/model/config.json")"
tok() { printf '{"id": %d, "content": "%s", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}' "$1" "$2"; }
cat > "$D/model/tokenizer.json" <<JSON
{"version": "1.0", "added_tokens": [$(tok 0 "<pad>"), $(tok 1 "<unk>"), $(tok 2 "<s>"), $(tok 3 "</s>")],
 "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
 "model": {"type": "BPE", "unk_token": "<unk>", "merges": [],
           "vocab": {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "0": 4, "1": 5, "2": 6, "3": 7, "4": 8,
                     "5": 9, "6": 10, "7": 11, "8": 12, "9": 13, "+": 14, "=": 15}}}
JSON
echo '{"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": true,
  "chat_template": "{% for m in messages %}{{ m[\"content\"] }}{% if m[\"role\"] == \"assistant\" %}{{ eos_token }}{% endif %}{% endfor %}"}' > "$D/model/tokenizer_config.json"
# The same pairs as text and as ids (the generator's own tokenizer has multi-digit pieces: ids are written
# here from the characters, so both files hold the same tokens).
cp "$D/ids/train.jsonl" "$D/train.jsonl"
cp "$D/ids/test.jsonl" "$D/test.jsonl"
to_ids() {  # text JSONL -> ids JSONL under the character vocabulary
  awk -F'"' '
    function ids(s,   out, i, c) { out = ""; for (i = 1; i <= length(s); ++i) { c = substr(s, i, 1);
        out = out (i > 1 ? ", " : "") (c == "+" ? 14 : c == "=" ? 15 : c + 4) } return "[" out "]" }
    { printf "{\"prompt_ids\": %s, \"chosen_ids\": %s, \"rejected_ids\": %s}\n", ids($4), ids($8), ids($12) }' "$1"
}
mkdir -p "$D/asids"
to_ids "$D/train.jsonl" > "$D/asids/train_ids.jsonl"
to_ids "$D/test.jsonl" > "$D/asids/test_ids.jsonl"
cp "$D/model/config.json" "$D/asids/"

job() {  # name, data section, checkpoint dir (TASK: the task, default reward)
  cat <<YAML
name: $1
task: ${TASK:-reward}
model: $D/model
data: $2
world_size: 2
training: {steps: 12, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 2.0e-3, max_length: 24}
eval: {every: 5, max_samples: 30}
checkpoint: {dir: $3, every: 100, keep: 1}
metrics: {jsonl: $3.metrics.jsonl}
export: $3.model
YAML
}
job text "{train: $D/train.jsonl, test: $D/test.jsonl}" "$D/ck-text" > "$D/text.yaml"
job ids "$D/asids" "$D/ck-ids" > "$D/ids.yaml"
"$Z" run "$D/text.yaml" --state-dir "$D/s1" > "$D/text.log" 2>&1 || { cat "$D/text.log"; fail "text job"; }
"$Z" run "$D/ids.yaml" --state-dir "$D/s2" > "$D/ids.log" 2>&1 || { cat "$D/ids.log"; fail "ids job"; }

grep -q "data: $D/train.jsonl: 200 pairs (add_bos true, EOS appended)" "$D/text.log" \
  || fail "no data report before training: $(head -30 "$D/text.log")"
grep -q "data:   pairs with chosen == rejected" "$D/text.log" || fail "no lint in the data report"
[ "$(grep -c '| eval: held-out acc [0-9.]* loss [0-9.]* (30 pairs)' "$D/text.log")" = 3 ] \
  || fail "evaluation after steps 5, 10, 12 not in the log: $(grep -n 'eval' "$D/text.log")"
# The job's metrics (metrics.jsonl, rank 0: one object per step) carry eval/ values at exactly those steps.
steps=$(grep '"eval/accuracy": ' "$D/ck-text.metrics.jsonl" | sed 's/^{"step": \([0-9]*\),.*/\1/' | tr '\n' ' ')
[ "$steps" = "4 9 11 " ] || fail "eval/accuracy at steps '$steps', want 4 9 11 (0-based): $(head -2 "$D/ck-text.metrics.jsonl")"
grep -q '"eval/pairs": 30' "$D/ck-text.metrics.jsonl" || fail "eval/pairs is not max_samples"
same_checkpoints() {  # dir A, dir B, what: the latest checkpoints' state files are byte-identical
  cmp -s "$1/latest" "$2/latest" || fail "$3: the checkpoints are at different steps"
  local compared=0 f
  for f in $(cd "$2/$(cat "$2/latest")" && ls); do
    case "$f" in manifest*|*.json) continue ;; esac
    cmp -s "$1/$(cat "$1/latest")/$f" "$2/$(cat "$2/latest")/$f" || fail "$3: checkpoint file $f differs"
    compared=$((compared + 1))
  done
  [ "$compared" -gt 0 ] || fail "$3: no checkpoint state files compared in $2: $(ls -R "$2")"
}
same_checkpoints "$D/ck-text" "$D/ck-ids" "text and token-id data"

# The run ends by saying where its outputs are; the export is a Hugging Face model directory.
grep -q "^  model:       $D/ck-text.model  (model.safetensors + config.json" "$D/text.log" \
  || fail "no export path at the end: $(tail -6 "$D/text.log")"
grep -q "^  metrics:     $D/ck-text.metrics.jsonl" "$D/text.log" || fail "no metrics path: $(tail -6 "$D/text.log")"
grep -q "^  checkpoint:  $D/ck-text (step 11)" "$D/text.log" || fail "no checkpoint path: $(tail -6 "$D/text.log")"
[ -s "$D/ck-text.model/model.safetensors" ] && [ -s "$D/ck-text.model/config.json" ] || fail "export missing"

# A malformed line: the job fails, and the error names the file and the line.
sed '3s/.*/{"prompt": "1+1=", "chosen": 2}/' "$D/train.jsonl" > "$D/bad.jsonl"
job bad "{train: $D/bad.jsonl, test: $D/test.jsonl}" "$D/ck-bad" | sed 's/max_restarts.*//' > "$D/bad.yaml"
echo "max_restarts: 0" >> "$D/bad.yaml"
"$Z" run "$D/bad.yaml" --state-dir "$D/s3" > "$D/bad.log" 2>&1 && fail "a malformed line trained"
grep -q "$D/bad.jsonl:3: field 'chosen'" "$D/bad.log" || fail "error without file and line: $(tail -5 "$D/bad.log")"
# SFT: TRL's prompt-completion lines, as text and as ids, against the pair file's chosen answers.
awk -F'"' '{ printf "{\"prompt\": \"%s\", \"completion\": \"%s\"}\n", $4, $8 }' "$D/train.jsonl" > "$D/sft_train.jsonl"
awk -F'"' '{ printf "{\"prompt\": \"%s\", \"completion\": \"%s\"}\n", $4, $8 }' "$D/test.jsonl" > "$D/sft_test.jsonl"
for split in train test; do
  sed 's/"chosen_ids"/"completion_ids"/; s/, "rejected_ids": \[[^]]*\]//' "$D/asids/${split}_ids.jsonl" > "$D/sft_${split}_ids.jsonl"
done
grep -q rejected "$D/sft_train_ids.jsonl" "$D/sft_train.jsonl" && fail "the SFT files still hold rejected answers"
for split in train test; do
  awk -F'"' '{ printf "{\"messages\": [{\"role\": \"user\", \"content\": \"%s\"}, {\"role\": \"assistant\", \"content\": \"%s\"}]}\n", $4, $8 }' \
    "$D/$split.jsonl" > "$D/sft_${split}_turns.jsonl"
done
TASK=sft job sft-text "{train: $D/sft_train.jsonl, test: $D/sft_test.jsonl}" "$D/ck-sft-text" > "$D/sft-text.yaml"
TASK=sft job sft-ids "{train: $D/sft_train_ids.jsonl, test: $D/sft_test_ids.jsonl}" "$D/ck-sft-ids" > "$D/sft-ids.yaml"
TASK=sft job sft-pairs "{train: $D/train.jsonl, test: $D/test.jsonl}" "$D/ck-sft-pairs" > "$D/sft-pairs.yaml"
TASK=sft job sft-turns "{train: $D/sft_train_turns.jsonl, test: $D/sft_test_turns.jsonl}" "$D/ck-sft-turns" \
  > "$D/sft-turns.yaml"
echo "sft: {assistant_only_loss: true}" >> "$D/sft-turns.yaml"
for j in sft-text sft-ids sft-pairs sft-turns; do
  "$Z" run "$D/$j.yaml" --state-dir "$D/s-$j" > "$D/$j.log" 2>&1 || { cat "$D/$j.log"; fail "$j job"; }
done
grep -q "data: $D/sft_train.jsonl: 200 examples (add_bos true, EOS appended)" "$D/sft-text.log" \
  || fail "no SFT data report: $(grep 'data:' "$D/sft-text.log" | head -3)"
grep -q "data: $D/sft_train_turns.jsonl: 200 examples (add_bos true, chat template renderings, no EOS appended)" \
  "$D/sft-turns.log" || fail "no chat data report: $(grep 'data:' "$D/sft-turns.log" | head -3)"
[ "$(grep -c '| eval: held-out ppl [0-9.]*  tok-acc [0-9.]* loss [0-9.]* (30 examples)' "$D/sft-text.log")" = 3 ] \
  || fail "SFT evaluations not in the log: $(grep -n 'eval' "$D/sft-text.log")"
grep -q "done: held-out perplexity [0-9.]*, token accuracy [0-9.]* over 30 examples" "$D/sft-text.log" \
  || fail "no SFT done line"
same_checkpoints "$D/ck-sft-text" "$D/ck-sft-ids" "SFT from prompt-completion text and ids"
same_checkpoints "$D/ck-sft-text" "$D/ck-sft-pairs" "SFT from prompt-completion lines and the pairs' chosen answers"
same_checkpoints "$D/ck-sft-text" "$D/ck-sft-turns" "SFT from prompt-completion lines and assistant-only conversations"
# Without assistant_only_loss the conversation is scored whole (its prompt too): another model.
sed 's/assistant_only_loss: true/assistant_only_loss: false/; s/ck-sft-turns/ck-sft-whole/g' "$D/sft-turns.yaml" \
  > "$D/sft-whole.yaml"
"$Z" run "$D/sft-whole.yaml" --state-dir "$D/s-sft-whole" > "$D/sft-whole.log" 2>&1 || { cat "$D/sft-whole.log"; fail "sft-whole job"; }
( same_checkpoints "$D/ck-sft-text" "$D/ck-sft-whole" "" ) > /dev/null \
  && fail "scoring the whole conversation trained the assistant-only model"
# data.chat_template and data.eos_token (TRL's chat_template_path and eos_token): a model directory without a
# template and with another EOS trains the assistant-only model from the same conversations once the spec
# names the template file and the EOS (the template writes eos_token), and its export carries both.
mkdir -p "$D/model-bare"
cp "$D/model/config.json" "$D/model/tokenizer.json" "$D/model-bare/"
echo '{"bos_token": "<s>", "eos_token": "<unk>", "pad_token": "<pad>", "add_bos_token": true}' > "$D/model-bare/tokenizer_config.json"
printf '%s' '{% for m in messages %}{{ m["content"] }}{% if m["role"] == "assistant" %}{{ eos_token }}{% endif %}{% endfor %}' > "$D/turns.jinja"
sed "s|^model: .*|model: $D/model-bare|; s|^data: {\(.*\)}|data: {\1, chat_template: $D/turns.jinja, eos_token: \"</s>\"}|; s/ck-sft-turns/ck-sft-named/g" \
  "$D/sft-turns.yaml" > "$D/sft-named.yaml"
grep -q "eos_token: \"</s>\"" "$D/sft-named.yaml" || fail "sft-named.yaml: $(cat "$D/sft-named.yaml")"
"$Z" run "$D/sft-named.yaml" --state-dir "$D/s-sft-named" > "$D/sft-named.log" 2>&1 || { cat "$D/sft-named.log"; fail "sft-named job"; }
same_checkpoints "$D/ck-sft-turns" "$D/ck-sft-named" "SFT with the model's template and EOS, and with the spec's"
cmp -s "$D/turns.jinja" "$D/ck-sft-named.model/chat_template.jinja" || fail "the export lacks the spec's template"
grep -q '"eos_token": "</s>"' "$D/ck-sft-named.model/tokenizer_config.json" \
  || fail "the export's EOS is not the spec's: $(cat "$D/ck-sft-named.model/tokenizer_config.json")"
# The SFT export carries the model directory's tokenizer byte for byte, so the next stage (DPO from the SFT
# model, the usual chain) reads text with `model:` the export alone: no data.tokenizer.
for f in tokenizer.json tokenizer_config.json; do
  cmp -s "$D/model/$f" "$D/ck-sft-text.model/$f" || fail "the SFT export lacks the model's $f: $(ls "$D/ck-sft-text.model")"
done
TASK=dpo job dpo-chain "{train: $D/train.jsonl, test: $D/test.jsonl}" "$D/ck-dpo-chain" \
  | sed "s|^model: .*|model: $D/ck-sft-text.model|" > "$D/dpo-chain.yaml"
"$Z" run "$D/dpo-chain.yaml" --state-dir "$D/s-dpo-chain" > "$D/dpo-chain.log" 2>&1 \
  || { cat "$D/dpo-chain.log"; fail "DPO from the SFT export"; }
grep -q "data: $D/train.jsonl: 200 pairs (add_bos true, EOS appended)" "$D/dpo-chain.log" \
  || fail "DPO from the export did not read the text with the export's tokenizer: $(grep 'data:' "$D/dpo-chain.log" | head -3)"
cmp -s "$D/model/tokenizer.json" "$D/ck-dpo-chain.model/tokenizer.json" || fail "the DPO export lacks the tokenizer"
echo "PASS (text data tokenized by the workers == token ids; data report; eval at steps 5, 10, 12; SFT from TRL's formats == from pairs == assistant-only turns == the spec's template and EOS; SFT export -> DPO from text)"
