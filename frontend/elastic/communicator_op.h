// Communicator::Op: one elastic operation in flight, as the Communicator's files share it. An
// operation is one all-reduce, or a round of all_reduce_multiple_with_retry's all-reduces that
// every member runs back to back in consecutive shared-memory turns and the master decides as
// one (one start, one turn, one report and one outcome for the round instead of one each).
#ifndef PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_OP_H_
#define PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_OP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/transport/transport.h"
#include "base/work/work.h"
#include "frontend/elastic/backup_pool.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/elastic_types.h"
#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

// One all-reduce of an operation.
struct Communicator::OpPart {
  ReduceDescriptor descriptor;
  const void* send = nullptr;  // Read at launch only (recv holds the input from then on).
  void* recv = nullptr;
  size_t bytes = 0;
  // recv's contents before the call, for a failure to put back: in the part's own backup, or
  // in the caller's buffer (all_reduce_multiple_with_retry's, kept across attempts). Filled as
  // the data phase overwrites recv (keep_originals.h): the first originals_kept bytes are there,
  // recv still holds the rest.
  BackupPool::Buffer backup;
  uint8_t* originals = nullptr;
  size_t originals_kept = 0;
  bool caller_originals = false;  // Then completed when the op ends, for the next attempt.
};

struct Communicator::Op {
  OpKey key;
  std::vector<OpPart> parts;  // One, or a round's (each in its own turn, in this order).
  bool round() const { return parts.size() > 1; }
  std::string description;  // For errors and the master: DescribeReduce or DescribeRound.
  WorkPtr work;
  // Set by the master's outcome (guarded by the communicator's mu_).
  bool decided = false;
  absl::Status outcome;
  std::shared_ptr<Transport> mesh;  // While the data phase runs; aborted by early outcomes.
  // Its first shared-memory turn (kOpTurn), once the master gave it; part p takes turn + p.
  int64_t turn = -1;
  std::function<void()> on_data_done;  // Called when this peer's data movement ended.
};

// The transport operation a part in shared-memory turn `turn` runs as over the rings when the
// arena cannot serve it (failed earlier in the epoch): above every OperationId of a lone op.
inline uint64_t TurnRingOperation(int64_t turn) {
  return (uint64_t{1} << 39) | static_cast<uint64_t>(turn);
}

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_OP_H_
