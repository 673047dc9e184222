#include "worker/torch/train/named_step_metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace zerofit::worker {
namespace {

namespace names = metrics::metric_names;

// "time/<stage>_ms" with the stage name in [a-z0-9_] ("reduce-scatter" -> "reduce_scatter").
std::string StageMetricName(sharding::Stage stage) {
  std::string name = sharding::StageName(stage);
  for (char& c : name) {
    if (c == '-' || c == ' ') c = '_';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return std::string(names::kTimePrefix) + name + "_ms";
}

// The task's values of `p` under `prefix` ("" for the step's training pairs, "eval/" for the held-out set).
void SetPairValues(const std::string& prefix, const PairMetrics& p, PreferenceTrainOptions::Task task,
                   metrics::StepMetrics* m) {
  using Task = PreferenceTrainOptions::Task;
  const double pairs = std::max(p.pairs, 1.0);
  auto set = [&](const char* name, double v) { m->Set(prefix + name, v); };
  set(names::kLoss, MeanLoss(p, task == Task::kSft));
  if (task != Task::kSft) set(names::kAccuracy, p.correct / pairs);  // SFT has no second response to beat
  if (task == Task::kReward) {
    set(names::kRewardChosen, p.chosen_sum / pairs);
    set(names::kRewardRejected, p.rejected_sum / pairs);
    set(names::kRewardMargin, p.margin_sum / pairs);
  } else if (task == Task::kDpo) {
    set(names::kDpoChosen, p.chosen_sum / pairs);
    set(names::kDpoRejected, p.rejected_sum / pairs);
    set(names::kDpoMargin, p.margin_sum / pairs);
    set(names::kDpoAccuracy, p.correct / pairs);
    set(names::kDpoNll, p.nll_sum / std::max(p.response_tokens, 1.0));
  } else {
    const double per_token = SftLossPerToken(p);
    set(names::kSftLossPerToken, per_token);
    set(names::kSftPerplexity, std::exp(per_token));
    set(names::kSftTokenAccuracy, SftTokenAccuracy(p));
  }
}

}  // namespace

metrics::StepMetrics NamedStepMetrics(const StepReport& sr, PreferenceTrainOptions::Task task,
                                      const HostSample& host) {
  metrics::StepMetrics m;
  m.step = sr.step;
  m.rank = host.rank;
  m.wall_time = host.wall_time;
  const PairMetrics& p = sr.metrics;
  const double seconds = std::max(sr.result.breakdown.wall_ms / 1e3, 1e-9);
  // Column order (tables, CSV): loss, rank_loss, accuracy, the optimizer's values, then the task's.
  const bool sft = task == PreferenceTrainOptions::Task::kSft;
  m.Set(names::kLoss, MeanLoss(p, sft));
  if (sr.local_metrics.pairs > 0) m.Set(names::kRankLoss, MeanLoss(sr.local_metrics, sft));
  if (task != PreferenceTrainOptions::Task::kSft) m.Set(names::kAccuracy, p.correct / std::max(p.pairs, 1.0));
  m.Set(names::kLearningRate, sr.result.learning_rate);  // what the optimizer applied, not what was asked
  m.Set(names::kGradNorm, sr.result.grad_norm);
  m.Set(names::kClipped, sr.result.clip_coef < 1.0f ? 1.0 : 0.0);
  m.Set(names::kClipCoef, sr.result.clip_coef);
  m.Set(names::kLossScale, sr.result.loss_scale);
  m.Set(names::kSkipped, sr.result.applied ? 0.0 : 1.0);
  m.Set(names::kTokensPerS, p.sequence_tokens / seconds);
  m.Set(names::kSamplesPerS, p.pairs / seconds);
  SetPairValues("", p, task, &m);  // loss and accuracy again (in place), then the task's values
  m.Set(names::kStepMs, sr.result.breakdown.wall_ms);
  for (size_t i = 0; i < sr.result.breakdown.busy_ms.size(); ++i) {
    m.Set(StageMetricName(static_cast<sharding::Stage>(i)), sr.result.breakdown.busy_ms[i]);
  }
  SetDeviceTimes(sr.result.breakdown, &m);
  if (host.peak_rss_bytes >= 0) m.Set(names::kHostPeakRssBytes, static_cast<double>(host.peak_rss_bytes));
  if (sr.peak.device_reserved > 0) {
    m.Set(names::kDevicePeakAllocatedBytes, static_cast<double>(sr.peak.device_allocated));
    m.Set(names::kDevicePeakReservedBytes, static_cast<double>(sr.peak.device_reserved));
  }
  if (sr.eval) {
    for (const metrics::NamedValue& v : NamedEvalMetrics(*sr.eval, task)) m.Set(v.name, v.value);
  }
  return m;
}

std::vector<metrics::NamedValue> NamedEvalMetrics(const EvalReport& eval, PreferenceTrainOptions::Task task) {
  metrics::StepMetrics m;
  SetPairValues(names::kEvalPrefix, eval.metrics, task, &m);
  m.Set(std::string(names::kEvalPrefix) + names::kEvalPairs, eval.metrics.pairs);
  return m.values;
}

void SetDeviceTimes(const sharding::StepBreakdown& breakdown, metrics::StepMetrics* m) {
  if (!breakdown.device) return;
  const sharding::DeviceStepTimes& t = *breakdown.device;
  const std::string prefix = names::kDeviceTimePrefix;
  m->Set(prefix + "step_ms", t.step_ms);
  for (size_t i = 0; i < t.stage_ms.size(); ++i) {
    m->Set(prefix + sharding::DeviceStageName(static_cast<sharding::DeviceStage>(i)) + "_ms", t.stage_ms[i]);
  }
  m->Set(prefix + "gap_ms", t.gap_ms);
  m->Set(names::kDeviceTimeUpdatesAgo, static_cast<double>(t.ended_after));
}

int64_t HostPeakRssBytes() {
  const size_t rss = ReadPeakMemory(torch::Device(torch::kCPU)).host_rss;
  return rss > 0 ? static_cast<int64_t>(rss) : -1;
}

}  // namespace zerofit::worker
