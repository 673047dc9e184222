// The blocks that were live when an allocator's total was largest: fed every allocation and free (the CUDA
// caching allocator's trace callback, cuda_allocations.h), it keeps the live set and a copy of it taken at
// the peak, so that a report can say what a pass's peak consisted of, where a snapshot at a fixed point
// misses the moment (a backward's transients). Thread-safe: the allocator calls it from every thread that
// allocates (the forward's, autograd's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace zerofit::worker {

class PeakLiveSet {
 public:
  struct Block {
    uint64_t address = 0;
    size_t bytes = 0;
    std::shared_ptr<const void> context;  // the allocator's record of the allocating stack, or null
  };

  void Allocated(uint64_t address, size_t bytes, std::shared_ptr<const void> context);
  // An address not live (allocated before the set was seeded, or freed twice in the trace) is ignored.
  void Freed(uint64_t address);
  // The peak starts again from what is live now.
  void Reset();

  size_t live_bytes() const;
  size_t peak_bytes() const;
  // The live set at the peak. It is copied each time the total passes the last copy's by 1% or 1 MiB, so it
  // is within that of the peak and costs O(live blocks) a few dozen times a pass, not at every allocation.
  std::vector<Block> AtPeak() const;

 private:
  void CopyLocked();

  mutable std::mutex mu_;
  std::map<uint64_t, Block> live_;
  size_t live_bytes_ = 0, peak_bytes_ = 0, copied_bytes_ = 0;
  std::vector<Block> at_peak_;
};

}  // namespace zerofit::worker
