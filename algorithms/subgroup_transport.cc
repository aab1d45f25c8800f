#include "algorithms/subgroup_transport.h"

#include <algorithm>
#include <utility>

namespace plexus::algorithms {

SubgroupTransport::SubgroupTransport(Transport& parent, std::vector<int> members, uint32_t phase)
    : parent_(parent), members_(std::move(members)), phase_(phase) {
  const auto it = std::find(members_.begin(), members_.end(), parent.rank());
  rank_ = it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

MessageTag SubgroupTransport::Translate(MessageTag tag) const {
  const uint32_t step = static_cast<uint32_t>(tag.tag & ((1u << kTagStepBits) - 1));
  return {MakeTag(TagOperation(tag.tag), phase_ * kPhaseStride + step), tag.signature};
}

WorkPtr SubgroupTransport::Send(int peer, MessageTag tag, absl::Span<const uint8_t> data,
                                absl::Duration timeout) {
  return parent_.Send(members_[peer], Translate(tag), data, timeout);
}

WorkPtr SubgroupTransport::Recv(int peer, MessageTag tag, absl::Span<uint8_t> data,
                                absl::Duration timeout) {
  return parent_.Recv(members_[peer], Translate(tag), data, timeout);
}

WorkPtr SubgroupTransport::RecvFromAny(MessageTag, absl::Span<uint8_t>, absl::Duration) {
  return Work::Finished(absl::UnimplementedError("receive from any rank of a subgroup"),
                        "recv_any_source", size());
}

void SubgroupTransport::AbortOperation(uint64_t operation, absl::Status reason) {
  parent_.AbortOperation(operation, std::move(reason));
}

void SubgroupTransport::Abort(absl::Status reason) { parent_.Abort(std::move(reason)); }

}  // namespace plexus::algorithms
