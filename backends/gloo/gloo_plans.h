// The Gloo calls GlooBackend makes for each collective kind, planned from the call as a value
// (backends/common/native_plan.h). Gloo's own algorithms run all_reduce, reduce, broadcast,
// all_gather (both forms), gather, scatter, all_to_all_single and barrier; every other kind is
// NotRunError, and algorithms/ runs it over GlooTransport.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_PLANS_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_PLANS_H_

#include <functional>

#include "absl/status/statusor.h"
#include "algorithms/collective_context.h"
#include "backends/common/native_plan.h"
#include "backends/gloo/gloo_native.h"
#include "base/core/collective.h"

namespace plexus::gloo_backend {

// A plan's run: Gloo's call on the worker, with its tag and time left, and the executor's
// context (scratch). It throws Gloo's exceptions; GlooBackend turns them into statuses.
using GlooPlan =
    NativePlan<std::function<void(const gloo_native::Call&, algorithms::CollectiveContext&)>>;

// The plan for `call` on `rank` of a group of `size`.
absl::StatusOr<GlooPlan> PlanGlooCall(const Collective& call, int rank, int size);

}  // namespace plexus::gloo_backend

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_PLANS_H_
