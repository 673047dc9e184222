#include "worker/data/tokenizer_trainer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/data/sentencepiece_bridge.h"

namespace zerofit::data {
namespace {

const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

absl::Status TrainSentencePieceTokenizer(const TokenizerTrainOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.corpus_path, ec)) {
    return absl::NotFoundError(absl::StrCat(options.corpus_path, ": tokenizer corpus not found"));
  }
  if (options.model_path.empty()) {
    return absl::InvalidArgumentError("tokenizer training: model_path is empty");
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer training: vocab_size must be positive, got ", options.vocab_size));
  }
  std::vector<std::pair<std::string, std::string>> args = {
      {"vocab_size", absl::StrCat(options.vocab_size)},
      {"hard_vocab_limit", Bool(options.hard_vocab_limit)},
      {"model_type", options.model_type},
      {"split_digits", Bool(options.split_digits)},
      {"byte_fallback", Bool(options.byte_fallback)},
      {"normalization_rule_name", options.normalization_rule},
      {"add_dummy_prefix", Bool(options.add_dummy_prefix)},
      {"character_coverage", absl::StrCat(options.character_coverage)},
      {"pad_id", absl::StrCat(options.pad_id)},
      {"unk_id", absl::StrCat(options.unk_id)},
      {"bos_id", absl::StrCat(options.bos_id)},
      {"eos_id", absl::StrCat(options.eos_id)},
      {"num_threads", absl::StrCat(options.num_threads)},
  };
  if (!options.required_chars.empty()) args.emplace_back("required_chars", options.required_chars);
  if (options.quiet) args.emplace_back("minloglevel", "2");
  std::string model;
  std::string error;
  if (!spm_bridge::Train(options.corpus_path, args, &model, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("training a SentencePiece tokenizer on ", options.corpus_path, ": ", error));
  }
  std::ofstream out(options.model_path, std::ios::binary | std::ios::trunc);
  if (!out) {
    const int err = errno;
    return absl::PermissionDeniedError(
        absl::StrCat(options.model_path, ": cannot write the tokenizer model: ", std::strerror(err)));
  }
  out.write(model.data(), static_cast<std::streamsize>(model.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(options.model_path, ": write failed (disk full?)"));
  return absl::OkStatus();
}

}  // namespace zerofit::data
