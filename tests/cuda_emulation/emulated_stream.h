// An emulated CUDA stream: a host thread that runs the stream's work in order. Work is a task returning the
// CUDA error it ran into; the first error is reported to the runtime (`on_error`), which makes it sticky, as
// a fault on a GPU is for the whole context.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "tests/cuda_emulation/runtime_api.h"

namespace zerofit::cuda_emulation {

class EmulatedStream {
 public:
  using Task = std::function<cudaError_t()>;

  explicit EmulatedStream(std::function<void(cudaError_t)> on_error);
  // Runs what is queued, then stops the thread.
  ~EmulatedStream();
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  void Enqueue(Task task);
  // True when every task enqueued so far has run.
  bool Idle();
  // Waits until Idle(), at most `timeout`; false if it was not.
  bool Drain(std::chrono::milliseconds timeout);

 private:
  void Run();

  std::function<void(cudaError_t)> on_error_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool running_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zerofit::cuda_emulation
