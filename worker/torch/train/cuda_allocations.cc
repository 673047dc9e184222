#include "worker/torch/train/cuda_allocations.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"

#ifdef ZEROFIT_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace zerofit::worker {

std::string DescribeCodeAddress(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return absl::StrFormat("%p", address);
  std::string name = "?";
  if (info.dli_sname != nullptr) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
    std::free(demangled);
    constexpr size_t kLongest = 160;  // template-heavy names run to kilobytes
    if (name.size() > kLongest) name = name.substr(0, kLongest) + "...";
  }
  const std::string module = info.dli_fname;
  const std::string base = module.substr(module.find_last_of('/') + 1);
  const auto offset = reinterpret_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(info.dli_fbase);
  return absl::StrFormat("%s  %s+0x%x", name, base, offset);
}

namespace {

std::string Bytes(size_t b) { return absl::StrFormat("%.1f MiB (%d B)", b / 1048576.0, b); }

// What a block's size is in elements of the dtypes a model uses: how a [V, H] buffer is recognised.
std::string ElementCounts(size_t requested) {
  return absl::StrFormat("fp32 x %d, bf16 x %d", requested / 4, requested / 2);
}

using Key = std::tuple<uint64_t, size_t, uint64_t>;
Key KeyOf(const LiveAllocation& a) { return {a.address, a.bytes, a.id}; }

void AppendBlock(const LiveAllocation& a, size_t max_frames, std::string* out) {
  absl::StrAppend(out, "  + ", Bytes(a.bytes), ", requested ", a.requested_bytes, " B (",
                  ElementCounts(a.requested_bytes), ")", absl::StrFormat(" at 0x%x", a.address), "\n");
  if (a.frames.empty()) absl::StrAppend(out, "      (allocated before the recording began)\n");
  for (size_t i = 0; i < a.frames.size() && i < max_frames; ++i)
    absl::StrAppend(out, "      #", i, " ", a.frames[i], "\n");
}

// "NAME" of a frame "NAME(args)  module+0x..": the function without its parameters.
std::string FunctionOf(const std::string& frame) {
  const size_t paren = frame.find('(');
  const size_t end = paren != std::string::npos ? paren : frame.find("  ");
  return frame.substr(0, end);
}

void AppendSites(const std::vector<const LiveAllocation*>& blocks, size_t max_sites, std::string* out) {
  std::map<std::string, std::pair<size_t, size_t>> sites;  // site -> bytes, blocks
  for (const LiveAllocation* a : blocks) {
    auto& s = sites[AllocationSite(a->frames)];
    s.first += a->bytes;
    ++s.second;
  }
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> sorted(sites.begin(), sites.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& x, const auto& y) { return x.second.first > y.second.first; });
  absl::StrAppend(out, "  by site (", sorted.size(), "):\n");
  for (size_t i = 0; i < sorted.size() && i < max_sites; ++i) {
    absl::StrAppend(out,
                    absl::StrFormat("    %10.1f MiB in %4d blocks  ", sorted[i].second.first / 1048576.0,
                                    sorted[i].second.second),
                    sorted[i].first, "\n");
  }
}

}  // namespace

std::string AllocationSite(const std::vector<std::string>& frames) {
  if (frames.empty()) return "(allocated before the recording began)";
  // Innermost first: the operator is the outermost at::_ops frame below the caller (an operator's kernel
  // calls others, empty_strided for its output, which are not what the caller ran). The caller: a zerofit::
  // function, an autograd node's apply, or a frame of the program itself (a module that is no shared
  // library), which without -rdynamic has no name here but its offset, which addr2line names.
  std::string op = "?";
  for (const std::string& f : frames) {
    const std::string fn = FunctionOf(f);
    const bool autograd = fn.find("Backward") != std::string::npos && fn.find("::apply") != std::string::npos;
    const size_t module_at = f.rfind("  ");
    const bool program = module_at != std::string::npos && f.find(".so", module_at) == std::string::npos;
    if (fn.rfind("zerofit::", 0) == 0 || autograd) return absl::StrCat(op, " <- ", fn);
    if (program) return absl::StrCat(op, " <- ", fn == "?" ? f : fn);
    if (fn.rfind("at::_ops::", 0) == 0) op = fn.substr(0, fn.rfind("::"));
  }
  return absl::StrCat(op, " <- ?");
}

std::string FormatAllocationSection(const std::string& label, const std::vector<LiveAllocation>& now,
                                    const std::vector<LiveAllocation>* before,
                                    const AllocationReportOptions& options) {
  size_t total = 0;
  for (const LiveAllocation& a : now) total += a.bytes;
  std::string out = absl::StrCat("== ", label, ": ", now.size(), " blocks live, ", Bytes(total), "\n");
  std::set<Key> seen;
  if (before != nullptr)
    for (const LiveAllocation& a : *before) seen.insert(KeyOf(a));
  std::vector<const LiveAllocation*> listed;
  for (const LiveAllocation& a : now)
    if (!seen.count(KeyOf(a))) listed.push_back(&a);
  std::stable_sort(listed.begin(), listed.end(),
                   [](const LiveAllocation* x, const LiveAllocation* y) { return x->bytes > y->bytes; });
  size_t new_bytes = 0, small_count = 0, small_bytes = 0;
  for (const LiveAllocation* a : listed) new_bytes += a->bytes;
  absl::StrAppend(&out, before != nullptr ? "  new since the previous step's same point: " : "  all: ",
                  listed.size(), " blocks, ", Bytes(new_bytes), "\n");
  AppendSites(listed, options.max_sites, &out);
  for (size_t i = 0; i < listed.size(); ++i) {
    if (listed[i]->bytes < options.min_bytes || i >= options.max_blocks) {
      ++small_count;
      small_bytes += listed[i]->bytes;
      continue;
    }
    AppendBlock(*listed[i], options.max_frames, &out);
  }
  if (small_count > 0) absl::StrAppend(&out, "  + ", small_count, " more blocks, ", Bytes(small_bytes), "\n");
  return out;
}

#ifdef ZEROFIT_TORCH_CUDA
namespace {

namespace cuda_alloc = c10::cuda::CUDACachingAllocator;
using FrameNames = std::unordered_map<const void*, std::string>;
constexpr int kMaxFrames = 40;
// The recorder's own frame (CaptureStack), dropped from every stack.
constexpr int kOwnFrames = 1;
using GatheredContextT = std::invoke_result_t<cuda_alloc::CreateContextFn>::element_type;

struct StackContext final : GatheredContextT {
  std::array<void*, kMaxFrames> frames{};
  int count = 0;
};

// Called by the allocator on every allocation while recording: the raw return addresses only (symbols are
// looked up when a report is written, for the blocks it lists).
std::shared_ptr<GatheredContextT> CaptureStack() {
  auto c = std::make_shared<StackContext>();
  c->count = backtrace(c->frames.data(), kMaxFrames);
  return c;
}

// recordHistory's parameters changed within LibTorch 2.x: (enabled, recorder, trace entries, when) in 2.1 to
// 2.6, then a clearHistory flag, then a list of actions to skip (pip's 2.11). The newest form this LibTorch
// declares is called; the priority tags rank the overloads, and one that does not compile drops out.
struct Tag0 {};
struct Tag1 : Tag0 {};
struct Tag2 : Tag1 {};
struct Tag3 : Tag2 {};

template <typename When>
auto RecordHistory(bool on, When when, Tag3)
    -> decltype(cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when, false,
                                          std::vector<std::string>{}),
                bool()) {
  cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when, false, std::vector<std::string>{});
  return true;
}
template <typename When>
auto RecordHistory(bool on, When when, Tag2)
    -> decltype(cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when, false), bool()) {
  cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when, false);
  return true;
}
template <typename When>
auto RecordHistory(bool on, When when, Tag1)
    -> decltype(cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when), bool()) {
  cuda_alloc::recordHistory(on, &CaptureStack, size_t{1}, when);
  return true;
}
template <typename When>
bool RecordHistory(bool, When, Tag0) {
  return false;
}

// ALLOC: a stack for each live allocation and on each trace entry, which the peak tracker reads (the
// allocator's own trace history is 1 entry long: nothing reads it).
bool SetRecording(bool on) {
  return RecordHistory(on, on ? cuda_alloc::RecordContext::ALLOC : cuda_alloc::RecordContext::NEVER, Tag3{});
}

// `context` is a GatheredContext (the allocator's), held as void by PeakLiveSet. Each return address is
// named once (`names`): a report point lists thousands of blocks from a few hundred call sites.
std::vector<std::string> Frames(const std::shared_ptr<const void>& context, FrameNames* names) {
  std::vector<std::string> out;
  const auto* stack = dynamic_cast<const StackContext*>(static_cast<const GatheredContextT*>(context.get()));
  if (stack == nullptr) return out;
  for (int i = kOwnFrames; i < stack->count; ++i) {
    auto [it, added] = names->try_emplace(stack->frames[i]);
    if (added) it->second = DescribeCodeAddress(stack->frames[i]);
    out.push_back(it->second);
  }
  return out;
}

LiveAllocation FromBlock(uint64_t address, size_t bytes, size_t requested,
                         const std::shared_ptr<const void>& context, FrameNames* names) {
  LiveAllocation a;
  a.address = address;
  a.bytes = bytes;
  a.requested_bytes = requested;
  a.id = reinterpret_cast<uintptr_t>(context.get());
  a.frames = Frames(context, names);
  return a;
}

void ByLargest(std::vector<LiveAllocation>* blocks) {
  std::stable_sort(blocks->begin(), blocks->end(),
                   [](const LiveAllocation& x, const LiveAllocation& y) { return x.bytes > y.bytes; });
}

}  // namespace

struct CudaAllocationRecorder::TrackedPeak {
  explicit TrackedPeak(int d) : device(d) {}
  const int device;
  std::atomic<bool> on{true};
  PeakLiveSet set;
};

namespace {

// The allocator's trace callback into a PeakLiveSet: every allocation and free request of the device
// (allocated bytes drop at the request; a free delayed by another stream's use completes later). The
// TraceEntry fields it reads are checked to exist (2.1 to 2.11 have them); elsewhere no tracker.
template <typename Entry>
auto AttachPeakTracker(std::shared_ptr<CudaAllocationRecorder::TrackedPeak> t, Tag1)
    -> decltype(std::declval<const Entry&>().addr_, std::declval<const Entry&>().size_,
                std::declval<const Entry&>().device_, std::declval<const Entry&>().action_,
                std::shared_ptr<const void>(std::declval<const Entry&>().context_), Entry::ALLOC,
                Entry::FREE_REQUESTED, bool()) {
  cuda_alloc::attachAllocatorTraceTracker([t](const Entry& e) {
    if (!t->on.load(std::memory_order_relaxed) || static_cast<int>(e.device_) != t->device) return;
    if (e.action_ == Entry::ALLOC) t->set.Allocated(e.addr_, e.size_, e.context_);
    if (e.action_ == Entry::FREE_REQUESTED) t->set.Freed(e.addr_);
  });
  return true;
}
template <typename Entry>
bool AttachPeakTracker(std::shared_ptr<CudaAllocationRecorder::TrackedPeak>, Tag0) {
  return false;
}

}  // namespace

CudaAllocationRecorder::CudaAllocationRecorder(int device, std::shared_ptr<TrackedPeak> peak)
    : device_(device), peak_(std::move(peak)) {}

absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> CudaAllocationRecorder::Start(
    const torch::Device& device) {
  if (!device.is_cuda()) {
    return absl::FailedPreconditionError(
        absl::StrCat("recording CUDA allocations needs a CUDA device; this run is on ", device.str()));
  }
  if (!SetRecording(true)) {
    return absl::UnimplementedError(
        "this LibTorch's CUDACachingAllocator::recordHistory has a signature zerofit does not know");
  }
  // The tracker first, then the blocks already live: one allocated in between is seen twice, harmlessly.
  auto peak = std::make_shared<TrackedPeak>(device.index());
  if (!AttachPeakTracker<cuda_alloc::TraceEntry>(peak, Tag1{})) peak.reset();
  std::unique_ptr<CudaAllocationRecorder> r(new CudaAllocationRecorder(device.index(), peak));
  if (peak) {
    for (const LiveAllocation& a : r->Live()) peak->set.Allocated(a.address, a.bytes, nullptr);
    peak->set.Reset();
  }
  return r;
}

CudaAllocationRecorder::~CudaAllocationRecorder() {
  if (peak_) peak_->on = false;
  SetRecording(false);
}

void CudaAllocationRecorder::ResetPeak() {
  if (peak_) peak_->set.Reset();
}

std::vector<LiveAllocation> CudaAllocationRecorder::AtPeak() const {
  std::vector<LiveAllocation> out;
  if (!peak_) return out;
  for (const PeakLiveSet::Block& b : peak_->set.AtPeak())
    out.push_back(FromBlock(b.address, b.bytes, b.bytes, b.context, &names_));
  ByLargest(&out);
  return out;
}

std::vector<LiveAllocation> CudaAllocationRecorder::Live() const {
  std::vector<LiveAllocation> out;
  const auto snapshot = cuda_alloc::snapshot();
  for (const auto& segment : snapshot.segments) {
    if (static_cast<int>(segment.device) != device_) continue;
    uint64_t address = segment.address;
    for (const auto& block : segment.blocks) {
      if (block.allocated)
        out.push_back(
            FromBlock(address, block.size, block.requested_size, block.context_when_allocated, &names_));
      address += block.size;
    }
  }
  ByLargest(&out);
  return out;
}

#else

absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> CudaAllocationRecorder::Start(
    const torch::Device& device) {
  return absl::FailedPreconditionError(absl::StrCat(
      "recording CUDA allocations needs a CUDA build of LibTorch; this one is CPU-only (the run is on ",
      device.str(), ")"));
}

struct CudaAllocationRecorder::TrackedPeak {};

CudaAllocationRecorder::~CudaAllocationRecorder() = default;

std::vector<LiveAllocation> CudaAllocationRecorder::Live() const { return {}; }

void CudaAllocationRecorder::ResetPeak() {}

std::vector<LiveAllocation> CudaAllocationRecorder::AtPeak() const { return {}; }

#endif

absl::StatusOr<std::unique_ptr<CudaAllocationReport>> CudaAllocationReport::Open(
    const std::string& path, const torch::Device& device) {
  // The device first: a refused report leaves the file as it was.
  absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> recorder = CudaAllocationRecorder::Start(device);
  if (!recorder.ok()) {
    return absl::Status(recorder.status().code(),
                        absl::StrCat("allocation report ", path, ": ", recorder.status().message()));
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("cannot write the allocation report ", path));
  return std::unique_ptr<CudaAllocationReport>(new CudaAllocationReport(path, *std::move(recorder)));
}

absl::Status CudaAllocationReport::Write(int64_t step, const std::string& point) {
  std::vector<LiveAllocation> now = recorder_->Live();
  auto previous = previous_.find(point);
  ZF_RETURN_IF_ERROR(
      Append(FormatAllocationSection(absl::StrCat("step ", step + 1, " ", point), now,
                                     previous == previous_.end() ? nullptr : &previous->second)));
  previous_[point] = std::move(now);
  return absl::OkStatus();
}

absl::Status CudaAllocationReport::WritePeak(int64_t step, const std::string& pass) {
  if (!recorder_->tracks_peak()) return absl::OkStatus();
  return Append(FormatAllocationSection(absl::StrCat("step ", step + 1, " ", pass, " peak"),
                                        recorder_->AtPeak(), nullptr));
}

absl::Status CudaAllocationReport::Append(const std::string& section) {
  std::ofstream out(path_, std::ios::app);
  out << section;
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat("writing the allocation report ", path_, " failed"));
  return absl::OkStatus();
}

}  // namespace zerofit::worker
