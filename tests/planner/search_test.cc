// The plan search (planner/search.h): the global batch kept, the caps, every rejection explained, pins and
// their errors, LoRA's reference, 8-bit moments offloaded where the device needs it and offered as a lever;
// step times' units.
#include "planner/search.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner/memory_model.h"
#include "planner/model_shape.h"
#include "planner/plan_report.h"
#include "tests/planner/small_model.h"

namespace zerofit::planner {
namespace {

using testmodels::Small;

// A model whose fp32 state needs offload on small GPUs fits with 8-bit moments on the device instead, and
// the fp32 plan says so (a lever: the search does not switch the optimizer itself); with offload pinned off
// the error names the 8-bit configuration. An 8-bit workload is planned on the device where it fits there.
TEST(SearchTest, EightBitMomentsAvoidOffloadAndAreOfferedAsALever) {
  auto m = LoadModelShape("Mistral-7B");
  auto hw = ParseHardware("8x32GB");
  ASSERT_TRUE(m.ok() && hw.ok()) << hw.status();
  Workload w;
  w.task = Task::kReward;
  w.global_batch = 64;
  w.seq_len = 512;
  auto fp32 = MakePlan(*m, w, *hw, Constraints{});
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_TRUE(fp32->chosen.strategy.offload) << "the fp32 state of 7B on 8 x 32 GB needs offload";
  // The search does not switch the optimizer itself (it changes the training) but says what it would give.
  ASSERT_EQ(fp32->levers.size(), 1u);
  EXPECT_NE(fp32->levers[0].find("8-bit AdamW moments (training.optim: adamw_8bit"), std::string::npos);
  EXPECT_NE(fp32->levers[0].find("without offload"), std::string::npos) << fp32->levers[0];
  // With offload pinned off nothing fits with fp32 moments: the error names the 8-bit configuration that
  // does.
  Constraints no_offload;
  no_offload.offload = false;
  auto none = MakePlan(*m, w, *hw, no_offload);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("With 8-bit AdamW moments (training.optim: adamw_8bit, --optim "
                                         "adamw_8bit) micro-batch"),
            std::string::npos)
      << none.status();
  // With offload pinned on, 8-bit moments would offload too: no faster, so no lever.
  Constraints pinned;
  pinned.offload = true;
  auto fp32_offload = MakePlan(*m, w, *hw, pinned);
  ASSERT_TRUE(fp32_offload.ok()) << fp32_offload.status();
  EXPECT_TRUE(fp32_offload->levers.empty()) << fp32_offload->levers[0];
  w.eight_bit_moments = true;
  auto q = MakePlan(*m, w, *hw, Constraints{});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_FALSE(q->chosen.strategy.offload);
  EXPECT_LE(q->chosen.memory.device_bytes, q->device_cap);
  EXPECT_TRUE(q->levers.empty());
}

// 8-bit moments with offload (host memory): pinning offload on plans it, with no optimizer state on the
// device; where the device cannot hold even the 8-bit state (8 x 24 GB) the search offloads it; and where
// the host cannot hold fp32 moments, the fp32 error names the 8-bit offload configuration and its host bytes.
TEST(SearchTest, EightBitMomentsAreOffloadedWhereTheDeviceNeedsIt) {
  auto m = LoadModelShape("Mistral-7B");
  auto hw = ParseHardware("8x32GB");
  ASSERT_TRUE(m.ok() && hw.ok()) << hw.status();
  Workload w;
  w.task = Task::kReward;
  w.global_batch = 64;
  w.seq_len = 512;
  w.eight_bit_moments = true;
  Constraints pinned;
  pinned.offload = true;
  auto offloaded = MakePlan(*m, w, *hw, pinned);
  ASSERT_TRUE(offloaded.ok()) << offloaded.status();
  EXPECT_TRUE(offloaded->chosen.strategy.offload);
  for (const MemoryItem& i : offloaded->chosen.memory.device) {
    EXPECT_NE(i.name, "optimizer state");
    EXPECT_NE(i.name, "8-bit moments");
  }
  ASSERT_EQ(offloaded->chosen.memory.host.size(), 2u);
  EXPECT_EQ(offloaded->chosen.memory.host[0].name, "optimizer state (pinned)");
  EXPECT_EQ(offloaded->chosen.memory.host[1].name, "8-bit moments (host)");
  EXPECT_TRUE(offloaded->levers.empty());
  // The CPU step at the 8-bit kernel's rate (Hardware::cpu_adam_8bit_relative_rate), the copies unchanged:
  // fp32's offload time is shard x (2 a / link + 1 / rate), which gives the shard.
  w.eight_bit_moments = false;
  auto fp32 = MakePlan(*m, w, *hw, pinned);
  w.eight_bit_moments = true;
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  const double link = 4.0 / hw->host_link_bytes_per_s, rate = hw->cpu_adam_params_per_s;
  const double shard = fp32->chosen.time.offload / (link + 1.0 / rate);
  EXPECT_NEAR(offloaded->chosen.time.offload, shard * (link + 1.0 / (rate * hw->cpu_adam_8bit_relative_rate)),
              1e-9 * offloaded->chosen.time.offload);

  auto small_gpus = ParseHardware("8x24GB");
  ASSERT_TRUE(small_gpus.ok());
  auto searched = MakePlan(*m, w, *small_gpus, Constraints{});
  ASSERT_TRUE(searched.ok()) << searched.status();
  EXPECT_TRUE(searched->chosen.strategy.offload) << "7B's parameters and 8-bit state exceed 22.8 GB";
  bool explained = false;
  for (const std::string& r : searched->rejected)
    explained |= r.rfind("no optimizer offload: ", 0) == 0 && r.find(" cap even with ") != std::string::npos;
  EXPECT_TRUE(explained);

  // fp32 moments offloaded need 20 B a shard element per GPU in host memory (142 GB here), 8-bit ones about
  // 14 (100 GB): under a 120 GB host cap only the latter fits.
  auto small_host = ParseHardware("8x24GB", 150);
  ASSERT_TRUE(small_host.ok());
  w.eight_bit_moments = false;
  auto none = MakePlan(*m, w, *small_host, Constraints{});
  ASSERT_FALSE(none.ok());
  const std::string message(none.status().message());
  EXPECT_NE(message.find("host per node > 120.00 GB cap"), std::string::npos) << message;
  const size_t with =
      message.find("With 8-bit AdamW moments (training.optim: adamw_8bit, --optim adamw_8bit)");
  ASSERT_NE(with, std::string::npos) << message;
  EXPECT_NE(message.find("+ optimizer offload", with), std::string::npos) << message;
  EXPECT_NE(message.find(" GB host per node)", with), std::string::npos) << message;
  w.eight_bit_moments = true;
  auto fits = MakePlan(*m, w, *small_host, Constraints{});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_TRUE(fits->chosen.strategy.offload);
  EXPECT_LE(fits->chosen.memory.host_bytes, fits->host_cap);
}

TEST(SearchTest, LoraBaseIsSearchedWithLoraOnlyAndPinnedOnlyWithIt) {
  auto m = LoadModelShape("Qwen2.5-0.5B");
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(m.ok() && hw.ok());
  for (Task task : {Task::kDpo, Task::kGrpo}) {
    SCOPED_TRACE(TaskName(task));
    Workload w;
    w.task = task;
    w.global_batch = 64;
    w.seq_len = 1024;
    w.prompt_len = 256;
    w.new_tokens = 256;
    Constraints c;
    c.lora_rank = 16;
    c.reference = Reference::kLoraBase;
    absl::StatusOr<Plan> plan = MakePlan(*m, w, *hw, c);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->chosen.strategy.reference, Reference::kLoraBase);
    // With the reference's forward in the step either way, lora-base beats a resident copy on memory.
    c.reference = Reference::kResident;
    absl::StatusOr<Plan> resident = MakePlan(*m, w, *hw, c);
    ASSERT_TRUE(resident.ok()) << resident.status();
    EXPECT_LT(plan->chosen.memory.device_bytes, resident->chosen.memory.device_bytes);
    // Unpinned among resident, offloaded and lora-base (GRPO) it is the choice.
    if (task == Task::kGrpo) {
      c.reference.reset();
      absl::StatusOr<Plan> free = MakePlan(*m, w, *hw, c);
      ASSERT_TRUE(free.ok()) << free.status();
      EXPECT_EQ(free->chosen.strategy.reference, Reference::kLoraBase);
    }
    // A full fine-tune has no adapters to turn off.
    c.lora_rank = 0;
    c.reference = Reference::kLoraBase;
    const absl::Status refused = MakePlan(*m, w, *hw, c).status();
    EXPECT_NE(refused.message().find("--reference lora-base is the policy with its LoRA adapters disabled"),
              std::string::npos)
        << refused;
    c.reference.reset();
    absl::StatusOr<Plan> full = MakePlan(*m, w, *hw, c);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_NE(full->chosen.strategy.reference, Reference::kLoraBase);
  }
}

TEST(SearchTest, KeepsTheGlobalBatchFitsUnderTheCapAndExplainsEveryRejection) {
  auto m = LoadModelShape("Mistral-7B");
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(m.ok() && hw.ok());
  Workload w;
  w.task = Task::kReward;
  w.global_batch = 64;
  w.seq_len = 2048;
  auto plan = MakePlan(*m, w, *hw, Constraints{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Strategy& s = plan->chosen.strategy;
  EXPECT_EQ(s.micro_batch * s.gradient_accumulation * plan->world_size, 64);
  EXPECT_LE(plan->chosen.memory.device_bytes, 0.95 * 64e9);
  EXPECT_DOUBLE_EQ(plan->device_cap, 60.8e9);
  EXPECT_LE(s.zero_stage, 2);
  // Every micro-batch that divides 8 per GPU, the other stages and both values of offload and
  // checkpointing appear: 3 micro-batches + 2 stages + 1 + 1 lines.
  EXPECT_EQ(plan->rejected.size(), 7u);
  for (const std::string& line : plan->rejected) {
    EXPECT_TRUE(line.find("fits (") != std::string::npos || line.find(" cap") != std::string::npos) << line;
  }
  // The GPU workers' SDPA keeps no T x T probabilities: a 2048-token Mistral-7B reward model fits on 64 GB
  // without checkpointing. Under eager attention (the CPU build's kernels) it does not.
  EXPECT_FALSE(s.checkpointing);
  Hardware eager = *hw;
  eager.kernels = WorkerKernels::kLibTorch1Eager;
  auto eager_plan = MakePlan(*m, w, eager, Constraints{});
  ASSERT_TRUE(eager_plan.ok()) << eager_plan.status();
  EXPECT_TRUE(eager_plan->chosen.strategy.checkpointing);
}

// Step times print in one unit chosen by the largest: a small model's step was "0.000 s" and every option
// "2.42x the step time (0.000 s vs 0.000 s)".
TEST(SearchTest, StepTimesPrintInAUnitTheirSizeNeeds) {
  EXPECT_EQ(FormatTime(11.9584, TimeUnitFor(11.9584)), "11.958");
  EXPECT_STREQ(TimeUnitFor(0.5).name, "ms");
  EXPECT_EQ(FormatTime(0.0032149, TimeUnitFor(0.5)), "3.21");
  EXPECT_STREQ(TimeUnitFor(1.25e-5).name, "us");
  EXPECT_EQ(FormatTime(1.25e-5, TimeUnitFor(1.25e-5)), "12.5");
  EXPECT_STREQ(TimeUnitFor(0).name, "s");
  auto hw = ParseHardware("8x64GB");
  ASSERT_TRUE(hw.ok());
  Workload w;
  w.task = Task::kDpo;
  w.global_batch = 64;
  w.seq_len = 128;
  auto plan = MakePlan(Small(), w, *hw, Constraints{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string table = PlanTable(*plan);
  EXPECT_EQ(table.find("0.000 s"), std::string::npos) << table;
  EXPECT_NE(table.find(" us/step = compute "), std::string::npos) << table;
  for (const std::string& line : plan->rejected) {
    if (line.find("fits (") != std::string::npos) {
      EXPECT_NE(line.find(" us vs "), std::string::npos) << line;
    }
  }
}

TEST(SearchTest, PinsErrorsAndNothingFits) {
  auto m = LoadModelShape("Llama-2-7B");
  auto hw = ParseHardware("1xrtx4090-24");
  ASSERT_TRUE(m.ok() && hw.ok());
  Workload w;
  w.task = Task::kDpo;
  w.global_batch = 8;
  w.seq_len = 1024;
  auto plan = MakePlan(*m, w, *hw, Constraints{});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("nothing fits"), std::string::npos) << plan.status();
  EXPECT_NE(plan.status().message().find("--allow-lora"), std::string::npos) << plan.status();
  // With LoRA a 24 GB card trains it.
  Constraints c;
  c.allow_lora = true;
  plan = MakePlan(*m, w, *hw, c);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->chosen.strategy.lora_rank, 0);
  // Pins are honoured.
  c.checkpointing = true;
  c.reference = Reference::kPrecomputed;
  c.micro_batch = 2;
  plan = MakePlan(*m, w, *hw, c);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->chosen.strategy.checkpointing);
  EXPECT_EQ(plan->chosen.strategy.reference, Reference::kPrecomputed);
  EXPECT_EQ(plan->chosen.strategy.micro_batch, 2);
  EXPECT_EQ(plan->chosen.strategy.gradient_accumulation, 4);
  // A global batch that does not split over the GPUs is refused by name.
  auto hw8 = ParseHardware("8x64GB");
  ASSERT_TRUE(hw8.ok());
  w.global_batch = 12;
  plan = MakePlan(*m, w, *hw8, Constraints{});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--global-batch 12"), std::string::npos) << plan.status();
  // A pinned stage above the highest one searched, or no stage at all, is refused by name (it crashed: the
  // search had nothing to try).
  w.global_batch = 8;
  Constraints above;
  above.zero_stage = 3;
  plan = MakePlan(*m, w, *hw8, above);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--stage 3 is above --max-stage 2"), std::string::npos)
      << plan.status();
  Constraints stage0;
  stage0.zero_stage = 0;
  stage0.offload = true;
  plan = MakePlan(*m, w, *hw8, stage0);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--offload on moves ZeRO's sharded optimizer state to the host: it "
                                         "needs --stage 1 or higher"),
            std::string::npos)
      << plan.status();
  Constraints none;
  none.max_stage = -1;
  plan = MakePlan(*m, w, *hw8, none);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--max-stage must be 0..3, got -1"), std::string::npos)
      << plan.status();
  // GRPO's lengths are the prompt's and the completion's.
  Workload g;
  g.task = Task::kGrpo;
  g.global_batch = 8;
  g.prompt_len = 100000;
  g.new_tokens = 100000;
  plan = MakePlan(*m, g, *hw8, Constraints{});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("or shorten --prompt-len or --new-tokens"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace zerofit::planner
