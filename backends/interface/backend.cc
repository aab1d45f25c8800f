#include "backends/interface/backend.h"

#include <utility>
#include <vector>

namespace plexus {

WorkPtr Backend::BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                   const BatchOptions& options) {
  std::vector<WorkPtr> works;
  int world_size = 0;
  for (const PointToPointOp& op : ops) {
    WorkPtr work = op.kind == PointToPointOp::Kind::kSend
                       ? Send(op.tensor, op.peer, SendOptions{op.tag, options.timeout})
                       : Recv(op.tensor, op.peer, RecvOptions{op.tag, options.timeout});
    world_size = work->stats().world_size;
    works.push_back(std::move(work));
  }
  return WhenAll(std::move(works), "batch_isend_irecv", world_size);
}

}  // namespace plexus
