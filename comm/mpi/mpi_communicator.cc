#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/mpi/mpi_error.h"
#include "core/status_macros.h"

namespace zerofit::comm {
// The queued operation, a member type of Impl: outside the anonymous namespace, so that Impl (declared in the
// header) has no field of internal linkage (GCC's -Wsubobject-linkage in a unity build).
namespace mpi_queue {

enum class OpKind { kReduceScatter = 1, kAllGather, kAllReduce, kBroadcast, kBarrier };

const char* OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kReduceScatter:
      return "ReduceScatter";
    case OpKind::kAllGather:
      return "AllGather";
    case OpKind::kAllReduce:
      return "AllReduce";
    case OpKind::kBroadcast:
      return "Broadcast";
    case OpKind::kBarrier:
      return "Barrier";
  }
  return "?";
}

// Completion state shared by the caller's Work and the progress thread.
struct OpState {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;

  void Finish(absl::Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (done) return;
      done = true;
      status = std::move(s);
    }
    cv.notify_all();
  }
};

struct Op {
  OpKind kind;
  Buffer in;
  Buffer out;
  ReduceOp reduce = ReduceOp::kSum;
  int root = 0;
  uint64_t seq = 0;
  absl::Time deadline;
  // Marks the producer stream's work at the call; the progress thread waits for it before MPI touches
  // the buffers.
  std::unique_ptr<device::Event> ready;
  std::shared_ptr<OpState> state = std::make_shared<OpState>();
};

}  // namespace mpi_queue

namespace {

using mpi_queue::Op;
using mpi_queue::OpKind;
using mpi_queue::OpKindName;
using mpi_queue::OpState;

class MpiWork final : public Work {
 public:
  MpiWork(std::shared_ptr<OpState> state, absl::Time deadline)
      : state_(std::move(state)), deadline_(deadline) {}
  absl::Status Wait(absl::Duration timeout) override {
    // When the wait would reach the collective's own deadline, wait for the progress thread's verdict (it
    // reports within a fraction of a millisecond after the deadline, with the precise error).
    absl::Time until = absl::Now() + timeout;
    if (until >= deadline_) until = std::max(until, deadline_ + absl::Seconds(1));
    std::unique_lock<std::mutex> lock(state_->mu);
    const bool done = state_->cv.wait_for(lock, absl::ToChronoNanoseconds(until - absl::Now()),
                                          [&] { return state_->done; });
    if (!done) {
      return absl::DeadlineExceededError(
          absl::StrCat("MPI collective still running after waiting ", absl::FormatDuration(timeout),
                       " (its own deadline is in ", absl::FormatDuration(deadline_ - absl::Now()), ")"));
    }
    return state_->status;
  }
  bool IsCompleted() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->done;
  }

 private:
  std::shared_ptr<OpState> state_;
  absl::Time deadline_;
};

// fp32-accumulating reductions for the 2-byte types. MPI calls these with `len` elements of our opaque
// 2-byte datatype; inout[i] = op(in[i], inout[i]).
template <float (*Load)(uint16_t), uint16_t (*Store)(float), int kOp>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = Load(a[i]);
    const float y = Load(b[i]);
    float r;
    if (kOp == 0) {
      r = x + y;
    } else if (kOp == 1) {
      r = std::max(x, y);
    } else {
      r = std::min(x, y);
    }
    b[i] = Store(r);
  }
}

constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

// An event marking the work enqueued on `after` so far (nullptr when there is no producer stream).
absl::StatusOr<std::unique_ptr<device::Event>> MarkProducer(device::Stream* after) {
  if (after == nullptr) return nullptr;
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<device::Event> event, after->CreateEvent());
  ZF_RETURN_IF_ERROR(event->Record(*after));
  return event;
}

}  // namespace

struct MpiCommunicator::Impl {
  CommOptions options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int world = 1;
  MPI_Datatype half_type = MPI_DATATYPE_NULL;  // 2 opaque bytes: bf16 or fp16
  MPI_Op bf16_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  MPI_Op fp16_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Op>> queue;  // guarded by mu
  bool stop = false;                      // guarded by mu
  uint64_t next_seq = 0;                  // guarded by mu
  std::atomic<bool> aborted{false};
  absl::Status broken;  // set once by the progress thread; read under mu
  std::thread thread;
  // Requests given up on (deadline or abort). MPI cannot cancel a collective, so if one is still pending at
  // destruction its communicator, datatype and ops are leaked on purpose: freeing them under a request that a
  // late peer may still complete would corrupt memory. Touched only by the progress thread, then the
  // destructor.
  std::vector<MPI_Request> abandoned;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    bool pending = false;
    for (MPI_Request& r : abandoned) {
      int flag = 0;
      if (!finalized && r != MPI_REQUEST_NULL && MPI_Test(&r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
          flag)
        continue;
      pending = true;
    }
    if (pending || finalized) return;
    for (MPI_Op& op : bf16_ops)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    for (MPI_Op& op : fp16_ops)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    if (half_type != MPI_DATATYPE_NULL) MPI_Type_free(&half_type);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  absl::StatusOr<MPI_Datatype> MpiType(DType t) const {
    switch (t) {
      case DType::kFloat32:
        return MPI_FLOAT;
      case DType::kFloat64:
        return MPI_DOUBLE;
      case DType::kBFloat16:
      case DType::kFloat16:
        return half_type;
    }
    return absl::InvalidArgumentError("unknown dtype");
  }

  MPI_Op MpiOp(DType t, ReduceOp op) const {
    const int i = static_cast<int>(op);
    if (t == DType::kBFloat16) return bf16_ops[i];
    if (t == DType::kFloat16) return fp16_ops[i];
    switch (op) {
      case ReduceOp::kSum:
        return MPI_SUM;
      case ReduceOp::kMax:
        return MPI_MAX;
      case ReduceOp::kMin:
        return MPI_MIN;
    }
    return MPI_SUM;
  }

  absl::StatusOr<std::unique_ptr<Work>> Enqueue(std::shared_ptr<Op> op) {
    for (const Buffer* b : {&op->in, &op->out}) {
      if (b->device != Device::kCpu) return absl::InvalidArgumentError("mpi communicator: CPU buffers only");
      if (b->count > static_cast<size_t>(INT_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat(
            OpKindName(op->kind), ": ", b->count, " elements exceed MPI's int count limit; split the call"));
      }
    }
    if (aborted) return absl::AbortedError("mpi communicator was aborted");
    if (op->deadline == absl::Time()) op->deadline = absl::Now() + options.timeout;
    std::unique_ptr<Work> work = std::make_unique<MpiWork>(op->state, op->deadline);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!broken.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("mpi communicator is unusable after an earlier failure: ", broken.message()));
      }
      op->seq = next_seq++;
      queue.push_back(op);
    }
    cv.notify_all();
    return work;
  }

  // Polls `req` until it completes, the deadline passes, or the communicator is aborted.
  absl::Status Poll(MPI_Request* req, const Op& op, const char* what) {
    int polls = 0;
    while (true) {
      int flag = 0;
      ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Test(req, &flag, MPI_STATUS_IGNORE)));
      if (flag) return absl::OkStatus();
      if (aborted) {
        abandoned.push_back(*req);
        return absl::AbortedError(absl::StrCat(what, " #", op.seq, " aborted"));
      }
      const absl::Time now = absl::Now();
      absl::Time deadline = op.deadline;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) deadline = std::min(deadline, now + kShutdownGrace);
      }
      if (now >= deadline) {
        abandoned.push_back(*req);
        return absl::DeadlineExceededError(absl::StrCat(
            what, " #", op.seq, " on rank ", rank, " of ", world, " did not complete within its deadline (",
            absl::FormatDuration(options.timeout),
            "): at least one other rank has not arrived at this collective (crashed, hung, or issued a "
            "different sequence of collectives)"));
      }
      // Spin briefly for latency, then back off so an oversubscribed machine keeps computing.
      if (++polls < 200) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 200));
      }
    }
  }

  // All ranks must be issuing the same kind, count and dtype (and root / reduce op). One MPI_Iallreduce(MAX)
  // over {x, -x} yields both the maximum and the minimum of every field.
  absl::Status CheckCollective(const Op& op) {
    const size_t count = op.kind == OpKind::kAllGather ? op.in.count : op.out.count;
    long long fields[4] = {static_cast<long long>(op.kind), static_cast<long long>(count),
                           static_cast<long long>(op.in.dtype),
                           op.kind == OpKind::kBroadcast ? op.root : static_cast<long long>(op.reduce)};
    long long send[8], recv[8];
    for (int i = 0; i < 4; ++i) {
      send[i] = fields[i];
      send[4 + i] = -fields[i];
    }
    MPI_Request req;
    ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Iallreduce(send, recv, 8, MPI_LONG_LONG, MPI_MAX, comm, &req)));
    ZF_RETURN_IF_ERROR(Poll(&req, op, "collective check"));
    for (int i = 0; i < 4; ++i) {
      if (recv[i] != -recv[4 + i]) {
        static const char* kField[4] = {"operation", "element count", "dtype", "root/reduce op"};
        return absl::InvalidArgumentError(
            absl::StrCat("collective mismatch across ranks at call #", op.seq, ": this rank (", rank,
                         ") issues ", OpKindName(op.kind), " with ", kField[i], " ", fields[i],
                         " but other ranks use values from ", -recv[4 + i], " to ", recv[i]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Op& op) {
    if (op.ready != nullptr) {
      // Stream order on the progress thread, never the caller's: the producer's work must have run.
      ZF_RETURN_IF_ERROR(op.ready->Synchronize(std::max(absl::ZeroDuration(), op.deadline - absl::Now())));
    }
    if (options.check_collectives) ZF_RETURN_IF_ERROR(CheckCollective(op));
    MPI_Request req = MPI_REQUEST_NULL;
    ZF_ASSIGN_OR_RETURN(MPI_Datatype type, MpiType(op.in.dtype));
    const MPI_Op mop = MpiOp(op.in.dtype, op.reduce);
    switch (op.kind) {
      case OpKind::kReduceScatter:
        ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Ireduce_scatter_block(
            op.in.data, op.out.data, static_cast<int>(op.out.count), type, mop, comm, &req)));
        break;
      case OpKind::kAllGather: {
        const bool in_place = op.in.data == static_cast<char*>(op.out.data) + rank * op.in.bytes();
        ZF_RETURN_IF_ERROR(
            ZF_MPI_CALL(MPI_Iallgather(in_place ? MPI_IN_PLACE : op.in.data, static_cast<int>(op.in.count),
                                       type, op.out.data, static_cast<int>(op.in.count), type, comm, &req)));
        break;
      }
      case OpKind::kAllReduce:
        ZF_RETURN_IF_ERROR(ZF_MPI_CALL(
            MPI_Iallreduce(MPI_IN_PLACE, op.in.data, static_cast<int>(op.in.count), type, mop, comm, &req)));
        break;
      case OpKind::kBroadcast:
        ZF_RETURN_IF_ERROR(
            ZF_MPI_CALL(MPI_Ibcast(op.in.data, static_cast<int>(op.in.count), type, op.root, comm, &req)));
        break;
      case OpKind::kBarrier:
        ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Ibarrier(comm, &req)));
        break;
    }
    return Poll(&req, op, OpKindName(op.kind));
  }

  void Loop() {
    while (true) {
      std::shared_ptr<Op> op;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;  // stop requested and nothing left
        op = queue.front();
        queue.pop_front();
      }
      absl::Status s;
      bool was_broken;
      {
        std::lock_guard<std::mutex> lock(mu);
        was_broken = !broken.ok();
        if (was_broken)
          s = absl::FailedPreconditionError(
              absl::StrCat("mpi communicator is unusable after an earlier failure: ", broken.message()));
      }
      if (!was_broken) {
        s = aborted ? absl::AbortedError("mpi communicator was aborted") : Run(*op);
        // Anything but success leaves MPI's matching state unknown (a request may still be posted):
        // poison the communicator so the caller does not silently mismatch later collectives.
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          broken = s;
        }
      }
      op->state->Finish(s);
    }
  }
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MpiCommunicator::~MpiCommunicator() = default;

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(const MpiEnvironment&,
                                                                         CommOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_rank(impl->comm, &impl->rank)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Comm_size(impl->comm, &impl->world)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Type_contiguous(2, MPI_BYTE, &impl->half_type)));
  ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Type_commit(&impl->half_type)));
  using core::Bf16ToFloat;
  using core::FloatToBf16;
  using core::FloatToFp16;
  using core::Fp16ToFloat;
  MPI_User_function* bf16_fns[3] = {&HalfReduce<Bf16ToFloat, FloatToBf16, 0>,
                                    &HalfReduce<Bf16ToFloat, FloatToBf16, 1>,
                                    &HalfReduce<Bf16ToFloat, FloatToBf16, 2>};
  MPI_User_function* fp16_fns[3] = {&HalfReduce<Fp16ToFloat, FloatToFp16, 0>,
                                    &HalfReduce<Fp16ToFloat, FloatToFp16, 1>,
                                    &HalfReduce<Fp16ToFloat, FloatToFp16, 2>};
  for (int i = 0; i < 3; ++i) {
    ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Op_create(bf16_fns[i], /*commute=*/1, &impl->bf16_ops[i])));
    ZF_RETURN_IF_ERROR(ZF_MPI_CALL(MPI_Op_create(fp16_fns[i], /*commute=*/1, &impl->fp16_ops[i])));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(impl)));
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::world_size() const { return impl_->world; }
const CommOptions& MpiCommunicator::options() const { return impl_->options; }

absl::StatusOr<std::unique_ptr<Work>> MpiCommunicator::ReduceScatter(Buffer in, Buffer out, ReduceOp op,
                                                                     device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateReduceScatter(*this, in, out));
  auto o = std::make_shared<Op>();
  o->kind = OpKind::kReduceScatter;
  o->in = in;
  o->out = out;
  o->reduce = op;
  ZF_ASSIGN_OR_RETURN(o->ready, MarkProducer(after));
  return impl_->Enqueue(std::move(o));
}

absl::StatusOr<std::unique_ptr<Work>> MpiCommunicator::AllGather(Buffer in, Buffer out,
                                                                 device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateAllGather(*this, in, out));
  auto o = std::make_shared<Op>();
  o->kind = OpKind::kAllGather;
  o->in = in;
  o->out = out;
  ZF_ASSIGN_OR_RETURN(o->ready, MarkProducer(after));
  return impl_->Enqueue(std::move(o));
}

absl::StatusOr<std::unique_ptr<Work>> MpiCommunicator::AllReduce(Buffer buf, ReduceOp op,
                                                                 device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("AllReduce", buf));
  auto o = std::make_shared<Op>();
  o->kind = OpKind::kAllReduce;
  o->in = buf;
  o->out = buf;
  o->reduce = op;
  ZF_ASSIGN_OR_RETURN(o->ready, MarkProducer(after));
  return impl_->Enqueue(std::move(o));
}

absl::StatusOr<std::unique_ptr<Work>> MpiCommunicator::Broadcast(Buffer buf, int root,
                                                                 device::Stream* after) {
  ZF_RETURN_IF_ERROR(ValidateBuffer("Broadcast", buf));
  ZF_RETURN_IF_ERROR(ValidateRoot(*this, root));
  auto o = std::make_shared<Op>();
  o->kind = OpKind::kBroadcast;
  o->in = buf;
  o->out = buf;
  o->root = root;
  ZF_ASSIGN_OR_RETURN(o->ready, MarkProducer(after));
  return impl_->Enqueue(std::move(o));
}

absl::Status MpiCommunicator::Barrier(absl::Duration timeout) {
  auto o = std::make_shared<Op>();
  o->kind = OpKind::kBarrier;
  o->deadline = absl::Now() + timeout;
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<Work> work, impl_->Enqueue(std::move(o)));
  return work->Wait(timeout);
}

void MpiCommunicator::Abort() {
  impl_->aborted = true;
  impl_->cv.notify_all();
}

}  // namespace zerofit::comm
