// PrefixStore: a namespace inside another Store. Every key is stored as "<prefix>/<key>", so
// groups and backends can share one store without colliding. Shares the base store's timeout
// at construction; NumKeys() reports the base store's total, as in c10d.
#ifndef PLEXUS_BASE_STORE_PREFIX_STORE_H_
#define PLEXUS_BASE_STORE_PREFIX_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "base/store/store.h"

namespace plexus {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

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

  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }
  std::string RefusalReport() const override { return base_->RefusalReport(); }
  absl::StatusOr<int64_t> ServerUnixNanos() override { return base_->ServerUnixNanos(); }

 private:
  std::string Prefixed(absl::string_view key) const;
  std::vector<std::string> Prefixed(absl::Span<const std::string> keys) const;
  // Rewrites the base store's error to name this store's keys.
  absl::Status Unprefixed(absl::Status status) const;
  const std::string prefix_;
  const std::shared_ptr<Store> base_;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_PREFIX_STORE_H_
