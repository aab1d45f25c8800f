#include "backends/mpi/mpi_engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/environment.h"
#include "base/net/interfaces.h"
#include "base/rendezvous/rendezvous.h"
#include "base/work/callback_runner.h"

namespace plexus::mpi {

bool LaunchedByMpirun() {
  // Open MPI's launcher, PMIx (srun --mpi=pmix, newer mpiruns) and MPICH's Hydra.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

absl::Status MpiErrorToStatus(int code, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  const std::string message =
      absl::StrCat(what, ": MPI error ", code, " (", std::string(text, length), ")");
  switch (error_class) {
    case MPI_ERR_TRUNCATE:
      return absl::FailedPreconditionError(message);
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_OP:
    case MPI_ERR_ARG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnavailableError(message);
  }
}

namespace {

// PLEXUS_SOCKET_IFNAME (or GLOO_SOCKET_IFNAME) also steers Open MPI's TCP transport, unless the
// user configured its interfaces already.
void KeepTcpOnFilteredInterfaces() {
  if (std::getenv("OMPI_MCA_btl_tcp_if_include") != nullptr ||
      std::getenv("OMPI_MCA_btl_tcp_if_exclude") != nullptr) {
    return;
  }
  const std::string names = net::FilteredInterfaceNames(GetEnv);
  if (!names.empty()) setenv("OMPI_MCA_btl_tcp_if_include", names.c_str(), 0);
}

bool DirectProgressWanted() {
  if (const char* env = ReadEnvironment("PLEXUS_MPI_DIRECT"); env != nullptr) {
    return std::string(env) != "0";
  }
  int local_ranks = 1;
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); env != nullptr) {
    local_ranks = std::max(1, std::atoi(env));
  }
  cpu_set_t cpus;
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                        ? CPU_COUNT(&cpus)
                        : static_cast<int>(std::thread::hardware_concurrency());
  return local_ranks <= cores;
}

}  // namespace

absl::StatusOr<MpiEngine*> MpiEngine::Get() {
  static Mutex mu;
  static MpiEngine* engine = nullptr;
  static absl::Status launched;
  MutexLock lock(mu);
  if (engine == nullptr) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised && !LaunchedByMpirun()) {
      return absl::FailedPreconditionError(
          "the mpi backend needs processes started by an MPI launcher (mpirun -np N ..., or "
          "srun with PMIx); OMPI_COMM_WORLD_SIZE, PMIX_RANK and PMI_SIZE are all unset. Outside "
          "mpirun use cpu:tcp or cpu:gloo");
    }
    // Never deleted: Works and backends may reach it until the process ends.
    engine = new MpiEngine();
    launched = engine->Launch();
  }
  if (!launched.ok()) return launched;
  return engine;
}

absl::Status MpiEngine::Launch() {
  std::promise<absl::Status> started;
  std::future<absl::Status> outcome = started.get_future();
  thread_ = std::thread([this, &started] {
    ProgressScope progress;  // MPI calls happen only here: user callbacks run elsewhere.
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    absl::Status status;
    if (!initialised) {
      // FUNNELED suffices for this thread alone; MULTIPLE lets waiting threads test their own
      // requests.
      const char* level = ReadEnvironment("PLEXUS_MPI_THREAD_LEVEL");
      const int wanted = level != nullptr && std::string(level) == "funneled" ? MPI_THREAD_FUNNELED
                                                                              : MPI_THREAD_MULTIPLE;
      KeepTcpOnFilteredInterfaces();
      const int rc = MPI_Init_thread(nullptr, nullptr, wanted, &provided);
      if (rc != MPI_SUCCESS) {
        status = absl::UnavailableError(absl::StrCat("MPI_Init_thread failed with code ", rc));
      } else {
        initialised_mpi_ = true;
      }
    } else {
      MPI_Query_thread(&provided);
      if (provided < MPI_THREAD_MULTIPLE) {
        status = absl::FailedPreconditionError(absl::StrCat(
            "MPI was initialised by the application with thread level ", provided,
            "; the mpi backend calls MPI from its own progress thread and then needs "
            "MPI_THREAD_MULTIPLE (use MPI_Init_thread, or let plexus initialise MPI)"));
      }
    }
    if (status.ok() && provided < MPI_THREAD_FUNNELED) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "MPI provides thread level ", provided, "; the mpi backend needs MPI_THREAD_FUNNELED"));
    }
    if (status.ok()) {
      direct_progress_ = provided >= MPI_THREAD_MULTIPLE && DirectProgressWanted();
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
    }
    const bool ok = status.ok();
    started.set_value(std::move(status));
    if (ok) Loop();
  });
  absl::Status status = outcome.get();
  if (!status.ok()) {
    thread_.join();
    return status;
  }
  std::atexit(&MpiEngine::ShutdownAtExit);
  return absl::OkStatus();
}

absl::Status MpiEngine::Call(std::function<absl::Status()> call, absl::Duration timeout) {
  if (std::this_thread::get_id() == thread_.get_id()) return call();
  struct Result {
    Mutex mu;
    std::condition_variable done_cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto result = std::make_shared<Result>();
  {
    MutexLock lock(mu_);
    if (stopping_) return absl::AbortedError("the MPI engine has stopped (process exit)");
    queued_.push_back([result, call = std::move(call)] {
      absl::Status status = call();
      MutexLock lock(result->mu);
      result->status = std::move(status);
      result->done = true;
      result->done_cv.notify_all();
    });
  }
  wake_.notify_one();
  UniqueLock lock(result->mu);
  if (!result->done_cv.wait_for(
          lock, absl::ToChronoNanoseconds(timeout),
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(result->mu) { return result->done; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("the MPI progress thread did not run a set-up call within ",
                     absl::FormatDuration(timeout)));
  }
  return result->status;
}

void MpiEngine::Start(Operation operation) {
  {
    MutexLock lock(mu_);
    if (!stopping_) {
      queued_.push_back([this, operation = std::move(operation)]() mutable {
        auto active = std::make_unique<Active>();
        active->operation = std::move(operation);
        const int rc = active->operation.post(&active->request);
        if (rc != MPI_SUCCESS) {
          active->request = MPI_REQUEST_NULL;
          Fail(*active, MpiErrorToStatus(rc, active->operation.what));
          return;
        }
        active_.push_back(std::move(active));
      });
      wake_.notify_one();
      return;
    }
  }
  operation.work->Complete(absl::AbortedError(
      absl::StrCat(operation.what, ": the MPI engine has stopped (process exit)")));
}

void MpiEngine::Adopt(MPI_Request request, std::string what) {
  MutexLock lock(mu_);
  if (stopping_) return;
  queued_.push_back([this, request, what = std::move(what)] {
    auto active = std::make_unique<Active>();
    active->operation.what = what;
    active->request = request;
    active->orphaned = true;
    active_.push_back(std::move(active));
  });
  wake_.notify_one();
}

void MpiEngine::Abort(const void* owner, uint64_t operation, const absl::Status& reason) {
  auto abort = [this, owner, operation, reason] {
    for (auto& active : active_) {
      const Operation& op = active->operation;
      if (active->orphaned || op.owner != owner) continue;
      if (operation != 0 && op.operation != operation) continue;
      Fail(*active, reason);
    }
  };
  if (std::this_thread::get_id() == thread_.get_id()) {
    abort();
    return;
  }
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    queued_.push_back(std::move(abort));
  }
  wake_.notify_one();
}

void MpiEngine::Fail(Active& active, const absl::Status& status) {
  active.orphaned = true;
  // A receive can be withdrawn; sends and collectives run to completion inside MPI.
  if (active.operation.cancellable && active.request != MPI_REQUEST_NULL) {
    MPI_Cancel(&active.request);
  }
  active.operation.work->Complete(status);
  if (active.operation.on_failure) active.operation.on_failure(status);
}

void MpiEngine::Poll() {
  // Reused across rounds: this runs in the progress thread's spin loop.
  std::vector<MPI_Request>& requests = poll_requests_;
  requests.clear();
  for (const auto& active : active_) requests.push_back(active->request);
  poll_indices_.resize(requests.size());
  poll_statuses_.resize(requests.size());
  std::vector<int>& indices = poll_indices_;
  std::vector<MPI_Status>& statuses = poll_statuses_;
  int completed = 0;
  const int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed,
                              indices.data(), statuses.data());
  if (completed == MPI_UNDEFINED || completed == 0) return;
  for (size_t i = 0; i < requests.size(); ++i) active_[i]->request = requests[i];
  std::vector<bool>& finished = poll_finished_;
  finished.assign(active_.size(), false);
  for (int k = 0; k < completed; ++k) {
    const int index = indices[k];
    finished[index] = true;
    Active& active = *active_[index];
    if (active.orphaned) continue;
    absl::Status status;
    if (rc == MPI_ERR_IN_STATUS && statuses[k].MPI_ERROR != MPI_SUCCESS) {
      status = MpiErrorToStatus(statuses[k].MPI_ERROR, active.operation.what);
    } else if (active.operation.finish) {
      status = active.operation.finish(statuses[k]);
    }
    if (status.ok()) {
      active.operation.work->Complete(absl::OkStatus());
    } else {
      Fail(active, status);
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (!finished[i]) active_[kept++] = std::move(active_[i]);
  }
  active_.resize(kept);
}

void MpiEngine::CheckDeadlines() {
  const absl::Time now = absl::Now();
  for (auto& active : active_) {
    if (active->orphaned || active->operation.deadline > now) continue;
    Fail(*active,
         absl::DeadlineExceededError(absl::StrCat(active->operation.what,
                                                  ": not complete by its deadline (a peer did not "
                                                  "make the matching call in time)")));
  }
}

void MpiEngine::Loop() {
  while (true) {
    std::deque<std::function<void()>> queued;
    {
      UniqueLock lock(mu_);
      if (active_.empty()) {
        wake_.wait(lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !queued_.empty();
        });
      }
      queued.swap(queued_);
      if (stopping_ && queued.empty()) break;
    }
    for (auto& call : queued) call();
    if (active_.empty()) continue;
    const size_t before = active_.size();
    Poll();
    CheckDeadlines();
    // Requests outstanding and nothing finished: let the other ranks' processes run (this
    // machine may have fewer cores than ranks) before testing again. Requests left only to be
    // reaped (their Works failed) are looked at once a millisecond.
    if (active_.size() == before && queued.empty()) {
      bool all_orphaned = true;
      for (const auto& active : active_) all_orphaned = all_orphaned && active->orphaned;
      if (all_orphaned) {
        UniqueLock lock(mu_);
        wake_.wait_for(
            lock, std::chrono::milliseconds(1),
            [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queued_.empty(); });
      } else {
        std::this_thread::yield();
      }
    }
  }
  for (auto& active : active_) {
    if (!active->orphaned) {
      Fail(*active,
           absl::AbortedError(absl::StrCat(active->operation.what, ": the process is exiting")));
    }
  }
  // Requests abandoned after a failure may still finish (a late peer): give them a moment, so
  // that MPI can be finalised cleanly.
  const absl::Time drain_deadline = absl::Now() + absl::Seconds(5);
  while (!active_.empty() && absl::Now() < drain_deadline) {
    Poll();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // MPI_Finalize with requests still inside MPI is erroneous; the launcher then reports an
  // unclean exit, which is what happened.
  if (initialised_mpi_ && active_.empty()) MPI_Finalize();
}

void MpiEngine::ShutdownAtExit() {
  auto engine = Get();
  if (!engine.ok()) return;
  {
    MutexLock lock((*engine)->mu_);
    (*engine)->stopping_ = true;
  }
  (*engine)->wake_.notify_all();
  if ((*engine)->thread_.joinable()) (*engine)->thread_.join();
}

}  // namespace plexus::mpi
