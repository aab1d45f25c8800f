#include "frontend/dispatch/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/deadline.h"
#include "base/core/environment.h"
#include "base/core/event_journal.h"
#include "base/core/logging.h"
#include "base/core/mutex.h"

namespace plexus {
namespace {

int64_t CoarseUnixNanos() {
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// The precise wall clock costs ~25 ns where the kernel serves it without a system call (a TSC
// clock source), but a microsecond where it cannot (some virtual machines): there, stamps fall
// back to the clock at the last scheduler tick (~5 ns, to the tick).
bool PreciseClockIsCheap() {
  static const bool cheap = [] {
    constexpr int kReads = 64;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kReads; ++i) (void)UnixNanos();
    const auto spent = std::chrono::steady_clock::now() - start;
    return spent < std::chrono::nanoseconds(kReads * 200);
  }();
  return cheap;
}

int64_t StampNanos() { return PreciseClockIsCheap() ? UnixNanos() : CoarseUnixNanos(); }

// This process's clock against the store server's (SetFlightRecorderClock), for every dump.
struct Clock {
  Mutex mu;
  std::optional<ClockOffset> offset ABSL_GUARDED_BY(mu);
  std::string reference ABSL_GUARDED_BY(mu);
};

Clock& GlobalClock() {
  static Clock* clock = new Clock();  // Never destroyed: read by dumps from any thread.
  return *clock;
}

std::string Quote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

const char* StateName(FlightRecorder::State state) {
  switch (state) {
    case FlightRecorder::State::kIssued:
      return "issued";
    case FlightRecorder::State::kCompleted:
      return "completed";
    case FlightRecorder::State::kFailed:
      return "failed";
  }
  return "unknown";
}

// Every live recorder of the process, for dumps that cover all groups.
struct Registry {
  Mutex mu;
  std::vector<std::weak_ptr<FlightRecorder>> recorders ABSL_GUARDED_BY(mu);
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();  // Never destroyed: used from any thread.
  return *registry;
}

std::vector<std::shared_ptr<FlightRecorder>> LiveRecorders() {
  Registry& registry = GlobalRegistry();
  MutexLock lock(registry.mu);
  std::vector<std::shared_ptr<FlightRecorder>> live;
  std::vector<std::weak_ptr<FlightRecorder>> kept;
  for (const auto& weak : registry.recorders) {
    if (auto recorder = weak.lock()) {
      live.push_back(recorder);
      kept.push_back(weak);
    }
  }
  registry.recorders.swap(kept);
  return live;
}

int GlobalRank(const std::vector<std::shared_ptr<FlightRecorder>>& recorders) {
  for (const auto& recorder : recorders) {
    const FlightRecorder::Group& group = recorder->group();
    if (group.rank >= 0 && group.rank < static_cast<int>(group.global_ranks.size())) {
      return group.global_ranks[group.rank];
    }
  }
  int rank = -1;
  const char* env = std::getenv("RANK");
  if (env == nullptr || !absl::SimpleAtoi(env, &rank)) rank = -1;
  return rank;
}

// SIGUSR1: the handler only writes a byte to a pipe; a thread does the dump.
int g_signal_pipe[2] = {-1, -1};
Mutex g_signal_mu;
// The process the dumper thread runs in (a fork child has none).
pid_t g_signal_pid ABSL_GUARDED_BY(g_signal_mu) = 0;

void OnDumpSignal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void InstallSignalDumper() {
  MutexLock lock(g_signal_mu);
  if (g_signal_pid == getpid()) return;
  struct sigaction current = {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
  const bool ours = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == OnDumpSignal;
  if (!ours && current.sa_handler != SIG_DFL) return;  // Someone else's: leave it.
  if (g_signal_pipe[0] >= 0) {  // Inherited across fork: the thread reading it stayed behind.
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
  }
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  const int flags = fcntl(g_signal_pipe[0], F_GETFL);
  fcntl(g_signal_pipe[0], F_SETFL, flags & ~O_NONBLOCK);  // The thread blocks; the handler not.
  g_signal_pid = getpid();
  std::thread([fd = g_signal_pipe[0]] {
    char byte;
    while (read(fd, &byte, 1) == 1) {
      absl::StatusOr<std::string> path = DumpFlightRecorders("", "SIGUSR1");
      Log(path.ok() ? LogLevel::kWarning : LogLevel::kError,
          path.ok() ? absl::StrCat("flight recorder dumped to ", *path, " (SIGUSR1)")
                    : absl::StrCat("flight recorder dump failed: ", path.status().message()));
    }
  }).detach();
  struct sigaction action = {};
  action.sa_handler = OnDumpSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
}

}  // namespace

std::shared_ptr<FlightRecorder> FlightRecorder::Create(Group group) {
  const int64_t entries = EnvironmentIntegerOrDefault("PLEXUS_FLIGHT_RECORDER");
  if (entries <= 0) return nullptr;
  const size_t capacity = static_cast<size_t>(entries);
  auto recorder = std::make_shared<FlightRecorder>(std::move(group), capacity);
  {
    Registry& registry = GlobalRegistry();
    MutexLock lock(registry.mu);
    registry.recorders.push_back(recorder);
  }
  InstallSignalDumper();
  return recorder;
}

FlightRecorder::FlightRecorder(Group group, size_t capacity)
    : group_(std::move(group)),
      capacity_(std::max<size_t>(capacity, 1)),
      entries_(new Entry[capacity_]) {}

FlightRecorder::~FlightRecorder() = default;

uint64_t FlightRecorder::Record(const Operation& operation, bool point_to_point) {
  const uint64_t handle = next_handle_.fetch_add(1, std::memory_order_relaxed);
  std::atomic<uint64_t>& numbering = point_to_point ? next_point_to_point_ : next_collective_;
  Entry& entry = entries_[handle % capacity_];
  constexpr auto kRelaxed = std::memory_order_relaxed;
  // A seqlock's writer: the cleared stamp is ordered before the new fields.
  entry.stamp.store(0, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  entry.sequence.store(numbering.fetch_add(1, kRelaxed), kRelaxed);
  entry.point_to_point.store(point_to_point, kRelaxed);
  entry.op.store(operation.op.data(), kRelaxed);
  entry.op_size.store(operation.op.size(), kRelaxed);
  entry.dtype.store(operation.dtype, kRelaxed);
  entry.count.store(operation.count, kRelaxed);
  entry.root.store(operation.root, kRelaxed);
  entry.peer.store(operation.peer, kRelaxed);
  entry.reduce_op.store(operation.reduce_op.data(), kRelaxed);
  entry.reduce_op_size.store(operation.reduce_op.size(), kRelaxed);
  entry.timeout_ns.store(absl::ToInt64Nanoseconds(operation.timeout), kRelaxed);
  entry.issued_ns.store(StampNanos(), kRelaxed);
  entry.stamp.store(Stamp(handle, State::kIssued), std::memory_order_release);
  return handle;
}

void FlightRecorder::Finish(uint64_t handle, const absl::Status& status) {
  Entry& entry = entries_[handle % capacity_];
  const State state = status.ok() ? State::kCompleted : State::kFailed;
  uint64_t issued = Stamp(handle, State::kIssued);
  if (entry.stamp.load(std::memory_order_relaxed) != issued) return;  // Overwritten already.
  if (!status.ok()) {
    MutexLock lock(mu_);
    errors_.emplace(handle, status.ToString());
    // Kept for twice the ring: a dump that just read this entry may still ask for it.
    const uint64_t next = next_handle_.load(std::memory_order_relaxed);
    const uint64_t oldest = next > 2 * capacity_ ? next - 2 * capacity_ : 0;
    while (!errors_.empty() && errors_.begin()->first < oldest) errors_.erase(errors_.begin());
  }
  entry.finished_ns.store(StampNanos(), std::memory_order_relaxed);
  // Fails, changing nothing, if the entry was overwritten meanwhile.
  entry.stamp.compare_exchange_strong(issued, Stamp(handle, state), std::memory_order_release,
                                      std::memory_order_relaxed);
  // status.ok() first: it is inline, absl::IsDeadlineExceeded a call into Debian's Abseil.
  if (!status.ok() && absl::IsDeadlineExceeded(status) && !dumped_on_timeout_.exchange(true)) {
    NoteEvent("timeout",
              absl::StrCat("group '", group_.name, "' rank ", group_.rank, ": ", status.message()));
    absl::StatusOr<std::string> path =
        DumpFlightRecorders("", absl::StrCat("timeout in group ", group_.name));
    Log(LogLevel::kWarning,
        path.ok() ? absl::StrCat("an operation of group '", group_.name,
                                 "' timed out; flight recorder dumped to ", *path,
                                 " (merge every rank's with tools/hang_report)")
                  : absl::StrCat("flight recorder dump failed: ", path.status().message()));
  }
}

std::string FlightRecorder::ToJson() const {
  std::string out = absl::StrCat("{\"name\": ", Quote(group_.name), ", \"rank\": ", group_.rank,
                                 ", \"size\": ", group_.size, ", \"global_ranks\": [",
                                 absl::StrJoin(group_.global_ranks, ", "),
                                 "], \"backend\": ", Quote(group_.backend), ", \"entries\": [");
  constexpr auto kRelaxed = std::memory_order_relaxed;
  const uint64_t next = next_handle_.load(std::memory_order_acquire);
  const uint64_t first = next > capacity_ ? next - capacity_ : 1;
  bool comma = false;
  for (uint64_t handle = first; handle < next; ++handle) {
    const Entry& entry = entries_[handle % capacity_];
    // A seqlock's reader: the fields count only if the handle was the same before and after.
    const uint64_t before = entry.stamp.load(std::memory_order_acquire);
    if (before >> 2 != handle) continue;
    const uint64_t sequence = entry.sequence.load(kRelaxed);
    const bool point_to_point = entry.point_to_point.load(kRelaxed);
    const absl::string_view op(entry.op.load(kRelaxed), entry.op_size.load(kRelaxed));
    const DType dtype = entry.dtype.load(kRelaxed);
    const int64_t count = entry.count.load(kRelaxed);
    const int root = entry.root.load(kRelaxed);
    const int peer = entry.peer.load(kRelaxed);
    const absl::string_view reduce_op(entry.reduce_op.load(kRelaxed),
                                      entry.reduce_op_size.load(kRelaxed));
    const int64_t timeout_ns = entry.timeout_ns.load(kRelaxed);
    const int64_t issued_ns = entry.issued_ns.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = entry.stamp.load(std::memory_order_acquire);  // The latest state.
    const int64_t finished_ns = entry.finished_ns.load(kRelaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const auto state = static_cast<State>(after & 3);
    std::string error;
    if (state == State::kFailed) {
      MutexLock lock(mu_);
      if (auto it = errors_.find(handle); it != errors_.end()) error = it->second;
    }
    // Still this operation's entry (so its error, kept longer than the entry, was still there).
    if (after >> 2 != handle || entry.stamp.load(std::memory_order_acquire) >> 2 != handle) {
      continue;
    }
    const std::string finished =
        state == State::kIssued ? std::string("null") : absl::StrCat(finished_ns / 1000);
    absl::StrAppend(&out, comma ? ",\n  " : "\n  ", "{\"sequence\": ", sequence, ", \"kind\": \"",
                    point_to_point ? "p2p" : "collective", "\", \"op\": ", Quote(op),
                    ", \"dtype\": ", Quote(DTypeName(dtype)), ", \"count\": ", count,
                    ", \"root\": ", root, ", \"peer\": ", peer,
                    ", \"reduce_op\": ", Quote(reduce_op),
                    ", \"timeout_s\": ", static_cast<double>(timeout_ns) / 1e9, ", \"state\": \"",
                    StateName(state), "\", \"issued_unix_us\": ", issued_ns / 1000,
                    ", \"finished_unix_us\": ", finished, ", \"error\": ", Quote(error), "}");
    comma = true;
  }
  out += "]}";
  return out;
}

std::string FlightRecordersJson(absl::string_view reason) {
  std::vector<std::shared_ptr<FlightRecorder>> recorders = LiveRecorders();
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string out = absl::StrCat(
      "{\"format\": \"plexus-flight-recorder-1\", \"pid\": ", getpid(), ", \"host\": ", Quote(host),
      ", \"global_rank\": ", GlobalRank(recorders), ", \"dumped_unix_us\": ", UnixNanos() / 1000,
      ", \"reason\": ", Quote(reason), ", \"clock\": ");
  {
    Clock& clock = GlobalClock();
    MutexLock lock(clock.mu);
    if (clock.offset.has_value()) {
      absl::StrAppend(&out, "{\"offset_us\": ", clock.offset->offset_ns / 1000,
                      ", \"error_us\": ", (clock.offset->error_ns + 999) / 1000,
                      ", \"reference\": ", Quote(clock.reference), "}");
    } else {
      out += "null";
    }
  }
  out += ", \"events\": [";
  const std::vector<JournalEvent> events = JournalEvents();
  for (size_t i = 0; i < events.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ",\n  " : "\n  ", "{\"unix_us\": ", events[i].unix_ns / 1000,
                    ", \"kind\": ", Quote(events[i].kind),
                    ", \"detail\": ", Quote(events[i].detail), "}");
  }
  out += "], \"groups\": [";
  for (size_t i = 0; i < recorders.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ",\n" : "\n", recorders[i]->ToJson());
  }
  out += "]}\n";
  return out;
}

void SetFlightRecorderClock(const ClockOffset& offset, absl::string_view reference) {
  Clock& clock = GlobalClock();
  MutexLock lock(clock.mu);
  clock.offset = offset;
  clock.reference = std::string(reference);
}

std::string DefaultFlightRecorderPath() {
  std::string dir;
  if (const char* env = ReadEnvironment("PLEXUS_FLIGHT_RECORDER_DIR"); env != nullptr && *env) {
    dir = env;
  } else if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp) {
    dir = tmp;
  } else {
    dir = "/tmp";
  }
  return absl::StrCat(dir, "/plexus_flight_rank", GlobalRank(LiveRecorders()), "_pid", getpid(),
                      ".json");
}

absl::StatusOr<std::string> DumpFlightRecorders(const std::string& path, absl::string_view reason) {
  const std::string target = path.empty() ? DefaultFlightRecorderPath() : path;
  const std::string json = FlightRecordersJson(reason);
  // Written whole under a temporary name, then renamed: a reader never sees half a dump.
  const std::string partial = absl::StrCat(target, ".partial");
  FILE* file = std::fopen(partial.c_str(), "w");
  if (file == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot write ", partial, ": ", strerror(errno)));
  }
  const bool written = std::fwrite(json.data(), 1, json.size(), file) == json.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed || std::rename(partial.c_str(), target.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", target, ": ", strerror(errno)));
  }
  return target;
}

}  // namespace plexus
