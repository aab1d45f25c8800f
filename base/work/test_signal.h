// TestSignal: a one-shot notification over std::mutex and std::condition_variable, for tests
// that run under ThreadSanitizer, which cannot see Debian's (uninstrumented) abseil synchronise:
// what a thread wrote before Notify() is visible to one that WaitFor() returned true in.
#ifndef PLEXUS_BASE_WORK_TEST_SIGNAL_H_
#define PLEXUS_BASE_WORK_TEST_SIGNAL_H_

#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace plexus {

class TestSignal {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }

  // Whether Notify() was called within `timeout`.
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [this] { return notified_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_WORK_TEST_SIGNAL_H_
