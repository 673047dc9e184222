#include "worker/torch/preference_trainer.h"

#include <fstream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/hf_config.h"
#include "core/safetensors.h"
#include "core/status_macros.h"
#include "worker/data/pair_sharding.h"
#include "worker/data/preference_dataset.h"
#include "worker/data/sampler.h"
#include "worker/torch/pair_tensors.h"
#include "worker/torch/zero2_binding.h"

namespace zerofit::worker {
namespace {

using Task = PreferenceTrainOptions::Task;

// Loss (sum over the micro-batch's pairs) and metrics of one micro-batch.
absl::StatusOr<LossOutput> MicroBatchLoss(LlamaModel& policy, ReferenceModel* reference,
                                          const PreferenceTrainOptions& o, const PairTensors& b) {
  const int64_t n = b.tokens.size(0) / 2;
  if (o.task == Task::kReward) {
    const torch::Tensor scores = policy->Scores(b.tokens, b.lengths);
    return BradleyTerryLoss(scores.slice(0, 0, n), scores.slice(0, n));
  }
  const torch::Tensor pol = ResponseLogProbs(policy->TokenLogProbs(b.tokens), b.starts, b.lengths);
  if (o.task == Task::kSft) {
    // Negative log-likelihood of the chosen responses; the margin is log p(chosen) - log p(rejected).
    const torch::Tensor nll = -pol.slice(0, 0, n);
    PairMetrics m;
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor margin = pol.slice(0, 0, n) - pol.slice(0, n);
      m.loss_sum = nll.sum().item<double>();
      m.correct = (margin > 0).sum().item<double>();
      m.margin_sum = margin.sum().item<double>();
      m.pairs = static_cast<double>(n);
    }
    return LossOutput{nll.sum(), m};
  }
  ZF_ASSIGN_OR_RETURN(torch::Tensor ref,
                      reference->ResponseLogProbs(b.tokens, b.starts, b.lengths, b.pair_ids));
  return DpoLoss(pol.slice(0, 0, n), pol.slice(0, n), ref.slice(0, 0, n), ref.slice(0, n), o.dpo);
}

absl::Status SumOverRanks(PairMetrics* m, comm::Communicator* comm) {
  double v[4] = {m->loss_sum, m->correct, m->margin_sum, m->pairs};
  ZF_RETURN_IF_ERROR(
      comm::WaitFor(comm->AllReduce(comm::Buffer{v, 4, core::DType::kFloat64}, comm::ReduceOp::kSum),
                    comm->options().timeout));
  *m = PairMetrics{v[0], v[1], v[2], v[3]};
  return absl::OkStatus();
}

// Held-out evaluation, pairs sharded across ranks. DPO compares against a resident copy of the reference
// (precomputed tables only cover training pairs).
absl::StatusOr<EvalReport> Evaluate(LlamaModel& policy, ReferenceModel* eval_reference,
                                    const std::vector<data::PreferencePair>& test, int32_t pad_id,
                                    const PreferenceTrainOptions& o, comm::Communicator* comm) {
  torch::NoGradGuard no_grad;
  EvalReport r;
  for (const auto& ids : StridedChunks(test.size(), comm->rank(), comm->world_size(), o.eval_batch)) {
    ZF_ASSIGN_OR_RETURN(PairTensors b, MakePairTensors(test, ids, pad_id));
    ZF_ASSIGN_OR_RETURN(LossOutput out, MicroBatchLoss(policy, eval_reference, o, b));
    r.metrics += out.metrics;
  }
  ZF_RETURN_IF_ERROR(SumOverRanks(&r.metrics, comm));
  return r;
}

LlamaModel MakeModel(const core::HfModelConfig& config, const PreferenceTrainOptions& o) {
  torch::manual_seed(static_cast<uint64_t>(o.seed));  // same initial weights on every rank
  LlamaOptions mo = o.model;
  mo.reward_head = o.task == Task::kReward;
  return LlamaModel(config, mo);
}

}  // namespace

absl::StatusOr<Task> ParseTask(const std::string& name) {
  if (name == "reward") return Task::kReward;
  if (name == "dpo") return Task::kDpo;
  if (name == "sft") return Task::kSft;
  return absl::InvalidArgumentError(absl::StrCat("unknown task '", name, "'; expected reward, dpo or sft"));
}

absl::StatusOr<TrainReport> TrainPreferences(const PreferenceTrainOptions& o, comm::Communicator* comm,
                                             const std::function<void(const StepReport&)>& on_step) {
  if (o.global_batch < comm->world_size() * o.micro_batches) {
    return absl::InvalidArgumentError(absl::StrCat("global_batch ", o.global_batch,
                                                   " is smaller than world size ", comm->world_size(),
                                                   " x micro_batches ", o.micro_batches));
  }
  // Data and model description. Training reads token ids (*_ids.jsonl, from zerofit_tokenize or the example
  // generator): SentencePiece cannot be loaded next to LibTorch (see worker/data/CMakeLists.txt).
  ZF_ASSIGN_OR_RETURN(core::HfModelConfig config, core::LoadHfConfig(o.data_dir + "/config.json"));
  if (o.task == Task::kReward) config.num_labels = 1;  // one scalar score (LlamaForSequenceClassification)
  if (!config.bos_token_id || !config.eos_token_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.data_dir, "/config.json: fields 'bos_token_id' and 'eos_token_id' are required"));
  }
  data::PreferenceDataOptions dopt;
  dopt.max_length = o.max_length;
  dopt.max_prompt_length = o.max_length / 2;
  dopt.bos_id = static_cast<int32_t>(*config.bos_token_id);
  dopt.eos_id = static_cast<int32_t>(*config.eos_token_id);
  dopt.vocab_size = static_cast<int32_t>(config.vocab_size);
  auto load = [&](const std::string& split) -> absl::StatusOr<std::vector<data::PreferencePair>> {
    const std::string ids = o.data_dir + "/" + split + "_ids.jsonl";
    if (!std::ifstream(ids)) {
      return absl::NotFoundError(absl::StrCat(ids,
                                              " not found: tokenize the text pairs first: zerofit_tokenize "
                                              "--tokenizer ",
                                              o.data_dir, "/tokenizer.model --in ", o.data_dir, "/", split,
                                              ".jsonl --out ", ids));
    }
    return data::LoadPreferenceJsonl(ids, nullptr, dopt);
  };
  ZF_ASSIGN_OR_RETURN(auto train, load("train"));
  ZF_ASSIGN_OR_RETURN(auto test, load("test"));
  const int32_t pad = static_cast<int32_t>(config.pad_token_id.value_or(*config.eos_token_id));

  TrainReport report;
  try {
    // The initial model: seeded initialisation, then the --init weights (opened and validated once).
    std::optional<core::SafetensorsModel> weights;
    if (!o.init_weights.empty()) {
      ZF_ASSIGN_OR_RETURN(weights, core::SafetensorsModel::Open(o.init_weights));
    }
    auto initial = [&]() -> absl::StatusOr<LlamaModel> {
      LlamaModel m = MakeModel(config, o);
      if (weights) ZF_RETURN_IF_ERROR(m->LoadWeights(*weights));
      return m;
    };
    ZF_ASSIGN_OR_RETURN(LlamaModel policy, initial());
    std::unique_ptr<ReferenceModel> reference, eval_reference;
    if (o.task == Task::kDpo) {
      // The reference is the initial policy: same seed, same weights.
      ZF_ASSIGN_OR_RETURN(LlamaModel ref_model, initial());
      ZF_ASSIGN_OR_RETURN(reference, ReferenceModel::Create(std::move(ref_model), o.reference));
      ZF_RETURN_IF_ERROR(reference->Precompute(train, pad, o.eval_batch, comm));
      if (o.reference == ReferenceStrategy::kPrecomputed) {
        ZF_ASSIGN_OR_RETURN(LlamaModel eval_model, initial());
        ZF_ASSIGN_OR_RETURN(eval_reference,
                            ReferenceModel::Create(std::move(eval_model), ReferenceStrategy::kResident));
      }
    }
    ReferenceModel* eval_ref = eval_reference ? eval_reference.get() : reference.get();
    ZF_ASSIGN_OR_RETURN(report.before, Evaluate(policy, eval_ref, test, pad, o, comm));

    // ZeRO-2 over the trainable parameters (LoRA adapters and the score head only, when LoRA is on).
    sharding::Zero2Options zo;
    zo.bucket_bytes = o.bucket_bytes;
    zo.accumulation = o.accumulation;
    zo.adamw.lr = o.lr;
    zo.adamw.weight_decay = o.weight_decay;
    zo.max_grad_norm = o.max_grad_norm;
    zo.offload = o.offload;
    zo.param_dtype = o.model.dtype == torch::kBFloat16  ? core::DType::kBFloat16
                     : o.model.dtype == torch::kFloat16 ? core::DType::kFloat16
                                                        : core::DType::kFloat32;
    ZF_ASSIGN_OR_RETURN(
        auto binding,
        Zero2Binding::Bind(*policy, zo, comm, [](const std::string& name, const torch::Tensor& p) {
          return p.dim() >= 2;  // no decay for norms and biases
        }));
    data::Sampler sampler(train.size(), o.seed);
    for (int64_t step = 1; step <= o.steps; ++step) {
      const std::vector<uint64_t> global = sampler.Next(static_cast<uint64_t>(o.global_batch));
      ZF_ASSIGN_OR_RETURN(auto micro,
                          data::ShardPairs(global, comm->rank(), comm->world_size(), o.micro_batches));
      StepReport sr;
      sr.step = step;
      for (int k = 0; k < o.micro_batches; ++k) {
        const bool last = k + 1 == o.micro_batches;
        if (micro[k].empty()) {
          // Nothing for this rank in this micro-step: take part in the collectives with zero gradients.
          ZF_RETURN_IF_ERROR(binding->Backward(torch::zeros({}, torch::requires_grad()), last, 0));
          continue;
        }
        ZF_ASSIGN_OR_RETURN(PairTensors b, MakePairTensors(train, micro[k], pad));
        ZF_ASSIGN_OR_RETURN(LossOutput out, MicroBatchLoss(policy, reference.get(), o, b));
        ZF_RETURN_IF_ERROR(binding->Backward(out.loss_sum, last, out.metrics.pairs));
        sr.metrics += out.metrics;
      }
      ZF_ASSIGN_OR_RETURN(sr.result, binding->Step());
      ZF_RETURN_IF_ERROR(SumOverRanks(&sr.metrics, comm));
      if (on_step) on_step(sr);
    }
    ZF_RETURN_IF_ERROR(binding->optimizer().Flush());
    report.memory = binding->optimizer().memory();
    report.reference_device_bytes = reference ? reference->device_bytes() : 0;
    ZF_ASSIGN_OR_RETURN(report.after, Evaluate(policy, eval_ref, test, pad, o, comm));
    if (!o.export_dir.empty() && comm->rank() == 0) {
      ZF_RETURN_IF_ERROR(policy->ExportHf(o.export_dir, config));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("preference training failed: ", e.what()));
  }
  return report;
}

}  // namespace zerofit::worker
