// InFlightOps: a peer's all-reduces in flight, one per tag, and the number each tag's next
// launch gets in the current epoch. Peers that launch the same tags in the same order within
// an epoch number them alike (instance 0, 1, ... per tag), so the master matches them by
// (group, epoch, tag, instance) even when one peer retried a tag and another did not yet.
// A round of all-reduces run as one operation is recorded under its own tag and under each of
// its all-reduces' tags, so none of them can be launched again while it runs.
// Not thread-safe: the Communicator holds its mutex around every call.
#ifndef PLEXUS_FRONTEND_ELASTIC_IN_FLIGHT_OPS_H_
#define PLEXUS_FRONTEND_ELASTIC_IN_FLIGHT_OPS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

// Op: anything with an `OpKey key`.
template <typename Op>
class InFlightOps {
 public:
  bool Contains(uint64_t tag) const { return ops_.count(tag) != 0; }
  bool empty() const { return ops_.empty(); }
  // Operations in flight (a round counts once).
  size_t size() const { return Distinct().size(); }

  // The instance number of the next launch of `tag` in `epoch` (counting restarts in each new
  // epoch), consumed by this call.
  int64_t NextInstance(uint64_t tag, int64_t epoch) {
    auto& [counted_epoch, next] = instances_[tag];
    if (counted_epoch != epoch) {
      counted_epoch = epoch;
      next = 0;
    }
    return next++;
  }

  // Records `op` under `tag`; false (and nothing recorded) if another is in flight there.
  bool Add(uint64_t tag, std::shared_ptr<Op> op) { return ops_.emplace(tag, std::move(op)).second; }

  // The op in flight under key.tag, if it is the one `key` names (a late report about an earlier
  // instance of the tag finds nothing).
  std::shared_ptr<Op> Find(const OpKey& key) const {
    auto it = ops_.find(static_cast<uint64_t>(key.tag));
    if (it == ops_.end() || !(it->second->key == key)) return nullptr;
    return it->second;
  }

  // Forgets `op` if it is still the one in flight under `tag`.
  void Remove(uint64_t tag, const std::shared_ptr<Op>& op) {
    auto it = ops_.find(tag);
    if (it != ops_.end() && it->second == op) ops_.erase(it);
  }

  // Visits each operation once.
  template <typename Visit>
  void ForEach(Visit visit) {
    for (Op* op : Distinct()) visit(*op);
  }

  // A new connection to the master: its epochs are not the old one's, so numbering restarts.
  void ForgetInstances() { instances_.clear(); }

 private:
  std::set<Op*> Distinct() const {
    std::set<Op*> distinct;
    for (const auto& [tag, op] : ops_) distinct.insert(op.get());
    return distinct;
  }

  std::map<uint64_t, std::shared_ptr<Op>> ops_;                // Tag -> op.
  std::map<uint64_t, std::pair<int64_t, int64_t>> instances_;  // Tag -> (epoch, next).
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_IN_FLIGHT_OPS_H_
