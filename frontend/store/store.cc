#include "frontend/store/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace plexus {

absl::Status WaitTimeoutError(absl::Duration timeout, absl::Span<const std::string> keys,
                              absl::string_view detail) {
  return absl::DeadlineExceededError(absl::StrCat(
      "timed out after ", absl::FormatDuration(timeout), " waiting for keys [",
      absl::StrJoin(keys, ", "), "]", detail.empty() ? "" : "; ", detail));
}

absl::Status CheckMultiSetSizes(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values) {
  if (keys.size() == values.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("multi_set: ", keys.size(), " keys but ",
                                                 values.size(), " values"));
}

}  // namespace plexus
