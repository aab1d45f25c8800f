// Where user callbacks run when the thread completing a Work must not be lent to them.
//
// A thread inside a ProgressScope holds something other operations need in order to finish: a
// collective queue's worker, a transport's event loop, a completion thread. A user's callback
// (Work::OnCompleteMayBlock: torch's Future callbacks, Python done-callbacks) may issue another
// operation and wait for it there, as torch's PowerSGD hook does; run on such a thread it would
// wait for itself. So Work::Complete hands those callbacks to a callback thread instead.
//
// Callback threads take tasks in the order they were given. One thread usually suffices; when a
// task has waited kCallbackStallBeforeNewThread with every callback thread busy (a callback is
// blocked on an operation whose own callbacks are queued behind it), another thread starts.
// Threads beyond the first end after kCallbackThreadIdle without work.
#ifndef PLEXUS_BASE_WORK_CALLBACK_RUNNER_H_
#define PLEXUS_BASE_WORK_CALLBACK_RUNNER_H_

#include <functional>

#include "absl/time/time.h"

namespace plexus {

// Marks the current thread, for the scope's life, as one that must not run user callbacks.
// Scopes nest.
class ProgressScope {
 public:
  ProgressScope();
  ~ProgressScope();
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

  // Whether the calling thread is inside a ProgressScope.
  static bool Active();
};

// Runs `task` on a callback thread (see above). Never blocks; safe from any thread.
void RunOnCallbackThread(std::function<void()> task);

// Callback threads started so far in this process (for tests).
int CallbackThreadsStarted();

inline constexpr absl::Duration kCallbackStallBeforeNewThread = absl::Milliseconds(2);
inline constexpr absl::Duration kCallbackThreadIdle = absl::Seconds(10);

}  // namespace plexus

#endif  // PLEXUS_BASE_WORK_CALLBACK_RUNNER_H_
