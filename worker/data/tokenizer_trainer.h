// Training a SentencePiece tokenizer from a text corpus, fully offline (nothing is downloaded).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zerofit::data {

struct TokenizerTrainOptions {
  std::string corpus_path;  // one sentence per line
  // Output: the SentencePiece model file (e.g. `tokenizer.model`; load with SentencePieceTokenizer::Load).
  // The file records no paths: the same corpus and options give the same bytes.
  std::string model_path;
  // Upper bound on the number of pieces, special pieces included. With hard_vocab_limit=false the trainer
  // stops early when the corpus offers nothing more to merge (a small alphabet with split_digits gives
  // exactly its characters plus the special pieces); read the real size from the loaded tokenizer.
  int32_t vocab_size = 64;
  bool hard_vocab_limit = false;
  std::string model_type = "bpe";  // "bpe" | "unigram" | "char" | "word"
  bool split_digits = true;        // every digit is its own piece (arithmetic is learnable digit by digit)
  bool byte_fallback = false;
  // The corpus is used as is: identity normalization and no dummy "▁" prefix, so "12+7=" encodes to exactly
  // the pieces of its characters and Decode(Encode(s)) == s for text made of corpus characters.
  std::string normalization_rule = "identity";
  bool add_dummy_prefix = false;
  double character_coverage = 1.0;  // keep every character of the corpus
  // Characters that get a piece even if the corpus lacks them (UTF-8), e.g. every digit of a task alphabet.
  std::string required_chars;
  // Special ids; -1 disables a piece (unk cannot be disabled).
  int32_t pad_id = 0;
  int32_t unk_id = 1;
  int32_t bos_id = 2;
  int32_t eos_id = 3;
  int32_t num_threads = 1;
  bool quiet = true;  // silences SentencePiece's training log (a process-wide setting of the library)
};

// Errors name the corpus or the output path. Training reads the whole corpus and is deterministic for a
// given corpus and options.
absl::Status TrainSentencePieceTokenizer(const TokenizerTrainOptions& options);

}  // namespace zerofit::data
