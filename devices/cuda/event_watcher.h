// CudaEvent and EventWatcher: how a Work whose last step runs on a CUDA stream learns that it
// has finished.
//
// A producer records a CudaEvent after an operation's last device step and hands the Work to
// the watcher, which polls the event from its own thread and completes the Work when it fires.
// While waiting it asks the entry's health check (e.g. NCCL's asynchronous error) and enforces
// the deadline; on either failure it calls the entry's on_failure (e.g. abort the communicator,
// which makes the stuck kernels exit) and completes the Work with that error once the event has
// fired - so no kernel writes into buffers the caller frees on seeing the error - or, if the
// device never gets there, after kFailureGrace.
#ifndef PLEXUS_DEVICES_CUDA_EVENT_WATCHER_H_
#define PLEXUS_DEVICES_CUDA_EVENT_WATCHER_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/work/work.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/current_stream.h"

namespace plexus::cuda {

// A CUDA event (timing disabled unless asked), destroyed with the object.
class CudaEvent {
 public:
  static absl::StatusOr<std::shared_ptr<CudaEvent>> Create(const CudaApi& api, int device,
                                                           bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  int device() const { return device_; }
  // Records the event on `stream` (of this event's device).
  absl::Status Record(Stream stream);
  // Makes `stream` wait for the event's last recording, without blocking the host.
  absl::Status BlockStream(Stream stream);

 private:
  CudaEvent(const CudaApi& api, cudaEvent_t event, int device)
      : api_(api), event_(event), device_(device) {}

  const CudaApi& api_;
  cudaEvent_t event_;
  int device_;
};

class EventWatcher {
 public:
  struct Entry {
    WorkPtr work;
    std::shared_ptr<CudaEvent> done;  // Recorded after the operation's last device step.
    absl::Time deadline = absl::InfiniteFuture();
    std::string description;  // "all_reduce #12 on cuda:0", for the timeout message.
    // Asked while the event has not fired; an error fails the Work with it. May be empty.
    std::function<absl::Status()> health;
    // Called once, after the Work failed by deadline, health or a CUDA error. May be empty.
    std::function<void(const absl::Status&)> on_failure;
    // Holds what must live until the operation ends (buffers, op handles); released after
    // the Work completes, on the watcher's thread.
    std::shared_ptr<void> keepalive;

    // Set by the watcher once the entry has failed: the error, and until when to wait for the
    // event before completing the Work anyway.
    absl::Status failure;
    absl::Time give_up = absl::InfiniteFuture();
  };

  static constexpr absl::Duration kFailureGrace = absl::Seconds(10);
  // How long a host wait on a watched Work polls the event on its own thread (as
  // cudaStreamSynchronize spins) before it leaves completion to the watcher's thread.
  static constexpr absl::Duration kWaiterPoll = absl::Milliseconds(1);

  explicit EventWatcher(const CudaApi& api);
  // Fails the entries still watched with Aborted and stops the thread: joins it, or, when run
  // on that very thread (a completion callback dropped the last owner), lets it end by itself.
  ~EventWatcher();
  EventWatcher(const EventWatcher&) = delete;
  EventWatcher& operator=(const EventWatcher&) = delete;

  // Completes entry.work once the device is past entry.done. A host wait on the Work
  // (Work::Wait) polls the event itself for up to kWaiterPoll and completes it when it fired
  // and `health` is OK: the watcher's polls back off, and a completion from its thread costs
  // the waiter a wake-up. Failures are the watcher's alone.
  void Watch(Entry entry);

 private:
  struct State;  // Shared with the thread, which may outlive this object (see ~EventWatcher).

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace plexus::cuda

#endif  // PLEXUS_DEVICES_CUDA_EVENT_WATCHER_H_
