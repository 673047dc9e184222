#include "worker/torch/train/grpo_rows.h"

#include <algorithm>
#include <cstdint>

#include "worker/torch/train/host_to_device.h"

namespace zerofit::worker {

GrpoRows MakeGrpoRows(const std::vector<const data::Prompt*>& prompts,
                      const std::vector<Completion>& completions, const std::vector<double>& advantages,
                      size_t begin, size_t end, const GrpoRowFormat& format, const torch::Device& device) {
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
  torch::Tensor tokens = torch::full({n, longest}, format.pad, torch::kInt64);
  torch::Tensor mask = torch::zeros({n, longest - 1 - r.from}, torch::kFloat32);
  const bool by_entropy = format.entropy_threshold.has_value();
  torch::Tensor policy_mask = by_entropy ? torch::zeros_like(mask) : torch::Tensor();
  auto t = tokens.accessor<int64_t, 2>();
  auto m = mask.accessor<float, 2>();
  float* kept = by_entropy ? policy_mask.data_ptr<float>() : nullptr;  // row-major, mask's shape
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& p = prompts[begin + i]->ids;
    const Completion& c = completions[begin + i];
    const float scored = format.mask_truncated && c.hit_max_new_tokens ? 0.0f : 1.0f;
    for (size_t j = 0; j < p.size(); ++j) t[i][j] = p[j];
    for (size_t j = 0; j < c.tokens.size(); ++j) {
      const int64_t column = static_cast<int64_t>(p.size() + j) - 1 - r.from;
      t[i][static_cast<int64_t>(p.size() + j)] = c.tokens[j];
      m[i][column] = scored;
      if (kept != nullptr && j < c.entropies.size() && c.entropies[j] >= *format.entropy_threshold) {
        kept[i * mask.size(1) + column] = scored;
      }
    }
  }
  const std::vector<double> adv(advantages.begin() + begin, advantages.begin() + end);
  r.tokens = HostToDevice(tokens, device);
  r.mask = HostToDevice(mask, device);
  if (by_entropy) r.policy_mask = HostToDevice(policy_mask, device);
  r.advantages = HostToDevice(torch::tensor(adv, torch::kFloat64).to(torch::kFloat32), device);
  return r;
}

}  // namespace zerofit::worker
