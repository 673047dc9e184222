// `zerofit plan` end to end through its flag struct: the table, JSON for scripts, and errors that name the
// flag.
#include "cli/plan_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>

#include "nlohmann/json.hpp"

namespace zerofit::cli {
namespace {

PlanFlags MistralReward() {
  PlanFlags f;
  f.model = "Mistral-7B";
  f.task = "reward";
  f.hardware = "8x64GB";
  f.global_batch = 64;
  f.seq_len = 2048;
  return f;
}

TEST(PlanCommandTest, TableNamesTheChoiceEveryItemAndTheRejections) {
  auto out = RunPlan(MistralReward());
  ASSERT_TRUE(out.ok()) << out.status();
  for (const char* s :
       {"Mistral-7B (preset, 7,241,732,096 parameters)", "chosen: micro-batch", "optimizer state",
        "activations", "CUDA context", "total", "cap 60.80 GB", "not chosen",
        "activation checkpointing: fits (",
        "(activations as a worker of LibTorch 2.x, scaled-dot-product attention keeps them)"}) {
    EXPECT_NE(out->find(s), std::string::npos) << s << "\n" << *out;
  }
}

TEST(PlanCommandTest, JsonForScripts) {
  PlanFlags f = MistralReward();
  f.json = true;
  f.task = "dpo";
  f.nodes = 2;
  auto out = RunPlan(f);
  ASSERT_TRUE(out.ok()) << out.status();
  const nlohmann::json j = nlohmann::json::parse(*out);
  EXPECT_EQ(j["task"], "dpo");
  EXPECT_EQ(j["hardware"]["gpus"], 16);
  EXPECT_EQ(j["hardware"]["worker_kernels"], "LibTorch 2.x, scaled-dot-product attention");
  const auto& p = j["plan"];
  EXPECT_EQ(p["micro_batch"].get<int64_t>() * p["gradient_accumulation"].get<int64_t>() * 16, 64);
  int64_t sum = 0;
  for (const auto& item : j["memory"]["device"]) sum += item["bytes"].get<int64_t>();
  EXPECT_NEAR(static_cast<double>(sum), j["memory"]["device_bytes"].get<double>(), 16.0);
  EXPECT_LE(j["memory"]["device_bytes"].get<int64_t>(), j["hardware"]["device_cap_bytes"].get<int64_t>());
  EXPECT_TRUE(j["rejected"].is_array());
  EXPECT_GT(j["step_seconds"]["total"].get<double>(), 0.0);
}

// GRPO's generation term follows the decode mode: an eager step waits for the host's dispatch of every layer,
// a replayed CUDA graph for its kernels' launches only (planner_test has the figures).
// GRPO on Qwen2.5-0.5B, 8 prompts a step, JSON.
PlanFlags QwenGrpo(const std::string& hardware, int64_t prompt_len, int64_t new_tokens) {
  PlanFlags f;
  f.model = "Qwen2.5-0.5B";
  f.task = "grpo";
  f.hardware = hardware;
  f.global_batch = 8;
  f.prompt_len = prompt_len;
  f.new_tokens = new_tokens;
  f.json = true;
  return f;
}

TEST(PlanCommandTest, GrpoGenerationTimeFollowsTheDecodeMode) {
  PlanFlags f = QwenGrpo("1xh200-141", 128, 128);
  f.samples_per_prompt = 4;
  auto generation = [&](const std::string& decode) {
    f.decode = decode;
    auto out = RunPlan(f);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? nlohmann::json::parse(*out)["step_seconds"]["generation"].get<double>() : 0.0;
  };
  const double eager = generation("eager"), graphed = generation("cuda_graph");
  EXPECT_DOUBLE_EQ(generation("static"), eager);
  EXPECT_DOUBLE_EQ(generation("auto"), graphed) << "the worker's default decodes a GPU's rollouts as a graph";
  EXPECT_GT(eager, 0);
  EXPECT_LT(graphed, eager / 3) << "the H200 measured 3.7x at batch 8 (planner_test has the figures)";
}

// GRPO without its KL term (grpo.beta 0, TRL's default) keeps no reference: `--reference none` plans that,
// one copy of the weights less on the device and no reference forward; DPO refuses it.
TEST(PlanCommandTest, GrpoWithoutKlPlansNoReference) {
  PlanFlags f = QwenGrpo("1x32GB", 256, 256);
  auto plan = [&](const std::string& reference) {
    f.reference = reference;
    auto out = RunPlan(f);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? nlohmann::json::parse(*out) : nlohmann::json();
  };
  const nlohmann::json with = plan("resident"), without = plan("none");
  EXPECT_EQ(without["plan"]["reference"], "none");
  for (const nlohmann::json& item : without["memory"]["device"])
    EXPECT_EQ(item["name"].get<std::string>().find("reference"), std::string::npos) << item.dump();
  EXPECT_EQ(without["step_seconds"]["reference"].get<double>(), 0.0);
  EXPECT_GT(with["step_seconds"]["reference"].get<double>(), 0.0);
  // The same strategy otherwise: the resident copy, 2 B a parameter, is the difference, with the reference's
  // per-token outputs (kilobytes: log-probs of the micro-batch's 8,176 positions) and their fragmentation.
  ASSERT_EQ(with["plan"]["micro_batch"], without["plan"]["micro_batch"]);
  const int64_t difference =
      with["memory"]["device_bytes"].get<int64_t>() - without["memory"]["device_bytes"].get<int64_t>();
  EXPECT_GE(difference, 2 * int64_t{494032768});
  EXPECT_LT(difference, 2 * int64_t{494032768} + (1 << 20));
  f.task = "dpo";
  f.reference = "none";
  auto dpo = RunPlan(f);
  ASSERT_FALSE(dpo.ok());
  EXPECT_NE(dpo.status().message().find("--reference: expected"), std::string::npos);
}

// A GRPO plan gives each pass's device peak (JSON and table); the plan's peak is the larger one.
TEST(PlanCommandTest, GrpoPlanGivesBothPasses) {
  PlanFlags f = QwenGrpo("1x32GB", 256, 256);
  auto out = RunPlan(f);
  ASSERT_TRUE(out.ok()) << out.status();
  const nlohmann::json m = nlohmann::json::parse(*out)["memory"];
  const int64_t generation = m["grpo_passes"]["generation_bytes"],
                training = m["grpo_passes"]["training_bytes"];
  EXPECT_GT(generation, 0);
  EXPECT_GT(training, 0);
  EXPECT_LE(std::abs(std::max(generation, training) - m["device_bytes"].get<int64_t>()), 1);
  EXPECT_FALSE(m["grpo_passes"]["generation_phase"].get<std::string>().empty());
  // Without the CUDA context (1 GiB on this profile) and the fragmentation on the pass's transient bytes.
  EXPECT_LT(m["grpo_passes"]["generation_tensor_bytes"].get<int64_t>(), generation - (int64_t{1} << 30) + 1);
  EXPECT_LT(m["grpo_passes"]["training_tensor_bytes"].get<int64_t>(), training - (int64_t{1} << 30) + 1);
  f.json = false;
  out = RunPlan(f);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->find("  GRPO passes: generation "), std::string::npos) << *out;
}

TEST(PlanCommandTest, BadInputNamesTheFlag) {
  const std::pair<std::string, std::function<void(PlanFlags&)>> cases[] = {
      {"--task", [](PlanFlags& f) { f.task = "ppo"; }},
      {"--hardware", [](PlanFlags& f) { f.hardware = "8xb300"; }},
      {"--model", [](PlanFlags& f) { f.model = "/nonexistent/model"; }},
      {"--global-batch", [](PlanFlags& f) { f.global_batch = 60; }},
      {"--offload", [](PlanFlags& f) { f.offload = "maybe"; }},
      {"--stage", [](PlanFlags& f) { f.stage = "4"; }},
      {"--reference", [](PlanFlags& f) { f.reference = "cached"; }},
      {"--micro-batch", [](PlanFlags& f) { f.micro_batch = "3"; }},
      {"--decode", [](PlanFlags& f) { f.decode = "graphs"; }},
      {"--host-gb", [](PlanFlags& f) { f.host_gb = -1; }},  // was taken as "the profile's"
      // The job spec refuses one sample a prompt; the planner planned it.
      {"--samples-per-prompt",
       [](PlanFlags& f) {
         f.task = "grpo";
         f.samples_per_prompt = 1;
       }},
  };
  for (const auto& [flag, mutate] : cases) {
    PlanFlags f = MistralReward();
    if (flag == "--reference") f.task = "dpo";
    mutate(f);
    auto out = RunPlan(f);
    ASSERT_FALSE(out.ok()) << flag;
    EXPECT_NE(out.status().message().find(flag), std::string::npos) << flag << ": " << out.status();
  }
}

}  // namespace
}  // namespace zerofit::cli
