// MpiEngine: the progress thread that owns MPI. It initialises MPI (asking for
// MPI_THREAD_MULTIPLE; FUNNELED is enough for it alone; if the application initialised MPI
// itself, MULTIPLE is required), posts the non-blocking MPI_I* calls handed to it, drives
// progress by testing the outstanding requests, completes their Works, and fails those whose
// deadline passes. MPI is finalised at process exit when no request is outstanding.
//
// Other threads never block in MPI: they hand the engine closures and wait on Works, so every
// wait keeps its deadline even when a peer never arrives. When MPI provides
// MPI_THREAD_MULTIPLE, a thread that is about to wait for a collective may instead post and
// test it itself (MpiBackend does), handing the request to the engine with Adopt() if its
// deadline passes - this saves two thread hand-offs per call.
#ifndef PLEXUS_BACKENDS_MPI_MPI_ENGINE_H_
#define PLEXUS_BACKENDS_MPI_MPI_ENGINE_H_

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"
#include "base/work/work.h"

namespace plexus::mpi {

// Whether this process was started by an MPI launcher (mpirun/mpiexec, or srun with PMIx).
bool LaunchedByMpirun();

// A status for an MPI error code, naming `what`.
absl::Status MpiErrorToStatus(int code, const std::string& what);

class MpiEngine {
 public:
  // The process's engine, started on first use. FailedPrecondition outside an MPI launch.
  static absl::StatusOr<MpiEngine*> Get();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Whether a thread waiting for a collective should post and test it itself: MPI provides
  // MPI_THREAD_MULTIPLE and this host has a core for each of its ranks (with fewer cores, a
  // second thread spinning in MPI costs more than the hand-off it saves). $PLEXUS_MPI_DIRECT=0
  // or 1 overrides; $PLEXUS_MPI_THREAD_LEVEL=funneled asks MPI for FUNNELED only.
  bool direct_progress() const { return direct_progress_; }

  // Takes over a request another thread started and gave up on (its Work already failed):
  // the engine tests it until MPI completes it, so that MPI can be finalised cleanly.
  void Adopt(MPI_Request request, std::string what);

  // Runs `call` on the engine thread and returns its status; waits at most `timeout`. The call
  // must not block on peers (communicator set-up that may block is preceded by a store barrier
  // among the members, so all of them are there).
  absl::Status Call(std::function<absl::Status()> call, absl::Duration timeout);

  // One non-blocking operation.
  struct Operation {
    std::string what;  // "all_reduce #3 of 4096 bytes on group 'world'" - for errors.
    // Starts the request on the engine thread; returns an MPI error code.
    std::function<int(MPI_Request*)> post;
    // Checks the completed request's status on the engine thread (e.g. the received size,
    // the source rank); may be empty.
    std::function<absl::Status(const MPI_Status&)> finish;
    // Runs on the engine thread when the operation fails (after its Work completed), e.g. to
    // break the owning group. May be empty.
    std::function<void(const absl::Status&)> on_failure;
    absl::Time deadline = absl::InfiniteFuture();
    const void* owner = nullptr;  // For Abort(owner, ...).
    uint64_t operation = 0;       // For Abort(owner, operation, ...).
    bool cancellable = false;     // A receive: MPI_Cancel can withdraw it.
    WorkPtr work;                 // Completed with the outcome.
  };
  // Queues `operation`; its Work completes when the request does, or fails at the deadline.
  void Start(Operation operation);

  // Fails every pending operation of `owner` (of `operation`, unless it is 0) with `reason`,
  // cancelling the receives; other requests stay with the engine until MPI completes them.
  void Abort(const void* owner, uint64_t operation, const absl::Status& reason);

 private:
  struct Active {
    Operation operation;
    MPI_Request request = MPI_REQUEST_NULL;
    bool orphaned = false;  // Its Work has failed; the request is only being reaped.
  };

  MpiEngine() = default;
  // Starts the thread and initialises MPI on it; returns its outcome.
  absl::Status Launch();
  void Loop();
  void Fail(Active& active, const absl::Status& status);
  void Poll();
  void CheckDeadlines();
  static void ShutdownAtExit();

  Mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queued_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Active>> active_;  // Engine thread only.
  // Poll()'s arrays, kept between rounds (engine thread only).
  std::vector<MPI_Request> poll_requests_;
  std::vector<int> poll_indices_;
  std::vector<MPI_Status> poll_statuses_;
  std::vector<bool> poll_finished_;
  std::thread thread_;
  bool initialised_mpi_ = false;  // We called MPI_Init_thread, so we finalise.
  bool direct_progress_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace plexus::mpi

#endif  // PLEXUS_BACKENDS_MPI_MPI_ENGINE_H_
