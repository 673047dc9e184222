// zerofit_sentencepiece_ids: turns text preference JSONL ({"prompt","chosen","rejected"}) into token-id JSONL
// ({"prompt_ids","chosen_ids","rejected_ids"}, no BOS/EOS: the loader adds them) with a SentencePiece model.
// Training processes read token ids: SentencePiece and LibTorch cannot share a process (see
// worker/data/CMakeLists.txt). Lines that already hold ids are copied unchanged.
//   zerofit_sentencepiece_ids --tokenizer tokenizer.model --in train.jsonl --out train_ids.jsonl
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/sentencepiece_tokenizer.h"
#include "worker/data/text_pairs_to_ids.h"

namespace zerofit::data {
namespace {

absl::Status Run(const std::string& model, const std::string& in, const std::string& out) {
  ZF_ASSIGN_OR_RETURN(auto tok, SentencePieceTokenizer::Load(model));
  std::ifstream input(in, std::ios::binary);
  if (!input) return absl::NotFoundError(absl::StrCat(in, ": cannot open for reading"));
  const std::string tmp = out + ".tmp";
  std::ofstream output(tmp, std::ios::trunc);
  if (!output) return absl::PermissionDeniedError(absl::StrCat(tmp, ": cannot open for writing"));
  ZF_ASSIGN_OR_RETURN(const size_t pairs, TextPairsToIds(*tok, input, in, output));
  output.close();
  if (!output) return absl::DataLossError(absl::StrCat(tmp, ": write failed"));
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    return absl::InternalError(absl::StrCat("rename to ", out, " failed"));
  std::printf("zerofit_sentencepiece_ids: %zu pairs from %s -> %s (vocab %d)\n", pairs, in.c_str(),
              out.c_str(), tok->vocab_size());
  return absl::OkStatus();
}

}  // namespace
}  // namespace zerofit::data

int main(int argc, char** argv) {
  std::string model, in, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokenizer") {
      model = argv[i + 1];
    } else if (a == "--in") {
      in = argv[i + 1];
    } else if (a == "--out") {
      out = argv[i + 1];
    } else {
      std::fprintf(stderr, "error: unknown flag '%s'\n", a.c_str());
      return 2;
    }
  }
  if (model.empty() || in.empty() || out.empty()) {
    std::fprintf(
        stderr,
        "usage: zerofit_sentencepiece_ids --tokenizer tokenizer.model --in text.jsonl --out ids.jsonl\n");
    return 2;
  }
  const absl::Status s = zerofit::data::Run(model, in, out);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
