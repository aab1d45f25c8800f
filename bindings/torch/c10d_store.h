// C10dStore: a plexus Store over a torch c10d::Store (the PrefixStore torch hands a backend's
// creator), called directly in C++ with no Python and no GIL.
//
// torch's stores differ from plexus's in three ways this class hides: a zero timeout means "no
// timeout" to them (here it is the shortest wait, so an expired deadline never waits forever);
// they have no multi-key or append operations in 1.13 (done key by key; Append with a
// compare-set loop, so it stays atomic); their errors are exceptions (returned as statuses,
// DeadlineExceeded when the message speaks of a timeout, Unavailable otherwise).
#ifndef PLEXUS_BINDINGS_TORCH_C10D_STORE_H_
#define PLEXUS_BINDINGS_TORCH_C10D_STORE_H_

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "base/store/store.h"

namespace plexus::torch_backend {

class C10dStore : public Store {
 public:
  // `store`'s own timeout becomes this store's timeout().
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);

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
  // Not atomic across keys: torch 1.13's stores have no multi-set.
  absl::Status MultiSet(absl::Span<const std::string> keys,
                        absl::Span<const std::string> values) override;
  absl::Status Append(absl::string_view key, absl::string_view value) override;

  const c10::intrusive_ptr<c10d::Store>& torch_store() const { return store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_C10D_STORE_H_
