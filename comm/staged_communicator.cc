#include "comm/staged_communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace zerofit::comm {
// Named, not anonymous: the Impl below holds these types (and unity builds put other backends' anonymous
// helpers in the same translation unit).
namespace staging {

// How long past a collective's deadline Work::Wait still waits for the completion thread's verdict: the
// host backend reports within about a second after the deadline (MpiWork), and the copy back follows.
constexpr absl::Duration kVerdictGrace = absl::Seconds(10);
// At destruction, how long collectives still pending may take before they are given up on.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);
// Staging blocks are rounded up to this many bytes, so collectives of slightly different sizes share them.
constexpr size_t kBlockGranule = 64u << 10;
// Offset of the output area inside a reduce-scatter's block (after the input).
constexpr size_t kAreaAlignment = 64;

size_t RoundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// One copy from the staging block back to device memory (BYTES).
struct CopyBack {
  size_t block_offset = 0;
  void* dst = nullptr;
  size_t bytes = 0;
};

// One staged collective: completion state shared by the caller's Work and the completion thread.
struct StagedOp {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;                           // guarded by mu
  bool copy_back_enqueued = false;             // guarded by mu
  absl::Status status;                         // guarded by mu; final once done
  std::unique_ptr<device::Event> copied_back;  // set (under mu) before copy_back_enqueued
  absl::Time deadline;

  // The completion thread's only (set before the op is queued).
  std::unique_ptr<Work> host_work;
  device::Buffer block;
  std::vector<CopyBack> copy_back;

  void Finish(absl::Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      status = std::move(s);
    }
    cv.notify_all();
  }

  // Waits until `ready` holds or `timeout` passes; a wait reaching the deadline waits for the verdict.
  template <typename Pred>
  bool WaitUntil(absl::Duration timeout, std::unique_lock<std::mutex>& lock, Pred ready) {
    absl::Time until = absl::Now() + timeout;
    if (until >= deadline) until = std::max(until, deadline + kVerdictGrace);
    return cv.wait_for(lock, absl::ToChronoNanoseconds(until - absl::Now()), ready);
  }
};

class StagedWork final : public Work {
 public:
  explicit StagedWork(std::shared_ptr<StagedOp> op) : op_(std::move(op)) {}

  absl::Status Wait(absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(op_->mu);
    if (!op_->WaitUntil(timeout, lock, [&] { return op_->done; })) return StillRunning(timeout);
    return op_->status;
  }

  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(op_->mu);
    return op_->done;
  }

  // The host collective is waited for on the host (it has no device event); the copy back is not: the
  // consumer waits for it on the device. A copy back that fails after this returns breaks the communicator
  // (the next call reports it).
  absl::Status OrderBefore(device::Stream& consumer, absl::Duration timeout) override {
    device::Event* copied_back = nullptr;
    {
      std::unique_lock<std::mutex> lock(op_->mu);
      if (!op_->WaitUntil(timeout, lock, [&] { return op_->done || op_->copy_back_enqueued; }))
        return StillRunning(timeout);
      if (op_->done && !op_->status.ok()) return op_->status;
      copied_back = op_->copied_back.get();
    }
    // copied_back lives as long as op_; Event methods are thread-safe.
    return copied_back == nullptr ? absl::OkStatus() : copied_back->Wait(consumer);
  }

 private:
  absl::Status StillRunning(absl::Duration timeout) const {
    return absl::DeadlineExceededError(
        absl::StrCat("staged collective still running after waiting ", absl::FormatDuration(timeout),
                     " (its own deadline is in ", absl::FormatDuration(op_->deadline - absl::Now()), ")"));
  }

  std::shared_ptr<StagedOp> op_;
};

// How one collective uses its staging block: what is copied in, what the host communicator is given, what
// is copied back. Offsets and sizes in BYTES.
struct StagePlan {
  size_t block_bytes = 0;
  const void* copy_in_src = nullptr;
  size_t copy_in_offset = 0;
  size_t copy_in_bytes = 0;
  // Only what the collective changes: an in-place all-gather's own slot and a broadcast root's buffer are
  // not written back (as MPI and NCCL leave them untouched), so a stream that refills them once the
  // consumer was ordered (the next update of this rank's shard) cannot be overwritten by a late copy back.
  std::vector<CopyBack> copy_back;
  // Issues the host collective on the staging block (`after`: the stream that fills it).
  std::function<absl::StatusOr<std::unique_ptr<Work>>(char* block, device::Stream* after)> issue;
};

Buffer Staged(char* block, size_t offset, const Buffer& like) {
  return Buffer{block + offset, like.count, like.dtype, Device::kCpu};
}

}  // namespace staging

struct StagedCommunicator::Impl {
  std::unique_ptr<Communicator> owned_host;
  Communicator* host = nullptr;
  device::Device* device = nullptr;
  Device staged_tag = Device::kCpu;
  std::unique_ptr<device::Stream> in_stream;   // copies in; enqueued under issue_mu
  std::unique_ptr<device::Stream> out_stream;  // copies back; the completion thread's only
  std::atomic<bool> aborted{false};
  std::atomic<size_t> staged_calls{0};
  std::atomic<size_t> passed_through_calls{0};

  // Issue order: the copy in, its marker and the host call of one collective are not interleaved with
  // another's.
  std::mutex issue_mu;

  mutable std::mutex pool_mu;
  std::vector<device::Buffer> free_blocks;  // guarded by pool_mu
  std::vector<device::Buffer> retired;      // guarded by pool_mu: freed after the streams drained
  std::vector<device::Buffer> abandoned;    // guarded by pool_mu: a host collective may still write them
  size_t blocks = 0;                        // guarded by pool_mu: blocks held (free or in use)
  size_t block_allocations = 0;             // guarded by pool_mu
  size_t bytes = 0;                         // guarded by pool_mu
  size_t pinned_bytes = 0;                  // guarded by pool_mu

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<staging::StagedOp>> queue;  // guarded by mu
  bool stop = false;                                     // guarded by mu
  absl::Time stop_time;                                  // guarded by mu
  absl::Status broken;                                   // guarded by mu
  std::thread thread;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      stop_time = absl::Now();
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    const absl::Duration drain = host->options().timeout;
    if (in_stream) (void)in_stream->Synchronize(drain);
    if (out_stream) (void)out_stream->Synchronize(drain);
    in_stream.reset();
    out_stream.reset();
    owned_host.reset();
    std::lock_guard<std::mutex> lock(pool_mu);
    if (!abandoned.empty()) {
      // Deliberately leaked: a host collective given up on may still write them (see the header).
      new std::vector<device::Buffer>(std::move(abandoned));
    }
  }

  absl::Status Usable() {
    if (aborted) return absl::AbortedError("staged communicator was aborted");
    std::lock_guard<std::mutex> lock(mu);
    if (!broken.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("staged communicator is unusable after an earlier failure: ", broken.message()));
    }
    return absl::OkStatus();
  }

  void Break(const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (broken.ok()) broken = s;
  }

  absl::StatusOr<device::Buffer> AcquireBlock(size_t want) {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      auto best = free_blocks.end();
      for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it) {
        if (it->bytes() >= want && (best == free_blocks.end() || it->bytes() < best->bytes())) best = it;
      }
      if (best != free_blocks.end()) {
        device::Buffer b = std::move(*best);
        free_blocks.erase(best);
        return b;
      }
      if (!free_blocks.empty()) {
        // Grow: every free block is too small; the largest makes room for the new one.
        auto largest = std::max_element(free_blocks.begin(), free_blocks.end(),
                                        [](const auto& a, const auto& b) { return a.bytes() < b.bytes(); });
        --blocks;
        bytes -= largest->bytes();
        pinned_bytes -= largest->pinned_bytes();
        free_blocks.erase(largest);
      }
    }
    ZF_ASSIGN_OR_RETURN(device::Buffer b, device->Allocate(staging::RoundUp(want, staging::kBlockGranule),
                                                           device::MemoryKind::kPinned));
    std::lock_guard<std::mutex> lock(pool_mu);
    ++blocks;
    ++block_allocations;
    bytes += b.bytes();
    pinned_bytes += b.pinned_bytes();
    return b;
  }

  void ReleaseBlock(device::Buffer b, bool reusable, bool host_may_write) {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (reusable) {
      free_blocks.push_back(std::move(b));
    } else {
      (host_may_write ? abandoned : retired).push_back(std::move(b));
    }
  }

  absl::StatusOr<std::unique_ptr<Work>> Issue(staging::StagePlan plan, device::Stream* after) {
    ZF_RETURN_IF_ERROR(Usable());
    ++staged_calls;
    if (plan.block_bytes == 0) {
      // Nothing to stage (zero elements): the host collective still runs, for the issue order.
      return plan.issue(nullptr, after);
    }
    auto op = std::make_shared<staging::StagedOp>();
    ZF_ASSIGN_OR_RETURN(op->block, AcquireBlock(plan.block_bytes));
    char* block = op->block.as<char>();
    absl::Status s;
    {
      std::lock_guard<std::mutex> lock(issue_mu);
      s = [&]() -> absl::Status {
        if (after != nullptr) {
          ZF_ASSIGN_OR_RETURN(std::unique_ptr<device::Event> produced, after->CreateEvent());
          ZF_RETURN_IF_ERROR(produced->Record(*after));
          ZF_RETURN_IF_ERROR(produced->Wait(*in_stream));
        }
        if (plan.copy_in_bytes > 0) {
          ZF_RETURN_IF_ERROR(
              in_stream->Copy(block + plan.copy_in_offset, plan.copy_in_src, plan.copy_in_bytes));
        }
        ZF_ASSIGN_OR_RETURN(op->host_work, plan.issue(block, in_stream.get()));
        return absl::OkStatus();
      }();
    }
    if (!s.ok()) {
      // A copy in may still be queued on the block: keep it until the streams have drained.
      ReleaseBlock(std::move(op->block), /*reusable=*/false, /*host_may_write=*/false);
      return s;
    }
    // Measured from after the host call, so that it is not earlier than the host collective's own deadline:
    // the completion thread's wait then reaches it and gets the host's verdict (which rank is missing).
    op->deadline = absl::Now() + host->options().timeout;
    op->copy_back = std::move(plan.copy_back);
    auto work = std::make_unique<staging::StagedWork>(op);
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(op));
    }
    cv.notify_all();
    return std::unique_ptr<Work>(std::move(work));
  }

  // Runs one op to its end: host collective, then the copy back.
  absl::Status Complete(staging::StagedOp& op, absl::Time limit) {
    ZF_RETURN_IF_ERROR(op.host_work->Wait(std::max(absl::ZeroDuration(), limit - absl::Now())));
    ZF_RETURN_IF_ERROR(Usable());
    // The copy in ran before the host collective did (its progress waited for it); a failure there
    // (an event wait that passed its deadline, a device fault) leaves the stream broken.
    ZF_RETURN_IF_ERROR(in_stream->status());
    for (const staging::CopyBack& c : op.copy_back) {
      ZF_RETURN_IF_ERROR(out_stream->Copy(c.dst, op.block.as<char>() + c.block_offset, c.bytes));
    }
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<device::Event> copied, out_stream->CreateEvent());
    ZF_RETURN_IF_ERROR(copied->Record(*out_stream));
    device::Event* raw = copied.get();
    {
      std::lock_guard<std::mutex> lock(op.mu);
      op.copied_back = std::move(copied);
      op.copy_back_enqueued = true;
    }
    op.cv.notify_all();
    ZF_RETURN_IF_ERROR(raw->Synchronize(host->options().timeout));
    return out_stream->status();
  }

  void Loop() {
    while (true) {
      std::shared_ptr<staging::StagedOp> op;
      absl::Time limit;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stop requested and nothing left
        op = std::move(queue.front());
        queue.pop_front();
        limit = stop ? std::min(op->deadline, stop_time + staging::kShutdownGrace) : op->deadline;
      }
      absl::Status s = Complete(*op, limit);
      if (!s.ok()) Break(s);
      const bool host_done = op->host_work->IsCompleted();
      ReleaseBlock(std::move(op->block), /*reusable=*/s.ok(), /*host_may_write=*/!host_done);
      op->host_work.reset();
      op->Finish(std::move(s));
    }
  }

  staging::StagePlan ReduceScatterPlan(const Buffer& in, const Buffer& out, ReduceOp reduce) {
    staging::StagePlan p;
    const size_t out_offset = staging::RoundUp(in.bytes(), staging::kAreaAlignment);
    p.block_bytes = in.bytes() == 0 ? 0 : out_offset + out.bytes();
    p.copy_in_src = in.data;
    p.copy_in_bytes = in.bytes();
    p.copy_back = {{out_offset, out.data, out.bytes()}};
    p.issue = [this, in, out, out_offset, reduce](char* block, device::Stream* after) {
      if (block == nullptr)
        return host->ReduceScatter(staging::Staged(nullptr, 0, in), staging::Staged(nullptr, 0, out), reduce);
      return host->ReduceScatter(staging::Staged(block, 0, in), staging::Staged(block, out_offset, out),
                                 reduce, after);
    };
    return p;
  }

  // Always in place on the block: the input goes to this rank's slot. Back come the other ranks' slots, and
  // this rank's too when the call was out of place (its output slot must receive the input).
  staging::StagePlan AllGatherPlan(const Buffer& in, const Buffer& out) {
    staging::StagePlan p;
    const size_t slot = static_cast<size_t>(host->rank()) * in.bytes();
    p.block_bytes = out.bytes();
    p.copy_in_src = in.data;
    p.copy_in_offset = slot;
    p.copy_in_bytes = in.bytes();
    char* dst = static_cast<char*>(out.data);
    if (in.data == dst + slot) {
      // In place: every slot but this rank's.
      p.copy_back = {{0, dst, slot},
                     {slot + in.bytes(), dst + slot + in.bytes(), out.bytes() - slot - in.bytes()}};
    } else {
      p.copy_back = {{0, dst, out.bytes()}};
    }
    p.issue = [this, in, out, slot](char* block, device::Stream* after) {
      if (block == nullptr)
        return host->AllGather(staging::Staged(nullptr, 0, in), staging::Staged(nullptr, 0, out));
      return host->AllGather(staging::Staged(block, slot, in), staging::Staged(block, 0, out), after);
    };
    return p;
  }

  // In place on the block. `copy_in`: whether the buffer's contents matter (not on a broadcast's
  // receivers); `copy_back`: whether the collective changes them (not on a broadcast's root).
  static staging::StagePlan InPlacePlan(const Buffer& buf, bool copy_in, bool copy_back) {
    staging::StagePlan p;
    p.block_bytes = buf.bytes();
    p.copy_in_src = buf.data;
    p.copy_in_bytes = copy_in ? buf.bytes() : 0;
    if (copy_back) p.copy_back = {{0, buf.data, buf.bytes()}};
    return p;
  }
};

StagedCommunicator::StagedCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StagedCommunicator::~StagedCommunicator() = default;

absl::StatusOr<std::unique_ptr<StagedCommunicator>> StagedCommunicator::Create(Communicator* host,
                                                                               device::Device* device) {
  if (host == nullptr || device == nullptr) {
    return absl::InvalidArgumentError("StagedCommunicator needs a host communicator and a device");
  }
  auto impl = std::make_unique<Impl>();
  impl->host = host;
  impl->device = device;
  impl->staged_tag = DeviceOf(*device);
  ZF_ASSIGN_OR_RETURN(impl->in_stream, device->CreateStream());
  ZF_ASSIGN_OR_RETURN(impl->out_stream, device->CreateStream());
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<StagedCommunicator>(new StagedCommunicator(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<StagedCommunicator>> StagedCommunicator::Create(
    std::unique_ptr<Communicator> host, device::Device* device) {
  ZF_ASSIGN_OR_RETURN(auto staged, Create(host.get(), device));
  staged->impl_->owned_host = std::move(host);
  return staged;
}

int StagedCommunicator::rank() const { return impl_->host->rank(); }
int StagedCommunicator::world_size() const { return impl_->host->world_size(); }
std::string StagedCommunicator::backend_name() const {
  return absl::StrCat(impl_->host->backend_name(), "+staged");
}
const CommOptions& StagedCommunicator::options() const { return impl_->host->options(); }
bool StagedCommunicator::Stages(Device where) const { return where == impl_->staged_tag; }

absl::StatusOr<std::unique_ptr<Work>> StagedCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                                        device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateReduceScatter(*this, in, out));
  if (!Stages(in.device)) {
    ++impl_->passed_through_calls;
    return impl_->host->ReduceScatter(in, out, op, after);
  }
  return impl_->Issue(impl_->ReduceScatterPlan(in, out, op), after);
}

absl::StatusOr<std::unique_ptr<Work>> StagedCommunicator::AllGather(Buffer in, Buffer out,
                                                                    device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateAllGather(*this, in, out));
  if (!Stages(in.device)) {
    ++impl_->passed_through_calls;
    return impl_->host->AllGather(in, out, after);
  }
  return impl_->Issue(impl_->AllGatherPlan(in, out), after);
}

absl::StatusOr<std::unique_ptr<Work>> StagedCommunicator::AllReduce(Buffer buf, ReduceOp op,
                                                                    device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllReduce", buf));
  if (!Stages(buf.device)) {
    ++impl_->passed_through_calls;
    return impl_->host->AllReduce(buf, op, after);
  }
  staging::StagePlan p = Impl::InPlacePlan(buf, /*copy_in=*/true, /*copy_back=*/true);
  Communicator* host = impl_->host;
  p.issue = [host, buf, op](char* block, device::Stream* s) {
    return host->AllReduce(staging::Staged(block, 0, buf), op, block == nullptr ? nullptr : s);
  };
  return impl_->Issue(std::move(p), after);
}

absl::StatusOr<std::unique_ptr<Work>> StagedCommunicator::Broadcast(Buffer buf, int root,
                                                                    device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("Broadcast", buf));
  ZF_RETURN_IF_ERROR(ValidateRoot(*this, root));
  if (!Stages(buf.device)) {
    ++impl_->passed_through_calls;
    return impl_->host->Broadcast(buf, root, after);
  }
  const bool is_root = rank() == root;
  staging::StagePlan p = Impl::InPlacePlan(buf, /*copy_in=*/is_root, /*copy_back=*/!is_root);
  Communicator* host = impl_->host;
  p.issue = [host, buf, root](char* block, device::Stream* s) {
    return host->Broadcast(staging::Staged(block, 0, buf), root, block == nullptr ? nullptr : s);
  };
  return impl_->Issue(std::move(p), after);
}

absl::Status StagedCommunicator::Barrier(absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(impl_->Usable());
  return impl_->host->Barrier(timeout);
}

void StagedCommunicator::Abort() {
  impl_->aborted = true;
  impl_->host->Abort();
  impl_->cv.notify_all();
}

StagingStats StagedCommunicator::stats() const {
  StagingStats s;
  s.staged_calls = impl_->staged_calls;
  s.passed_through_calls = impl_->passed_through_calls;
  std::lock_guard<std::mutex> lock(impl_->pool_mu);
  s.blocks = impl_->blocks;
  s.block_allocations = impl_->block_allocations;
  s.bytes = impl_->bytes;
  s.pinned_bytes = impl_->pinned_bytes;
  return s;
}

}  // namespace zerofit::comm
