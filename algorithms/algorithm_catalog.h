// The catalog of schedules: one row per algorithm a collective can be told to run, with its name,
// what it does, the function that runs it and the message sizes it serves by default. The
// algorithm table's defaults and the names PLEXUS_ALGO accepts come from here, the entry points
// (RunSchedule, AllReduceInPlace) run the chosen row's function, and tools/algorithm_doc prints
// the rows as docs/algorithm_names.md. A new algorithm, for any collective, is one row here and
// one file beside it.
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

// A message of `bytes` at `data`: a block of a gather, scatter or all-to-all.
struct ByteBlock {
  uint8_t* data;
  size_t bytes;
};

// What a schedule chosen from the table runs on. Every collective's row takes this one shape;
// each collective uses the fields named after it (the executor fills them, runs the row the
// table picks, and does what is the collective's own around it: scaling, packing, copying this
// rank's block in).
struct ScheduleCall {
  CollectiveContext& ctx;
  const AlgorithmTable& table;  // "hier" picks its leaders' flat schedule from it.
  SharedArena* arena;           // The group's usable shared-memory arena, or null.
  // all_reduce: the buffer, reduced in place with the kernel `op`; reduce: likewise, the result
  // at `root` only; reduce_scatter: size() blocks of `count` elements, block i ends reduced at
  // rank i (the others are left as the schedule leaves them); broadcast: the root's `count`
  // bytes (dtype kUInt8) reach every rank.
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOpKind op = ReduceOpKind::kSum;
  int root = 0;  // broadcast, reduce, gather, scatter.
  // all_gather: rank i's block, this rank's filled on entry, every one filled on return.
  // gather: `own` reaches the root's blocks[own rank]. scatter: the root's blocks[i] reaches
  // rank i's `own`. all_to_all: blocks[i] goes to rank i, received[i] comes from it.
  std::vector<ByteBlock> blocks = {};
  ByteBlock own = {nullptr, 0};
  std::vector<ByteBlock> received = {};
};
using Schedule = absl::Status (*)(const ScheduleCall&);

inline constexpr uint64_t kNoSizeLimit = std::numeric_limits<uint64_t>::max();

struct Algorithm {
  // The ranges that may choose it: a collective ("broadcast"), or its variant for groups on one
  // host with a usable arena ("..._same_host") or over hosts with neighbours ("..._multi_host"),
  // where the catalog has rows for one (RunSchedule picks the ranges).
  const char* collective;
  const char* name;  // As PLEXUS_ALGO spells it.
  const char* description;
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
