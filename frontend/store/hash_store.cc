#include "frontend/store/hash_store.h"

#include "frontend/core/status_macros.h"

namespace plexus {

absl::Status HashStore::AwaitKeys(absl::Span<const std::string> keys, absl::Duration timeout) {
  auto ready = [this, keys]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return table_.ContainsAll(keys);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return WaitTimeoutError(timeout, table_.Missing(keys));
  }
  return absl::OkStatus();
}

absl::Status HashStore::Set(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&mu_);
  table_.Set(key, value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> HashStore::Get(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  const std::string keys[] = {std::string(key)};
  RETURN_IF_ERROR(AwaitKeys(keys, timeout()));
  return *table_.Find(key);
}

absl::StatusOr<int64_t> HashStore::Add(absl::string_view key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  return table_.Add(key, delta);
}

absl::StatusOr<std::string> HashStore::CompareSet(absl::string_view key,
                                                  absl::string_view expected,
                                                  absl::string_view desired) {
  absl::MutexLock lock(&mu_);
  return table_.CompareSet(key, expected, desired);
}

absl::Status HashStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return AwaitKeys(keys, timeout);
}

absl::StatusOr<bool> HashStore::Check(absl::Span<const std::string> keys) {
  absl::MutexLock lock(&mu_);
  return table_.ContainsAll(keys);
}

absl::StatusOr<bool> HashStore::DeleteKey(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  return table_.Delete(key);
}

absl::StatusOr<int64_t> HashStore::NumKeys() {
  absl::MutexLock lock(&mu_);
  return table_.size();
}

absl::StatusOr<std::vector<std::string>> HashStore::MultiGet(
    absl::Span<const std::string> keys) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(AwaitKeys(keys, timeout()));
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(*table_.Find(key));
  return values;
}

absl::Status HashStore::MultiSet(absl::Span<const std::string> keys,
                                 absl::Span<const std::string> values) {
  RETURN_IF_ERROR(CheckMultiSetSizes(keys, values));
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) table_.Set(keys[i], values[i]);
  return absl::OkStatus();
}

absl::Status HashStore::Append(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&mu_);
  table_.Append(key, value);
  return absl::OkStatus();
}

}  // namespace plexus
