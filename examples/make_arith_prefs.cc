// zerofit_make_arith_prefs: writes a small, fully offline preference data set for trying reward-model and DPO
// training end to end on a tiny model.
//
//   zerofit_make_arith_prefs --out DIR [--train N] [--test N] [--seed S] [--max-operand K] [--ids]
//                            [--pad] [--rejections R] [--wrong mixed|near] [--vocab-size V]
//                            [--model-type bpe|unigram]
//
// The task is addition: prompt "12+7=", chosen "19", rejected a plausible wrong answer: with --wrong mixed
// (the default) off by one, two adjacent digits swapped, or one digit off by one; with --wrong near off by
// 1 to 9, so the units digit is always wrong (the check a reward model that reads one token learns first;
// see BENCHMARKS.md). Into DIR it writes
//   train.jsonl, test.jsonl   {"prompt", "chosen", "rejected"} text pairs; no test problem appears in train
//                             (a+b and b+a count as the same problem)
//   train_ids.jsonl, test_ids.jsonl   with --ids: the same pairs as {"prompt_ids", "chosen_ids",
//                             "rejected_ids"}, tokenized with tokenizer.model, no BOS/EOS
//   train_prompts.jsonl, test_prompts.jsonl   GRPO prompts, one per problem: {"prompt", "answer"}; with --ids
//                             also *_prompts_ids.jsonl: {"prompt_ids", "answer", "answer_ids"}
//   corpus.txt                the correct equations of train ("12+7=19"), one per line
//   tokenizer.model           SentencePiece trained on corpus.txt (digits split individually)
//   config.json               a tiny Llama-style Hugging Face config sized to the tokenizer
// Everything is a pure function of the flags: the same seed gives byte-identical files on every platform.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/data/sentencepiece_tokenizer.h"
#include "worker/data/tokenizer_trainer.h"
#include "worker/data/uniform_below.h"

namespace zerofit::examples {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxOperandLimit = 999999;  // keeps every sequence far below max_position_embeddings
constexpr int64_t kMaxPositions = 64;

struct Flags {
  std::string out;
  uint64_t train = 2000;
  uint64_t test = 200;
  uint64_t seed = 1;
  uint64_t max_operand = 99;
  bool ids = false;
  bool pad = false;  // --pad: zero-pad operands and answers to fixed widths ("07+18=025")
  // --rejections R: up to R distinct wrong answers per problem, each its own pair with the same chosen answer
  // (InstructGPT-style: several ranked responses per prompt give a reward model more comparisons than
  // prompts). N counts problems, so train.jsonl holds up to N x R pairs.
  uint64_t rejections = 1;
  bool near = false;  // --wrong near: wrong answers off by 1..9 (instead of the mixed kinds)
  int32_t vocab_size = 64;
  std::string model_type = "bpe";
  bool help = false;  // --help: print kUsage and exit 0
};

constexpr const char* kUsage =
    "usage: zerofit_make_arith_prefs --out DIR [--train N (2000)] [--test N (200)] [--seed S (1)]\n"
    "                                [--max-operand K (99)] [--ids] [--pad] [--rejections R (1)]\n"
    "                                [--wrong mixed|near (mixed)] [--vocab-size V (64)]\n"
    "                                [--model-type bpe|unigram (bpe)]\n"
    "Writes train.jsonl, test.jsonl, corpus.txt, tokenizer.model and config.json into DIR: addition\n"
    "problems a+b= with operands in [0, K], chosen = the sum, rejected = a plausible wrong sum.\n"
    "--ids also writes train_ids.jsonl and test_ids.jsonl (pre-tokenized, no BOS/EOS).\n"
    "--pad zero-pads operands and answers to fixed widths (07+18=025): aligned digit columns make the task\n"
    "learnable by a tiny model in minutes.\n"
    "--rejections R writes up to R pairs per problem, one per distinct wrong answer (N counts problems).\n"
    "--wrong mixed: off by one, two adjacent digits swapped or one digit off by one; near: off by 1 to 9\n"
    "(the units digit is always wrong).\n"
    "--vocab-size is an upper bound: the tokenizer keeps what the corpus supports (digits are split, so\n"
    "the alphabet 0-9 + = and the special pieces).\n";

absl::StatusOr<uint64_t> ParseCount(const std::string& flag, const std::string& value) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " expects a non-negative integer, got '", value, "'"));
  }
  return v;
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "--ids") {
      if (has_value) return absl::InvalidArgumentError("--ids takes no value");
      f.ids = true;
      continue;
    }
    if (arg == "--pad") {
      if (has_value) return absl::InvalidArgumentError("--pad takes no value");
      f.pad = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      f.help = true;
      return f;
    }
    const bool known = arg == "--out" || arg == "--train" || arg == "--test" || arg == "--seed" ||
                       arg == "--max-operand" || arg == "--vocab-size" || arg == "--model-type" ||
                       arg == "--rejections" || arg == "--wrong";
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown flag '", argv[i], "'"));
    if (!has_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      value = argv[++i];
    }
    if (arg == "--out") {
      f.out = value;
    } else if (arg == "--model-type") {
      f.model_type = value;
    } else if (arg == "--wrong") {
      if (value != "mixed" && value != "near") {
        return absl::InvalidArgumentError(absl::StrCat("--wrong must be mixed or near, got '", value, "'"));
      }
      f.near = value == "near";
    } else {
      ZF_ASSIGN_OR_RETURN(const uint64_t v, ParseCount(arg, value));
      if (arg == "--train") f.train = v;
      if (arg == "--test") f.test = v;
      if (arg == "--seed") f.seed = v;
      if (arg == "--max-operand") f.max_operand = v;
      if (arg == "--rejections") f.rejections = v;
      if (arg == "--vocab-size") f.vocab_size = static_cast<int32_t>(std::min<uint64_t>(v, 1u << 20));
    }
  }
  if (f.out.empty()) return absl::InvalidArgumentError("--out DIR is required");
  if (f.train == 0) return absl::InvalidArgumentError("--train must be at least 1");
  if (f.rejections == 0 || f.rejections > 16) {
    return absl::InvalidArgumentError(absl::StrCat("--rejections must lie in [1, 16], got ", f.rejections));
  }
  if (f.max_operand > kMaxOperandLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-operand ", f.max_operand, " is too large (at most ", kMaxOperandLimit, ")"));
  }
  if (f.model_type != "bpe" && f.model_type != "unigram") {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-type must be bpe or unigram, got '", f.model_type, "'"));
  }
  return f;
}

struct Problem {
  uint64_t a = 0;
  uint64_t b = 0;
};

struct TextPair {
  std::string prompt, chosen, rejected;
};

// `needed` distinct unordered problems {a, b} with a, b in [0, k], each in a random order a+b or b+a.
absl::StatusOr<std::vector<Problem>> DrawProblems(uint64_t needed, uint64_t k, std::mt19937_64& gen) {
  const uint64_t total = (k + 1) * (k + 2) / 2;
  if (needed > total) {
    return absl::InvalidArgumentError(absl::StrCat("--train + --test = ", needed, " but operands in [0, ", k,
                                                   "] give only ", total,
                                                   " distinct problems (a+b and b+a count once): raise "
                                                   "--max-operand or ask for fewer pairs"));
  }
  std::vector<Problem> out;
  out.reserve(needed);
  if (total <= (uint64_t{1} << 20)) {
    // Small space: a partial Fisher-Yates over every problem, so even needed == total terminates fast.
    std::vector<Problem> all;
    all.reserve(total);
    for (uint64_t a = 0; a <= k; ++a) {
      for (uint64_t b = a; b <= k; ++b) all.push_back({a, b});
    }
    for (uint64_t i = 0; i < needed; ++i) {
      const uint64_t j = i + data::UniformBelow(gen, total - i);
      std::swap(all[i], all[j]);
      out.push_back(all[i]);
    }
  } else {
    std::unordered_set<uint64_t> seen;
    while (out.size() < needed) {
      uint64_t a = data::UniformBelow(gen, k + 1);
      uint64_t b = data::UniformBelow(gen, k + 1);
      if (a > b) std::swap(a, b);
      if (seen.insert(a * (k + 1) + b).second) out.push_back({a, b});
    }
  }
  for (Problem& p : out) {
    if (data::UniformBelow(gen, 2) == 1) std::swap(p.a, p.b);
  }
  return out;
}

// A plausible wrong sum, never equal to `c` and never with a leading zero.
std::string WrongAnswer(uint64_t c, std::mt19937_64& gen) {
  const std::string s = std::to_string(c);
  const uint64_t kind = data::UniformBelow(gen, 3);
  if (kind == 1) {  // swap two adjacent, different digits
    std::vector<size_t> spots;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      if (s[i] != s[i + 1] && !(i == 0 && s[i + 1] == '0')) spots.push_back(i);
    }
    if (!spots.empty()) {
      std::string w = s;
      const size_t i = spots[data::UniformBelow(gen, spots.size())];
      std::swap(w[i], w[i + 1]);
      return w;
    }
  }
  if (kind == 2 && s.size() > 1) {  // one digit off by one
    std::string w = s;
    const size_t i = data::UniformBelow(gen, s.size());
    const bool can_down = w[i] > '0' && !(i == 0 && w[i] == '1');
    const bool down = w[i] == '9' || (can_down && data::UniformBelow(gen, 2) == 1);
    w[i] = static_cast<char>(down ? w[i] - 1 : w[i] + 1);
    return w;
  }
  // Off by one (also the fallback when the kind above does not apply).
  if (c == 0 || data::UniformBelow(gen, 2) == 1) return std::to_string(c + 1);
  return std::to_string(c - 1);
}

// --wrong near: c + k or c - k for k in 1..9 (never negative, never longer than `max_digits`): an answer off
// by a few, whose units digit is always wrong.
std::string NearAnswer(uint64_t c, size_t max_digits, std::mt19937_64& gen) {
  uint64_t limit = 1;
  for (size_t i = 0; i < max_digits; ++i) limit *= 10;
  for (;;) {
    const uint64_t k = 1 + data::UniformBelow(gen, 9);
    const bool up = data::UniformBelow(gen, 2) == 1;
    if (up && c + k < limit) return std::to_string(c + k);
    if (!up && c >= k) return std::to_string(c - k);
  }
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  out << contents;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed (disk full?)"));
  return absl::OkStatus();
}

std::string TextJsonl(const std::vector<TextPair>& pairs) {
  std::string s;
  for (const TextPair& p : pairs) {
    Json j;
    j["prompt"] = p.prompt;
    j["chosen"] = p.chosen;
    j["rejected"] = p.rejected;
    absl::StrAppend(&s, j.dump(), "\n");
  }
  return s;
}

// Encodes with `tok`, refusing any piece the tokenizer does not know (unk): the data must be exact.
absl::StatusOr<std::vector<int32_t>> EncodeExact(const data::SentencePieceTokenizer& tok,
                                                 const std::string& text) {
  ZF_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode(text));
  for (int32_t id : ids) {
    if (id == tok.unk_id()) {
      return absl::InternalError(absl::StrCat("tokenizer maps part of '", text, "' to <unk>"));
    }
  }
  ZF_ASSIGN_OR_RETURN(const std::string back, tok.Decode(ids));
  if (back != text) {
    return absl::InternalError(absl::StrCat("tokenizer does not round-trip '", text, "' (got '", back, "')"));
  }
  return ids;
}

// GRPO's prompts (worker/data/prompt_dataset.h), one line per problem (the pairs of a problem are
// consecutive): {"prompt", "answer"} as text, or with `ids` {"prompt_ids", "answer", "answer_ids"}.
absl::StatusOr<std::string> PromptsJsonl(const data::SentencePieceTokenizer& tok,
                                         const std::vector<TextPair>& pairs, bool ids) {
  std::string s;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const TextPair& p = pairs[i];
    if (i > 0 && pairs[i - 1].prompt == p.prompt) continue;
    Json j;
    if (ids) {
      ZF_ASSIGN_OR_RETURN(j["prompt_ids"], EncodeExact(tok, p.prompt));
    } else {
      j["prompt"] = p.prompt;
    }
    j["answer"] = p.chosen;
    if (ids) {
      ZF_ASSIGN_OR_RETURN(j["answer_ids"], EncodeExact(tok, p.chosen));
    }
    absl::StrAppend(&s, j.dump(), "\n");
  }
  return s;
}

// {train,test}_prompts.jsonl, and with `ids` {train,test}_prompts_ids.jsonl, into `dir`.
absl::Status WritePromptFiles(const std::string& dir, const data::SentencePieceTokenizer& tok,
                              const std::vector<TextPair>& train, const std::vector<TextPair>& test,
                              bool ids) {
  for (const bool as_ids : {false, true}) {
    if (as_ids && !ids) continue;
    const std::string suffix = as_ids ? "_prompts_ids.jsonl" : "_prompts.jsonl";
    ZF_ASSIGN_OR_RETURN(const std::string train_prompts, PromptsJsonl(tok, train, as_ids));
    ZF_ASSIGN_OR_RETURN(const std::string test_prompts, PromptsJsonl(tok, test, as_ids));
    ZF_RETURN_IF_ERROR(WriteFile(dir + "/train" + suffix, train_prompts));
    ZF_RETURN_IF_ERROR(WriteFile(dir + "/test" + suffix, test_prompts));
  }
  return absl::OkStatus();
}

// Checks every pair against the tokenizer; returns the ids JSONL and the longest sequence with BOS/EOS.
absl::StatusOr<std::string> IdsJsonl(const data::SentencePieceTokenizer& tok,
                                     const std::vector<TextPair>& pairs, int64_t* longest) {
  std::string s;
  for (const TextPair& p : pairs) {
    ZF_ASSIGN_OR_RETURN(const std::vector<int32_t> prompt, EncodeExact(tok, p.prompt));
    ZF_ASSIGN_OR_RETURN(const std::vector<int32_t> chosen, EncodeExact(tok, p.chosen));
    ZF_ASSIGN_OR_RETURN(const std::vector<int32_t> rejected, EncodeExact(tok, p.rejected));
    *longest = std::max<int64_t>(*longest, 2 + prompt.size() + std::max(chosen.size(), rejected.size()));
    Json j;
    j["prompt_ids"] = prompt;
    j["chosen_ids"] = chosen;
    j["rejected_ids"] = rejected;
    absl::StrAppend(&s, j.dump(), "\n");
  }
  return s;
}

Json LlamaConfig(const data::SentencePieceTokenizer& tok) {
  Json c;
  c["architectures"] = Json::array({"LlamaForCausalLM"});
  c["model_type"] = "llama";
  c["vocab_size"] = tok.vocab_size();
  c["hidden_size"] = 64;
  c["intermediate_size"] = 176;
  c["num_hidden_layers"] = 2;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 2;
  c["head_dim"] = 16;
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = kMaxPositions;
  c["rms_norm_eps"] = 1e-5;
  c["rope_theta"] = 10000.0;
  c["attention_bias"] = false;
  c["tie_word_embeddings"] = false;
  c["initializer_range"] = 0.02;
  c["bos_token_id"] = tok.bos_id();
  c["eos_token_id"] = tok.eos_id();
  c["pad_token_id"] = tok.pad_id();
  c["torch_dtype"] = "float32";
  return c;
}

// What Run wrote, one line per file.
void PrintWritten(const Flags& f, size_t train, size_t test, const data::SentencePieceTokenizer& tok,
                  double train_s, int64_t longest) {
  std::printf("zerofit_make_arith_prefs: wrote %s (seed %llu, operands 0..%llu)\n", f.out.c_str(),
              static_cast<unsigned long long>(f.seed), static_cast<unsigned long long>(f.max_operand));
  std::printf("  %-16s %zu pairs (%llu problems)\n", "train.jsonl", train,
              static_cast<unsigned long long>(f.train));
  std::printf("  %-16s %zu pairs (%llu problems), no problem shared with train\n", "test.jsonl", test,
              static_cast<unsigned long long>(f.test));
  if (f.ids) std::printf("  %-16s pre-tokenized copies of both, no BOS/EOS\n", "*_ids.jsonl");
  std::printf("  %-16s GRPO prompts with their answers (%s)\n", "*_prompts.jsonl",
              f.ids ? "and *_prompts_ids.jsonl, pre-tokenized" : "text");
  std::printf("  %-16s %llu lines\n", "corpus.txt", static_cast<unsigned long long>(f.train));
  std::printf("  %-16s %s, vocab %d (bos %d, eos %d, pad %d, unk %d), trained in %.3f s\n", "tokenizer.model",
              f.model_type.c_str(), tok.vocab_size(), tok.bos_id(), tok.eos_id(), tok.pad_id(), tok.unk_id(),
              train_s);
  std::printf(
      "  %-16s LlamaForCausalLM, 2 layers, hidden 64, vocab %d; longest pair %lld tokens with BOS/EOS\n",
      "config.json", tok.vocab_size(), static_cast<long long>(longest));
}

absl::Status Run(const Flags& f) {
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat(f.out, ": cannot create directory: ", ec.message()));
  const std::filesystem::path dir(f.out);

  std::mt19937_64 gen(f.seed);
  ZF_ASSIGN_OR_RETURN(const std::vector<Problem> problems,
                      DrawProblems(f.train + f.test, f.max_operand, gen));
  std::vector<TextPair> train, test;
  std::string corpus;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& p = problems[i];
    const uint64_t sum = p.a + p.b;
    // Distinct wrong answers; a small sum may have fewer than R plausible ones.
    const size_t w = std::to_string(f.max_operand).size(), wa = std::to_string(2 * f.max_operand).size();
    std::vector<std::string> wrong;
    for (int attempt = 0; attempt < 8 * static_cast<int>(f.rejections) && wrong.size() < f.rejections;
         ++attempt) {
      std::string w = f.near ? NearAnswer(sum, wa, gen) : WrongAnswer(sum, gen);
      if (std::find(wrong.begin(), wrong.end(), w) == wrong.end()) wrong.push_back(std::move(w));
    }
    // --pad: fixed-width digits line the columns up, so position alone says which digits add together.
    auto pad = [&](std::string s, size_t width) {
      return f.pad ? std::string(width > s.size() ? width - s.size() : 0, '0') + s : s;
    };
    const std::string prompt =
        absl::StrCat(pad(std::to_string(p.a), w), "+", pad(std::to_string(p.b), w), "=");
    const std::string chosen = pad(std::to_string(sum), wa);
    if (i < f.train) absl::StrAppend(&corpus, prompt, chosen, "\n");
    for (const std::string& r : wrong) (i < f.train ? train : test).push_back({prompt, chosen, pad(r, wa)});
  }
  const std::string corpus_path = (dir / "corpus.txt").string();
  ZF_RETURN_IF_ERROR(WriteFile(corpus_path, corpus));
  ZF_RETURN_IF_ERROR(WriteFile((dir / "train.jsonl").string(), TextJsonl(train)));
  ZF_RETURN_IF_ERROR(WriteFile((dir / "test.jsonl").string(), TextJsonl(test)));

  data::TokenizerTrainOptions topt;
  topt.corpus_path = corpus_path;
  topt.model_path = (dir / "tokenizer.model").string();
  topt.vocab_size = f.vocab_size;
  topt.model_type = f.model_type;
  topt.required_chars = "0123456789+=";  // small --train runs may miss a digit; test must still encode
  const auto t0 = std::chrono::steady_clock::now();
  ZF_RETURN_IF_ERROR(data::TrainSentencePieceTokenizer(topt));
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ZF_ASSIGN_OR_RETURN(const auto tok, data::SentencePieceTokenizer::Load(topt.model_path));

  // Tokenizing every pair checks that the tokenizer covers the data exactly, --ids or not.
  int64_t longest = 0;
  ZF_ASSIGN_OR_RETURN(const std::string train_ids, IdsJsonl(*tok, train, &longest));
  ZF_ASSIGN_OR_RETURN(const std::string test_ids, IdsJsonl(*tok, test, &longest));
  if (longest > kMaxPositions) {
    return absl::InternalError(
        absl::StrCat("a sequence of ", longest, " tokens exceeds max_position_embeddings ", kMaxPositions));
  }
  if (f.ids) {
    ZF_RETURN_IF_ERROR(WriteFile((dir / "train_ids.jsonl").string(), train_ids));
    ZF_RETURN_IF_ERROR(WriteFile((dir / "test_ids.jsonl").string(), test_ids));
  }
  ZF_RETURN_IF_ERROR(WritePromptFiles(dir.string(), *tok, train, test, f.ids));
  ZF_RETURN_IF_ERROR(WriteFile((dir / "config.json").string(), LlamaConfig(*tok).dump(2) + "\n"));

  PrintWritten(f, train.size(), test.size(), *tok, train_s, longest);
  return absl::OkStatus();
}

}  // namespace
}  // namespace zerofit::examples

int main(int argc, char** argv) {
  auto flags = zerofit::examples::ParseFlags(argc, argv);
  if (flags.ok() && flags->help) {
    std::fputs(zerofit::examples::kUsage, stdout);
    return 0;
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "zerofit_make_arith_prefs: %s\n%s", std::string(flags.status().message()).c_str(),
                 zerofit::examples::kUsage);
    return 2;
  }
  const absl::Status status = zerofit::examples::Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "zerofit_make_arith_prefs: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
