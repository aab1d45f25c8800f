// Argument checks shared by every backend: the ProcessGroup runs them before dispatching, so
// bad input is an InvalidArgument naming the op, the rank, the sizes and the dtype, and no
// backend ever sees it. Each function takes the caller's rank and the group size.
#ifndef PLEXUS_FRONTEND_DISPATCH_VALIDATE_H_
#define PLEXUS_FRONTEND_DISPATCH_VALIDATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/core/collective.h"
#include "base/core/options.h"
#include "base/core/tensor.h"

namespace plexus {

struct GroupPosition {
  int rank;
  int size;
};

// Checks `call` by its kind's rule. all_to_all_single's empty split lists become equal splits
// of the first dimension, held in `filled`, which must outlive the call's use.
struct FilledSplits {
  std::vector<int64_t> output;
  std::vector<int64_t> input;
};
absl::Status ValidateCollective(GroupPosition at, Collective& call, FilledSplits& filled);

// The rules by shape and kind.
absl::Status ValidateInPlace(GroupPosition at, const Collective& call);
absl::Status ValidateAllReduceCoalesced(GroupPosition at, absl::Span<const Tensor> tensors,
                                        const ReduceOp& op);
absl::Status ValidateAllGather(GroupPosition at, absl::Span<const Tensor> outputs,
                               const Tensor& input);
absl::Status ValidateAllGatherIntoTensor(GroupPosition at, const Tensor& output,
                                         const Tensor& input);
absl::Status ValidateGather(GroupPosition at, absl::Span<const Tensor> outputs, const Tensor& input,
                            int root);
absl::Status ValidateScatter(GroupPosition at, const Tensor& output,
                             absl::Span<const Tensor> inputs, int root);
absl::Status ValidateReduceScatter(GroupPosition at, const Tensor& output,
                                   absl::Span<const Tensor> inputs, const ReduceOp& op);
absl::Status ValidateReduceScatterTensor(GroupPosition at, const Tensor& output,
                                         const Tensor& input, const ReduceOp& op);
absl::Status ValidateAllToAll(GroupPosition at, absl::Span<const Tensor> outputs,
                              absl::Span<const Tensor> inputs);
// Fills empty split lists with equal splits of the first dimension, then checks them.
absl::Status ValidateAllToAllSingle(GroupPosition at, const Tensor& output, const Tensor& input,
                                    std::vector<int64_t>& output_split_sizes,
                                    std::vector<int64_t>& input_split_sizes);
absl::Status ValidatePeer(GroupPosition at, absl::string_view op, int peer);
absl::Status ValidatePointToPoint(GroupPosition at, absl::string_view op, const Tensor& tensor,
                                  int peer, int tag);

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_VALIDATE_H_
