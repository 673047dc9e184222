// The grid of one launch on the host: one host thread per CUDA thread of a block, each running the kernel for
// every block in one shared shuffled order. Block state (barrier, warps, shared memory) exists from the first
// thread that needs it until the block's last thread has returned.
#include "tests/cuda_emulation/kernel_launch.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "tests/cuda_emulation/rendezvous.h"

namespace zerofit::cuda_emulation {
namespace {

#if defined(__SANITIZE_THREAD__)
extern "C" {
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
}
#endif

// The emulation's own bookkeeping (a block's state found or made, a thread's exit, a shared array handed
// out) synchronises through mutexes and reference counts that a GPU's threads do not have. Under TSan it is
// made invisible while it lives, so that it orders nothing between CUDA threads: only __syncthreads, the
// warps' shuffles, the launch and the stream order kernel code, and a race that a GPU would have is reported.
class Bookkeeping {
 public:
  Bookkeeping() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  }
  ~Bookkeeping() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
#endif
  }
  Bookkeeping(const Bookkeeping&) = delete;
  Bookkeeping& operator=(const Bookkeeping&) = delete;
};

constexpr unsigned kWarpSize = 32;
constexpr std::chrono::milliseconds kBarrierDeadline{60000};

using FaultSink = std::function<void(std::string)>;

class BlockState {
 public:
  // `exited`: per thread of the block, whether it already returned (it counts as arrived).
  BlockState(size_t block, const std::vector<char>& exited, const FaultSink& fault) {
    const unsigned threads = static_cast<unsigned>(exited.size());
    const std::string name = "block " + std::to_string(block);
    barrier_ =
        std::make_unique<Rendezvous>(threads, Count(exited, 0, threads), name, fault, kBarrierDeadline);
    for (unsigned w = 0; w * kWarpSize < threads; ++w) {
      const unsigned end = std::min(threads, (w + 1) * kWarpSize);
      warps_.push_back(std::make_unique<Warp>());
      warps_.back()->rendezvous =
          std::make_unique<Rendezvous>(end - w * kWarpSize, Count(exited, w * kWarpSize, end),
                                       "warp " + std::to_string(w) + " of " + name, fault, kBarrierDeadline);
    }
  }

  Rendezvous& barrier() { return *barrier_; }

  // Exchanges `bits` between the lanes of `thread`'s warp: lane ^ lane_mask's value.
  uint64_t ShuffleXor(unsigned thread, uint64_t bits, unsigned lane_mask, int line) {
    Warp& warp = *warps_[thread / kWarpSize];
    const unsigned lane = thread % kWarpSize;
    warp.slots[lane] = bits;
    warp.rendezvous->Arrive(line);  // every lane has written
    const uint64_t out = warp.slots[(lane ^ lane_mask) % kWarpSize];
    warp.rendezvous->Arrive(line);  // every lane has read before any writes again
    return out;
  }

  void Exit(unsigned thread) {
    barrier_->Arrive(Rendezvous::kExit);
    warps_[thread / kWarpSize]->rendezvous->Arrive(Rendezvous::kExit);
  }

  void* Shared(const void* key, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<unsigned char[]>& array = shared_[key];
    if (array == nullptr) {
      array = std::make_unique<unsigned char[]>(bytes);
      std::fill_n(array.get(), bytes, 0xFF);  // shared memory starts undefined: NaN-like garbage
    }
    return array.get();
  }

 private:
  struct Warp {
    std::unique_ptr<Rendezvous> rendezvous;
    uint64_t slots[kWarpSize] = {};
  };

  static unsigned Count(const std::vector<char>& exited, unsigned begin, unsigned end) {
    return static_cast<unsigned>(std::count(exited.begin() + begin, exited.begin() + end, 1));
  }

  std::unique_ptr<Rendezvous> barrier_;
  std::vector<std::unique_ptr<Warp>> warps_;
  std::mutex mu_;
  std::map<const void*, std::unique_ptr<unsigned char[]>> shared_;
};

class Grid {
 public:
  Grid(dim3 grid, dim3 block) : grid_(grid), threads_(block.x * block.y * block.z) {
    fault_ = [this](std::string why) {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_fault_.empty()) first_fault_ = std::move(why);
    };
  }

  unsigned threads() const { return threads_; }
  size_t blocks() const { return size_t{grid_.x} * grid_.y * grid_.z; }

  // The block's state, created by the first thread that needs it.
  std::shared_ptr<BlockState> State(size_t block) {
    std::lock_guard<std::mutex> lock(mu_);
    Record& r = RecordOf(block);
    if (r.state == nullptr) r.state = std::make_shared<BlockState>(block, r.exited, fault_);
    return r.state;
  }

  // `thread` of `block` returned from the kernel.
  void Exit(size_t block, unsigned thread) {
    std::shared_ptr<BlockState> state;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Record& r = RecordOf(block);
      r.exited[thread] = 1;
      state = r.state;
      if (++r.exited_count == threads_) records_.erase(block);
    }
    if (state != nullptr) state->Exit(thread);
  }

  void Fault(std::string why) { fault_(std::move(why)); }

  std::string first_fault() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_fault_;
  }

 private:
  struct Record {
    std::vector<char> exited;
    unsigned exited_count = 0;
    std::shared_ptr<BlockState> state;
  };

  Record& RecordOf(size_t block) {  // mu_ held
    Record& r = records_[block];
    if (r.exited.empty()) r.exited.assign(threads_, 0);
    return r;
  }

  const dim3 grid_;
  const unsigned threads_;
  FaultSink fault_;
  std::mutex mu_;
  std::map<size_t, Record> records_;
  std::string first_fault_;
};

// What the running CUDA thread is, for the functions the kernel calls.
struct CurrentThread {
  Grid* grid = nullptr;
  size_t block = 0;
  unsigned thread = 0;
  std::shared_ptr<BlockState> state;  // of `block`, once needed
};
thread_local CurrentThread current;

BlockState& CurrentState() {
  if (current.grid == nullptr) std::abort();  // a device function called outside a kernel
  if (current.state == nullptr) {
    Bookkeeping quiet;
    current.state = current.grid->State(current.block);
  }
  return *current.state;
}

uint3 Unflatten(size_t i, dim3 shape) {
  return {static_cast<unsigned>(i % shape.x), static_cast<unsigned>(i / shape.x % shape.y),
          static_cast<unsigned>(i / shape.x / shape.y)};
}

void RunThread(Grid& grid, dim3 grid_shape, dim3 block_shape, unsigned thread,
               const std::vector<size_t>& order, const std::function<void()>& body) {
  current = CurrentThread{&grid, 0, thread, nullptr};
  threadIdx = Unflatten(thread, block_shape);
  blockDim = block_shape;
  gridDim = grid_shape;
  for (size_t block : order) {
    current.block = block;
    {
      Bookkeeping quiet;
      current.state.reset();
    }
    blockIdx = Unflatten(block, grid_shape);
    body();
    Bookkeeping quiet;
    grid.Exit(block, thread);
  }
  Bookkeeping quiet;
  current = CurrentThread{};
}

}  // namespace

void SyncThreads(int line) { CurrentState().barrier().Arrive(line); }

void* SharedArray(const void* key, size_t bytes) {
  BlockState& state = CurrentState();
  Bookkeeping quiet;
  return state.Shared(key, bytes);
}

uint64_t ShuffleXorBits(unsigned mask, uint64_t bits, int lane_mask, int line) {
  if (mask != 0xffffffffu || current.grid->threads() % kWarpSize != 0 || lane_mask < 0 ||
      lane_mask >= static_cast<int>(kWarpSize)) {
    current.grid->Fault(
        "__shfl_xor_sync at line " + std::to_string(line) +
        ": only full warps (mask 0xffffffff, blocks of whole warps, lane mask < 32) are emulated");
    return bits;
  }
  return CurrentState().ShuffleXor(current.thread, bits, static_cast<unsigned>(lane_mask), line);
}

std::string RunGrid(dim3 grid_shape, dim3 block_shape, const std::function<void()>& body) {
  Grid grid(grid_shape, block_shape);
  // CUDA runs blocks in no fixed order: every thread walks them in the same shuffled one (the same for all
  // threads, so that a thread at a block's barrier never waits for one stuck in another block).
  std::vector<size_t> order(grid.blocks());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(order.size()));
  std::vector<std::thread> threads;
  threads.reserve(grid.threads());
  for (unsigned t = 0; t < grid.threads(); ++t) {
    threads.emplace_back(RunThread, std::ref(grid), grid_shape, block_shape, t, std::cref(order),
                         std::cref(body));
  }
  for (std::thread& t : threads) t.join();
  return grid.first_fault();
}

}  // namespace zerofit::cuda_emulation
