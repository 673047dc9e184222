// Text preference JSONL ({"prompt","chosen","rejected"}) to token-id JSONL ({"prompt_ids","chosen_ids",
// "rejected_ids"}, no BOS/EOS: the loader adds them): zerofit_tokenize's work, as a function of streams so
// that its input rules are tested. Lines that already hold ids are copied unchanged.
//
// Refused, each naming the file and the line: a line that is not a JSON object (with a hint when it is the
// last line and has no newline: a file cut off while being written), an empty `chosen` or `rejected`
// (nothing to score), an empty file, and a file of blank lines only.
#pragma once

#include <cstddef>
#include <istream>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "worker/data/tokenizer.h"

namespace zerofit::data {

// Reads `in` (named `source` in errors) line by line and writes one id line per pair to `out`. Returns the
// number of pairs written. Blank lines are skipped.
absl::StatusOr<size_t> TextPairsToIds(const Tokenizer& tok, std::istream& in, const std::string& source,
                                      std::ostream& out);

}  // namespace zerofit::data
