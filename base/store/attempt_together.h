// AttemptTogether: runs one step on every rank of a group (connecting a full mesh, say) and
// retries it, on every rank at once, while any rank's try fails. Each try gets a fresh key
// space of the store, and the ranks vote on its outcome, so a rank whose own try succeeded
// still starts over when a peer's failed: the mesh either forms everywhere or is retried
// everywhere. Meant for steps that fail fast under load (a connection reset while the peers
// dial each other); a try that blocks until its deadline leaves no time for another.
#ifndef PLEXUS_BASE_STORE_ATTEMPT_TOGETHER_H_
#define PLEXUS_BASE_STORE_ATTEMPT_TOGETHER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/store/store.h"

namespace plexus {

struct AttemptTogetherOptions {
  int rank = 0;
  int size = 1;
  int max_tries = 3;
  absl::Time deadline = absl::InfiniteFuture();
  // Names the step in errors and in the retry warning ("gloo: connecting rank 1 of 3").
  std::string what;
};

// Calls `step(try_store, try_index)` until every rank's call in the same try returned OK, up to
// options.max_tries tries or options.deadline. Returns OK when a try succeeded everywhere;
// otherwise this rank's own last error, or, when this rank succeeded, Unavailable naming the
// ranks whose try failed and the first one's reason. The step must leave nothing behind when
// it fails or when the try is abandoned (a later try starts from scratch).
absl::Status AttemptTogether(
    const std::shared_ptr<Store>& store, const AttemptTogetherOptions& options,
    const std::function<absl::Status(std::shared_ptr<Store> try_store, int try_index)>& step);

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_ATTEMPT_TOGETHER_H_
