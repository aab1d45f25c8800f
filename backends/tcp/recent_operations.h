// What the tcp loop remembers per operation - why it was aborted, the signature this rank runs
// it with - for the most recent operations only: memory stays bounded however long a group
// runs, and the oldest entry goes when a new one comes.
#ifndef PLEXUS_BACKENDS_TCP_RECENT_OPERATIONS_H_
#define PLEXUS_BACKENDS_TCP_RECENT_OPERATIONS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace plexus::tcp {

template <typename Value>
class RecentOperations {
 public:
  explicit RecentOperations(size_t capacity) : capacity_(capacity) {}

  // Remembers `value` for `operation`, forgetting the oldest entry past the capacity. An
  // operation remembered already keeps its first value (and its place): false then.
  bool Remember(uint64_t operation, Value value) {
    if (!values_.emplace(operation, std::move(value)).second) return false;
    order_.push_back(operation);
    if (order_.size() > capacity_) {
      values_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }
  // The value remembered for `operation`, or null.
  const Value* Find(uint64_t operation) const {
    auto it = values_.find(operation);
    return it == values_.end() ? nullptr : &it->second;
  }
  bool Contains(uint64_t operation) const { return values_.contains(operation); }
  size_t size() const { return order_.size(); }

 private:
  const size_t capacity_;
  absl::flat_hash_map<uint64_t, Value> values_;
  std::deque<uint64_t> order_;  // Oldest first.
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_RECENT_OPERATIONS_H_
