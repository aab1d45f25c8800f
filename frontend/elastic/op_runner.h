// OpRunner: runs each elastic operation on its own thread (the algorithms block), reusing idle
// threads; never queues one operation behind another, since peers may start them in different
// orders and an operation queued here could be the one its peers wait for.
#ifndef PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_
#define PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace plexus::elastic {

class OpRunner {
 public:
  // Joins every thread once the submitted tasks ended.
  ~OpRunner() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (idle_ < static_cast<int>(tasks_.size())) {
      threads_.emplace_back([this] { Work(); });
    } else {
      ready_.notify_one();
    }
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      ++idle_;
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopping_ = false;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_OP_RUNNER_H_
