#include "tests/cuda_emulation/emulated_stream.h"

#include <utility>

namespace zerofit::cuda_emulation {

EmulatedStream::EmulatedStream(std::function<void(cudaError_t)> on_error)
    : on_error_(std::move(on_error)), thread_([this] { Run(); }) {}

EmulatedStream::~EmulatedStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EmulatedStream::Enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
}

bool EmulatedStream::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.empty() && !running_;
}

bool EmulatedStream::Drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return tasks_.empty() && !running_; });
}

void EmulatedStream::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // An idle stream waits for work without a deadline: it is a server, not a party to a handshake.
    cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopped with nothing left to run
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lock.unlock();
    const cudaError_t rc = task();
    if (rc != cudaSuccess) on_error_(rc);
    lock.lock();
    running_ = false;
    cv_.notify_all();
  }
}

}  // namespace zerofit::cuda_emulation
