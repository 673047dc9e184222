#include "coordinator/attempt_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace zerofit::coordinator {
std::vector<std::string> LostHosts(const std::vector<std::string>& before,
                                   const std::vector<std::string>& now) {
  std::vector<std::string> lost;
  for (const std::string& h : before) {
    if (std::find(now.begin(), now.end(), h) == now.end()) lost.push_back(h);
  }
  return lost;
}

std::string DescribeNodes(int nodes, int of, const std::vector<std::string>& lost) {
  std::string s = absl::StrCat(nodes, nodes == 1 ? " node" : " nodes", " of ", of);
  if (!lost.empty()) absl::StrAppend(&s, ": ", absl::StrJoin(lost, ", "), " lost");
  return s;
}

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string DescribeReplan(int64_t global_batch, int world, int gradient_accumulation) {
  const int64_t per_micro =
      CeilDiv(global_batch, int64_t{std::max(1, world)} * std::max(1, gradient_accumulation));
  return absl::StrCat("re-planned ", world, " x ", gradient_accumulation, " micro-batches x ", per_micro,
                      " pairs = global batch ", global_batch);
}

std::vector<std::string> DistinctHosts(const std::vector<std::string>& hosts_by_rank) {
  std::vector<std::string> out;
  for (const std::string& h : hosts_by_rank) {
    if (!h.empty() && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
  return out;
}

std::string JoinHosts(const std::vector<std::string>& hosts) { return absl::StrJoin(hosts, ","); }

std::vector<std::string> SplitHosts(const std::string& joined) {
  return absl::StrSplit(joined, ',', absl::SkipEmpty());
}

}  // namespace zerofit::coordinator
