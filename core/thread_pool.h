// A fixed pool of worker threads for data-parallel loops (CPU AdamW tiles, copies). RAII: the destructor
// stops and joins the workers; it never waits on work that was not submitted through ParallelFor, and
// ParallelFor always returns before the pool can be destroyed, so destruction cannot hang.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zerofit::core {

class ThreadPool {
 public:
  // `threads` >= 1 is the total parallelism, counting the thread that calls ParallelFor (which works too):
  // threads - 1 workers are started.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for i in [0, n) across the pool and the calling thread; returns when all calls are done.
  // Calls must not throw. One ParallelFor at a time per pool (calls from different threads are serialised).
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

 private:
  void WorkerLoop();
  void RunTasks();

  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // serialises ParallelFor callers
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(size_t)>* fn_ = nullptr;  // guarded by mu_
  size_t n_ = 0;                                     // guarded by mu_
  size_t next_ = 0;                                  // guarded by mu_
  size_t finished_ = 0;                              // guarded by mu_
  uint64_t generation_ = 0;                          // guarded by mu_
  bool stop_ = false;                                // guarded by mu_
};

}  // namespace zerofit::core
