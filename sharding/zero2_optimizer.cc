#include "sharding/zero2_optimizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/serial_executor.h"
#include "core/status_macros.h"
#include "device/host/host_device.h"
#include "sharding/device_shard_updater.h"

namespace zerofit::sharding {

using core::DType;

Zero2Optimizer::Zero2Optimizer(BucketPlan plan, const Zero2Options& options, comm::Communicator* comm)
    : plan_(std::move(plan)), options_(options), comm_(comm), scaler_(options.loss_scaling) {}

Zero2Optimizer::~Zero2Optimizer() {
  // The background update uses the updater's buffers: let it finish before the members go away; then the
  // parts release in reverse order (publisher and reducer wait for their collectives).
  if (update_thread_) (void)update_thread_->Drain(comm_->options().timeout);
  publisher_.reset();
  reducer_.reset();
  updater_.reset();
}

namespace {

absl::Status ValidateOptions(const Zero2Options& options, comm::Communicator* comm) {
  if (comm == nullptr) return absl::InvalidArgumentError("Zero2Optimizer: communicator is null");
  if (options.param_dtype == DType::kFloat64) {
    return absl::InvalidArgumentError("Zero2Optimizer: param_dtype must be fp32, bf16 or fp16");
  }
  if (options.max_staging_buffers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Zero2Optimizer: max_staging_buffers ", options.max_staging_buffers, " < 1"));
  }
  if (options.offload.delayed() && !options.offload.enabled) {
    return absl::InvalidArgumentError("Zero2Optimizer: offload.delayed_update_from needs offload.enabled");
  }
  const size_t elem = core::DTypeSize(options.param_dtype);
  if (options.alignment_bytes == 0 || options.alignment_bytes % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Zero2Optimizer: alignment_bytes ",
                                                   options.alignment_bytes,
                                                   " is not a positive multiple of the element size ", elem));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Zero2Optimizer>> Zero2Optimizer::Create(std::vector<ParamSpec> params,
                                                                       const Zero2Options& options,
                                                                       comm::Communicator* comm,
                                                                       Zero2Devices devices) {
  ZF_RETURN_IF_ERROR(ValidateOptions(options, comm));
  BucketPlanOptions po;
  po.bucket_bytes = options.bucket_bytes;
  po.element_bytes = core::DTypeSize(options.param_dtype);
  po.alignment = options.alignment_bytes / po.element_bytes;
  // 8-bit moments: every parameter and every rank's block of a bucket start on a quantisation block, so a
  // parameter's blocks are its own on any number of ranks (quantized_moments.h).
  if (options.moments.quantized()) po.alignment = std::lcm(po.alignment, optim::kQuantBlock);
  po.world = comm->world_size();
  po.rank = comm->rank();
  ZF_ASSIGN_OR_RETURN(BucketPlan plan, BucketPlan::Make(params, po));
  std::unique_ptr<Zero2Optimizer> opt(new Zero2Optimizer(std::move(plan), options, comm));
  ZF_RETURN_IF_ERROR(opt->Build(devices));
  return opt;
}

absl::Status Zero2Optimizer::Build(Zero2Devices devices) {
  if (options_.offload.enabled && !devices.offload_updater) {
    return absl::InvalidArgumentError(
        "Zero2Optimizer: offload.enabled needs Zero2Devices.offload_updater "
        "(pass offload::OffloadShardUpdater::Create)");
  }
  device_ = devices.device;
  if (device_ == nullptr) {
    owned_device_ = std::make_unique<device::HostDevice>();
    device_ = owned_device_.get();
  }
  device_timeline_ = std::make_unique<DeviceTimeline>(device_, &device_->compute_stream());
  profile_.set_device_timeline(device_timeline_.get());
  host_comm_ = devices.host_comm != nullptr ? devices.host_comm : comm_;
  if (host_comm_->world_size() != comm_->world_size() || host_comm_->rank() != comm_->rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Zero2Optimizer: the host communicator (rank ", host_comm_->rank(), " of ", host_comm_->world_size(),
        ") does not match the data communicator (rank ", comm_->rank(), " of ", comm_->world_size(), ")"));
  }
  const absl::Duration timeout = comm_->options().timeout;
  ZF_ASSIGN_OR_RETURN(flat_params_,
                      device_->Allocate(plan_.flat_numel() * elem_bytes(), device::MemoryKind::kDevice));
  if (options_.offload.enabled) {
    ZF_ASSIGN_OR_RETURN(auto updater, devices.offload_updater(OffloadUpdaterArgs{
                                          &plan_, options_.param_dtype, device_, options_.offload,
                                          options_.moments, timeout, &profile_}));
    if (updater == nullptr) {
      return absl::InternalError("Zero2Optimizer: the offload updater factory gave null");
    }
    offload_ = updater.get();
    updater_ = std::move(updater);
    if (options_.offload.delayed()) update_thread_ = std::make_unique<core::SerialExecutor>();
  } else {
    ZF_ASSIGN_OR_RETURN(updater_,
                        DeviceShardUpdater::Create(&plan_, options_.param_dtype, device_, timeout,
                                                   options_.micro_batches_per_step == 1, options_.moments));
  }
  ReducerOptions ro;
  ro.param_dtype = options_.param_dtype;
  ro.accumulation_mode = options_.accumulation_mode;
  ro.max_staging_buffers = options_.max_staging_buffers;
  ZF_ASSIGN_OR_RETURN(reducer_,
                      GradientReducer::Create(&plan_, ro, comm_, device_, updater_.get(), &profile_));
  publisher_ = std::make_unique<ParameterPublisher>(&plan_, options_.param_dtype, comm_, device_,
                                                    flat_params_.as<char>(), &profile_);
  profile_.BeginStep();
  return absl::OkStatus();
}

void* Zero2Optimizer::param_data(size_t i) {
  return flat_params_.at(plan_.placement(i).flat_offset * elem_bytes());
}

absl::Status Zero2Optimizer::InitializeFromParameters(bool broadcast) {
  ZF_RETURN_IF_ERROR(Flush());
  device::Stream& compute = device_->compute_stream();
  if (broadcast) {
    ZF_RETURN_IF_ERROR(publisher_->Broadcast(&compute));
    ZF_RETURN_IF_ERROR(publisher_->Finish());
  }
  ZF_RETURN_IF_ERROR(updater_->InitializeMaster(flat_params_.as<char>(), compute));
  return updater_->Synchronize(comm_->options().timeout);
}

absl::Status Zero2Optimizer::RestoreFromShards(int64_t step, const LossScalerState& scaler) {
  ZF_RETURN_IF_ERROR(Flush());
  if (step < 0) return absl::InvalidArgumentError(absl::StrCat("RestoreFromShards: step ", step, " < 0"));
  step_ = step;
  scaler_.Restore(scaler);
  ZF_ASSIGN_OR_RETURN(device::Stream * written, updater_->PublishMaster(flat_params_.as<char>()));
  for (size_t b = 0; b < plan_.buckets().size(); ++b) ZF_RETURN_IF_ERROR(publisher_->Gather(b, written));
  ZF_RETURN_IF_ERROR(publisher_->Finish());
  return Flush();
}

absl::Status Zero2Optimizer::BeginMicroBatch(bool last_of_step) {
  return reducer_->BeginMicroBatch(last_of_step);
}

absl::Status Zero2Optimizer::EndMicroBatch(double units) {
  if (!reducer_->in_micro_batch()) {
    return absl::FailedPreconditionError("EndMicroBatch without BeginMicroBatch");
  }
  if (!(units >= 0.0))
    return absl::InvalidArgumentError(absl::StrCat("EndMicroBatch: units ", units, " < 0"));
  local_units_ += units;
  return reducer_->EndMicroBatch();
}

absl::StatusOr<double> Zero2Optimizer::GlobalSums(double* units) {
  ZF_ASSIGN_OR_RETURN(const double sum_of_squares, updater_->SumOfSquares());
  // One host all-reduce carries both the squared norm and the unit count (NCCL does not take host scalars).
  norm_sums_[0] = sum_of_squares;
  norm_sums_[1] = local_units_;
  local_units_ = 0.0;
  comm::Buffer sums{norm_sums_, 2, DType::kFloat64, comm::Device::kCpu};
  ZF_RETURN_IF_ERROR(
      comm::WaitFor(host_comm_->AllReduce(sums, comm::ReduceOp::kSum), host_comm_->options().timeout));
  *units = norm_sums_[1];
  return norm_sums_[0];
}

absl::Status Zero2Optimizer::ResetGradients() {
  ZF_RETURN_IF_ERROR(updater_->ZeroGradients());
  return reducer_->ResetAfterStep();
}

absl::Status Zero2Optimizer::UpdateAndGather(const optim::AdamWHyper& hyper, float grad_scale) {
  // Bucket b's all-gather runs while bucket b+1 is being updated.
  for (size_t b = 0; b < plan_.buckets().size(); ++b) {
    device::Stream* written;
    {
      ScopedStage stage(&profile_, Stage::kCpuAdamW);
      ZF_ASSIGN_OR_RETURN(written, updater_->Update(b, hyper, step_, grad_scale, publisher_->owned_block(b)));
    }
    ZF_RETURN_IF_ERROR(publisher_->Gather(b, written));
  }
  return publisher_->Finish();
}

void Zero2Optimizer::UpdateInBackground(const optim::AdamWHyper& hyper, float grad_scale) {
  // The next micro-batches reduce into the other gradient buffer meanwhile. The hyper-parameters are a copy:
  // a learning-rate change for the next step cannot reach this one.
  const int used = offload_->FlipGradients();
  const int64_t step = step_;
  update_pending_ = true;
  update_thread_->Submit([this, used, hyper, step, grad_scale] {
    ScopedStage stage(&profile_, Stage::kCpuAdamW);
    offload_->UpdateOnHost(used, hyper, step, grad_scale);
  });
}

absl::Status Zero2Optimizer::PublishDelayed() {
  if (!update_pending_) return absl::OkStatus();
  update_pending_ = false;
  {
    ScopedStage wait(&profile_, Stage::kWait);
    ZF_RETURN_IF_ERROR(update_thread_->Drain(comm_->options().timeout));
  }
  for (size_t b = 0; b < plan_.buckets().size(); ++b) {
    ZF_ASSIGN_OR_RETURN(device::Stream * written,
                        offload_->CopyBucketToDevice(b, publisher_->owned_block(b)));
    ZF_RETURN_IF_ERROR(publisher_->Gather(b, written));
  }
  return publisher_->Finish();
}

absl::Status Zero2Optimizer::Flush() {
  ZF_RETURN_IF_ERROR(PublishDelayed());
  const absl::Duration timeout = comm_->options().timeout;
  ZF_RETURN_IF_ERROR(updater_->Synchronize(timeout));
  return device_->compute_stream().Synchronize(timeout);
}

absl::StatusOr<StepResult> Zero2Optimizer::Step(float learning_rate, double min_units) {
  if (reducer_->in_micro_batch())
    return absl::FailedPreconditionError("Step inside a micro-batch: call EndMicroBatch first");
  // The device clock's update interval: from here (after the backward's kernels on the compute stream) to
  // the end of the step's work there; closed before each EndStep marks the step's end.
  std::optional<ScopedDeviceStage> update;
  update.emplace(device_timeline_.get(), DeviceStage::kUpdate);
  StepResult r;
  r.loss_scale = scaler_.scale();
  r.learning_rate = learning_rate;
  const optim::AdamWHyper hyper = optim::StepHyper(options_.adamw, learning_rate);
  ZF_ASSIGN_OR_RETURN(const double sum_of_squares, GlobalSums(&r.units));
  r.units = std::max(r.units, min_units);
  if (!(r.units > 0.0)) {
    ZF_RETURN_IF_ERROR(ResetGradients());
    return absl::FailedPreconditionError(
        "Step: no rank reported any samples/tokens since the last step (EndMicroBatch units sum to 0); "
        "the gradient cannot be normalised");
  }
  // A delayed update from the previous step is published first: its parameters become visible now, one step
  // late by design.
  ZF_RETURN_IF_ERROR(PublishDelayed());
  // Non-finite sums mean some rank overflowed: every rank sees the same all-reduced value and skips.
  r.applied = scaler_.Update(!std::isfinite(sum_of_squares));
  if (r.applied) {
    const double denom = static_cast<double>(r.loss_scale) * r.units;
    const double norm = std::sqrt(sum_of_squares) / denom;
    double clip = 1.0;
    if (options_.max_grad_norm > 0.0f) clip = std::min(1.0, options_.max_grad_norm / (norm + 1e-6));
    r.grad_norm = static_cast<float>(norm);
    r.clip_coef = static_cast<float>(clip);
    const float grad_scale = static_cast<float>(clip / denom);
    const bool delay = options_.offload.delayed() && step_ >= options_.offload.delayed_update_from;
    ++step_;
    if (delay) {
      UpdateInBackground(hyper, grad_scale);
      ZF_RETURN_IF_ERROR(reducer_->ResetAfterStep());
      r.step = step_;
      update.reset();
      r.breakdown = profile_.EndStep();
      return r;
    }
    ZF_RETURN_IF_ERROR(UpdateAndGather(hyper, grad_scale));
  }
  r.step = step_;
  ZF_RETURN_IF_ERROR(ResetGradients());
  update.reset();
  r.breakdown = profile_.EndStep();
  return r;
}

Zero2MemoryStats Zero2Optimizer::memory() const {
  Zero2MemoryStats m;
  const ShardMemory s = updater_->memory();
  // The moments' bytes split evenly: 8-bit moments (codes, scales, the packed fp32 ones, the two maps) are
  // the same size for m and v.
  m.master_bytes = s.master_bytes;
  m.exp_avg_bytes = (s.state_bytes - s.master_bytes) / 2;
  m.exp_avg_sq_bytes = s.state_bytes - s.master_bytes - m.exp_avg_bytes;
  m.shard_grad_bytes = s.shard_grad_bytes;
  m.flat_param_bytes = flat_params_.bytes();
  m.flat_grad_bytes = reducer_->flat_grad_bytes();
  m.staging_bytes_peak = reducer_->staging_bytes();
  m.recv_bytes = reducer_->recv_bytes();
  m.pinned_bytes = s.pinned_bytes;
  m.host_state_bytes = s.host_bytes;
  return m;
}

}  // namespace zerofit::sharding
