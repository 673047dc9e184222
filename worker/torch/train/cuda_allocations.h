// What holds a CUDA device's memory at a point of a run, block by block, with the host stack that allocated
// each: the CUDA caching allocator's live blocks (its snapshot) and, while a CudaAllocationRecorder is
// alive, the stack of every allocation (its history recording). The caching allocator's peak says how much
// a pass held; this says what. Issue 32's pass check needs it: on an H200 every GRPO generation pass after
// the first training pass held 2 x vocabulary x hidden x 4 B + 32 MiB more than the first, whatever the
// shape, and neither zerofit's buffers nor the CPU harness show it
// (docs/gpu-runs/2026-11-27-h200-7d5f4cd.md).
//
// The recorder needs a CUDA build of LibTorch 2.x; elsewhere Start() says so. Reports are text:
// CudaAllocationReport appends one section per point to a file, and each section lists the blocks that are
// live now and were not at the same point of the previous step (the rest is summed).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/torch/train/peak_live_set.h"

namespace zerofit::worker {

struct LiveAllocation {
  uint64_t address = 0;
  size_t bytes = 0;            // the block's size (the allocator rounds requests up)
  size_t requested_bytes = 0;  // what the caller asked for
  uint64_t id = 0;             // distinct for distinct allocations alive at once (their recorded context)
  // Innermost first, each "function  module+0xoffset" (addr2line -e module offset names a static one);
  // empty when the block was allocated before recording began.
  std::vector<std::string> frames;
};

// "function  module+0xoffset" for a code address: the exported symbol, demangled, where dladdr finds one
// ("?" for a static function or a program linked without -rdynamic; `addr2line -f -C -e module offset`
// names those), and the module's base name with the offset. A recorded stack holds return addresses.
std::string DescribeCodeAddress(const void* address);

// Records the allocating stack of every CUDA caching-allocator allocation while alive (RAII: the destructor
// stops the recording). One at a time per process: the allocator has one recorder.
class CudaAllocationRecorder {
 public:
  // FailedPrecondition where `device` is not CUDA or this LibTorch has no CUDA caching allocator;
  // Unimplemented where its recordHistory has a signature this file does not know.
  static absl::StatusOr<std::unique_ptr<CudaAllocationRecorder>> Start(const torch::Device& device);
  ~CudaAllocationRecorder();
  CudaAllocationRecorder(const CudaAllocationRecorder&) = delete;
  CudaAllocationRecorder& operator=(const CudaAllocationRecorder&) = delete;

  // The device's allocated blocks now, largest first.
  std::vector<LiveAllocation> Live() const;

  // The blocks live at the device's allocated peak since the last ResetPeak (PeakLiveSet: within 1% or
  // 1 MiB of it), largest first; empty where this LibTorch's allocator trace has a form this file does not
  // know (tracks_peak() false).
  bool tracks_peak() const { return peak_ != nullptr; }
  void ResetPeak();
  std::vector<LiveAllocation> AtPeak() const;

  struct TrackedPeak;  // the allocator callback's state (cuda_allocations.cc)

 private:
  CudaAllocationRecorder(int device, std::shared_ptr<TrackedPeak> peak);
  int device_;
  // Names of the return addresses Live() and AtPeak() have met (a report's points share them): one thread at
  // a time.
  mutable std::unordered_map<const void*, std::string> names_;
  // Shared with the allocator's trace callback, which outlives the recorder (the allocator cannot detach
  // one): the destructor turns it off.
  std::shared_ptr<TrackedPeak> peak_;
};

// Where a block was allocated, in one line, "OPERATOR <- CALLER": the LibTorch operator that allocated it
// (the outermost "at::_ops::NAME" frame below the caller) and the innermost frame that says what ran it (a
// zerofit:: function, an autograd node's apply, or a frame of the program itself, as "?  program+0xOFFSET"
// where the program exports no symbols); "?" for a part not found. A report sums the blocks of a site.
std::string AllocationSite(const std::vector<std::string>& frames);

// One report section: `label` (say "step 2 generation start"), the live total, and the blocks of `now` that
// `before` does not hold (same address, size and id; `before` null: all of them): summed by site
// (AllocationSite, the `max_sites` largest), then the `max_blocks` largest of at least `min_bytes` with up to
// `max_frames` frames each, the rest summed.
struct AllocationReportOptions {
  size_t min_bytes = 1 << 20;
  size_t max_blocks = 12;
  size_t max_frames = 14;
  size_t max_sites = 24;
};
std::string FormatAllocationSection(const std::string& label, const std::vector<LiveAllocation>& now,
                                    const std::vector<LiveAllocation>* before,
                                    const AllocationReportOptions& options = {});

// Appends a section per point to `path`, each compared with the same point's previous section (the points
// of a step repeat every step, so "new since step 1's generation start" is what step 2's start holds more).
class CudaAllocationReport {
 public:
  // Starts recording, then truncates `path`; errors name `path` and say why (a refusal leaves the file).
  static absl::StatusOr<std::unique_ptr<CudaAllocationReport>> Open(const std::string& path,
                                                                    const torch::Device& device);
  // `point` names the place in the step ("generation start"), `step` the step (1-based in the text).
  absl::Status Write(int64_t step, const std::string& point);
  // A pass's peak: ResetPeak at its start, WritePeak at its end (a section of all the blocks at the peak).
  void ResetPeak() { recorder_->ResetPeak(); }
  absl::Status WritePeak(int64_t step, const std::string& pass);

 private:
  CudaAllocationReport(std::string path, std::unique_ptr<CudaAllocationRecorder> recorder)
      : path_(std::move(path)), recorder_(std::move(recorder)) {}
  absl::Status Append(const std::string& section);
  std::string path_;
  std::unique_ptr<CudaAllocationRecorder> recorder_;
  std::map<std::string, std::vector<LiveAllocation>> previous_;  // by point
};

}  // namespace zerofit::worker
