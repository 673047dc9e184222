// A reusable barrier of a fixed number of parties that also checks what CUDA requires of __syncthreads and
// of a warp's shuffles: every party reaches the same one. A party may instead arrive as exiting (its kernel
// returned), which does not wait; a generation that mixes sites, or exits and a site, or waits longer than
// the deadline breaks the rendezvous: the fault goes to `on_fault` once and no party waits on it again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace zerofit::cuda_emulation {

class Rendezvous {
 public:
  static constexpr int kExit = -1;  // the site of a party whose kernel returned

  // `what` names the rendezvous in faults ("block 3", "warp 1 of block 3"); `exited` parties arrived as
  // exiting before it was created.
  Rendezvous(unsigned parties, unsigned exited, std::string what, std::function<void(std::string)> on_fault,
             std::chrono::milliseconds deadline);

  // Arrives at `site` (a source line, or kExit) and, unless exiting, waits for the other parties.
  void Arrive(int site);

 private:
  void Break(const std::string& why);  // mu_ held
  static std::string SiteName(int site);

  std::mutex mu_;
  std::condition_variable cv_;
  const unsigned parties_;
  const std::string what_;
  const std::function<void(std::string)> on_fault_;
  const std::chrono::milliseconds deadline_;
  unsigned arrived_ = 0;
  int site_ = kExit;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

}  // namespace zerofit::cuda_emulation
