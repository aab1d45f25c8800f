// OpRunner: runs each elastic operation on its own thread (the algorithms block), reusing idle
// threads; never queues one operation behind another, since peers may start them in different
// orders and an operation queued here could be the one its peers wait for.
#ifndef PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_
#define PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "base/core/mutex.h"

namespace plexus::elastic {

class OpRunner {
 public:
  // Joins every thread once the submitted tasks ended.
  ~OpRunner() {
    std::vector<std::thread> threads;
    {
      MutexLock lock(mu_);
      stopping_ = true;
      threads.swap(threads_);
    }
    ready_.notify_all();
    for (std::thread& t : threads) t.join();
  }

  void Submit(std::function<void()> task) {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
    if (idle_ < static_cast<int>(tasks_.size())) {
      threads_.emplace_back([this] { Work(); });
    } else {
      ready_.notify_one();
    }
  }

 private:
  void Work() {
    UniqueLock lock(mu_);
    while (true) {
      ++idle_;
      ready_.wait(
          lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  Mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_
