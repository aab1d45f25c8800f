#include "base/store/store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace plexus {

absl::Status WaitTimeoutError(absl::Duration timeout, absl::Span<const std::string> keys,
                              absl::string_view detail) {
  return absl::DeadlineExceededError(absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                                                  " waiting for keys [", absl::StrJoin(keys, ", "),
                                                  "]", detail.empty() ? "" : "; ", detail));
}

absl::Status CheckMultiSetSizes(absl::Span<const std::string> keys,
                                absl::Span<const std::string> values) {
  if (keys.size() == values.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("multi_set: ", keys.size(), " keys but ", values.size(), " values"));
}

absl::StatusOr<std::vector<std::string>> MultiGetEach(Store& store,
                                                      absl::Span<const std::string> keys) {
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> value = store.Get(key);
    if (!value.ok()) return value.status();
    values.push_back(*std::move(value));
  }
  return values;
}

absl::Status MultiSetEach(Store& store, absl::Span<const std::string> keys,
                          absl::Span<const std::string> values) {
  absl::Status sizes = CheckMultiSetSizes(keys, values);
  if (!sizes.ok()) return sizes;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::Status status = store.Set(keys[i], values[i]);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status AppendByCompareSet(Store& store, absl::string_view key, absl::string_view value) {
  // Read the current value (absent = ""), then swap in the longer one; a concurrent writer
  // makes the swap fail and the loop read again.
  const absl::Time deadline = absl::Now() + store.timeout();
  while (true) {
    absl::StatusOr<bool> exists = store.Check({std::string(key)});
    if (!exists.ok()) return exists.status();
    std::string current;
    if (*exists) {
      absl::StatusOr<std::string> read = store.Get(key);
      if (!read.ok()) return read.status();
      current = *std::move(read);
    }
    const std::string desired = absl::StrCat(current, value);
    absl::StatusOr<std::string> stored = store.CompareSet(key, current, desired);
    if (!stored.ok()) return stored.status();
    if (*stored == desired) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("append to '", key, "' kept racing other writers"));
    }
  }
}

}  // namespace plexus
