// A collective call as one value: which collective, its tensors, reduction, root or peer,
// splits and timeout. The ProcessGroup builds one per call, validates it, and hands it to the
// backend's Run; a backend runs the kinds it does natively and passes the rest on (to the
// shared algorithm library, for backends over a Transport). docs/design.md has the recipe for
// adding a collective.
#ifndef PLEXUS_BASE_CORE_COLLECTIVE_H_
#define PLEXUS_BASE_CORE_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/core/options.h"
#include "base/core/reduce_op.h"
#include "base/core/tensor.h"

namespace plexus {

// Numbered as in the signatures peers compare (stable: they travel on the wire).
enum class CollectiveKind : uint8_t {
  kBroadcast = 1,
  kReduce = 2,
  kAllReduce = 3,
  kAllReduceCoalesced = 4,
  kAllGather = 5,
  kGather = 6,
  kScatter = 7,
  kReduceScatter = 8,
  kAllToAll = 9,
  kBarrier = 10,
  kAllGatherIntoTensor = 11,
  kReduceScatterTensor = 12,
  kAllToAllSingle = 13,
  kSend = 14,
  kRecv = 15,
  kRecvAnySource = 16,
};

// How a kind's arguments are checked (frontend/dispatch/validate.cc).
enum class CollectiveShape : uint8_t {
  // One tensor, read and written in place, the same size on every rank (broadcast, reduce,
  // all_reduce). A new collective of this shape needs no validation code (a case label).
  kInPlace,
  // Checked by a rule of its own, named after the kind.
  kOwnRule,
};

// What a kind's arguments are, as flags of its row.
enum CollectiveFlag : uint8_t {
  kInPlaceIo = 1 << 0,     // Reads and writes its tensors: `inputs` and `outputs` are the same.
  kReduces = 1 << 1,       // Uses `op`.
  kRooted = 1 << 2,        // Uses `root`.
  kPointToPoint = 1 << 3,  // Uses `peer` and `tag`; not in the collectives' issue order.
  kOutputList = 1 << 4,    // `outputs` is a list (per rank, or any number in place), not one.
  kInputList = 1 << 5,     // `inputs` is a list, not one tensor.
};

// What the dispatcher needs to know of a kind; one row per kind in kCollectiveTraits.
struct CollectiveTraits {
  CollectiveKind kind;
  absl::string_view name;  // torch.distributed's name: "all_reduce" (null-terminated).
  CollectiveShape shape;
  uint8_t flags;  // CollectiveFlag bits.

  bool in_place() const { return flags & kInPlaceIo; }
  bool reduces() const { return flags & kReduces; }
  bool rooted() const { return flags & kRooted; }
  bool point_to_point() const { return flags & kPointToPoint; }
  bool output_list() const { return flags & kOutputList; }
  bool input_list() const { return flags & kInputList; }
};

inline constexpr CollectiveTraits kCollectiveTraits[] = {
    {CollectiveKind::kBroadcast, "broadcast", CollectiveShape::kInPlace, kInPlaceIo | kRooted},
    {CollectiveKind::kReduce, "reduce", CollectiveShape::kInPlace, kInPlaceIo | kReduces | kRooted},
    {CollectiveKind::kAllReduce, "all_reduce", CollectiveShape::kInPlace, kInPlaceIo | kReduces},
    {CollectiveKind::kAllReduceCoalesced, "all_reduce_coalesced", CollectiveShape::kOwnRule,
     kInPlaceIo | kReduces | kOutputList | kInputList},
    {CollectiveKind::kAllGather, "all_gather", CollectiveShape::kOwnRule, kOutputList},
    {CollectiveKind::kGather, "gather", CollectiveShape::kOwnRule, kRooted | kOutputList},
    {CollectiveKind::kScatter, "scatter", CollectiveShape::kOwnRule, kRooted | kInputList},
    {CollectiveKind::kReduceScatter, "reduce_scatter", CollectiveShape::kOwnRule,
     kReduces | kInputList},
    {CollectiveKind::kAllToAll, "all_to_all", CollectiveShape::kOwnRule, kOutputList | kInputList},
    {CollectiveKind::kBarrier, "barrier", CollectiveShape::kOwnRule, 0},
    {CollectiveKind::kAllGatherIntoTensor, "all_gather_into_tensor", CollectiveShape::kOwnRule, 0},
    {CollectiveKind::kReduceScatterTensor, "reduce_scatter_tensor", CollectiveShape::kOwnRule,
     kReduces},
    {CollectiveKind::kAllToAllSingle, "all_to_all_single", CollectiveShape::kOwnRule, 0},
    {CollectiveKind::kSend, "send", CollectiveShape::kOwnRule, kPointToPoint},
    {CollectiveKind::kRecv, "recv", CollectiveShape::kOwnRule, kPointToPoint},
    {CollectiveKind::kRecvAnySource, "recv_any_source", CollectiveShape::kOwnRule, kPointToPoint},
};

// Rows are in kind order from 1, one per kind, so the number indexes the table.
inline constexpr CollectiveKind kLastCollectiveKind = CollectiveKind::kRecvAnySource;
constexpr bool TraitsInKindOrder() {
  for (size_t i = 0; i < std::size(kCollectiveTraits); ++i) {
    if (static_cast<size_t>(kCollectiveTraits[i].kind) != i + 1) return false;
  }
  return std::size(kCollectiveTraits) == static_cast<size_t>(kLastCollectiveKind);
}
static_assert(TraitsInKindOrder(),
              "kCollectiveTraits needs one row per CollectiveKind, in kind order, and "
              "kLastCollectiveKind the last kind");

// The row for `kind`; a number that is no kind gets a row named "unknown".
inline const CollectiveTraits& TraitsOf(CollectiveKind kind) {
  static constexpr CollectiveTraits kUnknown = {CollectiveKind{0}, "unknown",
                                                CollectiveShape::kOwnRule, 0};
  const size_t index = static_cast<size_t>(kind) - 1;
  return index < std::size(kCollectiveTraits) ? kCollectiveTraits[index] : kUnknown;
}
inline absl::string_view CollectiveName(CollectiveKind kind) { return TraitsOf(kind).name; }

// One call. The spans are views of the caller's arguments, valid while Run is on the stack: a
// backend that runs the call later copies what it keeps. Which fields a kind uses:
//   in place (broadcast, reduce, all_reduce, all_reduce_coalesced): inputs == outputs;
//   all_gather, gather (root only), all_to_all: outputs is the list, inputs the one input
//     (all_to_all: one per peer);
//   all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single: one of each;
//   scatter, reduce_scatter: outputs one tensor, inputs the list (scatter: root only);
//   send: inputs; recv, recv_any_source: outputs; barrier: neither.
struct Collective {
  CollectiveKind kind = CollectiveKind::kBarrier;
  absl::Span<const Tensor> inputs;
  absl::Span<const Tensor> outputs;
  ReduceOp op = ReduceOpKind::kSum;
  int root = 0;  // Group rank, for rooted kinds.
  int peer = 0;  // Group rank, for point-to-point kinds.
  int tag = 0;
  // all_to_all_single: first-dimension rows per peer; always explicit once validated.
  absl::Span<const int64_t> output_splits;
  absl::Span<const int64_t> input_splits;
  absl::Duration timeout = kDefaultTimeout;
  bool blocking = false;  // As the options structs' flag (options.h).

  // The one tensor of an in-place, send or receive call.
  const Tensor& tensor() const { return outputs.empty() ? inputs[0] : outputs[0]; }
  const Tensor& input() const { return inputs[0]; }
  const Tensor& output() const { return outputs[0]; }
  const CollectiveTraits& traits() const { return TraitsOf(kind); }
  absl::string_view name() const { return CollectiveName(kind); }

  // A call of `kind` on `tensors` in place.
  static Collective InPlace(CollectiveKind kind, absl::Span<const Tensor> tensors) {
    Collective call;
    call.kind = kind;
    call.inputs = tensors;
    call.outputs = tensors;
    return call;
  }
  static Collective Of(CollectiveKind kind, absl::Span<const Tensor> outputs,
                       absl::Span<const Tensor> inputs) {
    Collective call;
    call.kind = kind;
    call.inputs = inputs;
    call.outputs = outputs;
    return call;
  }

  // The call with an options struct's fields.
  Collective& With(const BroadcastOptions& o) { return Set(o.timeout, o.blocking, o.root_rank); }
  Collective& With(const ReduceOptions& o) { return Set(o.timeout, o.blocking, o.root_rank, o.op); }
  Collective& With(const AllReduceOptions& o) { return Set(o.timeout, o.blocking, 0, o.op); }
  Collective& With(const AllReduceCoalescedOptions& o) {
    return Set(o.timeout, o.blocking, 0, o.op);
  }
  Collective& With(const AllGatherOptions& o) { return Set(o.timeout, o.blocking); }
  Collective& With(const GatherOptions& o) { return Set(o.timeout, o.blocking, o.root_rank); }
  Collective& With(const ScatterOptions& o) { return Set(o.timeout, o.blocking, o.root_rank); }
  Collective& With(const ReduceScatterOptions& o) { return Set(o.timeout, o.blocking, 0, o.op); }
  Collective& With(const AllToAllOptions& o) { return Set(o.timeout, o.blocking); }
  Collective& With(const BarrierOptions& o) { return Set(o.timeout, o.blocking); }
  Collective& With(const SendOptions& o) { return SetPeer(o.timeout, o.tag); }
  Collective& With(const RecvOptions& o) { return SetPeer(o.timeout, o.tag); }

 private:
  Collective& Set(absl::Duration call_timeout, bool call_blocking, int call_root = 0,
                  ReduceOp call_op = ReduceOpKind::kSum) {
    timeout = call_timeout;
    blocking = call_blocking;
    root = call_root;
    op = call_op;
    return *this;
  }
  Collective& SetPeer(absl::Duration call_timeout, int call_tag) {
    timeout = call_timeout;
    tag = call_tag;
    return *this;
  }
};

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_COLLECTIVE_H_
