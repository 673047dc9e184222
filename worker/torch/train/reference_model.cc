#include "worker/torch/train/reference_model.h"

#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "device/device.h"
#include "worker/torch/train/host_to_device.h"
#include "worker/torch/train/objectives.h"
#include "worker/torch/train/pair_tensors.h"

namespace zerofit::worker {

absl::StatusOr<ReferenceStrategy> ParseReferenceStrategy(const std::string& name) {
  if (name == "resident") return ReferenceStrategy::kResident;
  if (name == "offloaded") return ReferenceStrategy::kOffloaded;
  if (name == "precomputed") return ReferenceStrategy::kPrecomputed;
  if (name == "lora-base") return ReferenceStrategy::kLoraBase;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown reference strategy '", name, "'; expected resident, offloaded, precomputed or lora-base"));
}

const char* ReferenceStrategyName(ReferenceStrategy s) {
  switch (s) {
    case ReferenceStrategy::kResident:
      return "resident";
    case ReferenceStrategy::kOffloaded:
      return "offloaded";
    case ReferenceStrategy::kPrecomputed:
      return "precomputed";
    case ReferenceStrategy::kLoraBase:
      return "lora-base";
  }
  return "?";
}

absl::Status CheckReferenceStrategy(ReferenceStrategy s, const LoraConfig& lora) {
  if (s != ReferenceStrategy::kLoraBase || lora.enabled()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "reference: lora-base is the policy with its LoRA adapters disabled; this policy has none (set a LoRA "
      "rank, or use another reference)");
}

absl::StatusOr<std::unique_ptr<ReferenceModel>> ReferenceModel::Create(LlamaModel model,
                                                                       ReferenceStrategy strategy) {
  ZF_RETURN_IF_ERROR(CheckReferenceStrategy(strategy, model->options().lora));
  std::unique_ptr<ReferenceModel> ref(new ReferenceModel(std::move(model), strategy));
  if (strategy == ReferenceStrategy::kLoraBase) return ref;  // the policy's own module: left as it is
  try {
    torch::NoGradGuard no_grad;
    ref->model_->eval();
    auto params = ref->model_->parameters();
    for (auto& p : params) p.set_requires_grad(false);
    if (strategy == ReferenceStrategy::kOffloaded) {
      size_t bytes = 0;
      for (const auto& p : params) bytes += (p.numel() * p.element_size() + 63) / 64 * 64;
      ZF_ASSIGN_OR_RETURN(ref->pinned_, device::AllocateHostMemory(bytes, device::MemoryKind::kPinned));
      size_t offset = 0;
      for (auto& p : params) {
        torch::Tensor host =
            torch::from_blob(ref->pinned_.as<char>() + offset, p.sizes(), p.options().device(torch::kCPU));
        host.copy_(p);
        ref->host_params_.push_back(host);
        offset += (p.numel() * p.element_size() + 63) / 64 * 64;
        p.set_data(torch::empty({0}, p.options()));  // nothing stays on the device between forwards
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("creating the reference model failed: ", e.what()));
  }
  return ref;
}

size_t ReferenceModel::device_bytes() const {
  if (strategy_ != ReferenceStrategy::kResident || precomputed_) return 0;
  return static_cast<size_t>(model_->parameter_bytes());
}

torch::Tensor ReferenceModel::Forward(const torch::Tensor& tokens, const torch::Tensor& response_start,
                                      const torch::Tensor& lengths, int64_t head_from) {
  torch::NoGradGuard no_grad;
  if (strategy_ != ReferenceStrategy::kOffloaded) {
    std::optional<AdaptersOff> base;
    if (strategy_ == ReferenceStrategy::kLoraBase) base.emplace(*model_);
    return worker::ResponseLogProbs(model_->TokenLogProbs(tokens, head_from), response_start, lengths,
                                    head_from);
  }
  auto params = model_->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    // From the pinned copy, queued like a kernel: a blocking copy would synchronise the stream once per
    // tensor (host_to_device.h). The pinned buffer outlives the copies.
    params[i].set_data(host_params_[i].to(tokens.device(), /*non_blocking=*/true, /*copy=*/true));
  }
  torch::Tensor out =
      worker::ResponseLogProbs(model_->TokenLogProbs(tokens, head_from), response_start, lengths, head_from);
  for (auto& p : params) p.set_data(torch::empty({0}, p.options()));
  return out;
}

absl::Status ReferenceModel::Precompute(const std::vector<data::PreferencePair>& pairs, int32_t pad_id,
                                        int64_t batch_pairs, comm::Communicator* comm) {
  if (strategy_ != ReferenceStrategy::kPrecomputed) return absl::OkStatus();
  table_.assign(2 * pairs.size(), 0.0f);
  BatchFormat format;  // the reference's log-probs need no reward read-out
  format.pad_id = pad_id;
  try {
    for (const auto& ids :
         StridedChunks(pairs.size(), comm->rank(), comm->world_size(), static_cast<uint64_t>(batch_pairs))) {
      ZF_ASSIGN_OR_RETURN(PairTensors b, MakePairTensors(pairs, ids, format));
      const torch::Device dev = model_->parameters().front().device();  // the model's device, even offloaded
      const torch::Tensor lp = Forward(b.tokens.to(dev), b.starts.to(dev), b.lengths.to(dev), b.head_from)
                                   .to(torch::kCPU, torch::kFloat32)
                                   .contiguous();
      const float* v = lp.data_ptr<float>();
      for (size_t k = 0; k < ids.size(); ++k) {
        table_[2 * ids[k]] = v[k];
        table_[2 * ids[k] + 1] = v[ids.size() + k];
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("reference pre-pass failed: ", e.what()));
  }
  // Each rank filled its own entries; the rest are zero, so a sum gathers the table everywhere.
  ZF_RETURN_IF_ERROR(
      comm::WaitFor(comm->AllReduce(comm::Buffer{table_.data(), table_.size(), core::DType::kFloat32},
                                    comm::ReduceOp::kSum),
                    comm->options().timeout));
  precomputed_ = true;
  model_ = LlamaModel(nullptr);  // the reference weights are no longer needed
  return absl::OkStatus();
}

absl::StatusOr<torch::Tensor> ReferenceModel::ResponseLogProbs(const torch::Tensor& tokens,
                                                               const torch::Tensor& response_start,
                                                               const torch::Tensor& lengths,
                                                               const std::vector<uint64_t>& pair_ids,
                                                               int64_t head_from) {
  if (strategy_ == ReferenceStrategy::kPrecomputed) {
    if (!precomputed_) return absl::FailedPreconditionError("reference log-probs were not precomputed");
    std::vector<float> out(2 * pair_ids.size());
    for (size_t k = 0; k < pair_ids.size(); ++k) {
      if (2 * pair_ids[k] + 1 >= table_.size()) {
        return absl::OutOfRangeError(
            absl::StrCat("pair ", pair_ids[k], " has no precomputed reference log-prob"));
      }
      out[k] = table_[2 * pair_ids[k]];
      out[pair_ids.size() + k] = table_[2 * pair_ids[k] + 1];
    }
    return HostToDevice(torch::tensor(out), tokens.device());
  }
  try {
    return Forward(tokens, response_start, lengths, head_from);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("reference forward failed: ", e.what()));
  }
}

}  // namespace zerofit::worker
