#include "base/work/callback_runner.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/core/deadline.h"
#include "base/core/mutex.h"

namespace plexus {
namespace {

thread_local int progress_depth = 0;

// The process's callback threads and their queue. Never destroyed: its threads are detached
// and may still be waiting when static destructors run.
class CallbackRunner {
 public:
  // `before`: the runner this one replaces in a forked child, kept reachable (leak checkers).
  explicit CallbackRunner(CallbackRunner* before = nullptr) : before_(before) {}

  void Post(std::function<void()> task) {
    bool wake_monitor = false;
    {
      MutexLock lock(mu_);
      tasks_.push_back({FastNow(), std::move(task)});
      if (threads_ == 0) {
        StartThread();  // The first thread, and the monitor with it.
        return;
      }
      if (idle_ > 0) {
        ready_.notify_one();
        return;
      }
      // Every thread is busy: the monitor starts another if this task is not taken soon.
      wake_monitor = true;
    }
    if (wake_monitor) monitor_cv_.notify_one();
  }

  int started() {
    MutexLock lock(mu_);
    return started_;
  }

 private:
  struct Task {
    absl::Time posted;
    std::function<void()> run;
  };

  void StartThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++threads_;
    ++started_;
    std::thread([this] { Serve(); }).detach();
    if (!monitor_started_) {
      monitor_started_ = true;
      std::thread([this] { Monitor(); }).detach();
    }
  }

  void Serve() {
    UniqueLock lock(mu_);
    while (true) {
      const absl::Time idle_until = FastNow() + kCallbackThreadIdle;
      while (tasks_.empty()) {
        if (FastNow() >= idle_until && threads_ > 1) {
          --threads_;
          return;
        }
        ++idle_;
        ready_.wait_for(lock, absl::ToChronoNanoseconds(kCallbackThreadIdle));
        --idle_;
      }
      std::function<void()> run = std::move(tasks_.front().run);
      tasks_.pop_front();
      // What is left waits on busy threads: the monitor times it.
      const bool wake_monitor = !tasks_.empty() && idle_ == 0;
      lock.unlock();
      if (wake_monitor) monitor_cv_.notify_one();
      run();
      run = nullptr;  // What the task held goes outside the lock.
      lock.lock();
    }
  }

  // Starts a thread when the oldest task has waited kCallbackStallBeforeNewThread while every
  // thread was busy.
  void Monitor() {
    UniqueLock lock(mu_);
    while (true) {
      if (tasks_.empty() || idle_ > 0) {
        monitor_cv_.wait(lock);
        continue;
      }
      const absl::Duration waited = FastNow() - tasks_.front().posted;
      if (waited >= kCallbackStallBeforeNewThread) {
        StartThread();
        // Give the new thread its turn before judging again.
        monitor_cv_.wait_for(lock, absl::ToChronoNanoseconds(kCallbackStallBeforeNewThread));
        continue;
      }
      monitor_cv_.wait_for(lock, absl::ToChronoNanoseconds(kCallbackStallBeforeNewThread - waited));
    }
  }

  [[maybe_unused]] CallbackRunner* const before_;
  Mutex mu_;
  std::condition_variable ready_;
  std::condition_variable monitor_cv_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  int threads_ ABSL_GUARDED_BY(mu_) = 0;  // Serving threads alive.
  int idle_ ABSL_GUARDED_BY(mu_) = 0;     // Of those, waiting for a task.
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  bool monitor_started_ ABSL_GUARDED_BY(mu_) = false;
};

CallbackRunner* runner = nullptr;
std::once_flag runner_once;

CallbackRunner& Runner() {
  std::call_once(runner_once, [] {
    runner = new CallbackRunner();
    // A forked child has none of the parent's threads: it starts afresh (the parent's runner,
    // whose lock a parent thread may have held at the fork, is left alone).
    pthread_atfork(nullptr, nullptr, [] { runner = new CallbackRunner(runner); });
  });
  return *runner;
}

}  // namespace

ProgressScope::ProgressScope() { ++progress_depth; }
ProgressScope::~ProgressScope() { --progress_depth; }
bool ProgressScope::Active() { return progress_depth > 0; }

void RunOnCallbackThread(std::function<void()> task) { Runner().Post(std::move(task)); }

int CallbackThreadsStarted() { return Runner().started(); }

}  // namespace plexus
