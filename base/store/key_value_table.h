// KeyValueTable: the in-memory map behind HashStore, FileStore's replayed view and the TCPStore
// server, with c10d's value semantics. Not thread-safe: each owner supplies its own locking.
#ifndef PLEXUS_BASE_STORE_KEY_VALUE_TABLE_H_
#define PLEXUS_BASE_STORE_KEY_VALUE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace plexus {

class KeyValueTable {
 public:
  void Set(absl::string_view key, absl::string_view value);
  // nullptr when absent. The pointer is invalidated by the next mutation.
  const std::string* Find(absl::string_view key) const;
  absl::StatusOr<int64_t> Add(absl::string_view key, int64_t delta);
  std::string CompareSet(absl::string_view key, absl::string_view expected,
                         absl::string_view desired);
  bool Delete(absl::string_view key);
  void Append(absl::string_view key, absl::string_view value);
  bool ContainsAll(absl::Span<const std::string> keys) const;
  // The subset of `keys` that is absent, in order.
  std::vector<std::string> Missing(absl::Span<const std::string> keys) const;
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};

}  // namespace plexus

#endif  // PLEXUS_BASE_STORE_KEY_VALUE_TABLE_H_
