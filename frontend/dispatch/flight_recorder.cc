#include "frontend/dispatch/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/core/deadline.h"
#include "frontend/core/logging.h"

namespace plexus {
namespace {

constexpr size_t kDefaultCapacity = 2000;

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
  std::mutex mu;
  std::vector<std::weak_ptr<FlightRecorder>> recorders;
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();  // Never destroyed: used from any thread.
  return *registry;
}

std::vector<std::shared_ptr<FlightRecorder>> LiveRecorders() {
  Registry& registry = GlobalRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
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
std::mutex g_signal_mu;
pid_t g_signal_pid = 0;  // The process the dumper thread runs in (a fork child has none).

void OnDumpSignal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void InstallSignalDumper() {
  std::lock_guard<std::mutex> lock(g_signal_mu);
  if (g_signal_pid == getpid()) return;
  struct sigaction current {};
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
  struct sigaction action {};
  action.sa_handler = OnDumpSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
}

}  // namespace

std::shared_ptr<FlightRecorder> FlightRecorder::Create(Group group) {
  size_t capacity = kDefaultCapacity;
  if (const char* env = std::getenv("PLEXUS_FLIGHT_RECORDER"); env != nullptr && *env != '\0') {
    if (!absl::SimpleAtoi(env, &capacity)) {
      Log(LogLevel::kWarning, absl::StrCat("PLEXUS_FLIGHT_RECORDER='", env,
                                           "' is not a number of entries; using ",
                                           kDefaultCapacity));
      capacity = kDefaultCapacity;
    }
  }
  if (capacity == 0) return nullptr;
  auto recorder = std::make_shared<FlightRecorder>(std::move(group), capacity);
  {
    Registry& registry = GlobalRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.recorders.push_back(recorder);
  }
  InstallSignalDumper();
  return recorder;
}

FlightRecorder::FlightRecorder(Group group, size_t capacity)
    : group_(std::move(group)), entries_(capacity) {}

FlightRecorder::~FlightRecorder() = default;

uint64_t FlightRecorder::Record(const Operation& operation, bool point_to_point) {
  const absl::Time now = CoarseNow();  // Read by people, to the millisecond.
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t handle = next_handle_++;
  Entry& entry = entries_[handle % entries_.size()];
  entry.handle = handle;
  entry.point_to_point = point_to_point;
  entry.sequence = point_to_point ? next_point_to_point_++ : next_collective_++;
  entry.operation = operation;
  entry.state = State::kIssued;
  entry.issued = now;
  entry.finished = absl::InfinitePast();
  entry.error.clear();
  return handle;
}

void FlightRecorder::Finish(uint64_t handle, const absl::Status& status) {
  const absl::Time now = CoarseNow();
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& entry = entries_[handle % entries_.size()];
    if (entry.handle != handle) return;  // Overwritten by newer entries already.
    entry.state = status.ok() ? State::kCompleted : State::kFailed;
    entry.finished = now;
    if (!status.ok()) entry.error = status.ToString();
  }
  // status.ok() first: it is inline, absl::IsDeadlineExceeded a call into Debian's Abseil.
  if (!status.ok() && absl::IsDeadlineExceeded(status) && !dumped_on_timeout_.exchange(true)) {
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
  std::lock_guard<std::mutex> lock(mu_);
  const size_t capacity = entries_.size();
  const uint64_t first = next_handle_ > capacity ? next_handle_ - capacity : 1;
  bool comma = false;
  for (uint64_t handle = first; handle < next_handle_; ++handle) {
    const Entry& entry = entries_[handle % capacity];
    if (entry.handle != handle) continue;
    const Operation& op = entry.operation;
    const std::string finished = entry.state == State::kIssued
                                     ? std::string("null")
                                     : absl::StrCat(absl::ToUnixMicros(entry.finished));
    absl::StrAppend(&out, comma ? ",\n  " : "\n  ", "{\"sequence\": ", entry.sequence,
                    ", \"kind\": \"", entry.point_to_point ? "p2p" : "collective",
                    "\", \"op\": ", Quote(op.op), ", \"dtype\": ", Quote(DTypeName(op.dtype)),
                    ", \"count\": ", op.count, ", \"root\": ", op.root, ", \"peer\": ", op.peer,
                    ", \"reduce_op\": ", Quote(op.reduce_op),
                    ", \"timeout_s\": ", absl::ToDoubleSeconds(op.timeout),
                    ", \"state\": \"", StateName(entry.state),
                    "\", \"issued_unix_us\": ", absl::ToUnixMicros(entry.issued),
                    ", \"finished_unix_us\": ", finished, ", \"error\": ", Quote(entry.error), "}");
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
      "{\"format\": \"plexus-flight-recorder-1\", \"pid\": ", getpid(), ", \"host\": ",
      Quote(host), ", \"global_rank\": ", GlobalRank(recorders),
      ", \"dumped_unix_us\": ", absl::ToUnixMicros(absl::Now()), ", \"reason\": ", Quote(reason),
      ", \"groups\": [");
  for (size_t i = 0; i < recorders.size(); ++i) {
    absl::StrAppend(&out, i > 0 ? ",\n" : "\n", recorders[i]->ToJson());
  }
  out += "]}\n";
  return out;
}

std::string DefaultFlightRecorderPath() {
  std::string dir;
  if (const char* env = std::getenv("PLEXUS_FLIGHT_RECORDER_DIR"); env != nullptr && *env) {
    dir = env;
  } else if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp) {
    dir = tmp;
  } else {
    dir = "/tmp";
  }
  return absl::StrCat(dir, "/plexus_flight_rank", GlobalRank(LiveRecorders()), "_pid", getpid(),
                      ".json");
}

absl::StatusOr<std::string> DumpFlightRecorders(const std::string& path,
                                                absl::string_view reason) {
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
