// The CUDA allocation report (worker/torch/train/cuda_allocations.h), issue 32's diagnostic for the GRPO
// passes' measured peaks.
//   unit: the report's text from given blocks (what is listed, in what order, what is summed), the code
//         address names, and the refusals where there is no CUDA device;
//   gpu:  on cuda:0, a tensor's block is live with a stack through LibTorch's empty, a block allocated before
//         the recording has none, and a report's second section lists exactly what was allocated since the
//         first (skips without a GPU visible to a CUDA LibTorch).
#include "worker/torch/train/cuda_allocations.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/worker/data/test_support.h"
#include "worker/torch/train/peak_live_set.h"

namespace zerofit::worker {
namespace {

using data::testing::ScopedTempDir;

LiveAllocation Block(uint64_t address, size_t bytes, uint64_t id, std::vector<std::string> frames = {}) {
  LiveAllocation a;
  a.address = address;
  a.bytes = bytes;
  a.requested_bytes = bytes;
  a.id = id;
  a.frames = std::move(frames);
  return a;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

constexpr size_t kMiB = 1 << 20;

TEST(CudaAllocationReportTest, AFirstSectionListsTheLargestBlocksAndSumsTheRest) {
  const std::vector<LiveAllocation> now = {Block(0x1000, 3 * kMiB, 1, {"f  lib.so+0x10", "g  lib.so+0x20"}),
                                           Block(0x9000, 8 * kMiB, 2), Block(0x5000, 4096, 3)};
  AllocationReportOptions o;
  o.max_frames = 1;
  const std::string text = FormatAllocationSection("step 1 generation start", now, nullptr, o);
  EXPECT_NE(text.find("== step 1 generation start: 3 blocks live, 11.0 MiB (11538432 B)"), std::string::npos)
      << text;
  // Largest first; the 4 KiB block is under min_bytes and only summed.
  const size_t eight = text.find("+ 8.0 MiB (8388608 B)"), three = text.find("+ 3.0 MiB (3145728 B)");
  ASSERT_NE(eight, std::string::npos) << text;
  ASSERT_NE(three, std::string::npos) << text;
  EXPECT_LT(eight, three);
  EXPECT_NE(text.find("+ 1 more blocks, 0.0 MiB (4096 B)"), std::string::npos) << text;
  // max_frames: the first frame only; a block without frames says it predates the recording.
  EXPECT_NE(text.find("#0 f  lib.so+0x10"), std::string::npos) << text;
  EXPECT_EQ(text.find("g  lib.so+0x20"), std::string::npos) << text;
  EXPECT_EQ(Count(text, "\n      (allocated before the recording began)"), 1u) << text;
  // By site: the two blocks without a stack together, the 3 MiB one's site unknown in its two frames.
  EXPECT_NE(text.find("8.0 MiB in    2 blocks  (allocated before the recording began)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("3.0 MiB in    1 blocks  ? <- ?"), std::string::npos) << text;
  // A [V, H] fp32 buffer is recognisable by its element counts.
  EXPECT_NE(text.find("fp32 x 2097152, bf16 x 4194304"), std::string::npos) << text;
}

TEST(CudaAllocationReportTest, ALaterSectionListsOnlyWhatThePreviousOneDidNotHold) {
  const std::vector<LiveAllocation> before = {Block(0x1000, 2 * kMiB, 1), Block(0x9000, 5 * kMiB, 2)};
  // 0x1000 kept; 0x9000 freed and its address reused by a new allocation of the same size (another id);
  // one block new at a new address.
  const std::vector<LiveAllocation> now = {Block(0x1000, 2 * kMiB, 1), Block(0x9000, 5 * kMiB, 7),
                                           Block(0x20000, 6 * kMiB, 8)};
  const std::string text = FormatAllocationSection("step 2 generation start", now, &before);
  EXPECT_NE(text.find("new since the previous step's same point: 2 blocks, 11.0 MiB"), std::string::npos)
      << text;
  EXPECT_NE(text.find("+ 6.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("+ 5.0 MiB"), std::string::npos) << text;
  EXPECT_EQ(text.find("+ 2.0 MiB"), std::string::npos) << "a block held at both points is not new\n" << text;
  // Nothing new: the count says so and no block is listed.
  const std::string same = FormatAllocationSection("step 3 generation start", now, &now);
  EXPECT_NE(same.find("same point: 0 blocks, 0.0 MiB"), std::string::npos) << same;
  EXPECT_EQ(Count(same, "  + "), 0u) << same;
}

// A site is the operator the caller ran (not the ones inside its kernel) and the caller: a zerofit function,
// an autograd node, or the program's own frame by offset when it exports no names.
TEST(CudaAllocationReportTest, ASiteIsTheOperatorAndWhoRanIt) {
  const std::vector<std::string> inner = {
      "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned "
      "long, CUstream_st*)  libc10_cuda.so+0x100",
      "at::_ops::empty_strided::call(c10::ArrayRef<c10::SymInt>)  libtorch_cpu.so+0x200",
      "at::native::mm_out_cuda(at::Tensor const&, at::Tensor const&)  libtorch_cuda.so+0x300",
      "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)  libtorch_cpu.so+0x400"};
  std::vector<std::string> named = inner;
  named.push_back("zerofit::worker::LlamaModelImpl::Hidden(at::Tensor const&)  zerofit_train_prefs+0x500");
  named.push_back("main  zerofit_train_prefs+0x600");
  EXPECT_EQ(AllocationSite(named), "at::_ops::mm <- zerofit::worker::LlamaModelImpl::Hidden");
  std::vector<std::string> unnamed = inner;
  unnamed.push_back("?  zerofit_train_prefs+0x1a2b");
  EXPECT_EQ(AllocationSite(unnamed), "at::_ops::mm <- ?  zerofit_train_prefs+0x1a2b");
  std::vector<std::string> backward = inner;
  backward.push_back(
      "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)  libtorch_cpu.so+0x700");
  backward.push_back(
      "torch::autograd::Engine::thread_main(std::shared_ptr<GraphTask> const&)  libtorch_cpu.so+0x800");
  EXPECT_EQ(AllocationSite(backward), "at::_ops::mm <- torch::autograd::generated::MmBackward0::apply");
  EXPECT_EQ(AllocationSite({"f(int)  liba.so+0x1"}), "? <- ?");
  EXPECT_EQ(AllocationSite({}), "(allocated before the recording began)");
  // A section sums the blocks of one site.
  const std::vector<LiveAllocation> now = {Block(0x1000, 2 * kMiB, 1, named),
                                           Block(0x9000, 3 * kMiB, 2, named),
                                           Block(0x20000, 1 * kMiB, 3, unnamed)};
  const std::string text = FormatAllocationSection("p", now, nullptr);
  EXPECT_NE(text.find("5.0 MiB in    2 blocks  at::_ops::mm <- zerofit::worker::LlamaModelImpl::Hidden"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1.0 MiB in    1 blocks  at::_ops::mm <- ?  zerofit_train_prefs+0x1a2b"),
            std::string::npos)
      << text;
}

TEST(CudaAllocationReportTest, ACodeAddressIsNamedWithItsModuleAndOffset) {
  // An exported LibTorch function: demangled, in LibTorch's CPU library.
  const std::string name = DescribeCodeAddress(reinterpret_cast<const void*>(&at::globalContext));
  EXPECT_EQ(name.rfind("at::globalContext()  libtorch_cpu.so", 0), 0u) << name;
  EXPECT_NE(name.find("+0x"), std::string::npos) << name;
}

TEST(CudaAllocationReportTest, WithoutACudaDeviceRecordingIsRefusedAndNothingIsLeftRecording) {
  const absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> r =
      CudaAllocationRecorder::Start(torch::Device(torch::kCPU));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("CUDA"), std::string::npos) << r.status();
  ScopedTempDir dir;
  const std::string path = dir.File("allocations.txt");
  const absl::StatusOr<std::unique_ptr<CudaAllocationReport>> report =
      CudaAllocationReport::Open(path, torch::Device(torch::kCPU));
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find(path), std::string::npos) << report.status();
}

// The peak's live set: what was live at the largest total since the reset, copied within 1% or 1 MiB of it;
// frees of unknown addresses are ignored, and a reset restarts the peak from what is live.
TEST(PeakLiveSetTest, KeepsTheBlocksLiveAtThePeak) {
  PeakLiveSet set;
  const auto context = std::make_shared<int>(7);
  set.Allocated(0x1000, 4 * kMiB, nullptr);  // seeded: live before the recording
  set.Reset();
  set.Allocated(0x2000, 8 * kMiB,
                context);  // a pass: +8 MiB, then +16 MiB, the first freed, then a small one
  set.Allocated(0x3000, 16 * kMiB, nullptr);
  set.Freed(0x2000);
  set.Freed(0x9999);  // not live: ignored
  set.Allocated(0x4000, 1024, nullptr);
  EXPECT_EQ(set.peak_bytes(), 28 * kMiB);
  EXPECT_EQ(set.live_bytes(), 20 * kMiB + 1024);
  std::vector<PeakLiveSet::Block> at = set.AtPeak();
  ASSERT_EQ(at.size(), 3u);  // 0x1000, 0x2000 (with its context), 0x3000
  size_t total = 0;
  for (const PeakLiveSet::Block& b : at) total += b.bytes;
  EXPECT_EQ(total, 28 * kMiB);
  EXPECT_EQ(at[1].address, 0x2000u);
  EXPECT_EQ(at[1].context, context);
  // The next pass: its peak starts from the 20 MiB + 1 KiB live now.
  set.Reset();
  EXPECT_EQ(set.peak_bytes(), 20 * kMiB + 1024);
  EXPECT_EQ(set.AtPeak().size(), 3u);  // 0x1000, 0x3000, 0x4000
  // A growth under 1 MiB past the last copy raises the peak but takes no copy; one past it does.
  set.Allocated(0x5000, 512 << 10, nullptr);
  EXPECT_EQ(set.peak_bytes(), 20 * kMiB + 1024 + (512 << 10));
  EXPECT_EQ(set.AtPeak().size(), 3u);
  set.Allocated(0x6000, 1 * kMiB, nullptr);
  EXPECT_EQ(set.AtPeak().size(), 5u);
  // An address allocated again replaces its entry (a trace seen twice while the recorder started).
  set.Allocated(0x6000, 1 * kMiB, nullptr);
  EXPECT_EQ(set.live_bytes(), 21 * kMiB + 1024 + (512 << 10));
}

bool CudaVisible() { return torch::cuda::is_available(); }

TEST(CudaAllocationReportTest, GpuALiveTensorCarriesTheStackThatAllocatedIt) {
  if (!CudaVisible()) GTEST_SKIP() << "no CUDA device";
  const torch::TensorOptions cuda = torch::TensorOptions().device(torch::kCUDA, 0).dtype(torch::kFloat32);
  const torch::Tensor early = torch::empty({5 * (1 << 18)}, cuda);  // 5 MiB, before the recording
  absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> recorder =
      CudaAllocationRecorder::Start(torch::Device(torch::kCUDA, 0));
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  const torch::Tensor late = torch::empty({3 * (1 << 18)}, cuda);  // 3 MiB
  bool saw_early = false, saw_late = false;
  for (const LiveAllocation& a : (*recorder)->Live()) {
    if (a.address == reinterpret_cast<uintptr_t>(early.data_ptr())) {
      saw_early = true;
      EXPECT_TRUE(a.frames.empty());
    }
    if (a.address == reinterpret_cast<uintptr_t>(late.data_ptr())) {
      saw_late = true;
      EXPECT_EQ(a.requested_bytes, 3u * kMiB);
      std::string stack;
      for (const std::string& f : a.frames) stack += f + "\n";
      EXPECT_NE(stack.find("empty"), std::string::npos) << "LibTorch's empty allocated it:\n" << stack;
    }
  }
  EXPECT_TRUE(saw_early && saw_late);
}

// The peak of a pass names a tensor that was freed before the pass ended: what a snapshot at the end misses.
TEST(CudaAllocationReportTest, GpuThePeakHoldsATensorFreedBeforeTheEnd) {
  if (!CudaVisible()) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> recorder =
      CudaAllocationRecorder::Start(torch::Device(torch::kCUDA, 0));
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  ASSERT_TRUE((*recorder)->tracks_peak()) << "this LibTorch's allocator trace is one zerofit knows";
  (*recorder)->ResetPeak();
  const torch::TensorOptions cuda = torch::TensorOptions().device(torch::kCUDA, 0).dtype(torch::kFloat32);
  uint64_t address = 0;
  {
    const torch::Tensor transient = torch::empty({9 * (1 << 18)}, cuda);  // 9 MiB, freed at the brace
    address = reinterpret_cast<uintptr_t>(transient.data_ptr());
  }
  bool at_peak = false;
  for (const LiveAllocation& a : (*recorder)->AtPeak()) at_peak = at_peak || a.address == address;
  EXPECT_TRUE(at_peak);
  bool live = false;
  for (const LiveAllocation& a : (*recorder)->Live())
    live = live || (a.address == address && a.bytes >= 9 * kMiB);
  EXPECT_FALSE(live) << "freed: not live at the end";
}

TEST(CudaAllocationReportTest, GpuTheSecondSectionListsExactlyWhatWasAllocatedSinceTheFirst) {
  if (!CudaVisible()) GTEST_SKIP() << "no CUDA device";
  ScopedTempDir dir;
  const std::string path = dir.File("allocations.txt");
  absl::StatusOr<std::unique_ptr<CudaAllocationReport>> report =
      CudaAllocationReport::Open(path, torch::Device(torch::kCUDA, 0));
  ASSERT_TRUE(report.ok()) << report.status();
  const torch::TensorOptions cuda = torch::TensorOptions().device(torch::kCUDA, 0).dtype(torch::kBFloat16);
  const torch::Tensor kept = torch::empty({1 << 20}, cuda);
  ASSERT_TRUE((*report)->Write(0, "point").ok());
  const torch::Tensor added = torch::empty({7 * (1 << 19)}, cuda);  // 7 MiB
  ASSERT_TRUE((*report)->Write(1, "point").ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t second = text.find("== step 2 point");
  ASSERT_NE(second, std::string::npos) << text;
  const std::string tail = text.substr(second);
  // The block's size is the allocator's rounding of the request; the request is what was asked.
  EXPECT_NE(tail.find("same point: 1 blocks,"), std::string::npos) << tail;
  EXPECT_NE(tail.find("requested 7340032 B"), std::string::npos) << tail;
}

}  // namespace
}  // namespace zerofit::worker
