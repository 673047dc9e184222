// The key/value cache of incremental decoding (generation.h): per layer K and V tensors
// [batch, num_key_value_heads, capacity, head_dim] in the model's dtype and device, sized for one rollout
// pass (the sequences in flight and the longest prompt + max_new_tokens of that pass), never for all samples
// of a group or for max_position_embeddings.
//
// Reuse policy: Begin() keeps the allocation when it holds the pass (batch and capacity both <= the
// allocated ones, same layers/heads/dtype/device) and hands out views of its first `batch` rows and
// `capacity` slots; otherwise it frees the old tensors first and allocates exactly the pass's size, so
// bytes() is always KvCacheBytes of some pass that ran and never old + new at once.
//
// Slot s of row b holds the key/value of the token at position key_positions()[b][s]; a negative position
// marks padding (left-padded prompts, finished rows), which no other token attends to. Slots at or after
// length() are never attended to: the eager step (Append) reads slots [0, length + t) only, and the
// fixed-shape step (WriteAt, static_decode.h) reads every slot of the pass with those masked by their
// position -1. An allocation starts zeroed, so a masked slot holds a finite value (its weight 0 times it is
// 0, where a NaN of uninitialised memory would poison the row). Not thread-safe.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/hf_config.h"

namespace zerofit::worker {

// Bytes of K and V for `batch` sequences of `capacity` positions:
// 2 * num_hidden_layers * batch * num_key_value_heads * capacity * head_dim * element_bytes.
// `config` with head_dim and num_key_value_heads resolved (LlamaModelImpl::config()).
int64_t KvCacheBytes(const core::HfModelConfig& config, int64_t batch, int64_t capacity,
                     int64_t element_bytes);

class KvCache {
 public:
  KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Starts a pass of `batch` sequences with room for `capacity` positions each: length() 0, every slot's
  // position -1. Allocates only as the reuse policy above says. Throws c10::Error on non-positive sizes.
  void Begin(const core::HfModelConfig& config, int64_t batch, int64_t capacity, torch::Dtype dtype,
             torch::Device device);
  // Frees the tensors (bytes() 0); the next Begin allocates.
  void Release();

  // Records the positions [batch, t] of the t tokens a step appends (slots [length, length + t)) and
  // returns the positions of all slots the step attends over, [batch, length + t] int64. Throws if the pass
  // has no room for t more tokens.
  torch::Tensor PositionsForStep(const torch::Tensor& positions);
  // Writes layer `layer`'s new k, v [batch, kv_heads, t, head_dim] to slots [length, length + t) and returns
  // views of slots [0, length + t) of that layer's K and V.
  std::pair<torch::Tensor, torch::Tensor> Append(int64_t layer, const torch::Tensor& k,
                                                 const torch::Tensor& v);
  // Ends a step of t tokens: length() += t. Call after every layer has appended.
  void Advance(int64_t t);

  // The fixed-shape step of one token per row (static_decode.h): the slot it writes is `slot`, a [1] int64
  // tensor on the cache's device holding length(), so that one recorded step (a CUDA graph) serves every
  // slot. Neither reads the slot on the host nor checks it against the capacity: the caller does (length()
  // < capacity()) before the step and calls Advance(1) after it.
  // Records positions [batch, 1] at `slot`; returns the positions of every slot of the pass [batch,
  // capacity].
  torch::Tensor PositionsAt(const torch::Tensor& slot, const torch::Tensor& positions);
  // Writes layer `layer`'s k, v [batch, kv_heads, 1, head_dim] at `slot`; returns views of every slot of the
  // pass, [batch, kv_heads, capacity, head_dim].
  std::pair<torch::Tensor, torch::Tensor> WriteAt(int64_t layer, const torch::Tensor& slot,
                                                  const torch::Tensor& k, const torch::Tensor& v);

  int64_t batch() const { return batch_; }        // of the current pass
  int64_t capacity() const { return capacity_; }  // of the current pass, in positions
  int64_t length() const { return length_; }      // slots written in the current pass
  // Bytes held by the allocated K and V tensors (the key positions, batch * capacity int64, not counted).
  int64_t bytes() const;
  // How many times Begin allocated: 1 when every pass of a Generate call reused the first allocation.
  int64_t allocations() const { return allocations_; }

 private:
  std::vector<torch::Tensor> keys_, values_;  // per layer, [alloc_batch, kv_heads, alloc_capacity, head_dim]
  torch::Tensor key_positions_;               // [alloc_batch, alloc_capacity] int64
  int64_t batch_ = 0, capacity_ = 0, length_ = 0;
  int64_t allocations_ = 0;
};

}  // namespace zerofit::worker
