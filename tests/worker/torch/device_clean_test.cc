// The trainers' forward, loss, metrics and backward never mix host and device tensors (issue 28: DPO's
// evaluation compared a host arange with device lengths and failed on cuda:0 with "Expected all tensors to be
// on the same device"). CI has no GPU, so this runs the trainers' own code (micro_batch_loss.h: the functions
// PreferenceSession calls) with the models and batches on PyTorch's `meta` device, where tensors have shapes,
// dtypes and a device but no data, next to the host tensors the code makes itself.
//
// Why meta, and what had to be added (measured on LibTorch 1.13):
//  - TensorIterator ops (arithmetic, comparisons, &, |) raise the same "same device" error on meta as on CUDA
//    when a meta tensor meets a non-scalar CPU tensor; that alone catches the DPO bug. But meta kernels of
//    other ops do not check devices at all: matmul, gather, masked_fill and cat accept a CPU operand next to
//    a meta one, where CUDA raises. So every op the code calls goes through DeviceCheck below, a boxed
//    fallback on the dispatcher's TESTING_ONLY_GenericMode key (switched on per thread, above autograd, so it
//    also sees composite ops before they decompose and the backward pass): it raises the CUDA error when an
//    op's tensor arguments lie on two devices, with the exceptions CUDA makes (0-dim CPU tensors, as
//    TensorIterator allows them; copies and `to`, which cross devices by design). Known gap: a
//    non-elementwise CUDA op that refuses a 0-dim CPU tensor passes here.
//  - Some ops have no meta kernel in 1.13 (index_select, hence embedding; embedding_dense_backward;
//    log_sigmoid forward/backward; where; logical_or; logical_and; logical_not; index_copy_; the full max,
//    which the decode steps use): MetaShapes registers shape-only kernels
//    for the ones the dispatcher lacks at run time (newer LibTorch has some of them and keeps its own).
//  - Meta tensors hold no data, so a read to the host cannot happen: DeviceCheck answers every read of a
//    meta tensor (.item(), a copy to a CPU tensor) with zeros and counts it. The count is the number of
//    host synchronisations a GPU would make, so the tests also pin those down: none in any forward (a reward
//    batch brings its score positions from the host; the checking LlamaModelImpl::Scores would read once),
//    and one read of the metrics per step or evaluation (ReadPairMetrics), and none in the fixed-shape decode
//    step that a CUDA graph records. Zeros pass the model's input
//    checks (they are "no failure" flags) and make the metrics' values meaningless here; the
//    values are checked on the CPU by objectives_test, llama_model_test and preference_training_np2.
// The alternative of a second CPU-like device is not available: LibTorch's CPU kernels serve only the CPU
// device, and a fake backend would have to wrap every op; meta is a real device with real dispatch.
//
// Not covered here: the ZeRO-2 engine's step (its buffers need data; the gpu tier runs it on a GPU), the
// empty micro-batch of PreferenceSession::Step (a zero scalar made on the training device) and
// TinyTransformer (LayerNorm and cross-entropy have no meta kernels in 1.13; its mask is made on x's device).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/local/local_communicator.h"
#include "core/hf_config.h"
#include "tests/support/tiny_llama_config.h"
#include "worker/torch/model/kv_cache.h"
#include "worker/torch/model/llama_model.h"
#include "worker/torch/model/static_decode.h"
#include "worker/torch/train/micro_batch_loss.h"
#include "worker/torch/train/objectives.h"
#include "worker/torch/train/pair_tensors.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/reference_model.h"

namespace zerofit::worker {
namespace {

using Task = PreferenceTrainOptions::Task;

constexpr c10::DispatchKey kCheckKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

// Reads of meta tensors to the host since the last reset. A process-wide counter because the dispatcher calls
// DeviceCheck through a plain function pointer (and the autograd engine may call it from its own thread).
std::atomic<int64_t>& HostReads() {
  static std::atomic<int64_t> reads{0};
  return reads;
}

void CollectTensors(const c10::IValue& v, std::vector<at::Tensor>* out) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out->push_back(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (t.defined()) out->push_back(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) CollectTensors(e, out);
  }
}

// Ops whose tensor arguments may lie on different devices on CUDA too: copies, conversions, and the
// metadata swaps Module::to and the reference model's offloading use.
bool CrossesDevices(const std::string& name) {
  static const char* const kOps[] = {
      "aten::copy_",    "aten::_copy_from",   "aten::_copy_from_and_resize",
      "aten::_to_copy", "aten::to",           "aten::set_data",
      "aten::set_",     "aten::is_same_size", "aten::_has_compatible_shallow_copy_type"};
  for (const char* op : kOps) {
    if (name == op) return true;
  }
  return false;
}

void DeviceCheck(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const std::string& name = op.schema().name();
  const size_t n = op.schema().arguments().size();
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& v : torch::jit::last(*stack, n)) CollectTensors(v, &tensors);

  // Host reads of meta tensors: zeros, counted.
  if (name == "aten::_local_scalar_dense" && tensors.size() == 1 && tensors[0].is_meta()) {
    const at::ScalarType type = tensors[0].scalar_type();
    torch::jit::drop(*stack, n);
    if (type == at::kBool) {
      torch::jit::push(*stack, c10::Scalar(false));
    } else if (c10::isIntegralType(type, /*includeBool=*/false)) {
      torch::jit::push(*stack, c10::Scalar(int64_t{0}));
    } else {
      torch::jit::push(*stack, c10::Scalar(0.0));
    }
    ++HostReads();
    return;
  }
  if (name == "aten::copy_" && tensors.size() == 2 && !tensors[0].is_meta() && tensors[1].is_meta()) {
    at::Tensor dst = tensors[0];
    torch::jit::drop(*stack, n);
    dst.zero_();
    torch::jit::push(*stack, dst);
    ++HostReads();
    return;
  }
  // Module::to swaps a parameter's data in place (set_data) where the two tensor types are compatible:
  // LibTorch counts CPU and CUDA dense tensors as compatible but not CPU and meta. Answer as for CUDA, so
  // that models move to meta the way they move to a GPU.
  if (name == "aten::_has_compatible_shallow_copy_type" && tensors.size() == 2 &&
      tensors[0].layout() == at::kStrided && tensors[1].layout() == at::kStrided &&
      tensors[0].is_meta() != tensors[1].is_meta() && (tensors[0].is_cpu() || tensors[1].is_cpu())) {
    torch::jit::drop(*stack, n);
    torch::jit::push(*stack, true);
    return;
  }
  if (!CrossesDevices(name)) {
    c10::optional<c10::Device> first;
    for (const at::Tensor& t : tensors) {
      if (t.device().is_cpu() && t.dim() == 0) continue;  // a CPU scalar: CUDA's TensorIterator takes it
      if (!first) {
        first = t.device();
      } else {
        TORCH_CHECK(t.device() == *first,
                    "Expected all tensors to be on the same device, but found at least two devices, ", *first,
                    " and ", t.device(), "! (", name, ", caught by device_clean_test's DeviceCheck)");
      }
    }
  }
  op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kCheckKey), stack);
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&DeviceCheck>());
}

// Shape-only kernels for the meta device (see the top of the file).
void MetaShapes(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const size_t n = schema.arguments().size();
  const auto last = torch::jit::last(*stack, n);
  const std::vector<c10::IValue> args(last.begin(), last.end());
  torch::jit::drop(*stack, n);
  const std::string& name = schema.name();
  if (name == "aten::index_select") {
    const at::Tensor& self = args[0].toTensor();
    std::vector<int64_t> sizes = self.sizes().vec();
    if (self.dim() > 0) sizes[c10::maybe_wrap_dim(args[1].toInt(), self.dim())] = args[2].toTensor().numel();
    torch::jit::push(*stack, at::empty(sizes, self.options()));
  } else if (name == "aten::embedding_dense_backward") {
    const at::Tensor& grad = args[0].toTensor();
    torch::jit::push(*stack, at::empty({args[2].toInt(), grad.size(-1)}, grad.options()));
  } else if (name == "aten::log_sigmoid_forward") {
    const at::Tensor& self = args[0].toTensor();
    torch::jit::push(*stack, at::empty_like(self));
    torch::jit::push(*stack, at::empty({0}, self.options()));
  } else if (name == "aten::log_sigmoid_backward") {
    torch::jit::push(*stack, at::empty_like(args[1].toTensor()));
  } else if (name == "aten::where") {  // where.self
    const at::Tensor &cond = args[0].toTensor(), &self = args[1].toTensor(), &other = args[2].toTensor();
    const std::vector<int64_t> sizes =
        at::infer_size(at::infer_size(cond.sizes(), self.sizes()), other.sizes());
    torch::jit::push(*stack, at::empty(sizes, self.options().dtype(at::result_type(self, other))));
  } else if (name == "aten::logical_or" || name == "aten::logical_and") {  // the .out overloads
    at::Tensor out = args[2].toTensor();
    out.resize_(at::infer_size(args[0].toTensor().sizes(), args[1].toTensor().sizes()));
    torch::jit::push(*stack, out);
  } else if (name == "aten::logical_not") {  // the .out overload
    at::Tensor out = args[1].toTensor();
    out.resize_(args[0].toTensor().sizes());
    torch::jit::push(*stack, out);
  } else if (name == "aten::index_copy_") {  // in place: self, shapes unchanged
    torch::jit::push(*stack, args[0]);
  } else if (name == "aten::max") {  // the full reduction: a 0-dim tensor
    torch::jit::push(*stack, at::empty({}, args[0].toTensor().options()));
  } else {
    TORCH_CHECK(false, "MetaShapes: no shape rule for ", name);
  }
}

// Registers MetaShapes for the ops (name, overload) this LibTorch has no meta kernel for; once per process.
void RegisterMetaShapes() {
  static std::unique_ptr<torch::Library> library = [] {
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::Meta,
                                                __FILE__, __LINE__);
    const std::pair<const char*, const char*> ops[] = {
        {"aten::index_select", ""},        {"aten::embedding_dense_backward", ""},
        {"aten::log_sigmoid_forward", ""}, {"aten::log_sigmoid_backward", ""},
        {"aten::where", "self"},           {"aten::logical_or", "out"},
        {"aten::logical_and", "out"},      {"aten::logical_not", "out"},
        {"aten::index_copy_", ""},         {"aten::max", ""}};
    for (const auto& [name, overload] : ops) {
      const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
      if (op.hasKernelForDispatchKey(c10::DispatchKey::Meta)) continue;
      const std::string qualified =
          std::string(name).substr(6) + (*overload ? std::string(".") + overload : "");
      lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&MetaShapes>());
    }
    return lib;
  }();
}

// DeviceCheck on for this thread (and the autograd work it starts) while alive; resets the read count.
class ScopedDeviceCheck {
 public:
  ScopedDeviceCheck() : guard_(kCheckKey) {
    RegisterMetaShapes();
    HostReads() = 0;
  }
  int64_t host_reads() const { return HostReads().load(); }

 private:
  c10::impl::IncludeDispatchKeyGuard guard_;
};

const torch::Device kMeta(torch::kMeta);
constexpr int32_t kPad = 0;

// test_support::TinyLlamaConfig (grouped-query attention, vocab 50) with pad 0, BOS 1, EOS 2.
core::HfModelConfig TinyConfig(const std::string& model_type = "llama") {
  core::HfModelConfig c = test_support::TinyLlamaConfig(model_type);
  c.pad_token_id = kPad;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

// Five pairs of different prompt and response lengths (BOS ... EOS; tokens 3..49).
std::vector<data::PreferencePair> Pairs() {
  std::vector<data::PreferencePair> pairs;
  for (int i = 0; i < 5; ++i) {
    data::PreferencePair p;
    p.prompt = {1};
    for (int k = 0; k < 2 + i % 3; ++k) p.prompt.push_back(3 + (7 * i + k) % 40);
    for (int k = 0; k < 1 + i % 2; ++k) p.chosen.push_back(10 + (3 * i + k) % 30);
    p.chosen.push_back(2);
    for (int k = 0; k < 3 - i % 3; ++k) p.rejected.push_back(20 + (5 * i + k) % 25);
    p.rejected.push_back(2);
    pairs.push_back(std::move(p));
  }
  return pairs;
}

struct Case {
  Task task = Task::kReward;
  ReferenceStrategy reference = ReferenceStrategy::kResident;
  DpoOptions dpo;
  bool lora = false;
  bool checkpointing = false;
  torch::Dtype dtype = torch::kFloat32;
};

std::string CaseName(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = c.task == Task::kReward ? "reward" : c.task == Task::kSft ? "sft" : "dpo";
  if (c.task == Task::kDpo) {
    name += std::string("_") + ReferenceStrategyName(c.reference);
    name += c.dpo.loss == DpoOptions::Loss::kIpo ? "_ipo"
            : c.dpo.label_smoothing > 0          ? "_smoothed"
                                                 : "_sigmoid";
  }
  name += c.lora ? "_lora" : "_full";
  name += c.checkpointing ? "_checkpointed" : "";
  name += c.dtype == torch::kBFloat16 ? "_bf16" : "_fp32";
  return name;
}

std::vector<Case> AllCases() {
  std::vector<Case> tasks;
  Case reward, sft;
  reward.task = Task::kReward;
  sft.task = Task::kSft;
  tasks.insert(tasks.end(), {reward, sft});
  for (ReferenceStrategy r :
       {ReferenceStrategy::kResident, ReferenceStrategy::kOffloaded, ReferenceStrategy::kPrecomputed}) {
    Case sigmoid;
    sigmoid.task = Task::kDpo;
    sigmoid.reference = r;
    Case ipo = sigmoid, smoothed = sigmoid;
    ipo.dpo.loss = DpoOptions::Loss::kIpo;
    smoothed.dpo.label_smoothing = 0.1;
    tasks.insert(tasks.end(), {sigmoid, ipo, smoothed});
  }
  std::vector<Case> cases;
  for (const Case& t : tasks) {
    for (bool lora : {false, true}) {
      for (bool checkpointing : {false, true}) {
        for (torch::Dtype dtype : {torch::kFloat32, torch::kBFloat16}) {
          Case c = t;
          c.lora = lora;
          c.checkpointing = checkpointing;
          c.dtype = dtype;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

class DeviceCleanTest : public testing::TestWithParam<Case> {};

// What PreferenceSession::Create builds, on the meta device: the policy and, for DPO, the reference (with its
// pre-pass) and the resident reference that evaluates next to a precomputed one.
struct Models {
  LlamaModel policy{nullptr};
  std::unique_ptr<ReferenceModel> reference, eval_reference;
  ReferenceModel* eval_ref() const { return eval_reference ? eval_reference.get() : reference.get(); }
};

Models MakeModels(const PreferenceTrainOptions& o, const core::HfModelConfig& config,
                  const std::vector<data::PreferencePair>& pairs) {
  auto make = [&] {
    torch::manual_seed(1);
    LlamaOptions mo = o.model;
    mo.reward_head = o.task == Task::kReward;
    LlamaModel m(config, mo);
    m->to(kMeta);
    return m;
  };
  Models m;
  m.policy = make();
  if (o.task != Task::kDpo) return m;
  comm::LocalCommunicator comm;
  m.reference = ReferenceModel::Create(make(), o.reference).value();
  EXPECT_TRUE(m.reference->Precompute(pairs, kPad, 2, &comm).ok());
  if (o.reference == ReferenceStrategy::kPrecomputed) {
    m.eval_reference = ReferenceModel::Create(make(), ReferenceStrategy::kResident).value();
  }
  return m;
}

TEST_P(DeviceCleanTest, EvaluationAndTrainingStepStayOnTheModelsDevice) {
  const Case& c = GetParam();
  PreferenceTrainOptions o;
  o.task = c.task;
  o.reference = c.reference;
  o.dpo = c.dpo;
  o.model.activation_checkpointing = c.checkpointing;
  o.model.dtype = c.dtype;
  if (c.lora) {
    o.model.lora.rank = 4;
    o.model.lora.dropout = 0.1;  // exercises the adapters' dropout in training mode
    o.model.lora.target_modules = {"q_proj", "v_proj", "o_proj", "up_proj", "down_proj"};
  }
  core::HfModelConfig config = TinyConfig();
  if (c.task == Task::kReward) config.num_labels = 1;
  std::vector<data::PreferencePair> pairs = Pairs();
  if (c.task == Task::kSft) {  // an assistant_only_loss example: its scored flags ride to the device too
    pairs[3].chosen_scored.assign(pairs[3].chosen.size(), 1);
    pairs[3].chosen_scored[1] = 0;
  }
  // No forward reads anything to the host: a reward batch brings its read-out positions from the host
  // (PairTensors::readout), where LlamaModelImpl::Scores would check them with a read per forward.
  const int64_t reads_per_forward = 0;
  BatchFormat format;
  format.pad_id = kPad;
  format.reward_readout = c.task == Task::kReward;
  format.readout_pad_token = kPad;
  if (c.task == Task::kSft) format.rows = data::PairRows::kChosenOnly;  // as PreferenceSession builds it

  ScopedDeviceCheck check;
  try {
    Models models = MakeModels(o, config, pairs);

    // Held-out evaluation, as PreferenceSession::Evaluate: chunks of 2 pairs, then one read of the metrics.
    models.policy->eval();
    const std::vector<std::vector<uint64_t>> chunks = StridedChunks(pairs.size(), 0, 1, 2);
    int64_t reads = check.host_reads();
    absl::StatusOr<torch::Tensor> eval =
        EvaluateChunks(models.policy, models.eval_ref(), pairs, chunks, format, o, kMeta);
    ASSERT_TRUE(eval.ok()) << eval.status();
    EXPECT_EQ(eval->device(), kMeta);
    EXPECT_EQ(check.host_reads() - reads, reads_per_forward * static_cast<int64_t>(chunks.size()));
    reads = check.host_reads();
    ReadPairMetrics(*eval);
    EXPECT_EQ(check.host_reads() - reads, 1);

    // A training micro-batch, as PreferenceSession::Step: the loss's backward (Zero2Binding::Backward runs
    // it under its gradient hooks) and the step's metrics summed on the device, then read once.
    models.policy->train();
    reads = check.host_reads();
    const PairTensors batch = OnDevice(MakePairTensors(pairs, {3, 0, 4}, format).value(), kMeta);
    absl::StatusOr<LossOutput> out = MicroBatchLoss(models.policy, models.reference.get(), o, batch);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->pairs, 3);
    EXPECT_EQ(out->units, c.task == Task::kSft ? static_cast<double>(batch.scored_tokens) : 3.0);
    EXPECT_EQ(batch.scored.defined(), c.task == Task::kSft);
    EXPECT_EQ(out->loss_sum.device(), kMeta);
    EXPECT_EQ(out->loss_sum.dim(), 0);
    EXPECT_TRUE(out->loss_sum.requires_grad());
    EXPECT_EQ(out->metrics.device(), kMeta);
    EXPECT_FALSE(out->metrics.requires_grad());
    out->loss_sum.backward();
    int trained = 0;
    for (const auto& item : models.policy->named_parameters()) {
      const torch::Tensor& p = item.value();
      if (!p.requires_grad()) {
        EXPECT_FALSE(p.grad().defined()) << item.key();
        continue;
      }
      ++trained;
      ASSERT_TRUE(p.grad().defined()) << item.key();
      EXPECT_EQ(p.grad().device(), kMeta) << item.key();
    }
    EXPECT_GT(trained, 0);
    torch::Tensor step_metrics = ZeroPairMetrics(kMeta);
    step_metrics += out->metrics;
    EXPECT_EQ(check.host_reads() - reads, reads_per_forward);
    reads = check.host_reads();
    ReadPairMetrics(step_metrics);
    EXPECT_EQ(check.host_reads() - reads, 1);
    if (c.task == Task::kReward) {  // the count sees the read that ScoresAt avoids
      torch::NoGradGuard no_grad;
      reads = check.host_reads();
      (void)models.policy->Scores(batch.tokens, batch.lengths);
      EXPECT_EQ(check.host_reads() - reads, 1);
    }
  } catch (const c10::Error& e) {
    FAIL() << e.what_without_backtrace();
  }
}

INSTANTIATE_TEST_SUITE_P(AllTrainers, DeviceCleanTest, testing::ValuesIn(AllCases()), CaseName);

// The model's other shape-dependent tensors (rotary tables of every scaling, Mistral's sliding-window mask,
// Qwen2's biases and tied head), forward and backward on meta.
TEST(DeviceCleanModelTest, RotaryScalingsSlidingWindowAndTiedHeads) {
  std::vector<core::HfModelConfig> configs;
  for (const char* type : {"linear", "dynamic", "llama3"}) {
    core::HfModelConfig c = TinyConfig();
    c.max_position_embeddings = 4;  // shorter than the batch: "dynamic" rescales
    c.rope_scaling = core::RopeScaling{type, 2.0, 1.0, 4.0, 4};
    configs.push_back(c);
  }
  core::HfModelConfig mistral = TinyConfig("mistral");
  mistral.architecture = "MistralForCausalLM";
  mistral.sliding_window = 3;
  configs.push_back(mistral);
  configs.push_back(TinyConfig("qwen2"));  // biases and the tied head

  ScopedDeviceCheck check;
  for (const core::HfModelConfig& config : configs) {
    SCOPED_TRACE(config.model_type + (config.rope_scaling ? " " + config.rope_scaling->type : ""));
    try {
      LlamaModel m(config);
      m->to(kMeta);
      const torch::Tensor ids = torch::randint(3, 50, {2, 7}, torch::kLong).to(kMeta);
      const torch::Tensor lp = m->TokenLogProbs(ids);
      EXPECT_EQ(lp.device(), kMeta);
      lp.sum().backward();
      EXPECT_EQ(m->model->embed_tokens->weight.grad().device(), kMeta);
    } catch (const c10::Error& e) {
      ADD_FAILURE() << e.what_without_backtrace();
    }
  }
  EXPECT_EQ(check.host_reads(), 0);
}

// The decode steps of generation (issue 32). The eager step reads its longest position back once (a
// synchronisation a token on a GPU); the fixed-shape step that a CUDA graph records (static_decode.h) must
// read nothing back, since a read inside a capture fails it, and must keep every tensor on the model's device
// (its slot, mask and rotary rows are made there).
TEST(DeviceCleanModelTest, TheFixedShapeDecodeStepReadsNothingBack) {
  core::HfModelConfig mistral = TinyConfig("mistral");
  mistral.sliding_window = 4;  // shorter than the pass: the window masks slots
  for (const core::HfModelConfig& config : {TinyConfig(), mistral, TinyConfig("qwen2")}) {
    SCOPED_TRACE(config.model_type);
    try {
      ScopedDeviceCheck check;
      LlamaModel m(config);
      m->to(kMeta);
      const int64_t b = 3, prompt = 5, steps = 4;
      KvCache cache;
      cache.Begin(m->config(), b, prompt + steps, torch::kFloat32, kMeta);
      c10::InferenceMode inference;
      const torch::Tensor ids = torch::randint(3, 50, {b, prompt}, torch::kLong);
      const torch::Tensor pos = torch::arange(prompt, torch::kLong).expand({b, prompt});
      m->DecodeStep(ids.to(kMeta), pos.to(kMeta), cache);
      EXPECT_EQ(check.host_reads(), 1) << "the eager step reads its longest position";
      StaticDecoder fixed(*m, cache, DecodeMode::kStatic);
      for (int64_t step = 0; step < steps; ++step) {
        const torch::Tensor logits = fixed.Step(torch::full({b, 1}, 7, torch::kLong),
                                                torch::full({b, 1}, prompt + step, torch::kLong));
        EXPECT_EQ(logits.device(), kMeta);
        EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{b, config.vocab_size}));
      }
      EXPECT_EQ(check.host_reads(), 1) << "a fixed-shape step read something back";
      EXPECT_EQ(cache.length(), prompt + steps);
    } catch (const c10::Error& e) {
      ADD_FAILURE() << e.what_without_backtrace();
    }
  }
}

// The check itself: it raises where CUDA would, for the ops whose meta kernels do not (matmul, gather,
// masked_fill, cat, index_select), and lets through what CUDA allows.
TEST(DeviceCheckTest, RaisesOnMixedDevicesWhereCudaDoes) {
  ScopedDeviceCheck check;
  const torch::Tensor m = torch::zeros({4, 5}, torch::TensorOptions().device(kMeta));
  const torch::Tensor c = torch::zeros({4, 5});
  const torch::Tensor index = torch::zeros({4, 1}, torch::kLong);
  const auto mixed = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace()).find("same device") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(mixed([&] { torch::matmul(m, c.t()); }));
  EXPECT_TRUE(mixed([&] { m.gather(1, index); }));
  EXPECT_TRUE(mixed([&] { m.masked_fill(torch::ones({4, 5}, torch::kBool), 0.0); }));
  EXPECT_TRUE(mixed([&] { torch::cat({m, c}); }));
  EXPECT_TRUE(mixed([&] { m.index_select(0, torch::zeros({2}, torch::kLong)); }));
  EXPECT_TRUE(mixed([&] { (void)(torch::arange(5, torch::kLong).unsqueeze(0) < m.sum(1, true)); }));
  EXPECT_TRUE(mixed([&] { torch::stack({m.sum(), torch::zeros({})}); }));  // cat of [1]-shaped tensors
  // What CUDA allows: CPU scalars in elementwise ops, copies and conversions across devices.
  EXPECT_FALSE(mixed([&] { (void)(m * torch::tensor(2.0) + 1); }));
  EXPECT_FALSE(mixed([&] { (void)c.to(kMeta); }));
  EXPECT_EQ(check.host_reads(), 0);
  EXPECT_EQ(m.sum().item<double>(), 0.0);
  EXPECT_EQ(m.to(torch::kCPU).sum().item<double>(), 0.0);
  EXPECT_EQ(check.host_reads(), 2);
}

}  // namespace
}  // namespace zerofit::worker
