// SubgroupTransport: some ranks of a parent Transport seen as a group of their own, so the
// flat algorithms can run inside one host, or among one leader per host, as steps of a
// hierarchical collective. Members are numbered by their order in `members`; every message
// keeps the parent operation and carries `phase` in the high bits of its step, so phases over
// overlapping members never match each other's messages.
#ifndef PLEXUS_ALGORITHMS_SUBGROUP_TRANSPORT_H_
#define PLEXUS_ALGORITHMS_SUBGROUP_TRANSPORT_H_

#include <cstdint>
#include <vector>

#include "base/transport/transport.h"

namespace plexus::algorithms {

class SubgroupTransport : public Transport {
 public:
  // Steps of the flat algorithms stay below this; the phase goes above it.
  static constexpr uint32_t kPhaseStride = uint32_t{1} << 20;

  // `members` must include the parent's own rank; `phase` < 16.
  SubgroupTransport(Transport& parent, std::vector<int> members, uint32_t phase);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  WorkPtr Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
               absl::Duration timeout) override;
  WorkPtr Recv(int peer, MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  // Not used by the flat algorithms; fails with Unimplemented.
  WorkPtr RecvFromAny(MessageTag tag, absl::Span<uint8_t> data, absl::Duration timeout) override;
  // Both end the operation on the whole parent group: its collective is the same one.
  void AbortOperation(uint64_t operation, absl::Status reason) override;
  void Abort(absl::Status reason) override;

 private:
  MessageTag Translate(MessageTag tag) const;

  Transport& parent_;
  const std::vector<int> members_;
  const uint32_t phase_;
  int rank_ = -1;
};

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_SUBGROUP_TRANSPORT_H_
