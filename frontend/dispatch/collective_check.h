// CollectiveCheck: ranks compare what they are about to run before a backend that cannot
// notice disagreement itself launches it (NCCL reduces whatever bytes it is given: a count or
// dtype that differs between ranks corrupts results silently or hangs).
//
// Each rank contributes a fixed-size description (per-group check number, op, dtype, element
// count, root, reduction); they are all-gathered over the group's cpu backend (the host side of
// "cpu:tcp,cuda:nccl"), or through the group's store when it has no cpu backend. Any
// difference is FailedPrecondition on every rank, naming each rank's view, and nothing is
// launched. Costs one small host all-gather per collective; PLEXUS_CHECK_COLLECTIVES=0 turns it
// off for backends that would otherwise be checked.
#ifndef PLEXUS_FRONTEND_DISPATCH_COLLECTIVE_CHECK_H_
#define PLEXUS_FRONTEND_DISPATCH_COLLECTIVE_CHECK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/interface/backend.h"
#include "base/core/dtype.h"
#include "base/core/mutex.h"
#include "base/core/reduce_op.h"
#include "base/store/store.h"

namespace plexus {

struct CollectiveDescription {
  absl::string_view op;  // "all_reduce"
  DType dtype = DType::kFloat32;
  int64_t count = -1;  // Elements per rank; -1 when ranks may differ (uneven all_to_all).
  int root = -1;       // -1 when there is none.
  int reduce_op = -1;  // ReduceOpKind, -1 for data movement.
};

class CollectiveCheck {
 public:
  // `host_backend` may be null (then the store is used). `timeout` bounds each exchange.
  CollectiveCheck(std::shared_ptr<Backend> host_backend, std::shared_ptr<Store> store, int rank,
                  int size, absl::Duration timeout);

  // Whether checks run for backends that ask for them (PLEXUS_CHECK_COLLECTIVES, default on).
  static bool EnabledByEnvironment();

  // Collective: exchanges descriptions; OK when all ranks agree.
  absl::Status Verify(const CollectiveDescription& mine);

 private:
  static constexpr int kFields = 6;

  const std::shared_ptr<Backend> host_backend_;
  const std::shared_ptr<Store> store_;
  const int rank_;
  const int size_;
  const absl::Duration timeout_;
  Mutex mu_;  // One check at a time: their order is the issue order.
  int64_t checks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_COLLECTIVE_CHECK_H_
