// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}, or the older files without a type):
// byte-level BPE (GPT-2, Llama-3, Qwen2) and SentencePiece-style BPE with byte_fallback and unk fusing
// (Llama-2, Mistral). Immutable after construction apart from an internal word cache; thread-safe.
//
// Merging follows HF `Word::merge_all`: the lowest-rank pair merges first, the leftmost on ties. Long words
// use a MergeQueue of candidates over a doubly linked list of symbols, O(n log n); short ones a plain scan.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "text/hf/word_cache.h"
#include "text/json_view.h"

namespace zerofit::text {

class BpeModel {
 public:
  // Parses the "model" object. Errors name the JSON path (unknown type, dropout, bad merges, merge tokens
  // missing from the vocabulary, out-of-range ids).
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(const JsonView& json);

  // Appends the ids of `word` (one pre-token, valid UTF-8). Characters that are neither in the vocabulary
  // nor representable by byte fallback become the unk token (fused when fuse_unk) or are dropped when the
  // model has no unk token, as HF does.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Empty optional for ids the model does not have.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // Number of vocabulary entries (HF's BPE get_vocab_size).
  int64_t vocab_entries() const { return static_cast<int64_t>(vocab_.size()); }
  // One past the largest id in the vocabulary.
  int32_t vocab_size() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  struct Symbol;

  BpeModel() = default;
  absl::Status LoadVocab(const JsonView& vocab);
  // Records `token`'s inner code-point pairs and, for one-code-point tokens, its id in char_ids_.
  void IndexTokenChars(const std::string& token, int32_t id);
  absl::Status LoadMerges(const JsonView& merges);
  absl::Status AddMerge(const JsonView& at, std::string_view left, std::string_view right, uint32_t rank);
  absl::Status LoadOptions(const JsonView& json);
  // Initial symbols of `word` (vocabulary chars, byte fallback, unk).
  void InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const;
  // BPE of one independent stretch of a word (no merge crosses its ends).
  void TokenizeSpan(std::string_view span, std::vector<int32_t>* ids) const;
  // TokenizeSpan behind the word cache.
  void TokenizeCached(std::string_view span, std::vector<int32_t>* ids) const;
  // True when no vocabulary token contains the code point pair (left, right): no merge can ever join the
  // symbols on either side of that boundary, so BPE may treat the two sides independently.
  bool IsCut(char32_t left, char32_t right) const;
  void MergeByScan(std::vector<Symbol>* symbols) const;
  void MergeByQueue(std::vector<Symbol>* symbols) const;
  // Replaces the symbol at `pos` and its right neighbour by `new_id`.
  void MergeAt(std::vector<Symbol>* symbols, int32_t pos, int32_t new_id) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;

  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  // Fast lookup of single-code-point tokens; used only when no subword prefix/suffix applies.
  absl::flat_hash_map<char32_t, int32_t> char_ids_;
  bool plain_chars_ = true;  // continuing_subword_prefix and end_of_word_suffix are both empty
  // Adjacent code-point pairs occurring inside vocabulary tokens (left << 32 | right); see IsCut.
  absl::flat_hash_set<uint64_t> inner_pairs_;
  WordCache cache_{10000};                                         // words seen before skip BPE; thread-safe
  std::vector<int32_t> byte_ids_ = std::vector<int32_t>(256, -1);  // "<0xNN>" ids (byte_fallback)
};

}  // namespace zerofit::text
