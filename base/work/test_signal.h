// TestSignal: a one-shot notification over a Mutex and std::condition_variable, for tests
// that run under ThreadSanitizer, which cannot see Debian's (uninstrumented) abseil synchronise:
// what a thread wrote before Notify() is visible to one that WaitFor() returned true in.
#ifndef PLEXUS_BASE_WORK_TEST_SIGNAL_H_
#define PLEXUS_BASE_WORK_TEST_SIGNAL_H_

#include <condition_variable>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"

namespace plexus {

class TestSignal {
 public:
  void Notify() {
    MutexLock lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }

  // Whether Notify() was called within `timeout`.
  bool WaitFor(absl::Duration timeout) {
    UniqueLock lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notified_; });
  }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_WORK_TEST_SIGNAL_H_
