#include "jobspec/lora_spec.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/excerpt.h"

namespace zerofit::jobspec {

const std::vector<std::string>& LoraTargetModules() {
  static const std::vector<std::string> kModules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                    "gate_proj", "up_proj", "down_proj"};
  return kModules;
}

absl::Status ValidateLoraSpec(const LoraSpec& lora, const FieldError& bad) {
  if (lora.rank < 1 || lora.rank > 65536)
    return bad("lora.rank", absl::StrCat("must be 1..65536, got ", lora.rank));
  if (!(lora.alpha > 0)) return bad("lora.alpha", absl::StrCat("must be positive, got ", lora.alpha));
  if (!(lora.dropout >= 0 && lora.dropout < 1)) {
    return bad("lora.dropout", absl::StrCat("must be in [0, 1), got ", lora.dropout));
  }
  if (lora.target_modules.empty()) return bad("lora.target_modules", "must name at least one layer");
  const std::vector<std::string>& known = LoraTargetModules();
  std::set<std::string> seen;
  for (const std::string& m : lora.target_modules) {
    if (std::find(known.begin(), known.end(), m) == known.end()) {
      return bad("lora.target_modules", absl::StrCat("unknown layer ", core::QuotedExcerpt(m), " (",
                                                     absl::StrJoin(known, ", "), ")"));
    }
    if (!seen.insert(m).second) return bad("lora.target_modules", absl::StrCat(m, " is named twice"));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::jobspec
