#include "worker/data/text_pairs_to_ids.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/json_depth.h"
#include "core/line_reader.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace zerofit::data {
namespace {

using Json = nlohmann::json;

absl::Status LineError(const std::string& source, size_t line, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": ", why));
}

bool IsBlank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// One pair's id line. `unterminated`: the line ended at the end of the file without a newline.
absl::StatusOr<Json> ConvertLine(const Tokenizer& tok, const std::string& line, bool unterminated,
                                 const std::string& source, size_t number) {
  if (absl::Status deep = core::CheckJsonDepth(line, core::kMaxJsonDepth, absl::StrCat(source, ":", number));
      !deep.ok()) {
    return absl::InvalidArgumentError(deep.message());
  }
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return LineError(source, number,
                     unterminated ? "not a JSON object (the last line has no newline: was the file cut off "
                                    "while being written?)"
                                  : "not a JSON object");
  }
  Json o = Json::object();
  for (const char* field : {"prompt", "chosen", "rejected"}) {
    const std::string ids_field = absl::StrCat(field, "_ids");
    const bool response = std::string(field) != "prompt";
    if (j.contains(ids_field)) {
      const Json& ids = j[ids_field];
      bool integers = ids.is_array();
      for (size_t i = 0; integers && i < ids.size(); ++i) integers = ids[i].is_number_integer();
      if (!integers) {
        return LineError(source, number,
                         absl::StrCat("field '", ids_field, "': expected a list of integer ids"));
      }
      if (response && ids.empty()) {
        return LineError(source, number,
                         absl::StrCat("field '", ids_field, "': empty response (nothing to score)"));
      }
      o[ids_field] = ids;
      continue;
    }
    if (!j.contains(field) || !j[field].is_string()) {
      return LineError(source, number, absl::StrCat("field '", field, "': expected a string"));
    }
    const std::string& text = j[field].get_ref<const std::string&>();
    if (response && text.empty()) {
      return LineError(source, number,
                       absl::StrCat("field '", field, "': empty response (nothing to score)"));
    }
    auto ids = tok.Encode(text);
    if (!ids.ok())
      return LineError(source, number, absl::StrCat("field '", field, "': ", ids.status().message()));
    o[ids_field] = *ids;
  }
  return o;
}

}  // namespace

absl::StatusOr<size_t> TextPairsToIds(const Tokenizer& tok, std::istream& in, const std::string& source,
                                      std::ostream& out) {
  std::string line;
  size_t number = 0, pairs = 0;
  for (;;) {
    const absl::StatusOr<bool> read = core::ReadLine(in, &line);
    if (!read.ok()) return LineError(source, number + 1, std::string(read.status().message()));
    if (!*read) break;
    ++number;
    if (IsBlank(line)) continue;
    // getline sets eofbit only when the file ended before a newline.
    ZF_ASSIGN_OR_RETURN(const Json o, ConvertLine(tok, line, in.eof(), source, number));
    out << o.dump() << "\n";
    if (!out) return absl::DataLossError(absl::StrCat("write failed at ", source, ":", number));
    ++pairs;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(source, ": read failed after line ", number));
  if (number == 0) return LineError(source, 1, "empty file (no preference pairs)");
  if (pairs == 0) {
    return LineError(source, number, absl::StrCat("no preference pairs (all ", number, " lines are blank)"));
  }
  return pairs;
}

}  // namespace zerofit::data
