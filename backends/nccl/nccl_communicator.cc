#include "backends/nccl/nccl_communicator.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/status_macros.h"

namespace plexus::nccl {
namespace {

// Which ranks announced themselves in the store before the communicator's deadline.
std::string MissingRanks(Store& store, const std::string& key, int size) {
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    auto present = store.Check({absl::StrCat(key, ".arrived.", r)});
    if (!present.ok() || !*present) missing.push_back(r);
  }
  if (missing.empty()) return "every rank arrived; NCCL did not finish connecting them";
  return absl::StrCat("rank(s) ", absl::StrJoin(missing, ", "), " never arrived");
}

// Waits a little between polls without burning a core the caller may need (2-core hosts).
void PollPause(int round) {
  if (round < 64) {
    sched_yield();
  } else {
    absl::SleepFor(absl::Microseconds(std::min(50 * (round - 63), 1000)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclApi& nccl, const cuda::CudaApi& cuda, Store& store, Config config) {
  const absl::Time deadline = absl::Now() + config.timeout;
  RETURN_IF_ERROR(store.Set(absl::StrCat(config.store_key, ".arrived.", config.rank), "1"));
  ncclUniqueId id;
  if (config.rank == 0) {
    RETURN_IF_ERROR(NcclStatus(nccl, nccl.GetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(
        store.Set(config.store_key, absl::string_view(id.internal, NCCL_UNIQUE_ID_BYTES)));
  } else {
    absl::Status waited = store.Wait({config.store_key}, config.timeout);
    if (!waited.ok()) {
      return absl::Status(waited.code(),
                          absl::StrCat("creating the NCCL communicator of ", config.name,
                                       ": rank 0 published no id: ", waited.message()));
    }
    ASSIGN_OR_RETURN(std::string bytes, store.Get(config.store_key));
    if (bytes.size() != NCCL_UNIQUE_ID_BYTES) {
      return absl::InternalError(absl::StrCat("creating the NCCL communicator of ", config.name,
                                              ": the published id has ", bytes.size(),
                                              " bytes, not ", NCCL_UNIQUE_ID_BYTES));
    }
    std::memcpy(id.internal, bytes.data(), NCCL_UNIQUE_ID_BYTES);
  }

  std::unique_ptr<NcclCommunicator> self(new NcclCommunicator(nccl, cuda, std::move(config)));
  const Config& c = self->config_;
  cuda::DeviceGuard guard(cuda, c.device);
  int least = 0, greatest = 0;
  RETURN_IF_ERROR(cuda::CudaStatus(cuda, cuda.DeviceGetStreamPriorityRange(&least, &greatest),
                                   "cudaDeviceGetStreamPriorityRange"));
  RETURN_IF_ERROR(cuda::CudaStatus(
      cuda, cuda.StreamCreateWithPriority(&self->stream_, cudaStreamNonBlocking, greatest),
      "creating the NCCL stream"));
  RETURN_IF_ERROR(cuda::CudaStatus(cuda, cuda.Malloc(&self->scratch_, 4), "cudaMalloc"));
  ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaEvent> ready, cuda::CudaEvent::Create(cuda, c.device));

  ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
  nccl_config.blocking = 0;  // Never block in init or launch: deadlines must hold.
  // An older library than the header reads only the fields its version has.
  nccl_config.version = std::min<unsigned>(nccl_config.version, nccl.version);
  nccl_config.commName = c.name.c_str();
  MutexLock lock(self->mu_);
  self->caller_ready_ = std::move(ready);
  ncclResult_t started = nccl.CommInitRankConfig(&self->comm_, c.size, id, c.rank, &nccl_config);
  if (started != ncclSuccess && started != ncclInProgress) {
    return NcclStatus(nccl, started, absl::StrCat("ncclCommInitRankConfig for ", c.name));
  }
  absl::Status ready_status = self->AwaitReady("connecting", deadline);
  if (absl::IsDeadlineExceeded(ready_status)) {
    return absl::DeadlineExceededError(
        absl::StrCat("creating the NCCL communicator of ", c.name, " (rank ", c.rank, " of ",
                     c.size, "): not connected within ", absl::FormatDuration(c.timeout), "; ",
                     MissingRanks(store, c.store_key, c.size)));
  }
  RETURN_IF_ERROR(ready_status);
  return self;
}

NcclCommunicator::~NcclCommunicator() {
  Abort(absl::AbortedError(
      absl::StrCat("the NCCL communicator of ", config_.name, " was destroyed")));
  cuda::DeviceGuard guard(cuda_, config_.device);
  if (stream_ != nullptr) cuda_.StreamDestroy(stream_);
  if (scratch_ != nullptr) cuda_.Free(scratch_);
  MutexLock lock(mu_);
  caller_ready_.reset();
}

void NcclCommunicator::Fail(absl::Status status) {
  MutexLock lock(failure_mu_);
  if (failure_.ok()) failure_ = std::move(status);
}

absl::Status NcclCommunicator::failure() const {
  MutexLock lock(failure_mu_);
  return failure_;
}

absl::Status NcclCommunicator::AwaitReady(absl::string_view what, absl::Time deadline) {
  for (int round = 0;; ++round) {
    if (abort_requested_.load(std::memory_order_acquire)) return failure();
    ncclResult_t state = ncclInProgress;
    ncclResult_t asked = nccl_.CommGetAsyncError(comm_, &state);
    if (asked != ncclSuccess) return NcclStatus(nccl_, asked, "ncclCommGetAsyncError", comm_);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) {
      return NcclStatus(nccl_, state, absl::StrCat(what, " on ", config_.name), comm_);
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " on ", config_.name, " did not finish by its deadline"));
    }
    PollPause(round);
  }
}

absl::StatusOr<std::shared_ptr<cuda::CudaEvent>> NcclCommunicator::Launch(absl::string_view what,
                                                                          cuda::Stream caller,
                                                                          const Enqueue& enqueue,
                                                                          absl::Time deadline) {
  ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaEvent> done,
                   cuda::CudaEvent::Create(cuda_, config_.device));
  UniqueLock lock(mu_);
  if (abort_requested_.load(std::memory_order_acquire)) {
    absl::Status why = failure();
    return absl::Status(why.code(), absl::StrCat(what, ": ", why.message()));
  }
  cuda::DeviceGuard guard(cuda_, config_.device);
  RETURN_IF_ERROR(caller_ready_->Record(caller));
  RETURN_IF_ERROR(caller_ready_->BlockStream(stream_));
  Scope scope{comm_, stream_, scratch_, {}};
  absl::Status enqueued = enqueue(scope);
  if (enqueued.ok()) enqueued = AwaitReady(what, deadline);
  for (auto& cleanup : scope.after_accepted) cleanup();
  if (enqueued.ok()) enqueued = done->Record(stream_);
  if (!enqueued.ok()) {
    // NCCL may hold half a launch; nothing more can safely run on this communicator.
    lock.unlock();
    Abort(enqueued);
    return enqueued;
  }
  return done;
}

absl::Status NcclCommunicator::Health() {
  // A launch in progress polls NCCL itself; the watcher asks again shortly.
  if (!mu_.try_lock()) return failure();
  UniqueLock lock(mu_, std::adopt_lock);
  if (aborted_) return failure();
  ncclResult_t state = ncclSuccess;
  ncclResult_t asked = nccl_.CommGetAsyncError(comm_, &state);
  if (asked == ncclSuccess && (state == ncclSuccess || state == ncclInProgress)) {
    return absl::OkStatus();
  }
  absl::Status error =
      asked != ncclSuccess
          ? NcclStatus(nccl_, asked, "ncclCommGetAsyncError", comm_)
          : NcclStatus(nccl_, state, absl::StrCat("NCCL reported an error on ", config_.name),
                       comm_);
  // A remote or system error is a lost peer or network; say so in the code callers check.
  if (state == ncclRemoteError || state == ncclSystemError) {
    error = absl::UnavailableError(
        absl::StrCat(error.message(), "; a peer was lost or the network failed"));
  }
  lock.unlock();
  Abort(error);
  return failure();
}

void NcclCommunicator::Abort(const absl::Status& reason) {
  Fail(reason);
  abort_requested_.store(true, std::memory_order_release);
  MutexLock lock(mu_);
  if (aborted_) return;
  aborted_ = true;
  if (comm_ != nullptr) nccl_.CommAbort(comm_);  // Ends in-flight kernels; never waits on peers.
  comm_ = nullptr;
}

}  // namespace plexus::nccl
