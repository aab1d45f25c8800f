// HashStore: a Store in this process's memory, for threads of one process and for tests.
#ifndef PLEXUS_BASE_STORE_HASH_STORE_H_
#define PLEXUS_BASE_STORE_HASH_STORE_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/core/mutex.h"
#include "base/store/key_value_table.h"
#include "base/store/store.h"

namespace plexus {

class HashStore : public Store {
 public:
  explicit HashStore(absl::Duration timeout = kDefaultStoreTimeout) : Store(timeout) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(absl::string_view key, absl::string_view expected,
                                         absl::string_view desired) override;
  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override;
  using Store::Wait;
  absl::StatusOr<bool> Check(absl::Span<const std::string> keys) override;
  absl::StatusOr<bool> DeleteKey(absl::string_view key) override;
  absl::StatusOr<int64_t> NumKeys() override;
  absl::StatusOr<std::vector<std::string>> MultiGet(absl::Span<const std::string> keys) override;
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  absl::Status Append(absl::string_view key, absl::string_view value) override;

 private:
  // Waits on `lock` (of mu_) until all keys exist or `timeout` passes.
  absl::Status AwaitKeys(UniqueLock& lock, absl::Span<const std::string> keys,
                         absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies a mutation under the lock and wakes waiters.
  template <typename Fn>
  auto Mutate(Fn mutate);

  Mutex mu_;
  std::condition_variable changed_;
  KeyValueTable table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_HASH_STORE_H_
