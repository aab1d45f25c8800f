// The catalog of schedules: one row per algorithm a collective can be told to run, with its name,
// what it does, the function that runs it and the message sizes it serves by default. The
// algorithm table's defaults and the names PLEXUS_ALGO accepts come from here, the entry points
// (AllReduceInPlace, Barrier) run the chosen row's function, and tools/algorithm_doc prints the
// rows as docs/algorithm_names.md. A new algorithm is one row here and one file beside it.
#ifndef PLEXUS_ALGORITHMS_ALGORITHM_CATALOG_H_
#define PLEXUS_ALGORITHMS_ALGORITHM_CATALOG_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "algorithms/collective_context.h"
#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::algorithms {

class AlgorithmTable;

// What a schedule chosen by name runs on; each uses the fields of its collective.
struct ScheduleCall {
  CollectiveContext& ctx;
  const AlgorithmTable& table;  // "hier" picks its leaders' flat schedule from it.
  SharedArena* arena;           // The group's usable shared-memory arena, or null.
  void* data = nullptr;         // All-reduce: the buffer, reduced in place with the kernel op.
  int64_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOpKind op = ReduceOpKind::kSum;
};
using Schedule = absl::Status (*)(const ScheduleCall&);

inline constexpr uint64_t kNoSizeLimit = std::numeric_limits<uint64_t>::max();

struct Algorithm {
  // The ranges that may choose it: a collective ("broadcast"), or one of the all-reduce and
  // barrier variants for groups on one host ("..._same_host") or over hosts ("..._multi_host").
  const char* collective;
  const char* name;  // As PLEXUS_ALGO spells it.
  const char* description;
  // Null where the collective has this one schedule, which the executor calls directly.
  Schedule run;
  bool needs_arena;  // Runs in the shared-memory arena: only chosen while the arena is usable.
  // The message sizes it serves by default, [from, to); from == to: only when told to.
  uint64_t default_from;
  uint64_t default_to;
  // All-reduce: keeps the buffer's input where the context asks itself (keep_originals.h);
  // otherwise AllReduceInPlace copies it all before the schedule runs.
  bool keeps_originals = false;
};

// Every row, grouped by collective; each collective's first row serves sizes nobody claims.
const std::vector<Algorithm>& AlgorithmCatalog();
// The row of `name` for `collective`, or null.
const Algorithm* FindAlgorithm(absl::string_view collective, absl::string_view name);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_ALGORITHM_CATALOG_H_
