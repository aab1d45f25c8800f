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

void ProcessGroupPlexus::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  CheckRunnable();
  const absl::Duration requested = ToTimeout(opts.timeout);
  const absl::Duration timeout = ResolveTimeout(requested, DefaultTimeout());
  const int64_t millis = absl::ToInt64Milliseconds(timeout);
  const std::string prefix =
      absl::StrCat("monitored_barrier/", monitored_rounds_.fetch_add(1), "/");
  Store& store = *group_->store();
  auto arrived = [&](int rank) { return absl::StrCat(prefix, "arrived/", rank); };
  const std::string released = prefix + "released";

  if (rank_ != 0) {
    absl::Status status = store.Set(arrived(rank_), "1");
    if (status.ok()) status = store.Wait({released}, timeout);
    if (!status.ok()) {
      // The store's own code (a timeout, or a store that went away), in Gloo's words.
      Throw(absl::Status(status.code(),
                         absl::StrCat("Rank ", rank_,
                                      " successfully reached monitoredBarrier, but received "
                                      "errors while waiting for send/recv from rank 0 (",
                                      millis, " ms): ", status.message())),
            origin_);
    }
    return;
  }

  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  std::vector<int> missing;
  for (int rank = 1; rank < size_; ++rank) {
    if (!missing.empty() && !wait_all_ranks) break;
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration() && missing.empty()) {
      Throw(absl::DeadlineExceededError(absl::StrCat("Rank 0 timed out in monitoredBarrier after ",
                                                     absl::ToInt64Milliseconds(absl::Now() - start),
                                                     " ms (its timeout: ", millis, " ms)")),
            origin_);
    }
    // Once a rank is missing, the others are only checked (wait_all_ranks).
    absl::Status status;
    if (missing.empty()) {
      status = store.Wait({arrived(rank)}, remaining);
    } else {
      absl::StatusOr<bool> present = store.Check({arrived(rank)});
      status = !present.ok() ? present.status()
               : *present    ? absl::OkStatus()
                             : absl::DeadlineExceededError("absent");
    }
    if (status.code() == absl::StatusCode::kDeadlineExceeded) {
      missing.push_back(rank);
    } else if (!status.ok()) {
      Throw(status, origin_);
    }
  }
  if (!missing.empty()) {
    Throw(absl::DeadlineExceededError(
              absl::StrCat(missing.size() == 1 ? "Rank " : "Ranks ", absl::StrJoin(missing, ", "),
                           " failed to pass monitoredBarrier in ", millis, " ms")),
          origin_);
  }
  for (int rank = 1; rank < size_; ++rank) (void)store.DeleteKey(arrived(rank));
  absl::Status status = store.Set(released, "1");
  if (!status.ok()) Throw(status, origin_);
}

}  // namespace plexus::torch_backend
