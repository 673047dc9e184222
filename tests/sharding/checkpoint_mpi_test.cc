// World-size-independent ZeRO-2 checkpoints: resume gives bit-identical parameters to an uninterrupted run,
// on the same or another number of ranks; saves are atomic; bad checkpoints are refused with the file and
// field.
//
// The gradients are dyadic (multiples of 1/64) split evenly over the ranks, so their sums are exact whatever
// the world size; AdamW is elementwise and clipping is off, so every world size computes the same bits.
// ctest runs the SaveForAnotherWorldSize / ResumeFromAnotherWorldSize pair as two mpiexec runs (4 ranks, then
// 2) sharing the directory in ZEROFIT_CHECKPOINT_TEST_DIR. With 8-bit moments (optim/adamw_8bit.h) the same
// holds: a checkpoint keeps the dequantised moments and their block scales, which quantise back to the same
// codes on any number of ranks.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/communicator_factory.h"
#include "nlohmann/json.hpp"
#include "offload/offload_shard_updater.h"
#include "optim/adamw_8bit.h"
#include "sharding/checkpoint.h"
#include "sharding/zero2_optimizer.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::sharding {
namespace {

namespace fs = std::filesystem;

// Where the cross-world-size pair meets (empty: the pair is skipped).
std::string SharedDir() {
  const char* d = std::getenv("ZEROFIT_CHECKPOINT_TEST_DIR");
  return d != nullptr ? d : "";
}

std::unique_ptr<comm::Communicator> MakeComm() {
  comm::CommOptions options;
  options.timeout = absl::Seconds(60);
  auto c = comm::CreateHostCommunicator(testing::MpiEnv(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

std::vector<ParamSpec> Specs() {
  return {{"embed", 1001, true}, {"layer.w", 333, true}, {"layer.b", 7, false}, {"head", 64, true}};
}

using optim::MomentFormat;

// With 8-bit moments, min_8bit_size 256: embed and layer.w keep 8-bit moments, layer.b and head fp32 ones.
Zero2Options Options(MomentFormat moments = MomentFormat::kFp32) {
  Zero2Options o;
  o.bucket_bytes = 1024;  // several buckets, parameters split across ranks at odd places
  o.adamw.weight_decay = 0.1f;
  o.max_grad_norm = 0.0f;
  o.moments.format = moments;
  o.moments.min_8bit_size = 256;
  return o;
}

// With `offload`, the state is in host memory, updated by offload::OffloadShardUpdater.
std::unique_ptr<Zero2Optimizer> MakeOptimizer(comm::Communicator* comm,
                                              MomentFormat moments = MomentFormat::kFp32,
                                              bool offload = false) {
  Zero2Options o = Options(moments);
  o.offload.enabled = offload;
  o.offload.threads = 2;
  Zero2Devices devices;
  devices.offload_updater = offload::OffloadShardUpdater::Create;
  auto opt = Zero2Optimizer::Create(Specs(), o, comm, devices);
  EXPECT_TRUE(opt.ok()) << opt.status();
  const auto specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    float* p = static_cast<float*>((*opt)->param_data(i));
    for (size_t e = 0; e < specs[i].numel; ++e) p[e] = static_cast<float>((e % 17) - 8) / 32.0f;
  }
  EXPECT_TRUE((*opt)->InitializeFromParameters().ok());
  return std::move(*opt);
}

// One optimizer step: the global gradient of step t is G = ((i + 3 e + 5 t) % 13 - 6) / 64, each rank adds
// G / W and reports 1 / W units.
void TrainSteps(Zero2Optimizer& opt, int64_t first, int64_t count) {
  const auto specs = Specs();
  const int world = opt.communicator()->world_size();
  for (int64_t t = first; t < first + count; ++t) {
    ASSERT_TRUE(opt.BeginMicroBatch(true).ok());
    for (size_t i = specs.size(); i-- > 0;) {
      std::vector<float> g(specs[i].numel);
      for (size_t e = 0; e < g.size(); ++e) {
        g[e] = static_cast<float>(static_cast<int64_t>((i + 3 * e + 5 * t) % 13) - 6) / 64.0f / world;
      }
      ASSERT_TRUE(opt.OnGradientReady(i, g.data()).ok());
    }
    ASSERT_TRUE(opt.EndMicroBatch(1.0 / world).ok());
    auto r = opt.Step(1e-2f);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->applied);
  }
}

std::vector<float> Parameters(Zero2Optimizer& opt) {
  std::vector<float> all;
  const auto specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const float* p = static_cast<const float*>(opt.param_data(i));
    all.insert(all.end(), p, p + specs[i].numel);
  }
  return all;
}

std::string TempRoot(comm::Communicator& comm, const std::string& tag) {
  // One directory for all ranks of this run: named after mpiexec (the ranks' parent).
  const std::string dir =
      (fs::temp_directory_path() / ("zerofit_ckpt_" + tag + "_" + std::to_string(getppid()))).string();
  if (comm.rank() == 0) fs::remove_all(dir);
  EXPECT_TRUE(comm.Barrier(absl::Seconds(30)).ok());
  return dir;
}

// Trains a resumed optimizer through steps 3-5, expects the uninterrupted run's parameters bit for bit, then
// removes the checkpoint root (every rank done with it first).
void FinishAndCompare(Zero2Optimizer& resumed, const std::vector<float>& expected, comm::Communicator& comm,
                      const std::string& root) {
  TrainSteps(resumed, 3, 3);
  const std::vector<float> got = Parameters(resumed);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  ASSERT_TRUE(comm.Barrier(absl::Seconds(30)).ok());
  if (comm.rank() == 0) fs::remove_all(root);
}

// With fp32 and with 8-bit moments: for the latter the checkpoint's scales give back the codes, so the
// resumed run is the uninterrupted one bit for bit (quantising the dequantised moments against their own
// absmax would not: the signed map's lowest code is -0.993).
TEST(CheckpointTest, ResumeGivesTheSameParametersAsAnUninterruptedRun) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  for (MomentFormat moments : {MomentFormat::kFp32, MomentFormat::kBlockwise8bit}) {
    SCOPED_TRACE(moments == MomentFormat::kFp32 ? "fp32 moments" : "8-bit moments");
    const std::string root = TempRoot(*comm, "resume");
    auto straight = MakeOptimizer(comm.get(), moments);
    TrainSteps(*straight, 0, 6);
    const std::vector<float> expected = Parameters(*straight);

    auto first = MakeOptimizer(comm.get(), moments);
    TrainSteps(*first, 0, 3);
    auto saved = SaveCheckpoint(*first, root, R"({"sampler": {"epoch": 0, "offset": 96}})");
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(saved->step, 3);
    first.reset();  // the "crash"

    auto second = MakeOptimizer(comm.get(), moments);  // fresh initial parameters, overwritten by the load
    auto loaded = LoadCheckpoint(*second, root);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->step, 3);
    EXPECT_EQ(second->step(), 3);
    EXPECT_EQ(loaded->world_size, comm->world_size());
    EXPECT_NE(loaded->extra.find("\"offset\":96"), std::string::npos) << loaded->extra;
    FinishAndCompare(*second, expected, *comm, root);
  }
}

// Offloaded 8-bit moments checkpoint as on-device ones do (the dequantised moments and each block's scale):
// a save from either updater resumes in either, bit for bit the uninterrupted run (offload steps with the
// on-device bits: zero2_device_mpi_test).
TEST(CheckpointTest, OffloadedEightBitMomentsResumeInEitherUpdater) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  auto straight = MakeOptimizer(comm.get(), MomentFormat::kBlockwise8bit);
  TrainSteps(*straight, 0, 6);
  const std::vector<float> expected = Parameters(*straight);
  for (bool save_offloaded : {true, false}) {
    for (bool load_offloaded : {true, false}) {
      if (!save_offloaded && !load_offloaded) continue;  // ResumeGivesTheSameParametersAsAnUninterruptedRun
      SCOPED_TRACE(absl::StrCat("saved ", save_offloaded ? "offloaded" : "on the device", ", loaded ",
                                load_offloaded ? "offloaded" : "on the device"));
      const std::string root = TempRoot(*comm, "offload8");
      auto first = MakeOptimizer(comm.get(), MomentFormat::kBlockwise8bit, save_offloaded);
      TrainSteps(*first, 0, 3);
      ASSERT_TRUE(SaveCheckpoint(*first, root).ok());
      first.reset();
      auto second = MakeOptimizer(comm.get(), MomentFormat::kBlockwise8bit, load_offloaded);
      auto loaded = LoadCheckpoint(*second, root);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      FinishAndCompare(*second, expected, *comm, root);
    }
  }
}

// 8-bit moments take another path than fp32 ones, in the bytes their format says: a code of each per shard
// element, a scale of each per block, fp32 moments for the small parameters' segments, and the two maps.
TEST(CheckpointTest, EightBitMomentsChangeThePathInTheirBytes) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  auto q = MakeOptimizer(comm.get(), MomentFormat::kBlockwise8bit);
  TrainSteps(*q, 0, 6);
  auto fp32 = MakeOptimizer(comm.get());
  TrainSteps(*fp32, 0, 6);
  EXPECT_NE(Parameters(*fp32), Parameters(*q));
  size_t packed = 0;
  for (const ShardSegment& seg : q->plan().segments()) {
    if (Specs()[seg.param].numel < Options().moments.min_8bit_size) packed += seg.numel;
  }
  const size_t shard = q->plan().shard_numel();
  const Zero2MemoryStats mem = q->memory();
  EXPECT_EQ(mem.exp_avg_bytes + mem.exp_avg_sq_bytes,
            2 * shard + 2 * sizeof(float) * (shard / optim::kQuantBlock) + 2 * sizeof(float) * packed +
                2 * optim::kMapCodes * sizeof(float));
  EXPECT_EQ(mem.master_bytes, shard * sizeof(float));
}

// ZeRO-2 with 8-bit moments on any number of ranks is bitsandbytes' per-tensor step: each parameter's
// blocks from its first element (optim::CpuAdamW8bit on the whole tensor), fp32 moments below
// min_8bit_size, the same gradient (exact sums: see the top of the file).
TEST(CheckpointTest, EightBitMomentsArePerParameterBlockwiseAdamW) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  auto opt = MakeOptimizer(comm.get(), MomentFormat::kBlockwise8bit);
  std::vector<float> reference = Parameters(*opt);  // the initial parameters
  TrainSteps(*opt, 0, 4);
  const optim::HostAdamW8bitMaps maps;
  const Zero2Options o = Options(MomentFormat::kBlockwise8bit);
  size_t at = 0;
  for (size_t i = 0; i < Specs().size(); ++i) {
    const ParamSpec& spec = Specs()[i];
    const size_t n = spec.numel, blocks = optim::QuantBlocks(n);
    std::vector<float> zeros(n, 0.0f), m(n, 0.0f), v(n, 0.0f), g(n), ms(blocks), vs(blocks);
    std::vector<uint8_t> mq(n), vq(n);
    optim::Quantize(maps.m.data(), zeros.data(), n, mq.data(), ms.data());
    optim::Quantize(maps.v.data(), zeros.data(), n, vq.data(), vs.data());
    optim::AdamWHyper h = optim::StepHyper(o.adamw, 1e-2f);
    if (!spec.weight_decay) h.weight_decay = 0.0f;
    for (int64_t t = 0; t < 4; ++t) {
      for (size_t e = 0; e < n; ++e)
        g[e] = static_cast<float>(static_cast<int64_t>((i + 3 * e + 5 * t) % 13) - 6) / 64.0f;
      if (n < o.moments.min_8bit_size) {
        optim::CpuAdamWScalar(reference.data() + at, g.data(), m.data(), v.data(), n, h, t + 1, 1.0f);
        continue;
      }
      optim::AdamW8bitSpans s;
      s.param = reference.data() + at;
      s.grad = g.data();
      s.m = mq.data();
      s.v = vq.data();
      s.m_absmax = ms.data();
      s.v_absmax = vs.data();
      s.n = n;
      optim::CpuAdamW8bit(s, maps.view(), h, t + 1, 1.0f);
    }
    at += n;
  }
  const std::vector<float> got = Parameters(*opt);
  ASSERT_EQ(got.size(), reference.size());
  EXPECT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0);
}

// A checkpoint of one moment format loads into an optimizer of the other: the master weights exactly, the
// moments converted (8-bit ones dequantised; fp32 ones quantised against their own blocks), and training
// goes on.
TEST(CheckpointTest, CheckpointsLoadAcrossMomentFormats) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  for (MomentFormat from : {MomentFormat::kFp32, MomentFormat::kBlockwise8bit}) {
    const MomentFormat to = from == MomentFormat::kFp32 ? MomentFormat::kBlockwise8bit : MomentFormat::kFp32;
    const std::string root = TempRoot(*comm, "across");
    auto first = MakeOptimizer(comm.get(), from);
    TrainSteps(*first, 0, 3);
    ASSERT_TRUE(SaveCheckpoint(*first, root).ok());
    auto second = MakeOptimizer(comm.get(), to);
    ASSERT_TRUE(LoadCheckpoint(*second, root).ok());
    EXPECT_EQ(Parameters(*second), Parameters(*first));
    TrainSteps(*second, 3, 2);
    TrainSteps(*first, 3, 2);
    const std::vector<float> a = Parameters(*first), b = Parameters(*second);
    // Two steps of at most ~lr each apart from where they met.
    for (size_t e = 0; e < a.size(); ++e) ASSERT_NEAR(a[e], b[e], 4e-2) << e;
    ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
    if (comm->rank() == 0) fs::remove_all(root);
  }
}

TEST(CheckpointTest, SavesAreAtomicAndOnlyCompleteCheckpointsAreKept) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "atomic");
  auto opt = MakeOptimizer(comm.get());
  TrainSteps(*opt, 0, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root).ok());
  TrainSteps(*opt, 2, 2);
  // A save that died half-way (a leftover temporary directory) must not be what a load finds.
  if (comm->rank() == 0) {
    fs::create_directories(fs::path(root) / "step-00000009.tmp");
    std::ofstream(fs::path(root) / "step-00000009.tmp" / "manifest.json") << "{ truncated";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  auto second = SaveCheckpoint(*opt, root);
  ASSERT_TRUE(second.ok()) << second.status();
  std::ifstream latest(fs::path(root) / "latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-00000004");
  EXPECT_FALSE(fs::exists(fs::path(root) / "step-00000002")) << "keep = 1: the older one is removed";
  EXPECT_FALSE(fs::exists(fs::path(root) / "step-00000004.tmp"));
  for (int r = 0; r < comm->world_size(); ++r) {
    EXPECT_TRUE(fs::exists(fs::path(root) / name / ("rank-0000" + std::to_string(r) + ".safetensors")));
  }
  auto fresh = MakeOptimizer(comm.get());
  auto loaded = LoadCheckpoint(*fresh, root);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 4);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// A directory that also holds a later step's checkpoint (another run's): a save keeps the one it just wrote
// (and `latest` names it) and leaves the later one alone; only this run's older checkpoints are pruned.
TEST(CheckpointTest, ASaveNeverRemovesItsOwnOrALaterCheckpoint) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "later");
  auto opt = MakeOptimizer(comm.get());
  TrainSteps(*opt, 0, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root).ok());
  if (comm->rank() == 0) fs::copy(fs::path(root) / "step-00000002", fs::path(root) / "step-00000900");
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  TrainSteps(*opt, 2, 1);
  ASSERT_TRUE(SaveCheckpoint(*opt, root).ok());
  EXPECT_TRUE(fs::exists(fs::path(root) / "step-00000003" / "manifest.json"));
  EXPECT_TRUE(fs::exists(fs::path(root) / "step-00000900" / "manifest.json"));
  EXPECT_FALSE(fs::exists(fs::path(root) / "step-00000002")) << "keep = 1: this run's older one goes";
  auto fresh = MakeOptimizer(comm.get());
  auto loaded = LoadCheckpoint(*fresh, root);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 3);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// A checkpoint.dir that also holds the user's own step-* folders (no `latest`): rotation removes only the
// checkpoints this job wrote (its owner marker), never a folder zerofit did not write, whatever its name.
TEST(CheckpointTest, RotationKeepsFoldersZerofitDidNotWrite) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "foreign");
  const fs::path r(root);
  if (comm->rank() == 0) {
    fs::create_directories(r / "step-00000001");
    std::ofstream(r / "step-00000001" / "notes.txt") << "the user's own";
    fs::create_directories(r / "step-1");
    std::ofstream(r / "step-1" / "weights.bin") << "the user's own";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  auto opt = MakeOptimizer(comm.get());
  const std::string owner = R"({"job": "job-000001", "request": "run-1"})";
  TrainSteps(*opt, 0, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, owner).ok());
  TrainSteps(*opt, 2, 1);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, owner).ok());
  // Another job's checkpoint of an earlier step in the same directory is not this job's to rotate either.
  if (comm->rank() == 0) fs::copy(r / "step-00000003", r / "step-00000000", fs::copy_options::recursive);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  TrainSteps(*opt, 3, 1);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, R"({"job": "job-000002", "request": "run-2"})").ok());
  EXPECT_TRUE(fs::exists(r / "step-00000001" / "notes.txt"));
  EXPECT_TRUE(fs::exists(r / "step-1" / "weights.bin"));
  EXPECT_FALSE(fs::exists(r / "step-00000002")) << "keep = 1: this job's older checkpoint goes";
  EXPECT_TRUE(fs::exists(r / "step-00000000" / "manifest.json")) << "job-000001's copy is not run-2's";
  EXPECT_TRUE(fs::exists(r / "step-00000003" / "manifest.json")) << "run-1's checkpoint is not run-2's";
  EXPECT_TRUE(fs::exists(r / "step-00000004" / "manifest.json"));
  // A folder of exactly the name the next save would write, and a temporary one, both the user's: the save
  // is refused, naming the folder, rather than replacing or writing into it.
  for (const char* name : {"step-00000005", "step-00000006.tmp"}) {
    ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
    if (comm->rank() == 0) {
      fs::create_directories(r / name);
      std::ofstream(r / name / "notes.txt") << "the user's own";
    }
    ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
    TrainSteps(*opt, opt->step(), 1);
    auto refused = SaveCheckpoint(*opt, root, owner);
    ASSERT_FALSE(refused.ok());
    if (comm->rank() == 0) {
      EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_NE(refused.status().message().find(absl::StrCat((r / name).string(),
                                                             " exists and zerofit did not "
                                                             "write it for this job")),
                std::string::npos)
          << refused.status();
    }
    EXPECT_TRUE(fs::exists(r / name / "notes.txt")) << name;
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// While it lives, this process cannot grow a file past `bytes` (a full disk, for one rank): writes fail with
// EFBIG instead of raising SIGXFSZ.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_), 0);
    previous_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = std::min(bytes, saved_.rlim_max);
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_)(int) = nullptr;
};

// A save that fails part-way (the last rank's disk is full: its rank file cannot be written) removes the
// `step-N.tmp` it wrote; the checkpoint before it stays complete, named by `latest`, and loads.
TEST(CheckpointTest, AFailedSaveRemovesWhatItWroteAndKeepsTheOlderCheckpoints) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "failed");
  const fs::path r(root);
  const std::string owner = R"({"job": "job-000001", "request": "run-1"})";
  auto opt = MakeOptimizer(comm.get());
  TrainSteps(*opt, 0, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, owner).ok());
  const std::vector<float> at_step_two = Parameters(*opt);
  TrainSteps(*opt, 2, 1);
  {
    const bool full = comm->rank() == comm->world_size() - 1;
    FileSizeLimit limit(full ? 4096 : RLIM_INFINITY);  // a rank file here is > 5 KiB; a marker < 1 KiB
    auto saved = SaveCheckpoint(*opt, root, owner);
    ASSERT_FALSE(saved.ok()) << "a save past the file size limit succeeded";
    if (full) {
      EXPECT_NE(saved.status().message().find("rank-"), std::string::npos) << saved.status();
    }
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  EXPECT_FALSE(fs::exists(r / "step-00000003.tmp")) << "the failed save left its folder behind";
  EXPECT_FALSE(fs::exists(r / "step-00000003"));
  for (const auto& e : fs::recursive_directory_iterator(r)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  }
  EXPECT_TRUE(fs::exists(r / "step-00000002" / "manifest.json"));
  std::ifstream latest(r / "latest");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(latest), {}), "step-00000002\n");
  auto fresh = MakeOptimizer(comm.get());
  auto loaded = LoadCheckpoint(*fresh, root);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, 2);
  EXPECT_EQ(Parameters(*fresh), at_step_two);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// A save killed (kill -9) or failed (disk full) leaves `step-N.tmp` behind. The next save of the same job
// removes its own stale ones and names them; a foreign `.tmp` folder stays.
TEST(CheckpointTest, StaleTemporaryFoldersOfThisJobAreRemovedAndNamed) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "stale");
  const fs::path r(root);
  const std::string owner = R"({"job": "job-000001", "request": "run-1"})";
  auto opt = MakeOptimizer(comm.get());
  TrainSteps(*opt, 0, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, owner).ok());
  TrainSteps(*opt, 2, 2);
  ASSERT_TRUE(SaveCheckpoint(*opt, root, owner, /*keep=*/2).ok());
  if (comm->rank() == 0) {
    // Killed between writing every file and the rename: what the folder held then, under its .tmp name.
    fs::rename(r / "step-00000002", r / "step-00000009.tmp");
    fs::create_directories(r / "step-00000007.tmp");  // killed right after creating it
    fs::create_directories(r / "step-00000008.tmp");
    std::ofstream(r / "step-00000008.tmp" / "mine.txt") << "the user's own";
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  TrainSteps(*opt, 4, 1);
  auto saved = SaveCheckpoint(*opt, root, owner, /*keep=*/2);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_FALSE(fs::exists(r / "step-00000009.tmp"));
  EXPECT_FALSE(fs::exists(r / "step-00000007.tmp")) << "an empty folder holds nothing to lose";
  EXPECT_TRUE(fs::exists(r / "step-00000008.tmp" / "mine.txt"));
  EXPECT_TRUE(fs::exists(r / "step-00000005" / "manifest.json"));
  if (comm->rank() == 0) {
    EXPECT_EQ(saved->removed_stale, (std::vector<std::string>{(r / "step-00000007.tmp").string(),
                                                              (r / "step-00000009.tmp").string()}));
  } else {
    EXPECT_TRUE(saved->removed_stale.empty()) << "rank 0 alone cleans up";
  }
  // Another job's stale folder is not this job's to remove.
  if (comm->rank() == 0) fs::rename(r / "step-00000004", r / "step-00000010.tmp");
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  TrainSteps(*opt, 5, 1);
  saved = SaveCheckpoint(*opt, root, R"({"job": "job-000002", "request": "run-2"})");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_TRUE(fs::exists(r / "step-00000010.tmp" / "manifest.json"));
  EXPECT_TRUE(saved->removed_stale.empty());
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

TEST(CheckpointTest, BadCheckpointsAreRefusedWithFileAndField) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "bad");
  auto opt = MakeOptimizer(comm.get());
  EXPECT_EQ(LoadCheckpoint(*opt, root).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(SaveCheckpoint(*opt, root).ok());
  // A model with a differently sized parameter.
  std::vector<ParamSpec> other = Specs();
  other[1].numel = 334;
  auto different = Zero2Optimizer::Create(other, Options(), comm.get());
  ASSERT_TRUE(different.ok());
  auto r = LoadCheckpoint(**different, root);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("manifest.json: field 'params[1]'"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("layer.w"), std::string::npos) << r.status();
  // A run whose file offset wraps around when its length is added (the copy read outside the rank file).
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  const fs::path manifest = fs::path(root) / "step-00000000" / "manifest.json";
  std::string original;
  if (comm->rank() == 0) {
    std::ifstream in(manifest);
    original.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    nlohmann::json j = nlohmann::json::parse(original);
    j["files"][0]["runs"][0][3] = std::numeric_limits<uint64_t>::max();
    std::ofstream(manifest, std::ios::trunc) << j.dump(1);
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  r = LoadCheckpoint(*opt, root);
  ASSERT_FALSE(r.ok()) << "a wrapped file offset was accepted";
  EXPECT_NE(r.status().message().find("field 'files[0].runs'"), std::string::npos) << r.status();
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) std::ofstream(manifest, std::ios::trunc) << original;
  // A truncated rank file.
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::resize_file(fs::path(root) / "step-00000000" / "rank-00000.safetensors", 100);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  r = LoadCheckpoint(*opt, root);
  ASSERT_FALSE(r.ok());
  // Rank 0 reads that file and names it; a rank that did not need it learns that another rank failed.
  const std::string expected = comm->rank() == 0 ? "rank-00000.safetensors" : "another rank failed";
  EXPECT_NE(r.status().message().find(expected), std::string::npos) << r.status();
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// The manifest names parameters; their placement order may differ between the run that saved and the one
// that resumes (a model that registers its modules in another order, as zerofit's Llama layer did once): the
// state is matched by name, and the resumed run ends where the uninterrupted one does.
TEST(CheckpointTest, AResumeIntoAnotherParameterOrderMatchesParametersByName) {
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  const std::string root = TempRoot(*comm, "order");
  auto straight = MakeOptimizer(comm.get());
  TrainSteps(*straight, 0, 4);
  auto saved = MakeOptimizer(comm.get());
  TrainSteps(*saved, 0, 3);
  ASSERT_TRUE(SaveCheckpoint(*saved, root).ok());

  const std::vector<ParamSpec> specs = Specs();
  const std::vector<ParamSpec> reversed(specs.rbegin(), specs.rend());
  auto opt = Zero2Optimizer::Create(reversed, Options(), comm.get());
  ASSERT_TRUE(opt.ok()) << opt.status();
  auto loaded = LoadCheckpoint(**opt, root);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // Step 3 with TrainSteps' gradients, parameter i of `reversed` being Specs()'s n - 1 - i.
  const int world = comm->world_size();
  const size_t n = specs.size();
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  for (size_t i = 0; i < n; ++i) {
    const size_t k = n - 1 - i;
    std::vector<float> g(specs[k].numel);
    for (size_t e = 0; e < g.size(); ++e) {
      g[e] = static_cast<float>(static_cast<int64_t>((k + 3 * e + 5 * 3) % 13) - 6) / 64.0f / world;
    }
    ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
  }
  ASSERT_TRUE((*opt)->EndMicroBatch(1.0 / world).ok());
  ASSERT_TRUE((*opt)->Step(1e-2f).ok());
  for (size_t i = 0; i < n; ++i) {
    const size_t k = n - 1 - i;
    EXPECT_EQ(std::memcmp((*opt)->param_data(i), straight->param_data(k), specs[k].numel * sizeof(float)), 0)
        << specs[k].name;
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  if (comm->rank() == 0) fs::remove_all(root);
}

// Cross-world-size resume, first half: save at step 3 and record the uninterrupted result of 6 steps.
TEST(CheckpointTest, SaveForAnotherWorldSize) {
  const std::string shared = SharedDir();
  if (shared.empty()) GTEST_SKIP() << "needs ZEROFIT_CHECKPOINT_TEST_DIR";
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  if (comm->rank() == 0) fs::remove_all(shared);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
  for (MomentFormat moments : {MomentFormat::kFp32, MomentFormat::kBlockwise8bit}) {
    const std::string tag = moments == MomentFormat::kFp32 ? "" : "8bit";
    auto straight = MakeOptimizer(comm.get(), moments);
    TrainSteps(*straight, 0, 6);
    auto opt = MakeOptimizer(comm.get(), moments);
    TrainSteps(*opt, 0, 3);
    ASSERT_TRUE(SaveCheckpoint(*opt, shared + "/ckpt" + tag).ok());
    if (comm->rank() == 0) {
      const std::vector<float> expected = Parameters(*straight);
      std::ofstream out(shared + "/expected" + tag + ".bin", std::ios::binary);
      out.write(reinterpret_cast<const char*>(expected.data()),
                static_cast<std::streamsize>(expected.size() * 4));
    }
  }
  ASSERT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
}

// Second half, run with another number of ranks: resume and finish; the parameters equal the record.
TEST(CheckpointTest, ResumeFromAnotherWorldSize) {
  const std::string shared = SharedDir();
  if (shared.empty()) GTEST_SKIP() << "needs ZEROFIT_CHECKPOINT_TEST_DIR";
  auto comm = MakeComm();
  ASSERT_NE(comm, nullptr);
  for (MomentFormat moments : {MomentFormat::kFp32, MomentFormat::kBlockwise8bit}) {
    const std::string tag = moments == MomentFormat::kFp32 ? "" : "8bit";
    SCOPED_TRACE("moments " + (tag.empty() ? std::string("fp32") : tag));
    auto opt = MakeOptimizer(comm.get(), moments);
    auto loaded = LoadCheckpoint(*opt, shared + "/ckpt" + tag);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_NE(loaded->world_size, comm->world_size()) << "the pair is meant to change the world size";
    TrainSteps(*opt, 3, 3);
    std::vector<float> expected(Parameters(*opt).size());
    std::ifstream in(shared + "/expected" + tag + ".bin", std::ios::binary);
    in.read(reinterpret_cast<char*>(expected.data()), static_cast<std::streamsize>(expected.size() * 4));
    ASSERT_TRUE(in.good());
    const std::vector<float> got = Parameters(*opt);
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace zerofit::sharding
