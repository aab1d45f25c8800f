// ProcessGroupPlexus::monitoredBarrier: Gloo's monitored barrier (its semantics and the
// wording torch's tests and users match on), run over the group's store rather than its
// data connections, so it names the missing ranks even when the data path is stuck.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bindings/torch/process_group_plexus.h"

namespace plexus::torch_backend {

namespace {

std::string ArrivedKey(const std::string& prefix, int rank) {
  return absl::StrCat(prefix, "arrived/", rank);
}

// A rank other than 0: says it arrived, then waits for rank 0's release.
absl::Status ArriveAndAwaitRelease(Store& store, const std::string& prefix, int rank,
                                   absl::Duration timeout) {
  absl::Status status = store.Set(ArrivedKey(prefix, rank), "1");
  if (status.ok()) status = store.Wait({prefix + "released"}, timeout);
  if (status.ok()) return status;
  // The store's own code (a timeout, or a store that went away), in Gloo's words.
  return absl::Status(status.code(),
                      absl::StrCat("Rank ", rank,
                                   " successfully reached monitoredBarrier, but received errors "
                                   "while waiting for send/recv from rank 0 (",
                                   absl::ToInt64Milliseconds(timeout), " ms): ", status.message()));
}

// Rank 0: the ranks that did not arrive by the deadline (only the first, unless
// `wait_all_ranks`; once a rank is missing, the others are only checked).
absl::StatusOr<std::vector<int>> MissingRanks(Store& store, const std::string& prefix, int size,
                                              absl::Duration timeout, bool wait_all_ranks) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  std::vector<int> missing;
  for (int rank = 1; rank < size; ++rank) {
    if (!missing.empty() && !wait_all_ranks) break;
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration() && missing.empty()) {
      return absl::DeadlineExceededError(
          absl::StrCat("Rank 0 timed out in monitoredBarrier after ",
                       absl::ToInt64Milliseconds(absl::Now() - start),
                       " ms (its timeout: ", absl::ToInt64Milliseconds(timeout), " ms)"));
    }
    absl::Status status;
    if (missing.empty()) {
      status = store.Wait({ArrivedKey(prefix, rank)}, remaining);
    } else {
      absl::StatusOr<bool> present = store.Check({ArrivedKey(prefix, rank)});
      if (!present.ok()) {
        status = present.status();
      } else if (!*present) {
        status = absl::DeadlineExceededError("absent");
      }
    }
    if (status.code() == absl::StatusCode::kDeadlineExceeded) {
      missing.push_back(rank);
    } else if (!status.ok()) {
      return status;
    }
  }
  return missing;
}

}  // namespace

void ProcessGroupPlexus::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  CheckRunnable();
  const absl::Duration timeout = ResolveTimeout(ToTimeout(opts.timeout), DefaultTimeout());
  const std::string prefix =
      absl::StrCat("monitored_barrier/", monitored_rounds_.fetch_add(1), "/");
  Store& store = *group_->store();
  if (rank_ != 0) {
    absl::Status status = ArriveAndAwaitRelease(store, prefix, rank_, timeout);
    if (!status.ok()) Throw(status, origin_);
    return;
  }
  absl::StatusOr<std::vector<int>> missing =
      MissingRanks(store, prefix, size_, timeout, wait_all_ranks);
  if (!missing.ok()) Throw(missing.status(), origin_);
  if (!missing->empty()) {
    Throw(absl::DeadlineExceededError(absl::StrCat(
              missing->size() == 1 ? "Rank " : "Ranks ", absl::StrJoin(*missing, ", "),
              " failed to pass monitoredBarrier in ", absl::ToInt64Milliseconds(timeout), " ms")),
          origin_);
  }
  for (int rank = 1; rank < size_; ++rank) (void)store.DeleteKey(ArrivedKey(prefix, rank));
  absl::Status status = store.Set(prefix + "released", "1");
  if (!status.ok()) Throw(status, origin_);
}

}  // namespace plexus::torch_backend
