#include "tests/cuda_emulation/rendezvous.h"

#include <utility>

namespace zerofit::cuda_emulation {

Rendezvous::Rendezvous(unsigned parties, unsigned exited, std::string what,
                       std::function<void(std::string)> on_fault, std::chrono::milliseconds deadline)
    : parties_(parties),
      what_(std::move(what)),
      on_fault_(std::move(on_fault)),
      deadline_(deadline),
      arrived_(exited) {}

std::string Rendezvous::SiteName(int site) {
  return site == kExit ? std::string("the kernel's end") : "line " + std::to_string(site);
}

void Rendezvous::Break(const std::string& why) {
  if (broken_) return;
  broken_ = true;
  cv_.notify_all();
  on_fault_(what_ + ": " + why);
}

void Rendezvous::Arrive(int site) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_) return;
  if (arrived_ == 0) {
    site_ = site;
  } else if (site != site_) {
    Break("threads meet at " + SiteName(site_) + " and at " + SiteName(site) +
          ": every thread must reach the same barrier (CUDA leaves anything else undefined)");
    return;
  }
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  if (site == kExit) return;
  const uint64_t generation = generation_;
  if (!cv_.wait_for(lock, deadline_, [&] { return generation_ != generation || broken_; })) {
    Break("waited " + std::to_string(deadline_.count()) + " ms at " + SiteName(site) + " with " +
          std::to_string(arrived_) + " of " + std::to_string(parties_) + " threads there");
  }
}

}  // namespace zerofit::cuda_emulation
