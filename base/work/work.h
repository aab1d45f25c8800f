// Work: the one asynchronous handle every collective, send and receive returns.
//
// A producer (a backend or algorithm) creates the Work, records bytes as they move, and calls
// Complete() exactly once with the outcome. Consumers Wait() with a deadline, poll
// IsCompleted(), or register OnComplete() callbacks. Thread-safe throughout.
#ifndef PLEXUS_BASE_WORK_WORK_H_
#define PLEXUS_BASE_WORK_WORK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"

namespace plexus {

class Work {
 public:
  using Callback = std::function<void(const absl::Status&)>;

  struct Stats {
    int64_t bytes_sent = 0;
    int64_t bytes_received = 0;
    absl::Duration duration;  // From construction to completion (so far, if still running).
    int world_size = 0;       // Ranks in the group the operation ran over.
  };

  // `op_name` (e.g. "all_reduce") and `sequence` appear in timeout messages. `start` (for
  // stats().duration) is now unless the caller has just read the clock.
  Work(std::string op_name, int world_size, int64_t sequence = -1,
       absl::Time start = absl::InfinitePast());
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  virtual ~Work();

  // A Work that is already complete with `status`.
  static std::shared_ptr<Work> Finished(absl::Status status, std::string op_name = "",
                                        int world_size = 0);

  // Blocks until completion or until `timeout` has passed. Returns the operation's status, or
  // DeadlineExceeded naming the op if it was still running. A timed-out wait does not cancel
  // the operation; waiting again is allowed. Safe from any number of threads.
  absl::Status Wait(absl::Duration timeout);

  bool IsCompleted() const;

  // The final status; Unknown("... still running") before completion.
  absl::Status status() const;

  // Registers `callback` to run exactly once with the final status. If the Work is already
  // complete it runs now, in this thread; otherwise it runs in the thread that calls
  // Complete(), after the lock is released. Callbacks run in registration order. For plexus's
  // own bookkeeping: the callback must not wait for another operation (the completing thread
  // may be one that operation needs); user code goes through OnCompleteMayBlock.
  void OnComplete(Callback callback);

  // As OnComplete, for a user's callback, which may issue other operations and wait for them
  // (torch's Future callbacks, Python done-callbacks). Where the completing (or registering)
  // thread is in a ProgressScope (callback_runner.h), it runs on a callback thread instead,
  // after the OnComplete callbacks; such callbacks of one Work keep their order.
  void OnCompleteMayBlock(Callback callback);

  // Told once of the final status, like an OnComplete callback (the first listener runs before
  // the callbacks, later ones among them) but without a std::function allocation per Work: for
  // per-operation bookkeeping such as the flight recorder. `token` is handed back to tell the
  // Works apart.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void WorkCompleted(uint64_t token, const absl::Status& status) = 0;
  };
  void Listen(std::shared_ptr<Listener> listener, uint64_t token);

  Stats stats() const;
  const std::string& op_name() const { return op_name_; }
  int64_t sequence() const { return sequence_; }

  // Rank a receive-from-any-source matched; -1 until known or for other operations.
  int source_rank() const { return source_rank_.load(std::memory_order_acquire); }

  // --- Producer side ---

  // Completes the Work with `status`. The first call wins and returns true; later calls change
  // nothing and return false (so racing error paths may all call it).
  bool Complete(absl::Status status);

  void AddBytesSent(int64_t bytes) { bytes_sent_.fetch_add(bytes, std::memory_order_relaxed); }
  void AddBytesReceived(int64_t bytes) {
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void SetSourceRank(int rank) { source_rank_.store(rank, std::memory_order_release); }

  // Lets a producer use the waiting thread: each Wait(timeout) on an incomplete Work first
  // calls `hook(timeout)` (outside any lock), which may run the operation right there instead
  // of waking another thread - but only if the operation's own timeout is no longer. A hook
  // set while one runs (the producer's next stage, e.g. a copy back after a host collective)
  // replaces it and is run next by the same Wait, while the wait's deadline allows.
  void SetWaitHook(std::function<void(absl::Duration wait_timeout)> hook);

  // Orders what is queued later on a device stream (a cudaStream_t on CUDA device `device`)
  // after this operation. With a stream hook from the producer (SetStreamWaitHook) this only
  // enqueues a wait on the stream and returns OK at once, like torch's Work.wait() on NCCL;
  // the operation's own errors then show in Wait() and status(). Without one, or when the
  // operation has already finished, it waits on the host for the operation (bounded by the
  // operation's own timeout) and returns its status.
  absl::Status WaitOnStream(int device, void* stream);

  // --- Producer side, continued ---

  // Makes WaitOnStream enqueue `hook(device, stream)` instead of waiting on the host. Dropped
  // once the Work completes: by then the device work is done and there is nothing to order.
  void SetStreamWaitHook(std::function<absl::Status(int device, void* stream)> hook);

 protected:
  // The allocation-free form of a wait hook, for a producer that subclasses Work: every
  // Wait(timeout) on an unfinished Work calls it first, outside any lock, from any number of
  // threads at once. It must return promptly unless it completes the Work (the wait's deadline
  // is taken after it).
  virtual void OfferToWaiter(absl::Duration wait_timeout) { (void)wait_timeout; }

 private:
  const std::string op_name_;
  const int world_size_;
  const int64_t sequence_;
  const absl::Time start_;

  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
  std::atomic<int> source_rank_{-1};

  mutable Mutex mu_;
  std::condition_variable completed_cv_;
  // Set under mu_ once status_ and end_ hold their final values, which never change again:
  // a reader that sees it true reads them without the lock.
  std::atomic<bool> completed_{false};
  absl::Status status_;
  absl::Time end_;
  int blocked_waiters_ ABSL_GUARDED_BY(mu_) = 0;  // In completed_cv_.wait_until.
  struct PendingCallback {
    Callback run;
    bool may_block;  // Registered with OnCompleteMayBlock.
  };
  // Registers `callback` (see OnComplete and OnCompleteMayBlock).
  void AddCallback(Callback callback, bool may_block);
  // Runs `callbacks` with `status`; those that may block go to a callback thread when this
  // thread is in a ProgressScope.
  static void RunCallbacks(absl::InlinedVector<PendingCallback, 1> callbacks,
                           const absl::Status& status);

  absl::InlinedVector<PendingCallback, 1> callbacks_ ABSL_GUARDED_BY(mu_);
  // One listener in place (the common case: the flight recorder); more go to callbacks_.
  std::shared_ptr<Listener> listener_ ABSL_GUARDED_BY(mu_);
  uint64_t listener_token_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(absl::Duration)> wait_hook_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(int, void*)> stream_wait_hook_ ABSL_GUARDED_BY(mu_);
};

using WorkPtr = std::shared_ptr<Work>;

// Waits for every Work in `works` within one shared deadline; returns the first error seen
// (in order), or DeadlineExceeded when time runs out.
absl::Status WaitAll(const std::vector<WorkPtr>& works, absl::Duration timeout);

// A Work that completes once every one of `works` has: with the first error among them (in
// order), else OK. Bytes moved are summed as they finish. `works` may be empty (done at once).
WorkPtr WhenAll(std::vector<WorkPtr> works, std::string op_name, int world_size);

}  // namespace plexus

#endif  // PLEXUS_BASE_WORK_WORK_H_
