// Churn soak of the elastic communicator, in PCCL's style: up to --max-peers peer processes
// train together (a topology check, sync_shared_state, a batch of
// all_reduce_multiple_with_retry, a cross-peer agreement check, revision + 1) while this
// supervisor spawns or SIGKILLs one of them every 0.5-2 s. Each peer checks the topology in
// one of the loop shapes users write, drawn at random: PCCL's (update_topology from its second
// iteration on: a newcomer enters with sync_shared_state), plexus's (update_topology when
// are_peers_pending), or either with 0-3 extra topology calls per step (peers' call counts differ).
// It fails on any wrong or diverged result a peer sees, on a peer failing, or on 30 s without a
// completed step anywhere.
//
//   bazel run //tools:elastic_soak -- --minutes=30 [--max-peers=8] [--seed=1]
//
// Prints one summary line; exit status 0 only without failures. The supervisor stays
// single-threaded (it forks the master and every peer).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_node.h"

namespace plexus::elastic {
namespace {

constexpr int kTensors = 4;
constexpr int64_t kElements = 1 << 15;
constexpr absl::Duration kStallLimit = absl::Seconds(30);

// Exit codes of a peer process.
constexpr int kPeerWrong = 2;  // A wrong or diverged result: the soak fails.

[[noreturn]] void PeerFail(int64_t id, const std::string& what) {
  fprintf(stderr, "elastic_soak: peer %lld: %s\n", static_cast<long long>(id), what.c_str());
  _exit(kPeerWrong);
}

bool Retryable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kAborted ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

enum class LoopShape { kPccl, kPlexus, kExtraCalls };

// The topology check at the top of iteration `iteration` in `shape`.
absl::Status CheckTopology(Communicator& comm, LoopShape shape, int64_t iteration,
                           std::mt19937_64& random) {
  if (shape == LoopShape::kPccl) return iteration > 0 ? comm.UpdateTopology() : absl::OkStatus();
  if (shape == LoopShape::kExtraCalls) {
    for (int extra = std::uniform_int_distribution<int>(0, 3)(random); extra > 0; --extra) {
      absl::Status status = random() % 2 ? comm.UpdateTopology() : comm.ArePeersPending().status();
      if (!status.ok()) return status;
    }
  }
  auto pending = comm.ArePeersPending();
  if (!pending.ok()) return pending.status();
  return *pending ? comm.UpdateTopology() : absl::OkStatus();
}

// A peer's communicator, connected to the master on `port` (the peer fails otherwise).
std::unique_ptr<Communicator> ConnectPeer(int port) {
  CommunicatorOptions options;
  options.master_address = absl::StrCat("127.0.0.1:", port);
  options.operation_timeout = absl::Seconds(20);
  options.accept_timeout = absl::Seconds(60);
  auto made = Communicator::Create(options);
  if (!made.ok()) PeerFail(0, made.status().ToString());
  std::unique_ptr<Communicator> comm = std::move(made).value();
  if (absl::Status s = comm->Connect(); !s.ok()) PeerFail(0, "connect: " + s.ToString());
  return comm;
}

// A step's all-reduces: every gradient (filled with ones, summed), then the agreement check:
// MAX of (revision, -revision) is (revision, -revision) only if all agree.
std::vector<ReduceOpDescriptor> StepOps(std::vector<std::vector<float>>& grads, double* agree) {
  std::vector<ReduceOpDescriptor> ops(kTensors + 1);
  for (int t = 0; t < kTensors; ++t) {
    std::fill(grads[t].begin(), grads[t].end(), 1.0f);
    ops[t].send = ops[t].recv = grads[t].data();
    ops[t].descriptor.count = kElements;
    ops[t].descriptor.tag = static_cast<uint64_t>(t);
  }
  ops[kTensors].send = ops[kTensors].recv = agree;
  ops[kTensors].descriptor.count = 2;
  ops[kTensors].descriptor.dtype = DType::kFloat64;
  ops[kTensors].descriptor.op = ReduceOpKind::kMax;
  ops[kTensors].descriptor.tag = kTensors;
  return ops;
}

// Every gradient sums to the number of peers, and every peer is at `revision`.
void CheckStep(int64_t id, const std::vector<std::vector<float>>& grads, float world,
               const double* agree, uint64_t revision) {
  for (int t = 0; t < kTensors; ++t) {
    for (float g : grads[t]) {
      if (g != world) PeerFail(id, absl::StrCat("gradient ", g, " over ", world, " peers"));
    }
  }
  if (agree[0] != static_cast<double>(revision) || agree[1] != -agree[0]) {
    PeerFail(id, absl::StrCat("peers disagree on the revision: ", agree[0], " / ", -agree[1],
                              " here ", revision));
  }
}

// One peer: trains until killed. A founder's state is the authority; a joiner receives first.
[[noreturn]] void PeerMain(int port, bool founder, LoopShape shape, uint64_t seed, int report_fd) {
  std::mt19937_64 random(seed);
  std::unique_ptr<Communicator> comm = ConnectPeer(port);
  const int64_t id = comm->peer_id();
  std::vector<float> weights(kElements, 0.0f);
  SharedState state;
  state.tensors = {{"weights", weights.data(), kElements, DType::kFloat32, false}};
  std::vector<std::vector<float>> grads(kTensors, std::vector<float>(kElements));
  bool holds_state = founder;
  for (int64_t iteration = 0;; ++iteration) {
    if (absl::Status s = CheckTopology(*comm, shape, iteration, random); !s.ok()) {
      if (Retryable(s)) continue;
      PeerFail(id, "topology check: " + s.ToString());
    }
    auto synced = comm->SyncSharedState(
        state, holds_state ? SyncStrategy::kEnforcePopular : SyncStrategy::kReceiveOnly);
    if (!synced.ok()) {
      if (Retryable(synced.status())) continue;
      PeerFail(id, "sync_shared_state: " + synced.status().ToString());
    }
    holds_state = true;
    const float want = static_cast<float>(state.revision);
    for (float w : weights) {
      if (w != want) PeerFail(id, absl::StrCat("weights ", w, " at revision ", state.revision));
    }
    double agree[2] = {static_cast<double>(state.revision), -static_cast<double>(state.revision)};
    auto reduced = comm->AllReduceMultipleWithRetry(StepOps(grads, agree), 2);
    if (!reduced.ok()) {
      if (Retryable(reduced.status())) continue;
      PeerFail(id, "all_reduce_multiple_with_retry: " + reduced.status().ToString());
    }
    const float world = static_cast<float>(reduced->local_world_size);
    CheckStep(id, grads, world, agree, state.revision);
    for (float& w : weights) w += grads[0][0] / world;  // + 1: the state follows the revision.
    state.revision += 1;
    const std::string line =
        absl::StrCat("step ", getpid(), " ", state.revision, " ", reduced->local_world_size, "\n");
    if (write(report_fd, line.data(), line.size()) < 0) _exit(0);  // Supervisor gone.
  }
}

struct Options {
  double minutes = 2;
  int max_peers = 8;
  uint64_t seed = 1;
};

// The master node in a process of its own; its pid, and the port it listens on (0 when it
// did not start).
std::pair<pid_t, int> StartMaster() {
  int port_pipe[2];
  if (pipe(port_pipe) != 0) return {-1, 0};
  fflush(stdout);
  const pid_t master_pid = fork();
  if (master_pid == 0) {
    MasterNodeOptions master_options;
    master_options.listen_address = "127.0.0.1:0";
    master_options.heartbeat_timeout = absl::Seconds(3);
    auto master = MasterNode::Create(master_options);
    if (!master.ok() || !(*master)->Run().ok()) _exit(1);
    const int port = (*master)->port();
    [[maybe_unused]] ssize_t n = write(port_pipe[1], &port, sizeof(port));
    (void)(*master)->AwaitTermination();
    _exit(0);
  }
  int port = 0;
  if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port)) port = 0;
  return {master_pid, port};
}

// The peers' supervisor: spawns and SIGKILLs peers and reads the steps they report.
class Supervisor {
 public:
  Supervisor(const Options& options, int port, int report_read, int report_write)
      : options_(options),
        port_(port),
        report_read_(report_read),
        report_write_(report_write),
        random_(options.seed) {}

  void Spawn(bool founder) {
    fflush(stdout);
    const pid_t pid = fork();
    const LoopShape shape = static_cast<LoopShape>(random_() % 3);
    const uint64_t seed = random_();
    if (pid == 0) {
      close(report_read_);
      PeerMain(port_, founder, shape, seed, report_write_);
    }
    peers_[pid] = false;
    ++spawned_;
  }

  // Reads the step reports that arrive within `wait_ms`.
  void ReadReports(int wait_ms) {
    pollfd pfd{report_read_, POLLIN, 0};
    if (poll(&pfd, 1, wait_ms) <= 0) return;
    char buffer[4096];
    const ssize_t n = read(report_read_, buffer, sizeof(buffer));
    if (n > 0) pending_text_.append(buffer, n);
    size_t eol;
    while ((eol = pending_text_.find('\n')) != std::string::npos) {
      long long pid = 0, revision = 0, world = 0;
      if (sscanf(pending_text_.c_str(), "step %lld %lld %lld", &pid, &revision, &world) == 3) {
        ++steps_;
        top_revision_ = std::max<int64_t>(top_revision_, revision);
        largest_ = std::max<int>(largest_, static_cast<int>(world));
        last_step_ = absl::Now();
        auto peer = peers_.find(static_cast<pid_t>(pid));
        if (peer != peers_.end()) peer->second = true;  // It holds the state now.
      }
      pending_text_.erase(0, eol + 1);
    }
  }

  // Why the soak failed, or "": a process that ended by itself (only this supervisor kills
  // peers, so any end is a failure), or no step for kStallLimit.
  std::string Failure(pid_t master_pid) {
    std::string failure;
    int status = 0;
    pid_t done;
    while ((done = waitpid(-1, &status, WNOHANG)) > 0) {
      if (done == master_pid) {
        failure = "the master exited";
      } else if (peers_.erase(done)) {
        const std::string how = WIFEXITED(status) ? absl::StrCat("exit ", WEXITSTATUS(status))
                                                  : absl::StrCat("signal ", WTERMSIG(status));
        failure = absl::StrCat("peer process ", done, " ended by itself (", how, ")");
      }
    }
    if (failure.empty() && absl::Now() - last_step_ > kStallLimit) {
      failure = absl::StrCat("no step completed for ", absl::FormatDuration(kStallLimit), " with ",
                             peers_.size(), " peers");
    }
    return failure;
  }

  // One membership change: a new peer, or a SIGKILL for one that holds the state (never the
  // last such). Returns when the next change is due.
  absl::Time Change() {
    const absl::Time next =
        absl::Now() + absl::Milliseconds(std::uniform_int_distribution<int>(500, 2000)(random_));
    const int n = static_cast<int>(peers_.size());
    const bool kill_one = n >= options_.max_peers ||
                          (n >= 2 && std::uniform_int_distribution<int>(0, 1)(random_) == 0);
    std::vector<pid_t> holders;
    for (const auto& [pid, holds] : peers_) {
      if (holds) holders.push_back(pid);
    }
    if (!kill_one || holders.size() < 2) {
      if (n < options_.max_peers) Spawn(/*founder=*/false);
    } else {
      const pid_t victim =
          holders[std::uniform_int_distribution<size_t>(0, holders.size() - 1)(random_)];
      kill(victim, SIGKILL);
      waitpid(victim, nullptr, 0);
      peers_.erase(victim);
      ++killed_;
    }
    return next;
  }

  void KillAll() {
    for (const auto& [pid, holds] : peers_) kill(pid, SIGKILL);
    for (const auto& [pid, holds] : peers_) waitpid(pid, nullptr, 0);
  }

  int64_t steps() const { return steps_; }

  void PrintSummary(double seconds, const std::string& failure) const {
    printf(
        "elastic_soak: %s after %.0f s: %lld steps (revision %lld), %d peers spawned, %d "
        "SIGKILLed, largest group %d%s%s\n",
        failure.empty() ? "PASSED" : "FAILED", seconds, static_cast<long long>(steps_),
        static_cast<long long>(top_revision_), spawned_, killed_, largest_,
        failure.empty() ? "" : ": ", failure.c_str());
    fflush(stdout);
  }

 private:
  const Options options_;
  const int port_;
  const int report_read_;
  const int report_write_;
  std::mt19937_64 random_;
  std::map<pid_t, bool> peers_;  // pid -> has completed a step (holds the state).
  std::string pending_text_;
  int spawned_ = 0, killed_ = 0, largest_ = 0;
  int64_t steps_ = 0, top_revision_ = 0;
  absl::Time last_step_ = absl::Now();  // The soak starts as the supervisor is made.
};

int Soak(const Options& options) {
  int report[2];
  if (pipe(report) != 0) return 1;
  const auto [master_pid, port] = StartMaster();
  if (port == 0) {
    fprintf(stderr, "elastic_soak: the master did not start\n");
    return 1;
  }
  Supervisor supervisor(options, port, report[0], report[1]);
  supervisor.Spawn(/*founder=*/true);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(options.minutes * 60);
  absl::Time next_change = start + absl::Seconds(1);
  std::string failure;
  while (absl::Now() < end && failure.empty()) {
    const int64_t until_change = absl::ToInt64Milliseconds(next_change - absl::Now());
    supervisor.ReadReports(static_cast<int>(std::clamp<int64_t>(until_change, 1, 200)));
    failure = supervisor.Failure(master_pid);
    if (failure.empty() && absl::Now() >= next_change) next_change = supervisor.Change();
  }
  supervisor.KillAll();
  kill(master_pid, SIGKILL);
  waitpid(master_pid, nullptr, 0);
  supervisor.PrintSummary(absl::ToDoubleSeconds(absl::Now() - start), failure);
  return failure.empty() && supervisor.steps() > 0 ? 0 : 1;
}

}  // namespace
}  // namespace plexus::elastic

int main(int argc, char** argv) {
  // Lost connections are the point of the soak: keep their warnings out unless asked for.
  setenv("PLEXUS_LOG_LEVEL", "error", /*overwrite=*/0);
  plexus::elastic::Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (name == "--minutes") {
      ok = ok && absl::SimpleAtod(value, &options.minutes) && options.minutes > 0;
    } else if (name == "--max-peers") {
      ok = ok && absl::SimpleAtoi(value, &options.max_peers) && options.max_peers >= 2;
    } else if (name == "--seed") {
      ok = ok && absl::SimpleAtoi(value, &options.seed);
    } else {
      ok = false;
    }
    if (!ok) {
      fprintf(stderr, "usage: elastic_soak [--minutes=M] [--max-peers=N>=2] [--seed=S]\n");
      return 2;
    }
  }
  return plexus::elastic::Soak(options);
}
