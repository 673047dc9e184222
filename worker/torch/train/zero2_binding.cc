#include "worker/torch/train/zero2_binding.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "offload/offload_shard_updater.h"
#include "worker/torch/model/element_type.h"

namespace zerofit::worker {
namespace {

absl::StatusOr<core::DType> FromTorch(c10::ScalarType t) {
  if (std::optional<core::DType> d = CoreElementType(t)) return *d;
  return absl::InvalidArgumentError(absl::StrCat("unsupported parameter dtype ", c10::toString(t)));
}

class AccumulatedHook final : public torch::autograd::FunctionPostHook {
 public:
  AccumulatedHook(Zero2Binding* binding, size_t index) : binding_(binding), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    binding_->OnAccumulated(index_);
    return outputs;
  }

 private:
  Zero2Binding* binding_;
  size_t index_;
};

// The parameter must live where the optimizer's buffers do.
absl::Status CheckPlacement(const std::string& name, const torch::Tensor& p, const device::Device* device) {
  const bool cuda = device != nullptr && device->kind() == device::DeviceKind::kCuda;
  if (cuda == p.device().is_cuda()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "' is on ", p.device().str(),
                                                 " but the optimizer's buffers are on ",
                                                 device != nullptr ? device->name() : "cpu"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Zero2Binding>> Zero2Binding::Bind(torch::nn::Module& module,
                                                                 const sharding::Zero2Options& options,
                                                                 comm::Communicator* comm,
                                                                 DecayPredicate decay,
                                                                 sharding::Zero2Devices devices) {
  std::unique_ptr<Zero2Binding> b(new Zero2Binding());
  std::vector<sharding::ParamSpec> specs;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const torch::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    ZF_ASSIGN_OR_RETURN(core::DType dt, FromTorch(p.scalar_type()));
    if (dt != options.param_dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", item.key(), "' has dtype ", core::DTypeName(dt),
                       " but the optimizer was configured for ", core::DTypeName(options.param_dtype)));
    }
    ZF_RETURN_IF_ERROR(CheckPlacement(item.key(), p, devices.device));
    if (!p.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", item.key(), "' is not contiguous"));
    }
    specs.push_back(
        sharding::ParamSpec{item.key(), static_cast<size_t>(p.numel()), decay ? decay(item.key(), p) : true});
    b->params_.push_back(p);
    b->names_.push_back(item.key());
  }
  b->hold_gradients_ = devices.device != nullptr && devices.device->kind() == device::DeviceKind::kTest;
  b->offered_.resize(b->params_.size());
  // The worker composes the engine with its offload updater (sharding/ knows only the interface).
  if (!devices.offload_updater) devices.offload_updater = offload::OffloadShardUpdater::Create;
  ZF_ASSIGN_OR_RETURN(b->optimizer_,
                      sharding::Zero2Optimizer::Create(std::move(specs), options, comm, devices));
  device::Stream& compute = b->optimizer_->device().compute_stream();

  try {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < b->params_.size(); ++i) {
      torch::Tensor& p = b->params_[i];
      void* dst = b->optimizer_->param_data(i);
      // On the compute stream, where LibTorch made the tensor; the old storage is kept alive until then.
      ZF_RETURN_IF_ERROR(compute.Copy(dst, p.data_ptr(), p.numel() * p.element_size()));
      ZF_RETURN_IF_ERROR(compute.Synchronize(comm->options().timeout));
      p.set_data(torch::from_blob(dst, p.sizes(), p.options().requires_grad(false)));
    }
    if (options.accumulation_mode == sharding::AccumulationMode::kReduceOncePerStep) {
      for (size_t i = 0; i < b->params_.size(); ++i) {
        const torch::Tensor& p = b->params_[i];
        b->grad_views_.push_back(
            torch::from_blob(b->optimizer_->grad_data(i), p.sizes(), p.options().requires_grad(false)));
      }
      b->AttachGradViews();
    } else {
      for (torch::Tensor& p : b->params_) p.mutable_grad().reset();
    }
    for (size_t i = 0; i < b->params_.size(); ++i) {
      // Holding the accumulator keeps it (and its hook) alive across iterations, as DDP's Reducer does.
      std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(b->params_[i]);
      if (!acc)
        return absl::InternalError(absl::StrCat("parameter '", b->names_[i], "' has no grad accumulator"));
      b->hook_keys_.push_back(acc->add_post_hook(std::make_unique<AccumulatedHook>(b.get(), i)));
      b->accumulators_.push_back(std::move(acc));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("binding the module to ZeRO-2 failed: ", e.what()));
  }
  ZF_RETURN_IF_ERROR(b->optimizer_->InitializeFromParameters(/*broadcast=*/true));
  return b;
}

Zero2Binding::~Zero2Binding() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  // The parameters still point into the optimizer's buffers: give them their own storage back so the module
  // stays usable after the binding is gone.
  torch::NoGradGuard no_grad;
  for (torch::Tensor& p : params_) {
    p.set_data(p.detach().clone());
    p.mutable_grad().reset();
  }
}

void Zero2Binding::AttachGradViews() {
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& g = params_[i].mutable_grad();
    if (!g.defined() || g.data_ptr() != grad_views_[i].data_ptr()) g = grad_views_[i];
  }
}

void Zero2Binding::OnAccumulated(size_t i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!hook_status_.ok()) return;
  torch::Tensor& grad = params_[i].mutable_grad();
  absl::Status s;
  if (!grad_views_.empty()) {
    // Autograd normally accumulated in place into our view; if it replaced the tensor (e.g. under
    // create_graph), the new tensor already holds old + new: copy it back into the flat buffer.
    if (grad.defined() && grad.data_ptr() != grad_views_[i].data_ptr()) {
      torch::NoGradGuard no_grad;
      grad_views_[i].copy_(grad);
      grad = grad_views_[i];
    }
    s = optimizer_->OnGradientReady(i, nullptr);
  } else {
    if (!grad.defined()) {
      s = absl::InternalError(absl::StrCat("parameter '", names_[i], "': autograd produced no gradient"));
    } else {
      // Kept until the engine has copied it into its bucket, which may come later than this call (a
      // bucket that waits for an earlier one, OfferGradient); then no full gradient buffer is kept.
      offered_[i] = grad.contiguous();
      s = optimizer_->OfferGradient(i, offered_[i].data_ptr());
      grad.reset();
      ReleaseCopiedGradients();
    }
  }
  if (!s.ok()) {
    hook_status_ = s;
    // Stop backward: the exception unwinds through autograd to Backward(), which returns hook_status_.
    throw std::runtime_error(s.ToString());
  }
}

absl::Status Zero2Binding::Backward(const torch::Tensor& loss_sum, bool last_of_step, double units) {
  hook_status_ = absl::OkStatus();
  if (!grad_views_.empty()) AttachGradViews();  // the user may have called zero_grad(set_to_none)
  ZF_RETURN_IF_ERROR(optimizer_->BeginMicroBatch(last_of_step));
  try {
    sharding::ScopedStage backward(optimizer_->profile(), sharding::Stage::kBackward);
    const float scale = optimizer_->loss_scale();
    if (scale == 1.0f) {
      loss_sum.backward();
    } else {
      (loss_sum * scale).backward();
    }
  } catch (const std::exception& e) {
    DropGradients();
    if (!hook_status_.ok()) return hook_status_;
    return absl::InternalError(absl::StrCat("backward failed: ", e.what()));
  }
  absl::Status ended = optimizer_->EndMicroBatch(units);
  // EndMicroBatch copied what was left and waited for the reduce-scatters, which the copies out of these
  // tensors precede.
  DropGradients();
  return ended;
}

void Zero2Binding::ReleaseCopiedGradients() {
  for (size_t k : optimizer_->TakeReleasedGradients()) {
    if (hold_gradients_) held_.push_back(offered_[k]);
    offered_[k].reset();
  }
}

void Zero2Binding::DropGradients() {
  (void)optimizer_->TakeReleasedGradients();
  for (torch::Tensor& g : offered_) g.reset();
  held_.clear();
}

}  // namespace zerofit::worker
