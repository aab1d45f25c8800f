// NativePlan: one collective as a vendor's library runs it (gloo, mpi, nccl), planned from the
// call as a value (base/core/collective.h). Each native backend plans every kind with functions
// of one shape, `absl::StatusOr<NativePlan<Run>> Plan<Kind>(const Collective&, int rank, int
// size)`, reached through one switch over the kind (`PlanGlooCall`, `PlanMpiCall`,
// `PlanNcclCall`); only `Run`, what the library's call needs, differs. A kind or dtype the
// library lacks is NotRunError (backend.h): gloo and mpi run that call on algorithms/ instead,
// nccl fails it.
#ifndef PLEXUS_BACKENDS_COMMON_NATIVE_PLAN_H_
#define PLEXUS_BACKENDS_COMMON_NATIVE_PLAN_H_

#include <cstdint>
#include <utility>

#include "absl/time/time.h"
#include "backends/common/nominal_traffic.h"
#include "base/core/collective.h"
#include "base/core/dtype.h"

namespace plexus {

template <typename Run>
struct NativePlan {
  const char* op;       // The call's name in errors and on its Work.
  CollectiveKind kind;  // With dtype and count: what the executor checks peers agree on.
  DType dtype;
  int64_t count;
  absl::Duration timeout;
  nominal_traffic::Traffic traffic;  // Counted on the Work once it succeeded.
  Run run;

  // The plan of `call` queued as `kind` with `dtype` and `count`: named by the call and
  // bounded by its timeout.
  template <typename Body>
  static NativePlan Of(const Collective& call, CollectiveKind kind, DType dtype, int64_t count,
                       nominal_traffic::Traffic traffic, Body&& run) {
    return {call.name().data(),          kind, dtype, count, call.timeout, traffic,
            Run(std::forward<Body>(run))};
  }
};

}  // namespace plexus

#endif  // PLEXUS_BACKENDS_COMMON_NATIVE_PLAN_H_
