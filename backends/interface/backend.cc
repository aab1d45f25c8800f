#include "backends/interface/backend.h"

#include <utility>
#include <vector>

namespace plexus {

WorkPtr Backend::BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                   const BatchOptions& options) {
  std::vector<WorkPtr> works;
  int world_size = 0;
  for (const PointToPointOp& op : ops) {
    const bool send = op.kind == PointToPointOp::Kind::kSend;
    Collective call;
    call.kind = send ? CollectiveKind::kSend : CollectiveKind::kRecv;
    (send ? call.inputs : call.outputs) = {&op.tensor, 1};
    call.peer = op.peer;
    call.tag = op.tag;
    call.timeout = options.timeout;
    WorkPtr work = Run(call);
    world_size = work->stats().world_size;
    works.push_back(std::move(work));
  }
  return WhenAll(std::move(works), "batch_isend_irecv", world_size);
}

absl::Status NotRunError(absl::string_view backend, const Collective& call, absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("backend '", backend, "' does not run ", call.name(),
                                               why.empty() ? "" : ": ", why));
}

}  // namespace plexus
