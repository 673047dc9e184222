#include "offload/offload_pipeline.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu_affinity.h"
#include "core/status_macros.h"
#include "device/kernels.h"

namespace zerofit::offload {

using device::MemoryKind;

OffloadPipeline::OffloadPipeline(device::Device* device, const OffloadPipelineOptions& options)
    : device_(device), options_(options) {}

namespace {
// Elements per chunk of a host job: 1 MiB of fp32 accumulator, enough to amortise a pool hand-off (~us)
// against a memory-bound pass (~100 us), and small enough that 16 threads share a 4M-element bucket evenly.
constexpr size_t kHostChunkElements = size_t{1} << 18;
}  // namespace

OffloadPipeline::~OffloadPipeline() {
  // Queued copies and host jobs use our buffers: let them run before the buffers go.
  if (d2h_) (void)d2h_->Synchronize(absl::Minutes(1));
  if (h2d_) (void)h2d_->Synchronize(absl::Minutes(1));
  if (host_jobs_) (void)host_jobs_->Drain(absl::Minutes(1));
}

absl::StatusOr<std::unique_ptr<OffloadPipeline>> OffloadPipeline::Create(
    device::Device* device, const OffloadPipelineOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("OffloadPipeline: device is null");
  if (options.gradient_buffers < 1 || options.gradient_buffers > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("OffloadPipeline: gradient_buffers ", options.gradient_buffers, " is not 1 or 2"));
  }
  std::unique_ptr<OffloadPipeline> p(new OffloadPipeline(device, options));
  ZF_RETURN_IF_ERROR(p->Allocate());
  return p;
}

absl::Status OffloadPipeline::Allocate() {
  const size_t n = options_.shard_numel;
  ZF_ASSIGN_OR_RETURN(d2h_, device_->CreateStream());
  ZF_ASSIGN_OR_RETURN(h2d_, device_->CreateStream());
  ZF_ASSIGN_OR_RETURN(master_, device_->Allocate(n * sizeof(float), MemoryKind::kPinned));
  if (options_.own_moments) {
    ZF_ASSIGN_OR_RETURN(exp_avg_, device_->Allocate(n * sizeof(float), MemoryKind::kPinned));
    ZF_ASSIGN_OR_RETURN(exp_avg_sq_, device_->Allocate(n * sizeof(float), MemoryKind::kPinned));
  }
  for (int i = 0; i < options_.gradient_buffers; ++i) {
    ZF_ASSIGN_OR_RETURN(device::Buffer g, device_->Allocate(n * sizeof(float), MemoryKind::kPinned));
    grads_.push_back(std::move(g));
    // A delayed update reads one buffer's staging while the next step's copies land in the other's.
    ZF_ASSIGN_OR_RETURN(device::Buffer lowp, device_->Allocate(n * elem_bytes(), MemoryKind::kPinned));
    staging_.push_back(std::move(lowp));
    zeros_.emplace_back(n);
    zeros_.back().MarkAll();  // zero from the start, whatever the allocation holds
    staged_.emplace_back(n);
    converted_.push_back(0);
  }
  ZF_ASSIGN_OR_RETURN(param_lowp_, device_->Allocate(n * elem_bytes(), MemoryKind::kPinned));
  if (options_.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat("OffloadPipeline: threads ", options_.threads, " < 0"));
  }
  options_.threads = core::ThreadsOrAllowedCpus(options_.threads);
  pool_ = std::make_shared<core::ThreadPool>(options_.threads);
  ZF_ASSIGN_OR_RETURN(adamw_, optim::CpuAdamW::Create(pool_, options_.simd));
  host_jobs_ = std::make_unique<core::SerialExecutor>();
  return absl::OkStatus();
}

absl::Status OffloadPipeline::ReceiveGradient(int grads, size_t offset, size_t n, const void* device_src,
                                              bool last_of_step) {
  char* host = staged_data(grads, offset);
  // What an earlier receive left in this staging goes into the accumulator before the copy overwrites it.
  ZF_RETURN_IF_ERROR(ConvertStaged(grads, offset, offset + n));
  ZF_RETURN_IF_ERROR(WaitForStagingReaders(host, n * elem_bytes()));
  ZF_RETURN_IF_ERROR(d2h_->Copy(host, device_src, n * elem_bytes()));
  // The step's only receive into a range leaves it in the staging: no host job at all; the first of several
  // converts it (a job, while the device computes the next micro-batch). One that is partly zero in meaning
  // (not seen in the engine, whose receives tile the shard by bucket) has those parts zeroed now, then adds:
  // no job touches a range that is zero in meaning.
  RangeSet& zeros = zeros_[grads];
  const bool overwrite = zeros.Take(offset, offset + n);
  if (overwrite && last_of_step) {
    staged_[grads].Add(offset, offset + n);
    return absl::OkStatus();
  }
  float* acc = grad_data(grads) + offset;
  if (overwrite) {
    converted_[grads] += n;
    return SubmitAfterCopy(host, n, Widen(host, acc));
  }
  WriteZeros(grads, zeros.TakeOverlapping(offset, offset + n));
  const core::DType dtype = options_.param_dtype;
  const size_t esize = elem_bytes();
  return SubmitAfterCopy(host, n, [host, dtype, esize, acc](size_t begin, size_t end) {
    core::AccumulateToFloat(host + begin * esize, dtype, acc + begin, end - begin);
  });
}

OffloadPipeline::ChunkFn OffloadPipeline::Widen(const char* from, float* to) const {
  const core::DType dtype = options_.param_dtype;
  const size_t esize = elem_bytes();
  return [from, to, dtype, esize](size_t begin, size_t end) {
    core::ConvertElements(from + begin * esize, dtype, to + begin, core::DType::kFloat32, end - begin);
  };
}

absl::Status OffloadPipeline::ConvertStaged(int i, size_t begin, size_t end) {
  for (const RangeSet::Range& r : staged_[i].TakeOverlapping(begin, end)) {
    converted_[i] += r.second - r.first;
    const char* from = staged_data(i, r.first);
    ZF_RETURN_IF_ERROR(SubmitAfterCopy(from, r.second - r.first, Widen(from, grad_data(i) + r.first)));
  }
  return absl::OkStatus();
}

void OffloadPipeline::ReadGradients(int i, size_t begin, size_t end, float* out) const {
  size_t at = begin;
  for (const RangeSet::Range& r : staged_[i].Overlapping(begin, end)) {
    std::memcpy(out + (at - begin), grad_data(i) + at, (r.first - at) * sizeof(float));
    core::ConvertElements(staged_data(i, r.first), options_.param_dtype, out + (r.first - begin),
                          core::DType::kFloat32, r.second - r.first);
    at = r.second;
  }
  std::memcpy(out + (at - begin), grad_data(i) + at, (end - at) * sizeof(float));
}

absl::Status OffloadPipeline::WaitGradients(absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(d2h_->Synchronize(timeout));
  ZF_RETURN_IF_ERROR(host_jobs_->Drain(timeout));
  pending_.clear();
  return host_status();
}

void OffloadPipeline::ZeroGradients(int i) {
  zeros_[i].MarkAll();
  staged_[i].Clear();
  converted_[i] = 0;
}

float* OffloadPipeline::gradients(int i) {
  WriteZeros(i, zeros_[i].TakeAll());
  for (const RangeSet::Range& r : staged_[i].TakeAll()) {
    RunChunks(r.second - r.first, Widen(staged_data(i, r.first), grad_data(i) + r.first));
  }
  return grad_data(i);
}

void OffloadPipeline::WriteZeros(int i, const std::vector<RangeSet::Range>& ranges) {
  float* g = grad_data(i);
  for (const RangeSet::Range& r : ranges) {
    float* from = g + r.first;
    RunChunks(r.second - r.first, [from](size_t begin, size_t end) {
      std::memset(from + begin, 0, (end - begin) * sizeof(float));
    });
  }
}

double OffloadPipeline::SumOfSquares(int i) {
  const size_t n = options_.shard_numel;
  if (grads_[i].empty() || n == 0) return 0.0;
  // Chunk sums in parallel, added in chunk order: the same bits as the serial HostSumOfSquares. A chunk in
  // the staging is summed there, each element widened to fp32 as it is read (bf16 -> fp32 is exact); one
  // that straddles a staged range's edge is gathered into fp32 first.
  WriteZeros(i, zeros_[i].TakeAll());  // what no receive covered
  const float* g = grad_data(i);
  constexpr size_t kChunk = device::kSumOfSquaresChunk;
  std::vector<double> partial((n + kChunk - 1) / kChunk);
  constexpr size_t kPerTask = kHostChunkElements / kChunk;  // chunks a pool task takes
  static_assert(kPerTask >= 1, "a host chunk holds whole sum-of-squares chunks");
  pool_->ParallelFor((partial.size() + kPerTask - 1) / kPerTask, [&](size_t task) {
    std::vector<float> fp32;
    const size_t last = std::min(partial.size(), (task + 1) * kPerTask);
    for (size_t c = task * kPerTask; c < last; ++c) {
      const size_t begin = c * kChunk, len = std::min(kChunk, n - begin);
      const std::vector<RangeSet::Range> staged = staged_[i].Overlapping(begin, begin + len);
      if (staged.empty()) {
        partial[c] = device::SumOfSquaresChunk(g + begin, len);
      } else if (staged.size() == 1 && staged[0] == RangeSet::Range{begin, begin + len}) {
        partial[c] = device::SumOfSquaresChunk(staged_data(i, begin), options_.param_dtype, len);
      } else {  // a chunk across a staged range's edge (a bucket received once next to one accumulated)
        fp32.resize(len);
        ReadGradients(i, begin, begin + len, fp32.data());
        partial[c] = device::SumOfSquaresChunk(fp32.data(), len);
      }
    }
  });
  double sum = 0.0;
  for (double p : partial) sum += p;
  return sum;
}

absl::Status OffloadPipeline::ReceiveParams(size_t offset, size_t n, const void* device_src) {
  char* host = param_lowp_.at(offset * elem_bytes());
  ZF_RETURN_IF_ERROR(WaitForStagingReaders(host, n * elem_bytes()));
  ZF_RETURN_IF_ERROR(d2h_->Copy(host, device_src, n * elem_bytes()));
  return SubmitAfterCopy(host, n, Widen(host, master() + offset));
}

absl::Status OffloadPipeline::WaitForStagingReaders(const char* staging, size_t bytes) {
  uint64_t last = 0;  // tickets finish in order: waiting for the last overlapping job covers the others
  for (const PendingJob& p : pending_) {
    if (p.staging < staging + bytes && staging < p.staging + p.bytes) last = std::max(last, p.ticket);
  }
  if (last == 0) return absl::OkStatus();
  // A job gives up on its copy after wait_timeout, then ends: twice that bounds the job, its work included.
  ZF_RETURN_IF_ERROR(host_jobs_->WaitFor(last, 2 * options_.wait_timeout));
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [last](const PendingJob& p) { return p.ticket <= last; }),
                 pending_.end());
  return host_status();  // a job that failed leaves the gradients incomplete: no copy lands on top of that
}

absl::Status OffloadPipeline::SubmitAfterCopy(const char* staging, size_t n, ChunkFn fn) {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<device::Event> landed, device_->CreateEvent());
  ZF_RETURN_IF_ERROR(landed->Record(*d2h_));
  std::shared_ptr<device::Event> event(std::move(landed));
  const uint64_t ticket = host_jobs_->Submit([this, event, n, fn = std::move(fn)] {
    const absl::Status s = event->Synchronize(options_.wait_timeout);
    if (!s.ok()) return RecordHostError(s);
    const absl::Time begin = absl::Now();
    RunChunks(n, fn);
    if (options_.on_host_job) options_.on_host_job(begin, absl::Now());
  });
  pending_.push_back(PendingJob{staging, n * elem_bytes(), ticket});
  return absl::OkStatus();
}

void OffloadPipeline::RunChunks(size_t n, const ChunkFn& fn) {
  const size_t chunks = (n + kHostChunkElements - 1) / kHostChunkElements;
  pool_->ParallelFor(
      chunks, [&](size_t i) { fn(i * kHostChunkElements, std::min(n, (i + 1) * kHostChunkElements)); });
}

void OffloadPipeline::RecordHostError(const absl::Status& s) {
  std::lock_guard<std::mutex> lock(status_mu_);
  if (host_status_.ok()) {
    host_status_ = absl::Status(s.code(), absl::StrCat("offload host job: ", s.message()));
  }
}

absl::Status OffloadPipeline::host_status() {
  std::lock_guard<std::mutex> lock(status_mu_);
  return host_status_;
}

optim::CpuAdamW::Task OffloadPipeline::MakeTask(const Span& s, int grads, size_t begin, size_t end,
                                                bool staged) {
  optim::CpuAdamW::Task t;
  t.hyper = s.hyper;
  t.spans.param = master() + begin;
  t.spans.grad = staged ? static_cast<const void*>(staged_data(grads, begin)) : grad_data(grads) + begin;
  t.spans.grad_dtype = staged ? options_.param_dtype : core::DType::kFloat32;
  const size_t d = begin - s.offset;  // from the span's first element: on a block boundary for q8
  if (s.q8.on()) {
    t.q8 = optim::Moments8bit{s.q8.m + d, s.q8.v + d, s.q8.m_absmax + d / optim::kQuantBlock,
                              s.q8.v_absmax + d / optim::kQuantBlock};
  } else {
    t.spans.m = (s.m != nullptr ? s.m : exp_avg() + s.offset) + d;
    t.spans.v = (s.v != nullptr ? s.v : exp_avg_sq() + s.offset) + d;
  }
  t.spans.n = end - begin;
  t.spans.param_out = param_lowp_.at(begin * elem_bytes());
  t.spans.out_dtype = options_.param_dtype;
  return t;
}

void OffloadPipeline::ConvertStagedAcrossBlocks(const std::vector<Span>& spans, int i) {
  const auto inside_a_block = [](const Span& s, size_t at) {
    return at > s.offset && at < s.offset + s.numel && (at - s.offset) % optim::kQuantBlock != 0;
  };
  for (const Span& s : spans) {
    if (!s.q8.on()) continue;
    for (const RangeSet::Range& r : staged_[i].Overlapping(s.offset, s.offset + s.numel)) {
      if (!inside_a_block(s, r.first) && !inside_a_block(s, r.second)) continue;
      for (const RangeSet::Range& t : staged_[i].TakeOverlapping(r.first, r.second)) {
        converted_[i] += t.second - t.first;
        RunChunks(t.second - t.first, Widen(staged_data(i, t.first), grad_data(i) + t.first));
      }
    }
  }
}

void OffloadPipeline::Update(const std::vector<Span>& spans, int grads, int64_t step, float grad_scale,
                             char* device_out, size_t out_origin) {
  WriteZeros(grads, zeros_[grads].TakeAll());  // what no receive covered
  ConvertStagedAcrossBlocks(spans, grads);
  // One task per piece of a span whose gradient is in one place: the fp32 accumulator, or the staging
  // (AdamW reads bf16 there: the same values, converted in its registers).
  std::vector<optim::CpuAdamW::Task> tasks;
  std::vector<size_t> task_offsets;
  const auto add = [&](const Span& s, size_t begin, size_t end, bool staged) {
    if (begin == end) return;
    tasks.push_back(MakeTask(s, grads, begin, end, staged));
    task_offsets.push_back(begin);
  };
  for (const Span& s : spans) {
    size_t at = s.offset;
    for (const RangeSet::Range& r : staged_[grads].Overlapping(s.offset, s.offset + s.numel)) {
      add(s, at, r.first, false);
      add(s, r.first, r.second, true);
      at = r.second;
    }
    add(s, at, s.offset + s.numel, false);
  }
  if (device_out == nullptr) return adamw_->Step(tasks, step, grad_scale);
  adamw_->Step(tasks, step, grad_scale, [&](size_t task, size_t begin, size_t end) {
    const size_t offset = task_offsets[task] + begin;
    std::lock_guard<std::mutex> lock(h2d_mu_);
    // An enqueue failure breaks nothing silently: the stream's next Synchronize reports it.
    (void)h2d_->Copy(device_out + (offset - out_origin) * elem_bytes(), param_lowp_.at(offset * elem_bytes()),
                     (end - begin) * elem_bytes());
  });
}

absl::Status OffloadPipeline::CopyParamsToDevice(size_t offset, size_t n, char* device_out) {
  std::lock_guard<std::mutex> lock(h2d_mu_);
  return h2d_->Copy(device_out, param_lowp_.at(offset * elem_bytes()), n * elem_bytes());
}

absl::Status OffloadPipeline::pin_status() const {
  for (const device::Buffer* b : {&master_, &exp_avg_, &exp_avg_sq_, &param_lowp_}) {
    if (!b->pin_status().ok()) return b->pin_status();
  }
  for (const auto& b : staging_) {
    if (!b.pin_status().ok()) return b.pin_status();
  }
  return absl::OkStatus();
}

size_t OffloadPipeline::pinned_bytes() const {
  size_t total = 0;
  for (const device::Buffer* b : {&master_, &exp_avg_, &exp_avg_sq_, &param_lowp_}) {
    total += b->pinned_bytes();
  }
  for (const auto& g : grads_) total += g.pinned_bytes();
  for (const auto& b : staging_) total += b.pinned_bytes();
  return total;
}

size_t OffloadPipeline::host_bytes() const {
  size_t total = master_.bytes() + exp_avg_.bytes() + exp_avg_sq_.bytes() + param_lowp_.bytes();
  for (const auto& g : grads_) total += g.bytes();
  for (const auto& b : staging_) total += b.bytes();
  return total;
}

}  // namespace zerofit::offload
