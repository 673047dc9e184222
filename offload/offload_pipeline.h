// The offload pipeline (ZeRO-Offload): the fp32 master weights, AdamW moments and the fp32 gradient shard of
// this rank live in pinned host memory, and the update runs on the CPU with SIMD AdamW.
//
//   ReceiveGradient: device -> pinned host copy of a reduced gradient shard in the parameter dtype (bf16
//     over the bus, not fp32) on the D2H copy stream, into that gradient buffer's staging. The step's first
//     receive into a range leaves the gradient there: the norm and AdamW read bf16 (offload/range_set.h), so
//     without gradient accumulation the host never converts, writes or re-reads an fp32 gradient. A later
//     receive (accumulation) first converts the staged range into the fp32 accumulator, then adds to it on
//     the host thread pool, started when an event says the copy has landed (a host job per receive, run in
//     receive order). Nothing runs in
//     a device host function (cudaLaunchHostFunc): CUDA runs those one at a time on a single driver thread,
//     in stream order, so per-element work there neither scales with threads nor lets the next copy start
//     (issue 30: an 11 s step on an H200). The D2H copy of the next bucket overlaps the accumulation of this
//     one; a receive into staging that a pending job still reads waits for that job first;
//   Update: CPU AdamW over a list of spans by tile (N threads), each finished tile's parameters (parameter
//     dtype) queued at once for their host -> device copy on the H2D stream, so copies start while other
//     tiles still update; the caller orders its all-gather after h2d_stream().
//
// Offsets and counts are ELEMENTS of the shard. Not thread-safe: one engine thread calls it (Update's tile
// callbacks enqueue on the H2D stream under a lock; the host jobs share the AdamW thread pool, whose
// ParallelFor callers take turns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "core/serial_executor.h"
#include "core/thread_pool.h"
#include "device/device.h"
#include "offload/range_set.h"
#include "optim/cpu_adamw.h"

namespace zerofit::offload {

struct OffloadPipelineOptions {
  size_t shard_numel = 0;
  core::DType param_dtype = core::DType::kFloat32;
  // Host threads (counting the caller) of the accumulation, the norm and CPU AdamW; 0: core::AllowedCpus(),
  // the CPUs this process may run on.
  int threads = 0;
  optim::SimdLevel simd = optim::DetectSimdLevel();
  int gradient_buffers = 1;  // 2 with a delayed update: the next step accumulates into the other one
  // Whether the pipeline keeps the AdamW moments (fp32, pinned, shard_numel each: exp_avg(), exp_avg_sq()).
  // False: every Span of Update says where its moments are (8-bit ones: host_quantized_moments.h).
  bool own_moments = true;
  // Deadline of every host-side wait: a host job's wait for its copy, a receive's wait for a staging reader.
  absl::Duration wait_timeout = absl::Minutes(5);
  // Told the span of every host job's work (after its copy landed), from the job's thread: a step profile.
  std::function<void(absl::Time begin, absl::Time end)> on_host_job;
};

class OffloadPipeline {
 public:
  // One span of the shard updated with one set of hyper-parameters (e.g. with or without weight decay).
  // Its moments are the pipeline's own at `offset` unless given here: fp32 (m, v: numel each) or 8-bit
  // (q8: codes and block scales from the span's first element, which must be on a block boundary of the
  // shard, as a quantised segment's is).
  struct Span {
    size_t offset = 0;
    size_t numel = 0;
    optim::AdamWHyper hyper;
    float* m = nullptr;
    float* v = nullptr;
    optim::Moments8bit q8;
  };

  static absl::StatusOr<std::unique_ptr<OffloadPipeline>> Create(device::Device* device,
                                                                 const OffloadPipelineOptions& options);
  ~OffloadPipeline();

  // The stream the D2H copies run on: order it after the producer of `device_src` before calling
  // ReceiveGradient (e.g. Work::OrderBefore(d2h_stream())).
  device::Stream& d2h_stream() { return *d2h_; }
  // Elements [offset, offset + n) of gradient buffer `grads` += device_src (param dtype, device memory). The
  // first receive into a range ZeroGradients left zero overwrites it instead: converted into fp32 on the
  // pool, or, when `last_of_step` (no other receive into the range follows before the update), left in the
  // staging (RangeSet). A receive after a `last_of_step` one is still right, at the cost of converting the
  // staged range first, with the engine thread waiting.
  absl::Status ReceiveGradient(int grads, size_t offset, size_t n, const void* device_src, bool last_of_step);
  // Host-side gradient accumulation is complete (all ReceiveGradient and ReceiveParams calls so far); the
  // first failure of any host job (a copy that never landed) is returned here, and on every later call.
  absl::Status WaitGradients(absl::Duration timeout);

  // master[offset, offset + n) = fp32(device_src) (parameter dtype, device memory), through the host
  // parameter copy on the D2H stream (order that stream after the producer first; WaitGradients waits).
  absl::Status ReceiveParams(size_t offset, size_t n, const void* device_src);

  // AdamW on the spans with gradient buffer `grads`, writing the updated parameters (param dtype) to the
  // pinned host copy; when `device_out` is given, every finished tile is also queued for its copy on the
  // H2D stream: shard element k goes to device_out + (k - out_origin) elements. An 8-bit span's gradient
  // is read by whole blocks: a staged range that starts or ends inside one of its blocks (never in the
  // engine, whose receives are whole buckets on block boundaries) is converted to fp32 first.
  void Update(const std::vector<Span>& spans, int grads, int64_t step, float grad_scale, char* device_out,
              size_t out_origin);
  // Copies shard elements [offset, offset + n) of the host parameter copy to device_out (H2D stream).
  absl::Status CopyParamsToDevice(size_t offset, size_t n, char* device_out);
  // The pinned host copy of the parameters (param dtype, shard_numel elements).
  char* host_params() { return param_lowp_.as<char>(); }
  device::Stream& h2d_stream() { return *h2d_; }

  float* master() { return master_.as<float>(); }
  // Null unless the pipeline owns the moments.
  float* exp_avg() { return options_.own_moments ? exp_avg_.as<float>() : nullptr; }
  float* exp_avg_sq() { return options_.own_moments ? exp_avg_sq_.as<float>() : nullptr; }
  // Gradient buffer i in fp32 as it stands after WaitGradients: what ZeroGradients left zero and no receive
  // covered is zeroed, and what is held in the staging only is converted, first (across the pool). The norm
  // and Update need neither: they read the staging.
  float* gradients(int i);
  // Buffer i is zero from now on: marked, not written (the first receive into each range stays in the
  // staging; what none covers is zeroed before the buffer is read). Call only when no ReceiveGradient into
  // buffer i is pending and no Update reads it (after WaitGradients).
  void ZeroGradients(int i);
  // sum of gradients(i)[k]^2 over the shard, in fp64, its chunks across the pool: bit for bit
  // device::HostSumOfSquares of gradients(i), read where each element is (fp32 or staging) without
  // converting the buffer. Call only after WaitGradients.
  double SumOfSquares(int i);
  // Why host memory is not pinned, if it is not.
  absl::Status pin_status() const;
  size_t pinned_bytes() const;
  size_t host_bytes() const;
  size_t gradient_bytes() const { return grads_.size() * options_.shard_numel * sizeof(float); }
  // Gradient elements of buffer i converted from the staging into fp32 by the step's receives so far
  // (gradient accumulation only: without it, nothing is).
  size_t converted_elements(int i) const { return converted_[i]; }
  int threads() const { return adamw_->threads(); }

 private:
  // A host job over elements [0, n), split into chunks across the pool: fn(begin, end).
  using ChunkFn = std::function<void(size_t begin, size_t end)>;
  // A host job reading `bytes` of `staging` once the copy into it has landed.
  struct PendingJob {
    const char* staging;
    size_t bytes;
    uint64_t ticket;
  };

  OffloadPipeline(device::Device* device, const OffloadPipelineOptions& options);
  absl::Status Allocate();
  size_t elem_bytes() const { return core::DTypeSize(options_.param_dtype); }
  // Waits for the pending jobs that read [staging, staging + bytes) before a copy overwrites it.
  absl::Status WaitForStagingReaders(const char* staging, size_t bytes);
  // Records an event after the D2H copy just enqueued and submits a job that waits for it, then runs fn.
  absl::Status SubmitAfterCopy(const char* staging, size_t n, ChunkFn fn);
  void RunChunks(size_t n, const ChunkFn& fn);
  // The chunks of to[k] = fp32(from[k]), `from` in the parameter dtype.
  ChunkFn Widen(const char* from, float* to) const;
  // Converts buffer i's staged ranges that start or end inside a block of an 8-bit span into fp32.
  void ConvertStagedAcrossBlocks(const std::vector<Span>& spans, int i);
  // The CPU AdamW task of elements [begin, end) of span s, its gradient in the staging or the accumulator.
  optim::CpuAdamW::Task MakeTask(const Span& s, int grads, size_t begin, size_t end, bool staged);
  // Writes zeros into these ranges of gradient buffer i (across the pool).
  void WriteZeros(int i, const std::vector<RangeSet::Range>& ranges);
  // Converts what buffer i holds in its staging only within [begin, end) into its fp32 accumulator, as host
  // jobs after the copies so far (a receive then waits for them before its copy overwrites the staging).
  absl::Status ConvertStaged(int i, size_t begin, size_t end);
  // gradient elements [begin, end) of buffer i, fp32, into out: from the accumulator or the staging.
  void ReadGradients(int i, size_t begin, size_t end, float* out) const;
  float* grad_data(int i) { return grads_[i].as<float>(); }
  const float* grad_data(int i) const { return grads_[i].as<float>(); }
  char* staged_data(int i, size_t offset) { return staging_[i].at(offset * elem_bytes()); }
  const char* staged_data(int i, size_t offset) const { return staging_[i].at(offset * elem_bytes()); }
  void RecordHostError(const absl::Status& s);
  absl::Status host_status();

  device::Device* device_;
  OffloadPipelineOptions options_;
  std::unique_ptr<device::Stream> d2h_;
  std::unique_ptr<device::Stream> h2d_;
  std::mutex h2d_mu_;  // tile callbacks of several CPU threads enqueue on h2d_
  device::Buffer master_, exp_avg_, exp_avg_sq_;
  std::vector<device::Buffer> grads_;  // fp32 shard accumulators
  // Per accumulator, what is zero in meaning but not in memory, and what lives in its staging only. Each
  // is used by one thread at a time: the engine's for the buffer it receives into, the delayed update's
  // for the one it reads (handed over by its Drain).
  std::vector<RangeSet> zeros_;
  std::vector<RangeSet> staged_;
  std::vector<size_t> converted_;
  std::vector<device::Buffer> staging_;     // per accumulator: shard gradients after D2H (param dtype)
  device::Buffer param_lowp_;               // updated parameters before H2D (param dtype)
  std::shared_ptr<core::ThreadPool> pool_;  // AdamW tiles and the host jobs' chunks
  std::unique_ptr<optim::CpuAdamW> adamw_;
  std::vector<PendingJob> pending_;  // the engine thread's only; cleared by WaitGradients
  std::mutex status_mu_;
  absl::Status host_status_;  // guarded by status_mu_: the first host job failure
  // Last: destroyed first, so its thread (joined there) never outlives the buffers its jobs use.
  std::unique_ptr<core::SerialExecutor> host_jobs_;
};

}  // namespace zerofit::offload
