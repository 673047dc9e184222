#include "worker/torch/model/kv_cache.h"

namespace zerofit::worker {

int64_t KvCacheBytes(const core::HfModelConfig& c, int64_t batch, int64_t capacity, int64_t element_bytes) {
  return 2 * c.num_hidden_layers * batch * c.num_key_value_heads * capacity * c.head_dim * element_bytes;
}

void KvCache::Begin(const core::HfModelConfig& c, int64_t batch, int64_t capacity, torch::Dtype dtype,
                    torch::Device device) {
  TORCH_CHECK(batch > 0 && capacity > 0, "KvCache: batch (", batch, ") and capacity (", capacity,
              ") must be positive");
  const std::vector<int64_t> shape = {batch, c.num_key_value_heads, capacity, c.head_dim};
  bool fits = !keys_.empty() && static_cast<int64_t>(keys_.size()) == c.num_hidden_layers;
  if (fits) {
    const torch::Tensor& k = keys_.front();
    fits = k.scalar_type() == dtype && k.device() == device && k.size(1) == shape[1] &&
           k.size(3) == shape[3] && k.size(0) >= batch && k.size(2) >= capacity;
  }
  if (!fits) {
    Release();  // before allocating: never hold the old and the new cache at once
    const torch::TensorOptions opts = torch::TensorOptions().dtype(dtype).device(device);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      keys_.push_back(torch::zeros(shape, opts));
      values_.push_back(torch::zeros(shape, opts));
    }
    key_positions_ = torch::empty({batch, capacity}, opts.dtype(torch::kInt64));
    ++allocations_;
  }
  batch_ = batch;
  capacity_ = capacity;
  length_ = 0;
  key_positions_.fill_(-1);
}

void KvCache::Release() {
  keys_.clear();
  values_.clear();
  key_positions_ = torch::Tensor();
  batch_ = capacity_ = length_ = 0;
}

torch::Tensor KvCache::PositionsForStep(const torch::Tensor& positions) {
  TORCH_CHECK(batch_ > 0, "KvCache: no pass begun");
  TORCH_CHECK(positions.dim() == 2 && positions.size(0) == batch_, "KvCache: positions must be [", batch_,
              ", t], got ", positions.sizes());
  const int64_t t = positions.size(1);
  TORCH_CHECK(length_ + t <= capacity_, "KvCache: ", t, " more positions exceed the pass's capacity ",
              capacity_, " (", length_, " used)");
  torch::Tensor rows = key_positions_.slice(0, 0, batch_);
  rows.slice(1, length_, length_ + t).copy_(positions);
  return rows.slice(1, 0, length_ + t);
}

std::pair<torch::Tensor, torch::Tensor> KvCache::Append(int64_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  TORCH_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()), "KvCache: no layer ", layer);
  const int64_t t = k.size(2);
  TORCH_CHECK(length_ + t <= capacity_, "KvCache: layer ", layer, " appends past the capacity");
  torch::Tensor keys = keys_[layer].slice(0, 0, batch_), values = values_[layer].slice(0, 0, batch_);
  keys.slice(2, length_, length_ + t).copy_(k);
  values.slice(2, length_, length_ + t).copy_(v);
  return {keys.slice(2, 0, length_ + t), values.slice(2, 0, length_ + t)};
}

void KvCache::Advance(int64_t t) {
  TORCH_CHECK(t >= 0 && length_ + t <= capacity_, "KvCache: cannot advance by ", t);
  length_ += t;
}

torch::Tensor KvCache::PositionsAt(const torch::Tensor& slot, const torch::Tensor& positions) {
  TORCH_CHECK(batch_ > 0, "KvCache: no pass begun");
  TORCH_CHECK(positions.dim() == 2 && positions.size(0) == batch_ && positions.size(1) == 1,
              "KvCache: positions must be [", batch_, ", 1], got ", positions.sizes());
  torch::Tensor rows = key_positions_.slice(0, 0, batch_).slice(1, 0, capacity_);
  rows.index_copy_(1, slot, positions);
  return rows;
}

std::pair<torch::Tensor, torch::Tensor> KvCache::WriteAt(int64_t layer, const torch::Tensor& slot,
                                                         const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()), "KvCache: no layer ", layer);
  TORCH_CHECK(k.dim() == 4 && k.size(2) == 1, "KvCache: WriteAt takes one position, got ", k.sizes());
  torch::Tensor keys = keys_[layer].slice(0, 0, batch_).slice(2, 0, capacity_);
  torch::Tensor values = values_[layer].slice(0, 0, batch_).slice(2, 0, capacity_);
  keys.index_copy_(2, slot, k);
  values.index_copy_(2, slot, v);
  return {keys, values};
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const torch::Tensor& k : keys_) total += static_cast<int64_t>(k.nbytes());
  for (const torch::Tensor& v : values_) total += static_cast<int64_t>(v.nbytes());
  return total;
}

}  // namespace zerofit::worker
