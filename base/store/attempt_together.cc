#include "base/store/attempt_together.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/core/logging.h"
#include "base/store/prefix_store.h"

namespace plexus {
namespace {

// A vote carries "" for success or the failure's text, cut short: every rank reads them all.
constexpr size_t kMaxReasonBytes = 512;

std::string VoteOf(const absl::Status& status) {
  if (status.ok()) return "";
  std::string reason = status.ToString();
  if (reason.empty()) reason = "failed";
  if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
  return reason;
}

}  // namespace

absl::Status AttemptTogether(
    const std::shared_ptr<Store>& store, const AttemptTogetherOptions& options,
    const std::function<absl::Status(std::shared_ptr<Store> try_store, int try_index)>& step) {
  std::vector<std::string> keys;
  for (int rank = 0; rank < options.size; ++rank) keys.push_back(absl::StrCat("vote/", rank));
  absl::Status last;
  for (int index = 0; index < options.max_tries; ++index) {
    auto try_store = std::make_shared<PrefixStore>(absl::StrCat("try-", index), store);
    const absl::Status own = step(try_store, index);
    absl::Status voted = try_store->Set(keys[options.rank], VoteOf(own));
    // Past the deadline the votes may still all be in: look once instead of waiting.
    const absl::Duration left = std::max(options.deadline - absl::Now(), absl::Milliseconds(1));
    if (voted.ok()) voted = try_store->Wait(keys, left);
    absl::StatusOr<std::vector<std::string>> votes =
        voted.ok() ? try_store->MultiGet(keys) : absl::StatusOr<std::vector<std::string>>(voted);
    if (!votes.ok()) {
      // The vote itself failed: the peers cannot agree, so neither outcome is safe to keep.
      return absl::Status(
          votes.status().code(),
          absl::StrCat(options.what, ": try ", index + 1, " of ", options.max_tries,
                       (own.ok() ? " succeeded here" : " failed here"),
                       " but the ranks' votes did not all arrive: ", votes.status().message()));
    }
    std::vector<std::string> failed;
    std::string first_reason;
    for (int rank = 0; rank < options.size; ++rank) {
      if ((*votes)[rank].empty()) continue;
      failed.push_back(absl::StrCat(rank));
      if (first_reason.empty()) first_reason = absl::StrCat("rank ", rank, ": ", (*votes)[rank]);
    }
    if (failed.empty()) return absl::OkStatus();
    const std::string summary =
        absl::StrCat(options.what, ": try ", index + 1, " of ", options.max_tries,
                     " failed on rank(s) ", absl::StrJoin(failed, ", "), " (", first_reason, ")");
    last = own.ok() ? absl::UnavailableError(summary) : own;
    if (index + 1 == options.max_tries || options.deadline <= absl::Now()) break;
    Log(LogLevel::kWarning, absl::StrCat(summary, "; every rank tries again"));
  }
  return last;
}

}  // namespace plexus
