// FlightRecorder: the last N operations of one process group (sequence, op, dtype, count,
// root or peer, state, timestamps, error), so that a hang can be explained after the fact:
// which rank is behind, in which collective. Every ProcessGroup keeps one (PLEXUS_FLIGHT_RECORDER
// entries, default 2000; 0 turns it off).
//
// Times are the wall clock, to the microsecond where it is cheap to read. Dumps are JSON (one
// document per process, every live group in it, with the process's clock offset and its
// journal of rare events), written to
// PLEXUS_FLIGHT_RECORDER_DIR (default $TMPDIR, else /tmp) as plexus_flight_rank<R>_pid<P>.json:
// when an operation times out (once per group), on SIGUSR1 (installed only where SIGUSR1 still
// has its default action), and on request (DumpFlightRecorders). tools/hang_report merges the
// dumps of all ranks. Thread-safe.
#ifndef PLEXUS_FRONTEND_DISPATCH_FLIGHT_RECORDER_H_
#define PLEXUS_FRONTEND_DISPATCH_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/core/dtype.h"
#include "base/core/mutex.h"
#include "base/store/clock_offset.h"
#include "base/work/work.h"

namespace plexus {

class FlightRecorder : public Work::Listener {
 public:
  struct Group {
    std::string name;  // "world", "world.1", ...
    int rank = 0;      // In the group.
    int size = 1;
    std::vector<int> global_ranks;
    std::string backend;
  };

  // What is recorded when an operation is issued.
  struct Operation {
    // Names refer to static strings (recording copies no text).
    absl::string_view op;  // "all_reduce", "send", ...
    DType dtype = DType::kFloat32;
    int64_t count = 0;            // Elements this rank contributes (or sends/receives).
    int root = -1;                // Root group rank, or -1.
    int peer = -1;                // Point-to-point: the other group rank (-1: any source).
    absl::string_view reduce_op;  // "SUM", ... or empty.
    absl::Duration timeout;
  };

  enum class State { kIssued, kCompleted, kFailed };

  // Null when PLEXUS_FLIGHT_RECORDER is 0. Registers the recorder for process-wide dumps.
  static std::shared_ptr<FlightRecorder> Create(Group group);
  FlightRecorder(Group group, size_t capacity);
  ~FlightRecorder() override;

  // Records an issued operation; returns its handle for Finish. Collectives and
  // point-to-point operations are numbered separately, in issue order (as ranks match them).
  uint64_t Record(const Operation& operation, bool point_to_point);
  // Marks the operation done. A DeadlineExceeded status dumps every recorder (once per group).
  void Finish(uint64_t handle, const absl::Status& status);
  // Finish(handle, status), for Works the recorder listens to (Work::Listen(recorder, handle)).
  void WorkCompleted(uint64_t handle, const absl::Status& status) override {
    Finish(handle, status);
  }

  // This group's entries, oldest first, as a JSON object.
  std::string ToJson() const;
  const Group& group() const { return group_; }

 private:
  // Written without a lock (Record and Finish cost a few plain stores and three atomic
  // read-modify-writes per operation): every field is an atomic, and `stamp` (handle and state)
  // is cleared while Record rewrites the fields, so ToJson skips an entry that changed under it.
  // One writer per entry at a time: only more threads recording at once than the ring has
  // entries could mix two operations in one.
  struct Entry {
    std::atomic<uint64_t> stamp{0};  // handle << 2 | state; 0 while empty or being rewritten.
    std::atomic<uint64_t> sequence{0};
    std::atomic<bool> point_to_point{false};
    std::atomic<const char*> op{nullptr};
    std::atomic<size_t> op_size{0};
    std::atomic<DType> dtype{DType::kFloat32};
    std::atomic<int64_t> count{0};
    std::atomic<int> root{-1};
    std::atomic<int> peer{-1};
    std::atomic<const char*> reduce_op{nullptr};
    std::atomic<size_t> reduce_op_size{0};
    std::atomic<int64_t> timeout_ns{0};
    std::atomic<int64_t> issued_ns{0};  // Unix time.
    std::atomic<int64_t> finished_ns{0};
  };

  static uint64_t Stamp(uint64_t handle, State state) {
    return handle << 2 | static_cast<uint64_t>(state);
  }

  const Group group_;
  const size_t capacity_;
  const std::unique_ptr<Entry[]> entries_;  // A ring: handle % capacity.
  std::atomic<uint64_t> next_handle_{1};
  std::atomic<uint64_t> next_collective_{0};
  std::atomic<uint64_t> next_point_to_point_{0};
  std::atomic<bool> dumped_on_timeout_{false};
  mutable Mutex mu_;
  // Failed operations' errors by handle (the latest `capacity_` handles' only).
  std::map<uint64_t, std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// Every dump from now on says that this process's clock is `offset` from `reference`'s (a store
// server); tools/hang_report --timeline subtracts it. init_process_group sets it.
void SetFlightRecorderClock(const ClockOffset& offset, absl::string_view reference);
// One JSON document with every live recorder of this process, the clock offset and the event
// journal (base/core/event_journal.h); `reason` is recorded in it.
std::string FlightRecordersJson(absl::string_view reason = "requested");
// Writes FlightRecordersJson() to `path`, or to the default file when empty (whole, through a
// rename); returns the path.
absl::StatusOr<std::string> DumpFlightRecorders(const std::string& path = "",
                                                absl::string_view reason = "requested");
// The default dump file of this process.
std::string DefaultFlightRecorderPath();

}  // namespace plexus

#endif  // PLEXUS_FRONTEND_DISPATCH_FLIGHT_RECORDER_H_
