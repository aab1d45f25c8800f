// Collectives: every c10d collective implemented with algorithms/ over one Transport, executed
// in issue order by one worker thread. A backend built on a Transport (tcp, and the parts of
// gloo and mpi their libraries lack) hands its calls to Run.
//
// Each call takes the next sequence number at issue time (ranks issue in the same order, so
// the numbers agree), returns a Work at once, and runs when the calls before it finished.
// Who runs it: a thread that waits on its Work runs it itself when it is next (no hand-off
// between threads, which costs more than a small collective). The worker thread runs what is
// queued behind a running task at once. A task issued to an idle queue is left to the thread
// about to wait on it, and the worker takes it once it has gone unclaimed for kWaiterGrace (an
// operation nobody waits on still starts by then; up to kLongestWorkerLook later where waiting
// threads had been running every task back to back); after that the worker takes every task at
// once (collectives issued now and waited on later, like DDP's buckets, lose no time) until a
// thread waits on an unfinished one again. A collective whose options say `blocking` runs in the
// calling thread at once when nothing is queued or running (no Work, no queue entry), and is
// queued like the others otherwise. The sequence number tags every message and, with the op,
// dtype and count, forms the signature peers check: ranks that disagree fail with
// FailedPrecondition naming both sides. Arguments are assumed validated
// (frontend/dispatch/validate.h); timeouts already resolved.
#ifndef PLEXUS_EXECUTOR_COLLECTIVES_H_
#define PLEXUS_EXECUTOR_COLLECTIVES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "algorithms/algorithm_table.h"
#include "algorithms/collective_context.h"
#include "base/core/collective.h"
#include "base/core/mutex.h"
#include "base/core/options.h"
#include "base/core/tensor.h"
#include "base/transport/transport.h"

namespace plexus::executor {

class Collectives {
 public:
  Collectives(std::shared_ptr<Transport> transport, algorithms::AlgorithmTable table);
  // Fails queued work with Aborted and joins the worker.
  ~Collectives();

  // Fails the running and every later operation with `reason` (the transport breaks).
  void Abort(const absl::Status& reason) { transport_->Abort(reason); }
  std::vector<int> LostPeers() { return transport_->LostPeers(); }

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }

  // Queues `call` as the next collective, on algorithms/ (Unimplemented for a kind with no
  // schedule). Point-to-point bypasses the queue: ordered per (peer, tag), independent of
  // collectives.
  WorkPtr Run(const Collective& call);

  // Queues a custom body as the next collective, in issue order with the ones above: how a
  // backend runs its library's native collective for some calls and algorithms/ for others.
  // The body runs on the worker (or a waiting thread) with the operation's context; a failure
  // it returns is also sent to the peers through ctx.Fail.
  using Body = std::function<absl::Status(algorithms::CollectiveContext&)>;
  WorkPtr Submit(algorithms::CollectiveKind kind, DType dtype, int64_t count,
                 absl::Duration timeout, Body body);

  // How often the worker has woken to look for unclaimed tasks while waiting threads ran them
  // (for tests).
  uint64_t worker_looks() const;
  // How many tasks the worker started only once their grace for a waiting thread ran out
  // (for tests).
  uint64_t unclaimed_after_grace() const;
  // How often issuing a collective woke the worker from its untimed sleep (for tests).
  uint64_t worker_woken_at_issue() const;

 private:
  // A collective's Work, holding the body that runs it (one allocation for both): a thread
  // that waits on it may run it (RunInWaiter).
  class QueuedWork;
  template <typename F>
  class QueuedWorkWith;

  struct Task {
    absl::Time issued;  // Set for deferred tasks only (the worker's grace counts from it).
    bool deferred;      // A waiting thread gets the first chance to run it (see Submit).
    algorithms::CollectiveKind kind;
    uint64_t sequence;
    uint64_t signature;
    absl::Duration timeout;
    std::shared_ptr<QueuedWork> work;
    Collectives* owner;
  };

  // The queue, shared with the wait hooks of the Works it produced (which may outlive us).
  struct Queue {
    Mutex mu;
    std::condition_variable ready;
    std::deque<Task> tasks ABSL_GUARDED_BY(mu);
    // A task is executing (on the worker or in a waiting thread).
    bool running ABSL_GUARDED_BY(mu) = false;
    bool stopping ABSL_GUARDED_BY(mu) = false;
    // The worker sleeps without a timer (only then does Submit need to wake it).
    bool worker_asleep ABSL_GUARDED_BY(mu) = false;
    uint64_t waiter_runs ABSL_GUARDED_BY(mu) = 0;   // Tasks run by waiting threads so far.
    uint64_t worker_looks ABSL_GUARDED_BY(mu) = 0;  // Worker looks while waiters ran them.
    // Deferred tasks the worker took once the grace ran out.
    uint64_t unclaimed_after_grace ABSL_GUARDED_BY(mu) = 0;
    // Times Enqueue woke the worker from its untimed sleep.
    uint64_t woken_at_issue ABSL_GUARDED_BY(mu) = 0;
    absl::Time last_issued ABSL_GUARDED_BY(mu) = absl::InfinitePast();
    // Threads wait on their collectives and may run them (set by a wait on an unfinished one
    // that may; cleared by one that may not, and when a deferred task went unclaimed for
    // kWaiterGrace).
    bool waiters_expected ABSL_GUARDED_BY(mu) = true;
  };

  // Pops the next task and marks the queue running.
  static Task TakeFront(Queue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue.mu);
  // Runs `task`, completes its Work and clears `running`; on the worker or on a waiting thread.
  void Execute(Task& task);
  // Fails the tasks a shutdown left in the queue (outside its lock: callbacks run).
  static void FailUnrun(std::deque<Task> pending);
  // A Wait() on task `sequence`: run it here if it is next, the worker is idle, and its own
  // timeout is no longer than the wait's (so the waiter is not held past its deadline). A wait
  // that is shorter hands the task to the worker at once instead of leaving it its grace.
  static void RunInWaiter(Queue& queue, uint64_t sequence, absl::Duration wait_timeout);
  // Submit for a body of any callable type, stored in the Work itself. `blocking` (the
  // options' flag): run it in the calling thread if the queue is idle (RunInPlace) and return
  // a complete Work; otherwise it is queued as usual (the caller then waits on it).
  template <typename F>
  WorkPtr Enqueue(algorithms::CollectiveKind kind, DType dtype, int64_t count,
                  absl::Duration timeout, bool blocking, F body);
  // Runs `body` as the next collective in this thread if nothing runs or waits in the queue;
  // its outcome, or nothing (then it must be queued). No Work: nobody else can wait on it.
  template <typename F>
  std::optional<absl::Status> RunInPlace(algorithms::CollectiveKind kind, DType dtype,
                                         int64_t count, absl::Duration timeout, F& body);
  // Runs `body` as collective `sequence` with its context (deadline `timeout` after `start`,
  // or after now when that is InfinitePast) and the shared-memory arena, failing it on every
  // rank if it fails; for the one task that holds `running`.
  template <typename F>
  absl::Status RunCurrent(algorithms::CollectiveKind kind, uint64_t sequence, uint64_t signature,
                          absl::Duration timeout, Work* work, absl::Time start, F&& body);
  // Clears `running` after a task and wakes the worker if more is queued or it must stop.
  void FinishRunning();
  void Worker();

  const std::shared_ptr<Transport> transport_;
  const algorithms::AlgorithmTable table_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
  // What a blocking collective run in place returns when it succeeded: complete, no statistics.
  const WorkPtr done_;
  algorithms::ScratchArena arena_;  // Used by whichever thread runs the (single) current task.
  uint64_t next_sequence_ ABSL_GUARDED_BY(queue_->mu) = 1;
  std::thread worker_;
};

// Point-to-point messages use operations at and above this, collectives below it.
inline constexpr uint64_t kPointToPointOperationBase = uint64_t{1} << 39;

// How long a task issued to an idle queue waits for a thread to wait on it before the worker
// runs it; also how often the worker first looks while waiting threads run the tasks.
inline constexpr absl::Duration kWaiterGrace = absl::Milliseconds(1);
// While waiting threads keep running every task, the worker looks half as often each time, down
// to once per this: each look wakes a thread on a core the ranks are busy on. A task nobody
// claims then starts within this plus kWaiterGrace.
inline constexpr absl::Duration kLongestWorkerLook = absl::Milliseconds(8);
// While waiting threads run the tasks, the worker keeps looking on its timer, without being
// woken for each task issued, until nothing has been issued for this long.
inline constexpr absl::Duration kWorkerLooksWhileIssuedWithin = absl::Milliseconds(500);

}  // namespace plexus::executor

#endif  // PLEXUS_EXECUTOR_COLLECTIVES_H_
