#include "worker/torch/train/grpo_rows.h"

#include <algorithm>
#include <cstdint>

#include "worker/torch/train/host_to_device.h"

namespace zerofit::worker {

GrpoRows MakeGrpoRows(const std::vector<const data::Prompt*>& prompts,
                      const std::vector<Completion>& completions, const std::vector<double>& advantages,
                      size_t begin, size_t end, int32_t pad, bool mask_truncated,
                      const torch::Device& device) {
  const int64_t n = static_cast<int64_t>(end - begin);
  int64_t longest = 0, shortest_prompt = INT64_MAX;
  for (size_t i = begin; i < end; ++i) {
    const int64_t p = static_cast<int64_t>(prompts[i]->ids.size());
    longest = std::max<int64_t>(longest, p + static_cast<int64_t>(completions[i].tokens.size()));
    shortest_prompt = std::min(shortest_prompt, p);
  }
  GrpoRows r;
  r.count = n;
  r.from = shortest_prompt - 1;  // the first column that predicts a completion token
  torch::Tensor tokens = torch::full({n, longest}, pad, torch::kInt64);
  torch::Tensor mask = torch::zeros({n, longest - 1 - r.from}, torch::kFloat32);
  auto t = tokens.accessor<int64_t, 2>();
  auto m = mask.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& p = prompts[begin + i]->ids;
    const std::vector<int64_t>& c = completions[begin + i].tokens;
    const float scored = mask_truncated && completions[begin + i].hit_max_new_tokens ? 0.0f : 1.0f;
    for (size_t j = 0; j < p.size(); ++j) t[i][j] = p[j];
    for (size_t j = 0; j < c.size(); ++j) {
      t[i][p.size() + j] = c[j];
      m[i][static_cast<int64_t>(p.size() + j) - 1 - r.from] = scored;
    }
  }
  const std::vector<double> adv(advantages.begin() + begin, advantages.begin() + end);
  r.tokens = HostToDevice(tokens, device);
  r.mask = HostToDevice(mask, device);
  r.advantages = HostToDevice(torch::tensor(adv, torch::kFloat64).to(torch::kFloat32), device);
  return r;
}

}  // namespace zerofit::worker
