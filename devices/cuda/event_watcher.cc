#include "devices/cuda/event_watcher.h"

#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/logging.h"
#include "base/work/callback_runner.h"

namespace plexus::cuda {

absl::StatusOr<std::shared_ptr<CudaEvent>> CudaEvent::Create(const CudaApi& api, int device,
                                                             bool timing) {
  DeviceGuard guard(api, device);
  cudaEvent_t event = nullptr;
  absl::Status status = CudaStatus(
      api, api.EventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
      "cudaEventCreateWithFlags");
  if (!status.ok()) return status;
  return std::shared_ptr<CudaEvent>(new CudaEvent(api, event, device));
}

CudaEvent::~CudaEvent() { api_.EventDestroy(event_); }

absl::Status CudaEvent::Record(Stream stream) {
  return CudaStatus(api_, api_.EventRecord(event_, stream), "cudaEventRecord");
}

absl::Status CudaEvent::BlockStream(Stream stream) {
  DeviceGuard guard(api_, device_);
  return CudaStatus(api_, api_.StreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}

struct EventWatcher::State {
  explicit State(const CudaApi& api) : api(api) {}

  // Checks one entry; returns true when it has been completed (successfully or not).
  bool Settle(Entry& entry, absl::Time now);
  void Run();
  // Completes every entry left with Aborted.
  void AbortLeft();

  const CudaApi& api;
  Mutex mu;
  std::condition_variable wake;
  std::vector<Entry> entries ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  uint64_t arrivals ABSL_GUARDED_BY(mu) = 0;  // Entries ever added: a new one ends a backoff.
  // True while the thread waits longer than one short poll: only then does Watch wake it (a
  // wake-up is a system call on the issuing thread, per operation, while ops stream in).
  bool asleep ABSL_GUARDED_BY(mu) = false;
};

EventWatcher::EventWatcher(const CudaApi& api)
    : state_(std::make_shared<State>(api)), thread_([state = state_] {
        // Linux adds 50 us of slack to a normal thread's timed waits; the 5 us polls need 1.
        prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        ProgressScope progress;  // Every watched Work completes here: user callbacks elsewhere.
        state->Run();
        state->AbortLeft();
      }) {}

EventWatcher::~EventWatcher() {
  {
    MutexLock lock(state_->mu);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // Joining itself would deadlock; the thread ends after this round.
  } else {
    thread_.join();
  }
}

void EventWatcher::State::AbortLeft() {
  std::vector<Entry> left;
  {
    MutexLock lock(mu);
    left.swap(entries);
  }
  for (Entry& entry : left) {
    entry.work->Complete(absl::AbortedError(
        absl::StrCat(entry.description, ": its backend was destroyed before it completed")));
  }
}

namespace {

// True once `event` has fired, polling (and yielding the core) for up to `limit`.
bool FiredWithin(const CudaApi& api, cudaEvent_t event, absl::Duration limit) {
  const absl::Time until = absl::Now() + limit;
  for (int round = 0;; ++round) {
    const cudaError_t state = api.EventQuery(event);
    if (state != cudaErrorNotReady) return state == cudaSuccess;
    if (round % 16 == 15 && absl::Now() >= until) return false;
    sched_yield();
  }
}

}  // namespace

void EventWatcher::Watch(Entry entry) {
  Work* work = entry.work.get();  // The hook runs inside this Work's own Wait.
  entry.work->SetWaitHook(
      [api = &state_->api, done = entry.done, health = entry.health, work](absl::Duration timeout) {
        if (FiredWithin(*api, done->get(), std::min(timeout, kWaiterPoll)) &&
            (!health || health().ok())) {
          work->Complete(absl::OkStatus());
        }
      });
  bool asleep;
  {
    MutexLock lock(state_->mu);
    state_->entries.push_back(std::move(entry));
    ++state_->arrivals;
    asleep = state_->asleep;
  }
  if (asleep) state_->wake.notify_one();
}

bool EventWatcher::State::Settle(Entry& entry, absl::Time now) {
  const cudaError_t query = api.EventQuery(entry.done->get());
  if (!entry.failure.ok()) {  // Failed already: complete once the device is past it.
    if (query == cudaErrorNotReady && now < entry.give_up) return false;
    if (query == cudaErrorNotReady) {
      Log(LogLevel::kWarning,
          absl::StrCat(entry.description, ": the device did not finish within ",
                       absl::FormatDuration(kFailureGrace), " of the abort; completing it anyway"));
    }
    entry.work->Complete(entry.failure);
    return true;
  }
  absl::Status failure;
  if (query == cudaSuccess) {
    // A kernel that gave up on a lost peer also ends: ask before calling the result good.
    if (entry.health) failure = entry.health();
    if (failure.ok()) {
      entry.work->Complete(absl::OkStatus());
      return true;
    }
    if (entry.on_failure) entry.on_failure(failure);
    entry.work->Complete(failure);
    return true;
  }
  if (query != cudaErrorNotReady) {
    api.GetLastError();
    failure = CudaStatus(api, query, absl::StrCat(entry.description, ": waiting for its end"));
  } else if (entry.health) {
    failure = entry.health();
  }
  if (failure.ok() && now >= entry.deadline) {
    failure = absl::DeadlineExceededError(absl::StrCat(
        entry.description, " did not complete by its deadline; its communicator is aborted"));
  }
  if (failure.ok()) return false;
  if (entry.on_failure) entry.on_failure(failure);
  entry.failure = failure;
  entry.give_up = now + kFailureGrace;
  if (query != cudaErrorNotReady) {
    entry.work->Complete(failure);
    return true;
  }
  return false;
}

void EventWatcher::State::Run() {
  // Poll quickly while operations finish, backing off to 1 ms while one runs long: a GPU
  // collective ends in microseconds or in seconds, and the event cannot wake a thread.
  const absl::Duration poll = absl::Microseconds(5);
  absl::Duration idle_wait = poll;
  UniqueLock lock(mu);
  while (true) {
    asleep = true;
    wake.wait(lock,
              [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || !entries.empty(); });
    asleep = false;
    if (stopping) return;
    std::vector<Entry> batch;
    batch.swap(entries);
    lock.unlock();
    const absl::Time now = absl::Now();
    std::vector<Entry> running;
    bool progressed = false;
    for (Entry& entry : batch) {
      if (Settle(entry, now)) {
        progressed = true;
      } else {
        running.push_back(std::move(entry));
      }
    }
    batch.clear();  // Releases finished entries' keepalives outside the lock.
    lock.lock();
    // Entries that arrived meanwhile go after the ones already waiting.
    running.insert(running.end(), std::make_move_iterator(entries.begin()),
                   std::make_move_iterator(entries.end()));
    entries.swap(running);
    if (entries.empty()) {
      idle_wait = poll;
      continue;
    }
    idle_wait = progressed ? poll : std::min(idle_wait * 2, absl::Milliseconds(1));
    const uint64_t seen = arrivals;
    asleep = idle_wait > poll;  // A short poll sees new entries soon enough unwoken.
    wake.wait_for(lock, absl::ToChronoNanoseconds(idle_wait),
                  [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return stopping || arrivals != seen; });
    asleep = false;
    if (stopping) return;
  }
}

}  // namespace plexus::cuda
