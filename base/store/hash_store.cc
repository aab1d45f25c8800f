#include "base/store/hash_store.h"

#include "base/core/deadline.h"
#include "base/core/status_macros.h"

namespace plexus {

template <typename Fn>
auto HashStore::Mutate(Fn mutate) {
  MutexLock lock(mu_);
  auto result = mutate();
  changed_.notify_all();
  return result;
}

absl::Status HashStore::AwaitKeys(UniqueLock& lock, absl::Span<const std::string> keys,
                                  absl::Duration timeout) {
  const auto deadline = SteadyDeadline(timeout);
  if (!changed_.wait_until(lock, deadline, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return table_.ContainsAll(keys);
      })) {
    return WaitTimeoutError(timeout, table_.Missing(keys));
  }
  return absl::OkStatus();
}

absl::Status HashStore::Set(absl::string_view key, absl::string_view value) {
  return Mutate([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    table_.Set(key, value);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> HashStore::Get(absl::string_view key) {
  UniqueLock lock(mu_);
  const std::string keys[] = {std::string(key)};
  RETURN_IF_ERROR(AwaitKeys(lock, keys, timeout()));
  return *table_.Find(key);
}

absl::StatusOr<int64_t> HashStore::Add(absl::string_view key, int64_t delta) {
  return Mutate([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return table_.Add(key, delta); });
}

absl::StatusOr<std::string> HashStore::CompareSet(absl::string_view key, absl::string_view expected,
                                                  absl::string_view desired) {
  return Mutate([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return table_.CompareSet(key, expected, desired);
  });
}

absl::Status HashStore::Wait(absl::Span<const std::string> keys, absl::Duration timeout) {
  UniqueLock lock(mu_);
  return AwaitKeys(lock, keys, timeout);
}

absl::StatusOr<bool> HashStore::Check(absl::Span<const std::string> keys) {
  MutexLock lock(mu_);
  return table_.ContainsAll(keys);
}

absl::StatusOr<bool> HashStore::DeleteKey(absl::string_view key) {
  MutexLock lock(mu_);
  return table_.Delete(key);
}

absl::StatusOr<int64_t> HashStore::NumKeys() {
  MutexLock lock(mu_);
  return table_.size();
}

absl::StatusOr<std::vector<std::string>> HashStore::MultiGet(absl::Span<const std::string> keys) {
  UniqueLock lock(mu_);
  RETURN_IF_ERROR(AwaitKeys(lock, keys, timeout()));
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(*table_.Find(key));
  return values;
}

absl::Status HashStore::MultiSet(absl::Span<const std::string> keys,
                                 absl::Span<const std::string> values) {
  RETURN_IF_ERROR(CheckMultiSetSizes(keys, values));
  return Mutate([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < keys.size(); ++i) table_.Set(keys[i], values[i]);
    return absl::OkStatus();
  });
}

absl::Status HashStore::Append(absl::string_view key, absl::string_view value) {
  return Mutate([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    table_.Append(key, value);
    return absl::OkStatus();
  });
}

}  // namespace plexus
