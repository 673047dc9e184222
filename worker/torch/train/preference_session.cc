#include "worker/torch/train/preference_session.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/status_macros.h"
#include "jobspec/job_plan.h"
#include "jobspec/step_scheduler.h"
#include "sharding/checkpoint.h"
#include "worker/data/preference_dataset.h"
#include "worker/torch/train/micro_batch_loss.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/session_setup.h"
#include "worker/torch/train/zero2_binding.h"

namespace zerofit::worker {
namespace {

using Task = PreferenceTrainOptions::Task;

absl::Status SumOverRanks(PairMetrics* m, comm::Communicator* comm) {
  std::array<double, pair_metric::kCount> v = PairMetricValues(*m);
  ZF_RETURN_IF_ERROR(comm::WaitFor(
      comm->AllReduce(comm::Buffer{v.data(), v.size(), core::DType::kFloat64}, comm::ReduceOp::kSum),
      comm->options().timeout));
  *m = PairMetricsOf(v);
  return absl::OkStatus();
}

// This rank's micro-batches on the host, every pair index checked.
absl::StatusOr<std::vector<PairTensors>> HostBatches(const std::vector<data::PreferencePair>& train,
                                                     const std::vector<std::vector<uint64_t>>& micro,
                                                     const BatchFormat& format) {
  std::vector<PairTensors> batches(micro.size());
  for (size_t k = 0; k < micro.size(); ++k) {
    if (micro[k].empty()) continue;  // nothing for this rank in this micro-step
    for (uint64_t i : micro[k]) {
      if (i >= train.size()) {
        return absl::OutOfRangeError(absl::StrCat("Step: pair ", i, " >= ", train.size(), " training pairs"));
      }
    }
    ZF_ASSIGN_OR_RETURN(batches[k], MakePairTensors(train, micro[k], format));
  }
  return batches;
}

// The step's pairs and chosen tokens over every rank's micro-batches (one all-reduce of two numbers): what
// a weighted NLL term's share per chosen token needs before the first backward (BackwardLoss).
absl::StatusOr<std::pair<double, double>> StepPairsAndChosenTokens(const std::vector<PairTensors>& batches,
                                                                   comm::Communicator* comm) {
  double v[2] = {0, 0};
  for (const PairTensors& b : batches) {
    v[0] += static_cast<double>(b.pair_ids.size());
    v[1] += static_cast<double>(b.scored_tokens);
  }
  ZF_RETURN_IF_ERROR(
      comm::WaitFor(comm->AllReduce(comm::Buffer{v, 2, core::DType::kFloat64}, comm::ReduceOp::kSum),
                    comm->options().timeout));
  return std::pair{v[0], v[1]};
}

// Held-out evaluation, pairs sharded across ranks. DPO compares against a resident copy of the reference
// (precomputed tables only cover training pairs). One host read of the metrics, then one all-reduce.
absl::StatusOr<EvalReport> Evaluate(LlamaModel& policy, ReferenceModel* eval_reference,
                                    const std::vector<data::PreferencePair>& test, const BatchFormat& format,
                                    const PreferenceTrainOptions& o, int64_t eval_batch,
                                    comm::Communicator* comm, const torch::Device& device) {
  const std::vector<std::vector<uint64_t>> chunks =
      StridedChunks(test.size(), comm->rank(), comm->world_size(), eval_batch);
  ZF_ASSIGN_OR_RETURN(const torch::Tensor metrics,
                      EvaluateChunks(policy, eval_reference, test, chunks, format, o, device));
  EvalReport r;
  r.metrics = ReadPairMetrics(metrics);
  ZF_RETURN_IF_ERROR(SumOverRanks(&r.metrics, comm));
  return r;
}

}  // namespace

absl::StatusOr<Task> ParseTask(const std::string& name) {
  if (name == "reward") return Task::kReward;
  if (name == "dpo") return Task::kDpo;
  if (name == "sft") return Task::kSft;
  if (name == "grpo") return Task::kGrpo;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown task '", name, "'; expected reward, dpo, sft or grpo"));
}

core::LrScheduleOptions EffectiveSchedule(const PreferenceTrainOptions& o) {
  core::LrScheduleOptions s = o.schedule;
  // GRPO applies `iterations` updates per step; the schedule counts updates.
  if (s.total_steps <= 0) s.total_steps = o.steps * (o.task == Task::kGrpo ? o.grpo.iterations : 1);
  return s;
}

struct PreferenceSession::State {
  comm::Communicator* comm = nullptr;  // host: metrics and scalars
  TrainingBackend backend;             // device, LibTorch device, ZeRO-2's data communicator
  core::HfModelConfig config;
  std::vector<data::PreferencePair> train, test;
  data::DataReport data_report;
  BatchFormat format;
  LlamaModel policy{nullptr};
  std::unique_ptr<ReferenceModel> reference, eval_reference;
  std::unique_ptr<Zero2Binding> binding;
  ReferenceModel* eval_ref() const { return eval_reference ? eval_reference.get() : reference.get(); }
};

PreferenceSession::PreferenceSession(std::unique_ptr<State> state, const PreferenceTrainOptions& options,
                                     const RuntimeOptions& runtime)
    : state_(std::move(state)), options_(options), runtime_(runtime) {}

PreferenceSession::~PreferenceSession() = default;

absl::StatusOr<std::unique_ptr<PreferenceSession>> PreferenceSession::Create(const PreferenceTrainOptions& o,
                                                                             const RuntimeOptions& runtime,
                                                                             comm::Communicator* comm) {
  ZF_RETURN_IF_ERROR(core::ValidateLrSchedule(EffectiveSchedule(o)));
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, LoadModelConfig(o));
  if (o.task == Task::kReward) config.num_labels = 1;  // one scalar score (LlamaForSequenceClassification)
  data::DataSource source = o.data;
  source.sft = o.task == Task::kSft;  // SFT examples (or pairs' chosen responses): one row each
  ZF_ASSIGN_OR_RETURN(data::TrainingData data, data::LoadTrainingData(source, config, o.max_length));

  auto st = std::make_unique<State>();
  st->comm = comm;
  ZF_ASSIGN_OR_RETURN(st->backend, SessionBackend(o, runtime, comm));
  const torch::Device dev = st->backend.torch_device;
  st->train = std::move(data.train);
  st->test = std::move(data.test);
  if (o.eval_max_samples > 0 && st->test.size() > static_cast<size_t>(o.eval_max_samples)) {
    st->test.resize(static_cast<size_t>(o.eval_max_samples));
  }
  st->data_report = std::move(data.report);
  st->format = BatchFormatOf(config, o.task == Task::kReward);
  if (o.task == Task::kSft) st->format.rows = data::PairRows::kChosenOnly;
  st->config = config;
  try {
    ZF_ASSIGN_OR_RETURN(const std::optional<core::SafetensorsModel> weights, OpenInitWeights(o));
    auto initial = [&]() { return InitialModel(config, o, runtime, weights, dev); };
    ZF_ASSIGN_OR_RETURN(st->policy, initial());
    const bool referenced = o.task == Task::kDpo && DpoNeedsReference(o.dpo);  // SimPO, ORPO keep none
    if (referenced && o.reference == ReferenceStrategy::kLoraBase) {
      ZF_ASSIGN_OR_RETURN(st->reference, ReferenceModel::Create(st->policy, o.reference));
    } else if (referenced) {
      // The reference is the initial policy: same seed, same weights.
      ZF_ASSIGN_OR_RETURN(LlamaModel ref_model, initial());
      ZF_ASSIGN_OR_RETURN(st->reference, ReferenceModel::Create(std::move(ref_model), o.reference));
      ZF_RETURN_IF_ERROR(st->reference->Precompute(st->train, st->format.pad_id, runtime.eval_batch, comm));
      if (o.reference == ReferenceStrategy::kPrecomputed) {
        ZF_ASSIGN_OR_RETURN(LlamaModel eval_model, initial());
        ZF_ASSIGN_OR_RETURN(st->eval_reference,
                            ReferenceModel::Create(std::move(eval_model), ReferenceStrategy::kResident));
      }
    }
    ZF_ASSIGN_OR_RETURN(st->binding,
                        BindPolicy(st->policy, o, runtime, st->backend, comm, o.gradient_accumulation));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the training session failed: ", e.what()));
  }
  return std::unique_ptr<PreferenceSession>(new PreferenceSession(std::move(st), o, runtime));
}

size_t PreferenceSession::num_train_pairs() const { return state_->train.size(); }

const data::DataReport& PreferenceSession::data_report() const { return state_->data_report; }

std::vector<int64_t> PreferenceSession::TrainLengths() const {
  std::vector<int64_t> lengths;
  lengths.reserve(state_->train.size());
  for (const data::PreferencePair& p : state_->train) {
    lengths.push_back(static_cast<int64_t>(p.prompt.size() + p.chosen.size() + p.rejected.size()));
  }
  return lengths;
}

absl::StatusOr<StepReport> PreferenceSession::Step(int64_t step,
                                                   const std::vector<std::vector<uint64_t>>& micro) {
  State& st = *state_;
  StepReport sr;
  sr.step = step;
  sr.lr = core::LearningRateAt(EffectiveSchedule(options_), step);
  try {
    ResetPeakMemory(st.backend);  // the step's own device peak (training_backend.h)
    const int k_total = static_cast<int>(micro.size());
    if (k_total < 1) return absl::InvalidArgumentError("Step: no micro-batches");
    ZF_ASSIGN_OR_RETURN(std::vector<PairTensors> batches, HostBatches(st.train, micro, st.format));
    const double nll_weight = options_.task == Task::kDpo ? DpoNllWeight(options_.dpo) : 0.0;
    std::pair<double, double> totals{0,
                                     0};  // the step's pairs and chosen tokens, where an NLL term needs them
    if (nll_weight > 0) {
      ZF_ASSIGN_OR_RETURN(totals, StepPairsAndChosenTokens(batches, st.comm));
    }
    // The micro-batches' metrics, summed on the device and read to the host once, after the step.
    torch::Tensor metrics = ZeroPairMetrics(st.backend.torch_device);
    for (int k = 0; k < k_total; ++k) {
      const bool last = k + 1 == k_total;
      if (micro[k].empty()) {
        // Nothing for this rank in this micro-step: take part in the collectives with zero gradients.
        ZF_RETURN_IF_ERROR(st.binding->Backward(
            torch::zeros({}, torch::TensorOptions().device(st.backend.torch_device).requires_grad(true)),
            last, 0));
        continue;
      }
      const PairTensors b = OnDevice(std::move(batches[k]), st.backend.torch_device);
      absl::StatusOr<LossOutput> loss;
      {
        sharding::ScopedStage forward(st.binding->optimizer().profile(), sharding::Stage::kForward);
        loss = MicroBatchLoss(st.policy, st.reference.get(), options_, b);
      }
      ZF_ASSIGN_OR_RETURN(LossOutput out, std::move(loss));
      ZF_RETURN_IF_ERROR(
          st.binding->Backward(BackwardLoss(out, nll_weight, totals.first, totals.second), last, out.units));
      metrics += out.metrics;
    }
    ZF_ASSIGN_OR_RETURN(sr.result, st.binding->Step(sr.lr));
    sr.metrics = ReadPairMetrics(metrics);
  } catch (const std::exception& e) {
    return StepFailure(step, e);
  }
  sr.local_metrics = sr.metrics;
  ZF_RETURN_IF_ERROR(SumOverRanks(&sr.metrics, st.comm));
  sr.peak = ReadPeakMemory(st.backend);
  return sr;
}

absl::StatusOr<EvalReport> PreferenceSession::Evaluate() {
  State& st = *state_;
  ZF_RETURN_IF_ERROR(st.binding->optimizer().Flush());
  try {
    return worker::Evaluate(st.policy, st.eval_ref(), st.test, st.format, options_, runtime_.eval_batch,
                            st.comm, st.backend.torch_device);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("evaluation failed: ", e.what()));
  }
}

absl::Status PreferenceSession::SaveCheckpoint(const std::string& root, const std::string& extra, int keep) {
  return SaveSessionCheckpoint(*state_->binding, root, extra, keep);
}

absl::StatusOr<int64_t> PreferenceSession::LoadCheckpoint(const std::string& root) {
  ZF_ASSIGN_OR_RETURN(sharding::CheckpointInfo info,
                      sharding::LoadCheckpoint(state_->binding->optimizer(), root));
  return info.step;
}

absl::Status PreferenceSession::Export(const std::string& dir) {
  return ExportPolicy(state_->comm->rank(), *state_->binding, state_->policy, state_->config, options_, dir);
}

const torch::Device& PreferenceSession::torch_device() const { return state_->backend.torch_device; }

TrainReport PreferenceSession::Summary() const {
  TrainReport r;
  r.memory = state_->binding->optimizer().memory();
  r.reference_device_bytes = state_->reference ? state_->reference->device_bytes() : 0;
  return r;
}

bool EvalDue(const PreferenceTrainOptions& o, int64_t step) {
  return jobspec::EvalDue(o.steps, o.eval_every, step);
}

absl::StatusOr<TrainReport> TrainPreferences(const PreferenceTrainOptions& o, const RuntimeOptions& runtime,
                                             comm::Communicator* comm, const TrainHooks& hooks) {
  if (o.global_batch < comm->world_size() * o.gradient_accumulation) {
    return absl::InvalidArgumentError(absl::StrCat("global_batch ", o.global_batch,
                                                   " is smaller than world size ", comm->world_size(),
                                                   " x gradient_accumulation ", o.gradient_accumulation));
  }
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<PreferenceSession> session,
                      PreferenceSession::Create(o, runtime, comm));
  ZF_ASSIGN_OR_RETURN(EvalReport before, session->Evaluate());
  if (hooks.on_start) ZF_RETURN_IF_ERROR(hooks.on_start(*session, before));
  ZF_ASSIGN_OR_RETURN(const jobspec::StepScheduler scheduler,
                      LocalScheduler(o, comm->world_size(), session->TrainLengths()));
  EvalReport last = before;
  for (int64_t step = 0; step < o.steps; ++step) {  // 0-based, like every step number (core/lr_schedule.h)
    const jobspec::StepAssignment assignment = scheduler.Assign(step);
    ZF_ASSIGN_OR_RETURN(StepReport sr, session->Step(step, assignment.ranks[comm->rank()]));
    if (EvalDue(o, step)) {
      ZF_ASSIGN_OR_RETURN(last, session->Evaluate());
      sr.eval = last;
    }
    if (hooks.on_step) ZF_RETURN_IF_ERROR(hooks.on_step(sr));
  }
  TrainReport report = session->Summary();
  report.before = before;
  report.after = last;  // the evaluation after the last step
  if (!o.export_dir.empty()) ZF_RETURN_IF_ERROR(session->Export(o.export_dir));
  return report;
}

}  // namespace zerofit::worker
